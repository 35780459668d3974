"""Sharing between host processes: IPC memory keys, IPC event handles, IPC notify keys.

    process A: export (ptr range / event / notify) --> supervisor registry --> key
    process B: import(key) --> registry checks (open, pid list) --> the same device memory,
               event slot or notify slot, now usable from B

Imported memory keeps the exporter's device address, so the pointer B gets is the one A
has; the device keeps it alive until every importer closed it, even after A's free.
"""

from __future__ import annotations

from mdev import constants as C
from mdev import errors as E
from mdev.errors import AclError
from mdev.memory import address
from mdev.runtime import streams
from mdev.runtime.boundary import api
from mdev.runtime.sync import events, notify
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.memtable import DEVICE, Allocation
from mdev.runtime.validate import as_int, as_list, size

KEY_LEN = 65
IPC_EVENT_HANDLE_SIZE = C.ACL_IPC_EVENT_HANDLE_SIZE


def _key_len(key_len) -> None:
    if as_int(key_len, "len") < KEY_LEN:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"key buffer length must be at least {KEY_LEN}, got {key_len}")


def _key(key) -> str:
    """An IPC key as the user passes it back: a str (an unknown one is the board's to refuse)."""
    if not isinstance(key, str) or not key:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"key must be the str of an export, got {type(key).__name__}")
    return key


def _pids(pids) -> list[int]:
    if isinstance(pids, int):
        pids = [pids]
    return [as_int(p, "pid") for p in as_list(pids, "pids")]


def _reach(device: int, enable: bool) -> None:
    """The importer's current device must reach ``device``: enable peer access if asked to."""
    current = rt.current_context().device
    if current == device or (current, device) in rt.peer_access:
        return
    if enable and rt.attach().topology.can_access_peer(current, device):
        rt.peer_access.add((current, device))
        return
    raise AclError(E.ACL_ERROR_RT_PARAM_INVALID if not enable else E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                   f"device {current} cannot reach memory of device {device}: enable peer access "
                   f"(or pass the ENABLE_PEER_ACCESS import flag where the topology allows it)")


