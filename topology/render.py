"""Text views of a Topology for people: the device matrix (npu-smi / nvidia-smi topo style),
a route hop by hop, and a one-screen summary of the board."""
from __future__ import annotations

from collections import Counter
from dataclasses import replace

from .model import DEVICE, HOST_LABELS, P2P_LABELS, Path
from .routing import Topology

LEGEND = (
    ("X", "the device itself"),
    ("HCCS", "direct HCCS link"),
    ("SIO", "die-to-die link inside one package"),
    ("HCCS_SW", "HCCS through one or more HCCS switches"),
    ("PIX", "PCIe through a single PCIe switch"),
    ("PXB", "PCIe through several PCIe switches, no host bridge"),
    ("PHB", "PCIe through a host bridge (root complex, CPU)"),
    ("SYS", "PCIe plus the SMP link between NUMA nodes"),
)


def render_matrix(topo: Topology) -> str:
    """Device-to-device link classes with CPU/NUMA affinity columns and a legend."""
    rows = [["", *_headers(topo), "CPU Affinity", "NUMA Affinity"]]
    for d, labels in zip(topo.devices, topo.matrix()):
        numa = next(n for n in topo.numa_nodes() if n.numa == d.numa_node)
        rows.append([d.name.upper(), *labels, numa.cpus or "-", str(d.numa_node)])
    peer = sorted(P2P_LABELS | (HOST_LABELS if topo.p2p_across_host else set()),
                  key=[label for label, _ in LEGEND].index)
    legend = [f"  {label:<8} = {meaning}" for label, meaning in LEGEND]
    return "\n".join([_grid(rows), "", "Legend:", *legend, "",
                      f"Peer access (can_access_peer) over: {', '.join(peer)}"])


def render_p2p(topo: Topology) -> str:
    """can_access_peer for every pair: OK, NS (not supported) or X."""
    n = topo.device_count
    rows = [["", *_headers(topo)]]
    for a in range(n):
        cells = ["X" if a == b else "OK" if topo.can_access_peer(a, b) else "NS" for b in range(n)]
        rows.append([topo.device(a).name.upper(), *cells])
    return "\n".join([_grid(rows), "", "Legend:", "  X  = the device itself",
                      "  OK = peer access supported", "  NS = not supported (copies go through the host)"])


def render_path(path: Path) -> str:
    """One line of totals, then one line per hop, then the bottleneck."""
    if not path.links:
        return f"{path.src} -> {path.dst}: X (on-device copy), {path.bottleneck_gbps:g} GB/s"
    head = (f"{path.src} -> {path.dst}: {path.label}, {path.hops} hop{'s' * (path.hops > 1)}, "
            f"bottleneck {path.bottleneck_gbps:g} GB/s, latency {path.latency_us:g} us, "
            f"peer access: {'yes' if path.p2p else 'no'}")
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
    groups: dict[object, list[int]] = {}
    for d in topo.devices:  # devices differing only in id / NUMA share a line
        groups.setdefault(replace(d, id=0, numa_node=-1, host_gbps=0.0), []).append(d.id)
    for d, ids in groups.items():
        lines.append(f"  {_ids(ids)}: {d.soc_name}, {_bytes(d.hbm_bytes)} HBM ({d.hbm_gbps:g} GB/s), "
                     f"{d.aicore} AI Core / {d.cube} cube / {d.vector} vector, {d.aicpu} AI CPU, "
                     f"L2 {_bytes(d.l2_bytes)}, NPU arch {d.npu_arch}")
    others = [n for n in topo.nodes.values() if n.kind != DEVICE]
    lines.append("nodes: " + ", ".join(
        f"{n.name} ({n.kind}{f' {n.numa}, cpus {n.cpus}' if n.kind == 'numa' else ''})" for n in others))
    lines.append("links: " + ", ".join(f"{k} {t}" for t, k in Counter(l.type for l in topo.links).items()))
    lines.append(f"peer access across host bridges: {'yes' if topo.p2p_across_host else 'no'}")
    if topo.source:
        lines += ["source:", *(f"  {line}".rstrip() for line in topo.source.strip().splitlines())]
    return "\n".join(lines)


def _headers(topo: Topology) -> list[str]:
    return [d.name.upper() for d in topo.devices]


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
