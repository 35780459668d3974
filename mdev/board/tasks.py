"""The basic tasks a device runs when they reach the head of their stream: copies, memsets,
events, notifies, value writes and waits, host callbacks; and what the task modules above
the device share (``feature_state``, the collectives' ``CommGuard``).

Each op is a function ``op(device, stream, *args)`` registered in mdev.board.tasktable's
``OPS``; it raises ``TaskFault`` to fail the task (the failure surfaces at the next
synchronisation).  Memory operands arrive as locations resolved by the host:

    ("d", device, offset)    HBM of a device (this one or a peer mapped for P2P)
    ("p", segment, offset)   a host process's pinned buffer (shared segment)
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

import numpy as np

from mdev import dtypes
from mdev import errors as E
from mdev.board.hbm import DeviceMemory
from mdev.board.tasktable import TaskFault, op, request
from mdev.errors import AclError
from mdev.procfs import process_gone
from mdev.taskspec import COMM_LEFT, COMM_PARA, COMM_REMOTE, COMM_TIMEOUT, tensor_extent

if TYPE_CHECKING:
    from mdev.board.device import Device
    from mdev.board.stream import DeviceStream


def feature_state(device: "Device", name: str) -> dict:
    """The device's table for a feature that lives outside device.py (stored graphs,
    overflow status, ...), made on first use."""
    table = getattr(device, name, None)
    if table is None:
        with device.lock:
            table = device.__dict__.setdefault(name, {})
    return table


QUICK_BYTES = 64 << 10


def _always(args: tuple) -> bool:
    return True


# Up to this size a write into the device's own HBM is a slice assignment of its memoryview
# (about 0.13 us for 4 bytes, against 0.27 us for a numpy view and its fill); larger ones
# use numpy, whose fill and copy need no bytes object of the size.
SMALL_BYTES = 4096
_BYTE = [bytes([value]) for value in range(256)]
# their check, called as the plain function: no bound method is made for each task
_check_own = DeviceMemory.check_own


@op(quick=lambda args: args[2] <= QUICK_BYTES)
def copy(device: "Device", stream: "DeviceStream", dst: tuple, src: tuple, nbytes: int) -> None:
    memory = device.memory
    index = memory.index
    if nbytes <= SMALL_BYTES and dst[1] == index and src[1] == index and dst[0] == "d" and src[0] == "d":
        client, to, at = stream.client, dst[2], src[2]
        _check_own(memory, to, nbytes, client)
        _check_own(memory, at, nbytes, client)
        hbm = memory.hbm_bytes
        hbm[to:to + nbytes] = hbm[at:at + nbytes]     # the same as np.copyto when they overlap
    else:
        np.copyto(memory.view(dst, nbytes, stream, write=True), memory.view(src, nbytes, stream))
    device.wake()


@op(quick=lambda args: args[4] * args[5] <= QUICK_BYTES)
def copy2d(device: "Device", stream: "DeviceStream", dst: tuple, dpitch: int, src: tuple,
           spitch: int, width: int, height: int) -> None:
    dst_rows = _rows(device.memory.view(dst, dpitch * (height - 1) + width, stream, write=True), dpitch, width, height)
    src_rows = _rows(device.memory.view(src, spitch * (height - 1) + width, stream), spitch, width, height)
    np.copyto(dst_rows, src_rows)
    device.wake()


@op()
def copy_strided(device: "Device", stream: "DeviceStream", dst: tuple, dst_strides: tuple, src: tuple,
                 src_strides: tuple, shape: tuple, data_type: int) -> None:
    """A tensor copy between two layouts of one shape (strides in elements): what the
    operator library's view copies run.  The source may repeat elements (a stride of 0),
    the destination may not: its bytes bound the work."""
    out = _tensor(device, stream, dst, shape, dst_strides, data_type, True)
    if overlaps(shape, dst_strides):
        raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"copy_strided: two of the destination's elements share a "
                        f"location (shape {shape!r:.60}, strides {dst_strides!r:.60})")
    np.copyto(out, _tensor(device, stream, src, shape, src_strides, data_type, False))
    device.wake()


def tensor_bytes(device: "Device", stream: "DeviceStream", where: tuple, shape: tuple, strides: tuple,
                 data_type: int, write: bool) -> np.ndarray:
    """The bytes a tensor operand spans (uint8), once it is checked to be a tensor: a view of
    them reaches no byte outside.  A broadcast view (a stride of 0) may have more elements
    than bytes, never more than a whole HBM could hold: the bound keeps a hostile shape from
    holding the device (the copy tasks' and the operator tasks' tensors alike)."""
    if not (type(shape) is tuple and type(strides) is tuple and len(shape) == len(strides)
            and all(type(n) is int and n >= 0 for n in (*shape, *strides)) and data_type in dtypes.DTYPES):
        raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"tensor operand: shape {shape!r:.60}, strides "
                        f"{strides!r:.60}, data type {data_type!r:.20} are not a tensor's")
    if math.prod(shape) > device.memory.hbm.size:
        raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"tensor operand of shape {shape!r:.60} has more elements "
                        f"than device {device.index}'s HBM has bytes")
    return device.memory.view(where, tensor_extent(shape, strides, data_type), stream, write=write)


def overlaps(shape: tuple, strides: tuple) -> bool:
    """Whether two elements of a tensor (strides in elements, none below zero) share a
    location.  Strides that nest (each above the span of the smaller ones) answer at once;
    any other layout is settled by its offsets, as a copy into it touches each anyway."""
    dims = sorted((s, n) for n, s in zip(shape, strides) if n != 1)
    if any(n == 0 for _, n in dims):
        return False
    span = 0
    for stride, n in dims:
        if stride <= span:
            break
        span += stride * (n - 1)
    else:
        return False
    offsets = np.zeros(1, np.int64)
    for stride, n in dims:
        offsets = (offsets[:, None] + stride * np.arange(n, dtype=np.int64)).ravel()
    return len(np.unique(offsets)) < len(offsets)


def _tensor(device: "Device", stream: "DeviceStream", where: tuple, shape: tuple, strides: tuple,
            data_type: int, write: bool) -> np.ndarray:
    """The elements of a tensor operand as a strided view of its bytes (tensor_bytes)."""
    raw = tensor_bytes(device, stream, where, shape, strides, data_type, write)
    dtype = dtypes.storage(data_type)
    return np.lib.stride_tricks.as_strided(raw.view(dtype), shape=shape,
                                           strides=tuple(s * dtype.itemsize for s in strides))


@op(quick=lambda args: args[2] <= QUICK_BYTES)
def memset(device: "Device", stream: "DeviceStream", dst: tuple, value: int, nbytes: int) -> None:
    memory = device.memory
    if nbytes <= SMALL_BYTES and dst[1] == memory.index and dst[0] == "d":
        offset = dst[2]
        _check_own(memory, offset, nbytes, stream.client)
        memory.hbm_bytes[offset:offset + nbytes] = _BYTE[value & 0xFF] * nbytes
    else:
        memory.view(dst, nbytes, stream, write=True).fill(value & 0xFF)
    if device.watchers:         # wake()'s own look, here: a call less per small memset
        device.wake()


@op(quick=lambda args: args[2] <= QUICK_BYTES)
def fill32(device: "Device", stream: "DeviceStream", dst: tuple, value: int, nbytes: int) -> None:
    """aclrtMemsetD32Async: 32-bit words of ``value``."""
    device.memory.view(dst, nbytes, stream, write=True).view(np.uint32).fill(value)
    device.wake()


@op()
def copy_desc(device: "Device", stream: "DeviceStream", desc: tuple, base: int) -> None:
    """aclrtMemcpyAsyncWithDesc: source, destination and size are read from the descriptor
    (device memory) when the task runs."""
    src, dst, nbytes, _ = (int(v) for v in device.memory.view(desc, 32, stream).view(np.uint64))
    if nbytes:
        copy(device, stream, ("d", device.index, dst - base), ("d", device.index, src - base), nbytes)


@op(quick=_always)
def cmo(device: "Device", stream: "DeviceStream", where: tuple, nbytes: int, kind: int) -> None:
    """aclrtCmoAsync: no caches to maintain; the memory must still be there."""
    device.memory.view(where, nbytes, stream)


def _rows(flat: np.ndarray, pitch: int, width: int, height: int) -> np.ndarray:
    return np.lib.stride_tricks.as_strided(flat, shape=(height, width), strides=(pitch, 1))


# ---------------------------------------------------------------------------- events
@op(quick=_always)
def record_event(device: "Device", stream: "DeviceStream", slot: int, uid: int) -> None:
    control = device.control
    if device.events.get(slot) != uid:
        return  # destroyed while the record was queued: nothing observes it any more
    control.event_ts[slot] = device.now_ns()
    control.event_done[slot] += 1
    device.wake()


@op(quick=_always)
def reset_event(device: "Device", stream: "DeviceStream", slot: int, uid: int) -> None:
    if device.events.get(slot) == uid:
        device.control.event_reset[slot] = device.control.event_done[slot]


@op(quick=_always)
def record_remote_event(device: "Device", stream: "DeviceStream", owner: int, slot: int) -> None:
    """A record of another device's IPC event (an importing process's stream records it):
    counted on the owner's page, among the records of other devices."""
    page = device.memory.peer_control(owner)
    # several streams of this device, and other devices, may record the same event
    with device.lock, page.remote_lock(slot):
        page.event_remote[slot] += 1
    if owner != device.index:
        page.ring()
    device.wake()


