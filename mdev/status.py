"""The control page of a device: state every process can read without a round trip.

The device process is the only writer (except where noted); host processes map the page
read-mostly and answer queries from it:

    stream_done[slot]   seq of the last task the stream completed   -> stream_query, idle sync
    stream_err[slot]    first unreported task failure of the stream -> fast-path sync check
    stream_msgs[slot]   messages sent to the stream's process when its last task completed:
                        a synchronising host waits until its reader has handled them
    stream_sleepers[slot]  host threads asleep on stream_done[slot] (a futex; written by the
                        stream's own host process): a device that advances stream_done
                        wakes them only when this is non-zero
    event_ts[slot]      device time (ns since boot) of the event's latest executed record
    event_done[slot]    number of records of the event executed
    event_reset[slot]   event_done at the event's latest executed reset (flag semantics)
    event_issued[slot]  records issued by the owning host (written by that host: IPC waiters
                        in other processes read their wait target from it; once the event
                        is shared over IPC the device counts every process's records here)
    event_remote[e]     records of IPC event e executed by other devices (their streams of
                        processes that opened it), each added under the cell's lock
                        (remote_lock): the event has run event_done + event_remote records
    notify_rec[n]       records of notify n executed, by any device of the board: a
                        recorder adds one under the cell's lock (record_lock), as many
                        devices may record one notify
    notify_taken[n]     notify_rec at the last released wait (binary flag: set while the
                        records outnumber it)
    page_owner[p]       client id of the process owning HBM page p (4 KiB) while it belongs
                        to a live allocation, 0 when free, -1 when its owner let go of it while
                        other processes still import it: a peer device executing a task that
                        names this HBM checks the task's process against it
    grants[r]           (pid, start, end) of a range of this HBM that process pid may touch
                        besides its own allocations (an IPC import it was granted, a buffer
                        its owner shared with it); valid while pid != 0, rows below
                        header[H_GRANTS] in use

While a host traces or models time (mdev.board.trace), the device also keeps, for every
device of the board to read:

    writes[r]           ring of the latest memory writes of its traced tasks (range, task,
                        modelled end): a released value wait looks up the write it saw
    transfers[r]        ring of its modelled link transfers (channels, bytes, modelled
                        start / end, NaN while running): live bandwidth sharing
    stream_mt[slot]     (seq, modelled end) of the stream's latest placed task: a host that
                        synchronised on it continues from there (mdev.runtime.trace.synced)
    notify_mt[n, r]     (client, record count, modelled end, transfer) of notify n's record
                        whose count is r modulo NOTIFY_MT_RING (written by the recording
                        device); transfer: the modelled duration of the transfer a
                        collective's record announces (0 for other records)
    event_placed[slot]  event_done count whose modelled time event_ts holds (IPC waiters of
                        other devices wait for it, not for the record's wall timestamp)
    host_floor[s, k]    (client, seq, wall time, modelled time) of the latest HOST_OPS
                        advances of the host clock seen by submissions to stream slot s
                        (written by that host at submission, mdev.runtime.trace): its tasks
                        numbered seq or later were submitted after the host had synchronised
                        or copied up to that modelled time, so start after it
    header              device state, HBM use, object counts, boot time; the doorbell:
                        H_BELL (a futex) is rung by another device process that recorded a
                        notify or event of this device, and wakes the device's tasks waiting
                        for one (mdev.board.device) -- the wake goes out only while
                        H_BELL_WATCHERS (the device's waiting tasks) is non-zero; H_ALARM
                        counts the communicator failures rung with it (every waiting task
                        looks again: a collective's waits watch their peers' error words);
                        H_REVOKED counts the changes that took memory away from a process
                        (a free, an owner letting go, a grant revoked): a peer device that
                        checked an operand of this HBM may trust its check while it is unchanged

Aligned 8-byte stores are atomic on the platforms we run on, so readers never see torn
values; they may see slightly old ones, which is what a query of a running device means.

Nothing here grows with the board: a device of a 1024-device board has the same page as
one of an 8-device board (the HBM page map aside), and reads only the pages of devices it
works with.
"""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager

import numpy as np

from mdev.memory import futex
from mdev.memory.segment import Segment

