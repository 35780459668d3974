"""A whole collective in one task per rank (``coll_run``): the ranks meet in the run words
of their communicator's hub (rank 0's scratch buffer); the last to enter reduces or gathers
every rank's input while the others sleep, and each rank takes its result.

    rank q's stream ... coll_run ................................................. (ends)
        | STAGE_IN: its input -> its scratch's IN area                             ^
        | publish in its own run words: descriptor, buffers, modelled entry        |
        | count itself in the hub's tally (under a lock of the word)               |
        +-- not the last: sleep on the hub's done word (a futex) <---+           |
        +-- the last: check every descriptor against its own           |           |
                      reduce / gather the inputs -> the hub's OUT area |           |
                      done = n, wake the sleepers ---------------------+           |
        (every rank) VIA_OUT: its result out of the hub's OUT area ----------------+

Used for communicators whose ranks are all on one node with peer access between every pair
(mdev.runtime.collectives.whole decides how; the others run the step-by-step schedules of
mdev.runtime.collectives.algorithms).  The last rank to enter does the work because it is
awake: nobody waits for a sleeping rank to be woken and scheduled.  Ranks of one process,
whose memory any of their devices may touch, give their inputs in place; ranks of several
processes, whose buffers only their own devices touch, copy them into their scratch buffers'
IN areas first (STAGE_IN; the scratch is granted to the peers at init).  Results go through
the hub's OUT area (VIA_OUT), so that every rank copies its own out at once; an operation too
big for it (ranks of one process only) has the last rank write every output in place.  A rank
writes its IN area only after the done of the operation before, which it waited for; the
hub's OUT area is written only once every rank entered, so none still copies out of it.  A
big reduction is shared by the last ``sharers`` ranks to enter (the mode says how many: every
rank for a big input or where every rank has a core, as many as there are cores for a
middling one -- mdev.runtime.collectives.whole): the last only checks
the descriptors and says go (RUN_GO), which wakes the other sharers, each reduces its share of
the chunks into the OUT area and counts itself (RUN_REDUCED), and the last of those says
done: the ranks' devices reduce at once, and the ranks that do not share sleep until done.
Where every rank has a core of its own, a waiting rank spins a little before it sleeps: the
rank it waits for is running and about to get there, and a wake costs both devices more than
the spin.

Every element is reduced in the order of the algorithm the communicator chose (``order``:
per chunk, the ranks in the order the step-by-step schedule adds them), so results are
bit-equal to that schedule's.  Run words are written by other processes: the last rank
checks their descriptor words against its own (a disagreement fails every rank), and reaches
the buffers they name through the device's memory checks.  A sleeping rank looks at its own
and the hub's error words, and the hub's RUN_FAILED, at each wake (a failing rank sets it and
wakes everyone) and, every LOOK_S, at every rank's whole guard (a dead process, a departed
rank); a task that fails sets its communicator's error word, so the others give up at once
instead of at the timeout.

Modelled time (mdev.board.trace.DeviceModel): every rank's task starts when the last rank
entered -- HCCL's handshake at the start of an operation -- and lasts ``model_ns``, HCCL's
formula of the algorithm (mdev.runtime.collectives.cost).
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

import numpy as np

from mdev import errors as E
from mdev import procfs
from mdev.board.collectives import disagreement
from mdev.board.systasks import elementwise, reduce_into
from mdev.board.tasks import FAULT_WORDS, TRANSFER_FAULTS, CommGuard
from mdev.board.tasktable import TaskFault, op
from mdev.memory import futex
from mdev.taskspec import (COMM_PARA, COMM_REMOTE, FIELDS, KINDS, RUN_ARRIVED, RUN_BYTES, RUN_COUNT,
                           RUN_DONE, RUN_ENTER, RUN_FAILED, RUN_GO, RUN_MET, RUN_RECV, RUN_MODE, RUN_REDUCED, RUN_SEND,
                           RUN_TALLY, RUN_WORD, SHARERS_SHIFT, STAGE_IN, VIA_OUT, same_or_apart)

if TYPE_CHECKING:
    from mdev.board.device import Device
    from mdev.board.stream import DeviceStream

ALL_REDUCE, BROADCAST, ALL_GATHER, REDUCE_SCATTER, REDUCE = (
    KINDS.index(k) for k in ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "reduce"))
_LOW = 4 if sys.byteorder == "big" else 0      # where a uint64's low 32 bits (a futex word) lie
BLOCK = 256 << 10      # bytes of a result finished at a time (stays in the CPU's cache)
LOOK_S = 0.05          # a waiting rank looks at the whole guard (peer processes) this often
# a waiting rank looks at the word this long before it sleeps, where every rank has a core:
# a futex wake of a sleeping device costs each side ~20 us of CPU and the sleeper ~25 us more
# before it runs (2 ranks x 1 MiB: 184 us per all-reduce spinning, 233 sleeping at once)
SPIN_S = 100e-6
CORES = procfs.cores()
HUB = 0                # the rank whose run words the ranks meet in, and whose OUT area holds results



class Meeting:
    """One rank's view of the run words of the ranks it deals with in one task: its own and
    the hub's, and every rank's once it works on their buffers (the last to enter, or all of
    the sharers of a shared reduction) or looks whether they are still there (every LOOK_S)."""

    def __init__(self, device: "Device", stream: "DeviceStream", rank: int, peers: tuple, timeout_s: float) -> None:
        self.device, self.stream, self.rank, self.peers = device, stream, rank, peers
        self.words: dict[int, np.ndarray] = {}
        self.errors: dict[int, np.ndarray] = {}
        self.floats: dict[int, np.ndarray] = {}       # the same words, as float64 (modelled times)
        self.places: dict[int, tuple] = {}             # rank -> (its HBM mapping, offset of its run words)
        for q in dict.fromkeys((rank, HUB)):
            self._watch(q)
        self.own, self.hub = self.words[rank], self.words[HUB]
        self.waited = False        # since the hub's words were looked up (_hub)
        self.spins = len(peers) <= CORES
        self.deadline = time.monotonic() + timeout_s if timeout_s else None
        self._guards: dict[int, CommGuard] = {}

    def _watch(self, q: int) -> None:
        """Map rank q's error word and run words (one range of its scratch buffer)."""
        dev, err, run = self.peers[q][:3]
        if type(err) is not int or type(run) is not int or not err + 16 <= run:
            raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"coll_run: rank {q}'s words {err!r:.20}, {run!r:.20}")
        try:
            seg = self.device.memory.locate(("d", dev, err), run - err + RUN_BYTES, self.stream.client)
        except TaskFault:
            if q == self.rank:
                raise
            # its HCCL buffer is freed: the rank destroyed its communicator (as a guard sees it)
            raise TaskFault(E.ACL_ERROR_RT_SUSPECT_REMOTE_ERROR, f"rank {q} destroyed its communicator") from None
        known = seg.views       # a communicator's ranks meet in the same words at every operation
        views = known.get(("run words", err, run))
        if views is None:
            if len(known) >= 256:
                known.clear()
            words = seg.array[run:run + RUN_BYTES].view(np.uint64)
            views = known["run words", err, run] = (seg.array[err:err + 16].view(np.int64), words,
                                                    words.view(np.float64))
        self.errors[q], self.words[q], self.floats[q] = views
        self.places[q] = (seg, run)

    def out_area(self, nbytes: int, at: int = 0, write: bool = False) -> np.ndarray:
        """``nbytes`` of the hub's OUT area from byte ``at`` (through the device's memory checks)."""
        dev, _, _, _, out, _ = self.peers[HUB]
        return self.device.memory.view(("d", dev, out + at), nbytes, self.stream, write=write)

    def watch_all(self) -> None:
        for q in range(len(self.peers)):
            if q not in self.words:
                self._watch(q)

    def guard(self, q: int) -> CommGuard:
        guard = self._guards.get(q)
        if guard is None:
            me, (dev, err, *_, pid) = self.peers[self.rank], self.peers[q]
            guard = self._guards[q] = CommGuard(self.device, self.stream, pid, q, ("d", dev, err), ("d", me[0], me[1]))
        return guard

    def _hub(self) -> np.ndarray:
        """The hub's run words, looked up again before this rank writes them if it waited since
        it last did: meanwhile they may have gone with the hub's process (and their pages be
        another's by now)."""
        if self.waited and HUB != self.rank:
            self._watch(HUB)
            self.hub = self.words[HUB]
        self.waited = False
        return self.hub

    def tally(self, index: int) -> int:
        """Count this rank in the hub's run word ``index``; the count so far (the ranks' devices
        are processes: the hub's word is counted under a lock of its bytes)."""
        hub = self._hub()
        seg, run = self.places[HUB]
        with seg.locked(run + 8 * index, 8):
            count = int(hub[index]) + 1
            hub[index] = count
        return count

    def _futex(self, index: int) -> int:
        """Address of (the low half of) the hub's run word ``index``."""
        seg, run = self.places[HUB]
        return seg.address + run + 8 * index + _LOW

    def announce(self, index: int, n: int) -> None:
        """Operation ``n`` got to the hub's run word ``index`` (RUN_GO, RUN_DONE): every rank
        sleeping on it wakes."""
        self._hub()[index] = n
        if futex.AVAILABLE:
            futex.wake(self._futex(index))

    def follow(self, index: int, n: int, what: str) -> None:
        """Wait on the hub's run word ``index`` until it got to operation ``n`` (spin SPIN_S
        first where every rank has a core, then sleep on it); TaskFault if
        the communicator breaks (here, at the hub, or at the rank that says so in RUN_FAILED),
        a rank's process or device goes, the stream is aborted, or the operation's timeout
        passes."""
        self.waited = True
        hub = self.hub
        if self.spins:      # the rank it waits for runs on a core of its own: it is about to say so
            until = time.monotonic() + SPIN_S
            while int(hub[index]) < n and time.monotonic() < until:
                os.sched_yield()
        word = hub.view(np.uint32)[2 * index + _LOW // 4:][:1]
        address = self._futex(index)
        look = time.monotonic() + LOOK_S
        while True:
            seen = int(word[0])
            if int(hub[index]) >= n:
                return
            if int(hub[RUN_FAILED]):
                self.check_all()
            self.intact()
            if self.stream.interrupted:
                raise TaskFault(E.ACL_ERROR_RT_STREAM_ABORT, f"stream {self.stream.stream_id} aborted while "
                                f"waiting for {what}")
            now = time.monotonic()
            if now >= look:
                self.check_all()
                look = now + LOOK_S
            if self.deadline is not None and now >= self.deadline:
                raise TaskFault(E.ACL_ERROR_RT_TASK_TIMEOUT, f"wait for {what} timed out (HCCL_EXEC_TIMEOUT)")
            if futex.AVAILABLE:
                futex.wait(address, seen, LOOK_S)
            else:
                time.sleep(0.0005)

    def intact(self) -> None:
        """check_all if any rank watched says it failed or left (a look at the mapped words)."""
        if any(int(err[0]) for err in self.errors.values()):
            self.check_all()

    def check_all(self) -> None:
        """Fail as a collective's wait does if any rank broke the communicator or is gone."""
        self.watch_all()
        for q in range(len(self.peers)):
            if q != self.rank:
                self.guard(q).raise_if_failed(peer_alive=False)
        self.guard(self.rank).raise_if_failed(peer_alive=True)

    def fail(self, fault: TaskFault) -> None:
        """The task failed: the communicator is broken here, and every rank hears of it now."""
        guard = self.guard(self.rank)
        guard.fail(fault)
        guard.set(FAULT_WORDS.get(fault.code, COMM_REMOTE), self.rank)
        try:
            self._hub()[RUN_FAILED] = self.rank + 1
        except TaskFault:             # the hub is gone: its ranks find out by themselves
            return
        if futex.AVAILABLE:
            for index in (RUN_GO, RUN_DONE):
                futex.wake(self._futex(index))


@op()
def coll_run(device: "Device", stream: "DeviceStream", rank: int, peers: tuple, root: int,
             word: int, count: int, send: tuple, recv: tuple, in_bytes: int, out_bytes: int, order: tuple,
             mode: int, data: tuple, timeout_s: float, model_ns: float) -> None:
    """``peers``: per rank, 6 int64 (packed: a frame of few objects decodes fast) -- its
    device, and in its HBM: its communicator's error word, run words, IN and OUT areas; its
    pid, 0 if of this process; ``root``: a broadcast's or reduce's; ``order``: the reduction's
    chunks, per chunk p + 2 int64 -- byte offset in the input, bytes, the ranks in the order
    they are added; ``mode``: STAGE_IN and VIA_OUT bits, and from SHARERS_SHIFT the number of
    ranks that share the reduction; ``data``: (operation kind, item size, reduce kind, aclDataType)."""
    peers = _rows(peers, 6, "peers")
    p = len(peers)
    if type(rank) is not int or type(root) is not int or not (0 <= rank < p and 0 <= root < p) \
            or peers[rank][0] != device.index:
        raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"coll_run: rank {rank!r:.20} (on this device) or root "
                        f"{root!r:.20} is no rank of {p}")
    order = _chunks(order, p, in_bytes)
    sharers = mode >> SHARERS_SHIFT if type(mode) is int and mode >= 0 else -1
    if not 0 <= sharers <= p or sharers > 1 and not _shareable(mode, data, send, recv, in_bytes):
        raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"coll_run: mode {mode!r:.20} shares no reduction of "
                        f"{p} ranks through the OUT area or straight into their outputs")
    # its scratch buffer stays this communicator's while the task runs, whoever frees it
    pinned = device.memory.pin([peers[rank][1]])
    try:
        try:
            meeting = Meeting(device, stream, rank, peers, timeout_s)
        except TaskFault as fault:    # the others find this rank's error word at their next look
            CommGuard(device, stream, 0, rank, None, ("d", peers[rank][0], peers[rank][1])).set(
                FAULT_WORDS.get(fault.code, COMM_REMOTE), rank)
            raise
        try:
            _run(device, stream, meeting, rank, root, word, count, send, recv, in_bytes, out_bytes, order,
                 mode, max(sharers, 1), data)
        except TaskFault as fault:
            if fault.code in TRANSFER_FAULTS:      # a departed rank's buffer: the departure says why
                try:
                    meeting.check_all()
                except TaskFault as cause:
                    if cause.code == E.ACL_ERROR_RT_SUSPECT_REMOTE_ERROR:
                        fault = cause
            meeting.fail(fault)
            raise fault from None
        except Exception as exc:       # an emulator bug: the peers must not wait for this rank forever
            meeting.fail(TaskFault(E.ACL_ERROR_RT_INTERNAL_ERROR, repr(exc)))
            raise
    finally:
        device.memory.unpin(pinned)
    device.wake()


