"""``mdev whatif``: run one program on several topologies and compare them side by side.

    mdev whatif prog.py --topology hccs8 --topology islands8 [--hbm 1GiB] [--devices K]
                        [--node K] [--trace-dir DIR] [--args "--batch 4"]

Each topology gets its own board (``whatif-<pid>-<i>-<name>``), started for the run and
stopped after it; the program runs under ``mdev run --trace`` there, unmodified.  The table
compares: exit status, wall makespan (first task start .. last task end, from the trace),
modelled makespan (the program runs with MDEV_MODEL_TIME=1: durations from the topology's
links, see mdev.timemodel), bytes per route (H2D / D2H / P2P
/ D2D) and per link type, the busiest link, and which device pairs may use peer access
(``can_access_peer`` of the topology, among the devices of the node the program runs on),
then a row per collective the program ran (mdev.hccl / libhccl.so: operation, size, ranks)
with its modelled time and algorithm on each topology (mdev.cli.trace.collective_times).
With ``--node K`` the program runs on cluster node K of each board (node 0 of a board
that has fewer nodes).  With ``--trace-dir`` both traces are kept there.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from mdev.topology import TopologyError

from mdev.cli import trace as trace_cli


def _size(text: str) -> int:
    from mdev import topology
    return topology.parse_size(text)


def add_parser(sub) -> None:
    p = sub.add_parser("whatif", help="run a program on several topologies, compare traffic and makespan",
                       description="Run an unmodified pyACL program on a board of each --topology and "
                                   "print a side-by-side table.")
    p.add_argument("prog", help="the program (a .py file)")
    p.add_argument("--topology", action="append", required=True, metavar="FILE|PRESET",
                   help="a topology to run on (give it twice or more)")
    p.add_argument("--devices", type=int, help="number of devices (overrides every topology)")
    p.add_argument("--hbm", type=_size, help="HBM per device, e.g. 1GiB (overrides every topology)")
    p.add_argument("--node", type=int, default=0, metavar="K",
                   help="run the program on cluster node K of each board (default 0; node 0 where a board has fewer)")
    p.add_argument("--trace-dir", help="keep the traces there (<i>-<topology>.json)")
    p.add_argument("--args", default="", help="arguments of the program, one string (shell-split)")
    p.add_argument("--timeout", type=float, default=600, help="seconds per run (default 600)")
    p.set_defaults(handler=cmd_whatif)


def peer_pairs(topo, node: int = 0) -> tuple[int, int, list[tuple[int, int]]]:
    """Pairs of node ``node``'s devices (local ids) that may use peer access both ways."""
    devices = topo.node(node).devices
    n = len(devices)
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    usable = [(a, b) for a, b in pairs
              if topo.can_access_peer(devices[a], devices[b]) and topo.can_access_peer(devices[b], devices[a])]
    return len(usable), len(pairs), usable


def run_node(topo, node: int) -> int:
    """The node a --node run uses on ``topo``: that one, or node 0 if the board has fewer."""
    return node if node < topo.node_count else 0


def _run_one(i: int, spec: str, args, trace_file: str) -> dict:
    from mdev.board import launcher
    topo = launcher.resolve_topology(spec, args.devices, args.hbm)
    name = f"whatif-{os.getpid()}-{i}-" + re.sub(r"[^A-Za-z0-9_.-]", "_", Path(spec).stem)[:24]
    cmd = [sys.executable, "-m", "mdev", "run", "--board", name, "--topology", spec]
    if args.devices is not None:
        cmd += ["--devices", str(args.devices)]
    if args.hbm is not None:
        cmd += ["--hbm", str(args.hbm)]
    node = run_node(topo, getattr(args, "node", 0))
    cmd += ["--node", str(node), "--trace", trace_file, "--model-time", args.prog, *shlex.split(args.args)]
    where = f", on node {node} of {topo.node_count} ({topo.node(node).count} devices)" if topo.node_count > 1 else ""
    print(f"== {spec}: {topo.name}, {topo.device_count} devices{where} (board {name})", flush=True)
    try:
        code = subprocess.run(cmd, timeout=args.timeout).returncode
    except subprocess.TimeoutExpired:
        code = "timeout"
    finally:
        try:
            launcher.stop(name)
        except Exception:
            pass
    result = {"spec": spec, "topo": topo, "node": node, "code": code, "trace": None}
    if os.path.exists(trace_file):
        result["trace"] = trace_cli.analyse(trace_cli.load(trace_file))
    return result


