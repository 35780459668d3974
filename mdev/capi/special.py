"""Hand-written adapters: the C functions whose prototype alone does not say how to call mdev.

    strings returned to C      aclGetRecentErrMsg, aclrtGetSocName (buffers kept alive)
    C callbacks                aclrtLaunchCallback, aclrtLaunchHostFunc, exception callbacks
    structures in and out      task info, VMM properties, launch configurations, error info, ...
    strings and arrays         export keys, function names, versions, PID lists, label lists
    plain values               last errors, float16 conversions, versions, exception-info fields

A function that only needs some arguments converted (a structure read into the runtime's
dict, a C callback made callable) keeps the prototype's marshalling (mdev.capi.adapter) and
names its conversions in ``CONVERSIONS``.  Any other has an adapter made by
``factory(fn, impl)`` (``fn`` the prototype, ``impl`` the runtime implementation the naming
rule found, or None): it takes the arguments as the C side passes them (ints, bytes)
and returns the C return value, or ``(values..., ret)`` with one value per output parameter
of the prototype (the entry point stores them); what is not a plain value (a structure, a
string) it writes into the caller's memory itself (``writes_out``).
"""

from __future__ import annotations

import ctypes
import importlib
import os
import struct
from typing import Callable

from mdev import constants as C
from mdev import errors as E
from mdev.errors import AclError
from mdev.capi import cmemory, structs
from mdev.capi.failures import codes_of, null_output, unsupported
from mdev.capi.prototypes import CFunction
from mdev.runtime import boundary
from mdev.runtime.devices import devices
from mdev.runtime.execution import exceptions, kernels, models

ADAPTERS: dict[str, Callable[[CFunction, Callable | None], Callable]] = {}
# (C function, parameter) -> how its C value becomes the implementation's argument, for the
# functions otherwise marshalled from their prototype (mdev.capi.adapter)
CONVERSIONS: dict[tuple[str, str], Callable] = {}
_I32, _U64 = ctypes.c_int32, ctypes.c_uint64


def adapts(*names: str):
    def register(factory):
        for name in names:
            ADAPTERS[name] = factory
        return factory
    return register


def string(value: bytes | None) -> str | None:
    """A ``const char*`` argument as the implementation takes it."""
    return None if value is None else os.fsdecode(value)


def c_text(address: int) -> str | None:
    """A ``char*`` input string (NULL: None)."""
    return cmemory.text(address) if address else None


def needs(impl: Callable | None, fn: CFunction, make: Callable[[Callable], Callable]) -> Callable:
    """``make(bound impl)``, or the unsupported stub while the runtime lacks the function."""
    if impl is None:
        return unsupported(fn, "not emulated yet")
    return make(boundary.bind(impl, *impl.api_shape, codes_of(fn)))


def writes_out(fn: CFunction, impl, param: str, inputs: Callable, write: Callable) -> Callable:
    """An adapter calling the implementation with ``inputs(*args)`` that, when it succeeds,
    writes its value into the caller's ``param`` with ``write(address, value, *args)``: an
    error code from ``write`` (the caller's buffer is too small) becomes the result."""
    at = [p.name for p in fn.params].index(param)

    def make(get):
        def call(*args):
            if not args[at]:
                return null_output(fn, param)
            value, ret = get(*inputs(*args))
            if ret == E.ACL_SUCCESS:
                return write(args[at], value, *args) or ret
            return ret
        return call
    return needs(impl, fn, make)


def _text_into(fn: CFunction, capacity: Callable[..., int]) -> Callable:
    """A writer of a string into a ``char`` buffer of ``capacity(*args)`` bytes."""
    def write(address: int, value: str, *args) -> int | None:
        size = capacity(*args)
        if cmemory.write_text(address, size, value):
            return None
        boundary.record_error(E.ACL_ERROR_INVALID_PARAM, f"{fn.name}: a buffer of {size} bytes is too small "
                              f"for {value!r}")
        return E.ACL_ERROR_INVALID_PARAM
    return write


def _word(address: int, value: int, *args) -> None:
    cmemory.write(address, bytes(_U64(value)))


