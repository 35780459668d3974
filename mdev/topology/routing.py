"""Routing over a Topology: device<->device and device<->host paths, and how a path is
classified (matrix label, aclrtGetDevicesTopo class, peer-access capability).

Device indices are board-global (see model: cluster nodes).  A route between devices of
two cluster nodes is a real route over the inter-node links (what staged transports and
modelled time use), but it is never P2P-capable: peer access does not cross servers.

Rules (FORMAT.md, "Routing"): fewest hops first, then the widest bottleneck, then the lowest
latency, then link ids (for determinism). Devices are endpoints only: they never forward
traffic for others. Results are cached on the Topology.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from .model import DEVICE, HOST_LABELS, P2P_LABELS, TOPO_CLASS, Link, Path, TopologyModel, is_a3

Route = tuple[list[str], list[Link]]


class Topology(TopologyModel):
    """A board as users hold it: its parts (the model) and the routes between them."""

    def path(self, a: int, b: int) -> Path:
        """Route from device a to device b (a == b gives the on-device path)."""
        return device_path(self, a, b)

    def host_path(self, dev: int, numa: int | None = None) -> Path:
        """Route from device `dev` to host memory on NUMA node `numa` (default: nearest)."""
        return host_path(self, dev, numa)

    def can_access_peer(self, a: int, b: int) -> bool:
        """aclrtDeviceCanAccessPeer: False for a == b (not a peer), else the path's p2p
        (always False across cluster nodes)."""
        return a != b and self.path(a, b).p2p

    def fabric_reachable(self, a: int, b: int) -> bool:
        """Whether device a can take memory of device b through a FABRIC shareable handle:
        both are Atlas A3 parts and the route stays on one supernode's fabric (no RoCE
        hop), across servers or within one."""
        return (is_a3(self.device(a).soc_name) and is_a3(self.device(b).soc_name)
                and self.path(a, b).label != "ROCE")

    def topo_class(self, a: int, b: int) -> int:
        """aclrtGetDevicesTopo value for the pair (0 for a == b)."""
        return self.path(a, b).topo_class

    def matrix(self, node: int | None = None) -> list[list[str]]:
        """Label of every device pair, rows = source device, "X" on the diagonal: of the
        whole board, or of cluster node ``node``'s devices (in local order)."""
        devices = range(self.device_count) if node is None else self.node(node).devices
        return [[self.path(a, b).label for b in devices] for a in devices]


def device_path(topo: TopologyModel, a: int, b: int) -> Path:
    src, dst = topo.device(a).name, topo.device(b).name
    key = ("path", a, b)
    if key not in topo._cache:
        if a == b:  # an on-device copy: no links, HBM-bound
            topo._cache[key] = Path(src, dst, (src,), (), "X", 0, False,
                                    topo.device(a).d2d_gbps, 0.0)
        else:
            same_node = topo.node_of(a) == topo.node_of(b)
            topo._cache[key] = _make_path(topo, _require(topo, src, {dst}, dst), peer=same_node)
    return topo._cache[key]


def host_path(topo: TopologyModel, dev: int, numa: int | None = None) -> Path:
    src = topo.device(dev).name
    key = ("host", dev, numa)
    if key not in topo._cache:
        hosts = {n.name for n in topo.numa_nodes() if numa is None or n.numa == numa}
        if not hosts:
            raise ValueError(f"{topo.filename}: no NUMA node {numa}")
        topo._cache[key] = _make_path(topo, _require(topo, src, hosts, "the host"), peer=False)
    return topo._cache[key]


def find_route(topo: TopologyModel, src: str, targets: set[str]) -> Route | None:
    """Best route from node `src` to any node in `targets`, or None if there is none."""
    adjacency = _adjacency(topo)
    dist = {src: 0}
    preds: dict[str, list[tuple[str, Link]]] = defaultdict(list)
    frontier, found = [src], []
    # Breadth-first by hops, remembering every shortest predecessor of each node.
    while frontier and not found:
        reached: list[str] = []
        for u in frontier:
            if u != src and topo.nodes[u].kind == DEVICE:
                continue  # devices do not forward
            for v, link in adjacency[u]:
                if v not in dist:
                    dist[v] = dist[u] + 1
                    reached.append(v)
                if dist[v] == dist[u] + 1:
                    preds[v].append((u, link))
        frontier = reached
        found = [v for v in reached if v in targets]
    if not found:
        return None
    # Boards are small, so enumerating the shortest routes is cheap and keeps the
    # tie-breaks exact (a widest-path DP cannot also break ties by latency).
    return min((r for t in found for r in _routes_to(t, src, preds)), key=_rank)


