"""`mdev topo`: list, show, check and route board topologies.

add_parser() registers the subcommands on the top-level CLI; each handler takes the parsed
argparse namespace, prints to stdout (errors to stderr) and returns the exit code.
"""
from __future__ import annotations

import argparse
import sys

from mdev import topology
from mdev.topology.render import render_matrix, render_nodes, render_p2p, render_path, render_summary


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("topo", help="inspect and validate board topologies",
                                   description="Board topologies: a TOML file or a preset name.")
    sub = parser.add_subparsers(dest="topo_command", metavar="COMMAND", required=True)

    p = sub.add_parser("list", help="list the preset topologies")
    p.set_defaults(handler=cmd_list)

    p = sub.add_parser("show", help="print a board's device matrix (like npu-smi info -t topo)")
    p.add_argument("file", nargs="?", metavar="FILE|PRESET",
                   help=f"topology file or preset name (default: {topology.default_preset()})")
    p.add_argument("--p2p", action="store_true", help="print the peer-access matrix instead")
    p.add_argument("--node", type=int, default=0, metavar="K",
                   help="cluster node whose devices the matrix shows (default 0)")
    p.set_defaults(handler=cmd_show)

    p = sub.add_parser("check", help="validate topology files")
    p.add_argument("files", nargs="+", metavar="FILE|PRESET")
    p.set_defaults(handler=cmd_check)

    p = sub.add_parser("path", help="print the route between two devices, or a device and the host")
    p.add_argument("file", metavar="FILE|PRESET")
    p.add_argument("a", metavar="A", help="board device index (3 or npu3), or NODE:DEVICE (2:3)")
    p.add_argument("b", metavar="B", help="a device like A, or 'host' for A's host path")
    p.set_defaults(handler=cmd_path)
    return parser


def cmd_list(args: argparse.Namespace) -> int:
    names = topology.list_presets()
    width = max(map(len, names))
    for name in names:
        topo = topology.resolve(name)
        mark = " (default)" if name == topology.default_preset() else ""
        print(f"{name:<{width}}  {topo.description}{mark}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    try:
        topo = topology.resolve(args.file)
    except topology.TopologyError as e:
        return _fail(e)
    node = getattr(args, "node", 0)
    if not 0 <= node < topo.node_count:
        return _fail(ValueError(f"{topo.name} has nodes 0..{topo.node_count - 1}, not {node}"))
    body = render_p2p(topo, node) if getattr(args, "p2p", False) else render_matrix(topo, node)
    parts = [render_summary(topo)]
    if topo.node_count > 1:
        parts += [f"Nodes:\n{render_nodes(topo)}", f"Node {node} (its host processes see devices "
                                                     f"0..{topo.node(node).count - 1}):"]
    print("\n\n".join(parts + [body]))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    status = 0
    for spec in args.files:
        try:
            topo = topology.resolve(spec)
        except topology.TopologyError as e:
            status = _fail(e, 1)
            continue
        nodes = f" in {topo.node_count} nodes of {topo.node(0).count}" if topo.node_count > 1 else ""
        print(f"ok: {spec} ({topo.device_count} devices{nodes}, {len(topo.links)} links)")
    return status


def cmd_path(args: argparse.Namespace) -> int:
    try:
        topo = topology.resolve(args.file)
        a = _device(topo, args.a)
        path = topo.host_path(a) if args.b.lower() == "host" else topo.path(a, _device(topo, args.b))
    except (topology.TopologyError, ValueError) as e:
        return _fail(e)
    print(render_path(path, topo))
    return 0


def _device(topo: topology.Topology, text: str) -> int:
    """A board device index from "3", "npu3" or "NODE:DEVICE" (a node's local device)."""
    node, sep, local = text.partition(":")
    if sep:
        try:
            return topo.global_device(int(node), int(local))
        except (ValueError, IndexError):
            raise ValueError(f"{text!r} is not a device of {topo.name} (nodes 0..{topo.node_count - 1}, "
                             f"devices 0..{topo.node(0).count - 1} each)") from None
    digits = text.lower().removeprefix("npu")
    if not digits.isdigit() or int(digits) >= topo.device_count:
        raise ValueError(f"{text!r} is not a device of {topo.name} (0..{topo.device_count - 1})")
    return int(digits)


def _fail(error: Exception, status: int = 2) -> int:
    """Say what is wrong in one line; 2: a bad argument, 1: a topology check found faults."""
    print(f"mdev topo: {error}", file=sys.stderr)
    return status
