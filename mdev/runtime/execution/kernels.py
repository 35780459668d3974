"""Loading and launching kernels from the host.

    @kernel function ----cloudpickle----> device "register_kernel" --> function id
    binary (Python source) ------------> device "load_binary" -----> function ids by name
    binary (device image, ELF) --------> device "load_native" -----> function ids by name
                                         (native kernels: mdev.board.native)
    launch_* ----> argument block (values, host bytes, or device memory) + core limit
             ----> "kernel" task on the stream ("native_kernel" for a device image's kernel)

The core limit in force at submission travels with the launch, so later limit changes
do not affect queued work.
"""

from __future__ import annotations

import itertools
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import cloudpickle

from mdev import constants as C
from mdev import errors as E
from mdev.runtime.boundary import api
from mdev.runtime.boundary import record_error
from mdev.runtime import hooks
from mdev.errors import AclError
from mdev.kernel import api as kernel_api
from mdev.memory import address
from mdev.kernel import params
from mdev.runtime.devices import limits
from mdev.runtime import streams
from mdev.runtime.memory import vmm
from mdev.runtime.board_client import MESSAGE_HANDLERS
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.core import lookup
from mdev.runtime.memtable import DEVICE
from mdev.runtime.validate import as_int, as_list, file_path, read_regular, size

# The task scheduler counts an operator's run time in ticks of this many microseconds, at
# most 254 of them (the A2/A3 default and maximum: about 1091 s)
OP_TIMEOUT_INTERVAL_US = 4_294_967
OP_TIMEOUT_MAX_US = 254 * OP_TIMEOUT_INTERVAL_US


# this module's part of the runtime's state, made afresh with it (finalize, fork)
held = rt.family(
    binaries=dict,
    functions=dict,
    args_handles=dict,
    op_execute_timeout_us=lambda: OP_TIMEOUT_MAX_US,  # aclrtSetOpExecuteTimeOut
)

if TYPE_CHECKING:
    from mdev.kernel.api import Kernel

BINARY_HANDLES, FUNCTION_HANDLES, ARGS_HANDLES = 0xB1_0000_0000, 0xF0_0000_0000, 0xA5_0000_0000
_PARAM_HANDLES = itertools.count(0xA6_0000_0001)
MAX_PARAMS = 128
MAX_BINARY_BYTES = 256 << 20       # a kernel binary: a Python source file or a native device image
ARGS_RUNTIME_EXTRA = 64           # internal space kernel_args_get_mem_size adds
ARGS_HANDLE_SIZE = 256


@dataclass(eq=False)
class Binary:
    handle: int
    device: int
    bin_id: int
    functions: list           # Function, in definition order
    unloaded: bool = False


@dataclass(eq=False)
class Function:
    handle: int
    binary: Binary
    name: str
    fid: int
    param_count: int
    res_type: int | None = C.ACL_RT_DEV_RES_VECTOR_CORE     # None: an AI CPU function
    op: str = "kernel"          # the task that launches it: "native_kernel" for an Ascend C kernel


@dataclass(eq=False)
class BinaryData:
    """aclrtCreateBinary: a binary's bytes, not loaded on any device yet."""
    handle: int
    data: bytes
    destroyed: bool = False


@dataclass(eq=False)
class ArgsHandle:
    handle: int
    function: Function
    params: list = field(default_factory=list)          # [param handle, bytes | None (placeholder)]
    buffers: dict = field(default_factory=dict)          # placeholder param handle -> its pinned Allocation
    finalized: bool = False


def _print(link, message: tuple) -> None:
    """A kernel's ctx.print output, on the launching process's stdout."""
    sys.stdout.write(message[1])
    sys.stdout.flush()


MESSAGE_HANDLERS["print"] = _print


def _sanitize(link, message: tuple) -> None:
    """What a kernel touched (MDEV_SANITIZE): the sanitizer checks it."""
    if hooks.checker is not None:
        hooks.checker.kernel_report(link.index, message[1])


MESSAGE_HANDLERS["sanitize"] = _sanitize


