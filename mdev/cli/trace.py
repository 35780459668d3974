"""``mdev trace``: read a timeline trace written by ``MDEV_TRACE`` / ``mdev run --trace``.

    mdev trace summary FILE            per-device busy time, per-link bytes and utilisation
    mdev trace plot FILE -o out.png [--modelled] [--rows auto|track|device] [--flows]
                    [--window START:END]  the timeline as a picture (wall or modelled time; a row
                                       per track or per device; needs matplotlib: pip install 'mdev[plot]')

Busy time of a device is the union of the intervals in which one of its tasks ran, waits
(event / notify / value waits, host callbacks) not counted; the process's synchronous
copies and memsets count as a "host" row.  A link's utilisation is the
bytes that crossed it in its busier direction / (its effective bandwidth x the trace's
span), span = first task start .. last task end.

The collectives a trace names (``mdev.collectives``: HCCL operations of mdev.hccl /
libhccl.so) are timed in modelled time: a rank's operation from its first task's modelled
start to its last task's modelled end on the caller's stream, an instance (the n-th
operation of the communicator) by its slowest rank, and each (operation, size, ranks,
algorithm) by the median of its instances.  A captured collective is named by each replay
(instance "<n> replay <k>") and timed by the replay's task (the whole graph).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import defaultdict

HOST = -1      # "device" of host-side records (mdev.runtime.trace.HOST)
TRACK_LIMIT = 24           # a plot of more tracks than this gets a row per device (--rows auto)
WAITS = {"wait_event", "wait_remote_event", "wait_event_flag", "wait_notify", "value_wait", "host_callback"}


def add_parser(sub) -> None:
    p = sub.add_parser("trace", help="summarise or plot a timeline trace (MDEV_TRACE / mdev run --trace)",
                       description="Read a Chrome trace / Perfetto JSON file written by mdev.")
    tsub = p.add_subparsers(dest="trace_command", required=True)
    s = tsub.add_parser("summary", help="per-device busy time, per-link bytes and utilisation")
    s.add_argument("file")
    s.set_defaults(handler=cmd_summary)
    q = tsub.add_parser("plot", help="render the timeline as a PNG (needs matplotlib)")
    q.add_argument("file")
    q.add_argument("-o", "--output", default="timeline.png", help="PNG file to write (default timeline.png)")
    q.add_argument("--modelled", action="store_true", help="plot modelled time instead of wall time")
    q.add_argument("--rows", choices=("auto", "track", "device"), default="auto",
                   help="a row per stream and engine slot (track), per device (device: a collective's ranks), "
                        f"or device rows past {TRACK_LIMIT} tracks or for a trace of collectives (auto, the default)")
    q.add_argument("--flows", action="store_true", help="draw the flow arrows (event, notify and value waits)")
    q.add_argument("--window", type=window_arg, default=(None, None), metavar="START:END",
                   help="only this time window, in ms from the trace's start (either side may be empty)")
    q.set_defaults(handler=cmd_plot)


# ----------------------------------------------------------------------------- analysis
def load(path: str) -> dict:
    with open(path) as f:
        data = json.load(f)
    if "traceEvents" not in data:
        raise ValueError(f"{path}: not a Chrome trace (no traceEvents)")
    return data


def tasks(data: dict) -> list[dict]:
    """The task events (one per task; engine-track copies and the host's synchronisations left out)."""
    return [e for e in data["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "task"
            and e["args"].get("kind") != "synchronize"]


def _union(intervals: list[tuple[float, float]]) -> float:
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def analyse(data: dict) -> dict:
    """Figures of a trace: span, busy time per device and engine, bytes per route, link, type."""
    meta = data.get("mdev", {})
    evs = tasks(data)
    span_us = (max(e["ts"] + e["dur"] for e in evs) - min(e["ts"] for e in evs)) if evs else 0.0
    busy: dict[int, list] = defaultdict(list)
    engines: dict[tuple[int, str], list] = defaultdict(list)
    counts: dict[int, int] = defaultdict(int)
    route_bytes: dict[str, int] = defaultdict(int)
    channel_bytes: dict[tuple[str, str], int] = defaultdict(int)
    for e in evs:
        a = e["args"]
        dev = a["device"]               # HOST (-1) for the process's synchronous copies / memsets
        counts[dev] += 1
        if a["kind"] not in WAITS:
            busy[dev].append((e["ts"], e["ts"] + e["dur"]))
        if a.get("engine"):
            engines[(dev, a["engine"])].append((e["ts"], e["ts"] + e["dur"]))
        if a.get("route"):
            route_bytes[a["route"]] += a["bytes"]
        for link, d in zip(a.get("path", ()), a.get("dir", "")):
            channel_bytes[(link, d)] += a["bytes"]
    links_meta = meta.get("links", {})
    links = {}
    type_bytes: dict[str, int] = defaultdict(int)
    for link in sorted({l for l, _ in channel_bytes}):
        fwd, bwd = channel_bytes.get((link, ">"), 0), channel_bytes.get((link, "<"), 0)
        info = links_meta.get(link, {})
        gbps = info.get("gbps")
        util = (max(fwd, bwd) / (gbps * 1e9 * span_us * 1e-6)) if gbps and span_us else None
        links[link] = {"type": info.get("type", "?"), "gbps": gbps, "fwd": fwd, "bwd": bwd, "util": util}
        type_bytes[info.get("type", "?")] += fwd + bwd
    return {
        "span_us": span_us, "tasks": len(evs),
        "devices": {d: {"tasks": counts[d], "busy_us": _union(busy[d])} for d in sorted(counts)},
        "engines": {k: _union(v) for k, v in sorted(engines.items())},
        "routes": dict(route_bytes), "links": links, "link_types": dict(type_bytes),
        "flows": sum(1 for e in data["traceEvents"] if e.get("ph") == "s"),
        "modelled_us": (meta["modelled_makespan_ns"] / 1000.0) if meta.get("modelled_makespan_ns") else None,
        "collectives": collective_times(data, evs),
        "meta": meta,
    }


def collective_times(data: dict, evs: list[dict] | None = None) -> dict[tuple, float]:
    """(operation, bytes, ranks, algorithm) -> modelled us of the trace's collectives (see the
    module docstring)."""
    named = data.get("mdev", {}).get("collectives") or []
    if not named:
        return {}
    at: dict[tuple, dict] = {}      # a replay's inner tasks carry its seq: its run_graph task stands for it
    for e in (evs if evs is not None else tasks(data)):
        args = e["args"]
        key = (args.get("device"), args.get("stream"), args.get("seq"))
        if key[2] is not None and (key not in at or args.get("kind") == "run_graph"):
            at[key] = args
    instances: dict[tuple, list[float]] = defaultdict(list)
    for dev, stream, first, last, op, nbytes, ranks, algorithm, number in named:
        a, b = at.get((dev, stream, first)), at.get((dev, stream, last))
        if a is not None and b is not None:
            instances[(op, nbytes, ranks, algorithm, number)].append((b["modelled_end_ns"] - a["modelled_start_ns"]) / 1e3)
    per: dict[tuple, list[float]] = defaultdict(list)
    for (*key, _), times in instances.items():
        per[tuple(key)].append(max(times))
    return {key: statistics.median(times) for key, times in sorted(per.items())}


def collective_label(key: tuple) -> str:
    op, nbytes, ranks, _ = key
    return f"{op} {fmt_bytes(nbytes)} x{ranks}"


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def fmt_us(us: float) -> str:
    return f"{us / 1000:.3f} ms" if us >= 1000 else f"{us:.1f} us"


def summary_text(data: dict) -> str:
    r = analyse(data)
    meta = r["meta"]
    out = [f"trace of board {meta.get('board', '?')} (topology {meta.get('topology', '?')}): "
           f"{r['tasks']} tasks, span {fmt_us(r['span_us'])}, {r['flows']} flow arrows"
           + (f", {meta['dropped']} records dropped" if meta.get("dropped") else "")]
    if r["modelled_us"] is not None:
        out.append(f"modelled makespan {fmt_us(r['modelled_us'])} (link bandwidths and latencies of the topology, "
                   f"kernels at {meta.get('kernel_factor', 1.0):g} x wall time)")
    out.append("")
    out.append(f"{'device':>6} {'tasks':>7} {'busy':>12} {'busy %':>7}   engines (busy)")
    for d, info in r["devices"].items():
        eng = ", ".join(f"{name} {fmt_us(us)}" for (dev, name), us in r["engines"].items() if dev == d)
        pct = 100 * info["busy_us"] / r["span_us"] if r["span_us"] else 0.0
        out.append(f"{'host' if d == HOST else d:>6} {info['tasks']:>7} {fmt_us(info['busy_us']):>12} "
                   f"{pct:>6.1f}%   {eng or '-'}")
    out.append("")
    if r["collectives"]:
        out.append(f"{'collective (modelled)':<28} {'algorithm':<13} {'time':>12}")
        for key, us in r["collectives"].items():
            out.append(f"{collective_label(key):<28} {key[3]:<13} {fmt_us(us):>12}")
        out.append("")
    if r["routes"]:
        out.append("bytes by route: " + ", ".join(f"{k} {fmt_bytes(v)}" for k, v in sorted(r["routes"].items())))
    if r["links"]:
        out.append("")
        out.append(f"{'link':<20} {'type':<6} {'GB/s':>7} {'bytes a->b':>12} {'bytes b->a':>12} {'util':>7}")
        for link, info in r["links"].items():
            util = f"{100 * info['util']:.1f}%" if info["util"] is not None else "-"
            gbps = f"{info['gbps']:.1f}" if info["gbps"] else "-"
            out.append(f"{link:<20} {info['type']:<6} {gbps:>7} {fmt_bytes(info['fwd']):>12} "
                       f"{fmt_bytes(info['bwd']):>12} {util:>7}")
    else:
        out.append("no bytes crossed a link")
    return "\n".join(out)


def cmd_summary(args: argparse.Namespace) -> int:
    try:
        data = load(args.file)
    except (OSError, ValueError) as exc:          # the file given is no trace: a bad argument
        print(f"mdev trace summary: {exc}", file=sys.stderr)
        return 2
    print(summary_text(data))
    return 0


# ----------------------------------------------------------------------------- plot
COLOURS = {"H2D": "tab:blue", "D2H": "tab:cyan", "P2P": "tab:red", "D2D": "tab:green", "kernel": "tab:orange",
           "wait": "lightgrey", "other": "tab:purple"}


def _colour(a: dict) -> str:
    if a.get("route") in COLOURS:
        return COLOURS[a["route"]]
    if a.get("kind") == "kernel":
        return COLOURS["kernel"]
    if a.get("kind") in WAITS:
        return COLOURS["wait"]
    return COLOURS["other"]


def row_key(e: dict, device: int, per_device: bool) -> tuple:
    """The row an event of ``device`` is drawn on: the device's (a host's: its process's) or
    its own track's."""
    if device == HOST:
        return (0, e["pid"], e["tid"] if not per_device else 0)
    return (1, device, e["tid"] if not per_device else 0)


def row_label(key: tuple, track: str, host_pid, per_device: bool) -> str:
    """``host (pid N)`` (``: host T`` for a host thread's own track) or ``dev D`` (``: <track>``)."""
    if key[0] == 0:
        host = f"host (pid {host_pid})"
        return host if per_device or track == "host" else f"{host}: {track}"
    return f"dev {key[1]}" if per_device else f"dev {key[1]}: {track}"


def plot(data: dict, output: str, modelled: bool = False, rows: str = "auto", flows: bool = False,
         window: tuple[float | None, float | None] = (None, None)) -> list[str]:
    """Draw the timeline into ``output``; returns the rows' labels, top to bottom.

    ``rows``: "track" (a row per stream and engine slot), "device" (a row per device, all its
    streams: a collective's ranks) or "auto" (device rows past TRACK_LIMIT tracks or when the
    trace names collectives).  ``flows`` draws the flow arrows.  ``window``: (start, end) in ms
    from the trace's start, either open."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    events = data["traceEvents"]
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    cats = ("modelled",) if modelled else ("task", "engine")
    xs = [e for e in events if e.get("ph") == "X" and e.get("cat") in cats]
    if rows == "auto":
        many = len({(e["pid"], e["tid"]) for e in xs}) > TRACK_LIMIT
        rows = "device" if many or data.get("mdev", {}).get("collectives") else "track"
    per_device = rows == "device"
    if per_device:
        xs = [e for e in xs if e.get("cat") != "engine"]      # a device's row shows its tasks once
    lo, hi = window
    xs = [e for e in xs if (lo is None or e["ts"] + e["dur"] >= lo * 1000) and (hi is None or e["ts"] <= hi * 1000)]
    xs.sort(key=lambda e: e["args"].get("kind") not in WAITS)    # waits underneath: a device row overlays streams
    # a track's device, from its process's name ("device 3 (Ascend910B1)", "device 3 (modelled
    # time)", "host (pid N)"): engine slots and modelled records do not name it
    device_of = {e["pid"]: int(m.group(1)) if (m := re.match(r"device (\d+)", e["args"]["name"])) else HOST
                 for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    keys: dict[tuple, str] = {}
    track_row: dict[tuple, tuple] = {}          # (pid, tid) -> row key: where a flow's ends are
    for e in xs:
        key = row_key(e, device_of.get(e["pid"], HOST), per_device)
        track = threads.get((e["pid"], e["tid"]), str(e["tid"]))
        keys.setdefault(key, row_label(key, track, data.get("mdev", {}).get("pid", "?"), per_device))
        track_row[(e["pid"], e["tid"])] = key
    order = sorted(keys)
    index = {key: i for i, key in enumerate(order)}
    fig, ax = plt.subplots(figsize=(12, max(2.5, 0.45 * len(order) + 1.2)))
    for e in xs:
        y = index[track_row[(e["pid"], e["tid"])]]
        ax.broken_barh([(e["ts"] / 1000, max(e["dur"] / 1000, 1e-4))], (y - 0.4, 0.8),
                       facecolors=_colour(e["args"]), edgecolor="black", linewidth=0.3)
    if flows and not modelled:
        starts = {e["id"]: e for e in events if e.get("ph") == "s"}
        for f in (e for e in events if e.get("ph") == "f"):
            s = starts.get(f["id"])
            a, b = s and track_row.get((s["pid"], s["tid"])), track_row.get((f["pid"], f["tid"]))
            if a is not None and b is not None:
                ax.annotate("", xy=(f["ts"] / 1000, index[b]), xytext=(s["ts"] / 1000, index[a]),
                            arrowprops={"arrowstyle": "->", "color": "black", "lw": 0.8})
    labels = [keys[key] for key in order]
    ax.set_yticks(range(len(order)))
    ax.set_yticklabels(labels)
    ax.invert_yaxis()
    if lo is not None or hi is not None:
        ax.set_xlim(left=lo, right=hi)
    ax.set_xlabel("modelled time (ms)" if modelled else "wall time (ms)")
    meta = data.get("mdev", {})
    ax.set_title(f"mdev timeline: board {meta.get('board', '?')} ({meta.get('topology', '?')})"
                 + (", a row per device" if per_device else ""))
    ax.legend(handles=[Patch(color=c, label=k) for k, c in COLOURS.items()], loc="lower center", fontsize=7,
              ncol=len(COLOURS), bbox_to_anchor=(0.5, 1.06), frameon=False)       # above the rows, not on them
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(output, dpi=110)
    plt.close(fig)
    return labels


def window_arg(text: str) -> tuple[float | None, float | None]:
    """``START:END`` in ms, either side may be empty."""
    start, sep, end = text.partition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"{text!r}: give START:END in ms (either may be empty)")
    try:
        return (float(start) if start else None, float(end) if end else None)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: START and END are numbers of ms") from None


def cmd_plot(args: argparse.Namespace) -> int:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("mdev trace plot: needs matplotlib, an optional dependency: pip install 'mdev[plot]' "
              "(or pip install matplotlib); the JSON file also opens in https://ui.perfetto.dev",
              file=sys.stderr)
        return 1
    try:
        data = load(args.file)
    except (OSError, ValueError) as exc:
        print(f"mdev trace plot: {exc}", file=sys.stderr)
        return 2
    plot(data, args.output, args.modelled, args.rows, args.flows, args.window)
    print(f"wrote {args.output}")
    return 0
