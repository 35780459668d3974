"""The algorithms: ring, mesh and hierarchical schedules of each operation, as Plan tasks.

Every phase works on a list of ranks in order (a ring, a group) and per-rank chunks (device
memory operands of this rank); operations combine phases (HCCL's coll_algo_intro):

    all_reduce       mesh: reduce-scatter + all-gather, each chunk's peers at once (one
                     side stream per peer for both phases)
                     ring: reduce-scatter + all-gather around the ring, p-1 steps each
                     hierarchical: RS inside the group, all-reduce across groups (ring of
                     the ranks of one local index), AG inside the group
    reduce_scatter   hierarchical: RS across groups, then inside the group
    all_gather       hierarchical: AG inside the group, then across groups
    broadcast        mesh: scatter + all-gather; otherwise a chain from the root
    reduce           a chain into the root;  scatter: the root to each rank
    all_to_all(_v)   every pair at once;      send / recv: one channel

Summation order (fp32 results are bit-exact against numpy doing the same):
    mesh reduce-scatter   chunk j at its owner j:    ((x_j + x_j+1) + x_j+2) + ... + x_j-1
    ring reduce-scatter   chunk j around the ring:   ((x_j+1 + x_j+2) + ... + x_j-1) + x_j
    hierarchical          inside each group first (its level 0 order), then across groups
    reduce (chain)        from the rank after the root: ((x_r+1 + x_r+2) + ...) + x_r
(indices are positions in the ring or group, cyclic).

A transfer never exceeds a landing slot: operations whose chunks are larger run in parts.
"""

from __future__ import annotations

from mdev.runtime.collectives.plan import Plan
from mdev.runtime.collectives.select import MESH, Layout
from mdev.runtime.core import Stream
from mdev.runtime.memtable import Operand


def split(count: int, parts: int) -> list[tuple[int, int]]:
    """(offset, length) in elements of ``parts`` nearly equal pieces of ``count`` (the first
    ``count % parts`` one element longer)."""
    base, extra = divmod(count, parts)
    out, at = [], 0
    for i in range(parts):
        n = base + (i < extra)
        out.append((at, n))
        at += n
    return out


def chunks(buf: Operand, count: int, parts: int, item: int) -> list[Operand]:
    return [buf.slice(o * item, n * item) for o, n in split(count, parts)]


