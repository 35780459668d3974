"""Which algorithm a collective runs: from the board's topology, as HCCL chooses, and HCCL_ALGO.

    ranks' devices --topology--> levels:  level 0 = groups of ranks that reach each other by
                                           peer access (an HCCS island, a server); level 1 =
                                           the groups, joined by links without peer access
    each level 0 group: "mesh" when every pair has a link of its own (a full HCCS mesh),
                        "ring" when traffic goes through a switch or over several hops
    several groups of one size: "hierarchical" (level 0 inside the groups, a level 1 ring
                        between the ranks of one local index); groups of unequal sizes:
                        one "ring" over every rank

``HCCL_ALGO`` (hccl_env/HCCL_ALGO.md) is read when a communicator is made:
``level0:NA;level1:ring`` for every operation or ``allreduce=level0:NA;level1:ring/
allgather=...`` per operation.  HCCL accepts only ``NA`` (its own choice) at level 0; mdev
also takes ``ring`` and ``mesh`` there, to try the other intra-group algorithm.  Every level
1 algorithm HCCL names (ring, H-D_R, NHR, NHR_V1, NB, pipeline, pairwise, AHC) is accepted;
mdev runs a ring for each.
"""

from __future__ import annotations

from dataclasses import dataclass

from mdev.hccl_types import HCCL_E_PARA, HcclError

MESH, RING, HIERARCHICAL = "mesh", "ring", "hierarchical"
LEVEL0 = {"na": None, "ring": RING, "mesh": MESH, "fullmesh": MESH}
LEVEL1 = {"na", "ring", "h-d_r", "nhr", "nhr_v1", "nb", "pipeline", "pairwise", "ahc"}
OPS = ("allreduce", "allgather", "reducescatter", "broadcast", "reduce", "scatter", "alltoall")


@dataclass(frozen=True)
class Levels:
    """The comm's ranks as the topology groups them (rank numbers of the communicator)."""
    groups: tuple[tuple[int, ...], ...]       # level 0 groups, each in rank order
    direct: tuple[bool, ...]                  # per group: every pair has a link of its own

    @property
    def uniform(self) -> bool:
        """Groups of one size, each a run of consecutive ranks (servers, islands in rank order)."""
        return len({len(g) for g in self.groups}) == 1 and all(g == tuple(range(g[0], g[0] + len(g)))
                                                                 for g in self.groups)

    def group_of(self, rank: int) -> tuple[int, ...]:
        return next(g for g in self.groups if rank in g)

    def across(self, rank: int) -> tuple[int, ...]:
        """The ranks of ``rank``'s local index in every group (its level 1 ring)."""
        index = self.group_of(rank).index(rank)
        return tuple(g[index] for g in self.groups)


def levels(topo, devices: list[int]) -> Levels:
    """Group the ranks (``devices[r]`` is rank r's device) by peer access."""
    groups: list[list[int]] = []
    for rank, dev in enumerate(devices):
        for g in groups:
            if all(topo.can_access_peer(dev, devices[q]) and topo.can_access_peer(devices[q], dev) for q in g):
                g.append(rank)
                break
        else:
            groups.append([rank])
    direct = tuple(all(topo.path(devices[a], devices[b]).hops == 1 for a in g for b in g if a != b)
                   for g in groups)
    return Levels(tuple(tuple(g) for g in groups), direct)


@dataclass(frozen=True)
class Choice:
    """What HCCL_ALGO asks for: per operation, a level 0 algorithm (None: topology's choice)
    and whether level 1 was named."""
    level0: dict[str, str | None]
    level1: dict[str, str | None]


def parse_algo(text: str | None) -> Choice:
    level0 = dict.fromkeys(OPS)
    level1: dict[str, str | None] = dict.fromkeys(OPS)
    if text and text.strip():
        parts = [p for p in text.strip().split("/") if p.strip()]
        for part in parts:
            op, _, spec = part.rpartition("=")
            targets = OPS if not op.strip() else (op.strip().lower(),)
            if targets[0] not in OPS:
                raise HcclError(HCCL_E_PARA, f"HCCL_ALGO: unknown operation {op.strip()!r} "
                                f"(one of {', '.join(OPS)})")
            for item in (i for i in spec.split(";") if i.strip()):
                level, sep, algo = item.partition(":")
                level, algo = level.strip().lower(), algo.strip().lower()
                if not sep or level not in ("level0", "level1", "level2"):
                    raise HcclError(HCCL_E_PARA, f"HCCL_ALGO: {item.strip()!r} is not 'levelN:<algorithm>'")
                table = LEVEL0 if level == "level0" else dict.fromkeys(LEVEL1, RING)
                if algo not in table:
                    raise HcclError(HCCL_E_PARA, f"HCCL_ALGO: {level} cannot be {algo!r}")
                for t in targets:
                    if level == "level0":
                        level0[t] = table[algo]
                    elif level == "level1" and algo != "na":
                        level1[t] = RING
    return Choice(level0, level1)


@dataclass(frozen=True)
class Layout:
    """How one rank takes part in an operation."""
    algorithm: str                 # MESH, RING or HIERARCHICAL
    level0: str                    # MESH or RING: the algorithm over ``group``
    group: tuple[int, ...]         # the ranks of level 0, in ring order (every rank unless hierarchical)
    across: tuple[int, ...] = ()   # hierarchical: the level 1 ring (one rank of each group)


def layout(lv: Levels, choice: Choice, op: str, rank: int, nranks: int) -> Layout:
    """The algorithm of ``op`` (an OPS name) for ``rank`` of a communicator grouped as ``lv``."""
    forced = choice.level0.get(op)
    everyone = tuple(range(nranks))
    if len(lv.groups) == 1:
        algo = forced or (MESH if lv.direct[0] else RING)
        return Layout(algo, algo, everyone)
    if lv.uniform and op in ("allreduce", "allgather", "reducescatter") and len(lv.groups[0]) > 1:
        group = lv.group_of(rank)
        inside = forced or (MESH if lv.direct[lv.groups.index(group)] else RING)
        return Layout(HIERARCHICAL, inside, group, lv.across(rank))
    return Layout(RING, RING, everyone)
