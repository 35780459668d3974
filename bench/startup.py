"""Board start-up time and the memory a device process costs.

    cold start     a fresh process runs ``acl.rt.set_device(0)`` with no board running: the
                   8-device board (hccs8 preset, default HBM) starts on demand first.  The
                   time from the call to its return is the figure (median of 3 boards);
                   the baseline is the same call in a fresh process when the board is
                   already running.  Target: < 2 s.
    in-process     (extra) ``launcher.start`` of the board, then attach + ``set_device(0)``
    footprint      (extra) RSS / USS of each idle device process (psutil), beside the
                   supervisor process they are forked from
    board size     start (every device up: ``eager``), stop, and PSS / USS per idle device for
                   boards of 8 (hccs8), 64, 384 and 1024 devices (a CloudMatrix384-class
                   supernode of 16-device nodes, 64 MiB HBM each), beside a bare
                   ``python -c pass`` fork+exec and the 8-device board of the same run.
                   Targets: a device's PSS at 1024 devices within 1.5x of its PSS at 8
                   (its fixed cost does not grow with the board), 1024 devices up in < 60 s.
                   Then the cloudmatrix384 preset as users start it (a node's devices start
                   at its first attach): board start, and attaching to its last node.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

from bench.common import MiB, Result, attached, board_name, check, dedicated_board, print_table, stop_board

TOPOLOGY = "hccs8"
ROUNDS = 3

_PROBE = r"""
import json, time
t0 = time.perf_counter()
import mdev.acl as acl
t1 = time.perf_counter()
ret = acl.rt.set_device(0)
t2 = time.perf_counter()
n, _ = acl.rt.get_device_count()
print(json.dumps({"import": t1 - t0, "set_device": t2 - t1, "ret": ret, "devices": n}))
"""


def _probe(name: str) -> dict:
    env = dict(os.environ, MDEV_BOARD=name, MDEV_TOPOLOGY=TOPOLOGY, MDEV_AUTOSTART="1",
               MDEV_IDLE_TIMEOUT="60")
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True,
                         timeout=120, check=True)
    wall = time.perf_counter() - t0
    info = json.loads(out.stdout.strip().splitlines()[-1])
    if info["ret"] != 0 or info["devices"] != 8:
        raise RuntimeError(f"probe failed: {info} {out.stderr}")
    info["wall"] = wall
    return info


def cold_start() -> list[Result]:
    cold, warm = [], []
    for i in range(ROUNDS):
        name = board_name(f"start{i}")
        try:
            cold.append(_probe(name))       # starts the board on demand
            warm.append(_probe(name))       # the board is up now
        finally:
            stop_board(name)
    c = statistics.median(r["set_device"] for r in cold)
    w = statistics.median(r["set_device"] for r in warm)
    wall = statistics.median(r["wall"] for r in cold)
    imp = statistics.median(r["import"] for r in cold)
    runs = ", ".join(f"{r['set_device']:.2f}" for r in cold)
    return [Result("cold start: 8-device board + first set_device(0)", c, "s", w, "s",
                   "set_device(0), board running", c / w, ("value", "<", 2.0),
                   note=f"runs {runs} s; whole fresh process (interpreter, import mdev.acl "
                        f"{imp:.2f} s, start, exit) {wall:.2f} s")]


def in_process() -> list[Result]:
    import mdev.acl as acl
    from mdev.board import launcher

    starts, sets = [], []
    for i in range(ROUNDS):
        name = board_name(f"inproc{i}")
        t0 = time.perf_counter()
        launcher.start(name, launcher.resolve_topology(TOPOLOGY))
        t1 = time.perf_counter()
        try:
            with attached(name):
                check(acl.rt.set_device(0), "set_device")
                t2 = time.perf_counter()
            starts.append(t1 - t0)
            sets.append(t2 - t1)
        finally:
            stop_board(name)
    s, d = statistics.median(starts), statistics.median(sets)
    return [Result("launcher.start(hccs8)", s, "s"),
            Result("attach + first set_device(0)", d * 1e3, "ms")]


def footprint() -> list[Result]:
    import psutil

    import mdev.acl as acl
    from mdev.board import launcher

    with dedicated_board("mem", TOPOLOGY) as name:
        check(acl.rt.set_device(0), "set_device")
        time.sleep(0.5)
        status = launcher.status(name)
        sup = psutil.Process(status["pid"]).memory_full_info()
        rss, uss, pss = [], [], []
        for dev in status["devices"]:
            info = psutil.Process(dev["pid"]).memory_full_info()
            rss.append(info.rss)
            uss.append(info.uss)
            pss.append(info.pss)
        check(acl.rt.reset_device(0), "reset_device")
    n = len(rss)
    return [
        Result("idle device process RSS (mean of %d)" % n, statistics.mean(rss) / MiB, "MiB",
               sup.rss / MiB, "MiB", "supervisor RSS", statistics.mean(rss) / sup.rss,
               note=f"max {max(rss) / MiB:.1f} MiB; devices are forked from the supervisor, so most "
                    f"of the RSS is shared copy-on-write"),
        Result("idle device process USS (unique)", statistics.mean(uss) / MiB, "MiB",
               sup.uss / MiB, "MiB", "supervisor USS", statistics.mean(uss) / sup.uss),
        Result("idle device process PSS", statistics.mean(pss) / MiB, "MiB"),
        Result("whole board (supervisor + %d devices) PSS" % n, (sum(pss) + sup.pss) / MiB, "MiB"),
    ]


SIZES = (8, 64, 384, 1024)
SCALE_HBM = 64 * MiB


def _sized(devices: int):
    """A board of ``devices`` devices: hccs8 for 8, else a supernode of 16-device nodes."""
    from mdev import topology

    from mdev.board import launcher
    if devices <= 8:
        return launcher.resolve_topology("hccs8", devices=devices, hbm=SCALE_HBM)
    layout = topology.resized(topology.resolve("cloudmatrix384"), hbm_bytes=SCALE_HBM).to_dict()
    layout["cluster"]["nodes"] = devices // layout["devices"]["count"]
    return topology.from_dict(layout, f"supernode-{devices}")


def _bare_process() -> float:
    """Median wall time of a fork+exec of ``python -c pass``: what any process start costs."""
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _measure(devices: int) -> dict:
    import psutil

    from mdev.board import launcher
    topo = _sized(devices)
    name = board_name(f"size{devices}")
    t0 = time.perf_counter()
    launcher.start(name, topo, eager=True)
    t1 = time.perf_counter()
    try:
        status = launcher.status(name)
        pss, uss = [], []
        for dev in status["devices"]:
            info = psutil.Process(dev["pid"]).memory_full_info()
            pss.append(info.pss)
            uss.append(info.uss)
        sup = psutil.Process(status["pid"]).memory_full_info()
    finally:
        t2 = time.perf_counter()
        stop_board(name)
        t3 = time.perf_counter()
    return {"start": t1 - t0, "stop": t3 - t2, "pss": statistics.mean(pss), "uss": statistics.mean(uss),
            "total": sum(pss) + sup.pss, "nodes": topo.node_count}


def board_size() -> list[Result]:
    bare = _bare_process()
    runs = {n: _measure(n) for n in SIZES}       # one board at a time: this machine is small
    base = runs[SIZES[0]]
    out = []
    for n, r in runs.items():
        target = ("value", "<", 60.0) if n == SIZES[-1] else None
        out.append(Result(f"start {n} devices ({r['nodes']} node{'s' * (r['nodes'] > 1)}, all up)",
                          r["start"], "s", bare * 1e3, "ms", "python -c pass", r["start"] / bare, target,
                          note=f"stop {r['stop']:.2f} s; {r['start'] / n * 1e3:.1f} ms per device"))
    for n, r in runs.items():
        target = ("ratio", "<=", 1.5) if n == SIZES[-1] else None
        out.append(Result(f"device PSS at {n} devices", r["pss"] / MiB, "MiB", base["pss"] / MiB, "MiB",
                          f"at {SIZES[0]}", r["pss"] / base["pss"], target,
                          note=f"USS {r['uss'] / MiB:.2f} MiB; board (supervisor + devices) PSS "
                               f"{r['total'] / MiB:.0f} MiB"))
    return out + _preset_as_started()


def _preset_as_started() -> list[Result]:
    """cloudmatrix384 as `mdev board start` runs it: nodes start at their first attach."""
    from mdev.board import launcher
    name = board_name("cm384")
    t0 = time.perf_counter()
    launcher.start(name, launcher.resolve_topology("cloudmatrix384", hbm=SCALE_HBM))
    t1 = time.perf_counter()
    try:
        env = dict(os.environ, MDEV_BOARD=name, MDEV_NODE="47", MDEV_AUTOSTART="0")
        t2 = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", "import mdev.acl as acl; print(acl.rt.get_device_count()[0])"],
                             env=env, capture_output=True, text=True, timeout=120, check=True)
        t3 = time.perf_counter()
        if out.stdout.strip() != "16":
            raise RuntimeError(f"node 47 shows {out.stdout!r} devices")
    finally:
        stop_board(name)
    bare = _bare_process()
    return [Result("cloudmatrix384 start (768 devices, nodes on demand)", t1 - t0, "s"),
            Result("first process on its node 47 (starts 16 devices)", t3 - t2, "s", bare, "s",
                   "python -c pass", (t3 - t2) / bare)]


def main() -> list[Result]:
    results = cold_start() + in_process() + footprint() + board_size()
    print_table("Board start-up and footprint (%s)" % TOPOLOGY, results)
    return results


if __name__ == "__main__":
    main()
