"""Shared helpers of the benchmarks: a dedicated board per benchmark, timing, one table.

    with dedicated_board("copies", "laptop2", hbm=2 << 30) as name:
        ...                               # mdev.acl is attached to board ``name``
    print_table("Large copies", results)

Every benchmark starts its own board under a unique name (``bench-<pid>-<tag>``), so it
never disturbs the user's ``default`` board or another benchmark running at the same
time, and stops it at the end: no process and no /dev/shm segment is left behind.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

MiB, GiB = 1 << 20, 1 << 30


def board_name(tag: str) -> str:
    return f"bench-{os.getpid()}-{tag}"


@contextmanager
def attached(name: str):
    """Point this process's mdev.acl at board ``name`` (attaching afresh); the environment
    is restored and the process detached afterwards."""
    from mdev.runtime.devices.lifecycle import detach

    saved = {k: os.environ.get(k) for k in ("MDEV_BOARD", "MDEV_AUTOSTART")}
    os.environ["MDEV_BOARD"], os.environ["MDEV_AUTOSTART"] = name, "0"
    detach()
    try:
        yield name
    finally:
        detach()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextmanager
def dedicated_board(tag: str, topology: str = "laptop2", hbm: int | None = None,
                    devices: int | None = None):
    """Start board ``bench-<pid>-<tag>``, attach this process's mdev.acl to it, stop it after."""
    from mdev.board import launcher

    name = board_name(tag)
    launcher.start(name, launcher.resolve_topology(topology, devices=devices, hbm=hbm))
    try:
        with attached(name):
            yield name
    finally:
        stop_board(name)


@contextmanager
def device_and_stream(tag: str, topology: str, hbm: int):
    """On a dedicated board (see dedicated_board): device 0 set, a stream and a 4 KiB device
    buffer.  Yields (stream, buffer, sync, empty): sync synchronises the stream, empty is a
    kernel that does nothing.  The caller frees the buffer and the stream."""
    import mdev.acl as acl
    from mdev.kernel import kernel

    @kernel
    def empty(ctx):
        pass

    with dedicated_board(tag, topology, hbm=hbm):
        check(acl.rt.set_device(0), "set_device")
        stream, ret = acl.rt.create_stream()
        check(ret, "create_stream")
        dev, ret = acl.rt.malloc(4096, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        yield stream, dev, lambda: check(acl.rt.synchronize_stream(stream), "synchronize_stream"), empty


def stop_board(name: str, timeout: float = 15.0) -> None:
    """Stop board ``name`` and wait until its supervisor has exited and its segments are gone."""
    import psutil

    from mdev.board import launcher
    from mdev.naming import BoardPaths

    try:
        pids = [launcher.status(name)["pid"]]
    except launcher.BoardError:
        pids = []
    launcher.stop(name)
    for pid in pids:
        try:
            psutil.Process(pid).wait(timeout)
        except psutil.NoSuchProcess:
            pass
    left = BoardPaths(name).segments()
    if left:
        raise RuntimeError(f"board {name} left segments behind: {left}")


def check(ret: int, what: str) -> None:
    if ret != 0:
        import mdev.acl as acl
        raise RuntimeError(f"{what} failed: ret={ret} {acl.get_recent_err_msg()}")


def best_of(fn: Callable[[], None], runs: int, warmup: int = 1) -> float:
    """Smallest wall time of ``runs`` calls of ``fn`` (seconds), after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def best_of_interleaved(fn: Callable[[], None], baseline: Callable[[], None], runs: int,
                        warmup: int = 1) -> tuple[float, float]:
    """Best wall times (seconds) of ``fn`` and of ``baseline``, their runs alternating."""
    for _ in range(warmup):
        baseline()
        fn()
    best_fn = best_base = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        baseline()
        t1 = time.perf_counter()
        fn()
        t2 = time.perf_counter()
        best_base, best_fn = min(best_base, t1 - t0), min(best_fn, t2 - t1)
    return best_fn, best_base


def per_call(fn: Callable[[], None], calls: int, repeats: int = 5) -> float:
    """Best over ``repeats`` of the mean time of one call in a loop of ``calls`` (seconds)."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best


def latency(fn: Callable[[], None], samples: int, warmup: int = 200) -> float:
    """Median wall time of one call of ``fn`` over ``samples`` individually timed calls (seconds).

    The median keeps round trips comparable on a small, shared machine, where a few calls
    lose the CPU to another process and would dominate a mean.
    """
    for _ in range(warmup):
        fn()
    times = []
    clock = time.perf_counter
    for _ in range(samples):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    times.sort()
    return times[len(times) // 2]


# ---------------------------------------------------------------------------- results
_OPS = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b, "<": lambda a, b: a < b}


@dataclass
class Result:
    """One figure.  ``target`` is e.g. ("ratio", ">=", 0.7) or ("value", "<", 2.0)."""
    figure: str
    value: float
    unit: str
    baseline: float | None = None
    baseline_unit: str = ""
    baseline_name: str = ""
    ratio: float | None = None
    target: tuple | None = None
    note: str = ""

    @property
    def passed(self) -> bool | None:
        if self.target is None:
            return None
        field, op, threshold = self.target
        return _OPS[op](getattr(self, field), threshold)

    def target_text(self) -> str:
        if self.target is None:
            return "-"
        field, op, threshold = self.target
        return f"{'ratio' if field == 'ratio' else ''} {op} {_num(threshold)}{'' if field == 'ratio' else ' ' + self.unit}".strip()


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.3g}" if abs(x) < 1 else f"{x:.2f}"


def print_table(title: str, results: list[Result]) -> None:
    rows = [("figure", "value", "unit", "baseline (same run)", "ratio", "target", "result")]
    for r in results:
        base = "-" if r.baseline is None else f"{_num(r.baseline)} {r.baseline_unit}".strip()
        if r.baseline_name:
            base += f" ({r.baseline_name})"
        verdict = {None: "-", True: "PASS", False: "FAIL"}[r.passed]
        rows.append((r.figure, _num(r.value), r.unit, base,
                     "-" if r.ratio is None else f"{r.ratio:.2f}", r.target_text(), verdict))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    print(f"\n== {title}")
    for n, row in enumerate(rows):
        print("  ".join(cell.ljust(w) if i in (0, 2, 3, 5) else cell.rjust(w)
                        for i, (cell, w) in enumerate(zip(row, widths))).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))
    for r in results:
        if r.note:
            print(f"  * {r.figure}: {r.note}")
