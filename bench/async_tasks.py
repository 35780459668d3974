"""Cross-stream synchronisation: event chains, event queries, the cost of a waiting stream.

    small tasks     (baseline, same run) 100k ``memset_async`` of 4 bytes on one stream + one
                    sync: the foundation's small-task rate
    event chain     2 streams in lock step, 10k rounds of
                        s1: record(e1)   s2: wait(e1), record(e2)   s1: wait(e2)
                    (4 tasks a round, every wait depending on the other stream's latest
                    record); tasks / (submissions + final sync)
    queued chain    the same chain queued while stream 1 is held, then released: only the
                    device's execution is timed, every wait blocks for the other stream
    event fan-out   (extra) s1 records, s2 waits, no way back: s1 never waits, so the
                    streams overlap; 20k record + 20k wait tasks
    query cost      ``query_event_status`` of a completed event and of a pending one: median
                    of 100k individually timed calls, beside a bare Pipe round trip (what
                    asking the device process would cost at the very least)
    waiting stream  CPU time of the device process while one of its streams waits 2 s on
                    an event, as a share of one core

Targets: query_event_status < 5 us (a read of shared state); a waiting stream < 5% of a core.
"""

from __future__ import annotations

import time

from bench.common import Result, check, dedicated_board, latency, print_table
from bench.tasks import pipe_round_trip

SMALL_TASKS = 100_000
CHAIN_ROUNDS = 10_000
FANOUT = 20_000
QUERIES = 100_000
SYNC, TIME_LINE = 0x1, 0x8


def _small_task_rate(acl, stream, dev) -> float:
    memset_async, sync = acl.rt.memset_async, acl.rt.synchronize_stream
    for _ in range(1000):
        memset_async(dev, 4, 1, 4, stream)
    check(sync(stream), "synchronize_stream")
    best = 0.0
    for _ in range(3):
        t0 = time.perf_counter()
        for i in range(SMALL_TASKS):
            memset_async(dev, 4, i & 0xFF, 4, stream)
        check(sync(stream), "synchronize_stream")
        best = max(best, SMALL_TASKS / (time.perf_counter() - t0))
    return best


def _chain_rate(acl, s1, s2, e1, e2, rounds: int) -> float:
    record, wait, sync = acl.rt.record_event, acl.rt.stream_wait_event, acl.rt.synchronize_stream
    t0 = time.perf_counter()
    for _ in range(rounds):
        record(e1, s1)
        wait(s2, e1)
        record(e2, s2)
        wait(s1, e2)
    check(sync(s1), "synchronize_stream")
    check(sync(s2), "synchronize_stream")
    return 4 * rounds / (time.perf_counter() - t0)


def _queued_chain_rate(acl, s1, s2, e1, e2, hold: int, release, rounds: int) -> float:
    """The same chain queued while s1 is held, then released: only the device's execution is
    timed, and every wait really blocks until the other stream's worker has recorded."""
    record, wait, sync = acl.rt.record_event, acl.rt.stream_wait_event, acl.rt.synchronize_stream
    check(acl.rt.memset(hold, 8, 0, 8), "memset")
    check(acl.rt.value_wait(hold, 1, acl.ACL_STREAM_WAIT_VALUE_EQ, s1), "value_wait")
    for _ in range(rounds):
        record(e1, s1)
        wait(s2, e1)
        record(e2, s2)
        wait(s1, e2)
    t0 = time.perf_counter()
    check(acl.rt.value_write(hold, 1, 0, release), "value_write")
    check(sync(s1), "synchronize_stream")
    check(sync(s2), "synchronize_stream")
    return 4 * rounds / (time.perf_counter() - t0)


def _fanout_rate(acl, s1, s2, e1, count: int) -> float:
    record, wait, sync = acl.rt.record_event, acl.rt.stream_wait_event, acl.rt.synchronize_stream
    t0 = time.perf_counter()
    for _ in range(count):
        record(e1, s1)
        wait(s2, e1)
    check(sync(s1), "synchronize_stream")
    check(sync(s2), "synchronize_stream")
    return 2 * count / (time.perf_counter() - t0)


def _waiting_cpu_share(acl, board: str) -> tuple[float, float]:
    """(share of a core used by the device process, seconds waited) while a stream waits on an
    event that another stream records after a 2 s host func."""
    import psutil

    from mdev.board import launcher

    producer, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    waiter, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    event, ret = acl.rt.create_event_ex_with_flag(SYNC)
    check(ret, "create_event_ex_with_flag")
    proc = psutil.Process(launcher.status(board)["devices"][0]["pid"])
    check(acl.rt.launch_host_func(producer, time.sleep, 2.0), "launch_host_func")
    check(acl.rt.record_event(event, producer), "record_event")
    check(acl.rt.stream_wait_event(waiter, event), "stream_wait_event")
    time.sleep(0.05)
    c0, t0 = proc.cpu_times(), time.monotonic()
    check(acl.rt.synchronize_stream(waiter), "synchronize_stream")
    c1, t1 = proc.cpu_times(), time.monotonic()
    for s in (producer, waiter):
        check(acl.rt.destroy_stream(s), "destroy_stream")
    check(acl.rt.destroy_event(event), "destroy_event")
    used = (c1.user + c1.system) - (c0.user + c0.system)
    return used / (t1 - t0), t1 - t0


