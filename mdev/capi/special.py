"""Hand-written adapters: the C functions whose prototype alone does not say how to call mdev.

    strings returned to C      aclGetRecentErrMsg, aclrtGetSocName (buffers kept alive)
    C callbacks                aclrtLaunchCallback, aclrtLaunchHostFunc, exception callbacks
    structures                 aclrtIpcEventHandle, aclrtRandomNumTaskInfo, aclrtPhysicalMemProp, ...
    strings and arrays out/in  export keys, PID lists, function names
    plain values               last errors, float16 conversions, versions, exception-info fields

Each adapter is made by ``factory(fn, impl)`` (``fn`` the prototype, ``impl`` the runtime
implementation the naming rule found, or None) and takes the arguments as libmdev_embed.so
passes them (ints, bytes); it returns the C return value, or ``(values..., ret)`` with one
value per output parameter of the prototype (the entry point stores them), or writes the
caller's memory itself where the prototype's outputs are not plain values (structures,
strings).
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading
from typing import Callable

from mdev import constants as C
from mdev import errors as E
from mdev.capi import cmemory
from mdev.capi.failures import null_output, unsupported
from mdev.capi.prototypes import CFunction
from mdev.runtime import boundary, devices, exceptions

ADAPTERS: dict[str, Callable[[CFunction, Callable | None], Callable]] = {}
_I32 = ctypes.c_int32


def adapts(*names: str):
    def register(factory):
        for name in names:
            ADAPTERS[name] = factory
        return factory
    return register


def string(value: bytes | None) -> str | None:
    """A ``const char*`` argument as the implementation takes it."""
    return None if value is None else os.fsdecode(value)


def bound(impl: Callable) -> Callable:
    return boundary.bind(impl, *impl.api_shape)


def needs(impl: Callable | None, fn: CFunction, make: Callable[[Callable], Callable]) -> Callable:
    """``make(bound impl)``, or the unsupported stub while the runtime lacks the function."""
    return make(bound(impl)) if impl is not None else unsupported(fn, "not emulated yet")


def outputs_then(fn: CFunction, *params: str):
    """The first NULL among the named output pointers (its error code), else None."""
    names = [p.name for p in fn.params]

    def check(args) -> int | None:
        for name in params:
            if not args[names.index(name)]:
                return null_output(fn, name)
        return None
    return check


# ---------------------------------------------------------------------------- strings for C
_messages = threading.local()
_soc: list = []          # the SoC name's buffer: the real one is static, valid for the process


@adapts("aclGetRecentErrMsg")
def _recent_err_msg(fn, impl):
    def call():
        # only the pointer of the thread's latest call stays valid, as the runtime documents
        text = boundary.recent_messages()
        _messages.buffer = None if text is None else ctypes.create_string_buffer(text.encode(errors="replace"))
        return ctypes.addressof(_messages.buffer) if _messages.buffer is not None else 0
    return call


@adapts("aclrtGetSocName")
def _soc_name(fn, impl):
    get = boundary.bind(devices.get_soc_name, 1, None)

    def call():
        if not _soc:
            name, ret = get()
            if ret != E.ACL_SUCCESS:
                return 0
            _soc.append(ctypes.create_string_buffer(name.encode()))
        return ctypes.addressof(_soc[0])
    return call


# ---------------------------------------------------------------------------- plain values
@adapts("aclrtPeekAtLastError", "aclrtGetLastError")
def _last_error(fn, impl):
    return boundary.peek_at_last_error if fn.name == "aclrtPeekAtLastError" else boundary.get_last_error


@adapts("aclFloat16ToFloat")
def _half_to_float(fn, impl):
    def call(value):
        half = struct.unpack("<e", struct.pack("<H", value & 0xFFFF))[0]
        return struct.unpack("<I", struct.pack("<f", half))[0]     # the float's bits, as C returns it
    return call


@adapts("aclFloatToFloat16")
def _float_to_half(fn, impl):
    def call(value):
        try:
            return struct.unpack("<H", struct.pack("<e", value))[0]
        except OverflowError:                                       # beyond half's range: infinity
            return 0x7C00 if value > 0 else 0xFC00
    return call


@adapts("aclrtGetVersion")
def _version(fn, impl):
    null = outputs_then(fn, "majorVersion", "minorVersion", "patchVersion")

    def call(major, minor, patch):
        failed = null((major, minor, patch))
        if failed is not None:
            return failed
        return C.ACL_MAJOR_VERSION, C.ACL_MINOR_VERSION, C.ACL_PATCH_VERSION, E.ACL_SUCCESS
    return call


_EXCEPTION_FIELDS = {
    "aclrtGetDeviceIdFromExceptionInfo": exceptions.get_device_id_from_exception_info,
    "aclrtGetStreamIdFromExceptionInfo": exceptions.get_stream_id_from_exception_info,
    "aclrtGetTaskIdFromExceptionInfo": exceptions.get_task_id_from_exception_info,
    "aclrtGetThreadIdFromExceptionInfo": exceptions.get_thread_id_from_exception_info,
    "aclrtGetErrorCodeFromExceptionInfo": exceptions.get_error_code_from_exception_info,
}


@adapts(*_EXCEPTION_FIELDS)
def _exception_field(fn, impl):
    return _EXCEPTION_FIELDS[fn.name]


# ---------------------------------------------------------------------------- C callbacks
def _c_callback(address: int):
    """``void (*)(void*)`` at ``address`` as a Python callable (None for NULL)."""
    return cmemory.c_function(address, None, ctypes.c_void_p) if address else None


@adapts("aclrtLaunchCallback")
def _launch_callback(fn, impl):
    return needs(impl, fn, lambda launch: lambda cb, user_data, block_type, stream:
                 launch(_c_callback(cb), user_data, block_type, stream))


@adapts("aclrtLaunchHostFunc")
def _launch_host_func(fn, impl):
    return needs(impl, fn, lambda launch: lambda stream, cb, args: launch(stream, _c_callback(cb), args))


@adapts("aclrtSetExceptionInfoCallback", "aclrtExceptionInfoCallbackRegister",
        "aclrtExceptionInfoCallbackUnregister")
def _exception_callback(fn, impl):
    return needs(impl, fn, lambda register: lambda cb: register(_c_callback(cb)))


# ---------------------------------------------------------------------------- IPC
@adapts("aclrtIpcGetEventHandle")
def _ipc_event_handle(fn, impl):
    def make(get):
        def call(event, handle):
            if not handle:
                return null_output(fn, "handle")
            data, ret = get(event)
            if ret == E.ACL_SUCCESS:
                cmemory.write(handle, data[:C.ACL_IPC_EVENT_HANDLE_SIZE])
            return ret
        return call
    return needs(impl, fn, make)


@adapts("aclrtIpcOpenEventHandle")
def _ipc_open_event(fn, impl):
    def make(open_):
        def call(handle: bytes, event):
            if not event:
                return null_output(fn, "event")
            return open_(handle)
        return call
    return needs(impl, fn, make)


def _key_out(fn: CFunction, get: Callable, key: int, length: int, inputs: tuple) -> int:
    """An export key written into the caller's ``char key[len]``."""
    if not key:
        return null_output(fn, "key")
    value, ret = get(*inputs)
    if ret == E.ACL_SUCCESS and not cmemory.write_text(key, length, value):
        boundary.record_error(E.ACL_ERROR_INVALID_PARAM, f"{fn.name}: len {length} is too small for the key")
        return E.ACL_ERROR_INVALID_PARAM
    return ret


