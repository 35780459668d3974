"""Devices and contexts of this process: set/reset, device info, memory info, contexts.

A device's default context (with its default stream) is created by the first
``set_device`` of the process and shared by every thread that sets that device; the
reference count of set/reset decides when it goes away.
"""

from __future__ import annotations

import os

from mdev import constants as C
from mdev import errors as E
from mdev.runtime.boundary import api
from mdev.runtime import hooks
from mdev.errors import AclError
from mdev import status as S
from mdev.memory import address
from mdev.runtime.sync import ipc
from mdev.runtime.memory import memops
from mdev.runtime import streams
from mdev.runtime.devices.device_state import effective_limit
from mdev.runtime.sync import cntnotify, events, notify
from mdev.runtime.core import CONTEXT_HANDLES, Context, Runtime
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.core import lookup
from mdev.runtime.validate import as_int


# this module's part of the runtime's state, made afresh with it (finalize, fork)
held = rt.family(
    sys_params=dict,  # aclrtSetSysParamOpt (process-wide)
    force_reset=set,
)

_DDR_CLASSES = {C.ACL_DDR_MEM, C.ACL_DDR_MEM_HUGE, C.ACL_DDR_MEM_NORMAL,
                C.ACL_DDR_MEM_P2P_HUGE, C.ACL_DDR_MEM_P2P_NORMAL}


def new_context(device: int, default: bool) -> Context:
    ctx = Context(rt.new_handle(CONTEXT_HANDLES), device, default)
    # a device's default context holds the AI Core stacks (aicore_stack_size x AI Cores),
    # reserved by set_device; runtime-owned, so not in the user's allocation table
    ctx.stack, ctx.stack_bytes = _reserve_stack(device) if default else (0, 0)
    try:
        ctx.default_stream = streams.new_stream(ctx, default=True)
    except BaseException:
        _free_stack(ctx)
        raise
    with rt.lock:
        rt.contexts[ctx.handle] = ctx
    return ctx


def _reserve_stack(device: int) -> tuple[int, int]:
    """(address, bytes) of the device's AI Core stacks, reserved for its default context."""
    nbytes = effective_limit(C.ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE) * rt.attach().topology.device(device).aicore
    reserved = address.align_up(nbytes, address.NORMAL_PAGE)
    ptr = rt.link(device).request("malloc", nbytes, reserved, address.NORMAL_PAGE, C.ACL_MEM_MALLOC_NORMAL_ONLY)
    return ptr, reserved


def _free_stack(ctx: Context) -> None:
    ptr, ctx.stack, ctx.stack_bytes = getattr(ctx, "stack", 0), 0, 0
    if ptr:
        try:
            rt.link(ctx.device).request("free", ptr)
        except AclError:
            pass  # the device is gone, and the stack with it


def release_context(ctx: Context, force: bool = False) -> None:
    """Destroy the context's streams -- drained, or with ``force`` ended at once (their
    work dropped and stopped, as destroy_stream_force does) -- and make it unusable."""
    for stream in streams.context_streams(ctx):
        if force:
            try:
                streams.end(stream)
            except AclError:            # the device is gone, and the stream's work with it
                streams.release(stream, drain=False)
        else:
            streams.release(stream, drain=True)
    _free_stack(ctx)
    ctx.destroyed = True
    with rt.lock:
        rt.contexts.pop(ctx.handle, None)
        if rt.default_contexts.get(ctx.device) is ctx:
            del rt.default_contexts[ctx.device]


def release_device_memory(device: int) -> None:
    """Free this process's allocations on a device once it holds no context there."""
    if any(c.device == device for c in rt.contexts.values()):
        return
    link = rt.link(device)
    if hooks.checker is not None:
        hooks.checker.teardown(rt.memory.of_device(device), f"reset_device({device})")
    for alloc in rt.memory.of_device(device):
        if alloc.ipc_key is not None:      # imported from another process: detach, not free
            try:
                ipc.ipc_mem_close(alloc.ipc_key)
            except AclError:
                rt.memory.remove(alloc.ptr)
            continue
        rt.memory.remove(alloc.ptr)
        memops.close_exports(alloc)
        try:
            link.request("free", alloc.ptr)
        except AclError:
            pass


# ---------------------------------------------------------------------------- API
@api()
def set_device(device_id: int) -> None:
    device = rt.check_device(device_id)
    with rt.lock:
        ctx = rt.default_contexts.get(device)
        if ctx is None:
            if not any(c.device == device for c in rt.contexts.values()) and _dead_link(device):
                forget_device(device)     # a stale link from before the device was restarted
            ctx = rt.default_contexts[device] = new_context(device, default=True)
        rt.device_refs[device] = rt.device_refs.get(device, 0) + 1
        held.force_reset.discard(device)
    rt.thread.context = ctx


