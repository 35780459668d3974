"""Counting notifies (aclrtCntNotify*) inside a device process.

    request create_cnt_notify -> (slot, uid)     a uint32 counter, 0 at first
    task cnt_notify_record(slot, uid, mode, v)   counter := v, += v, |= v or &= v
    task cnt_notify_wait(slot, uid, mode, v, timeout_s, clear)
                                                 hold the stream until counter < v, == v, > v,
                                                 >= v or has every bit of v; 0 after if asked
    task cnt_notify_reset(slot, uid)             counter := 0

Counters live in the device process (its streams alone record and wait on them), changed
and tested under the device lock, so of several waiters each sees a consistent counter.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from mdev import errors as E
from mdev.board.tasks import feature_state
from mdev.board.tasktable import op, request
from mdev.errors import AclError
from mdev.taskspec import CNT_RECORD, CNT_RELEASED

if TYPE_CHECKING:
    from mdev.board.device import Device
    from mdev.board.stream import DeviceStream

LIMIT = 8192
_uids = itertools.count(1)

def _counters(device: "Device") -> dict:
    """slot -> [uid, client, counter]"""
    return feature_state(device, "cnt_notifies")


@request
def create_cnt_notify(device: "Device", conn) -> tuple[int, int]:
    counters = _counters(device)
    with device.lock:
        for slot in [s for s, (_, client, _) in counters.items() if client not in device.clients]:
            del counters[slot]           # counters of processes that detached
        free = next((s for s in range(LIMIT) if s not in counters), None)
        if free is None:
            raise AclError(E.ACL_ERROR_RT_NO_NOTIFY_RESOURCE, f"device {device.index}: all {LIMIT} counting "
                           "notifies are in use")
        uid = next(_uids)
        counters[free] = [uid, conn.client, 0]
    return free, uid


@request
def destroy_cnt_notify(device: "Device", conn, slot: int, uid: int) -> None:
    counters = _counters(device)
    with device.lock:
        if counters.get(slot, [None])[0] == uid:
            del counters[slot]
        device.progress.notify_all()      # waits on it are released


def _live(device: "Device", slot: int, uid: int) -> list | None:
    entry = _counters(device).get(slot)
    return entry if entry is not None and entry[0] == uid else None


@op(quick=lambda args: True)
def cnt_notify_record(device: "Device", stream: "DeviceStream", slot: int, uid: int, mode: int, value: int) -> None:
    with device.lock:
        entry = _live(device, slot, uid)
        if entry is not None:
            entry[2] = CNT_RECORD[mode](entry[2], value)
    device.wake()


@op(quick=lambda args: True)
def cnt_notify_reset(device: "Device", stream: "DeviceStream", slot: int, uid: int) -> None:
    with device.lock:
        entry = _live(device, slot, uid)
        if entry is not None:
            entry[2] = 0
    device.wake()


@op()
def cnt_notify_wait(device: "Device", stream: "DeviceStream", slot: int, uid: int, mode: int, value: int,
                    timeout_s: float, clear: bool) -> None:
    test = CNT_RELEASED[mode]

    def released() -> bool:       # evaluated under the device lock (wait_until)
        entry = _live(device, slot, uid)
        if entry is None:
            return True           # destroyed: the wait is over
        if not test(entry[2], value):
            return False
        if clear:
            entry[2] = 0
        return True

    device.wait_until(stream, released, timeout_s, f"counting notify {slot}")
