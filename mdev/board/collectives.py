"""Device-side support of collectives (mdev.runtime.collectives): a rank entering an
operation, the consistency check, a reduce-scatter's reduction in one task, and an
all-gather's read of a peer's chunk where it lies.

    rank q's stream:  coll_enter -> its own descriptor words (operation, count, ...)
                      ... first transfer to rank r ... record_notify(ready of rank r)
    rank r's stream:  wait_notify(ready, guard) -> coll_check(r's words, q's words) -> reduce ...

Each rank writes what it was asked to do into its communicator's header before its first
transfer of an operation; a peer checks those words against its own once that transfer
arrived, so ranks that disagree (another count, data type, reduce op, root or operation)
fail the operation on every rank -- the next synchronisation reports it -- instead of
mixing buffers of different sizes or waiting forever.  A failed check sets the rank's
communicator error word (see mdev.board.tasks.CommGuard): its later collective tasks give
up too.  The check is bookkeeping of the emulator, not data movement: it takes no engine
and no modelled time.

A chunk's owner reduces its own chunk and the chunks its peers' transfers landed in one
task (``coll_reduce``), in the order of the chain of reduce tasks it stands for and with
that chain's rounding (each step in the data type), so results are bit-equal to it; it
goes through the chunk a block at a time, reading each source once and writing the result
once (a chain reads and writes the result once per peer).

Ranks that may touch each other's memory (all of one process, with peer access) publish
with their descriptor the window peers may read in place (their receive buffer); a peer's
all-gather step then copies the chunk straight from it (``coll_pull``), once the owner's
notify said it is final -- one copy where a transfer into a landing slot and a copy out
were two.  The window is another process's word: the pull checks that the descriptor is of
this operation and the range inside the window, and reads through the device's memory
checks as any peer read does.

Entering is where a rank's operation begins in modelled time (mdev.board.trace.DeviceModel):
no transfer into this rank's landing slots counts as started before it, as HCCL's
algorithms begin each operation with a handshake (a peer sends only into a rank that
entered).  So a rank that enters late still pays for the data its peers sent early.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mdev import errors as E
from mdev.board.systasks import reduce_into
from mdev.board.tasks import CommGuard
from mdev.board.tasktable import TaskFault, op
from mdev.dtypes import itemsize
from mdev.taskspec import COMM_PARA

BLOCK = 256 << 10      # bytes of the result coll_reduce finishes at a time (stays in the CPU's cache)

if TYPE_CHECKING:
    from mdev.board.device import Device
    from mdev.board.stream import DeviceStream


@op(quick=lambda args: True)
def coll_enter(device: "Device", stream: "DeviceStream", dst: tuple, word: int, count: int, comm: tuple,
               window: tuple = ()) -> None:
    """Write the operation's two descriptor words, then ``window`` (a collective's: the
    offset in this device's HBM and the bytes of the buffer its peers may read in place, or
    (0, 0)); ``comm``: the communicator's error word (its collective waits' guards name it),
    which the modelled clock keys the entry by."""
    device.memory.view(dst, 16 + 8 * len(window), stream, write=True).view(np.uint64)[:] = (word, count, *window)


@op(quick=lambda args: True)
def coll_check(device: "Device", stream: "DeviceStream", mine: tuple, peer: tuple, fields: tuple,
               guard: tuple) -> None:
    """``fields``: (name, word, shift, bits, labels) of each descriptor field; ``labels`` names
    its values, or is (); ``guard`` as for a collective's wait (mdev.board.tasks.CommGuard)."""
    guard = CommGuard(device, stream, *guard)
    guard.ensure_intact()
    peer_rank = guard.peer_rank
    words = 1 + max(f[1] for f in fields)
    here = [int(w) for w in device.memory.view(mine, 8 * words, stream).view(np.uint64)]
    there = [int(w) for w in device.memory.view(peer, 8 * words, stream).view(np.uint64)]
    differ = [f for f in fields if _value(f, here) != _value(f, there)]
    if differ:
        guard.set(COMM_PARA, peer_rank)
        raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, "ranks disagree: " + ", ".join(
            f"{f[0]} {_label(f, there)} on rank {peer_rank}, {_label(f, here)} here" for f in differ))


@op()
def coll_pull(device: "Device", stream: "DeviceStream", dst: tuple, peer: tuple, mine: tuple, slot: tuple,
              offset: int, nbytes: int, guard: tuple) -> None:
    """``peer``: the peer's descriptor (4 words: operation, count, window offset and bytes),
    ``mine``: ours, whose operation word it must carry (the window is this operation's);
    ``offset``: where the bytes lie in its window; ``slot``: our landing slot, where they
    are instead if it published no window; ``guard`` as for a collective's wait."""
    guard = CommGuard(device, stream, *guard)
    guard.ensure_intact()
    if peer[0] != "d" or type(peer[1]) is not int:
        raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"coll_pull: {peer!r:.80} is no peer's device memory")
    words = [int(w) for w in device.memory.view(peer, 32, stream).view(np.uint64)]
    if words[0] != int(device.memory.view(mine, 8, stream).view(np.uint64)[0]):
        guard.set(COMM_PARA, guard.peer_rank)
        raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"rank {guard.peer_rank}'s descriptor is not of this operation")
    start, size = words[2], words[3]
    if size and not (type(offset) is int and type(nbytes) is int and 0 <= offset and offset + nbytes <= size):
        guard.set(COMM_PARA, guard.peer_rank)
        raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"{nbytes!r:.20} bytes at {offset!r:.20} are outside the "
                        f"{size}-byte window rank {guard.peer_rank} published")
    src = ("d", peer[1], start + offset) if size else slot
    try:
        device.memory.view(dst, nbytes, stream, write=True)[:] = device.memory.view(src, nbytes, stream)
    except TaskFault as fault:
        guard.fail(fault)
        raise
    device.wake()


def _value(field: tuple, words: list[int]) -> int:
    _, word, shift, bits, _ = field
    return (words[word] >> shift) & ((1 << bits) - 1)


def _label(field: tuple, words: list[int]) -> str:
    value, labels = _value(field, words), field[4]
    return labels[value] if value < len(labels) else str(value)


@op()
def coll_reduce(device: "Device", stream: "DeviceStream", dst: tuple, first: tuple, rest: tuple, nbytes: int,
                kind: int, data_type: int) -> None:
    """dst = op(...op(op(first, rest[0]), rest[1])..., rest[-1]) over ``nbytes`` of one data
    type; ``dst`` may be ``first``.  ``rest``'s locations are checked and pinned here (the
    dispatcher pins ``dst`` and ``first``)."""
    n = nbytes // itemsize(data_type) * itemsize(data_type)
    memory = device.memory
    if type(rest) is not tuple or not all(type(r) is tuple and len(r) == 3 for r in rest):
        raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"coll_reduce: {rest!r:.80} is no tuple of locations")
    pinned = memory.pin([r[2] for r in rest if r[0] == "d" and r[1] == device.index])
    try:
        out = memory.view(dst, n, stream, write=True)
        head = memory.view(first, n, stream)
        sources = [memory.view(r, n, stream) for r in rest]
        same = dst == first
        for lo in range(0, n, BLOCK):
            block = out[lo:lo + BLOCK]
            if not same:
                block[:] = head[lo:lo + BLOCK]
            for src in sources:
                reduce_into(block, src[lo:lo + BLOCK], kind, data_type)
    finally:
        memory.unpin(pinned)
    device.wake()
