"""Cost of the sanitizer (MDEV_SANITIZE) on small tasks.

    plain            50k ``memset_async`` of 4 bytes + one sync, sanitizer off (the baseline)
    memcheck+racecheck   the same with those two checks on (every task through the
                     happens-before model and the race history)
    all checks       the same with initcheck and synccheck on too
    two streams      memset on one stream, record/wait an event, copy on another: the
                     checked rate against the plain rate of the same program

Each checked rate is timed right after a plain run of the same loop.
"""

from __future__ import annotations

from bench.common import Result, best_of, check, dedicated_board, print_table

TASKS = 50_000
PAIRS = 5_000


def _checked(checks: str, fn) -> tuple[float, float]:
    """(plain seconds, checked seconds) of ``fn``, timed back to back."""
    from mdev import sanitizer
    plain = best_of(fn, 3, warmup=0)
    sanitizer.enable(checks)
    try:
        checked = best_of(fn, 3, warmup=0)
    finally:
        reports = sanitizer.disable()
    assert not reports, f"the benchmark program drew sanitizer reports: {reports[:2]}"
    return plain, checked


def run() -> list[Result]:
    import mdev.acl as acl

    with dedicated_board("sanitize", "laptop2", hbm=256 << 20):
        check(acl.rt.set_device(0), "set_device")
        s1, ret = acl.rt.create_stream()
        check(ret, "create_stream")
        s2, ret = acl.rt.create_stream()
        check(ret, "create_stream")
        a, ret = acl.rt.malloc(4096, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        b, ret = acl.rt.malloc(4096, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        event, ret = acl.rt.create_event()
        check(ret, "create_event")
        memset_async, memcpy_async = acl.rt.memset_async, acl.rt.memcpy_async
        record, wait, sync = acl.rt.record_event, acl.rt.stream_wait_event, acl.rt.synchronize_stream

        def small_tasks() -> None:
            for _ in range(TASKS):
                memset_async(a, 4, 1, 4, s1)
            check(sync(s1), "synchronize_stream")

        def two_streams() -> None:
            for _ in range(PAIRS):
                memset_async(a, 4, 1, 4, s1)
                record(event, s1)
                wait(s2, event)
                memcpy_async(b, 4, a, 4, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, s2)
                record(event, s2)
                wait(s1, event)
            check(acl.rt.synchronize_device(), "synchronize_device")

        small_tasks()                                    # warm-up: stream workers start
        two_streams()
        plain, mr = _checked("memcheck,racecheck", small_tasks)
        plain_all, everything = _checked("all", small_tasks)
        plain_pairs, pairs = _checked("memcheck,racecheck", two_streams)
    rate = lambda s: TASKS / s      # noqa: E731
    return [
        Result("memset_async(4 B) + sync, memcheck+racecheck", rate(mr), "tasks/s", rate(plain), "tasks/s",
               "plain", plain / mr, ("ratio", ">=", 0.2)),
        Result("memset_async(4 B) + sync, all four checks", rate(everything), "tasks/s", rate(plain_all),
               "tasks/s", "plain", plain_all / everything),
        Result("2-stream event ping-pong, memcheck+racecheck", 6 * PAIRS / pairs, "tasks/s",
               6 * PAIRS / plain_pairs, "tasks/s", "plain", plain_pairs / pairs,
               note="memset, record, wait, copy, record, wait per round"),
    ]


def main() -> list[Result]:
    results = run()
    print_table("Sanitizer (MDEV_SANITIZE)", results)
    return results


if __name__ == "__main__":
    main()