@request
def event_issue(device: "Device", conn, slot: int, uid: int) -> int:
    """Number the next record of an event shared over IPC: every process recording it
    counts here, so waiters in any process see the latest record as their target."""
    with device.lock:
        if device.events.get(slot) != uid:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"event {slot} of device {device.index} was destroyed")
        device.control.event_issued[slot] += 1
        return int(device.control.event_issued[slot])


@op()
def wait_event(device: "Device", stream: "DeviceStream", slot: int, uid: int, target: int,
               timeout_s: float) -> None:
    """Snapshot wait: until the event's first ``target`` records have executed."""
    page = device.control
    device.wait_until(stream, lambda: device.events.get(slot) != uid or page.event_count(slot) >= target,
                      timeout_s, f"event {slot}", woken=True)


@op()
def wait_remote_event(device: "Device", stream: "DeviceStream", owner: int, slot: int, target: int,
                      timeout_s: float) -> None:
    """Wait for an IPC event of another device, watching that device's control page."""
    page = device.memory.peer_control(owner)
    device.wait_until(stream, lambda: page.event_count(slot) >= target, timeout_s, f"event {slot} of device {owner}")


@op()
def wait_event_latest(device: "Device", stream: "DeviceStream", slot: int, uid: int, timeout_s: float) -> None:
    """An EXTERNAL wait of a graph replay: for the records issued outside the graph by the
    time the replay gets here (what the host published in event_issued)."""
    page = device.control
    target = int(page.event_issued[slot])
    device.wait_until(stream, lambda: device.events.get(slot) != uid or page.event_count(slot) >= target,
                      timeout_s, f"event {slot}", woken=True)


