"""A whole collective in one task per rank (``coll_run``): the ranks meet in their
communicator's scratch buffers, and one of them -- the leader -- reduces and moves every
rank's bytes while the others wait.

    rank q's stream ... coll_run .............................................. (ends)
        | staged: its input -> its scratch's IN area                             ^
        | publish in its run words: descriptor, buffers, modelled entry;         |
        | arrived = n; ring the leader's bell (a futex) --+                      |
        +-- sleep on its own bell until the leader's done == n <-------------+  |
                                                          v                  |  |
    leader's stream ... coll_run: publish; sleep until every rank arrived    |  |
                        check that every descriptor is its own               |  |
                        reduce / gather the inputs into the outputs          |  |
                        done = n; ring every rank's bell --------------------+  |
                                              staged: each copies its result out

Used for communicators whose ranks are all on one node with peer access between every pair
(mdev.runtime.collectives.whole decides; the others run the step-by-step schedules of
mdev.runtime.collectives.algorithms).  ``direct``: every rank is of one process, whose memory
the leader's device may touch wherever it lies, so it reads inputs and writes outputs in
place; ``staged``: ranks of several processes, whose buffers only their own devices touch --
each copies its input into its scratch buffer (granted to its peers at init), the leader
writes the results into its own (its OUT area), each rank copies its result out.  A rank
writes its IN area only after the leader's done of the operation before (it waited for it),
the leader its OUT area only once every rank arrived (so none still copies out of it).

Every element is reduced in the order of the algorithm the communicator chose (``order``:
per chunk, the ranks in the order the step-by-step schedule adds them), so results are
bit-equal to that schedule's.  Run words are written by other processes: the leader checks
their descriptor words against its own (a disagreement fails every rank), and reaches their
buffers through the device's memory checks (a rank of another process names no buffer: its
bytes are in its scratch).  A waiting rank looks at every peer's error word at each wake (a
failing rank rings everyone) and, every LOOK_S, at the full guard (a dead process, a
departed rank); a task that fails sets its communicator's error word, so the others give up
at once instead of waiting for the operation's timeout.

Modelled time (mdev.board.trace.DeviceModel): every rank's task starts when the last rank
entered -- HCCL's handshake at the start of an operation -- and lasts ``model_ns``, HCCL's
formula of the algorithm (mdev.runtime.collectives.cost).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from mdev import errors as E
from mdev.board.collectives import disagreement
from mdev.board.systasks import reduce_into
from mdev.board.tasks import CommGuard
from mdev.board.tasktable import TaskFault, op
from mdev.memory import futex
from mdev.taskspec import (COMM_PARA, COMM_REMOTE, COMM_TIMEOUT, RUN_ARRIVED, RUN_BELL, RUN_BYTES, RUN_COUNT,
                           RUN_DONE, RUN_ENTER, RUN_MET, RUN_RECV, RUN_SEND, RUN_WORD)

if TYPE_CHECKING:
    from mdev.board.device import Device
    from mdev.board.stream import DeviceStream

ALL_REDUCE, BROADCAST, ALL_GATHER, REDUCE_SCATTER, REDUCE = range(5)      # mdev.runtime.collectives.plan.KINDS
BARRIER = 7
BLOCK = 256 << 10      # bytes of a result finished at a time (stays in the CPU's cache)
LOOK_S = 0.05          # a waiting rank looks at the whole guard (peer processes) this often

_FAULT_WORDS = {E.ACL_ERROR_RT_TASK_TIMEOUT: COMM_TIMEOUT, E.ACL_ERROR_RT_PARAM_INVALID: COMM_PARA}


class Meeting:
    """One rank's view of the run words of every rank of its communicator, for one task."""

    def __init__(self, device: "Device", stream: "DeviceStream", rank: int, peers: tuple, timeout_s: float) -> None:
        self.device, self.stream, self.rank, self.peers = device, stream, rank, peers
        memory = device.memory
        self.words, self.errors = [], []
        for dev, err, run, _, _, _ in peers:
            self.words.append(memory.view(("d", dev, run), RUN_BYTES, stream, write=True).view(np.uint64))
            self.errors.append(memory.view(("d", dev, err), 16, stream).view(np.int64))
        self.own = self.words[rank]
        self.bells = [w.view(np.uint32)[2 * RUN_BELL:2 * RUN_BELL + 1] for w in self.words]
        self.deadline = time.monotonic() + timeout_s if timeout_s else None
        self._guards: list[CommGuard] | None = None

    def guard(self, q: int) -> CommGuard:
        if self._guards is None:
            own_err = ("d", self.peers[self.rank][0], self.peers[self.rank][1])
            self._guards = [CommGuard(self.device, self.stream, pid, r, ("d", dev, err), own_err)
                            for r, (dev, err, _, _, _, pid) in enumerate(self.peers)]
        return self._guards[q]

    def ring(self, ranks) -> None:
        """Wake the ranks' tasks sleeping on their bells."""
        for q in ranks:
            bell = self.bells[q]
            bell[0] += 1
            if futex.AVAILABLE:
                futex.wake(bell.ctypes.data)

    def others(self) -> list[int]:
        return [q for q in range(len(self.peers)) if q != self.rank]

    def wait(self, ready, what: str) -> None:
        """Sleep on this rank's bell until ``ready()``; TaskFault if the communicator breaks
        (here or at a peer), a peer's process or device goes, the stream is aborted, or the
        operation's timeout passes."""
        bell = self.bells[self.rank]
        look = time.monotonic() + LOOK_S
        while True:
            seen = int(bell[0])
            if ready():
                return
            if any(int(err[0]) for err in self.errors):
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
                futex.wait(bell.ctypes.data, seen, LOOK_S)
            else:
                time.sleep(0.0005)

    def check_all(self) -> None:
        for q in self.others():
            self.guard(q).raise_if_failed(peer_alive=False)
        self.guard(self.rank).raise_if_failed(peer_alive=True)

    def fail(self, fault: TaskFault) -> None:
        """The task failed: the communicator is broken here, and every peer hears of it now."""
        guard = self.guard(self.rank)
        guard.fail(fault)
        guard.set(_FAULT_WORDS.get(fault.code, COMM_REMOTE), self.rank)
        self.ring(self.others())


