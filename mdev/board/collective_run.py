"""A whole collective in one task per rank (``coll_run``): the ranks meet in their
communicator's scratch buffers, one of them -- the leader -- reduces or gathers every rank's
input, and each rank takes its result.

    rank q's stream ... coll_run ..................................................... (ends)
        | STAGE_IN: its input -> its scratch's IN area                                 ^
        | publish in its run words: descriptor, buffers, modelled entry;               |
        | arrived = n; ring the leader's bell (a futex) --+                            |
        +-- sleep on its own bell until the leader's done == n <---------------+      |
                                                          v                    |      |
    leader's stream ... coll_run: publish; sleep until every rank arrived      |      |
                        check that every descriptor is its own                 |      |
                        reduce / gather the inputs into its OUT area           |      |
                        done = n; ring every rank's bell ----------------------+      |
                        (every rank, the leader too) VIA_OUT: its result out of the   |
                        leader's OUT area into its output -----------------------------+

Used for communicators whose ranks are all on one node with peer access between every pair
(mdev.runtime.collectives.whole decides how; the others run the step-by-step schedules of
mdev.runtime.collectives.algorithms).  Ranks of one process, whose memory the leader's device
may touch wherever it lies, give their inputs in place; ranks of several processes, whose
buffers only their own devices touch, copy them into their scratch buffers' IN areas first
(STAGE_IN; the scratch is granted to the peers at init).  Results go through the leader's OUT
area (VIA_OUT), so that every rank copies its own out at once; an operation too big for it
(ranks of one process only) has the leader write every output in place.  A big reduction is
SHARED: the leader only checks the descriptors and says go (RUN_GO), every rank reduces its
chunks into the leader's OUT area and says so (RUN_REDUCED), and the leader's done follows
the last of them -- one more round of wakes for the ranks' devices reducing at once.  A rank writes its IN
area only after the leader's done of the operation before, which it waited for; the leader
writes its OUT area only once every rank arrived, so none still copies out of it.

Every element is reduced in the order of the algorithm the communicator chose (``order``:
per chunk, the ranks in the order the step-by-step schedule adds them), so results are
bit-equal to that schedule's.  Run words are written by other processes: the leader checks
their descriptor words against its own (a disagreement fails every rank), and reaches the
buffers they name through the device's memory checks.  A waiting rank looks at the error
words of the ranks it watches at each wake (a failing rank rings everyone) and, every
LOOK_S, at their whole guard (a dead process, a departed rank); a task that fails sets its
communicator's error word, so the others give up at once instead of at the timeout.

Modelled time (mdev.board.trace.DeviceModel): every rank's task starts when the last rank
entered -- HCCL's handshake at the start of an operation -- and lasts ``model_ns``, HCCL's
formula of the algorithm (mdev.runtime.collectives.cost).
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

import numpy as np

from mdev import errors as E
from mdev.board.collectives import disagreement
from mdev.board.systasks import reduce_into
from mdev.board.tasks import CommGuard
from mdev.board.tasktable import TaskFault, op
from mdev.memory import futex
from mdev.taskspec import (COMM_PARA, COMM_REMOTE, COMM_TIMEOUT, FIELDS, KINDS, RUN_ARRIVED, RUN_BELL, RUN_BYTES,
                           RUN_COUNT, RUN_DONE, RUN_ENTER, RUN_GO, RUN_MET, RUN_RECV, RUN_REDUCED, RUN_SEND,
                           RUN_WORD, SHARED, STAGE_IN, VIA_OUT)

if TYPE_CHECKING:
    from mdev.board.device import Device
    from mdev.board.stream import DeviceStream

ALL_REDUCE, BROADCAST, ALL_GATHER, REDUCE_SCATTER, REDUCE = (
    KINDS.index(k) for k in ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "reduce"))
_LOW = 4 if sys.byteorder == "big" else 0      # where a uint64's low 32 bits (a futex word) lie
BLOCK = 256 << 10      # bytes of a result finished at a time (stays in the CPU's cache)
LOOK_S = 0.05          # a waiting rank looks at the whole guard (peer processes) this often

_FAULT_WORDS = {E.ACL_ERROR_RT_TASK_TIMEOUT: COMM_TIMEOUT, E.ACL_ERROR_RT_PARAM_INVALID: COMM_PARA}


class Meeting:
    """One rank's view of the run words of the ranks it deals with in one task: those of
    every rank (``everyone``: the leader, and all in a SHARED reduction), else its own and
    the leader's (a failure elsewhere reaches it through the leader, which waits for everyone)."""

    def __init__(self, device: "Device", stream: "DeviceStream", rank: int, peers: tuple, leader: int,
                 timeout_s: float, everyone: bool) -> None:
        self.device, self.stream, self.rank, self.peers = device, stream, rank, peers
        self.words: dict[int, np.ndarray] = {}
        self.errors: dict[int, np.ndarray] = {}
        self.bells: dict[int, tuple] = {}               # (the bell word, its address)
        self.at: dict[int, int] = {}                   # address of the run words
        for q in (range(len(peers)) if everyone else dict.fromkeys((rank, leader))):
            self._watch(q)
        self.own = self.words[rank]
        self.deadline = time.monotonic() + timeout_s if timeout_s else None
        self._guards: dict[int, CommGuard] = {}

    def _watch(self, q: int) -> None:
        """Map rank q's error word and run words (one range of its scratch buffer)."""
        dev, err, run = self.peers[q][:3]
        if type(err) is not int or type(run) is not int or not err + 16 <= run:
            raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"coll_run: rank {q}'s words {err!r:.20}, {run!r:.20}")
        seg = self.device.memory.locate(("d", dev, err), run - err + RUN_BYTES, self.stream.client)
        self.errors[q] = seg.array[err:err + 16].view(np.int64)
        self.words[q] = seg.array[run:run + RUN_BYTES].view(np.uint64)
        self.bells[q] = (self.words[q].view(np.uint32)[2 * RUN_BELL:2 * RUN_BELL + 1], seg.address + run + 8 * RUN_BELL)
        self.at[q] = seg.address + run

    def guard(self, q: int) -> CommGuard:
        guard = self._guards.get(q)
        if guard is None:
            me, (dev, err, *_, pid) = self.peers[self.rank], self.peers[q]
            guard = self._guards[q] = CommGuard(self.device, self.stream, pid, q, ("d", dev, err), ("d", me[0], me[1]))
        return guard

    def ring(self, ranks) -> None:
        """Wake the ranks' tasks sleeping on their bells."""
        for q in ranks:
            bell, address = self.bells[q]
            bell[0] += 1
            if futex.AVAILABLE:
                futex.wake(address)

    def announce(self, index: int, n: int) -> None:
        """The leader got to ``n`` in its run word ``index`` (RUN_GO, RUN_DONE): every rank
        sleeping on that word wakes."""
        self.own[index] = n
        if futex.AVAILABLE:
            futex.wake(self.at[self.rank] + 8 * index + _LOW)

    def follow(self, leader: int, index: int, n: int, what: str) -> None:
        """Sleep until the leader's run word ``index`` got to ``n`` (see wait)."""
        head = self.words[leader]
        self.wait(lambda: int(head[index]) >= n, what, (leader, index))

    def gather(self, index: int, n: int, what: str) -> None:
        """The leader sleeps until run word ``index`` of every other rank got to ``n``."""
        words = [self.words[q] for q in self.others()]
        self.wait(lambda: all(int(w[index]) >= n for w in words), what)

    def others(self) -> list[int]:
        return [q for q in self.words if q != self.rank]

    def wait(self, ready, what: str, on: tuple[int, int] | None = None) -> None:
        """Sleep on this rank's bell -- or ``on``: (the leader, one of its run words) -- until
        ``ready()``; TaskFault if the communicator breaks (here or at a watched rank), a
        watched rank's process or device goes, the stream is aborted, or the operation's
        timeout passes."""
        if on is None:
            word, address = self.bells[self.rank]
        else:
            leader, index = on
            word = self.words[leader].view(np.uint32)[2 * index + _LOW // 4:][:1]
            address = self.at[leader] + 8 * index + _LOW
        look = time.monotonic() + LOOK_S
        while True:
            seen = int(word[0])
            if ready():
                return
            if any(int(err[0]) for err in self.errors.values()):
                self.check_all()
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

    def check_all(self) -> None:
        for q in self.others():
            self.guard(q).raise_if_failed(peer_alive=False)
        self.guard(self.rank).raise_if_failed(peer_alive=True)

    def fail(self, fault: TaskFault) -> None:
        """The task failed: the communicator is broken here, and every rank hears of it now."""
        guard = self.guard(self.rank)
        guard.fail(fault)
        guard.set(_FAULT_WORDS.get(fault.code, COMM_REMOTE), self.rank)
        for q in range(len(self.peers)):
            if q not in self.words:
                try:
                    self._watch(q)
                except TaskFault:              # gone: nothing of it waits
                    continue
        self.ring(self.others())
        if futex.AVAILABLE:                    # and those asleep on a word of a leader
            for address in self.at.values():
                futex.wake(address + 8 * RUN_GO + _LOW)
                futex.wake(address + 8 * RUN_DONE + _LOW)


@op()
def coll_run(device: "Device", stream: "DeviceStream", rank: int, peers: tuple, leader: int,
             word: int, count: int, send: tuple, recv: tuple, in_bytes: int, out_bytes: int, order: tuple,
             mode: int, data: tuple, timeout_s: float, model_ns: float) -> None:
    """``peers``: each rank's (device, and in its HBM: its communicator's error word, run words,
    IN and OUT areas; its pid, 0 if of this process); ``order``: the reduction's chunks, (byte
    offset in the input, bytes, ranks in the order they are added); ``mode``: STAGE_IN and
    VIA_OUT bits; ``data``: (operation kind, item size, reduce kind, aclDataType)."""
    if type(rank) is not int or type(leader) is not int or not (0 <= rank < len(peers) and 0 <= leader < len(peers)):
        raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"coll_run: rank {rank!r:.20} or leader {leader!r:.20} "
                        f"is no rank of {len(peers)}")
    try:
        meeting = Meeting(device, stream, rank, peers, leader, timeout_s, rank == leader or bool(mode & SHARED))
    except TaskFault:             # the others find this rank's error word at their next look
        if type(peers[rank]) is tuple and len(peers[rank]) == 6:
            own = ("d", peers[rank][0], peers[rank][1])
            CommGuard(device, stream, 0, rank, None, own).set(COMM_PARA, rank)
        raise
    try:
        _run(device, stream, meeting, rank, leader, word, count, send, recv, in_bytes, out_bytes, order,
             mode, data)
    except TaskFault as fault:
        meeting.fail(fault)
        raise
    except Exception as exc:       # an emulator bug: the peers must not wait for this rank forever
        meeting.fail(TaskFault(E.ACL_ERROR_RT_INTERNAL_ERROR, repr(exc)))
        raise
    device.wake()


