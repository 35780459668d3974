"""HCCL's alpha-beta-gamma cost model of the algorithms, with alpha and beta from the board file.

    T(op, algorithm, p, n) from hicann/hccl docs/zh/user_guide/coll_algo_intro (Ring.md,
    Mesh.md, hierarchical_comm_principle.md):
                       ring                                   mesh
    all_reduce         2(p-1)a + 2(p-1)/p n b + (p-1)/p n g    2a + 2/p n b + (p-1)/p n g
    reduce_scatter     (p-1)a + (p-1)/p n (b + g)              a + 1/p n b + (p-1)/p n g
    all_gather         (p-1)a + (p-1)/p n b                    a + 1/p n b
    broadcast          (p-1)(a + n b)                          2a + 2/p n b
    reduce             (p-1)(a + n b + n g)                    2a + 2/p n b + (p-1)/p n g
    scatter            (p-1)a + (p-1)/p n b                    a + 1/p n b
    hierarchical       all_reduce = RS(l, n) inside + AR(g, n/l) across + AG(l, n) inside;
                       reduce_scatter = RS(g, n) across + RS(l, n/g) inside;
                       all_gather = AG(l, n/g) inside + AG(g, n) across

n is the data of one rank as HCCL counts it (all_reduce, broadcast, reduce: the buffer;
all_gather: the output; reduce_scatter, scatter: the input).  a (latency, ns) and b
(ns per byte) of a level are the worst over the transfers of one of its steps, each along
its route with the channels it shares with the step's other transfers (b = users /
bandwidth of the busiest channel; a staged transfer -- no peer access within a node -- is
a copy to host memory and one back: both latencies, both b's; between cluster nodes the
route crosses the fabric); g is the reduce task's ns per byte
(1 / the device's d2d_gbps, as mdev's time model runs reduce tasks).
"""

from __future__ import annotations

from mdev.runtime.collectives.select import HIERARCHICAL, MESH, Layout
from mdev.runtime.collectives.transport import STAGED, pair

RING_T = {
    "all_reduce": lambda p, n, a, b, g: 2 * (p - 1) * a + 2 * (p - 1) / p * n * b + (p - 1) / p * n * g,
    "reduce_scatter": lambda p, n, a, b, g: (p - 1) * a + (p - 1) / p * n * (b + g),
    "all_gather": lambda p, n, a, b, g: (p - 1) * a + (p - 1) / p * n * b,
    "broadcast": lambda p, n, a, b, g: (p - 1) * (a + n * b),
    "reduce": lambda p, n, a, b, g: (p - 1) * (a + n * b + n * g),
    "scatter": lambda p, n, a, b, g: (p - 1) * a + (p - 1) / p * n * b,
}
MESH_T = {
    "all_reduce": lambda p, n, a, b, g: 2 * a + 2 / p * n * b + (p - 1) / p * n * g,
    "reduce_scatter": lambda p, n, a, b, g: a + n / p * b + (p - 1) / p * n * g,
    "all_gather": lambda p, n, a, b, g: a + n / p * b,
    "broadcast": lambda p, n, a, b, g: 2 * a + 2 / p * n * b,
    "reduce": lambda p, n, a, b, g: 2 * a + 2 / p * n * b + (p - 1) / p * n * g,
    "scatter": lambda p, n, a, b, g: a + n / p * b,
}


def formula(op: str, algorithm: str, p: int, n: float, a: float, b: float, g: float) -> float:
    """HCCL's time of ``op`` by a flat ``algorithm`` (MESH or ring) over p ranks, n bytes."""
    if p == 1:
        return 0.0
    return (MESH_T if algorithm == MESH else RING_T)[op](p, n, a, b, g)


def level(topo, devices: list[int], flows: list[tuple[int, int]]) -> tuple[float, float]:
    """(a, b) of a step in which ``flows`` (pairs of ranks) transfer at once."""
    routes = []
    for src, dst in flows:
        a, b = devices[src], devices[dst]
        if pair(topo, a, b) != STAGED:          # peer access, or a fabric between nodes
            routes.append([(topo.path(a, b).channels(), topo.path(a, b).latency_us)])
        else:                                   # staged: to host memory, then to the peer
            up, down = topo.host_path(a), topo.host_path(b)
            routes.append([(up.channels(), up.latency_us),
                           ([(l, not f) for l, f in reversed(down.channels())], down.latency_us)])
    users: dict[tuple[int, tuple], int] = {}
    for route in routes:
        for leg, (channels, _) in enumerate(route):
            for ch in channels:
                users[leg, ch] = users.get((leg, ch), 0) + 1
    capacity = {l.id: l.effective_gbps for l in topo.links}
    worst_a = worst_b = 0.0
    for route in routes:
        a = sum(lat for _, lat in route) * 1000.0
        b = sum(max(users[leg, ch] / capacity[ch[0]] for ch in channels) for leg, (channels, _) in enumerate(route))
        worst_a, worst_b = max(worst_a, a), max(worst_b, b)
    return worst_a, worst_b


def _steps(ranks: tuple[int, ...], algorithm: str) -> list[tuple[int, int]]:
    m = len(ranks)
    if algorithm == MESH:
        return [(ranks[i], ranks[j]) for i in range(m) for j in range(m) if i != j]
    return [(ranks[i], ranks[(i + 1) % m]) for i in range(m)]


def predict(topo, devices: list[int], lay: Layout, op: str, nbytes: float) -> float:
    """HCCL's formula (ns) of ``op`` on n = ``nbytes`` under the layout ``lay`` of one rank."""
    g = 1.0 / topo.device(devices[lay.group[0]]).d2d_gbps
    if lay.algorithm != HIERARCHICAL:
        a, b = level(topo, devices, _steps(lay.group, lay.algorithm))
        return formula(op, lay.algorithm, len(lay.group), nbytes, a, b, g)
    inside = level(topo, devices, _steps(lay.group, lay.level0))
    width, local = len(lay.across), len(lay.group)
    mine = lay.group.index(next(r for r in lay.across if r in lay.group))    # our local index
    rings = [tuple(r - mine + i for r in lay.across) for i in range(local)]  # every local index's ring, at once
    across = level(topo, devices, [f for ring in rings for f in _steps(ring, "ring")])
    if op == "all_reduce":
        return (formula("reduce_scatter", lay.level0, local, nbytes, *inside, g)
                + formula("all_reduce", "ring", width, nbytes / local, *across, g)
                + formula("all_gather", lay.level0, local, nbytes, *inside, g))
    if op == "reduce_scatter":
        return (formula("reduce_scatter", "ring", width, nbytes, *across, g)
                + formula("reduce_scatter", lay.level0, local, nbytes / width, *inside, g))
    return (formula("all_gather", lay.level0, local, nbytes / width, *inside, g)
            + formula("all_gather", "ring", width, nbytes, *across, g))