def _run(device, stream, meeting: Meeting, rank: int, root: int, word: int, count: int, send: tuple, recv: tuple,
         in_bytes: int, out_bytes: int, order: tuple, mode: int, sharers: int, data: tuple) -> None:
    """``sharers``: how many of the last ranks to enter reduce the chunks (1: the last alone)."""
    memory, own, hub, kind = device.memory, meeting.own, meeting.hub, data[0]
    if int(meeting.errors[rank][0]):
        meeting.guard(rank).raise_if_failed(peer_alive=True)
    p = len(meeting.peers)
    n = int(own[RUN_ARRIVED]) + 1
    mine = memory.view(send, in_bytes, stream)
    out = memory.view(recv, out_bytes, stream, write=True)
    dev, _, _, in_at, _, _ = meeting.peers[rank]
    if mode & STAGE_IN and in_bytes and (kind != BROADCAST or rank == root):
        memory.view(("d", dev, in_at), in_bytes, stream, write=True)[:] = mine
    model = device.trace.models.get(stream.client) if device.trace is not None else None
    own[RUN_WORD], own[RUN_COUNT] = word, count
    own[RUN_SEND], own[RUN_RECV] = send[2], recv[2]
    meeting.floats[rank][RUN_ENTER] = model.earliest(stream) if model is not None else 0.0
    own[RUN_MODE] = mode
    own[RUN_ARRIVED] = n
    place = meeting.tally(RUN_TALLY) - (n - 1) * p    # 1 .. p: this rank's place in the order of entry
    share = place - (p - sharers)                     # 1 .. sharers: one of them, and which share it takes
    first = RUN_GO if sharers > 1 else RUN_DONE       # what the sharers wait for
    if place == p:                                    # the last to enter: the others are waiting
        meeting.watch_all()
        meeting.intact()                              # (before their buffers are touched)
        for q in range(p):
            theirs = [int(meeting.words[q][RUN_WORD]), int(meeting.words[q][RUN_COUNT])]
            if theirs != [word, count]:
                meeting.guard(rank).set(COMM_PARA, q)
                raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, disagreement(FIELDS, [word, count], theirs, q))
            if int(meeting.words[q][RUN_MODE]) != mode:
                meeting.guard(rank).set(COMM_PARA, q)
                raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"rank {q} runs the operation another way "
                                f"(mode {int(meeting.words[q][RUN_MODE]):#x}, here {mode:#x})")
        # when the last rank entered (modelled): the others read it from the hub, where it
        # stays until every rank entered the next operation
        meeting.floats[HUB][RUN_MET] = max(float(f[RUN_ENTER]) for f in meeting.floats.values())
        if sharers > 1:     # counted afresh: every sharer counted its share of the last one before its done
            hub[RUN_REDUCED] = 0
        else:
            _work(memory, stream, meeting, rank, root, kind, in_bytes, out_bytes, order, mode, data)
        meeting.announce(first, n)
    else:
        meeting.follow(first if share >= 1 else RUN_DONE, n, "the last rank to enter the operation")
    if sharers > 1 and share >= 1:       # this rank's share of the chunks
        meeting.watch_all()
        meeting.intact()
        # when every rank shares, each takes the same chunks at every operation: the pages it
        # reads stay mapped in its process (taken by the order of entry, a 64 MiB operation on
        # 8 ranks faulted 4,800 pages in and took 10% longer)
        part = rank if sharers == p else share - 1
        rows = order[part::sharers]
        inputs = _inputs(memory, stream, meeting, in_bytes, bool(mode & STAGE_IN))
        if mode & VIA_OUT:               # into the hub's OUT area, which every rank copies out of
            _reduce(inputs, rows, data, meeting.out_area(in_bytes, write=True), None, out_bytes, aliased=False)
        else:                            # into every rank's output (ranks of one process)
            _reduce(inputs, rows, data, out, None, out_bytes, aliased=True)
            for q in range(p):
                if q != rank:
                    theirs = _output(memory, stream, meeting, q, out_bytes)
                    for at, nbytes, *_ in rows:
                        theirs[at:at + nbytes] = out[at:at + nbytes]
        if meeting.tally(RUN_REDUCED) == sharers:
            meeting.announce(RUN_DONE, n)
        else:
            meeting.follow(RUN_DONE, n, "the other ranks to reduce their shares")
    stream.meeting = (float(meeting.floats[HUB][RUN_MET]), (meeting.peers[HUB][0], meeting.peers[HUB][2], n))
    if mode & VIA_OUT and out_bytes:                  # this rank's result, out of the hub's OUT area
        out[:] = meeting.out_area(out_bytes, rank * out_bytes if kind == REDUCE_SCATTER else 0)