def _run(device, stream, meeting: Meeting, rank: int, leader: int, word: int, count: int, send: tuple, recv: tuple,
         in_bytes: int, out_bytes: int, order: tuple, mode: int, data: tuple) -> None:
    memory, own, kind = device.memory, meeting.own, data[0]
    if int(meeting.errors[rank][0]):
        meeting.guard(rank).raise_if_failed(peer_alive=True)
    n = int(own[RUN_ARRIVED]) + 1
    mine = memory.view(send, in_bytes, stream)
    out = memory.view(recv, out_bytes, stream, write=True)
    dev, _, _, in_at, _, _ = meeting.peers[rank]
    if mode & STAGE_IN and in_bytes and _has_input(kind, rank, leader):
        memory.view(("d", dev, in_at), in_bytes, stream, write=True)[:] = mine
    model = device.trace.models.get(stream.client) if device.trace is not None else None
    own[RUN_WORD], own[RUN_COUNT] = word, count
    own[RUN_SEND], own[RUN_RECV] = send[2], recv[2]
    _float(own, RUN_ENTER)[0] = model.earliest(stream) if model is not None else 0.0
    own[RUN_ARRIVED] = n
    shared = bool(mode & SHARED)
    first = RUN_GO if shared else RUN_DONE      # what a rank waits for after it arrived
    if rank != leader:
        meeting.ring([leader])
        meeting.follow(leader, first, n, f"rank {leader} to start the operation")
        stream.meeting = (float(_float(meeting.words[leader], RUN_MET)[0]),
                          (meeting.peers[leader][0], meeting.peers[leader][2], n))
    else:
        meeting.gather(RUN_ARRIVED, n, "every rank to enter")
        for q in meeting.others():
            theirs = [int(meeting.words[q][RUN_WORD]), int(meeting.words[q][RUN_COUNT])]
            if theirs != [word, count]:
                meeting.guard(rank).set(COMM_PARA, q)
                raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, disagreement(FIELDS, [word, count], theirs, q))
        # when the last rank entered (modelled): its peers read it here, where it stays until
        # every rank entered the next operation
        met = _float(own, RUN_MET)[0] = max(float(_float(w, RUN_ENTER)[0]) for w in meeting.words.values())
        stream.meeting = (float(met), (meeting.peers[rank][0], meeting.peers[rank][2], n))
        if not shared:
            _lead(memory, stream, meeting, rank, kind, mine, out, in_bytes, out_bytes, order, mode, data)
        meeting.announce(first, n)
    if shared:       # every rank reduces its share of the chunks into the leader's OUT area
        p = len(meeting.peers)
        ldev, _, _, _, lout, _ = meeting.peers[leader]
        inputs = _inputs(memory, stream, meeting, rank, mine, in_bytes, bool(mode & STAGE_IN))
        result = memory.view(("d", ldev, lout), in_bytes, stream, write=True)
        _reduce(inputs, order[rank::p], data, result, None, out_bytes, aliased=False)
        own[RUN_REDUCED] = n
        if rank != leader:
            meeting.ring([leader])
            meeting.follow(leader, RUN_DONE, n, f"rank {leader} to finish the operation")
        else:
            meeting.gather(RUN_REDUCED, n, "every rank to reduce its share")
            meeting.announce(RUN_DONE, n)
    if mode & VIA_OUT and out_bytes and kind != REDUCE:       # this rank's result, out of the leader's OUT area
        ldev, _, _, _, lout, _ = meeting.peers[leader]
        at = rank * out_bytes if kind == REDUCE_SCATTER else 0
        out[:] = memory.view(("d", ldev, lout + at), out_bytes, stream)


