"""The board model: devices, graph nodes, links, cluster nodes, paths and the Topology that
holds them.

Two kinds of "node" live here.  **Graph nodes** (``Node``, ``TopologyModel.nodes``) are the
vertices of the board graph: devices, switches, root complexes, host NUMA nodes.  **Cluster
nodes** (``ClusterNode``, ``TopologyModel.node(k)``) are the servers of a board that is a
cluster: each has its own host side and a block of devices.  Device indices are
board-global: cluster node k owns the devices ``node(k).devices`` (contiguous, in node
order), and its local device i is board device ``node(k).first + i``.  A single-server
board is one cluster node holding every device.

The floors of this package: model (here, imports nothing) <- routing (paths over the model;
its Topology is what users hold) <- cluster (a node template copied into a cluster) <-
loader (files and dicts in and out) <- render.  Everything here is plain, immutable data
except the model's route cache.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

# Node kinds. Devices are nodes too ("npu0", "npu1", ...) but are never declared in a file.
DEVICE = "device"
NODE_KINDS = ("numa", "root_complex", "pcie_switch", "hccs_switch", "ub_switch", "roce_switch")

# Link types and the node kinds each may connect (see FORMAT.md, "links").  UB is the
# supernode's unified bus (the HCCS-class fabric of A3 / CloudMatrix boards); RoCE is an
# NPU's own Ethernet NIC port on the network between servers.
LINK_ENDS: dict[str, frozenset[str]] = {
    "hccs": frozenset({DEVICE, "hccs_switch"}),
    "sio": frozenset({DEVICE}),
    "pcie": frozenset({DEVICE, "pcie_switch", "root_complex"}),
    "host": frozenset({"root_complex", "numa"}),
    "smp": frozenset({"numa"}),
    "ub": frozenset({DEVICE, "ub_switch"}),
    "roce": frozenset({DEVICE, "roce_switch"}),
}

# aclrtGetDevicesTopo() values (ACL_RT_DEVS_TOPOLOGY_*), keyed by matrix label. ACL has
# no PXB bit: several switches without a host bridge are still "PCIe switch" (PIX).
# ROCE (a route over the RDMA network between servers) has no ACL value: the runtime only
# shows a process its own node's devices, so no API call can ask about such a pair.
TOPO_CLASS: dict[str, int] = {
    "X": 0, "HCCS": 0x01, "PIX": 0x02, "PXB": 0x02, "PHB": 0x08,
    "SYS": 0x10, "SIO": 0x20, "HCCS_SW": 0x40, "ROCE": 0,
}
# Labels whose traffic never leaves the device fabric or the PCIe switch tree.
P2P_LABELS = frozenset({"HCCS", "SIO", "HCCS_SW", "PIX", "PXB"})
HOST_LABELS = frozenset({"PHB", "SYS"})


# Atlas A3 parts (the Ascend910_93xx SoCs): the only ones with a supernode fabric that
# FABRIC memory handles cross (aclrtMemSharedHandleType).
A3_SOC_PREFIX = "Ascend910_93"


def is_a3(soc_name: str) -> bool:
    return soc_name.startswith(A3_SOC_PREFIX)


FORMAT_VERSION = 1     # of the board files (FORMAT.md)
# file key of a device property -> Device attribute
DEVICE_FIELDS: dict[str, str] = {
    "soc_name": "soc_name", "hbm": "hbm_bytes", "aicore": "aicore", "cube": "cube", "vector": "vector",
    "aicpu": "aicpu", "l2": "l2_bytes", "npu_arch": "npu_arch", "hbm_gbps": "hbm_gbps", "d2d_gbps": "d2d_gbps",
    "dma_engines": "dma_engines",
}


def device_node(index: int) -> str:
    """Node name of device `index` (devices are addressed as npu0, npu1, ...)."""
    return f"npu{index}"


@dataclass(frozen=True)
class Device:
    """One NPU: what aclrtGetDeviceInfo / aclrtGetSocName / aclrtGetMemInfo report."""

    id: int
    soc_name: str
    hbm_bytes: int
    aicore: int
    cube: int
    vector: int
    aicpu: int
    l2_bytes: int
    npu_arch: int
    hbm_gbps: float          # HBM bandwidth
    d2d_gbps: float          # on-device copy bandwidth (a copy both reads and writes HBM)
    dma_engines: int = 2     # copies (DMA tasks) the device runs at once, in modelled time
    # Derived from the links by the loader: the NUMA node host traffic lands on, and the
    # bottleneck of that host path (the device's host link in practice).
    numa_node: int = -1
    host_gbps: float = 0.0

    @property
    def name(self) -> str:
        return device_node(self.id)


@dataclass(frozen=True)
class ClusterNode:
    """One server of a board: a host side of its own and the board devices
    ``first .. first + count - 1``, which its host processes see as devices 0 .. count - 1."""

    index: int
    first: int
    count: int

    @property
    def name(self) -> str:
        return f"node{self.index}"

    @property
    def devices(self) -> range:
        """Board indices of the node's devices, in local order."""
        return range(self.first, self.first + self.count)

    def global_device(self, local: int) -> int:
        """Board index of this node's device ``local`` (IndexError if it has none)."""
        if not 0 <= local < self.count:
            raise IndexError(f"{self.name} has devices 0..{self.count - 1}, not {local}")
        return self.first + local


@dataclass(frozen=True)
class Node:
    """A vertex of the board graph: a device, switch, root complex or host NUMA node."""

    name: str
    kind: str
    numa: int | None = None  # NUMA id, numa nodes only
    cpus: str = ""           # CPU list of a numa node, e.g. "0-47" (affinity column)
    description: str = ""