def _runtime_function(module: str, name: str) -> Callable | None:
    try:
        return getattr(importlib.import_module(f"mdev.runtime.{module}"), name)
    except (ImportError, AttributeError):
        return None


# ---------------------------------------------------------------------------- strings for C
_soc: list = []          # the SoC name's address: the real one is static, valid for the process


@adapts("aclGetRecentErrMsg")
def _recent_err_msg(fn, impl):
    def call():
        # only the pointer of the thread's latest call stays valid, as the runtime documents
        text = boundary.recent_messages()
        return 0 if text is None else cmemory.thread_text(text.encode(errors="replace"))
    return call


@adapts("aclrtGetSocName")
def _soc_name(fn, impl):
    get = boundary.bind(devices.get_soc_name, 1, None)

    def call():
        if not _soc:
            name, ret = get()
            if ret != E.ACL_SUCCESS:
                return 0
            _soc.append(cmemory.keep(name.encode() + b"\0"))
        return _soc[0]
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
    def call(*pointers):
        for pointer, p in zip(pointers, fn.params):
            if not pointer:
                return null_output(fn, p.name)
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


@adapts("aclrtActiveStream")
def _active_stream(fn, impl):
    return boundary.bind(models.active_stream)     # a model's function under an aclrt name


@adapts("aclrtSwitchStream")
def _switch_stream(fn, impl):
    return boundary.bind(models.switch_stream)     # likewise


@adapts("aclmdlRICondHandleGetCondPtr")
def _cond_ptr(fn, impl):
    """The device address of the condition, into the caller's ``uint64_t*``."""
    return writes_out(fn, impl, "ptr", lambda handle, ptr: (handle,), _word)


_COND_PARAMS = struct.Struct("<QIIQ")      # aclmdlRICondTaskParams: handle, type, size, modelRIArray


@adapts("aclmdlRIAddCondTask")
def _add_cond_task(fn, impl):
    """The structure's fields in; the child models' handles out, into params.modelRIArray."""
    def make(add):
        def call(params, stream, flags):
            handle, kind, count, array = _COND_PARAMS.unpack_from(bytes(params))
            if not array:
                return null_output(fn, "params.modelRIArray")
            children, ret = add(handle, kind, count, stream, flags)
            if ret == E.ACL_SUCCESS:
                cmemory.write(array, struct.pack(f"<{len(children)}Q", *children))
            return ret
        return call
    return needs(impl, fn, make)


# C functions returning a value (no aclError): (runtime module, function); a failure is 0
VALUE_FUNCTIONS = {"aclDataTypeSize": ("devices.sysinfo", "data_type_size"),
                   "aclrtAllocatorCreateDesc": ("memory.allocators", "allocator_create_desc"),
                   "aclrtCreateStreamConfigHandle": ("stream_config", "create_stream_config_handle")}


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


@adapts("aclmdlRICaptureThreadExchangeMode")
def _exchange_mode(fn, impl):
    def make(exchange):
        def call(mode):
            if not mode:
                return null_output(fn, "mode")
            return exchange(cmemory.load(_I32, mode))     # in: the new mode; out: the old one
        return call
    return needs(impl, fn, make)


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
CONVERSIONS[("aclrtRegStreamStateCallback", "callback")] = lambda address: (
    cmemory.c_function(address, None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p) if address else None)
# a C allocator callback stays a C function pointer: the runtime keeps it and hands it back
CONVERSIONS.update({(f"aclrtAllocatorSet{what}FuncToDesc", "func"): int
                    for what in ("Alloc", "Free", "AllocAdvise", "GetAddrFromBlock")})


@adapts("aclAppLog")
def _app_log(fn, impl):
    record = _runtime_function("applog", "record")
    if record is None:
        return unsupported(fn, "not emulated yet")

    def call(level, func, file, line, fmt, text):
        record(level, string(text) or "", string(func) or "", string(file) or "", line)
        return 0
    return call


# ---------------------------------------------------------------------------- structures
def _shareable_at(address: int):
    """A V2 shareable handle: ``void*`` to the handle (a uint64_t for the default type)."""
    return cmemory.load(_U64, address) if address else None