def _shareable(mode: int, data, send, recv, in_bytes: int) -> bool:
    """A reduction the ranks may share: an all-reduce or reduce-scatter through the hub's OUT
    area, or an all-reduce of ranks of one process written straight into their outputs, where
    this rank's output is its input or lies apart from it (its peers read the parts of its
    input it does not write)."""
    kind = data[0] if type(data) is tuple and data else None
    if mode & VIA_OUT:
        return kind in (ALL_REDUCE, REDUCE_SCATTER)
    return not mode & STAGE_IN and kind == ALL_REDUCE and same_or_apart(send, recv, in_bytes)


def _rows(packed, width: int, what: str) -> list[tuple]:
    """Rows of ``width`` int64 packed in bytes (a communicator sends the same ones with
    every operation: remembered)."""
    if type(packed) is not bytes or len(packed) % (8 * width):
        raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"coll_run: {what} must be rows of {width} packed int64, "
                        f"got {packed!r:.40}")
    rows = _parsed.get(packed)
    if rows is None:
        if len(_parsed) >= 256:
            _parsed.clear()
        rows = _parsed[packed] = [tuple(row) for row in np.frombuffer(packed, np.int64).reshape(-1, width).tolist()]
    return rows


_parsed: dict[bytes, list[tuple]] = {}


