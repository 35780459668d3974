"""One operation of one rank, as tasks: what the algorithms are written in.

    caller's stream (main) ..... coll_enter (descriptor) -> fork ----------------> join
    side stream k                                              wait fork -> ... -> record join
    tasks: put / take / release (mdev.runtime.collectives.transport), copy, reduce, check

A Plan queues its tasks as the algorithm asks for them; nothing runs on the host after
that.  Side streams give the concurrency HCCL gets from its slave streams (a mesh drives a
copy per peer at once); ``parallel`` forks them from the caller's stream and joins them back
with local notifies, so the operation stays ordered with the stream's other work.  A join
(and a mid-round signal) takes over the side stream's failure (wait_notify's ``follow``):
only the caller's stream is ever synchronised, so a failure left on a side stream would
let a broken operation report success.  The first transfer taken from each peer is
followed by the consistency check of both ranks' descriptors (mdev.board.collectives).
At the end every channel used is drained, and the communicator notes how far the caller's
stream goes (a destroy waits until it got there).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from mdev import constants as C
from mdev.hccl_types import DATA_TYPE_SIZE, HCCL_E_NOT_SUPPORT, HcclError
from mdev.runtime import capture, streams
from mdev.runtime.collectives.comm import DESC, ERR, P2P_DESC, Comm, Side
from mdev.runtime.core import Stream
from mdev.runtime.memory.memops import submit_copy
from mdev.runtime.memtable import Operand, pairs
from mdev.taskspec import FIELDS, KINDS, REDUCE_PROD

# HcclDataType -> the aclDataType a reduce task computes in; HcclReduceOp -> its kind
ACL_TYPES = {0: C.ACL_INT8, 1: C.ACL_INT16, 2: C.ACL_INT32, 3: C.ACL_FLOAT16, 4: C.ACL_FLOAT, 5: C.ACL_INT64,
             6: C.ACL_UINT64, 7: C.ACL_UINT8, 8: C.ACL_UINT16, 9: C.ACL_UINT32, 10: C.ACL_DOUBLE, 11: C.ACL_BF16}
REDUCE_KINDS = {0: C.ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, 1: REDUCE_PROD, 2: C.ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX,
                3: C.ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN}


class Plan:
    """The tasks of one operation of one rank (see the module docstring)."""

    def __init__(self, comm: Comm, main: Stream, dtype: int = 0, op: int = 0) -> None:
        self.comm, self.main, self.dtype, self.op = comm, main, dtype, op
        self.drain: dict[int, set[int]] = {}        # id(stream) -> peers whose channel it used
        self.channels: set[int] = set()
        self.inboxes: set[int] = set()
        self.checks: dict[int, tuple[int, int]] = {}   # peer -> (our descriptor, its descriptor) offsets
        self.kind: tuple | None = None                # a collective's (name, bytes, ranks, algorithm, number)
        self.capture = capture.capturing(main)        # the capture recording the caller's stream, if any
        if main.recorder is not None and self.capture is None:
            raise HcclError(HCCL_E_NOT_SUPPORT, f"stream {main.stream_id} is persistent (its tasks build a model): "
                            "mdev runs no collective on it; capture the collective instead (ri_capture_begin)")
        self.marks: dict[int, list[int]] = {}          # in a capture: id(side) -> its signals' markers

    def collective(self, kind: str, count: int, root: int = 0, algorithm: str = "", nbytes: int | None = None) -> None:
        """Describe a collective (every rank takes part): written before its first transfer,
        checked against each peer's on the first transfer taken from it.  ``algorithm`` and
        ``nbytes`` (default: from ``count``) name it in a trace."""
        seq = self._announce(kind, count, algorithm, nbytes)
        at = DESC + 16 * (seq % 2)
        self._describe(at, self.word(kind, root, seq), count)
        self.checks = {q: (at, at) for q in range(self.comm.nranks) if q != self.comm.rank}

    def whole(self, kind: str, count: int, root: int, algorithm: str, run: tuple) -> None:
        """A collective in one task (mdev.runtime.collectives.whole): ``run`` is the coll_run
        task's arguments after its descriptor words, which come from here."""
        seq = self._announce(kind, count, algorithm, None)
        rank, peers, *rest = run
        streams.submit(self.main, "coll_run", rank, peers, root, self.word(kind, root, seq), count, *rest)

    def _announce(self, kind: str, count: int, algorithm: str, nbytes: int | None) -> int:
        """Number the communicator's next collective (after the one before: Comm.run_after),
        and name it for a trace and a capture."""
        self.comm.run_after(self.main if self.capture is None else None)
        seq = self.comm.ops
        self.comm.ops += 1
        self.kind = (kind, self.size_of(kind, count) if nbytes is None else nbytes, self.comm.nranks, algorithm, seq)
        if self.capture is not None:        # each replay runs it: the model dump and the trace name it
            self.capture.collectives.append(self.kind)
            self.capture.note(self.main, f"HCCL {kind} {self.kind[1]} B, {self.kind[2]} ranks, {algorithm}, "
                                         f"operation {seq} of rank {self.comm.rank}")
        return seq

    def _describe(self, at: int, word: int, count: int) -> None:
        """One task: the descriptor words, and where the rank entered (modelled time)."""
        streams.submit(self.main, "coll_enter", self.comm.loc(at), word, count, self.comm.loc(ERR))

    def word(self, kind: str, root: int, seq: int) -> int:
        """The first descriptor word (FIELDS) of an operation."""
        return KINDS.index(kind) | self.dtype << 8 | self.op << 16 | (root & 0xFFFFFF) << 24 | (seq & 0xFFFF) << 48

    def size_of(self, kind: str, count: int) -> int:
        """The operation's size as nccl-tests names it: all_gather's output, reduce_scatter's
        input (``count`` elements per rank), the buffer of the others."""
        nbytes = count * DATA_TYPE_SIZE.get(self.dtype, 1)
        return nbytes * self.comm.nranks if kind in ("all_gather", "reduce_scatter") else nbytes

    def point_to_point(self, peer: int, outgoing: bool, count: int) -> None:
        """Describe one direction of a transfer with ``peer`` (a send, or a receive)."""
        key = (peer, outgoing)
        seq = self.comm.p2p.get(key, 0)
        self.comm.p2p[key] = seq + 1
        mine = P2P_DESC + 32 * peer + 16 * (not outgoing)
        self._describe(mine, self.word("send/recv", 0, seq), count)
        if not outgoing:
            self.checks[peer] = (mine, P2P_DESC + 32 * self.comm.rank)     # its outgoing one towards us

    # -- transfers
    def put(self, st: Stream, peer: int, data: Operand) -> None:
        self.comm.channels[peer].put(st, data)
        self.drain.setdefault(id(st), set()).add(peer)
        self.channels.add(peer)

    def take(self, st: Stream, peer: int, nbytes: int) -> Operand:
        self.inboxes.add(peer)
        check = self.checks.pop(peer, None)           # the first transfer from the peer
        return self.comm.inboxes[peer].take(st, nbytes, self._check(peer, *check) if check else None)

    def staged(self, peer: int) -> bool:
        """What ``peer`` sends us lands in host memory first (a copy in is part of a take)."""
        return self.comm.inboxes[peer].staging is not None

    def release(self, st: Stream, peer: int) -> None:
        self.comm.inboxes[peer].release(st)

    def _check(self, peer: int, mine: int, theirs: int):
        comm = self.comm
        kind, dev, base = comm.peer_headers[peer]

        def check(st: Stream) -> None:
            streams.submit(st, "coll_check", comm.loc(mine), (kind, dev, base + theirs), FIELDS, comm.guard(peer))
        return check

    # -- local work
    def copy(self, st: Stream, dst: Operand, src: Operand) -> None:
        if dst.nbytes and dst.ptr != src.ptr:
            submit_copy(st, dst, src)

    def reduce(self, st: Stream, dst: Operand, src: Operand) -> None:
        """dst = op(dst, src) in the operation's data type."""
        for d, s in pairs(dst, src):
            if d.nbytes:
                streams.submit(st, "reduce", d.location(), s.location(), d.nbytes, REDUCE_KINDS[self.op],
                               ACL_TYPES[self.dtype])

    # -- concurrency
    @contextmanager
    def parallel(self, n: int) -> Iterator[list[Side]]:
        """``n`` side streams forked from the caller's stream, joined back at the end (each
        drains the channels it used first).  In a capture the side streams are captured with
        it (their tasks go into the graph, ordered by its markers) for as long as they are
        forked, so that every replay runs them."""
        sides = [self.comm.side(k) for k in range(n)]
        for side in sides:
            if self.capture is not None:
                self.capture.fork(self.main, side.stream, f"side stream of HCCL rank {self.comm.rank}")
            else:
                side.fork.record(self.main)
                side.fork.wait(side.stream, self.comm.timeout_s)
        yield sides
        for side in sides:
            self._drain(side.stream)
            if self.capture is None:
                side.join.record(side.stream)
        for side in sides:
            if self.capture is not None:
                self.capture.leave(side.stream, self.main)
            else:
                side.join.wait(self.main, self.comm.timeout_s, follow=side.stream)

    def hand_over(self, side: Side) -> None:
        """The side's next tasks run after what the caller's stream has queued so far (as
        the fork at the start of ``parallel``, in the middle of it)."""
        if self.capture is not None:
            self.capture.order(self.main, side.stream)
        else:
            side.resume.record(self.main)
            side.resume.wait(side.stream, self.comm.timeout_s)

    def signal(self, side: Side) -> None:
        """The side has got somewhere the caller's stream waits for (``await_signal``)."""
        if self.capture is not None:
            self.marks.setdefault(id(side), []).append(self.capture.mark(side.stream))
        else:
            side.mid.record(side.stream)

    def await_signal(self, side: Side, st: Stream | None = None) -> None:
        if self.capture is not None:       # a graph's markers: a failed lane fails the replay
            self.capture.await_mark(st or self.main, self.marks[id(side)].pop(0))
        else:
            side.mid.wait(st or self.main, self.comm.timeout_s, follow=side.stream)

    def finish(self) -> None:
        """The operation's last tasks: drain what the caller's stream sent; inboxes start over."""
        self._drain(self.main)
        self.comm.queued[self.main.handle] = (self.main, self.main.seq)     # how far a destroy waits
        for peer in self.channels:
            self.comm.channels[peer].finish()
        for peer in self.inboxes:
            self.comm.inboxes[peer].finish()

    def _drain(self, st: Stream) -> None:
        for peer in sorted(self.drain.pop(id(st), ())):
            self.comm.channels[peer].drain(st)