def run() -> list[Result]:
    import mdev.acl as acl

    results: list[Result] = []
    bare = pipe_round_trip(raw=True)
    with dedicated_board("async", "laptop2", hbm=256 << 20) as board:
        check(acl.rt.set_device(0), "set_device")
        s1, ret = acl.rt.create_stream()
        check(ret, "create_stream")
        s2, ret = acl.rt.create_stream()
        check(ret, "create_stream")
        dev, ret = acl.rt.malloc(4096, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        e1, ret = acl.rt.create_event_ex_with_flag(SYNC)
        check(ret, "create_event_ex_with_flag")
        e2, ret = acl.rt.create_event_ex_with_flag(SYNC)
        check(ret, "create_event_ex_with_flag")

        small = _small_task_rate(acl, s1, dev)
        _chain_rate(acl, s1, s2, e1, e2, 500)                       # warm-up
        chain = max(_chain_rate(acl, s1, s2, e1, e2, CHAIN_ROUNDS) for _ in range(3))
        fanout = max(_fanout_rate(acl, s1, s2, e1, FANOUT) for _ in range(3))
        s3, ret = acl.rt.create_stream()
        check(ret, "create_stream")
        hold, ret = acl.rt.malloc(8, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        queued = max(_queued_chain_rate(acl, s1, s2, e1, e2, hold, s3, CHAIN_ROUNDS) for _ in range(3))
        results.append(Result("100k memset_async(4 B) + 1 sync (baseline)", small, "tasks/s"))
        results.append(Result("event chain: record + wait + record + wait, 2 streams", chain, "tasks/s",
                              small, "tasks/s", "small tasks", chain / small,
                              note=f"{CHAIN_ROUNDS:,} rounds of 4 tasks submitted and run, each wait on "
                                   f"the other stream's latest record; submission-bound: {chain / 4:,.0f} "
                                   f"rounds/s"))
        results.append(Result("event chain, pre-queued, device execution only", queued, "tasks/s",
                              small, "tasks/s", "small tasks", queued / small,
                              note=f"the chain queued while stream 1 is held, then released: every wait "
                                   f"blocks until the other stream's worker records, {queued / 4:,.0f} "
                                   f"hand-overs each way per second"))
        results.append(Result("event fan-out: s1 record, s2 wait", fanout, "tasks/s",
                              small, "tasks/s", "small tasks", fanout / small))

        check(acl.rt.synchronize_stream(s1), "synchronize_stream")
        query = acl.rt.query_event_status
        done = latency(lambda: query(e1), QUERIES, warmup=1000)
        results.append(Result("query_event_status, completed event (median)", done * 1e6, "us",
                              bare * 1e6, "us", "Pipe send_bytes/recv_bytes", done / bare,
                              ("value", "<", 5.0)))
        check(acl.rt.value_wait(dev, 0xAB, acl.ACL_STREAM_WAIT_VALUE_EQ, s1), "value_wait")   # holds s1
        check(acl.rt.record_event(e1, s1), "record_event")
        status, ret = query(e1)
        check(ret, "query_event_status")
        assert status == acl.ACL_EVENT_RECORDED_STATUS_NOT_READY
        pending = latency(lambda: query(e1), QUERIES, warmup=1000)
        results.append(Result("query_event_status, pending event (median)", pending * 1e6, "us",
                              bare * 1e6, "us", "Pipe send_bytes/recv_bytes", pending / bare,
                              ("value", "<", 5.0)))
        check(acl.rt.value_write(dev, 0xAB, 0, s2), "value_write")      # releases s1
        check(acl.rt.synchronize_stream(s1), "synchronize_stream")

        share, waited = _waiting_cpu_share(acl, board)
        results.append(Result("device CPU while a stream waits on an event", share * 100, "% core",
                              target=("value", "<", 5.0),
                              note=f"device process CPU time over a {waited:.1f} s wait, per wall second"))

        for event in (e1, e2):
            check(acl.rt.destroy_event(event), "destroy_event")
        check(acl.rt.free(dev), "free")
        check(acl.rt.free(hold), "free")
        for s in (s1, s2, s3):
            check(acl.rt.destroy_stream(s), "destroy_stream")
        check(acl.rt.reset_device(0), "reset_device")
    return results


def main() -> list[Result]:
    results = run()
    print_table("Events across streams: chains, queries, waiting", results)
    return results


if __name__ == "__main__":
    main()