@op()
def coll_run(device: "Device", stream: "DeviceStream", rank: int, peers: tuple, leader: int,
             word: int, count: int, send: tuple, recv: tuple, in_bytes: int, out_bytes: int, order: tuple,
             staged: bool, fields: tuple, data: tuple, timeout_s: float, model_ns: float) -> None:
    """``peers``: each rank's (device, and in its HBM: its communicator's error word, run words,
    IN and OUT areas; its pid, 0 if of this process); ``order``: the reduction's chunks, (byte offset in the input, bytes, ranks in
    the order they are added); ``data``: (operation kind, item size, reduce kind, aclDataType);
    ``fields`` as for coll_check."""
    meeting = Meeting(device, stream, rank, peers, timeout_s)
    try:
        _run(device, stream, meeting, rank, leader, word, count, send, recv, in_bytes, out_bytes, order,
             staged, fields, data)
    except TaskFault as fault:
        meeting.fail(fault)
        raise
    device.wake()


def _run(device, stream, meeting: Meeting, rank: int, leader: int, word: int, count: int, send: tuple, recv: tuple,
         in_bytes: int, out_bytes: int, order: tuple, staged: bool, fields: tuple, data: tuple) -> None:
    memory, own, kind = device.memory, meeting.own, data[0]
    meeting.guard(rank).raise_if_failed(peer_alive=True)
    n = int(own[RUN_ARRIVED]) + 1
    mine = memory.view(send, in_bytes, stream)
    out = memory.view(recv, out_bytes, stream, write=True)
    dev, _, _, in_at, _, _ = meeting.peers[rank]
    if staged and in_bytes and _has_input(kind, rank, leader):
        memory.view(("d", dev, in_at), in_bytes, stream, write=True)[:] = mine
    model = device.trace.models.get(stream.client) if device.trace is not None else None
    own[RUN_WORD], own[RUN_COUNT] = word, count
    own[RUN_SEND], own[RUN_RECV] = send[2], recv[2]
    _float(own, RUN_ENTER)[0] = model.earliest(stream) if model is not None else 0.0
    own[RUN_ARRIVED] = n
    if rank != leader:
        meeting.ring([leader])
        head = meeting.words[leader]
        meeting.wait(lambda: int(head[RUN_DONE]) >= n, f"rank {leader} to finish the operation")
        stream.met_ns = float(_float(head, RUN_MET)[0])
        if staged:
            ldev, _, _, _, lout, _ = meeting.peers[leader]
            at = rank * out_bytes if kind == REDUCE_SCATTER else 0
            if out_bytes and kind != REDUCE:
                out[:] = memory.view(("d", ldev, lout + at), out_bytes, stream)
        return
    others = meeting.others()
    meeting.wait(lambda: all(int(meeting.words[q][RUN_ARRIVED]) >= n for q in others), "every rank to enter")
    for q in others:
        theirs = [int(meeting.words[q][RUN_WORD]), int(meeting.words[q][RUN_COUNT])]
        differ = disagreement(fields, [word, count], theirs, q)
        if differ:
            meeting.guard(rank).set(COMM_PARA, q)
            raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, differ)
    # when the last rank entered (modelled): its peers read it here, where it stays until
    # every rank entered the next operation
    stream.met_ns = _float(own, RUN_MET)[0] = max(float(_float(w, RUN_ENTER)[0]) for w in meeting.words)
    _lead(memory, stream, meeting, rank, kind, mine, out, in_bytes, out_bytes, order, staged, data)
    own[RUN_DONE] = n
    meeting.ring(others)