# ---------------------------------------------------------------------------- launching
def _timeout(cfg) -> float:
    """Seconds of the TIMEOUT / TIMEOUT_US launch attributes (0 = none); they exclude each other."""
    attrs = _attributes(cfg)
    if C.ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT in attrs and C.ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US in attrs:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "TIMEOUT and TIMEOUT_US launch attributes exclude each other")
    if C.ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US in attrs:
        value = attrs[C.ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US]
        if isinstance(value, (tuple, list)):
            value = value[0] | value[1] << 32
        if isinstance(value, dict):
            value = value.get("timeoutLow", 0) | value.get("timeoutHigh", 0) << 32
        return as_int(value, "timeoutUs") / 1e6
    return float(as_int(attrs.get(C.ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT, 0), "timeout"))


def _attributes(cfg) -> dict:
    """aclrtLaunchKernelCfg as pyACL programs pass it: None, {id: value}, [(id, value)] or
    {"attrs": [{"id": .., "value": ..}]}."""
    if cfg is None or cfg == 0:
        return {}
    if isinstance(cfg, dict) and "attrs" in cfg:
        cfg = cfg["attrs"]
    if isinstance(cfg, dict):
        return {as_int(k, "attr id"): v for k, v in cfg.items()}
    out = {}
    for item in cfg:
        if isinstance(item, dict):
            out[as_int(item["id"], "attr id")] = item["value"]
        else:
            out[as_int(item[0], "attr id")] = item[1]
    return out


def _submit(stream, fid: int, num_blocks, args_kind: str, args, placeholders: list, res_type: int,
            timeout_s: float, op: str = "kernel") -> None:
    num_blocks = as_int(num_blocks, "numBlocks")
    if num_blocks <= 0 or num_blocks > 0xFFFFFFFF:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"numBlocks must be 1..UINT32_MAX, got {num_blocks}")
    limit = limits.stream_limit(stream, res_type) if res_type is not None else \
        rt.attach().topology.device(stream.device).aicpu
    timeout_s = timeout_s or held.op_execute_timeout_us / 1e6      # the launch's own, or the process's
    if hooks.checker is not None and stream.recorder is None:
        hooks.checker.watch_kernels(stream.device)
    # host-side address maps the kernel resolves pointers with: pinned buffers, VMM mappings
    seq = streams.submit(stream, op, fid, num_blocks, args_kind, args, placeholders, limit,
                         rt.memory.pinned_map() + vmm.kernel_map(), timeout_s)
    if stream.recorder is None:
        streams.launched(stream, seq)


def _shipped(kernel: "Kernel") -> bytes:
    """The kernel pickled for the device.  Helpers of the kernel's own module go by value
    with it: the device process cannot import a user's module (only ``mdev`` itself)."""
    module = sys.modules.get(getattr(kernel.fn, "__module__", None) or "")
    by_value = module is not None and module.__name__ != "__main__" and not module.__name__.startswith("mdev.")
    if by_value:
        try:
            by_value = module.__name__ not in cloudpickle.list_registry_pickle_by_value()
            if by_value:
                cloudpickle.register_pickle_by_value(module)
        except (ValueError, AttributeError):
            by_value = False
    try:
        return cloudpickle.dumps(kernel)
    finally:
        if by_value:
            cloudpickle.unregister_pickle_by_value(module)


def _registered(kernel: "Kernel", device: int) -> int:
    key = (id(rt.attach()), device)
    fid = kernel.registrations.get(key)
    if fid is None:
        fid = rt.link(device).request("register_kernel", _shipped(kernel))
        kernel.registrations[key] = fid
    return fid


_PLAIN = frozenset({int, float, bool, str, bytes, type(None)})


def _argument_values(args: tuple) -> tuple[str, tuple]:
    """A decorated kernel's arguments as a task carries them.  Frames decode to plain data
    only, so an argument of any other type (a numpy scalar or dtype, an array, an object)
    travels cloudpickled, like the kernel itself, and only the device loads it:
    ("values", args) or ("objects", (args with None in their places, pickled {index: arg}))."""
    if all(type(a) in _PLAIN for a in args):
        return "values", args
    objects = {i: a for i, a in enumerate(args) if type(a) not in _PLAIN}
    return "objects", (tuple(None if i in objects else a for i, a in enumerate(args)),
                       cloudpickle.dumps(objects))


def launch_decorated(kernel: "Kernel", num_blocks, stream, args: tuple) -> int:
    """``kernel[blocks, stream](*args)``: returns the aclError code and sets the last error."""
    try:
        st = rt.stream_in_context(stream)
        kind, values = _argument_values(tuple(args))
        _submit(st, _registered(kernel, st.device), num_blocks, kind, values, [], kernel.res_type, 0.0)
    except AclError as exc:
        record_error(exc.code, exc.message)
        return exc.code
    except Exception as exc:   # e.g. unpicklable arguments
        record_error(E.ACL_ERROR_INVALID_PARAM, f"{kernel.name}: {exc!r}")
        return E.ACL_ERROR_INVALID_PARAM
    return E.ACL_SUCCESS