def table(results: list[dict]) -> str:
    rows: list[tuple[str, list[str]]] = []
    fmt_b, fmt_t = trace_cli.fmt_bytes, trace_cli.fmt_us

    def row(label, fn):
        rows.append((label, [fn(r) for r in results]))

    def t(r, fn, default="-"):
        return fn(r["trace"]) if r["trace"] is not None else default

    def board(r):
        topo = r["topo"]
        nodes = f" = {topo.node_count} nodes x {topo.node(0).count}, on node {r['node']}" if topo.node_count > 1 else ""
        return f"{topo.name} ({topo.device_count} x {topo.device(0).soc_name}{nodes})"
    row("board", board)
    row("exit status", lambda r: str(r["code"]))
    row("tasks traced", lambda r: t(r, lambda a: str(a["tasks"])))
    row("wall makespan", lambda r: t(r, lambda a: fmt_t(a["span_us"])))
    row("modelled makespan", lambda r: t(r, lambda a: fmt_t(a["modelled_us"]) if a.get("modelled_us") else "-"))
    routes = sorted({k for r in results if r["trace"] for k in r["trace"]["routes"]})
    for route in routes:
        row(f"bytes {route}", lambda r, k=route: t(r, lambda a: fmt_b(a["routes"].get(k, 0))))
    types = sorted({k for r in results if r["trace"] for k in r["trace"]["link_types"]})
    for kind in types:
        row(f"bytes over {kind} links", lambda r, k=kind: t(r, lambda a: fmt_b(a["link_types"].get(k, 0))))

    def busiest(a):
        if not a["links"]:
            return "-"
        link, info = max(a["links"].items(), key=lambda kv: max(kv[1]["fwd"], kv[1]["bwd"]))
        util = f", {100 * info['util']:.1f}%" if info["util"] is not None else ""
        return f"{link} ({fmt_b(max(info['fwd'], info['bwd']))}{util})"
    row("busiest link", lambda r: t(r, busiest))

    def peers(r):
        usable, total, pairs = peer_pairs(r["topo"], r["node"])
        text = f"{usable}/{total} pairs"
        if 0 < usable < total and usable <= 6:
            text += ": " + " ".join(f"{a}-{b}" for a, b in pairs)
        return text
    row("peer access usable", peers)
    row("flow arrows", lambda r: t(r, lambda a: str(a["flows"])))
    # the collectives the program ran (mdev.hccl / libhccl.so), in modelled time
    colls = sorted({k for r in results if r["trace"] for k in r["trace"]["collectives"]},
                   key=lambda k: (k[0], k[2], k[1], k[3]))
    for label in dict.fromkeys(trace_cli.collective_label(k) for k in colls):
        def cell(r, label=label):
            hits = [(k, us) for k, us in (r["trace"] or {}).get("collectives", {}).items()
                    if trace_cli.collective_label(k) == label]
            return ", ".join(f"{fmt_t(us)} ({k[3]})" for k, us in hits) or "-"
        row(label, cell)

    head = [""] + [r["spec"] for r in results]
    widths = [max(len(head[0]), *(len(label) for label, _ in rows))]
    for j in range(len(results)):
        widths.append(max(len(head[j + 1]), *(len(vals[j]) for _, vals in rows)))
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    for label, vals in rows:
        lines.append("  ".join(v.ljust(w) for v, w in zip([label] + vals, widths)).rstrip())
    return "\n".join(lines)


def cmd_whatif(args: argparse.Namespace) -> int:
    if not os.path.exists(args.prog):
        print(f"mdev whatif: {args.prog}: no such file", file=sys.stderr)
        return 2
    if len(args.topology) < 1:
        print("mdev whatif: give --topology at least once", file=sys.stderr)
        return 2
    tmp = None
    if args.trace_dir:
        directory = args.trace_dir
        os.makedirs(directory, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="mdev-whatif-")
        directory = tmp.name
    try:
        results = []
        for i, spec in enumerate(args.topology):
            trace_file = os.path.join(directory, f"{i}-{Path(spec).stem}.json")
            try:
                results.append(_run_one(i, spec, args, trace_file))
            except TopologyError as exc:      # a bad argument: one line, no traceback
                print(f"mdev whatif: {exc}", file=sys.stderr)
                return 2
            except Exception as exc:      # a board that cannot start: say so, no traceback
                print(f"mdev whatif: {spec}: {exc}", file=sys.stderr)
                return 1
        print()
        print(table(results))
        if args.trace_dir:
            print(f"\ntraces in {directory}: " + ", ".join(sorted(os.listdir(directory))))
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0 if all(r["code"] == 0 for r in results) else 1