@op()
def wait_event_flag(device: "Device", stream: "DeviceStream", slot: int, uid: int, timeout_s: float) -> None:
    """Flag wait (graph replays): until a record executes after the latest reset."""
    c = device.control
    device.wait_until(stream, lambda: device.events.get(slot) != uid or c.event_done[slot] > c.event_reset[slot],
                      timeout_s, f"event {slot}", woken=True)


# ---------------------------------------------------------------------------- notify
@op(quick=_always)
def record_notify(device: "Device", stream: "DeviceStream", owner: int, slot: int, guard: tuple | None = None) -> None:
    """``guard`` (a collective's record of a transfer, as for wait_notify): a rank whose
    communicator failed, or was destroyed, announces nothing to its peers any more -- what it
    would announce was made of what it never received."""
    if guard is not None:
        CommGuard(device, stream, *guard).ensure_intact()
    page = device.memory.peer_control(owner)
    # several streams of this device, and other devices, may record the same notify
    with device.lock, page.record_lock(slot):
        page.notify_rec[slot] += 1
    if owner != device.index:       # its device's waiting tasks are woken, not left to a timeout
        page.ring()
    else:
        device.wake_notify(slot)


@op()
def wait_notify(device: "Device", stream: "DeviceStream", slot: int, uid: int, timeout_s: float,
                guard: tuple | None = None, follow: tuple | None = None) -> None:
    """``guard`` (a collective's wait): (pid, rank, error word) of the process that is to record
    it and this rank's error word -- see CommGuard.  ``follow`` (a collective's join of a side
    stream): (slot, stream id) of the stream that records it, whose failure this wait takes
    over once released -- see take_over_failure."""
    c = device.control
    check = CommGuard(device, stream, *guard) if guard is not None else None

    def take() -> bool:
        """Consume the notify if it is set.  wait_until evaluates this holding the device
        lock, so of several streams waiting on one notify exactly one takes a record."""
        if device.notifies.get(slot) != uid:
            return True          # destroyed: the wait is released
        recorded = c.notify_rec[slot]
        if recorded > c.notify_taken[slot]:
            c.notify_taken[slot] = recorded   # auto-reset: one record, one wait
            return True
        if check is not None:
            check.raise_if_failed(peer_alive=False)
        return False

    try:
        device.wait_until(stream, take, timeout_s, f"notify {slot}", woken=True, notify=slot)
        if check is not None:
            check.raise_if_failed(peer_alive=True)     # recorded by a peer that had failed
    except TaskFault as fault:
        if check is not None:
            check.fail(fault)
        raise
    if follow is not None:
        take_over_failure(device, stream, follow)