def _function(handle) -> Function:
    return lookup(held.functions, handle, "function handle of a loaded binary",
                  gone=lambda fn: fn.binary.unloaded, code=E.ACL_ERROR_RT_INVALID_HANDLE)


def _launch_stream(fn: Function, stream):
    st = rt.stream_in_context(stream)
    if st.device != fn.binary.device:
        raise AclError(E.ACL_ERROR_RT_INVALID_HANDLE, f"function {fn.name} was loaded on device "
                       f"{fn.binary.device}; the stream is on device {st.device}")
    return st


def _host_bytes(ptr, nbytes: int, what: str) -> bytes:
    if isinstance(ptr, (bytes, bytearray, memoryview)):
        data = bytes(ptr)
        if len(data) < nbytes:
            raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{what} has {len(data)} bytes, {nbytes} needed")
        return data[:nbytes]
    operand = rt.memory.operand(ptr, nbytes, write=False, what=what)
    if operand.kind == DEVICE:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{what} must be host memory")
    return rt.memory.read(operand)


@api()
def launch_kernel(func, num_blocks, args_data, args_size, stream) -> None:
    launch_kernel_v2(func, num_blocks, args_data, args_size, None, stream)


@api()
def launch_kernel_v2(func, num_blocks, args_data, args_size, cfg, stream) -> None:
    fn = _function(func)
    st = _launch_stream(fn, stream)
    args_size = size(args_size, "argsSize", positive=fn.param_count > 0)
    args = ()
    if args_size:
        operand = rt.memory.operand(args_data, args_size, write=False, what="argsData")
        if operand.kind != DEVICE or operand.device != st.device:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "argsData must be device memory of the stream's device")
        _, dev, offset = operand.location()
        args = (dev, offset, args_size)
    _submit(st, fn.fid, num_blocks, "loc" if args_size else "bytes", args or b"", [],
            fn.res_type, _timeout(cfg), fn.op)


@api()
def launch_kernel_with_host_args(func, num_blocks, stream, cfg, host_args, args_size,
                                 place_holder_array=None, place_holder_num: int = 0) -> None:
    fn = _function(func)
    st = _launch_stream(fn, stream)
    args_size = size(args_size, "argsSize")
    block = _host_bytes(host_args, args_size, "hostArgs") if args_size else b""
    holders = []
    for item in as_list(place_holder_array, "placeHolderArray")[:as_int(place_holder_num, "placeHolderNum")]:
        addr, data = _placeholder(item)
        holders.append((as_int(addr, "addrOffset"), as_int(data, "dataOffset")))
    placeholders = []
    ends = sorted(d for _, d in holders) + [args_size]
    for addr, data in holders:
        end = next(e for e in ends if e > data) if data < args_size else data
        if addr + 8 > args_size or data > args_size:
            raise AclError(E.ACL_ERROR_INVALID_PARAM, f"placeholder ({addr}, {data}) lies outside the {args_size}-byte block")
        placeholders.append((addr, block[data:end]))
    _submit(st, fn.fid, num_blocks, "bytes", block, placeholders, fn.res_type, _timeout(cfg), fn.op)


def _placeholder(item) -> tuple:
    """(addrOffset, dataOffset) of an aclrtPlaceHolderInfo, as a dict or a pair."""
    if isinstance(item, dict) and {"addrOffset", "dataOffset"} <= item.keys():
        return item["addrOffset"], item["dataOffset"]
    if isinstance(item, (list, tuple)) and len(item) == 2:
        return tuple(item)
    raise AclError(E.ACL_ERROR_INVALID_PARAM, "each placeholder is {'addrOffset', 'dataOffset'} or such a pair")


@api()
def launch_kernel_with_args_array(func, num_blocks, stream, cfg, args) -> None:
    """``args``: one entry per parameter, each a host pointer to its 8-byte value or its bytes."""
    fn = _function(func)
    st = _launch_stream(fn, stream)
    values = as_list(args, "args")
    if len(values) != fn.param_count:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{fn.name} takes {fn.param_count} arguments, got {len(values)}")
    block = b"".join(_host_bytes(v, params.SLOT, "args[i]").ljust(params.SLOT, b"\0")[:params.SLOT]
                     for v in values)
    _submit(st, fn.fid, num_blocks, "bytes", block, [], fn.res_type, _timeout(cfg), fn.op)


