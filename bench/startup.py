"""Board start-up time and the memory a device process costs.

    cold start     a fresh process runs ``acl.rt.set_device(0)`` with no board running: the
                   8-device board (hccs8 preset, default HBM) starts on demand first.  The
                   time from the call to its return is the figure (median of 3 boards);
                   the baseline is the same call in a fresh process when the board is
                   already running.  Target: < 2 s.
    in-process     (extra) ``launcher.start`` of the board, then attach + ``set_device(0)``
    footprint      (extra) RSS / USS of each idle device process (psutil), beside the
                   supervisor process they are forked from
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


def main() -> list[Result]:
    results = cold_start() + in_process() + footprint()
    print_table("Board start-up and footprint (%s)" % TOPOLOGY, results)
    return results


if __name__ == "__main__":
    main()
