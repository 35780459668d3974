"""Whole collectives: an operation as one device task per rank (``coll_run``,
mdev.board.collective_run), where the communicator lets its ranks meet in each other's
scratch buffers.

    api.all_reduce / broadcast / all_gather / reduce_scatter / reduce / barrier
        |
        +-- whole.run(plan, ...) -- True: queued coll_run on the caller's stream
        |                           (its chunks' reduction order, HCCL's time)
        +-- False: step by step (mdev.runtime.collectives.algorithms)

A communicator runs whole when every pair of its ranks has peer access (one HCCS mesh or
PCIe switch: Comm.whole, decided at connect), its buffers are each one piece of memory, and
-- ranks of several processes, whose bytes go through their scratch buffers -- the
operation's input and output fit the IN and OUT areas; ``MDEV_HCCL_STEPS=1`` keeps every
operation step by step (its trace then shows each transfer and reduction).  A whole
operation reduces in the order the step-by-step schedule of the algorithm the communicator
chose would (``order``), so both give bit-equal results, and the time model charges it
HCCL's formula of that algorithm (mdev.runtime.collectives.cost) from the last rank's entry.
"""

from __future__ import annotations

import os

import numpy as np

from mdev import procfs
from mdev.runtime import core
from mdev.runtime.collectives import algorithms as A
from mdev.runtime.collectives import cost
from mdev.runtime.collectives.plan import ACL_TYPES, REDUCE_KINDS, Plan
from mdev.runtime.collectives.select import MESH, Layout
from mdev.runtime.collectives.transport import DIRECT
from mdev.runtime.memtable import Operand
from mdev.taskspec import KINDS, SHARERS_SHIFT, STAGE_IN, VIA_OUT, same_or_apart

REDUCING = ("all_reduce", "reduce_scatter", "reduce", "barrier")
# from this many input bytes on, every rank takes a share of an all-reduce's or reduce-scatter's
# chunks (one more meeting) instead of the last to enter reducing alone
SHARE_BYTES = 4 << 20
# ... and from this many where the ranks are no more than the cores: their devices run at once
# and a meeting costs a spin, not a wake (mdev.board.collective_run.SPIN_S)
SHARE_BYTES_SPINNING = 256 << 10
# below that, from this much work (bytes reduced), the last ranks to enter share it, as many as
# the machine has cores: the ranks' devices reduce at once, the others sleep on
SHARE_WORK = 4 << 20
CORES = procfs.cores()


def run(plan: Plan, kind: str, lay: Layout, count: int, item: int, send: Operand | None, recv: Operand | None,
        root: int = 0, algorithm: str | None = None) -> bool:
    """Queue ``kind`` on ``count`` elements of ``item`` bytes (per rank as HCCL counts it:
    all_gather's send count, reduce_scatter's receive count) as one task; False (nothing
    queued) if it must run step by step.  ``algorithm``: its name in a trace, if not the
    layout's (a reduce is a chain, timed as a ring)."""
    comm = plan.comm
    if comm.whole is None or lay.across or os.environ.get("MDEV_HCCL_STEPS", "").strip() == "1":
        return False
    if any(o is not None and len(o.parts()) > 1 for o in (send, recv)):
        return False
    p = comm.nranks
    in_bytes = (p * count if kind == "reduce_scatter" else count) * item if send is not None else 0
    out_bytes = (p * count if kind == "all_gather" else count) * item if recv is not None else 0
    fits = max(in_bytes, out_bytes) <= comm.area
    if comm.whole != DIRECT and not fits:
        return False
    none = comm.nowhere()
    nbytes = plan.size_of(kind, count) if kind != "barrier" else 0
    send_at, recv_at = (send or none).location(), (recv or none).location()
    plan.whole(kind, count, root, algorithm or lay.algorithm, (
        comm.rank, comm.places, send_at, recv_at, in_bytes, out_bytes,
        _order(comm, kind, lay, count, item, root), _mode(comm, kind, in_bytes, fits, send_at, recv_at),
        (KINDS.index(kind), item, REDUCE_KINDS[plan.op], ACL_TYPES.get(plan.dtype, 0)), comm.timeout_s,
        _model_ns(comm, lay, "all_reduce" if kind == "barrier" else kind, nbytes)))
    return True


def _mode(comm, kind: str, in_bytes: int, fits: bool, send_at: tuple, recv_at: tuple) -> int:
    """How the ranks' devices run it (mdev.taskspec's mode bits): inputs through the IN areas
    (ranks of several processes), results through the hub's OUT area where they fit, the
    reduction shared as _sharers says -- an all-reduce every rank shares, where every rank
    has a core, of ranks of one process, straight into every rank's output (each rank writes
    its chunks' sums into every output: no copy out of the OUT area), if each rank's output is
    its input or apart from it."""
    p = comm.nranks
    sharers = _sharers(p, kind, in_bytes if fits else 0)
    if comm.whole == DIRECT and kind == "all_reduce" and sharers == p <= CORES and \
            same_or_apart(send_at, recv_at, in_bytes):
        return sharers << SHARERS_SHIFT
    return (STAGE_IN if comm.whole != DIRECT else 0) | (VIA_OUT if fits else 0) | sharers << SHARERS_SHIFT


def _sharers(p: int, kind: str, in_bytes: int) -> int:
    """How many of the last ranks to enter reduce the chunks (1: the last alone): a share
    costs a wake -- a spin where every rank has a core -- and the ranks' devices share the
    machine's cores."""
    if kind not in ("all_reduce", "reduce_scatter"):
        return 1
    if p <= CORES and in_bytes >= SHARE_BYTES_SPINNING:
        return p
    if (p - 1) * in_bytes < SHARE_WORK:
        return 1
    return p if in_bytes >= SHARE_BYTES else min(p, CORES)


def _order(comm, kind: str, lay: Layout, count: int, item: int, root: int) -> bytes:
    """The reduction's chunks as the step-by-step schedule forms them, packed (per chunk: byte
    offset in the input, bytes, the ranks in the order it adds them -- see algorithms'
    summation orders); remembered per communicator."""
    key = (kind, lay.level0, lay.group, count, item, root)
    known = comm.orders.get(key)
    if known is not None:
        return known
    p = comm.nranks
    if kind not in REDUCING or not count:
        rows = []
    elif kind == "reduce":                       # a chain from the rank after the root
        rows = [(0, count * item, *((root + 1 + d) % p for d in range(p)))]
    else:
        group, m = list(lay.group), len(lay.group)
        first = 0 if lay.level0 == MESH else 1   # mesh: from the chunk's owner; ring: from the rank after it
        ranks = [tuple(group[(j + first + d) % m] for d in range(m)) for j in range(m)]
        if kind == "reduce_scatter":             # rank group[j]'s block
            rows = [(group[j] * count * item, count * item, *ranks[j]) for j in range(m)]
        else:                                    # all_reduce: chunks of each piece
            rows = [((o + co) * item, cn * item, *ranks[j]) for o, n in A.pieces(count, m, item, comm.slot_bytes)
                    for j, (co, cn) in enumerate(A.split(n, m))]
    known = comm.orders[key] = np.array(rows, np.int64).tobytes()
    return known


def _model_ns(comm, lay: Layout, op: str, nbytes: int) -> float:
    """HCCL's formula of ``op`` on ``nbytes`` (remembered per communicator: it walks the links)."""
    key = (op, lay.algorithm, nbytes)
    known = comm.formulas.get(key)
    if known is None:
        known = comm.formulas[key] = cost.predict(core.RUNTIME.attach().topology, comm.devices, lay, op, nbytes)
    return known