@api()
def launch_kernel_with_config(func, num_blocks, stream, cfg, args_handle, reserve=None) -> None:
    fn = _function(func)
    st = _launch_stream(fn, stream)
    ah = _args(args_handle)
    if ah.function is not fn:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "the argument handle was made for another function")
    if not ah.finalized:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "finalize the argument handle (kernel_args_finalize) first")
    block, placeholders = b"", []
    for handle, value in ah.params:
        if value is None:
            buffer = ah.buffers.get(handle)
            placeholders.append((len(block), buffer.segment.array[:buffer.size].tobytes() if buffer else b""))
            value = bytes(params.SLOT)
        block += value.ljust(params.slot_size(len(value)), b"\0")
    _submit(st, fn.fid, num_blocks, "bytes", block, placeholders, fn.res_type, _timeout(cfg), fn.op)


# ---------------------------------------------------------------------------- execute timeouts
# A timeout rounds up to whole ticks of the task scheduler (OP_TIMEOUT_INTERVAL_US); a
# launch's own TIMEOUT / TIMEOUT_US attribute takes precedence.


def _set_execute_timeout(timeout_us: int) -> int:
    """The timeout in force for kernels submitted from now on (0 = the longest)."""
    ticks = -(-timeout_us // OP_TIMEOUT_INTERVAL_US) if timeout_us else 254
    actual = min(ticks, 254) * OP_TIMEOUT_INTERVAL_US
    held.op_execute_timeout_us = actual
    return actual


def _uint(value, name: str, bits: int) -> int:
    value = as_int(value, name)
    if not 0 <= value < 1 << bits:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{name} {value} is not a uint{bits}")
    return value


@api()
def set_op_execute_time_out(timeout: int) -> None:
    """aclrtSetOpExecuteTimeOut: seconds, process-wide, last call wins; 0 = the longest."""
    _set_execute_timeout(_uint(timeout, "timeout", 32) * 1_000_000)


@api()
def set_op_execute_time_out_with_ms(timeout: int) -> None:
    _set_execute_timeout(_uint(timeout, "timeout", 32) * 1_000)


@api(1)
def set_op_execute_timeout_v2(timeout: int) -> int:
    """aclrtSetOpExecuteTimeOutV2: microseconds; returns the timeout that took effect."""
    return _set_execute_timeout(_uint(timeout, "timeout", 64))


@api(1)
def get_op_execute_timeout() -> int:
    """The timeout in force, in milliseconds."""
    return held.op_execute_timeout_us // 1000


@api(1)
def get_op_timeout_interval() -> int:
    """The scheduler's timeout tick in microseconds (a device must be set)."""
    rt.current_context()
    return OP_TIMEOUT_INTERVAL_US


# ---------------------------------------------------------------------------- binaries
ELF_MAGIC = b"\x7fELF"


def _load(raw: bytes, filename: str) -> int:
    """Load a binary on the current device: a device image of mdev's ascendc.cmake (an ELF
    shared object, its kernels native), or Python source whose kernels are Python."""
    device = rt.current_context().device
    op = "kernel"
    if raw.startswith(ELF_MAGIC):
        bin_id, entries = rt.link(device).request("load_native", raw, filename)
        op = "native_kernel"
    else:
        try:
            source = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{filename} is neither a device image nor Python source "
                           f"text: {exc}") from exc
        bin_id, entries = rt.link(device).request("load_binary", source, filename)
    binary = Binary(rt.new_handle(BINARY_HANDLES), device, bin_id, [])
    for name, fid, count in entries:
        fn = Function(rt.new_handle(FUNCTION_HANDLES), binary, name, fid, count, op=op)
        binary.functions.append(fn)
        held.functions[fn.handle] = fn
    held.binaries[binary.handle] = binary
    return binary.handle


def _options(options) -> None:
    if options not in (None, 0) and not isinstance(options, (dict, list, tuple)):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "options must be None or a dict/list of load options")


