"""Hand-written adapters: the C functions whose prototype alone does not say how to call mdev.

    strings returned to C      aclGetRecentErrMsg, aclrtGetSocName (buffers kept alive)
    C callbacks                aclrtLaunchCallback, aclrtLaunchHostFunc, exception callbacks
    structures                 aclrtIpcEventHandle, aclrtRandomNumTaskInfo, aclrtPhysicalMemProp, ...
    strings and arrays out/in  export keys, PID lists, function names
    plain values               last errors, float16 conversions, versions, exception-info fields

A function that only needs some arguments converted (a structure read into the runtime's
dict, a C callback made callable) keeps the prototype's marshalling and names its
conversions in ``CONVERSIONS``.  Any other adapter is made by ``factory(fn, impl)`` (``fn`` the prototype, ``impl`` the runtime
implementation the naming rule found, or None) and takes the arguments as libmdev_embed.so
passes them (ints, bytes); it returns the C return value, or ``(values..., ret)`` with one
value per output parameter of the prototype (the entry point stores them), or writes the
caller's memory itself where the prototype's outputs are not plain values (structures,
strings).
"""

from __future__ import annotations

import ctypes
import importlib
import os
import struct
import threading
from typing import Callable

from mdev import constants as C
from mdev import errors as E
from mdev.errors import AclError
from mdev.capi import cmemory
from mdev.capi.failures import null_output, unsupported
from mdev.capi.prototypes import CFunction
from mdev.runtime import boundary, devices, exceptions, kernels

ADAPTERS: dict[str, Callable[[CFunction, Callable | None], Callable]] = {}
# (C function, parameter) -> how its C value becomes the implementation's argument, for the
# functions otherwise marshalled from their prototype (mdev.capi.adapter)
CONVERSIONS: dict[tuple[str, str], Callable] = {}
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
def c_callback(address: int):
    """``void (*)(void*)`` at ``address`` as a Python callable (None for NULL)."""
    return cmemory.c_function(address, None, ctypes.c_void_p) if address else None


CONVERSIONS.update({
    ("aclrtLaunchCallback", "fn"): c_callback, ("aclrtLaunchHostFunc", "fn"): c_callback,
    ("aclrtSetExceptionInfoCallback", "callback"): c_callback,
    ("aclrtExceptionInfoCallbackRegister", "callback"): c_callback,
    ("aclrtExceptionInfoCallbackUnregister", "callback"): c_callback,
})


# ---------------------------------------------------------------------------- IPC
CONVERSIONS[("aclrtIpcOpenEventHandle", "handle")] = bytes       # the structure's 64 bytes


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


def random_task(address: int) -> dict | None:
    """aclrtRandomNumTaskInfo at ``address`` as the runtime's dict (mdev.runtime.systasks)."""
    if not address:
        return None
    info = _RandomNumTaskInfo.from_address(address)
    params = {member: {field: _para(p) for field, p in zip(fields, getattr(info.paramInfo, member))}
              for member, fields in _RANDOM_MEMBERS.items()}
    return {"dataType": info.dataType,
            "randomNumFuncParaInfo": {"funcType": info.funcType, "paramInfo": params},
            "randomParaAddr": info.randomParaAddr, "randomResultAddr": info.randomResultAddr,
            "randomCounterAddr": info.randomCounterAddr,
            "randomSeed": _para(info.randomSeed), "randomNum": _para(info.randomNum)}


CONVERSIONS[("aclrtRandomNumAsync", "taskInfo")] = random_task


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


def location_at(address: int) -> dict | None:
    return _location(_MemLocation.from_address(address)) if address else None


CONVERSIONS.update({("aclrtMallocPhysical", "prop"): mem_prop, ("aclrtMemGetAllocationGranularity", "prop"): mem_prop,
                    ("aclrtMemGetAccess", "location"): location_at})


@adapts("aclrtMemSetAccess")
def _set_access(fn, impl):
    def descs(address: int, count: int):
        return [{"flags": d.flags, "location": _location(d.location)}
                for d in (_MemAccessDesc * count).from_address(address)] if address and count else None
    return needs(impl, fn, lambda set_: lambda virt, size, desc, count: set_(virt, size, descs(desc, count), count))