def _chunks(packed, p: int, in_bytes: int) -> list[tuple]:
    """The rows of an order, checked to lie inside the input and to name ranks of ``p``
    (remembered with what they were checked against)."""
    key = (packed, p, in_bytes)
    rows = _checked.get(key) if type(packed) is bytes and type(in_bytes) is int else None
    if rows is None:
        rows = _rows(packed, p + 2, "order")
        if type(in_bytes) is not int or not all(0 <= at and 0 <= nb and at + nb <= in_bytes and
                                                all(0 <= q < p for q in ranks) for at, nb, *ranks in rows):
            raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"coll_run: a chunk of the order is outside the input "
                            f"({in_bytes} B) or names no rank of {p}")
        if len(_checked) >= 256:
            _checked.clear()
        _checked[key] = rows
    return rows


_checked: dict[tuple, list[tuple]] = {}


def _work(memory, stream, meeting: Meeting, me: int, root: int, kind: int, in_bytes: int, out_bytes: int,
          order: tuple, mode: int, data: tuple) -> None:
    """The last rank's work: every rank's input reduced or gathered into the hub's OUT area
    (VIA_OUT: each rank copies its result out of it), or into the outputs where they lie."""
    p, staged, via_out = len(meeting.peers), bool(mode & STAGE_IN), bool(mode & VIA_OUT)
    if via_out:
        result = meeting.out_area(out_bytes if kind == ALL_GATHER else in_bytes, write=True)
    if kind == BROADCAST:
        src = _input(memory, stream, meeting, root, in_bytes, staged)
        if via_out:
            result[:] = src
        else:
            for q in range(p):
                if q != root:
                    _output(memory, stream, meeting, q, in_bytes)[:] = src
        return
    inputs = _inputs(memory, stream, meeting, in_bytes, staged)
    outs = None
    if not via_out:                   # in place, where an output may be an input
        if kind == REDUCE_SCATTER:
            result, outs = None, [_output(memory, stream, meeting, q, out_bytes) for q in range(p)]
        else:
            result = _output(memory, stream, meeting, root if kind == REDUCE else me,
                             out_bytes if kind == ALL_GATHER else in_bytes)
    if kind == ALL_GATHER:
        for q, src in enumerate(inputs):
            result[q * in_bytes:(q + 1) * in_bytes] = src
    else:
        _reduce(inputs, order, data, result, outs, out_bytes, aliased=not via_out)
    if not via_out and kind in (ALL_REDUCE, ALL_GATHER):
        for q in range(p):
            if q != me:
                _output(memory, stream, meeting, q, out_bytes)[:] = result