CONVERSIONS.update({
    ("aclrtIpcOpenEventHandle", "handle"): bytes,                  # the structure's 64 bytes
    ("aclrtRandomNumAsync", "taskInfo"): structs.random_task,
    ("aclrtMallocPhysical", "prop"): structs.mem_prop,
    ("aclrtMemGetAllocationGranularity", "prop"): structs.mem_prop,
    ("aclrtMemGetAccess", "location"): structs.location_at,
    ("aclrtLaunchKernelV2", "cfg"): structs.launch_cfg,
    ("aclrtLaunchKernelWithConfig", "cfg"): structs.launch_cfg,
    ("aclrtBinaryLoadFromFile", "options"): structs.load_options,
    ("aclrtBinaryLoadFromData", "options"): structs.load_options,
    ("aclrtMemImportFromShareableHandleV2", "shareableHandle"): _shareable_at,
    ("aclsysGetVersionNum", "pkgName"): c_text,
    ("aclrtMallocWithCfg", "cfg"): structs.malloc_cfg,
    ("aclrtMallocForTaskScheduler", "cfg"): structs.malloc_cfg,
    ("aclrtMallocHostWithCfg", "cfg"): structs.malloc_cfg,
    # a stream configuration is a handle the runtime made (an aclrtStreamConfigHandle* to C)
    ("aclrtDestroyStreamConfigHandle", "handle"): int,
    ("aclrtCreateStreamV2", "handle"): int,
    ("aclrtCntNotifyRecord", "info"): lambda address: cmemory.load_struct(address, structs.CntNotifyRecordInfo),
    ("aclrtCntNotifyWaitWithTimeout", "info"): lambda address: cmemory.load_struct(address, structs.CntNotifyWaitInfo),
})

# C function -> (its structure output parameter, the structure): the implementation returns
# a dict of the fields (or the structure's bytes) and takes the other parameters
STRUCT_OUTPUTS = {
    "aclrtIpcGetEventHandle": ("handle", structs.IpcEventHandle),
    "aclrtMemGetAllocationPropertiesFromHandle": ("prop", structs.PhysicalMemProp),
    "aclrtGetErrorVerbose": ("errorInfo", structs.ErrorInfo),
    "aclrtGetDeviceUtilizationRate": ("utilizationInfo", structs.UtilizationInfo),
    "aclrtDeviceGetUuid": ("uuid", structs.Uuid),
    "aclsysGetCANNVersion": ("version", structs.CANNPackageVersion),
    "aclrtPointerGetAttributes": ("attributes", structs.PtrAttributes),
}


@adapts(*STRUCT_OUTPUTS)
def _struct_output(fn, impl):
    param, kind = STRUCT_OUTPUTS[fn.name]
    at = [p.name for p in fn.params].index(param)

    def write(address: int, value, *args) -> None:
        if isinstance(value, bytes):
            cmemory.write(address, value[:ctypes.sizeof(kind)])
        else:
            cmemory.store_struct(address, kind, value)
    return writes_out(fn, impl, param, lambda *args: args[:at] + args[at + 1:], write)


def _entries_out(fn: CFunction, impl, struct, outputs: tuple[str, ...]) -> Callable:
    """``call(device, array, capacity, count_out)``: up to ``capacity`` entries of the
    runtime's list stored into the caller's array of ``struct``; the runtime's count output
    says how many.  ``outputs`` are the C names of the pointers that may not be NULL."""
    def make(get):
        def call(device, array, capacity, count_out):
            for pointer, name in zip((array, count_out)[-len(outputs):], outputs):
                if not pointer:
                    return null_output(fn, name)
            entries, ret = get(device, capacity)
            if ret != E.ACL_SUCCESS:
                return ret
            for k, entry in enumerate(entries[:capacity]):
                cmemory.store_struct(array + k * ctypes.sizeof(struct), struct, entry)
            return min(len(entries), capacity), ret
        return call
    return needs(impl, fn, make)


@adapts("aclrtGetMemUceInfo")
def _uce_info(fn, impl):
    """Up to ``arraySize`` entries into the caller's array; ``retSize`` says how many."""
    return _entries_out(fn, impl, structs.MemUceInfo, ("retSize",))