# ---------------------------------------------------------------------------- kernels
class _Attribute(ctypes.Structure):
    """aclrtLaunchKernelAttr / aclrtBinaryLoadOption: an id and a 16-byte union value."""
    _fields_ = [("id", ctypes.c_int32), ("value", ctypes.c_uint8 * 16)]


class _AttributeList(ctypes.Structure):
    """aclrtLaunchKernelCfg / aclrtBinaryLoadOptions: a pointer to n of them, and n."""
    _fields_ = [("items", ctypes.c_uint64), ("count", ctypes.c_size_t)]


class _PlaceHolder(ctypes.Structure):
    _fields_ = [("addrOffset", ctypes.c_uint32), ("dataOffset", ctypes.c_uint32)]


# bytes of each launch attribute's union member (4 for the uint32 / enum ones)
_ATTRIBUTE_BYTES = {C.ACL_RT_LAUNCH_KERNEL_ATTR_BLOCK_TASK_PREFETCH: 1, C.ACL_RT_LAUNCH_KERNEL_ATTR_DATA_DUMP: 1,
                    C.ACL_RT_LAUNCH_KERNEL_ATTR_ENABLE_PROFILING: 1, C.ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT: 2,
                    C.ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US: 8}


def _attributes(address: int, widths: dict) -> list[tuple[int, int]] | None:
    """(id, value) of each entry of the list at ``address`` (None for NULL)."""
    if not address:
        return None
    listing = _AttributeList.from_address(address)
    items = (_Attribute * listing.count).from_address(listing.items) if listing.items and listing.count else []
    return [(a.id, int.from_bytes(bytes(a.value)[:widths.get(a.id, 4)], "little")) for a in items]


def launch_cfg(address: int):
    return _attributes(address, _ATTRIBUTE_BYTES)


def load_options(address: int):
    return _attributes(address, {})


CONVERSIONS.update({(name, "cfg"): launch_cfg for name in
                    ("aclrtLaunchKernelV2", "aclrtLaunchKernelWithConfig")})
CONVERSIONS.update({("aclrtBinaryLoadFromFile", "options"): load_options,
                    ("aclrtBinaryLoadFromData", "options"): load_options})


@adapts("aclrtLaunchKernelWithHostArgs")
def _launch_host_args(fn, impl):
    def holders(address: int, count: int):
        return [(h.addrOffset, h.dataOffset) for h in (_PlaceHolder * count).from_address(address)] \
            if address and count else None
    return needs(impl, fn, lambda launch: lambda func, blocks, stream, cfg, args, size, array, count:
                 launch(func, blocks, stream, launch_cfg(cfg), args, size, holders(array, count), count))


@adapts("aclrtLaunchKernelWithArgsArray")
def _launch_args_array(fn, impl):
    """``void** args`` is one host pointer per kernel parameter (as many as the function has)."""
    count = boundary.bind(kernels.function_get_param_count, 1)

    def make(launch):
        def call(func, blocks, stream, cfg, args):
            n, ret = count(func)
            if ret != E.ACL_SUCCESS:
                return ret
            pointers = cmemory.read_array(ctypes.c_uint64, args, n) if args else None
            return launch(func, blocks, stream, launch_cfg(cfg), pointers)
        return call
    return needs(impl, fn, make)


@adapts("aclrtGetFunctionName")
def _function_name(fn, impl):
    def make(get):
        def call(func, max_len, name):
            if not name:
                return null_output(fn, "name")
            value, ret = get(func)
            if ret == E.ACL_SUCCESS and not cmemory.write_text(name, max_len, value):
                boundary.record_error(E.ACL_ERROR_INVALID_PARAM, f"{fn.name}: maxLen {max_len} is too small "
                                      f"for {value!r}")
                return E.ACL_ERROR_INVALID_PARAM
            return ret
        return call
    return needs(impl, fn, make)


# ---------------------------------------------------------------------------- stream attributes
def _attribute_type(attr: int):
    """aclrtStreamAttrValue's member for ``attr``: failureMode is 64-bit, the others 32."""
    return ctypes.c_uint64 if attr == C.ACL_STREAM_ATTR_FAILURE_MODE else ctypes.c_uint32