def take_over_failure(device: "Device", stream: "DeviceStream", follow: tuple) -> None:
    """``stream`` joins ``follow`` = (slot, stream id), a stream of this device and of the same
    host process, which has run every task before the record just waited for: a failure it
    holds becomes ``stream``'s, and leaves it, as a synchronisation of it would consume it.
    A side stream's tasks are part of the caller's operation, and only the caller's stream
    is ever synchronised: a join that let a failure stay behind would report a broken
    operation's output as valid.  A stream that is gone (its communicator destroyed,
    its device reset under it) fails the join: what it was to do is not done."""
    if (not isinstance(follow, tuple) or len(follow) != 2
            or not all(type(v) is int for v in follow)):
        raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"{follow!r:.60} names no stream")
    slot, stream_id = follow
    with device.lock:
        side = device.streams.get(slot)
        if side is None or side.stream_id != stream_id or side.client != stream.client:
            raise TaskFault(E.ACL_ERROR_RT_STREAM_ABORT, f"stream {stream_id} that stream {stream.stream_id} "
                            "joins is gone (its communicator was destroyed)")
        code, message = device.stream_failure(slot, consume=True)
    if code:
        raise TaskFault(code, message)


# a collective's task fails with the aclError of the HcclResult in the communicator's error
# word (mdev.taskspec); a rank's collective tasks give up once theirs, or that of the peer
# they wait for, is set -- so a failure spreads along the operation's transfers
COMM_FAULTS = {COMM_TIMEOUT: E.ACL_ERROR_RT_TASK_TIMEOUT, COMM_PARA: E.ACL_ERROR_RT_PARAM_INVALID,
               COMM_REMOTE: E.ACL_ERROR_RT_SUSPECT_REMOTE_ERROR}
# the HcclResult a task's failure writes into the error word (COMM_REMOTE for any other)
FAULT_WORDS = {code: word for word, code in COMM_FAULTS.items()}
# what a copy into memory that went away gives: freed (DMA fault), or no longer granted
TRANSFER_FAULTS = (E.ACL_ERROR_RT_SYS_DMA, E.ACL_ERROR_RT_PARAM_INVALID)