@api(1)
def binary_load_from_file(bin_path: str, options=None) -> int:
    file_path(bin_path, "binPath")
    _options(options)
    path = os.path.abspath(bin_path)        # a relative path is the current directory's, as CANN's
    try:
        raw = read_regular(path, MAX_BINARY_BYTES)
    except OSError as exc:
        raise AclError(E.ACL_ERROR_RT_FILE_OPEN, f"cannot read kernel binary {bin_path}: {exc}") from exc
    return _load(raw, path)


@api(1)
def binary_load_from_data(data, length: int, options=None) -> int:
    length = size(length, "length", positive=True)
    _options(options)
    return _load(_host_bytes(data, length, "data"), "<binary data>")


def _binary(handle) -> Binary:
    return lookup(held.binaries, handle, "loaded binary", gone=lambda b: not isinstance(b, Binary) or b.unloaded,
                  code=E.ACL_ERROR_RT_INVALID_HANDLE)


@api(1)
def binary_get_function(bin_handle, kernel_name: str) -> int:
    binary = _binary(bin_handle)
    for fn in binary.functions:
        if fn.name == kernel_name:
            return fn.handle
    raise AclError(E.ACL_ERROR_RT_KERNEL_LOOKUP, f"the binary has no kernel {kernel_name!r} "
                   f"(it has: {', '.join(f.name for f in binary.functions) or 'none'})")


@api(1)
def binary_get_function_by_entry(bin_handle, func_entry: int) -> int:
    """``funcEntry`` is the kernel's index in the binary's definition order (an mdev choice:
    the real API reserves this call)."""
    binary = _binary(bin_handle)
    entry = as_int(func_entry, "funcEntry")
    if not 0 <= entry < len(binary.functions):
        raise AclError(E.ACL_ERROR_RT_KERNEL_LOOKUP, f"the binary has {len(binary.functions)} kernels, no entry {entry}")
    return binary.functions[entry].handle


def create_binary(data, data_len: int) -> int:
    """aclrtCreateBinary: the binary's bytes (Python source) kept for binary_load; a value,
    no ret (0 when the arguments are bad)."""
    try:
        raw = _host_bytes(data, size(data_len, "dataLen", positive=True), "data")
    except AclError:
        return 0
    return rt.keep(held.binaries, BinaryData(rt.new_handle(BINARY_HANDLES), raw))


def _binary_data(handle) -> BinaryData:
    data = lookup(held.binaries, handle, "binary (aclrtCreateBinary)", code=E.ACL_ERROR_RT_INVALID_HANDLE)
    if not isinstance(data, BinaryData):
        raise AclError(E.ACL_ERROR_RT_INVALID_HANDLE, f"{handle!r} is a loaded binary, not one of create_binary")
    return data


@api()
def destroy_binary(binary) -> None:
    rt.forget(held.binaries, _binary_data(binary))


@api(1)
def binary_load(binary) -> int:
    """aclrtBinaryLoad: load a binary of create_binary on the current device."""
    return _load(_binary_data(binary).data, "<binary data>")


@api(1)
def register_cpu_func(bin_handle, func_name: str, kernel_name: str) -> int:
    """aclrtRegisterCpuFunc: function ``func_name`` of a loaded binary as an AI CPU kernel
    named ``kernel_name`` (it runs on the device's AI CPUs; launch it like any function)."""
    binary = _binary(bin_handle)
    if not isinstance(func_name, str) or not isinstance(kernel_name, str) or not func_name or not kernel_name:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "funcName and kernelName must be non-empty str")
    base = next((f for f in binary.functions if f.name == func_name), None)
    fid = rt.link(binary.device).request("register_cpu_func", binary.bin_id, func_name, kernel_name)
    fn = Function(rt.new_handle(FUNCTION_HANDLES), binary, kernel_name, fid,
                  base.param_count if base is not None else 0, res_type=None)
    binary.functions.append(fn)
    return rt.keep(held.functions, fn)


@api(2)
def get_function_addr(func) -> tuple[int, int]:
    """aclrtGetFunctionAddr: (AI Core entry, Vector Core entry) of a function; the core it does
    not run on gives 0 (an AI CPU function has neither).  The addresses name code: no copy
    or kernel can reach them."""
    fn = _function(func)
    core = rt.link(fn.binary.device).request("function_core", fn.fid)
    entry = address.function_address(fn.binary.device, fn.fid)
    return (entry if core == "cube" else 0), (entry if core == "vector" else 0)