@adapts("aclrtSetStreamAttribute")
def _set_stream_attribute(fn, impl):
    return needs(impl, fn, lambda set_: lambda stream, attr, value:
                 set_(stream, attr, cmemory.load(_attribute_type(attr), value) if value else None))


@adapts("aclrtGetStreamAttribute")
def _get_stream_attribute(fn, impl):
    def make(get):
        def call(stream, attr, value):
            if not value:
                return null_output(fn, "value")
            result, ret = get(stream, attr)
            if ret == E.ACL_SUCCESS:
                cmemory.write(value, bytes(16))
                cmemory.write(value, bytes(_attribute_type(attr)(result)))
            return ret
        return call
    return needs(impl, fn, make)


# ---------------------------------------------------------------------------- VMM sharing (V2)
def shareable_at(address: int):
    """A V2 shareable handle: ``void*`` to the handle (a uint64_t for the default type)."""
    return cmemory.load(ctypes.c_uint64, address) if address else None


CONVERSIONS[("aclrtMemImportFromShareableHandleV2", "shareableHandle")] = shareable_at


@adapts("aclrtMemExportToShareableHandleV2")
def _export_v2(fn, impl):
    def make(export):
        def call(handle, flags, share_type, shareable):
            if not shareable:
                return null_output(fn, "shareableHandle")
            value, ret = export(handle, flags, share_type)
            if ret == E.ACL_SUCCESS:
                cmemory.write(shareable, bytes(ctypes.c_uint64(value)))
            return ret
        return call
    return needs(impl, fn, make)


@adapts("aclrtMemSetPidToShareableHandleV2")
def _pids_v2(fn, impl):
    return needs(impl, fn, lambda set_: lambda shareable, share_type, pid, num:
                 set_(shareable_at(shareable), share_type, _pids(pid, num)))


# ---------------------------------------------------------------------------- structures out
class _MemUceInfo(ctypes.Structure):
    _fields_ = [("addr", ctypes.c_uint64), ("len", ctypes.c_size_t), ("reserved", ctypes.c_size_t * 14)]


class _UceInfoArray(ctypes.Structure):
    _fields_ = [("arraySize", ctypes.c_size_t), ("memUceInfoArray", _MemUceInfo * 20)]


class _ErrorDetail(ctypes.Union):
    _fields_ = [("uceInfo", _UceInfoArray), ("aicoreErrType", ctypes.c_int32)]


class _ErrorInfo(ctypes.Structure):
    _fields_ = [("tryRepair", ctypes.c_uint8), ("hasDetail", ctypes.c_uint8), ("reserved", ctypes.c_uint8 * 2),
                ("errorType", ctypes.c_int32), ("detail", _ErrorDetail)]


class _UtilizationInfo(ctypes.Structure):
    _fields_ = [("cubeUtilization", ctypes.c_int32), ("vectorUtilization", ctypes.c_int32),
                ("aicpuUtilization", ctypes.c_int32), ("memoryUtilization", ctypes.c_int32),
                ("utilizationExtend", ctypes.c_uint64)]


class _Uuid(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_char * 16)]


class _CANNPackageVersion(ctypes.Structure):
    _fields_ = [("version", ctypes.c_char * C.ACL_PKG_VERSION_MAX_SIZE)] + [
        (name, ctypes.c_char * C.ACL_PKG_VERSION_PARTS_MAX_SIZE)
        for name in ("majorVersion", "minorVersion", "releaseVersion", "patchVersion")] + [
        ("reserved", ctypes.c_char * C.ACL_PKG_VERSION_MAX_SIZE)]


# C function -> (its structure output parameter, the structure): the implementation returns
# a dict of the fields (or the structure's bytes) and takes the other parameters
STRUCT_OUTPUTS = {
    "aclrtIpcGetEventHandle": ("handle", ctypes.c_char * C.ACL_IPC_EVENT_HANDLE_SIZE),
    "aclrtMemGetAllocationPropertiesFromHandle": ("prop", _PhysicalMemProp),
    "aclrtGetErrorVerbose": ("errorInfo", _ErrorInfo),
    "aclrtGetDeviceUtilizationRate": ("utilizationInfo", _UtilizationInfo),
    "aclrtDeviceGetUuid": ("uuid", _Uuid),
    "aclsysGetCANNVersion": ("version", _CANNPackageVersion),
}


