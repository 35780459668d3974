"""The C layer's cost: the same small-task loops from C (libascendcl.so) and from Python (mdev.acl).

    round trip    2,000 x (memset_async of 4 bytes + synchronize_stream) on one stream
    submission    20,000 x memset_async of 4 bytes, then one synchronize_stream (kernel-free
                  task submission: what a launch-bound C program spends per task)
    trivial call  2,000 x aclrtGetDevice / acl.rt.get_device: the layer's own cost, with no
                  device work behind it

The C side is bench/c/small_tasks.c, compiled against a fresh ``mdev cann-home`` tree and run
as its own process on the same board, once through the host agent (the default) and once
through the embedded interpreter (MDEV_CAPI=embedded, the earlier design); its passes
alternate with the Python passes of this process, and each figure is the best of three.
Every loop checks every return code.  Targets (the agent): a call returning a value costs
at most 10 us more than from Python, a submission reaches 0.8x Python's rate, a round trip
stays within 1.5x Python's.  ``native`` is the floor of a native host core (design 2): the
same aclrtGetDevice answered from a thread-local in C (bench/c/small_tasks.c, no runtime).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import Result, check, dedicated_board, print_table

ROUNDS, TASKS, PASSES = 2_000, 20_000, 3
SIDES = ("python", "agent", "embedded")
SOURCE = Path(__file__).resolve().parent / "c" / "small_tasks.c"


def _compile(work: Path) -> Path:
    from mdev.capi.cann_home import make

    home = make(work / "cann", log=lambda line: None)
    binary = work / "small_tasks"
    subprocess.run(["gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{home / 'include'}", str(SOURCE),
                    "-o", str(binary), f"-L{home / 'lib64'}", "-lascendcl", f"-Wl,-rpath,{home / 'lib64'}"],
                   check=True)
    return binary


def _c_pass(binary: Path, mode: str) -> dict[str, float]:
    out = subprocess.run([str(binary), str(ROUNDS), str(TASKS), "1"], capture_output=True, text=True,
                         check=True, env=dict(os.environ, MDEV_CAPI=mode)).stdout
    return {name: float(value) for name, value in (line.split() for line in out.splitlines())}


def _python_pass(acl, stream, dev) -> dict[str, float]:
    memset_async, sync, get_device = acl.rt.memset_async, acl.rt.synchronize_stream, acl.rt.get_device
    clock = time.perf_counter
    t0 = clock()
    for i in range(ROUNDS):
        if memset_async(dev, 4, i & 0xFF, 4, stream) or sync(stream):
            check(1, "memset_async + synchronize_stream")
    t1 = clock()
    for i in range(TASKS):
        if memset_async(dev, 4, i & 0xFF, 4, stream):
            check(1, "memset_async")
    check(sync(stream), "synchronize_stream")
    t2 = clock()
    for _ in range(ROUNDS):
        if get_device()[1]:
            check(1, "get_device")
    t3 = clock()
    return {"round_trip": (t1 - t0) / ROUNDS, "submission": (t2 - t1) / TASKS, "trivial": (t3 - t2) / ROUNDS}


def run() -> list[Result]:
    import mdev.acl as acl

    with tempfile.TemporaryDirectory(prefix="mdev-bench-capi-") as work, \
            dedicated_board("capi", "laptop2", hbm=256 << 20):
        binary = _compile(Path(work))
        check(acl.rt.set_device(0), "set_device")
        stream, ret = acl.rt.create_stream()
        check(ret, "create_stream")
        dev, ret = acl.rt.malloc(4096, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        _python_pass(acl, stream, dev)                     # warm-up of every side
        best: dict[str, dict[str, float]] = {side: {} for side in SIDES}
        for _ in range(PASSES):
            for side in SIDES:
                figures = _python_pass(acl, stream, dev) if side == "python" else _c_pass(binary, side)
                for name, value in figures.items():
                    best[side][name] = min(best[side].get(name, value), value)
        check(acl.rt.free(dev), "free")
        check(acl.rt.destroy_stream(stream), "destroy_stream")
        check(acl.rt.reset_device(0), "reset_device")

    us = 1e6
    py = {key: value * us for key, value in best["python"].items()}
    results = []
    for side, label in (("agent", "host agent"), ("embedded", "embedded interpreter")):
        c = {key: value * us for key, value in best[side].items()}
        targeted = side == "agent"
        results += [
            Result(f"aclrtGetDevice from C, {label}: cost above Python's", c["trivial"] - py["trivial"], "us",
                   py["trivial"], "us/call", "acl.rt.get_device in Python", c["trivial"] / py["trivial"],
                   ("value", "<=", 10.0) if targeted else None, note=f"{c['trivial']:.2f} us per C call"),
            Result(f"memset_async(4 B) submissions from C, {label}", 1e3 / c["submission"], "tasks/ms",
                   1e3 / py["submission"], "tasks/ms", "the same loop in Python", py["submission"] / c["submission"],
                   ("ratio", ">=", 0.8) if targeted else None),
            Result(f"memset_async(4 B) + synchronize_stream from C, {label}", c["round_trip"], "us/call",
                   py["round_trip"], "us/call", "the same loop in Python", c["round_trip"] / py["round_trip"],
                   ("ratio", "<=", 1.5) if targeted else None),
        ]
    native = best["agent"]["native"] * us
    results.append(Result("aclrtGetDevice answered natively in C (design 2's floor)", native, "us/call",
                          py["trivial"], "us/call", "acl.rt.get_device in Python", native / py["trivial"], None))
    return results


def main() -> list[Result]:
    results = run()
    print_table("C ABI: per-call cost from C vs Python (same run)", results)
    return results


if __name__ == "__main__":
    main()