def classify(topo: TopologyModel, nodes: list[str] | tuple[str, ...], links: list[Link] | tuple[Link, ...]) -> str:
    """Matrix label of a route, from the worst thing it crosses."""
    inner = [topo.nodes[n].kind for n in nodes[1:-1]]
    types = {link.type for link in links}
    if "smp" in types:
        return "SYS"
    if "host" in types or "root_complex" in inner or "numa" in inner:
        return "PHB"
    if "roce" in types:
        return "ROCE"
    if "pcie" in types:
        return "PXB" if inner.count("pcie_switch") > 1 else "PIX"
    if "hccs_switch" in inner or "ub_switch" in inner:
        return "HCCS_SW"
    return "SIO" if types == {"sio"} else "HCCS"


def _make_path(topo: TopologyModel, route: Route, peer: bool) -> Path:
    nodes, links = route
    label = classify(topo, nodes, links)
    p2p = peer and (label in P2P_LABELS or (topo.p2p_across_host and label in HOST_LABELS))
    return Path(nodes[0], nodes[-1], tuple(nodes), tuple(links), label, TOPO_CLASS[label], p2p,
                min(l.effective_gbps for l in links), sum(l.latency_us for l in links))


def _require(topo: TopologyModel, src: str, targets: set[str], what: str) -> Route:
    route = find_route(topo, src, targets)
    if route is None:
        raise ValueError(f"{topo.filename}: no route from {src} to {what}")
    return route


def _adjacency(topo: TopologyModel) -> dict[str, list[tuple[str, Link]]]:
    if "adjacency" not in topo._cache:
        adjacency: dict[str, list[tuple[str, Link]]] = {name: [] for name in topo.nodes}
        for link in topo.links:
            adjacency[link.a].append((link.b, link))
            if link.bidirectional:
                adjacency[link.b].append((link.a, link))
        topo._cache["adjacency"] = adjacency
    return topo._cache["adjacency"]


def _routes_to(node: str, src: str, preds: dict[str, list[tuple[str, Link]]]) -> Iterator[Route]:
    if node == src:
        yield [src], []
        return
    for prev, link in preds[node]:
        for nodes, links in _routes_to(prev, src, preds):
            yield nodes + [node], links + [link]


def _rank(route: Route) -> tuple:
    _, links = route
    return (-min(l.effective_gbps for l in links), sum(l.latency_us for l in links),
            [l.id for l in links])


def unreachable_pair(topo: TopologyModel) -> tuple[str, str] | None:
    """Two devices with no route from the first to the second, or None if every device
    reaches every other.

    Devices do not forward, so a pair is connected when they share a link or both touch
    one connected part of the rest of the graph (switches, host side).  With every link
    bidirectional those parts are plain components, which keeps the check linear in the
    board's size (a 768-device supernode loads in every host process); a board with
    one-way links is checked pair by pair."""
    devices = [d.name for d in topo.devices]
    if not all(link.bidirectional for link in topo.links):
        for a in devices:
            for b in devices:
                if a != b and find_route(topo, a, {b}) is None:
                    return a, b
        return None
    parent = {n: n for n, node in topo.nodes.items() if node.kind != DEVICE}

    def root(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    touches: dict[str, set[str]] = {d: set() for d in devices}
    direct: dict[str, set[str]] = {d: set() for d in devices}
    for link in topo.links:
        a_dev, b_dev = link.a in touches, link.b in touches
        if a_dev and b_dev:
            direct[link.a].add(link.b)
            direct[link.b].add(link.a)
        elif not (a_dev or b_dev):
            parent[root(link.a)] = root(link.b)
    for link in topo.links:
        if (link.a in touches) != (link.b in touches):
            dev, other = (link.a, link.b) if link.a in touches else (link.b, link.a)
            touches[dev].add(other)
    parts = {d: {root(n) for n in near} for d, near in touches.items()}
    if devices and set.intersection(*parts.values()):
        return None                      # one part every device touches joins them all
    for a in devices:
        for b in devices:
            if a != b and b not in direct[a] and not parts[a] & parts[b]:
                return a, b
    return None