@adapts(*STRUCT_OUTPUTS)
def _struct_output(fn, impl):
    param, kind = STRUCT_OUTPUTS[fn.name]
    at = [p.name for p in fn.params].index(param)

    def make(get):
        def call(*args):
            if not args[at]:
                return null_output(fn, param)
            value, ret = get(*(a for i, a in enumerate(args) if i != at))
            if ret == E.ACL_SUCCESS:
                if isinstance(value, bytes):
                    cmemory.write(args[at], value[:ctypes.sizeof(kind)])
                else:
                    cmemory.store_struct(args[at], kind, value)
            return ret
        return call
    return needs(impl, fn, make)


# ---------------------------------------------------------------------------- system information
def c_text(address: int) -> str | None:
    """A ``char*`` input string (NULL: None)."""
    return cmemory.text(address) if address else None


CONVERSIONS[("aclsysGetVersionNum", "pkgName")] = c_text


@adapts("aclsysGetVersionStr")
def _version_str(fn, impl):
    def make(get):
        def call(pkg_name, version_str):
            if not version_str:
                return null_output(fn, "versionStr")
            value, ret = get(c_text(pkg_name))
            if ret == E.ACL_SUCCESS:
                cmemory.write_text(version_str, C.ACL_PKG_VERSION_MAX_SIZE, value)
            return ret
        return call
    return needs(impl, fn, make)


_cann_attributes: list = []      # the array aclGetCannAttributeList points to, for the process


@adapts("aclGetCannAttributeList")
def _attribute_list(fn, impl):
    null = outputs_then(fn, "cannAttrList", "num")

    def make(get):
        def call(attr_list, num):
            failed = null((attr_list, num))
            if failed is not None:
                return failed
            attrs, count, ret = get()
            if ret != E.ACL_SUCCESS:
                return ret
            if not _cann_attributes:
                _cann_attributes.append((ctypes.c_int32 * len(attrs))(*attrs))
            cmemory.write(attr_list, bytes(ctypes.c_uint64(ctypes.addressof(_cann_attributes[0]))))
            return count, ret                     # num: the prototype's output
        return call
    return needs(impl, fn, make)


# C functions returning a value (no aclError): (runtime module, function); a failure is 0
VALUE_FUNCTIONS = {"aclDataTypeSize": ("sysinfo", "data_type_size"),
                   "aclrtAllocatorCreateDesc": ("allocators", "allocator_create_desc")}


def _runtime_function(module: str, name: str) -> Callable | None:
    try:
        return getattr(importlib.import_module(f"mdev.runtime.{module}"), name)
    except (ImportError, AttributeError):
        return None


@adapts(*VALUE_FUNCTIONS)
def _value_function(fn, impl):
    target = _runtime_function(*VALUE_FUNCTIONS[fn.name])
    if target is None:
        return unsupported(fn, "not emulated yet")

    def call(*args):
        try:
            return target(*args)
        except AclError as exc:
            boundary.record_error(exc.code, exc.message)
            return 0
    return call


@adapts("aclAppLog")
def _app_log(fn, impl):
    record = _runtime_function("applog", "record")
    if record is None:
        return unsupported(fn, "not emulated yet")

    def call(level, func, file, line, fmt, text):
        record(level, string(text) or "", string(func) or "", string(file) or "", line)
        return 0
    return call


# ---------------------------------------------------------------------------- labels, allocators
@adapts("aclrtCreateLabelList")
def _label_list(fn, impl):
    """``aclrtLabel* labels`` is an input array of ``num`` labels."""
    def make(create):
        def call(labels, num, label_list):
            if not label_list:
                return null_output(fn, "labelList")
            value, ret = create(cmemory.read_array(ctypes.c_uint64, labels, num) if labels else None, num)
            if ret == E.ACL_SUCCESS:
                cmemory.write(label_list, bytes(ctypes.c_uint64(value)))
            return ret
        return call
    return needs(impl, fn, make)


# a C allocator callback stays a C function pointer: the runtime keeps it and hands it back
CONVERSIONS.update({(f"aclrtAllocatorSet{what}FuncToDesc", "func"): int
                    for what in ("Alloc", "Free", "AllocAdvise", "GetAddrFromBlock")})
