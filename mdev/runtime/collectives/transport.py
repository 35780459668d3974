"""How one rank's bytes reach another's: channels of two landing slots, ready and ack notifies.

    sender rank q (its stream)                          receiver rank r (its stream)
    [wait ack[k] if slot k is still in use]
    copy data -> r's landing slot k   (peer access)
      or  copy data -> r's pinned staging slot k        wait ready[k]  (guarded, see below)
    record ready[k]  (r's notify) -------------------->  [staged: copy staging slot k -> landing slot k]
                                                        ... use landing slot k (reduce, copy out, forward)
    wait ack[k] (q's notify)  <-----------------------  record ack[k]  (release)

Every landing slot lives in the receiver's scratch buffer (its HCCL buffer, registered once
and shared with the peers), so no operation needs a host round trip with its peers: the
whole schedule is queued at once and the notifies order it on the devices.  Three kinds
of pair:

    direct   peer access (one HCCS mesh, one PCIe switch): a peer copy into the landing
             slot, the scratch shared by IPC (pid-checked)
    staged   same node, no peer access (another HCCS island): the sender's device copies
             into pinned host memory of the receiver's process, the receiver's device copies
             it in -- modelled on the links of both host paths
    fabric   another cluster node (RoCE, UB): the sender's device writes the landing slot
             as an RDMA write does -- to the location the receiver registered in its card,
             records its notify by slot -- modelled on the route between the two devices
             (IPC keys never cross nodes)  A notify is a binary
flag (one record releases one wait), so a slot is written again only after the receiver
acknowledged it: at most two transfers per direction are in flight.  Every operation ends
with its channels drained (all acks waited), and both ends start the next one from slot 0.

A collective's waits carry a guard (mdev.board.tasks.CommGuard): the pid and error word of
the peer that is to record the notify, and this rank's error word, so a dead or failed peer
fails the wait instead of leaving it forever.  So do the ready records: a rank whose
communicator broke announces no transfer (its data would be made of what it never got).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from mdev.runtime import streams
from mdev.runtime.core import Stream
from mdev.runtime.memory.memops import submit_copy
from mdev.runtime.memtable import Operand

SLOTS = 2


@dataclass(eq=False)
class Signal:
    """A notify as the tasks name it: recorded on (device, slot), waited by (slot, uid)."""
    device: int
    slot: int
    uid: int

    def record(self, st: Stream, guard: tuple | None = None) -> None:
        """``guard``: a transfer's (see record_notify)."""
        streams.submit(st, "record_notify", self.device, self.slot, guard)

    def wait(self, st: Stream, timeout_s: float, guard: tuple | None = None, follow: Stream | None = None) -> None:
        """``follow``: the stream that records it, whose failure ``st`` takes over (a join)."""
        streams.submit(st, "wait_notify", self.slot, self.uid, timeout_s, guard,
                       None if follow is None else (follow.slot, follow.stream_id))


DIRECT, STAGED, FABRIC = "direct", "staged", "fabric"


def pair(topo, a: int, b: int) -> str:
    """How board device ``a`` sends to board device ``b``."""
    if topo.can_access_peer(a, b):
        return DIRECT
    return STAGED if topo.node_of(a) == topo.node_of(b) else FABRIC


@dataclass(eq=False)
class Channel:
    """This rank's sending end towards one peer."""
    peer: int                          # its rank
    slots: list                        # its landing slots for us: Operands (direct: its scratch,
                                       # staged: its pinned staging) or device locations (fabric)
    ready: list[Signal]                # its notifies, recorded by us
    ack: list[Signal]                  # ours, recorded by it
    guard: tuple                       # for our waits on its acks
    timeout_s: float
    kind: str = DIRECT
    busy: list[bool] = field(default_factory=lambda: [False] * SLOTS)
    next: int = 0

    def put(self, st: Stream, data: Operand) -> None:
        """Queue ``data`` (at most a slot) into the peer's next slot."""
        k = self.next
        if self.busy[k]:
            self.ack[k].wait(st, self.timeout_s, self.guard)
        if data.nbytes and self.kind == FABRIC:
            kind, dev, base = self.slots[k]
            at = 0
            for part in data.parts():
                streams.submit(st, "copy", (kind, dev, base + at), part.location(), part.nbytes)
                at += part.nbytes
        elif data.nbytes:
            submit_copy(st, self.slots[k].slice(0, data.nbytes), data)
        self.ready[k].record(st, self.guard)
        self.busy[k], self.next = True, k ^ 1

    def drain(self, st: Stream) -> None:
        """Wait until the peer released every slot we wrote."""
        for k in (self.next, self.next ^ 1):
            if self.busy[k]:
                self.ack[k].wait(st, self.timeout_s, self.guard)
                self.busy[k] = False

    def finish(self) -> None:
        """End of an operation (drained): the next one starts at slot 0, as the peer's inbox does."""
        assert not any(self.busy), "a channel was not drained"
        self.next = 0


@dataclass(eq=False)
class Inbox:
    """This rank's receiving end from one peer."""
    peer: int
    slots: list[Operand]               # our landing slots for it
    ready: list[Signal]                # ours, recorded by it
    ack: list[Signal]                  # its notifies, recorded by us
    guard: tuple                       # for our waits on its records
    timeout_s: float
    staging: list[Operand] | None = None   # our pinned staging slots for it (staged pairs)
    taken: list[int] = field(default_factory=list)
    next: int = 0

    def take(self, st: Stream, nbytes: int, arrived: Callable[[Stream], None] | None = None) -> Operand:
        """Wait for the peer's next transfer of ``nbytes``; its bytes are then in the operand
        returned (a landing slot) until ``release``.  ``arrived`` queues tasks right after the
        wait (the consistency check)."""
        k = self.next
        self.ready[k].wait(st, self.timeout_s, self.guard)
        if arrived is not None:
            arrived(st)
        slot = self.slots[k].slice(0, nbytes)
        if self.staging is not None and nbytes:
            submit_copy(st, slot, self.staging[k].slice(0, nbytes))
        self.taken.append(k)
        self.next = k ^ 1
        return slot

    def release(self, st: Stream) -> None:
        """The oldest slot taken and not yet released is free again: tell the peer."""
        self.ack[self.taken.pop(0)].record(st)

    def finish(self) -> None:
        """End of an operation: everything taken was released; the next one starts at slot 0."""
        assert not self.taken, "a landing slot was taken and never released"
        self.next = 0