MAGIC = 0x6D646576  # "mdev"

MAX_STREAMS = 2048
STREAM_LIMIT = 1984           # streams a device gives out (default streams included), A2/A3
MAX_EVENTS = 65536
MAX_NOTIFIES = 8192
GRANTS = 4096                 # ranges of a device's HBM granted to other processes at once
G_PID, G_START, G_END = range(3)

# rings of modelled time / trace state (see the module docstring); a row is valid while its
# seq field is non-zero: its writer zeroes seq, fills the row, then sets seq
WRITES, TRANSFERS = 1024, 256
W_SEQ, W_CLIENT, W_MEM, W_LO, W_HI, W_STREAM, W_START, W_VALUE, W_FLAGS, W_END = range(10)
W_ANY = 0                     # W_MEM of a kernel's write: any memory (its writes are unknown)
W_VALUE_KNOWN, W_KERNEL = 1, 2                         # W_FLAGS bits
W_PENDING, W_NO_MODEL = 0, (1 << 64) - 1               # W_END besides modelled end + 1
MAX_PATH = 8
X_SEQ, X_CLIENT, X_BYTES, X_LATENCY, X_START, X_END, X_CHANNELS = range(7)    # X_CHANNELS: count, then codes
X_FIELDS = X_CHANNELS + 1 + MAX_PATH
HOST_OPS = 4
NOTIFY_MT_RING = 8            # notify records whose modelled end a waiter can still look up
F_CLIENT, F_SEQ, F_WALL, F_END = range(4)          # a host_floor row, valid while F_CLIENT != 0

# header fields (int64 each)
H_MAGIC, H_DEVICE, H_PID, H_STATE, H_HBM_TOTAL, H_HBM_USED, H_STREAMS, H_EVENTS, \
    H_NOTIFIES, H_BOOT_NS, H_TASKS_DONE, H_CLIENTS, H_GRANTS, H_STREAMS_LENT, H_EVENTS_LENT, \
    H_BELL, H_BELL_WATCHERS, H_ALARM, H_REVOKED = range(19)
HEADER_FIELDS = 64

STATE_STARTING, STATE_ALIVE, STATE_FAULTED, STATE_STOPPED = 0, 1, 2, 3
STATE_NAMES = {0: "starting", 1: "ok", 2: "faulted", 3: "stopped"}


def _layout() -> list[tuple[str, tuple, type]]:
    return [
        ("header", (HEADER_FIELDS,), np.int64),
        ("stream_done", (MAX_STREAMS,), np.uint64),
        ("stream_err", (MAX_STREAMS,), np.int64),
        ("stream_msgs", (MAX_STREAMS,), np.uint64),
        ("stream_sleepers", (MAX_STREAMS,), np.int64),
        ("event_ts", (MAX_EVENTS,), np.uint64),
        ("event_done", (MAX_EVENTS,), np.uint64),
        ("event_reset", (MAX_EVENTS,), np.uint64),
        ("event_issued", (MAX_EVENTS,), np.uint64),
        ("event_remote", (MAX_EVENTS,), np.uint64),
        ("notify_rec", (MAX_NOTIFIES,), np.uint64),
        ("notify_taken", (MAX_NOTIFIES,), np.uint64),
        ("writes", (WRITES, W_END + 1), np.uint64),
        ("transfers", (TRANSFERS, X_FIELDS), np.float64),
        ("stream_mt", (MAX_STREAMS, 2), np.float64),
        ("notify_mt", (MAX_NOTIFIES, NOTIFY_MT_RING, 4), np.float64),
        ("host_floor", (MAX_STREAMS, HOST_OPS, 4), np.float64),
        ("event_placed", (MAX_EVENTS,), np.uint64),
        ("grants", (GRANTS, 3), np.int64),
        # a slot's generation: odd while a stream (event) lives in it, even while it is free;
        # a host reuses a slot of its lease only once the device made it even again
        ("stream_gen", (MAX_STREAMS,), np.uint64),
        # the lowest seq a sleeping host thread of the slot waits for: the device wakes the
        # sleepers when the stream gets there, not at every task before
        ("stream_wake", (MAX_STREAMS,), np.uint64),
        ("event_gen", (MAX_EVENTS,), np.uint64),
    ]