def _inputs(memory, stream, meeting: Meeting, nbytes: int, staged: bool) -> list:
    return [_input(memory, stream, meeting, q, nbytes, staged) for q in range(len(meeting.peers))]


def _input(memory, stream, meeting: Meeting, q: int, nbytes: int, staged: bool):
    """Rank q's input: in its scratch's IN area (staged), or where its run words say it lies."""
    dev, _, _, in_at, _, _ = meeting.peers[q]
    return memory.view(("d", dev, in_at) if staged else ("d", dev, int(meeting.words[q][RUN_SEND])), nbytes, stream)


def _output(memory, stream, meeting: Meeting, q: int, nbytes: int):
    """Rank q's output, where its run words say it lies (ranks of one process)."""
    dev = meeting.peers[q][0]
    return memory.view(("d", dev, int(meeting.words[q][RUN_RECV])), nbytes, stream, write=True)


def _reduce(inputs: list, order: tuple, data: tuple, result, outs: list | None, block_bytes: int,
            aliased: bool) -> None:
    """Each chunk of ``order`` reduced over the inputs in its order, a BLOCK at a time; into
    ``result`` at the chunk's offset, or (``outs``) into the output of the rank whose block of
    ``block_bytes`` it is."""
    _, _, reduce_kind, data_type = data
    # an output that may be an input (written in place: a rank's own buffer, or its block) is
    # reduced in a buffer and written once its block is done; the OUT area directly
    buffer = np.empty(min(BLOCK, max((row[1] for row in order), default=0)), np.uint8) if aliased else None
    typed = elementwise(reduce_kind, data_type)
    if typed is None:
        unit = 1

        def combine(d, a, b):
            reduce_into(d, a, b, reduce_kind, data_type)
    else:      # every operand viewed in its type once: a chunk's adds are many on many ranks
        ufunc, dtype = typed
        unit = dtype.itemsize

        def combine(d, a, b):
            ufunc(a, b, out=d)
        inputs = [x.view(dtype) for x in inputs]
        result = result.view(dtype) if result is not None else None
        outs = [o.view(dtype) for o in outs] if outs is not None else None
        buffer = buffer[:len(buffer) // unit * unit].view(dtype) if buffer is not None else None
    block_items, whole_block = block_bytes // unit, BLOCK // unit
    with np.errstate(over="ignore", invalid="ignore"):
        for at, nbytes, *ranks in order:
            at, n = at // unit, nbytes // unit
            dst, base = (result, 0) if outs is None else (outs[at // block_items], at // block_items * block_items)
            # blocks keep a partial result in the CPU's cache between adds; two inputs into a
            # buffer of its own are one pass whatever their size
            step = whole_block if aliased or len(ranks) > 2 else max(n, 1)
            for lo in range(at, at + n, step):
                hi = min(lo + step, at + n)
                block = buffer[:hi - lo] if aliased else dst[lo - base:hi - base]
                if len(ranks) == 1:
                    block[:] = inputs[ranks[0]][lo:hi]
                else:              # the first two straight into the block: one pass less than a copy
                    combine(block, inputs[ranks[0]][lo:hi], inputs[ranks[1]][lo:hi])
                for q in ranks[2:]:
                    combine(block, block, inputs[q][lo:hi])
                if aliased:
                    dst[lo - base:hi - base] = block
