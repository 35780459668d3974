"""Captured graphs: host cost of a replay against issuing the same tasks eagerly.

    eager          1,000 ``memset_async`` of 4 bytes on one stream: host time of the calls,
                   per task (the final ``synchronize_stream`` is not host submission work)
    replay         the same 1,000 tasks captured once (``ri_capture_begin`` .. ``_end``) and
                   replayed with one ``ri_execute_async``: host time of that call, per task
    (extra)        end-to-end per task of both (submission + the sync that waits for the
                   device), and the one-off capture cost per task

Both are timed in the same run, alternating, best of several rounds.
Target: the replay costs the host at least 10x less per task.
"""

from __future__ import annotations

import time

from bench.common import Result, check, dedicated_board, print_table

TASKS = 1_000
ROUNDS = 7


def run() -> list[Result]:
    import mdev.acl as acl

    results: list[Result] = []
    with dedicated_board("graph", "laptop2", hbm=256 << 20):
        check(acl.rt.set_device(0), "set_device")
        stream, ret = acl.rt.create_stream()
        check(ret, "create_stream")
        buf, ret = acl.rt.malloc(4096, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        memset_async, sync = acl.rt.memset_async, acl.rt.synchronize_stream
        execute_async = acl.mdl.ri_execute_async

        def issue():
            for i in range(TASKS):
                memset_async(buf, 4, i & 0xFF, 4, stream)

        issue()                                           # warm-up: worker thread, code paths
        check(sync(stream), "synchronize_stream")

        t0 = time.perf_counter()
        check(acl.mdl.ri_capture_begin(stream, acl.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), "ri_capture_begin")
        issue()
        model, ret = acl.mdl.ri_capture_end(stream)
        check(ret, "ri_capture_end")
        capture_s = time.perf_counter() - t0
        check(execute_async(model, stream), "ri_execute_async")   # warm-up replay
        check(sync(stream), "synchronize_stream")

        best = {"eager": float("inf"), "replay": float("inf"), "eager_total": float("inf"),
                "replay_total": float("inf")}
        for _ in range(ROUNDS):
            t0 = time.perf_counter()
            issue()
            t1 = time.perf_counter()
            check(sync(stream), "synchronize_stream")
            t2 = time.perf_counter()
            check(execute_async(model, stream), "ri_execute_async")
            t3 = time.perf_counter()
            check(sync(stream), "synchronize_stream")
            t4 = time.perf_counter()
            for key, value in (("eager", t1 - t0), ("eager_total", t2 - t0),
                               ("replay", t3 - t2), ("replay_total", t4 - t2)):
                best[key] = min(best[key], value)

        per = {k: v / TASKS * 1e6 for k, v in best.items()}      # us per task
        results.append(Result("host time per task: replay vs eager", per["replay"], "us",
                              per["eager"], "us", "eager memset_async", per["eager"] / per["replay"],
                              ("ratio", ">=", 10.0),
                              note=f"ratio = eager / replay; {TASKS} tasks, best of {ROUNDS} alternating rounds; "
                                   f"one ri_execute_async took {best['replay'] * 1e6:.1f} us"))
        results.append(Result("  end to end per task (submit + sync)", per["replay_total"], "us",
                              per["eager_total"], "us", "eager + sync", per["eager_total"] / per["replay_total"],
                              note="the device still runs every task of the replay; this includes that"))
        results.append(Result("  capture, once, per task", capture_s / TASKS * 1e6, "us",
                              note="recording the tasks and storing the graph on the device"))

        check(acl.mdl.ri_destroy(model), "ri_destroy")
        check(acl.rt.free(buf), "free")
        check(acl.rt.destroy_stream(stream), "destroy_stream")
        check(acl.rt.reset_device(0), "reset_device")
    return results


def main() -> list[Result]:
    results = run()
    print_table("Captured graphs: replay vs eager submission (1,000 small tasks)", results)
    return results


if __name__ == "__main__":
    main()