@api()
def reset_device(device_id: int) -> None:
    device = rt.check_device(device_id)
    with rt.lock:
        count = rt.device_refs.get(device, 0)
        if count <= 0:
            raise AclError(E.ACL_ERROR_RT_CONTEXT_RELEASE_ERROR,
                           f"device {device_id} was reset more often than it was set")
        rt.device_refs[device] = count - 1
        if count == 1:
            if _dead_link(device):
                _recover(device)
            else:
                _release_default(device, force=False)


@api()
def reset_device_force(device_id: int) -> None:
    device = rt.check_device(device_id)
    with rt.lock:
        if rt.device_refs.get(device, 0) <= 0 and not _dead_link(device):
            raise AclError(E.ACL_ERROR_RT_CONTEXT_RELEASE_ERROR,
                           f"device {device_id} holds no default context to reset")
        rt.device_refs[device] = 0
        held.force_reset.add(device)
        if _dead_link(device):
            _recover(device)
        else:
            _release_default(device, force=True)   # the device's work ends, as a reset kills it


# ---------------------------------------------------------------------------- device loss
# A device process that dies (killed, crashed) takes everything on it along: memory,
# streams, events, notifies.  Every call of a process that touches it returns
# ACL_ERROR_RT_SOCKET_CLOSE (507901) until the process resets the device (reset_device down
# to zero, or reset_device_force): that drops the process's handles on the device (they
# become invalid handles), asks the supervisor to fork a fresh device process if none runs
# yet, and the next set_device gets a new default context on it.  Other processes keep
# getting 507901 on their old handles until they reset the device too.

def _dead_link(device: int) -> bool:
    board = rt.board
    link = board.links.get(device) if board is not None else None
    return link is not None and link.dead()


def forget_device(device: int) -> None:
    """Drop every handle this process holds on a device whose process died."""
    with rt.lock:
        for ctx in [c for c in rt.contexts.values() if c.device == device]:
            for stream in streams.context_streams(ctx):
                stream.destroyed = True
                rt.streams.pop(stream.handle, None)
            ctx.streams.clear()
            ctx.destroyed = True
            rt.contexts.pop(ctx.handle, None)
        rt.default_contexts.pop(device, None)
        for handle, stream in list(rt.streams.items()):
            if stream.device == device:
                stream.destroyed = True
                rt.streams.pop(handle, None)
        for table in (events.held.events, notify.held.notifies, cntnotify.held.cnt_notifies):
            for handle, obj in list(table.items()):
                if getattr(obj, "device", None) == device:
                    obj.destroyed = True
                    table.pop(handle, None)
        for alloc in rt.memory.of_device(device):
            rt.memory.remove(alloc.ptr)
        rt.device_refs[device] = 0
        if rt.thread.context is not None and rt.thread.context.destroyed:
            rt.thread.context = None
    rt.board.drop_link(device)


def _recover(device: int) -> None:
    """reset_device(_force) of a dead device: forget it here and have it restarted."""
    forget_device(device)
    rt.attach().request("restart_device", device)


def _release_default(device: int, force: bool) -> None:
    ctx = rt.default_contexts.get(device)
    if ctx is not None:
        release_context(ctx, force)
    release_device_memory(device)
    if rt.thread.context is ctx:
        rt.thread.context = None


@api(1)
def get_device() -> int:
    ctx = rt.thread.context
    if (ctx is None or ctx.destroyed) and rt.default_device is not None:
        return rt.default_device
    return rt.local_device(rt.current_context().device)


@api(1)
def get_device_count() -> int:
    return rt.device_count()


@api(1)
def get_run_mode() -> int:
    return C.ACL_HOST


@api()
def set_ts_device(ts_id: int) -> None:
    if as_int(ts_id, "tsId") not in (C.ACL_TS_ID_AICORE, C.ACL_TS_ID_AIVECTOR):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"unknown task scheduler id {ts_id}")


def get_soc_name() -> str:
    board = rt.attach()
    return board.topology.device(board.devices[0]).soc_name