@api()
def binary_unload(bin_handle) -> None:
    binary = _binary(bin_handle)
    binary.unloaded = True
    held.binaries.pop(binary.handle, None)
    for fn in binary.functions:
        held.functions.pop(fn.handle, None)
    # argument handles end with their function, placeholder buffers with them
    for ah in [ah for ah in held.args_handles.values() if ah.function.binary is binary]:
        del held.args_handles[ah.handle]
        for buffer in ah.buffers.values():
            rt.memory.release_pinned(buffer)
    rt.link(binary.device).request("unload_binary", binary.bin_id)


@api(1)
def function_get_param_count(func) -> int:
    return _function(func).param_count


@api(1, failed=None)
def get_function_name(func) -> str:
    return _function(func).name


# ---------------------------------------------------------------------------- argument handles
def _args(handle) -> ArgsHandle:
    return lookup(held.args_handles, handle, "argument handle", code=E.ACL_ERROR_INVALID_PARAM)


@api(1)
def kernel_args_init(func) -> int:
    return rt.keep(held.args_handles, ArgsHandle(rt.new_handle(ARGS_HANDLES), _function(func)))


@api()
def kernel_args_init_by_user_mem(func, args_handle, user_host_mem, actual_args_size: int) -> None:
    """aclrtKernelArgsInitByUserMem: an argument handle kept in the caller's host memory
    (``args_handle``, kernel_args_get_handle_mem_size bytes), whose arguments take
    ``actual_args_size`` bytes of ``user_host_mem``; the handle is then used as any other."""
    fn = _function(func)
    handle = as_int(args_handle, "argsHandle")
    _host_bytes(handle, ARGS_HANDLE_SIZE, "argsHandle")
    _host_bytes(user_host_mem, size(actual_args_size, "actualArgsSize", positive=True), "userHostMem")
    if handle in held.args_handles:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{handle:#x} already holds an argument handle")
    rt.keep(held.args_handles, ArgsHandle(handle, fn))


@api(1)
def kernel_args_get_mem_size(func, user_args_size: int) -> int:
    _function(func)
    return size(user_args_size, "userArgsSize") + ARGS_RUNTIME_EXTRA


@api(1)
def kernel_args_get_handle_mem_size(func) -> int:
    _function(func)
    return ARGS_HANDLE_SIZE


def _append(ah: ArgsHandle, value: bytes | None) -> int:
    if len(ah.params) >= MAX_PARAMS:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"a kernel takes at most {MAX_PARAMS} parameters")
    handle = next(_PARAM_HANDLES)
    ah.params.append([handle, value])
    ah.finalized = False
    return handle


@api(1)
def kernel_args_append(args_handle, param, param_size: int) -> int:
    ah = _args(args_handle)
    nbytes = size(param_size, "paramSize", positive=True)
    return _append(ah, _host_bytes(param, nbytes, "param"))


@api(1)
def kernel_args_append_place_holder(args_handle) -> int:
    return _append(_args(args_handle), None)


@api(1)
def kernel_args_get_place_holder_buffer(args_handle, param_handle, data_size: int) -> int:
    """A runtime-owned host buffer for a placeholder's data (copied to the device at launch)."""
    ah = _args(args_handle)
    if not any(h == param_handle and v is None for h, v in ah.params):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{param_handle!r} is not a placeholder of this handle")
    nbytes = size(data_size, "dataSize", positive=True)
    # pinned memory: the one host memory a C program sees at the same address as the runtime
    # serving it (a host agent: mdev.capi.agent) -- the program writes the data there itself
    buffer = rt.memory.new_pinned(nbytes)
    buffer.held_by = f"argument handle {ah.handle:#x}"
    old = ah.buffers.get(param_handle)
    ah.buffers[param_handle] = buffer
    if old is not None:
        rt.memory.release_pinned(old)
    return buffer.ptr


@api()
def kernel_args_para_update(args_handle, param_handle, param, param_size: int) -> None:
    ah = _args(args_handle)
    for entry in ah.params:
        if entry[0] == param_handle and entry[1] is not None:
            entry[1] = _host_bytes(param, size(param_size, "paramSize", positive=True), "param")
            ah.finalized = False
            return
    raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{param_handle!r} is not an appended parameter of this handle")


@api()
def kernel_args_finalize(args_handle) -> None:
    _args(args_handle).finalized = True


kernel_api.set_launcher(launch_decorated)