class CommGuard:
    """What a collective's task watches besides its own work: the peer process that is to
    record its notify (a rank that dies would leave it waiting forever), this rank's error
    word and the peer's (set by a failed task there: a disagreement, a timeout, a dead rank)."""
    PEER_CHECK_S = 0.1

    def __init__(self, device: "Device", stream: "DeviceStream", peer_pid: int, peer_rank: int,
                 peer_err: tuple | None, own_err: tuple) -> None:
        self.device, self.stream = device, stream
        self.peer_pid, self.peer_rank, self.peer_err = peer_pid, peer_rank, peer_err
        self.word = device.memory.view(own_err, 16, stream, write=True).view(np.int64)
        self.next_check = time.monotonic() + self.PEER_CHECK_S

    def raise_if_failed(self, peer_alive: bool) -> None:
        """``peer_alive``: the peer just recorded (no need to look at its process)."""
        if self.word[0]:
            code = int(self.word[0])
            if code == COMM_LEFT:
                raise TaskFault(E.ACL_ERROR_RT_STREAM_ABORT, "the communicator was destroyed before the "
                                "operation finished (HcclCommDestroy ends the operations it has queued)")
            raise TaskFault(COMM_FAULTS.get(code, E.ACL_ERROR_RT_PARAM_INVALID),
                            f"the communicator failed earlier (HcclResult {code}, rank {int(self.word[1])})")
        peer = self._peer_word()
        left = peer is not None and peer[0] == COMM_LEFT
        if left and not peer_alive:                 # gone before recording what we wait for
            self.set(COMM_REMOTE, self.peer_rank)
            raise TaskFault(E.ACL_ERROR_RT_SUSPECT_REMOTE_ERROR, f"rank {self.peer_rank} destroyed its communicator")
        if peer is not None and peer[0] and not left:
            self.set(int(peer[0]), int(peer[1]))
            raise TaskFault(COMM_FAULTS.get(int(peer[0]), E.ACL_ERROR_RT_PARAM_INVALID),
                            f"rank {self.peer_rank} failed (HcclResult {int(peer[0])}, rank {int(peer[1])})")
        if not peer_alive and self.peer_pid and time.monotonic() >= self.next_check:
            self.next_check = time.monotonic() + self.PEER_CHECK_S
            if process_gone(self.peer_pid):
                self.set(COMM_REMOTE, self.peer_rank)
                raise TaskFault(E.ACL_ERROR_RT_SUSPECT_REMOTE_ERROR,
                                f"rank {self.peer_rank} (process {self.peer_pid}) is gone")

    def ensure_intact(self) -> None:
        """For a task that waits for nothing: fail, as a wait would, if the communicator is
        broken here or at the peer."""
        try:
            self.raise_if_failed(peer_alive=True)
        except TaskFault as fault:
            self.fail(fault)
            raise

    def _peer_word(self):
        if self.peer_err is None:
            return None
        try:
            return self.device.memory.view(self.peer_err, 16, self.stream).view(np.int64)
        except TaskFault:                 # its memory is gone: the peer left
            return np.array([COMM_LEFT, self.peer_rank], np.int64)

    def set(self, code: int, rank: int) -> None:
        if not self.word[0]:
            self.word[1], self.word[0] = rank, code
            self.device.alarm()

    def fail(self, fault: TaskFault) -> None:
        """The task failed (a wait timed out or was aborted, the communicator broke): the
        communicator is broken from here on.  A transfer fault already on the stream gives
        way to a dead or departed peer (507057), which names its cause: a copy into the
        memory of a rank that died or left (its pinned staging, its HBM) fails before any
        wait can notice it, and the stream reports only its first failure."""
        if fault.code == E.ACL_ERROR_RT_TASK_TIMEOUT:
            self.set(COMM_TIMEOUT, self.peer_rank)
        if fault.code != E.ACL_ERROR_RT_SUSPECT_REMOTE_ERROR:
            return
        device, slot = self.device, self.stream.slot
        with device.lock:
            errors = device.control.stream_err
            if int(errors[slot]) in TRANSFER_FAULTS and device.streams.get(slot) is self.stream:
                errors[slot] = fault.code
                self.stream.error_message = fault.message


@request
def reset_notifies(device: "Device", conn, notifies: list) -> None:
    """aclrtNotifyBatchReset: the notifies (slot, uid) are cleared at once: records so far
    release no wait."""
    c = device.control
    with device.lock:
        for slot, uid in notifies:
            if device.notifies.get(slot) == uid:
                c.notify_taken[slot] = c.notify_rec[slot]


# ---------------------------------------------------------------------------- values
_VALUE_TESTS = {
    0: lambda cur, v: ((cur - v) & 0xFFFFFFFFFFFFFFFF) < (1 << 63),   # GEQ: (int64)(cur - v) >= 0
    1: lambda cur, v: cur == v,                                          # EQ
    2: lambda cur, v: (cur & v) != 0,                                    # AND
    3: lambda cur, v: (~(cur | v)) & 0xFFFFFFFFFFFFFFFF != 0,            # NOR
}


@op(quick=_always)
def value_write(device: "Device", stream: "DeviceStream", dst: tuple, value: int) -> None:
    device.memory.view(dst, 8, stream, write=True).view(np.uint64)[0] = value
    device.wake()


@op()
def value_wait(device: "Device", stream: "DeviceStream", src: tuple, value: int, flag: int,
               timeout_s: float) -> None:
    word = device.memory.view(src, 8, stream).view(np.uint64)
    test = _VALUE_TESTS[flag]
    device.wait_until(stream, lambda: test(int(word[0]), value), timeout_s, f"value at {src}")
    if device.trace is not None:     # which write it saw: flow arrow, modelled time (mdev.board.trace)
        device.trace.note_release(stream, src, lambda cur: test(cur, value))


# ---------------------------------------------------------------------------- host callbacks
@op()
def host_callback(device: "Device", stream: "DeviceStream", callback: int, block: bool) -> None:
    """Ask the submitting process to run a callback; a blocking one holds the stream."""
    device.run_host_callback(stream, callback, block)