# getters of (board device index, its topology.Device); a cluster node is a server of the
# super-pod, the device's board index its id across the super-pod, its local id its chip
_DEVICE_INFO = {
    C.ACL_DEV_ATTR_AICPU_CORE_NUM: lambda d, s: s.aicpu,
    C.ACL_DEV_ATTR_AICORE_CORE_NUM: lambda d, s: s.aicore,
    C.ACL_DEV_ATTR_CUBE_CORE_NUM: lambda d, s: s.cube,
    C.ACL_DEV_ATTR_VECTOR_CORE_NUM: lambda d, s: s.vector,
    C.ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE: lambda d, s: s.hbm_bytes,
    C.ACL_DEV_ATTR_L2_CACHE_SIZE: lambda d, s: s.l2_bytes,
    C.ACL_DEV_ATTR_SMP_ID: lambda d, s: 0,
    C.ACL_DEV_ATTR_PHY_CHIP_ID: lambda d, s: rt.local_device(d),
    C.ACL_DEV_ATTR_SUPER_POD_DEVICE_ID: lambda d, s: d,
    C.ACL_DEV_ATTR_SUPER_POD_SERVER_ID: lambda d, s: rt.attach().node.index,
    C.ACL_DEV_ATTR_SUPER_POD_ID: lambda d, s: 0,
    C.ACL_DEV_ATTR_CUST_OP_PRIVILEGE: lambda d, s: 0,
    C.ACL_DEV_ATTR_MAINBOARD_ID: lambda d, s: 0,
    C.ACL_DEV_ATTR_IS_VIRTUAL: lambda d, s: 0,
    C.ACL_DEV_ATTR_NPU_ARCH: lambda d, s: s.npu_arch,
}
# SIMT attributes exist only on Ascend 950 and read 0 elsewhere
for _attr in range(C.ACL_DEV_ATTR_WARP_SIZE, C.ACL_DEV_ATTR_MAX_BLOCK_DIM_Z + 1):
    _DEVICE_INFO[_attr] = lambda d, s: 0
# connect type and form factor are Ascend 950 only: an error on the emulated A2-class parts
_NOT_ON_THIS_SOC = {C.ACL_DEV_ATTR_HD_CONNECT_TYPE, C.ACL_DEV_ATTR_DEVICE_FORM_FACTOR}


@api(1)
def get_device_info(device_id: int, attr: int) -> int:
    device = rt.check_device(device_id)
    attr = as_int(attr, "attr")
    if attr in _NOT_ON_THIS_SOC:
        raise AclError(E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, f"attribute {attr} exists only on Ascend 950")
    getter = _DEVICE_INFO.get(attr)
    if getter is None:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"unknown device attribute {attr}")
    return int(getter(device, rt.attach().topology.device(device)))


@api(2)
def get_mem_info(attr: int) -> tuple[int, int]:
    attr = as_int(attr, "attr")
    if not 0 <= attr <= C.ACL_MEM_P2P_HUGE1G:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"unknown memory attribute {attr}")
    device = rt.current_context().device
    if attr in _DDR_CLASSES:
        return 0, 0    # emulated parts have HBM only
    header = rt.link(device).control.header
    total, used = int(header[S.H_HBM_TOTAL]), int(header[S.H_HBM_USED])
    return total - used, total


@api(1)
def device_get_bare_tgid() -> int:
    return os.getpid()


@api(1)
def get_devices_topo(device_id: int, other_device_id: int) -> int:
    a, b = rt.check_device(device_id), rt.check_device(other_device_id)
    if a == b:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "a device has no topology relation to itself")
    return rt.attach().topology.topo_class(a, b)


# ---------------------------------------------------------------------------- contexts
@api(1)
def create_context(device_id: int) -> int:
    device = rt.check_device(device_id)
    ctx = new_context(device, default=False)
    rt.thread.context = ctx
    return ctx.handle


def _context(handle) -> Context:
    return lookup(rt.contexts, handle, "context")


@api()
def destroy_context(context) -> None:
    ctx = _context(context)
    if ctx.is_default:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "the default context of a device cannot be destroyed")
    release_context(ctx, force=True)      # ends its work: a hung kernel cannot hold the call
    if rt.thread.context is ctx:
        rt.thread.context = None
    release_device_memory(ctx.device)


@api()
def set_context(context) -> None:
    rt.thread.context = _context(context)


@api(1)
def get_context() -> int:
    return rt.current_context().handle


@api(1)
def ctx_get_current_default_stream() -> int:
    return rt.current_context().default_stream.handle


@api(2)
def get_primary_ctx_state(device_id: int) -> tuple[int, int]:
    """(active, flags) in pyACL's order; flags are reserved (0)."""
    device = rt.check_device(device_id)
    return int(device in rt.default_contexts), 0