@adapts("aclrtIpcMemGetExportKey")
def _ipc_mem_key(fn, impl):
    return needs(impl, fn, lambda get: lambda dev_ptr, size, key, length, flags:
                 _key_out(fn, get, key, length, (dev_ptr, size, length, flags)))


@adapts("aclrtNotifyGetExportKey")
def _notify_key(fn, impl):
    return needs(impl, fn, lambda get: lambda notify, key, length, flags:
                 _key_out(fn, get, key, length, (notify, length, flags)))


def _pids(address: int, count: int) -> list[int]:
    return cmemory.read_array(_I32, address, count) if address else []


@adapts("aclrtIpcMemSetImportPid")
def _ipc_mem_pids(fn, impl):
    return needs(impl, fn, lambda set_: lambda key, pid, num: set_(string(key), _pids(pid, num)))


@adapts("aclrtNotifySetImportPid", "aclrtMemSetPidToShareableHandle")
def _pids_of(fn, impl):
    return needs(impl, fn, lambda set_: lambda handle, pid, num: set_(handle, _pids(pid, num)))


# ---------------------------------------------------------------------------- model capture
@adapts("aclmdlRICaptureThreadExchangeMode")
def _exchange_mode(fn, impl):
    def make(exchange):
        def call(mode):
            if not mode:
                return null_output(fn, "mode")
            return exchange(cmemory.load(_I32, mode))     # in: the new mode; out: the old one
        return call
    return needs(impl, fn, make)


# ---------------------------------------------------------------------------- random numbers
class _RandomPara(ctypes.Structure):
    _fields_ = [("isAddr", ctypes.c_uint8), ("valueOrAddr", ctypes.c_uint8 * 8), ("size", ctypes.c_uint8),
                ("rsv", ctypes.c_uint8 * 6)]


class _ParamInfo(ctypes.Union):
    _fields_ = [("dropoutBitmaskInfo", _RandomPara * 1), ("uniformDisInfo", _RandomPara * 2),
                ("normalDisInfo", _RandomPara * 2)]


class _RandomNumTaskInfo(ctypes.Structure):
    _fields_ = [("dataType", ctypes.c_int32), ("funcType", ctypes.c_int32), ("paramInfo", _ParamInfo),
                ("randomParaAddr", ctypes.c_uint64), ("randomResultAddr", ctypes.c_uint64),
                ("randomCounterAddr", ctypes.c_uint64), ("randomSeed", _RandomPara), ("randomNum", _RandomPara),
                ("rsv", ctypes.c_uint8 * 8)]


