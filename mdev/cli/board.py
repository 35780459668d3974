"""``mdev board start|status|stop`` and ``mdev smi``."""

from __future__ import annotations

import argparse
import time

from mdev.board import launcher
from mdev.board.naming import BoardPaths


def _size(text: str) -> int:
    import topology
    return topology.parse_size(text)


def add_parser(sub) -> None:
    p = sub.add_parser("board", help="start, inspect or stop a board")
    bsub = p.add_subparsers(dest="action", required=True)
    start = bsub.add_parser("start", help="start a board (no-op if it runs)")
    start.add_argument("--name", help="board name (default: $MDEV_BOARD or 'default')")
    start.add_argument("--topology", help="topology file or preset name (default: the 8-device preset)")
    start.add_argument("--devices", type=int, help="number of devices (overrides the topology)")
    start.add_argument("--hbm", type=_size, help="HBM per device, e.g. 32GiB (overrides the topology)")
    start.set_defaults(handler=cmd_start)
    for name, handler, text in (("status", cmd_status, "show a running board"),
                                ("stop", cmd_stop, "stop a board and remove its segments")):
        q = bsub.add_parser(name, help=text)
        q.add_argument("--name", help="board name")
        q.set_defaults(handler=handler)
    smi = sub.add_parser("smi", help="device table of a running board, like npu-smi info")
    smi.add_argument("--name", help="board name")
    smi.set_defaults(handler=cmd_smi)


def cmd_start(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    topo = launcher.resolve_topology(args.topology, args.devices, args.hbm)
    paths, started = launcher.start(args.name, topo)
    if started:
        print(f"board {paths.name!r} started: {topo.device_count} x {topo.device(0).soc_name} "
              f"({topo.name}) in {time.perf_counter() - t0:.2f} s")
    else:
        print(f"board {paths.name!r} is already running")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    name = BoardPaths(args.name).name
    if launcher.stop(name):
        print(f"board {name!r} stopped")
    else:
        print(f"board {name!r} was not running (stale files removed)")
    return 0


def _status(name: str | None) -> dict | None:
    """The running board's status, or None (after saying why) when it cannot be had."""
    try:
        return launcher.status(name)
    except launcher.BoardError as exc:
        print(exc)
        return None


def cmd_status(args: argparse.Namespace) -> int:
    info = _status(args.name)
    if info is None:
        return 1
    up = time.time() - info["started"]
    print(f"board {info['board']!r}: topology {info['topology']}, supervisor pid {info['pid']}, "
          f"up {up:.0f} s{' (started on demand)' if info['on_demand'] else ''}")
    print(f"{len(info['devices'])} devices, {len(info['clients'])} attached processes")
    return 0


def _mb(n: int) -> str:
    # whole MiB, as npu-smi's HBM-Usage(MB): GiB with one decimal showed 0.0 for the small
    # boards of tests and laptops
    return str(n >> 20)


def cmd_smi(args: argparse.Namespace) -> int:
    info = _status(args.name)
    if info is None:
        return 1
    rule = "+" + "-" * 78 + "+"
    print(rule)
    print(f"| mdev smi        board {info['board']:<20} topology {info['topology']:<25}|")
    print(rule)
    print(f"| {'NPU':<4}{'Name':<14}{'Health':<9}{'HBM-Usage(MB)':<18}{'Streams':<9}{'Tasks':<12}{'PID':<10}|")
    print(rule)
    for d in info["devices"]:
        usage = f"{_mb(d['hbm_used'])} / {_mb(d['hbm_total'])}"
        print(f"| {d['id']:<4}{d['soc']:<14}{d['state']:<9}{usage:<18}{d['streams']:<9}"
              f"{d['tasks_done']:<12}{d['pid']:<10}|")
    print(rule)
    print(f"| {'Process id':<12}{'Command':<66}|")
    print(rule)
    for c in info["clients"] or [{"pid": "-", "command": "no processes attached"}]:
        print(f"| {str(c['pid']):<12}{c['command'][:66]:<66}|")
    print(rule)
    return 0