# ---------------------------------------------------------------------------- system parameters
# aclSysParamOpt -> exclusive upper bound of its value.  A context knows the first three;
# ACL_OPT_ENABLE_KERNEL_EARLY_START exists only process-wide.
_CTX_SYS_PARAMS = {C.ACL_OPT_DETERMINISTIC: 4, C.ACL_OPT_ENABLE_DEBUG_KERNEL: 2,
                   C.ACL_OPT_STRONG_CONSISTENCY: 2}
_SYS_PARAMS = {**_CTX_SYS_PARAMS, C.ACL_OPT_ENABLE_KERNEL_EARLY_START: 2}


def _sys_param(opt, table: dict, where: str) -> int:
    opt = as_int(opt, "opt")
    if opt not in table:
        raise AclError(E.ACL_ERROR_INVALID_PARAM,
                       f"opt {opt} is not a {where} system parameter (valid: {sorted(table)})")
    return opt


def _sys_value(opt: int, value, table: dict) -> int:
    value = as_int(value, "value")
    if not 0 <= value < table[opt]:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID,
                       f"value {value} of system parameter {opt} is out of range [0, {table[opt]})")
    return value


@api()
def ctx_set_sys_param_opt(opt: int, value: int) -> None:
    """aclrtCtxSetSysParamOpt: per context (the calling thread's current one), last write wins."""
    opt = _sys_param(opt, _CTX_SYS_PARAMS, "context")
    value = _sys_value(opt, value, _CTX_SYS_PARAMS)
    rt.current_context().sys_params[opt] = value


@api(1)
def ctx_get_sys_param_opt(opt: int) -> int:
    """No default: an option never set in this context is ACL_ERROR_RT_SYSPARAMOPT_NOT_SET."""
    opt = _sys_param(opt, _CTX_SYS_PARAMS, "context")
    ctx = rt.current_context()
    if opt not in ctx.sys_params:
        raise AclError(E.ACL_ERROR_RT_SYSPARAMOPT_NOT_SET,
                       f"system parameter {opt} was never set in the current context (device {ctx.device})")
    return ctx.sys_params[opt]


@api()
def set_sys_param_opt(opt: int, value: int) -> None:
    """aclrtSetSysParamOpt: process-wide, needs no device."""
    opt = _sys_param(opt, _SYS_PARAMS, "process")
    value = _sys_value(opt, value, _SYS_PARAMS)
    with rt.lock:
        held.sys_params[opt] = value


@api(1)
def get_sys_param_opt(opt: int) -> int:
    """Process-wide value; 0 when never set."""
    return held.sys_params.get(_sys_param(opt, _SYS_PARAMS, "process"), 0)


# ---------------------------------------------------------------------------- peer access
def _pair(device_id: int, peer_device_id: int) -> tuple[int, int]:
    """Board indices of a device and its peer (user ids of this process's node)."""
    device, peer = rt.check_device(device_id), rt.check_device(peer_device_id)
    if device == peer:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"device {device_id} is its own peer")
    return device, peer


@api(1)
def device_can_access_peer(device_id: int, peer_device_id: int) -> int:
    device, peer = _pair(device_id, peer_device_id)
    return int(rt.attach().topology.can_access_peer(device, peer))


@api()
def device_enable_peer_access(peer_device_id: int, flags: int) -> None:
    """Let the current device reach ``peer`` (one direction; the peer needs its own call)."""
    if as_int(flags, "flags") != 0:
        raise AclError(E.ACL_ERROR_FEATURE_UNSUPPORTED, f"flags must be 0, got {flags}")
    current = rt.local_device(rt.current_context().device)
    device, peer = _pair(current, peer_device_id)
    topo = rt.attach().topology
    if not topo.can_access_peer(device, peer):
        route = topo.path(device, peer)
        raise AclError(E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                       f"devices {current} and {peer_device_id} are connected through {route.label}, which does "
                       f"not allow peer access on topology {topo.name!r}")
    with rt.lock:
        if (device, peer) in rt.peer_access:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"peer access {current} -> {peer_device_id} is already enabled")
        rt.peer_access.add((device, peer))


@api()
def device_disable_peer_access(peer_device_id: int) -> None:
    current = rt.local_device(rt.current_context().device)
    device, peer = _pair(current, peer_device_id)
    with rt.lock:
        if (device, peer) not in rt.peer_access:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"peer access {current} -> {peer_device_id} is not enabled")
        rt.peer_access.discard((device, peer))


@api(1)
def device_peer_access_status(device_id: int, peer_device_id: int) -> int:
    device, peer = _pair(device_id, peer_device_id)
    return int((device, peer) in rt.peer_access)


Runtime.open_default_device = staticmethod(set_device)