# ---------------------------------------------------------------------------- IPC memory
@api(1, failed=None)
def ipc_mem_get_export_key(dev_ptr: int, size_: int, key_len: int, flags: int) -> str:
    _key_len(key_len)
    flags = as_int(flags, "flags")
    if flags not in (C.ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT, C.ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"unknown export flags {flags:#x}")
    nbytes = size(size_, "size", positive=True)
    alloc = rt.memory.containing(as_int(dev_ptr, "devPtr"))
    if alloc is None or alloc.kind != DEVICE or alloc.ipc_key is not None:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{dev_ptr:#x} is not device memory this process allocated")
    # page-table alignment: sharing part of a page would leak its neighbours' data
    if (dev_ptr - alloc.ptr) % alloc.page or nbytes % alloc.page:
        raise AclError(E.ACL_ERROR_RT_ADDR_UNALIGNED, f"IPC ranges must be whole {alloc.page}-byte pages of "
                       f"the allocation (devPtr offset {dev_ptr - alloc.ptr}, size {nbytes})")
    if dev_ptr + nbytes > alloc.ptr + alloc.reserved:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{nbytes} bytes at {dev_ptr:#x} overrun the allocation")
    offset = dev_ptr - address.device_base(alloc.device)
    validate = flags != C.ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION
    key = rt.attach().request("ipc_export", "mem", alloc.device, (offset, nbytes), validate)
    alloc.exports = (alloc.exports or []) + [key]     # free closes it
    return key


@api()
def ipc_mem_set_import_pid(key: str, pids) -> None:
    rt.attach().request("ipc_set_pids", _key(key), _pids(pids))


@api(1)
def ipc_mem_import_by_key(key: str, flags: int) -> int:
    flags = as_int(flags, "flags")
    if flags not in (C.ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT, C.ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"unknown import flags {flags:#x}")
    key, board = _key(key), rt.attach()
    info = board.request("ipc_import", key, "mem")
    device, (offset, nbytes) = info["device"], info["detail"]
    ptr = address.device_base(device) + offset
    try:
        if info["owner"] or rt.memory.containing(ptr) is not None:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "this process already maps that memory")
        _reach(device, flags == C.ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS)
        rt.link(device).request("ipc_attach", offset, nbytes, info["seal"])
    except AclError:
        board.request("ipc_close", key)
        raise
    rt.memory.add(Allocation(ptr, nbytes, DEVICE, device, reserved=nbytes, ipc_key=key))
    return ptr


@api()
def ipc_mem_close(key: str) -> None:
    key, board = _key(key), rt.attach()
    imported = next((a for a in rt.memory.allocations() if a.ipc_key == key), None)
    if imported is not None:
        streams.after_launches({imported.device})
    role = board.request("ipc_close", key)
    if role == "exporter":
        for alloc in rt.memory.allocations():
            if alloc.exports and key in alloc.exports:
                alloc.exports = [k for k in alloc.exports if k != key]
    if role == "importer" and imported is not None:
        rt.memory.remove(imported.ptr)
        rt.link(imported.device).request("ipc_detach", imported.ptr - address.device_base(imported.device))


# ---------------------------------------------------------------------------- IPC events
@api(1, failed=None)
def ipc_get_event_handle(event) -> bytes:
    ev = events.get(event)
    if ev.api != events.EX or ev.flags != C.ACL_EVENT_IPC:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "only events from create_event_ex_with_flag(ACL_EVENT_IPC) "
                       "can be shared")
    if ev.ipc_key is None:
        # the device learns of a new event in order with this process's tasks: have it
        # handled before another process can name it
        rt.link(ev.device).request("lease", "event", 0, [])
        ev.ipc_key = rt.attach().request("ipc_export", "event", ev.device, (ev.slot, ev.uid), False)
    return ev.ipc_key.encode().ljust(IPC_EVENT_HANDLE_SIZE, b"\0")


@api(1)
def ipc_open_event_handle(handle) -> int:
    if isinstance(handle, (bytes, bytearray)):
        handle = bytes(handle).rstrip(b"\0").decode(errors="replace")
    info = rt.attach().request("ipc_import", _key(handle), "event")
    slot, uid = info["detail"]
    ev = events.Event(rt.new_handle(events.EVENT_HANDLES), info["device"], slot, uid, C.ACL_EVENT_IPC,
                      events.EX, opened=handle)
    events.held.events[ev.handle] = ev
    return ev.handle


# ---------------------------------------------------------------------------- IPC notify
@api(1, failed=None)
def notify_get_export_key(notify_handle, key_len: int, flags: int) -> str:
    _key_len(key_len)
    flags = as_int(flags, "flags")
    if flags not in (C.ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT, C.ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"unknown export flags {flags:#x}")
    n = notify.get(notify_handle)
    if n.imported:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "an imported notify cannot be exported again")
    if n.ipc_key is None:
        validate = flags != C.ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION
        n.ipc_key = rt.attach().request("ipc_export", "notify", n.device, (n.slot, n.uid), validate)
    return n.ipc_key


@api()
def notify_set_import_pid(notify_handle, pids) -> None:
    n = notify.get(notify_handle)
    if n.ipc_key is None:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "export the notify (notify_get_export_key) first")
    rt.attach().request("ipc_set_pids", n.ipc_key, _pids(pids))


@api(1)
def notify_import_by_key(key: str, flags: int) -> int:
    flags = as_int(flags, "flags")
    if flags not in (C.ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT, C.ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"unknown import flags {flags:#x}")
    info = rt.attach().request("ipc_import", _key(key), "notify")
    slot, uid = info["detail"]
    if flags == C.ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS:
        _reach(info["device"], True)
    n = notify.Notify(rt.new_handle(notify.NOTIFY_HANDLES), info["device"], slot, uid, 0,
                      imported=True, ipc_key=key)
    notify.held.notifies[n.handle] = n
    return n.handle
