"""Notifies (one record releases one wait, across devices) and memory-semantic sync.

A notify lives on the device that created it.  Any device may record it (the recording
device process bumps its own cell of the owner's control page); only streams of the
owning device wait on it, and a released wait clears it.  ``value_write`` / ``value_wait``
are stream tasks on a 64-bit word of device memory; the waiting device re-checks the word
whenever its memory is written and, for writers in other processes, every few ms.
"""

from __future__ import annotations

from dataclasses import dataclass

from mdev import constants as C
from mdev import errors as E
from mdev.runtime.boundary import api
from mdev.runtime import hooks
from mdev.errors import AclError
from mdev.runtime import streams
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.core import lookup
from mdev.runtime.memory.memops import check_reach
from mdev.runtime.memtable import DEVICE
from mdev.runtime.validate import as_int, as_list, size


# this module's part of the runtime's state, made afresh with it (finalize, fork)
held = rt.family(notifies=dict)

NOTIFY_HANDLES = 0xA_0000_0000
_WAIT_FLAGS = (C.ACL_STREAM_WAIT_VALUE_GEQ, C.ACL_STREAM_WAIT_VALUE_EQ,
               C.ACL_STREAM_WAIT_VALUE_AND, C.ACL_STREAM_WAIT_VALUE_NOR)


@dataclass(eq=False)
class Notify:
    handle: int
    device: int
    slot: int
    uid: int
    flags: int
    imported: bool = False      # opened from another process's key: may record, not wait
    ipc_key: str | None = None
    destroyed: bool = False


def get(handle) -> Notify:
    return lookup(held.notifies, handle, "notify handle")


@api(1)
def create_notify(flag: int = 0) -> int:
    flag = as_int(flag, "flag")
    if flag not in (C.ACL_NOTIFY_DEFAULT, C.ACL_NOTIFY_DEVICE_USE_ONLY):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"notify flag must be ACL_NOTIFY_DEFAULT or DEVICE_USE_ONLY, got {flag}")
    return new_notify(rt.current_context().device, flag).handle


def new_notify(device: int, flag: int = C.ACL_NOTIFY_DEFAULT) -> Notify:
    """A notify on ``device`` (also for the runtime's own use: collectives)."""
    slot, uid = rt.link(device).request("create_notify")
    notify = Notify(rt.new_handle(NOTIFY_HANDLES), device, slot, uid, flag)
    with rt.lock:
        held.notifies[notify.handle] = notify
    return notify


@api()
def destroy_notify(notify) -> None:
    n = get(notify)
    rt.forget(held.notifies, n)
    if n.ipc_key is not None:
        rt.attach().request("ipc_close", n.ipc_key)
    if not n.imported:
        rt.link(n.device).request("destroy_notify", n.slot, n.uid)
        if hooks.checker is not None:
            hooks.checker.notify_destroyed(n.device, n.slot)


@api()
def record_notify(notify, stream) -> None:
    n = get(notify)
    st = rt.stream_in_context(stream)
    if n.imported and st.device != n.device and (st.device, n.device) not in rt.peer_access:
        # imported with ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT: enabling peer access is the caller's job
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"device {st.device} cannot reach the notify of device "
                       f"{n.device}: enable peer access (or import with ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS)")
    streams.submit(st, "record_notify", n.device, n.slot)


@api()
def wait_and_reset_notify(notify, stream, timeout: int = 0) -> None:
    """``timeout`` in seconds, 0 = wait forever."""
    n = get(notify)
    st = rt.stream_in_context(stream)
    timeout = as_int(timeout, "timeout")
    if timeout < 0:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"timeout must be >= 0 seconds, got {timeout}")
    if n.imported:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "only the process that created a notify may wait on "
                       "it; importers may only record")
    if st.device != n.device:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"a notify of device {n.device} can only be waited "
                       f"on by a stream of that device (stream is on device {st.device})")
    streams.submit(st, "wait_notify", n.slot, n.uid, timeout or rt.op_wait_timeout)


@api(1)
def get_notify_id(notify) -> int:
    return get(notify).slot


@api()
def notify_batch_reset(notifies, num: int) -> None:
    """aclrtNotifyBatchReset: clear ``num`` notifies of this process at once (host side)."""
    count = size(num, "num", positive=True)
    handles = as_list(notifies, "notifies")
    if len(handles) < count:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"notifies holds {len(handles)} handles, num is {count}")
    by_device: dict[int, list] = {}
    for n in map(get, handles[:count]):
        if n.imported:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "an imported notify is reset by the process that created it")
        by_device.setdefault(n.device, []).append((n.slot, n.uid))
    for device, slots in by_device.items():
        rt.link(device).request("reset_notifies", slots)


# ---------------------------------------------------------------------------- values
def _word(addr, stream, what: str):
    st = rt.stream_in_context(stream)
    operand = rt.memory.operand(addr, 8, write=what == "write", what="devAddr")
    if operand.kind != DEVICE:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"value_{what} needs device memory, got {operand.kind} memory")
    if addr % 8:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"devAddr {addr:#x} is not 8-byte aligned")
    check_reach(st.device, operand)
    return st, operand


@api()
def value_write(dev_addr: int, value: int, flag: int, stream) -> None:
    if as_int(flag, "flag") != 0:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "value_write flag must be 0")
    st, operand = _word(dev_addr, stream, "write")
    streams.submit(st, "value_write", operand.location(), as_int(value, "value") & 0xFFFFFFFFFFFFFFFF)


@api()
def value_wait(dev_addr: int, value: int, flag: int, stream) -> None:
    if as_int(flag, "flag") not in _WAIT_FLAGS:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"value_wait flag must be one of ACL_STREAM_WAIT_VALUE_*, got {flag}")
    st, operand = _word(dev_addr, stream, "wait")
    streams.submit(st, "value_wait", operand.location(), as_int(value, "value") & 0xFFFFFFFFFFFFFFFF,
                   flag, rt.op_wait_timeout)
