"""A cluster board from one server's board: the server copied once per cluster node,
then joined by the inter-node fabric.

    server board (a valid one-node Topology)  +  ClusterSpec ([cluster] of the file)
            |  copy k: devices npu<i> -> npu<k*n+i>, parts x -> n<k>.x
            v
    board Topology: nodes x (devices, parts, links)  +  shared switches  +  fabric links

A fabric link entry naming a device or a server part is made once per node, with that
node's copies; one naming shared switches only is made once.  Default link ids are
"<a>-<b>" of the copied ends; an explicit id of a per-node link becomes "n<k>.<id>".
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .model import DEVICE, ClusterNode, Link, Node, device_node
from .routing import Topology


@dataclass(frozen=True)
class ClusterSpec:
    """The [cluster] table, validated: node count, shared switches, fabric link entries
    (their ends named as in the file: server device names npu<i>, server parts, shared
    switches; ``id`` "" where the file gave none)."""

    nodes: int
    description: str
    switches: tuple[Node, ...]
    links: tuple[Link, ...]

    def to_dict(self) -> dict[str, Any]:
        switches = [{"name": s.name, "kind": s.kind, **({"description": s.description} if s.description else {})}
                    for s in self.switches]
        links = [{**({"id": l.id} if l.id else {}), "a": l.a, "b": l.b, "type": l.type,
                  "bandwidth_gbps": l.bandwidth_gbps, "latency_us": l.latency_us, "count": l.count,
                  "efficiency": l.efficiency, "bidirectional": l.bidirectional, "description": l.description}
                 for l in self.links]
        return {"nodes": self.nodes, "description": self.description, "switches": switches, "links": links}


def part_name(node: int, name: str) -> str:
    """Name of cluster node ``node``'s copy of server part ``name``."""
    return f"n{node}.{name}"


def expand(server: Topology, spec: ClusterSpec, filename: str) -> Topology:
    """The cluster board: ``spec.nodes`` copies of ``server`` joined by the fabric."""
    size = server.device_count
    shared = {s.name for s in spec.switches}
    devices, nodes, links = [], {}, []
    for k in range(spec.nodes):
        rename = _renamer(server, k, shared)
        for d in server.devices:
            devices.append(replace(d, id=k * size + d.id))
        for n in server.nodes.values():
            nodes[rename(n.name)] = replace(n, name=rename(n.name))
        links += [_copy(link, rename, k) for link in server.links]
    nodes.update({s.name: s for s in spec.switches})
    for link in spec.links:
        if {link.a, link.b} <= shared:
            links.append(replace(link, id=link.id or f"{link.a}-{link.b}"))
        else:
            links += [_copy(link, _renamer(server, k, shared), k) for k in range(spec.nodes)]
    layout = {**server.to_dict(), "cluster": spec.to_dict()}
    return Topology(name=server.name, description=server.description, source=server.source,
                    devices=devices, nodes=nodes, links=links, p2p_across_host=server.p2p_across_host,
                    cluster_nodes=tuple(ClusterNode(k, k * size, size) for k in range(spec.nodes)),
                    layout=layout, filename=filename)


def _renamer(server: Topology, node: int, shared: set[str]):
    size = server.device_count

    def rename(name: str) -> str:
        if name in shared:
            return name
        if server.nodes[name].kind == DEVICE:
            return device_node(node * size + int(name[3:]))
        return part_name(node, name)
    return rename


def _copy(link: Link, rename, node: int) -> Link:
    """Node ``node``'s copy of a link: default ids follow the renamed ends."""
    a, b = rename(link.a), rename(link.b)
    default = not link.id or link.id == f"{link.a}-{link.b}"
    return replace(link, a=a, b=b, id=f"{a}-{b}" if default else part_name(node, link.id))