PAGE = 4096


def size_for(hbm_bytes: int) -> int:
    fixed = sum(int(np.prod(shape)) * np.dtype(dt).itemsize for _, shape, dt in _layout())
    return fixed + 4 * -(-hbm_bytes // PAGE)


def stream_id(slot: int, gen: int) -> int:
    """The id of the stream living in ``slot`` at generation ``gen`` (free before it): unique
    for the device's lifetime, the slot number itself for a slot's first stream."""
    return (gen >> 1) * MAX_STREAMS + slot


def event_uid(slot: int, gen: int) -> int:
    """The id of the event living in ``slot`` at generation ``gen``: never 0, unique for the
    device's lifetime (tasks name an event by slot and id, so a stale one finds nothing)."""
    return (gen >> 1) * MAX_EVENTS + slot + 1


class ControlPage:
    """Typed views over a device's control segment."""

    def __init__(self, segment: Segment) -> None:
        self.segment = segment
        offset = 0
        self._at = {}             # field -> its byte offset (the cell locks lock bytes of it)
        for name, shape, dtype in _layout():
            count = int(np.prod(shape))
            self._at[name] = offset
            view = segment.array[offset:offset + count * np.dtype(dtype).itemsize]
            setattr(self, name, view.view(dtype).reshape(shape))
            offset += count * np.dtype(dtype).itemsize
        # the rest: the owner of every 4 KiB page of HBM, so peer devices copying to or
        # from this HBM can tell live memory from freed memory, and whose it is
        self.page_owner = segment.array[offset:offset + (len(segment.array) - offset) // 4 * 4].view(np.int32)
        # taken now: ndarray.ctypes imports a numpy module on first use, which fails while
        # the interpreter shuts down (a finalizer's synchronize_stream sleeps on this word)
        self._done_address = self.stream_done.ctypes.data + (4 if sys.byteorder == "big" else 0)
        self._bell_address = self.header.ctypes.data + 8 * H_BELL + (4 if sys.byteorder == "big" else 0)

    def done_word(self, slot: int) -> int:
        """Address of the 32-bit word of stream_done[slot] that changes first (its low half):
        the futex synchronising hosts sleep on."""
        return self._done_address + 8 * slot

    def bell_word(self) -> int:
        """Address of the 32-bit word of header[H_BELL] that changes at each ring (its low half)."""
        return self._bell_address

    def ring(self) -> None:
        """Tell the device of this page that a notify or event of it was recorded (by another
        process): its waiting tasks look again now, not at their next timeout."""
        self.header[H_BELL] += 1
        if self.header[H_BELL_WATCHERS]:
            futex.wake(self._bell_address)

    @property
    def state(self) -> int:
        return int(self.header[H_STATE])

    def granted(self, pid: int, start: int, end: int) -> bool:
        """Process ``pid`` was granted [start, end) of this HBM (grants)."""
        rows = self.grants[:int(self.header[H_GRANTS])]
        return bool(((rows[:, G_PID] == pid) & (rows[:, G_START] <= start) & (rows[:, G_END] >= end)).any())

    def hbm_by_owner(self) -> dict[int, int]:
        """Bytes of live allocations per owning client id (page_owner; whole pages, as the
        allocator reserves them; memory whose owner let go while others import it is no one's)."""
        owners = self.page_owner[self.page_owner > 0]
        counts = np.bincount(owners) if owners.size else np.zeros(0, np.int64)
        return {int(c): int(n) * PAGE for c, n in enumerate(counts) if n}

    def event_count(self, slot: int) -> int:
        """Records of the event in ``slot`` executed so far, by this device and by others."""
        return int(self.event_done[slot]) + int(self.event_remote[slot])

    def remote_lock(self, slot: int) -> AbstractContextManager:
        """Excludes the other devices recording IPC event ``slot`` while one adds to its count."""
        return self.segment.locked(self._at["event_remote"] + 8 * slot, 8)

    def record_lock(self, slot: int) -> AbstractContextManager:
        """Excludes the other recorders of notify ``slot`` (any process) while one adds to
        its count; threads of one process must exclude each other as well."""
        return self.segment.locked(self._at["notify_rec"] + 8 * slot, 8)