def _float(words: np.ndarray, index: int) -> np.ndarray:
    """Run word ``index`` as a float64 (a one-element view)."""
    return words[index:index + 1].view(np.float64)


def _has_input(kind: int, rank: int, leader: int) -> bool:
    """The rank's input is read by the leader (a broadcast reads only its root's, the leader)."""
    return kind != BROADCAST and rank != leader


def _lead(memory, stream, meeting: Meeting, me: int, kind: int, mine, out, in_bytes: int, out_bytes: int,
          order: tuple, staged: bool, data: tuple) -> None:
    """The leader's work: every rank's input into every rank's output (see the module docstring)."""
    p = len(meeting.peers)
    inputs = [mine if q == me else _input(memory, stream, meeting, q, in_bytes, staged) for q in range(p)]
    dev, _, _, _, out_at, _ = meeting.peers[me]
    whole = in_bytes if kind == REDUCE_SCATTER else out_bytes
    # where the complete result goes first: this rank's output, or (staged) its OUT area
    if staged and kind != REDUCE:
        result = memory.view(("d", dev, out_at), whole, stream, write=True)
    elif kind == REDUCE_SCATTER:
        result = None                                       # each block straight to its rank
    else:
        result = out
    if kind == BROADCAST:
        if staged:
            result[:] = mine
        else:
            for q in meeting.others():
                _output(memory, stream, meeting, q, out_bytes)[:] = mine
        return
    if kind == ALL_GATHER:
        for q, src in enumerate(inputs):
            result[q * in_bytes:(q + 1) * in_bytes] = src
    elif kind in (ALL_REDUCE, REDUCE, REDUCE_SCATTER, BARRIER):
        outs = None
        if kind == REDUCE_SCATTER and not staged:
            outs = [out if q == me else _output(memory, stream, meeting, q, out_bytes) for q in range(p)]
        _reduce(inputs, order, data, result, outs, out_bytes)
    if staged:
        at = me * out_bytes if kind == REDUCE_SCATTER else 0
        if kind != REDUCE and out_bytes:
            out[:] = result[at:at + out_bytes]
    elif kind in (ALL_REDUCE, ALL_GATHER):
        for q in meeting.others():
            _output(memory, stream, meeting, q, out_bytes)[:] = out


def _input(memory, stream, meeting: Meeting, q: int, nbytes: int, staged: bool):
    """Rank q's input: in its scratch's IN area (staged), or where its run words say it lies."""
    dev, _, _, in_at, _, _ = meeting.peers[q]
    return memory.view(("d", dev, in_at) if staged else ("d", dev, int(meeting.words[q][RUN_SEND])),
                       nbytes, stream)


def _output(memory, stream, meeting: Meeting, q: int, nbytes: int):
    dev = meeting.peers[q][0]
    return memory.view(("d", dev, int(meeting.words[q][RUN_RECV])), nbytes, stream, write=True)


def _reduce(inputs: list, order: tuple, data: tuple, result, outs: list | None, block_bytes: int) -> None:
    """Each chunk of ``order`` reduced over the inputs in its order, a BLOCK at a time through
    a buffer (an output may be its rank's input: in place); into ``result`` at the chunk's
    offset, or (``outs``) into the output of the rank whose block of ``block_bytes`` it is."""
    _, item, reduce_kind, data_type = data
    buffer = np.empty(min(BLOCK, max((nb for _, nb, _ in order), default=0)), np.uint8)
    for at, nbytes, ranks in order:
        dst, base = (result, 0) if outs is None else (outs[at // block_bytes], at // block_bytes * block_bytes)
        for lo in range(at, at + nbytes, BLOCK):
            hi = min(lo + BLOCK, at + nbytes)
            tmp = buffer[:hi - lo]
            tmp[:] = inputs[ranks[0]][lo:hi]
            for q in ranks[1:]:
                reduce_into(tmp, inputs[q][lo:hi], reduce_kind, data_type)
            dst[lo - base:hi - base] = tmp
