"""Topology files in: TOML text -> dict -> validated Topology (``Topology.to_dict`` is the
way back: from_dict(t.to_dict()) gives an equal Topology).

A file with a [cluster] table describes one server (its devices, parts and links, checked
as a board of its own) and how many copies of it the board has, joined by the fabric the
table describes; mdev.topology.cluster makes the copies.

Every problem raises TopologyError naming the file, the field and what is wrong; the
schema itself is documented in FORMAT.md.
"""
from __future__ import annotations

import difflib
import os
import re
import tomllib
from dataclasses import replace
from typing import Any, Callable

from . import cluster
from .model import DEVICE, DEVICE_FIELDS, FORMAT_VERSION, LINK_ENDS, NODE_KINDS, Device, Link, Node, device_node
from .routing import Topology, unreachable_pair



class TopologyError(ValueError):
    """A topology file is unreadable or invalid: `file: field: problem`."""

    def __init__(self, filename: str, field: str, problem: str) -> None:
        # args carry all three so the error pickles across the board's processes
        super().__init__(filename, field, problem)
        self.filename, self.field, self.problem = filename, field, problem

    def __str__(self) -> str:
        where = f"{self.field}: " if self.field else ""
        return f"{self.filename}: {where}{self.problem}"


def load(path: str | os.PathLike[str]) -> Topology:
    filename = os.fspath(path)
    try:
        with open(filename, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise TopologyError(filename, "", f"cannot read: {e.strerror}") from None
    return loads(text, filename)


def loads(text: str, filename: str = "<string>") -> Topology:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise TopologyError(filename, "", f"invalid TOML: {e}") from None
    return from_dict(data, filename)


def from_dict(d: dict[str, Any], filename: str = "<dict>") -> Topology:
    top = _Table(filename, "", d, ("format", "name", "description", "source",
                                   "p2p_across_host", "devices", "nodes", "links", "cluster"))
    server = _server(top)
    if not top.has("cluster"):
        return server
    board = cluster.expand(server, _cluster(top, server), filename)
    _check_board(board, top)
    return board


def _server(top: _Table) -> Topology:
    """The board of the file's top level: the whole board, or one server of a cluster."""
    filename = top.filename
    version = top.integer("format", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise top.error("format", f"unsupported version {version} (this mdev reads {FORMAT_VERSION})")
    header = dict(name=top.text("name"), description=top.text("description", ""),
                  source=top.text("source", ""), p2p_across_host=top.flag("p2p_across_host", False))
    devices = _devices(top)
    nodes = {d.name: Node(d.name, DEVICE) for d in devices}
    nodes.update(_nodes(top, nodes))
    topo = Topology(**header, devices=devices, nodes=nodes, links=_links(top, nodes, default_ids=True),
                    filename=filename)
    _check_connected(topo, top)
    return topo


# ---------------------------------------------------------------------------- sizes

_UNITS = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*")


def parse_size(value: object) -> int:
    """Bytes from an int or a string like "64GiB", "32 GiB", "512MiB"; ValueError if bad."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"must not be negative, got {value}")
        return value
    m = _SIZE.fullmatch(value) if isinstance(value, str) else None
    if not m:
        raise ValueError(f"must be a byte count or a size like \"64GiB\", got {value!r}")
    number, unit = m.groups()
    if unit not in _UNITS:
        hint = " (decimal units are ambiguous: use KiB, MiB, GiB, TiB)" if unit.upper() in {
            "KB", "MB", "GB", "TB"} else " (use B, KiB, MiB, GiB, TiB)"
        raise ValueError(f"unknown unit {unit!r} in {value!r}{hint}")
    size = float(number) * _UNITS[unit]
    if size != int(size):
        raise ValueError(f"{value!r} is not a whole number of bytes")
    return int(size)


# ---------------------------------------------------------------------------- typed reads

_REQUIRED = object()


def _show(value: object) -> str:
    """A value as the file spells it: strings quoted, booleans lower-case."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, str) else str(value)


class _Table:
    """One input table: rejects unknown keys and reads typed values, raising TopologyError
    with the full field path ("links[3].bandwidth_gbps")."""

    def __init__(self, filename: str, where: str, data: object, known: tuple[str, ...]) -> None:
        self.filename, self.where = filename, where
        if not isinstance(data, dict):
            raise TopologyError(filename, where, f"must be a table, got {_show(data)}")
        self.data = data
        for key in data:
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(known)}"
                raise self.error(key, f"unknown key ({hint})")

    def at(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def error(self, key: str | None, problem: str) -> TopologyError:
        """An error about `key` of this table, or about the whole table if key is None."""
        return TopologyError(self.filename, self.where if key is None else self.at(key), problem)

    def has(self, key: str) -> bool:
        return key in self.data

    def _get(self, key: str, default: Any, ok: Callable[[Any], bool], want: str) -> Any:
        if key not in self.data:
            if default is _REQUIRED:
                raise self.error(key, f"missing (required, {want})")
            return default
        value = self.data[key]
        if not ok(value):
            raise self.error(key, f"must be {want}, got {_show(value)}")
        return value

    def text(self, key: str, default: Any = _REQUIRED) -> str:
        return self._get(key, default, lambda v: isinstance(v, str), "a string")

    def flag(self, key: str, default: Any = _REQUIRED) -> bool:
        return self._get(key, default, lambda v: isinstance(v, bool), "true or false")

    def integer(self, key: str, default: Any = _REQUIRED, minimum: int = 0) -> int:
        return self._get(key, default, lambda v: _is_int(v) and v >= minimum,
                         f"an integer >= {minimum}")

    def number(self, key: str, default: Any = _REQUIRED, positive: bool = True,
               maximum: float | None = None) -> float:
        def ok(v: object) -> bool:
            return (_is_number(v) and (v > 0 if positive else v >= 0)
                    and (maximum is None or v <= maximum))
        want = "a positive number" if positive else "a number >= 0"
        if maximum is not None:
            want += f" and <= {maximum:g}"
        return float(self._get(key, default, ok, want))

    def size(self, key: str, default: Any = _REQUIRED, minimum: int = 0) -> int:
        value = self._get(key, default, lambda v: True, "a size")
        try:
            size = parse_size(value)
        except ValueError as e:
            raise self.error(key, str(e)) from None
        if size < minimum:
            raise self.error(key, f"must be at least {minimum} bytes, got {_show(value)}")
        return size

    def tables(self, key: str) -> list[Any]:
        return self._get(key, [], lambda v: isinstance(v, list), "an array of tables")


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# ---------------------------------------------------------------------------- devices

# file key -> reader (model.DEVICE_FIELDS names the attribute); shared by [devices] and
# [[devices.override]]
DEVICE_KEYS: dict[str, Callable[[_Table, str], Any]] = {
    "soc_name": lambda t, k: t.text(k),
    "hbm": lambda t, k: t.size(k, minimum=1),
    "aicore": lambda t, k: t.integer(k, minimum=1),
    "cube": lambda t, k: t.integer(k),
    "vector": lambda t, k: t.integer(k),
    "aicpu": lambda t, k: t.integer(k),
    "l2": lambda t, k: t.size(k),
    "npu_arch": lambda t, k: t.integer(k),
    "hbm_gbps": lambda t, k: t.number(k),
    "d2d_gbps": lambda t, k: t.number(k),
    "dma_engines": lambda t, k: t.integer(k, minimum=1),
}
_DEVICE_REQUIRED = ("soc_name", "hbm", "aicore", "hbm_gbps")
DEFAULT_DMA_ENGINES = 2


def _read_device_keys(table: _Table) -> dict[str, Any]:
    return {key: reader(table, key) for key, reader in DEVICE_KEYS.items() if table.has(key)}


def _devices(top: _Table) -> list[Device]:
    if not top.has("devices"):
        raise top.error("devices", "missing (required table)")
    table = _Table(top.filename, "devices", top.data["devices"], ("count", "override", *DEVICE_KEYS))
    count = table.integer("count", minimum=1)
    common = _read_device_keys(table)
    for key in _DEVICE_REQUIRED:
        if key not in common:
            raise table.error(key, "missing (required)")
    per_device: dict[int, dict[str, Any]] = {}
    first_seen: dict[int, str] = {}
    for i, entry in enumerate(table.tables("override")):
        o = _Table(top.filename, f"devices.override[{i}]", entry, ("id", *DEVICE_KEYS))
        dev = o.integer("id")
        if dev >= count:
            raise o.error("id", f"device {dev} does not exist (devices.count = {count})")
        if dev in first_seen:
            raise o.error("id", f"duplicate device id {dev} (also in {first_seen[dev]})")
        first_seen[dev] = o.where
        per_device[dev] = _read_device_keys(o)
    devices = []
    for dev in range(count):
        values = {**common, **per_device.get(dev, {})}
        # Defaults that depend on other values: split-core SoCs have one cube per AI Core,
        # and an on-device copy reads and writes HBM, so it gets half the HBM bandwidth.
        values.setdefault("cube", values["aicore"])
        values.setdefault("d2d_gbps", values["hbm_gbps"] / 2)
        values.setdefault("vector", 0)
        values.setdefault("aicpu", 0)
        values.setdefault("l2", 0)
        values.setdefault("npu_arch", 0)
        values.setdefault("dma_engines", DEFAULT_DMA_ENGINES)
        devices.append(Device(id=dev, **{DEVICE_FIELDS[k]: v for k, v in values.items()}))
    return devices


# ---------------------------------------------------------------------------- nodes

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_DEVICE_NAME = re.compile(r"npu(\d+)")


def _node_name(t: _Table, *taken: dict[str, Node]) -> str:
    """The entry's name: well formed, not a device's, not one of ``taken``."""
    name = t.text("name")
    if not _NAME.fullmatch(name) or _DEVICE_NAME.fullmatch(name):
        raise t.error("name", f"{name!r} is not a valid node name (letters, digits, _ . -; "
                              "npu<N> is reserved for devices)")
    if any(name in names for names in taken):
        raise t.error("name", f"duplicate node name {name!r}")
    return name


def _nodes(top: _Table, existing: dict[str, Node]) -> dict[str, Node]:
    nodes: dict[str, Node] = {}
    numa_ids: dict[int, str] = {}
    for i, entry in enumerate(top.tables("nodes")):
        t = _Table(top.filename, f"nodes[{i}]", entry, ("name", "kind", "numa", "cpus", "description"))
        name = _node_name(t, nodes, existing)
        kind = t.text("kind")
        if kind not in NODE_KINDS:
            raise t.error("kind", f"must be one of {', '.join(NODE_KINDS)}, got {kind!r}")
        numa, cpus = None, ""
        if kind == "numa":
            numa = t.integer("numa")
            if numa in numa_ids:
                raise t.error("numa", f"duplicate NUMA id {numa} (also {numa_ids[numa]})")
            numa_ids[numa] = t.where
            cpus = t.text("cpus", "")
        else:
            for key in ("numa", "cpus"):
                if t.has(key):
                    raise t.error(key, f"only numa nodes have {key!r} (this node is a {kind})")
        nodes[name] = Node(name, kind, numa, cpus, t.text("description", ""))
    if not numa_ids:
        raise top.error("nodes", "at least one node of kind \"numa\" is required (the host)")
    return nodes


# ---------------------------------------------------------------------------- links

_LINK_KEYS = ("id", "a", "b", "mesh", "type", "bandwidth_gbps", "latency_us", "count",
              "efficiency", "bidirectional", "description")


def _links(owner: _Table, nodes: dict[str, Node], default_ids: bool) -> list[Link]:
    """The links of ``owner``'s "links" array; without ``default_ids`` a link the file gave
    no id keeps id "" (cluster fabric entries: their ids come with the copies)."""
    links: list[Link] = []
    defined_by: dict[str, str] = {}
    for i, entry in enumerate(owner.tables("links")):
        t = _Table(owner.filename, f"{owner.at('links')}[{i}]", entry, _LINK_KEYS)
        link_type = t.text("type")
        if link_type not in LINK_ENDS:
            raise t.error("type", f"must be one of {', '.join(LINK_ENDS)}, got {link_type!r}")
        props = dict(type=link_type, bandwidth_gbps=t.number("bandwidth_gbps"),
                     latency_us=t.number("latency_us", positive=False),
                     count=t.integer("count", 1, minimum=1),
                     efficiency=t.number("efficiency", 1.0, maximum=1.0),
                     bidirectional=t.flag("bidirectional", True),
                     description=t.text("description", ""))
        pairs = _endpoint_pairs(t, nodes)
        if t.has("id") and len(pairs) > 1:
            raise t.error("id", f"only allowed when the entry describes one link (this one makes {len(pairs)})")
        for a, b in pairs:
            _check_ends(t, nodes, link_type, a, b)
            link_id = t.text("id", f"{a}-{b}")
            if link_id in defined_by:
                raise t.error("id" if t.has("id") else None,
                              f"duplicate link id {link_id!r} (also {defined_by[link_id]}); "
                              "give parallel links distinct ids, or use count for a bundle")
            defined_by[link_id] = t.where
            links.append(Link(id=link_id if default_ids or t.has("id") else "", a=a, b=b, **props))
    return links


def _endpoint_pairs(t: _Table, nodes: dict[str, Node]) -> list[tuple[str, str]]:
    """The (a, b) pairs an entry describes: a mesh, a star (one side a list) or a zip."""
    if t.has("mesh"):
        for key in ("a", "b"):
            if t.has(key):
                raise t.error(key, "give either mesh or a and b, not both")
        if t.has("bidirectional") and not t.data["bidirectional"]:
            raise t.error("bidirectional", "mesh links are always bidirectional")
        members = _endpoints(t, "mesh", nodes)
        if len(members) < 2:
            raise t.error("mesh", "needs at least two nodes")
        return [(x, y) for i, x in enumerate(members) for y in members[i + 1:]]
    if not (t.has("a") and t.has("b")):
        raise t.error("a" if not t.has("a") else "b", "missing (a link needs a and b, or mesh)")
    a, b = _endpoints(t, "a", nodes), _endpoints(t, "b", nodes)
    if len(a) > 1 and len(b) > 1 and len(a) != len(b):
        raise t.error("b", f"a and b lists pair up element-wise, so their lengths must match ({len(a)} vs {len(b)})")
    if len(a) == 1:
        return [(a[0], y) for y in b]
    if len(b) == 1:
        return [(x, b[0]) for x in a]
    return list(zip(a, b))


def _endpoints(t: _Table, key: str, nodes: dict[str, Node]) -> list[str]:
    value = t.data[key]
    items = value if isinstance(value, list) else [value]
    if not items:
        raise t.error(key, "must not be empty")
    names = []
    for item in items:
        name = device_node(item) if _is_int(item) else item
        if not isinstance(name, str):
            raise t.error(key, f"must be a node name, a device index or a list of them, got {_show(item)}")
        if name not in nodes:
            close = difflib.get_close_matches(name, list(nodes), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise t.error(key, f"unknown node {_show(item)}{hint}")
        names.append(name)
    return names


def _check_ends(t: _Table, nodes: dict[str, Node], link_type: str, a: str, b: str) -> None:
    allowed = LINK_ENDS[link_type]
    ka, kb = nodes[a].kind, nodes[b].kind
    if a == b:
        raise t.error("b", f"a link cannot connect {a!r} to itself")
    for name, kind in ((a, ka), (b, kb)):
        if kind not in allowed:
            raise t.error("type", f"a {link_type} link cannot end at {name!r} (a {kind}); "
                                  f"{link_type} links connect {', '.join(sorted(allowed))}")
    # PCIe never joins two devices directly, and a host link joins a root complex to its NUMA node.
    if link_type == "pcie" and ka == kb == DEVICE:
        raise t.error("type", f"pcie cannot join devices {a} and {b} directly; route it through a pcie_switch or root_complex")
    if link_type == "host" and ka == kb:
        raise t.error("type", f"a host link joins a root_complex to a numa node, not two {ka} nodes")


def _check_connected(topo: Topology, top: _Table) -> None:
    """Every node is used, every device reaches the host and every other device. Device
    fields that depend on routing (NUMA node, host bandwidth) are filled in here."""
    used = {n for link in topo.links for n in (link.a, link.b)}
    for i, name in enumerate(n for n in topo.nodes if topo.nodes[n].kind != DEVICE):
        if name not in used:
            raise top.error(f"nodes[{i}]", f"node {name!r} has no links")
    for d in topo.devices:
        try:
            path = topo.host_path(d.id)
        except ValueError:
            raise top.error("links", f"{d.name} has no path to the host (a numa node)") from None
        numa = topo.nodes[path.dst].numa
        topo.devices[d.id] = replace(d, numa_node=numa, host_gbps=path.bottleneck_gbps)
    _check_reachable(topo, top, "links")


def _check_reachable(topo: Topology, top: _Table, field: str) -> None:
    pair = unreachable_pair(topo)
    if pair is not None:
        raise top.error(field, f"no route from {pair[0]} to {pair[1]}")


# ---------------------------------------------------------------------------- cluster

_SWITCH_KINDS = ("hccs_switch", "ub_switch", "roce_switch", "pcie_switch")


def _cluster(top: _Table, server: Topology) -> cluster.ClusterSpec:
    """The [cluster] table: how many copies of the server, and the fabric joining them."""
    t = _Table(top.filename, "cluster", top.data["cluster"], ("nodes", "description", "switches", "links"))
    count = t.integer("nodes", minimum=1)
    switches: dict[str, Node] = {}
    for i, entry in enumerate(t.tables("switches")):
        s = _Table(top.filename, f"cluster.switches[{i}]", entry, ("name", "kind", "description"))
        name = _node_name(s, switches, server.nodes)
        kind = s.text("kind")
        if kind not in _SWITCH_KINDS:
            raise s.error("kind", f"must be one of {', '.join(_SWITCH_KINDS)} (host parts belong to "
                                  f"each server), got {kind!r}")
        switches[name] = Node(name, kind, description=s.text("description", ""))
    links = _links(t, {**server.nodes, **switches}, default_ids=False)
    used = {n for link in links for n in (link.a, link.b)}
    for i, name in enumerate(switches):
        if name not in used:
            raise t.error(f"switches[{i}]", f"switch {name!r} has no links")
    return cluster.ClusterSpec(count, t.text("description", ""), tuple(switches.values()), tuple(links))


def _check_board(board: Topology, top: _Table) -> None:
    """What only the whole cluster shows: link ids unique across the copies, and every
    device reaching every other over the fabric."""
    seen: set[str] = set()
    for link in board.links:
        if link.id in seen:
            raise top.error("cluster.links", f"duplicate link id {link.id!r} once the servers are copied")
        seen.add(link.id)
    _check_reachable(board, top, "cluster.links")


def resized(topo: Topology, devices: int | None = None, hbm_bytes: int | None = None) -> Topology:
    """The same board with its first ``devices`` devices and/or every device's HBM changed.

    Dropping devices drops their links, then any switch or host node left with no link,
    so a smaller board keeps the shape of the preset it came from.
    """
    d = topo.to_dict()
    if hbm_bytes is not None:
        d["devices"]["hbm"] = hbm_bytes
        for override in d["devices"].get("override", []):
            override.pop("hbm", None)
    if devices is not None and "cluster" in d:
        size = d["devices"]["count"]
        if devices > size:
            if devices % size or devices > topo.device_count:
                raise TopologyError(topo.name, "devices.count",
                                    f"a cluster shrinks by whole nodes of {size} devices (up to "
                                    f"{topo.device_count}), or to one node's first 1..{size}; not {devices}")
            d["cluster"]["nodes"] = devices // size
            devices = None
        else:
            del d["cluster"]          # the first devices of node 0: a one-server board
    if devices is not None:
        if not 1 <= devices <= d["devices"]["count"]:
            raise TopologyError(topo.name, "devices.count",
                                f"can shrink the board to 1..{topo.device_count} devices, not {devices}")
        gone = {f"npu{i}" for i in range(devices, d["devices"]["count"])}
        d["devices"]["count"] = devices
        d["devices"]["override"] = [o for o in d["devices"].get("override", []) if o["id"] < devices]
        d["links"] = [link for link in d["links"] if link["a"] not in gone and link["b"] not in gone]
        used = {end for link in d["links"] for end in (link["a"], link["b"])}
        d["nodes"] = [n for n in d["nodes"] if n["name"] in used]
    if not d["devices"].get("override"):
        d["devices"].pop("override", None)
    return from_dict(d, f"{topo.name} (resized)")
