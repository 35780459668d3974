"""Text views of a Topology for people: the device matrix (npu-smi / nvidia-smi topo style),
a route hop by hop, and a one-screen summary of the board.

The matrices show one cluster node at a time (its devices under their local names, as its
host processes number them); summaries and routes name board devices ``npu<global>``.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace

from .model import DEVICE, HOST_LABELS, P2P_LABELS, Path
from .routing import Topology

LEGEND = (
    ("X", "the device itself"),
    ("HCCS", "direct HCCS link"),
    ("SIO", "die-to-die link inside one package"),
    ("HCCS_SW", "HCCS (or the UB of a supernode) through one or more switches"),
    ("PIX", "PCIe through a single PCIe switch"),
    ("PXB", "PCIe through several PCIe switches, no host bridge"),
    ("PHB", "PCIe through a host bridge (root complex, CPU)"),
    ("SYS", "PCIe plus the SMP link between NUMA nodes"),
    ("ROCE", "over the RDMA (RoCE) network between nodes"),
)


def render_matrix(topo: Topology, node: int = 0) -> str:
    """Device-to-device link classes of cluster node ``node`` with CPU/NUMA affinity
    columns and a legend."""
    rows = [["", *_headers(topo, node), "CPU Affinity", "NUMA Affinity"]]
    for local, (d, labels) in enumerate(zip(_devices(topo, node), topo.matrix(node))):
        numa = topo.nodes[topo.host_path(d.id).dst]
        rows.append([f"NPU{local}", *labels, numa.cpus or "-", str(d.numa_node)])
    peer = sorted(P2P_LABELS | (HOST_LABELS if topo.p2p_across_host else set()),
                  key=[label for label, _ in LEGEND].index)
    legend = [f"  {label:<8} = {meaning}" for label, meaning in LEGEND
              if label != "ROCE" or topo.node_count > 1]
    within = " (within a node)" if topo.node_count > 1 else ""
    return "\n".join([_grid(rows), "", "Legend:", *legend, "",
                      f"Peer access (can_access_peer) over: {', '.join(peer)}{within}"])


def render_p2p(topo: Topology, node: int = 0) -> str:
    """can_access_peer for every pair of cluster node ``node``: OK, NS (not supported) or X."""
    devices = topo.node(node).devices
    rows = [["", *_headers(topo, node)]]
    for local, a in enumerate(devices):
        cells = ["X" if a == b else "OK" if topo.can_access_peer(a, b) else "NS" for b in devices]
        rows.append([f"NPU{local}", *cells])
    return "\n".join([_grid(rows), "", "Legend:", "  X  = the device itself",
                      "  OK = peer access supported", "  NS = not supported (copies go through the host)"])


def render_path(path: Path, topo: Topology | None = None) -> str:
    """One line of totals, then one line per hop, then the bottleneck.  With the board
    ``topo`` of a cluster, device ends also say which node and local device they are."""
    src, dst = _where(topo, path.src), _where(topo, path.dst)
    if not path.links:
        return f"{src} -> {dst}: X (on-device copy), {path.bottleneck_gbps:g} GB/s"
    peer = "yes" if path.p2p else "no"
    if topo is not None and path.dst in topo.nodes and topo.nodes[path.dst].kind == DEVICE and \
            topo.node_of(_index(path.src)) != topo.node_of(_index(path.dst)):
        peer += " (another node)"
    head = (f"{src} -> {dst}: {path.label}, {path.hops} hop{'s' * (path.hops > 1)}, "
            f"bottleneck {path.bottleneck_gbps:g} GB/s, latency {path.latency_us:g} us, "
            f"peer access: {peer}")
    rows = [["#", "from", "to", "type", "GB/s", "us", "link"]]
    for i, link in enumerate(path.links):
        kind = link.type + (f" x{link.count}" if link.count > 1 else "")
        rows.append([str(i + 1), path.nodes[i], path.nodes[i + 1], kind,
                     f"{link.effective_gbps:g}", f"{link.latency_us:g}", link.id])
    narrow = path.bottleneck
    return "\n".join([head, _grid(rows, indent="  "),
                      f"bottleneck: {narrow.id} ({narrow.type}, {narrow.effective_gbps:g} GB/s)"])


def render_summary(topo: Topology) -> str:
    """Name, devices grouped by profile, nodes, link counts and the source note."""
    lines = [f"{topo.name}: {topo.description}", f"file: {topo.filename}",
             f"devices: {topo.device_count}"]
    if topo.node_count > 1:
        size = topo.node(0).count
        lines.append(f"nodes: {topo.node_count} x {size} devices; node k's device i is board device "
                     f"k*{size}+i (npu{size} = node1 device 0)")
    groups: dict[object, list[int]] = {}
    for d in topo.devices:  # devices differing only in id / NUMA share a line
        groups.setdefault(replace(d, id=0, numa_node=-1, host_gbps=0.0), []).append(d.id)
    for d, ids in groups.items():
        lines.append(f"  {_ids(ids)}: {d.soc_name}, {_bytes(d.hbm_bytes)} HBM ({d.hbm_gbps:g} GB/s), "
                     f"{d.aicore} AI Core / {d.cube} cube / {d.vector} vector, {d.aicpu} AI CPU, "
                     f"L2 {_bytes(d.l2_bytes)}, NPU arch {d.npu_arch}")
    others = [n for n in topo.nodes.values() if n.kind != DEVICE]
    if topo.node_count > 1:       # one server's parts, then what the servers share
        others = [n for n in others if n.name.startswith("n0.") or "." not in n.name]
    lines.append("parts: " + ", ".join(
        f"{n.name} ({n.kind}{f' {n.numa}, cpus {n.cpus}' if n.kind == 'numa' else ''})" for n in others)
        + (" (and the same on every node)" if topo.node_count > 1 else ""))
    lines.append("links: " + ", ".join(f"{k} {t}" for t, k in Counter(l.type for l in topo.links).items()))
    lines.append(f"peer access across host bridges: {'yes' if topo.p2p_across_host else 'no'}")
    if topo.source:
        lines += ["source:", *(f"  {line}".rstrip() for line in topo.source.strip().splitlines())]
    return "\n".join(lines)


def render_nodes(topo: Topology) -> str:
    """One line per cluster node: its board devices and the route from node 0's first
    device to its first device (the inter-node fabric as staged transports see it)."""
    rows = [["node", "devices", "board devices", "route from npu0", "GB/s", "us", "hops"]]
    for k in range(topo.node_count):
        node = topo.node(k)
        path = topo.path(0, node.first)
        label = "X" if not path.links else path.label + (" (local)" if k == 0 else "")
        if k == 0 and node.count > 1:
            path = topo.path(0, node.first + 1)
            label = f"{path.label} (to npu1)"
        rows.append([node.name, str(node.count), f"npu{node.first}-{node.devices[-1]}", label,
                     f"{path.bottleneck_gbps:g}", f"{path.latency_us:g}", str(path.hops)])
    return _grid(rows)


def _devices(topo: Topology, node: int):
    return [topo.device(i) for i in topo.node(node).devices]


def _headers(topo: Topology, node: int) -> list[str]:
    return [f"NPU{i}" for i in range(topo.node(node).count)]


def _index(name: str) -> int:
    return int(name[3:])


def _where(topo: Topology | None, name: str) -> str:
    """A route end: a device of a cluster with its node and local number."""
    if topo is None or topo.node_count == 1 or name not in topo.nodes or topo.nodes[name].kind != DEVICE:
        return name
    node, local = topo.local_device(_index(name))
    return f"{name} (node{node} device {local})"


def _grid(rows: list[list[str]], indent: str = "") -> str:
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    return "\n".join(indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                     for row in rows)


def _ids(ids: list[int]) -> str:
    """npu0-3,6 style: consecutive ids collapse into ranges."""
    parts, start = [], ids[0]
    for prev, cur in zip(ids, ids[1:] + [None]):
        if cur != prev + 1:
            parts.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = cur
    return "npu" + ",".join(parts)


def _bytes(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"
