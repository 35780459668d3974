"""``mdev board start|status|stop`` and ``mdev smi``."""

from __future__ import annotations

import argparse
import sys
import time

from mdev.board import launcher
from mdev.naming import BoardPaths


def _size(text: str) -> int:
    from mdev import topology
    return topology.parse_size(text)


def add_parser(sub) -> None:
    p = sub.add_parser("board", help="start, inspect or stop a board")
    bsub = p.add_subparsers(dest="action", required=True)
    start = bsub.add_parser("start", help="start a board (no-op if it runs)")
    start.add_argument("--name", help="board name (default: $MDEV_BOARD or 'default')")
    start.add_argument("--topology", help="topology file or preset name (default: the 8-device preset)")
    start.add_argument("--devices", type=int, help="number of devices (overrides the topology)")
    start.add_argument("--hbm", type=_size, help="HBM per device, e.g. 32GiB (overrides the topology)")
    start.add_argument("--eager", action="store_true",
                       help="a cluster: start every node's devices now (default: a node's devices start "
                            "when the first process attaches to it)")
    start.set_defaults(handler=cmd_start)
    for name, handler, text in (("status", cmd_status, "show a running board"),
                                ("stop", cmd_stop, "stop a board and remove its segments")):
        q = bsub.add_parser(name, help=text)
        q.add_argument("--name", help="board name")
        q.set_defaults(handler=handler)
    smi = sub.add_parser("smi", help="device table of a running board, like npu-smi info")
    smi.add_argument("--name", help="board name")
    smi.add_argument("--node", type=int, default=0, metavar="K",
                     help="cluster node whose devices the table shows (default 0); a cluster also "
                          "gets a summary of every node")
    smi.set_defaults(handler=cmd_smi)


def cmd_start(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    topo = launcher.resolve_topology(args.topology, args.devices, args.hbm)
    paths, started = launcher.start(args.name, topo, eager=args.eager)
    if started:
        nodes = ""
        if topo.node_count > 1:
            nodes = f" in {topo.node_count} nodes" + ("" if args.eager else ", each started at its first attach")
        print(f"board {paths.name!r} started: {topo.device_count} x {topo.device(0).soc_name}{nodes} "
              f"({topo.name}) in {time.perf_counter() - t0:.2f} s")
    else:
        print(f"board {paths.name!r} is already running")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    name = BoardPaths(args.name).name
    try:
        state = launcher.stop(name)
    except launcher.BoardError as exc:
        print(exc)
        return 1
    print({launcher.STOPPED: f"board {name!r} stopped",
           launcher.DEAD: f"board {name!r} was dead: what it left behind was removed",
           launcher.NOT_RUNNING: f"board {name!r} was not running"}[state])
    for segment, uid in BoardPaths(name).foreign_segments():
        print(f"note: /dev/shm{segment} was made by another user (uid {uid}) under this board's name: "
              "not the board's, left alone")
    return 0


def _status(name: str | None, memory: bool = False) -> dict | None:
    """The running board's status, or None (after saying why) when it cannot be had."""
    try:
        try:
            return launcher.status(name, memory)
        except launcher.BoardError:
            if not memory:
                raise
            return launcher.status(name)        # a supervisor of an older mdev: no memory per process
    except launcher.BoardError as exc:
        print(exc)
        return None


def cmd_status(args: argparse.Namespace) -> int:
    info = _status(args.name)
    if info is None:
        return 1
    up = time.time() - info["started"]
    # the board's version is its supervisor's ('?': a 0.1.0 supervisor does not say)
    print(f"board {info['board']!r}: topology {info['topology']}, supervisor pid {info['pid']}, "
          f"up {up:.0f} s{' (started on demand)' if info['on_demand'] else ''}, mdev {info.get('version', '?')}")
    nodes = f" in {info['nodes']} nodes" if info["nodes"] > 1 else ""
    print(f"{len(info['devices'])} devices{nodes}, {len(info['clients'])} attached processes")
    return 0


def _mb(n: int) -> str:
    # whole MiB, as npu-smi's HBM-Usage(MB): GiB with one decimal showed 0.0 for the small
    # boards of tests and laptops
    return str(n >> 20)


def cmd_smi(args: argparse.Namespace) -> int:
    info = _status(args.name, memory=True)
    if info is None:
        return 1
    node = args.node
    if not 0 <= node < info["nodes"]:
        print(f"mdev smi: board {info['board']!r} has nodes 0..{info['nodes'] - 1}, not {node}", file=sys.stderr)
        return 2
    rule = "+" + "-" * 78 + "+"
    print(rule)
    print(f"| mdev smi {info.get('version', '?'):<7}board {info['board']:<20} topology {info['topology']:<25}|")
    if info["nodes"] > 1:
        _node_summary(info, rule)
        devices = [d for d in info["devices"] if d["node"] == node]
        first, last = devices[0]["id"], devices[-1]["id"]
        title = f"node {node}: board devices npu{first}-{last}, seen on the node as 0-{len(devices) - 1}"
        print(f"| {title:<77}|")
    else:
        devices = info["devices"]
    print(rule)
    print(f"| {'NPU':<4}{'Name':<16}{'Health':<9}{'HBM-Usage(MB)':<18}{'Streams':<9}{'Tasks':<10}{'PID':<10}|")
    print(rule)
    for d in devices:
        usage = f"{_mb(d['hbm_used'])} / {_mb(d['hbm_total'])}"
        print(f"| {d['local']:<4}{d['soc']:<16}{d['state']:<9}{usage:<18}{d['streams']:<9}"
              f"{d['tasks_done']:<10}{d['pid']:<10}|")
    print(rule)
    # as npu-smi's process table: a row per process and device it holds memory on (a
    # process holding none on this node: one row, NPU "-")
    print(f"| {'NPU':<5}{'Process id':<12}{'Process memory(MB)':<20}{'Command':<41}|")
    print(rule)
    local = {d["id"]: d["local"] for d in devices}
    clients = [c for c in info["clients"] if c["node"] == node]
    for c in clients:
        held = sorted((int(k), v) for k, v in c.get("hbm", {}).items() if int(k) in local)
        for npu, mb in [(local[k], _mb(v)) for k, v in held] or [("-", "0" if "hbm" in c else "?")]:
            print(f"| {npu!s:<5}{c['pid']!s:<12}{mb:<20}{c['command'][:41]:<41}|")
    if not clients:
        print(f"| {'-':<5}{'-':<12}{'-':<20}{'no processes attached':<41}|")
    print(rule)
    return 0


def _node_summary(info: dict, rule: str) -> None:
    """One line per cluster node: devices up, HBM in use, attached processes."""
    print(rule)
    print(f"| {'Node':<6}{'Devices':<9}{'Health':<14}{'HBM-Usage(MB)':<22}{'Processes':<26}|")
    print(rule)
    for k in range(info["nodes"]):
        devices = [d for d in info["devices"] if d["node"] == k]
        ok = sum(d["state"] == "ok" for d in devices)
        if all(d["state"] == "off" for d in devices):
            health = "off"          # started at the node's first attach
        else:
            health = "ok" if ok == len(devices) else f"{ok}/{len(devices)} ok"
        usage = f"{_mb(sum(d['hbm_used'] for d in devices))} / {_mb(sum(d['hbm_total'] for d in devices))}"
        procs = sum(c["node"] == k for c in info["clients"])
        print(f"| {k:<6}{len(devices):<9}{health:<14}{usage:<22}{procs:<26}|")