_RANDOM_MEMBERS = {"dropoutBitmaskInfo": ("dropoutRation",), "uniformDisInfo": ("min", "max"),
                   "normalDisInfo": ("mean", "stddev")}


def _para(p: _RandomPara) -> dict:
    raw = bytes(p.valueOrAddr)
    return {"isAddr": p.isAddr, "valueOrAddr": int.from_bytes(raw, "little") if p.isAddr else raw, "size": p.size}


def random_task(address: int) -> dict:
    """aclrtRandomNumTaskInfo at ``address`` as the runtime's dict (mdev.runtime.systasks)."""
    info = _RandomNumTaskInfo.from_address(address)
    params = {member: {field: _para(p) for field, p in zip(fields, getattr(info.paramInfo, member))}
              for member, fields in _RANDOM_MEMBERS.items()}
    return {"dataType": info.dataType,
            "randomNumFuncParaInfo": {"funcType": info.funcType, "paramInfo": params},
            "randomParaAddr": info.randomParaAddr, "randomResultAddr": info.randomResultAddr,
            "randomCounterAddr": info.randomCounterAddr,
            "randomSeed": _para(info.randomSeed), "randomNum": _para(info.randomNum)}


@adapts("aclrtRandomNumAsync")
def _random_num(fn, impl):
    def make(submit):
        def call(task_info, stream, reserve):
            if not task_info:
                boundary.record_error(E.ACL_ERROR_INVALID_PARAM, f"{fn.name}: taskInfo is NULL")
                return E.ACL_ERROR_INVALID_PARAM
            return submit(random_task(task_info), stream, reserve)
        return call
    return needs(impl, fn, make)


# ---------------------------------------------------------------------------- VMM properties
class _MemLocation(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint32), ("type", ctypes.c_int32)]


class _PhysicalMemProp(ctypes.Structure):
    _fields_ = [("handleType", ctypes.c_int32), ("allocationType", ctypes.c_int32), ("memAttr", ctypes.c_int32),
                ("location", _MemLocation), ("reserve", ctypes.c_uint64)]


class _MemAccessDesc(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_int32), ("location", _MemLocation), ("rsv", ctypes.c_uint8 * 12)]


def _location(loc: _MemLocation) -> dict:
    return {"id": loc.id, "type": loc.type}


def mem_prop(address: int) -> dict | None:
    """aclrtPhysicalMemProp at ``address`` as the runtime's dict (None for NULL)."""
    if not address:
        return None
    p = _PhysicalMemProp.from_address(address)
    return {"handleType": p.handleType, "allocationType": p.allocationType, "memAttr": p.memAttr,
            "location": _location(p.location), "reserve": p.reserve}


def _store_prop(address: int, prop: dict) -> None:
    p = _PhysicalMemProp.from_address(address)
    p.handleType, p.allocationType, p.memAttr = prop["handleType"], prop["allocationType"], prop["memAttr"]
    p.location.id, p.location.type = prop["location"]["id"], prop["location"]["type"]
    p.reserve = prop.get("reserve", 0)


@adapts("aclrtMallocPhysical")
def _malloc_physical(fn, impl):
    def make(malloc):
        def call(handle, size, prop, flags):
            if not handle:
                return null_output(fn, "handle")
            return malloc(size, mem_prop(prop), flags)
        return call
    return needs(impl, fn, make)


@adapts("aclrtMemGetAllocationGranularity")
def _granularity(fn, impl):
    def make(get):
        def call(prop, option, granularity):
            if not granularity:
                return null_output(fn, "granularity")
            return get(mem_prop(prop), option)
        return call
    return needs(impl, fn, make)


@adapts("aclrtMemGetAllocationPropertiesFromHandle")
def _properties(fn, impl):
    def make(get):
        def call(handle, prop):
            if not prop:
                return null_output(fn, "prop")
            value, ret = get(handle)
            if ret == E.ACL_SUCCESS:
                _store_prop(prop, value)
            return ret
        return call
    return needs(impl, fn, make)


@adapts("aclrtMemSetAccess")
def _set_access(fn, impl):
    def descs(address: int, count: int):
        return [{"flags": d.flags, "location": _location(d.location)}
                for d in (_MemAccessDesc * count).from_address(address)] if address and count else None
    return needs(impl, fn, lambda set_: lambda virt, size, desc, count: set_(virt, size, descs(desc, count), count))


@adapts("aclrtMemGetAccess")
def _get_access(fn, impl):
    def make(get):
        def call(virt, location, flags):
            if not flags:
                return null_output(fn, "flag")
            loc = _location(_MemLocation.from_address(location)) if location else None
            return get(virt, loc)
        return call
    return needs(impl, fn, make)