@adapts("aclrtGetMemUsageInfo")
def _mem_usage(fn, impl):
    """Up to ``inputNum`` entries into the caller's array; ``outputNum`` says how many."""
    return _entries_out(fn, impl, structs.MemUsageInfo, ("memUsageInfo", "outputNum"))


@adapts("aclrtCheckMemType")
def _check_mem_type(fn, impl):
    """``void** addrList`` is an input array of ``size`` addresses; the result is a uint32_t."""
    def make(check):
        def call(addr_list, count, mem_type, result, reserve):
            if not result:
                return null_output(fn, "checkResult")
            value, ret = check(cmemory.read_array(_U64, addr_list, count) if addr_list else None, count, mem_type,
                               reserve)
            if ret == E.ACL_SUCCESS:
                cmemory.write(result, bytes(ctypes.c_uint32(value)))
            return ret
        return call
    return needs(impl, fn, make)


@adapts("aclrtMemUceRepair")
def _uce_repair(fn, impl):
    return needs(impl, fn, lambda repair: lambda device, array, count: repair(device, structs.uce_infos(array, count)))


@adapts("aclrtSetStreamConfigOpt")
def _stream_config_opt(fn, impl):
    """``attrValue`` points to a value of ``valueSize`` bytes (a size_t or a uint32_t)."""
    def value(address: int, size: int):
        return int.from_bytes(cmemory.read(address, min(size, 8)), "little") if address else None
    return needs(impl, fn, lambda set_: lambda handle, attr, address, size: set_(handle, attr, value(address, size), size))


@adapts("aclrtMemSetAccess")
def _set_access(fn, impl):
    return needs(impl, fn, lambda set_: lambda virt, size, desc, count:
                 set_(virt, size, structs.access_descs(desc, count), count))


@adapts("aclrtLaunchKernelWithHostArgs")
def _launch_host_args(fn, impl):
    return needs(impl, fn, lambda launch: lambda func, blocks, stream, cfg, args, size, array, count:
                 launch(func, blocks, stream, structs.launch_cfg(cfg), args, size,
                        structs.place_holders(array, count), count))


@adapts("aclrtLaunchKernelWithArgsArray")
def _launch_args_array(fn, impl):
    """``void** args`` is one host pointer per kernel parameter (as many as the function has)."""
    count = boundary.bind(kernels.function_get_param_count, 1)

    def make(launch):
        def call(func, blocks, stream, cfg, args):
            n, ret = count(func)
            if ret != E.ACL_SUCCESS:
                return ret
            pointers = cmemory.read_array(_U64, args, n) if args else None
            return launch(func, blocks, stream, structs.launch_cfg(cfg), pointers)
        return call
    return needs(impl, fn, make)


def _attribute_type(attr: int):
    """aclrtStreamAttrValue's member for ``attr``: failureMode is 64-bit, the others 32."""
    return _U64 if attr == C.ACL_STREAM_ATTR_FAILURE_MODE else ctypes.c_uint32


@adapts("aclrtSetStreamAttribute")
def _set_stream_attribute(fn, impl):
    return needs(impl, fn, lambda set_: lambda stream, attr, value:
                 set_(stream, attr, cmemory.load(_attribute_type(attr), value) if value else None))


@adapts("aclrtGetStreamAttribute")
def _get_stream_attribute(fn, impl):
    def write(address: int, value: int, stream, attr, _) -> None:
        cmemory.write(address, bytes(16))                       # the whole union, then its member
        cmemory.write(address, bytes(_attribute_type(attr)(value)))
    return writes_out(fn, impl, "value", lambda stream, attr, value: (stream, attr), write)


@adapts("aclrtMemExportToShareableHandleV2")
def _export_v2(fn, impl):
    return writes_out(fn, impl, "shareableHandle", lambda handle, flags, kind, out: (handle, flags, kind), _word)


# ---------------------------------------------------------------------------- strings and arrays
@adapts("aclrtIpcMemGetExportKey")
def _ipc_mem_key(fn, impl):
    return writes_out(fn, impl, "key", lambda ptr, size, key, length, flags: (ptr, size, length, flags),
                      _text_into(fn, lambda ptr, size, key, length, flags: length))


