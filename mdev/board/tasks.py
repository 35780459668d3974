"""What a device does when a stream task reaches the head of its stream.

Each op is a function ``op(device, stream, *args)`` registered in ``OPS``; it raises
``TaskFault`` to fail the task (the failure surfaces at the next synchronisation).
Memory operands arrive as locations resolved by the host:

    ("d", device, offset)    HBM of a device (this one or a peer mapped for P2P)
    ("p", segment, offset)   a host process's pinned buffer (shared segment)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from mdev import errors as E

if TYPE_CHECKING:
    from mdev.board.device import Device
    from mdev.board.stream import DeviceStream


class TaskFault(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


OPS: dict[str, Callable] = {}
REQUESTS: dict[str, Callable] = {}


def request(fn: Callable) -> Callable:
    """Register a device request handler ``fn(device, conn, *args)`` by its name, for features
    that live outside device.py (graphs, ...); its return value is the reply."""
    REQUESTS[fn.__name__] = fn
    return fn


QUICK_BYTES = 64 << 10


def op(engine: str | None, quick: Callable[[tuple], bool] | None = None):
    """Register a task op; ``engine`` names the engine it occupies while running, ``quick``
    says (from its arguments) whether it is short enough for the dispatcher to run it
    itself when its stream is idle, saving the hand-over to the stream's worker."""
    def register(fn: Callable) -> Callable:
        fn.engine = engine
        fn.quick = quick or (lambda args: False)
        OPS[fn.__name__] = fn
        return fn
    return register


def _always(args: tuple) -> bool:
    return True


@op("dma", quick=lambda args: args[2] <= QUICK_BYTES)
def copy(device: "Device", stream: "DeviceStream", dst: tuple, src: tuple, nbytes: int) -> None:
    np.copyto(device.view(dst, nbytes, write=True), device.view(src, nbytes))
    device.on_memory_written(dst)


@op("dma", quick=lambda args: args[4] * args[5] <= QUICK_BYTES)
def copy2d(device: "Device", stream: "DeviceStream", dst: tuple, dpitch: int, src: tuple,
           spitch: int, width: int, height: int) -> None:
    dst_rows = _rows(device.view(dst, dpitch * (height - 1) + width, write=True), dpitch, width, height)
    src_rows = _rows(device.view(src, spitch * (height - 1) + width), spitch, width, height)
    np.copyto(dst_rows, src_rows)
    device.on_memory_written(dst)


@op("dma", quick=lambda args: args[2] <= QUICK_BYTES)
def memset(device: "Device", stream: "DeviceStream", dst: tuple, value: int, nbytes: int) -> None:
    device.view(dst, nbytes, write=True).fill(value & 0xFF)
    device.on_memory_written(dst)


def _rows(flat: np.ndarray, pitch: int, width: int, height: int) -> np.ndarray:
    return np.lib.stride_tricks.as_strided(flat, shape=(height, width), strides=(pitch, 1))


def dma_fault(message: str) -> TaskFault:
    return TaskFault(E.ACL_ERROR_RT_SYS_DMA, message)


# ---------------------------------------------------------------------------- events
@op(None, quick=_always)
def record_event(device: "Device", stream: "DeviceStream", slot: int, uid: int) -> None:
    control = device.control
    if device.events.get(slot) != uid:
        return  # destroyed while the record was queued: nothing observes it any more
    control.event_ts[slot] = device.now_ns()
    control.event_done[slot] += 1
    device.wake()


@op(None, quick=_always)
def reset_event(device: "Device", stream: "DeviceStream", slot: int, uid: int) -> None:
    if device.events.get(slot) == uid:
        device.control.event_reset[slot] = device.control.event_done[slot]


@op(None)
def wait_event(device: "Device", stream: "DeviceStream", slot: int, uid: int, target: int,
               timeout_s: float) -> None:
    """Snapshot wait: until the event's first ``target`` records have executed."""
    done = device.control.event_done
    device.wait_until(stream, lambda: device.events.get(slot) != uid or done[slot] >= target,
                      timeout_s, f"event {slot}")


@op(None)
def wait_remote_event(device: "Device", stream: "DeviceStream", owner: int, slot: int, target: int,
                      timeout_s: float) -> None:
    """Wait for an IPC event of another device, watching that device's control page."""
    done = device.peer_control(owner).event_done
    device.wait_until(stream, lambda: done[slot] >= target, timeout_s, f"event {slot} of device {owner}")


@op(None)
def wait_event_flag(device: "Device", stream: "DeviceStream", slot: int, uid: int, timeout_s: float) -> None:
    """Flag wait (graph replays): until a record executes after the latest reset."""
    c = device.control
    device.wait_until(stream, lambda: device.events.get(slot) != uid or c.event_done[slot] > c.event_reset[slot],
                      timeout_s, f"event {slot}")


# ---------------------------------------------------------------------------- notify
@op(None, quick=_always)
def record_notify(device: "Device", stream: "DeviceStream", owner: int, slot: int) -> None:
    page = device.peer_control(owner)
    # several streams of this device, and other devices, may record the same notify
    with device.lock, page.record_lock(slot):
        page.notify_rec[slot] += 1
    device.wake()


@op(None)
def wait_notify(device: "Device", stream: "DeviceStream", slot: int, uid: int, timeout_s: float) -> None:
    c = device.control

    def take() -> bool:
        """Consume the notify if it is set.  wait_until evaluates this holding the device
        lock, so of several streams waiting on one notify exactly one takes a record."""
        if device.notifies.get(slot) != uid:
            return True          # destroyed: the wait is released
        recorded = c.notify_rec[slot]
        if recorded > c.notify_taken[slot]:
            c.notify_taken[slot] = recorded   # auto-reset: one record, one wait
            return True
        return False

    device.wait_until(stream, take, timeout_s, f"notify {slot}")


# ---------------------------------------------------------------------------- values
_VALUE_TESTS = {
    0: lambda cur, v: ((cur - v) & 0xFFFFFFFFFFFFFFFF) < (1 << 63),   # GEQ: (int64)(cur - v) >= 0
    1: lambda cur, v: cur == v,                                          # EQ
    2: lambda cur, v: (cur & v) != 0,                                    # AND
    3: lambda cur, v: (~(cur | v)) & 0xFFFFFFFFFFFFFFFF != 0,            # NOR
}


@op(None, quick=_always)
def value_write(device: "Device", stream: "DeviceStream", dst: tuple, value: int) -> None:
    device.view(dst, 8, write=True).view(np.uint64)[0] = value
    device.on_memory_written(dst)


@op(None)
def value_wait(device: "Device", stream: "DeviceStream", src: tuple, value: int, flag: int,
               timeout_s: float) -> None:
    word = device.view(src, 8).view(np.uint64)
    test = _VALUE_TESTS[flag]
    device.wait_until(stream, lambda: test(int(word[0]), value), timeout_s, f"value at {src}")
    if device.trace is not None:     # which write it saw: flow arrow, modelled time (mdev.board.trace)
        device.trace.note_release(stream, src, lambda cur: test(cur, value))


# ---------------------------------------------------------------------------- host callbacks
@op(None)
def host_callback(device: "Device", stream: "DeviceStream", callback: int, block: bool) -> None:
    """Ask the submitting process to run a callback; a blocking one holds the stream."""
    device.run_host_callback(stream, callback, block)