def _float(words: np.ndarray, index: int) -> np.ndarray:
    """Run word ``index`` as a float64 (a one-element view)."""
    return words[index:index + 1].view(np.float64)


def _has_input(kind: int, rank: int, leader: int) -> bool:
    """The rank's input is read by the leader (a broadcast reads only its root's, the leader)."""
    return kind != BROADCAST and rank != leader


def _lead(memory, stream, meeting: Meeting, me: int, kind: int, mine, out, in_bytes: int, out_bytes: int,
          order: tuple, mode: int, data: tuple) -> None:
    """The leader's work: every rank's input reduced or gathered into its OUT area (VIA_OUT:
    each rank copies its result out of it), or into every rank's output where it lies; a
    reduce's into the root's (the leader's) output."""
    p = len(meeting.peers)
    inputs = _inputs(memory, stream, meeting, me, mine, in_bytes, bool(mode & STAGE_IN))
    if mode & VIA_OUT and kind != REDUCE:
        dev, _, _, _, out_at, _ = meeting.peers[me]
        result = memory.view(("d", dev, out_at), in_bytes if kind == REDUCE_SCATTER else out_bytes, stream,
                             write=True)
        outs = None
    elif kind == REDUCE_SCATTER:            # each block straight into its rank's output
        result, outs = None, [out if q == me else _output(memory, stream, meeting, q, out_bytes) for q in range(p)]
    else:
        result, outs = out, None
    if kind == BROADCAST:
        if result is not out:
            result[:] = mine
        else:
            for q in meeting.others():
                _output(memory, stream, meeting, q, out_bytes)[:] = mine
        return
    if kind == ALL_GATHER:
        for q, src in enumerate(inputs):
            result[q * in_bytes:(q + 1) * in_bytes] = src
    else:
        _reduce(inputs, order, data, result, outs, out_bytes, aliased=result is out or outs is not None)
    if result is out and kind in (ALL_REDUCE, ALL_GATHER):
        for q in meeting.others():
            _output(memory, stream, meeting, q, out_bytes)[:] = out


