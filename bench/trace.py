"""Cost of timeline tracing (MDEV_TRACE) on small tasks.

    untraced     50k ``memset_async`` of 4 bytes + one sync, tracing off (the baseline)
    traced       the same with this process's tasks recorded by the device (trace_start)
    write        collecting those records and writing the Chrome trace JSON, per 1k tasks

Target: tracing keeps at least half the untraced task rate.
"""

from __future__ import annotations

import os
import tempfile
import time

from bench.common import Result, check, dedicated_board, print_table

TASKS = 50_000


def _rate(acl, dev, stream) -> float:
    memset_async = acl.rt.memset_async
    best = 0.0
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(TASKS):
            memset_async(dev, 4, 1, 4, stream)
        check(acl.rt.synchronize_stream(stream), "synchronize_stream")
        best = max(best, TASKS / (time.perf_counter() - t0))
    return best


def run() -> list[Result]:
    import mdev.acl as acl
    from mdev.runtime import trace
    from mdev.runtime.core import RUNTIME as rt

    with dedicated_board("trace", "laptop2", hbm=256 << 20), tempfile.TemporaryDirectory() as tmp:
        check(acl.rt.set_device(0), "set_device")
        stream, ret = acl.rt.create_stream()
        check(ret, "create_stream")
        dev, ret = acl.rt.malloc(4096, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        for _ in range(1000):
            acl.rt.memset_async(dev, 4, 1, 4, stream)
        check(acl.rt.synchronize_stream(stream), "synchronize_stream")
        untraced = _rate(acl, dev, stream)
        saved = os.environ.get("MDEV_TRACE")
        os.environ["MDEV_TRACE"] = os.path.join(tmp, "bench.json")
        try:
            trace.on_attach(rt.board)          # what attaching with MDEV_TRACE set does
            traced = _rate(acl, dev, stream)
            t0 = time.perf_counter()
            trace.on_detach(rt.board)          # collect 150k records and write the JSON
            write_s = time.perf_counter() - t0
            size = os.path.getsize(os.environ["MDEV_TRACE"])
        finally:
            if saved is None:
                os.environ.pop("MDEV_TRACE", None)
            else:
                os.environ["MDEV_TRACE"] = saved
            trace._records.clear()
    return [
        Result("memset_async(4 B) + sync, traced", traced, "tasks/s", untraced, "tasks/s", "untraced",
               traced / untraced, ("ratio", ">=", 0.5)),
        Result("collect + write the trace, per 1k tasks", write_s / (3 * TASKS) * 1000 * 1e3, "ms",
               note=f"{3 * TASKS} tasks, {size / 2**20:.0f} MiB of JSON"),
    ]


def main() -> list[Result]:
    results = run()
    print_table("Timeline tracing (MDEV_TRACE)", results)
    return results


if __name__ == "__main__":
    main()