def pieces(count: int, divisor: int, item: int, slot: int) -> list[tuple[int, int]]:
    """Element ranges of an operation on ``count`` elements whose transfers (``count`` /
    ``divisor`` elements, rounded up) fit a slot of ``slot`` bytes."""
    per = max(1, slot // item) * divisor             # elements of one part
    if count <= per:
        return [(0, count)]
    return [(o, min(per, count - o)) for o in range(0, count, per)]


# ---------------------------------------------------------------------------- phases
def ring_reduce_scatter(plan: Plan, st: Stream, ring: list[int], me: int, src: list[Operand], out: Operand) -> None:
    """``out`` = reduction of chunk ``me`` of every rank of ``ring`` (``src``: this rank's chunks
    by ring position; ``out`` may be ``src[me]``)."""
    m = len(ring)
    if m == 1:
        plan.copy(st, out, src[0])
        return
    right, left = ring[(me + 1) % m], ring[(me - 1) % m]
    held = None                                   # the slot with the partial sum to forward
    for s in range(m - 1):
        plan.put(st, right, src[(me - s - 1) % m] if held is None else held)
        if held is not None:
            plan.release(st, left)
        else:
            plan.copy(st, out, src[me])           # beside the first transfer: our own share
        got = (me - s - 2) % m
        slot = plan.take(st, left, src[got].nbytes)
        if s < m - 2:
            plan.reduce(st, slot, src[got])       # partial + ours, forwarded next step
            held = slot
        else:
            plan.reduce(st, out, slot)            # got == me: ours + partial
            plan.release(st, left)


def ring_all_gather(plan: Plan, st: Stream, ring: list[int], me: int, mine: Operand, outs: list[Operand]) -> None:
    """``outs[j]`` = chunk of ring position j (``mine`` is ours; ``outs[me]`` may be ``mine``).
    A received chunk is forwarded and copied out at once (a side stream copies)."""
    m = len(ring)
    if m == 1:
        plan.copy(st, outs[0], mine)
        return
    right, left = ring[(me + 1) % m], ring[(me - 1) % m]
    held, held_at = mine, me
    for s in range(m - 1):
        with plan.parallel(1) as (side,):
            plan.put(st, right, held)
            plan.copy(side.stream, outs[held_at], held)
        if s:
            plan.release(st, left)
        held_at = (me - s - 1) % m
        held = plan.take(st, left, outs[held_at].nbytes)
    plan.copy(st, outs[held_at], held)
    plan.release(st, left)


def mesh_reduce_scatter(plan: Plan, st: Stream, group: list[int], me: int, src: list[Operand], out: Operand) -> None:
    """As ring_reduce_scatter, every peer at once: a side stream per peer puts our chunk for it
    and takes its chunk for us; the caller's stream reduces them in order."""
    if len(group) == 1:
        plan.copy(st, out, src[0])
        return
    with plan.parallel(len(group) - 1) as sides:
        _mesh_reduce_scatter(plan, st, sides, group, me, src, out)


def mesh_all_gather(plan: Plan, st: Stream, group: list[int], me: int, mine: Operand, outs: list[Operand]) -> None:
    if len(group) == 1:
        plan.copy(st, outs[0], mine)
        return
    with plan.parallel(len(group) - 1) as sides:
        _mesh_all_gather(plan, sides, group, me, mine, outs)
        plan.copy(st, outs[me], mine)


def mesh_all_reduce(plan: Plan, st: Stream, group: list[int], me: int, src: list[Operand], dst: list[Operand]) -> None:
    """mesh_reduce_scatter then mesh_all_gather on the same side streams, forked once: the
    caller's stream hands each side over (a notify) once our chunk is reduced, where a join
    and a fork of every side would come between the phases."""
    if len(group) == 1:
        plan.copy(st, dst[0], src[0])
        return
    with plan.parallel(len(group) - 1) as sides:
        _mesh_reduce_scatter(plan, st, sides, group, me, src, dst[me])
        for side in sides:
            plan.hand_over(side)
        _mesh_all_gather(plan, sides, group, me, dst[me], dst)


def _mesh_reduce_scatter(plan: Plan, st: Stream, sides: list, group: list[int], me: int, src: list[Operand],
                         out: Operand) -> None:
    """Each side puts our chunk for its peer; the caller's stream takes the peers' chunks
    for us in order and reduces them -- a staged one is taken on its side (its copy in from
    host memory runs beside the others), which signals the caller's stream."""
    m = len(group)
    landed = []
    for d, side in enumerate(sides, 1):
        q = (me + d) % m
        plan.put(side.stream, group[q], src[q])
        if plan.staged(group[q]):
            landed.append(plan.take(side.stream, group[q], src[me].nbytes))
            plan.signal(side)
        else:
            landed.append(None)
    plan.copy(st, out, src[me])
    for d, (side, slot) in enumerate(zip(sides, landed), 1):
        q = group[(me + d) % m]
        if slot is None:
            slot = plan.take(st, q, src[me].nbytes)
        else:
            plan.await_signal(side, st)
        plan.reduce(st, out, slot)
        plan.release(st, q)


def _mesh_all_gather(plan: Plan, sides: list, group: list[int], me: int, mine: Operand, outs: list[Operand]) -> None:
    m = len(group)
    for d, side in enumerate(sides, 1):
        q = (me + d) % m
        plan.put(side.stream, group[q], mine)
        slot = plan.take(side.stream, group[q], outs[q].nbytes)
        plan.copy(side.stream, outs[q], slot)
        plan.release(side.stream, group[q])


PHASES = {"mesh": (mesh_reduce_scatter, mesh_all_gather), "ring": (ring_reduce_scatter, ring_all_gather)}


# ---------------------------------------------------------------------------- operations
def all_reduce(plan: Plan, st: Stream, lay: Layout, send: Operand, recv: Operand, count: int, item: int) -> None:
    rs, ag = PHASES[lay.level0]
    group = list(lay.group)
    me = group.index(plan.comm.rank)
    src, dst = chunks(send, count, len(group), item), chunks(recv, count, len(group), item)
    if lay.level0 == MESH and not lay.across:       # both phases on one fork of the side streams
        mesh_all_reduce(plan, st, group, me, src, dst)
        return
    rs(plan, st, group, me, src, dst[me])
    if lay.across:                                  # all-reduce of our chunk across the groups
        ring = list(lay.across)
        g = ring.index(plan.comm.rank)
        parts = chunks(dst[me], dst[me].nbytes // item, len(ring), item)
        ring_reduce_scatter(plan, st, ring, g, parts, parts[g])
        ring_all_gather(plan, st, ring, g, parts[g], parts)
    ag(plan, st, group, me, dst[me], dst)


def _groups(lay: Layout, rank: int) -> list[list[int]]:
    """The ranks of every group of a hierarchical layout (groups are runs of ranks), in ring order."""
    local = lay.group.index(rank)
    return [[first - local + j for j in range(len(lay.group))] for first in lay.across]


def reduce_scatter(plan: Plan, st: Stream, lay: Layout, send: Operand, recv: Operand, rc: int, item: int,
                   at: tuple[int, int]) -> None:
    """Elements ``at`` = (offset, length) of every rank's block of ``rc`` (one part)."""
    o, n = at
    block = lambda r: send.slice((r * rc + o) * item, n * item)      # noqa: E731
    out = recv.slice(o * item, n * item)
    rs, _ = PHASES[lay.level0]
    group = list(lay.group)
    if not lay.across:
        rs(plan, st, group, group.index(plan.comm.rank), [block(r) for r in group], out)
        return
    ring = list(lay.across)                         # across the groups first, then inside ours
    work = plan.comm.work(len(group) * n * item)
    ring_reduce_scatter(plan, st, ring, ring.index(plan.comm.rank),
                        [join([block(r) for r in g]) for g in _groups(lay, plan.comm.rank)], work)
    rs(plan, st, group, group.index(plan.comm.rank), chunks(work, len(group) * n, len(group), item), out)


def all_gather(plan: Plan, st: Stream, lay: Layout, send: Operand, recv: Operand, sc: int, item: int,
               at: tuple[int, int]) -> None:
    o, n = at
    block = lambda r: recv.slice((r * sc + o) * item, n * item)      # noqa: E731
    mine = send.slice(o * item, n * item)
    _, ag = PHASES[lay.level0]
    group = list(lay.group)
    ag(plan, st, group, group.index(plan.comm.rank), mine, [block(r) for r in group])
    if lay.across:                                  # inside our group first, then across the groups
        ring = list(lay.across)
        outs = [join([block(r) for r in g]) for g in _groups(lay, plan.comm.rank)]
        g = ring.index(plan.comm.rank)
        ring_all_gather(plan, st, ring, g, outs[g], outs)


def broadcast(plan: Plan, st: Stream, lay: Layout, buf: Operand, count: int, item: int, root: int) -> None:
    m, me = plan.comm.nranks, plan.comm.rank
    if m == 1:
        return
    if lay.algorithm == MESH:                       # scatter from the root, then all-gather
        parts = chunks(buf, count, m, item)
        if me == root:
            with plan.parallel(m - 1) as sides:
                for d, side in enumerate(sides, 1):
                    plan.put(side.stream, (root + d) % m, parts[(root + d) % m])
        else:
            slot = plan.take(st, root, parts[me].nbytes)
            plan.copy(st, parts[me], slot)
            plan.release(st, root)
        mesh_all_gather(plan, st, list(range(m)), me, parts[me], parts)
        return
    pos, nxt, prev = (me - root) % m, (me + 1) % m, (me - 1) % m    # a chain from the root
    for o, n in pieces(count, 1, item, plan.comm.slot_bytes):
        data = buf.slice(o * item, n * item)
        if pos == 0:
            plan.put(st, nxt, data)
            continue
        slot = plan.take(st, prev, data.nbytes)
        if pos < m - 1:
            plan.put(st, nxt, slot)
        plan.copy(st, data, slot)
        plan.release(st, prev)


def reduce(plan: Plan, st: Stream, send: Operand, recv: Operand | None, count: int, item: int, root: int) -> None:
    """A chain from the rank after the root into the root."""
    m, me = plan.comm.nranks, plan.comm.rank
    if m == 1:
        plan.copy(st, recv, send)
        return
    pos, nxt, prev = (me - root - 1) % m, (me + 1) % m, (me - 1) % m
    for o, n in pieces(count, 1, item, plan.comm.slot_bytes):
        data = send.slice(o * item, n * item)
        if pos == 0:
            plan.put(st, nxt, data)
            continue
        slot = plan.take(st, prev, data.nbytes)
        if pos < m - 1:
            plan.reduce(st, slot, data)             # partial + ours
            plan.put(st, nxt, slot)
        else:
            out = recv.slice(o * item, n * item)
            plan.copy(st, out, data)
            plan.reduce(st, out, slot)
        plan.release(st, prev)


def scatter(plan: Plan, st: Stream, lay: Layout, send: Operand | None, recv: Operand, rc: int, item: int,
            root: int) -> None:
    m, me = plan.comm.nranks, plan.comm.rank
    for o, n in pieces(rc, 1, item, plan.comm.slot_bytes):
        out = recv.slice(o * item, n * item)
        if me != root:
            slot = plan.take(st, root, out.nbytes)
            plan.copy(st, out, slot)
            plan.release(st, root)
            continue
        block = lambda q: send.slice((q * rc + o) * item, n * item)   # noqa: E731
        plan.copy(st, out, block(me))
        if lay.algorithm == MESH and m > 1:         # every rank at once
            with plan.parallel(m - 1) as sides:
                for d, side in enumerate(sides, 1):
                    plan.put(side.stream, (me + d) % m, block((me + d) % m))
        else:                                       # one after another
            for d in range(1, m):
                plan.put(st, (me + d) % m, block((me + d) % m))


def all_to_all(plan: Plan, st: Stream, out_blocks: list[Operand], in_blocks: list[Operand]) -> None:
    """``out_blocks[q]``: what we send rank q; ``in_blocks[q]``: where what q sends us goes."""
    m, me = plan.comm.nranks, plan.comm.rank
    plan.copy(st, in_blocks[me], out_blocks[me])
    if m == 1:
        return
    with plan.parallel(m - 1) as sides:
        for d, side in enumerate(sides, 1):
            q = (me + d) % m
            exchange(plan, side.stream, q, out_blocks[q], q, in_blocks[q])


def exchange(plan: Plan, st: Stream, dest: int | None, data: Operand | None, src: int | None,
             into: Operand | None) -> None:
    """Send ``data`` to ``dest`` and/or receive ``into`` from ``src``, slot by slot (sends and
    receives alternate, so two ranks exchanging more than two slots never wait on each other)."""
    slot = plan.comm.slot_bytes
    outs = [data.slice(o, min(slot, data.nbytes - o)) for o in range(0, data.nbytes, slot)] if data else []
    ins = [into.slice(o, min(slot, into.nbytes - o)) for o in range(0, into.nbytes, slot)] if into else []
    if data is not None and not outs:
        outs = [data]                               # an empty message still travels (its check)
    if into is not None and not ins:
        ins = [into]
    for k in range(max(len(outs), len(ins))):
        if k < len(outs):
            plan.put(st, dest, outs[k])
        if k < len(ins):
            landed = plan.take(st, src, ins[k].nbytes)
            plan.copy(st, ins[k], landed)
            plan.release(st, src)


def join(parts: list[Operand]) -> Operand:
    """One operand over several ranges (copied and reduced range by range)."""
    flat = [p for op in parts for p in op.parts() if p.nbytes]
    if len(flat) == 1:
        return flat[0]
    if not flat:
        return parts[0].slice(0, 0)
    return Operand(flat[0].kind, flat[0].ptr, sum(p.nbytes for p in flat), flat[0].allocation, flat)