def _inputs(memory, stream, meeting: Meeting, me: int, mine, nbytes: int, staged: bool) -> list:
    """Every rank's input (``mine``: this rank's): in its scratch's IN area (staged), or where
    its run words say it lies."""
    out = []
    for q, (dev, _, _, in_at, _, _) in enumerate(meeting.peers):
        out.append(mine if q == me else memory.view(
            ("d", dev, in_at) if staged else ("d", dev, int(meeting.words[q][RUN_SEND])), nbytes, stream))
    return out


def _output(memory, stream, meeting: Meeting, q: int, nbytes: int):
    dev = meeting.peers[q][0]
    return memory.view(("d", dev, int(meeting.words[q][RUN_RECV])), nbytes, stream, write=True)


def _reduce(inputs: list, order: tuple, data: tuple, result, outs: list | None, block_bytes: int,
            aliased: bool) -> None:
    """Each chunk of ``order`` reduced over the inputs in its order, a BLOCK at a time; into
    ``result`` at the chunk's offset, or (``outs``) into the output of the rank whose block of
    ``block_bytes`` it is."""
    _, _, reduce_kind, data_type = data
    # an output that may be an input (in place: the leader's own, or any rank's block) is
    # reduced in a buffer and written once its block is done; the OUT area directly
    buffer = np.empty(min(BLOCK, max((nb for _, nb, _ in order), default=0)), np.uint8) if aliased else None
    with np.errstate(over="ignore", invalid="ignore"):
        for at, nbytes, ranks in order:
            dst, base = (result, 0) if outs is None else (outs[at // block_bytes], at // block_bytes * block_bytes)
            for lo in range(at, at + nbytes, BLOCK):
                hi = min(lo + BLOCK, at + nbytes)
                block = buffer[:hi - lo] if aliased else dst[lo - base:hi - base]
                if len(ranks) == 1:
                    block[:] = inputs[ranks[0]][lo:hi]
                else:              # the first two straight into the block: one pass less than a copy
                    reduce_into(block, inputs[ranks[0]][lo:hi], inputs[ranks[1]][lo:hi], reduce_kind, data_type)
                for q in ranks[2:]:
                    reduce_into(block, block, inputs[q][lo:hi], reduce_kind, data_type)
                if aliased:
                    dst[lo - base:hi - base] = block