@dataclass(frozen=True)
class Link:
    """A physical link (or a bonded bundle of `count` identical links) between two nodes.

    Bandwidth is per direction: a bidirectional link is two independent channels, one per
    direction, and transfers going the same way share that channel.
    """

    id: str
    a: str
    b: str
    type: str
    bandwidth_gbps: float    # nominal, per link, per direction
    latency_us: float
    count: int = 1
    efficiency: float = 1.0  # achieved / nominal
    bidirectional: bool = True
    description: str = ""

    @property
    def effective_gbps(self) -> float:
        """What one direction of the bundle delivers: nominal x count x efficiency."""
        return self.bandwidth_gbps * self.count * self.efficiency

    def other(self, node: str) -> str:
        return self.b if node == self.a else self.a


@dataclass(frozen=True)
class Path:
    """A route: the nodes visited and the links traversed, in order, plus its summary."""

    src: str
    dst: str
    nodes: tuple[str, ...]
    links: tuple[Link, ...]
    label: str               # matrix label: X, HCCS, SIO, HCCS_SW, PIX, PXB, PHB, SYS
    topo_class: int          # aclrtGetDevicesTopo bit for `label`
    p2p: bool                # peer access possible over this path
    bottleneck_gbps: float   # min effective bandwidth along the path
    latency_us: float        # sum of link latencies

    @property
    def hops(self) -> int:
        return len(self.links)

    @property
    def bottleneck(self) -> Link | None:
        """The narrowest link (first one if several tie); None for an on-device path."""
        return min(self.links, key=lambda l: l.effective_gbps, default=None)

    def channels(self) -> list[tuple[str, bool]]:
        """(link id, forward) per hop; forward means traversed a -> b. Concurrent transfers
        on the same channel share its bandwidth; the two directions are independent."""
        return [(link.id, self.nodes[i] == link.a) for i, link in enumerate(self.links)]


@dataclass
class TopologyModel:
    """A board's parts: devices, the other nodes (switches, root complexes, NUMA nodes) and links.

    Users hold a ``routing.Topology``: this model plus the questions routes answer."""

    name: str
    description: str
    source: str
    devices: list[Device]
    nodes: dict[str, Node]  # every graph node by name, devices included
    links: list[Link]
    p2p_across_host: bool = False  # Ascend's "AI server" exception: PHB/SYS peers allowed
    # A cluster: the servers (None: one server holding every device), and the file form
    # they were made from (the one server's board plus the [cluster] table), for to_dict
    cluster_nodes: tuple[ClusterNode, ...] | None = None
    layout: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    filename: str = field(default="<memory>", compare=False)
    _cache: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.cluster_nodes is None:
            self.cluster_nodes = (ClusterNode(0, 0, len(self.devices)),)

    @property
    def device_count(self) -> int:
        """Devices of the whole board (every node's)."""
        return len(self.devices)

    # -- cluster nodes: board-global device index <-> (node, local device)
    @property
    def node_count(self) -> int:
        return len(self.cluster_nodes)

    def node(self, index: int) -> ClusterNode:
        if not 0 <= index < len(self.cluster_nodes):
            raise IndexError(f"node {index} out of range [0, {len(self.cluster_nodes)})")
        return self.cluster_nodes[index]

    def node_of(self, device: int) -> int:
        """The cluster node device ``device`` (a board index) belongs to."""
        self.device(device)
        size = self.cluster_nodes[0].count      # nodes are copies of one server
        return device // size

    def global_device(self, node: int, local: int) -> int:
        """Board index of node ``node``'s device ``local``."""
        return self.node(node).global_device(local)

    def local_device(self, device: int) -> tuple[int, int]:
        """(node, local device) of board device ``device``."""
        node = self.node_of(device)
        return node, device - self.cluster_nodes[node].first

    def device(self, index: int) -> Device:
        if not 0 <= index < len(self.devices):
            raise IndexError(f"device {index} out of range [0, {len(self.devices)})")
        return self.devices[index]

    def link(self, link_id: str) -> Link:
        for link in self.links:
            if link.id == link_id:
                return link
        raise KeyError(link_id)

    def numa_nodes(self) -> list[Node]:
        return sorted((n for n in self.nodes.values() if n.kind == "numa"), key=lambda n: n.numa)

    def to_dict(self) -> dict[str, Any]:
        """The board in the file schema: devices as shared values plus per-id overrides;
        a cluster as its one server plus the [cluster] table, so the dict stays as small as
        the file however many nodes there are (loader.from_dict(t.to_dict()) gives an
        equal Topology)."""
        if self.layout is not None:
            return copy.deepcopy(self.layout)
        profiles = [{key: getattr(d, attr) for key, attr in DEVICE_FIELDS.items()} for d in self.devices]
        common = profiles[0]
        overrides = [{"id": i, **{k: v for k, v in p.items() if v != common[k]}}
                     for i, p in enumerate(profiles) if p != common]
        devices: dict[str, Any] = {"count": self.device_count, **common}
        if overrides:
            devices["override"] = overrides
        nodes = []
        for n in self.nodes.values():
            if n.kind != DEVICE:
                entry: dict[str, Any] = {"name": n.name, "kind": n.kind}
                if n.kind == "numa":
                    entry.update(numa=n.numa, cpus=n.cpus)
                if n.description:
                    entry["description"] = n.description
                nodes.append(entry)
        links = [{"id": l.id, "a": l.a, "b": l.b, "type": l.type, "bandwidth_gbps": l.bandwidth_gbps,
                  "latency_us": l.latency_us, "count": l.count, "efficiency": l.efficiency,
                  "bidirectional": l.bidirectional, "description": l.description} for l in self.links]
        return {"format": FORMAT_VERSION, "name": self.name, "description": self.description,
                "source": self.source, "p2p_across_host": self.p2p_across_host,
                "devices": devices, "nodes": nodes, "links": links}