@adapts("aclrtNotifyGetExportKey")
def _notify_key(fn, impl):
    return writes_out(fn, impl, "key", lambda notify, key, length, flags: (notify, length, flags),
                      _text_into(fn, lambda notify, key, length, flags: length))


@adapts("aclrtGetFunctionName")
def _function_name(fn, impl):
    return writes_out(fn, impl, "name", lambda func, max_len, name: (func,),
                      _text_into(fn, lambda func, max_len, name: max_len))


@adapts("aclsysGetVersionStr")
def _version_str(fn, impl):
    return writes_out(fn, impl, "versionStr", lambda pkg, out: (c_text(pkg),),
                      _text_into(fn, lambda pkg, out: C.ACL_PKG_VERSION_MAX_SIZE))


_cann_attributes: list = []      # the address of the array aclGetCannAttributeList gives, for the process


@adapts("aclGetCannAttributeList")
def _attribute_list(fn, impl):
    def make(get):
        def call(attr_list, num):
            for pointer, name in ((attr_list, "cannAttrList"), (num, "num")):
                if not pointer:
                    return null_output(fn, name)
            attrs, count, ret = get()
            if ret != E.ACL_SUCCESS:
                return ret
            if not _cann_attributes:
                _cann_attributes.append(cmemory.keep(bytes((_I32 * len(attrs))(*attrs))))
            _word(attr_list, _cann_attributes[0])
            return count, ret                     # num: the prototype's output
        return call
    return needs(impl, fn, make)


@adapts("aclrtCreateLabelList")
def _label_list(fn, impl):
    """``aclrtLabel* labels`` is an input array of ``num`` labels."""
    return writes_out(fn, impl, "labelList",
                      lambda labels, num, out: (cmemory.read_array(_U64, labels, num) if labels else None, num),
                      _word)


@adapts("aclrtMemcpyBatch", "aclrtMemcpyBatchV2", "aclrtMemcpyBatchAsync", "aclrtMemcpyBatchAsyncV2")
def _memcpy_batch(fn, impl):
    """The arrays (numBatches copies, numAttrs attributes) are read from the caller; failIndex
    (where the prototype has it) is written whether the batch succeeds or not."""
    names = [p.name for p in fn.params]

    def make(copy):
        def call(*args):
            a = dict(zip(names, args))
            if "failIndex" in a and not a["failIndex"]:
                return null_output(fn, "failIndex")
            n, k = a["numBatches"], a["numAttrs"]

            def words(name: str, count: int):
                return cmemory.read_array(_U64, a[name], count) if a[name] else None
            result = copy(words("dsts", n), words("destMaxs", n), words("srcs", n), words("sizes", n), n,
                          structs.batch_attrs(a["attrs"], k), words("attrsIndexes", k), k,
                          *((a["stream"],) if "stream" in a else ()))
            if "failIndex" not in a:
                return result
            index, ret = result
            _word(a["failIndex"], index)
            return ret
        return call
    return needs(impl, fn, make)


@adapts("aclrtNotifyBatchReset")
def _notify_batch_reset(fn, impl):
    """``aclrtNotify* notifies`` is an input array of ``num`` notifies."""
    return needs(impl, fn, lambda reset: lambda notifies, num:
                 reset(cmemory.read_array(_U64, notifies, num) if notifies else None, num))


def _pids(address: int, count: int) -> list[int]:
    return cmemory.read_array(_I32, address, count) if address else []


@adapts("aclrtIpcMemSetImportPid")
def _ipc_mem_pids(fn, impl):
    return needs(impl, fn, lambda set_: lambda key, pid, num: set_(string(key), _pids(pid, num)))


@adapts("aclrtNotifySetImportPid", "aclrtMemSetPidToShareableHandle")
def _pids_of(fn, impl):
    return needs(impl, fn, lambda set_: lambda handle, pid, num: set_(handle, _pids(pid, num)))


@adapts("aclrtMemSetPidToShareableHandleV2")
def _pids_v2(fn, impl):
    return needs(impl, fn, lambda set_: lambda shareable, share_type, pid, num:
                 set_(_shareable_at(shareable), share_type, _pids(pid, num)))
