"""Board topologies for mdev: devices, links and switches; loading, validation, routing.

    from mdev import topology
    topo = topology.resolve("hccs8")          # a preset name or a path to a .toml file
    topo.path(0, 1).bottleneck_gbps, topo.can_access_peer(0, 4), topo.host_path(3)
    cm = topology.resolve("cloudmatrix384")   # a cluster: 48 nodes of 16 devices
    cm.node_count, cm.node(47).devices, cm.global_device(47, 15), cm.local_device(767)

The file format is documented in FORMAT.md next to this file.
"""
from __future__ import annotations

import os

from .loader import TopologyError, from_dict, load, loads, parse_size, resized
from .model import TOPO_CLASS, ClusterNode, Device, Link, Node, Path
from .routing import Topology
from .presets import default_preset, list_presets, preset_path

__all__ = [
    "ClusterNode", "Device", "Link", "Node", "Path", "TOPO_CLASS", "Topology", "TopologyError",
    "default_preset", "from_dict", "list_presets", "load", "loads", "parse_size",
    "preset_path", "resized", "resolve",
]


def resolve(spec: str | os.PathLike[str] | None = None) -> Topology:
    """Load `spec`: an existing file, else a preset name; None means the default preset."""
    if spec is None:
        spec = default_preset()
    if os.path.exists(spec):
        return load(spec)
    if str(spec) in list_presets():
        return load(preset_path(str(spec)))
    raise TopologyError(os.fspath(spec), "", "no such file or preset "
                        f"(presets: {', '.join(list_presets())})")
