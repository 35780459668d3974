"""Counting notifies (aclrtCntNotifyCreate .. aclrtCntNotifyDestroy): a uint32 counter on
the device that created it, which its streams set / add to / OR / AND into, and whose
value other streams of that device wait for (mdev.board.cntnotify runs them).

    record info  {"mode": ACL_RT_CNT_NOTIFY_RECORD_*_MODE, "value": v}
    wait info    {"mode": ACL_RT_CNT_NOTIFY_WAIT_*_MODE, "value": v, "timeout": seconds
                  (0: set_op_wait_timeout's, or forever), "isClear": 1 to zero it after}

pyACL has no counting notifies; these are mdev's ``acl.rt.cnt_notify_*`` (the C names).
"""

from __future__ import annotations

from dataclasses import dataclass

from mdev import errors as E
from mdev.errors import AclError
from mdev.runtime import streams
from mdev.runtime.boundary import api
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.core import lookup
from mdev.runtime.validate import as_int
from mdev.taskspec import CNT_MASK, CNT_RECORD, CNT_RELEASED


# this module's part of the runtime's state, made afresh with it (finalize, fork)
held = rt.family(cnt_notifies=dict)

HANDLES = 0xCA_0000_0000


@dataclass(eq=False)
class CntNotify:
    handle: int
    device: int
    slot: int
    uid: int
    destroyed: bool = False


def _get(handle) -> CntNotify:
    return lookup(held.cnt_notifies, handle, "counting notify")


def _on(handle, stream):
    n = _get(handle)
    st = rt.stream_in_context(stream)
    if st.device != n.device:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"the counting notify belongs to device {n.device}; "
                       f"the stream is on device {st.device}")
    return n, st


def _info(info, modes: dict, keys: tuple) -> list[int]:
    if not isinstance(info, dict):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"info must be a dict with {', '.join(keys)}")
    values = [as_int(info.get(k, 0), k) for k in keys]
    if values[0] not in modes:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"mode {values[0]} is not one of {sorted(modes)}")
    if not 0 <= values[1] <= CNT_MASK:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"value {values[1]} is not a uint32")
    return values


@api(1)
def cnt_notify_create(flag: int = 0) -> int:
    if as_int(flag, "flag") != 0:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "flag is reserved: pass 0")
    device = rt.current_context().device
    slot, uid = rt.link(device).request("create_cnt_notify")
    return rt.keep(held.cnt_notifies, CntNotify(rt.new_handle(HANDLES), device, slot, uid))


@api()
def cnt_notify_destroy(cnt_notify) -> None:
    n = _get(cnt_notify)
    rt.forget(held.cnt_notifies, n)
    rt.link(n.device).request("destroy_cnt_notify", n.slot, n.uid)


@api()
def cnt_notify_record(cnt_notify, stream, info) -> None:
    n, st = _on(cnt_notify, stream)
    mode, value = _info(info, CNT_RECORD, ("mode", "value"))
    streams.submit(st, "cnt_notify_record", n.slot, n.uid, mode, value)


@api()
def cnt_notify_wait_with_timeout(cnt_notify, stream, info) -> None:
    n, st = _on(cnt_notify, stream)
    mode, value, timeout, clear = _info(info, CNT_RELEASED, ("mode", "value", "timeout", "isClear"))
    if timeout < 0 or clear not in (0, 1):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "timeout is seconds >= 0 and isClear 0 or 1")
    streams.submit(st, "cnt_notify_wait", n.slot, n.uid, mode, value, timeout or rt.op_wait_timeout, bool(clear))


@api()
def cnt_notify_reset(cnt_notify, stream) -> None:
    n, st = _on(cnt_notify, stream)
    streams.submit(st, "cnt_notify_reset", n.slot, n.uid)


@api(1)
def cnt_notify_get_id(cnt_notify) -> int:
    return _get(cnt_notify).slot
