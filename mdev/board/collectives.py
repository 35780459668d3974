"""Device-side support of collectives (mdev.runtime.collectives): a rank entering an
operation, and the consistency check.

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

Entering is where a rank's operation begins in modelled time (mdev.board.trace.DeviceModel):
no transfer into this rank's landing slots counts as started before it, as HCCL's
algorithms begin each operation with a handshake (a peer sends only into a rank that
entered).  So a rank that enters late still pays for the data its peers sent early.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mdev import errors as E
from mdev.board.tasks import CommGuard
from mdev.board.tasktable import TaskFault, op
from mdev.taskspec import COMM_PARA

if TYPE_CHECKING:
    from mdev.board.device import Device
    from mdev.board.stream import DeviceStream


@op(quick=lambda args: True)
def coll_enter(device: "Device", stream: "DeviceStream", dst: tuple, word: int, count: int, comm: tuple) -> None:
    """Write the operation's two descriptor words; ``comm``: the communicator's error word
    (its collective waits' guards name it), which the modelled clock keys the entry by."""
    device.memory.view(dst, 16, stream, write=True).view(np.uint64)[:] = (word, count)


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
    differ = disagreement(fields, here, there, peer_rank)
    if differ:
        guard.set(COMM_PARA, peer_rank)
        raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, differ)


def disagreement(fields: tuple, here: list[int], there: list[int], peer_rank: int) -> str:
    """What the descriptor words ``there`` of rank ``peer_rank`` say otherwise than ours
    (``here``), as the failure's message ("" if they agree)."""
    differ = [f for f in fields if _value(f, here) != _value(f, there)]
    return "ranks disagree: " + ", ".join(
        f"{f[0]} {_label(f, there)} on rank {peer_rank}, {_label(f, here)} here" for f in differ) if differ else ""


def _value(field: tuple, words: list[int]) -> int:
    _, word, shift, bits, _ = field
    return (words[word] >> shift) & ((1 << bits) - 1)


def _label(field: tuple, words: list[int]) -> str:
    value, labels = _value(field, words), field[4]
    return labels[value] if value < len(labels) else str(value)
