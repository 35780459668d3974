"""Stream priorities (guide "配置Stream优先级").

Priorities range from greatest 0 to least 7 (acl.rt.device_get_stream_priority_range).
When an engine of the device frees up, the ready task of the higher-priority stream gets
it first; a running task is never pre-empted.  To see it without depending on timing:

    busy stream:  hold<<<all vector cores>>>   marks itself started, spins until released
    low  (7):     wait started; record low_queued;  take_turn<<<all cores>>>(log, 7); record low
    high (0):     wait started; record high_queued; take_turn<<<all cores>>>(log, 0); record high
    host:         both *_queued complete -> writes the release flag

Each take_turn wave needs every vector core, so the two cannot run side by side: whichever
gets the cores first runs to its end before the other starts.  The low stream queued its
kernel first, yet the log shows the high stream's turn first, and neither ran before the
hold kernel was released (no pre-emption).  Priority is not an ordering: racecheck rightly
reports the two take_turn kernels' accesses to the log as a hazard.

    python examples/stream_priority.py
"""

import sys
import time

import numpy as np

import mdev.acl as acl
from mdev.kernel import int64, kernel, ptr

DEVICE_ID = 0
SETTLE_S = 0.05     # after both records ran, the kernels behind them reach the cores' queue in microseconds


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


@kernel
def hold(ctx, started: ptr, release: ptr):
    if ctx.block_idx == 0:
        ctx.gm(started, np.uint64, 1)[0] = 1
    flag = ctx.gm(release, np.uint64, 1)
    ctx.spin_until(lambda: int(flag[0]) == 1)


@kernel
def take_turn(ctx, log: ptr, who: int64):
    if ctx.block_idx == 0:                         # log = [turns so far, who went first, who second]
        entries = ctx.gm(log, np.int64, 3)
        entries[1 + entries[0]] = who
        entries[0] += 1


def malloc_zeroed(size):
    ptr_, ret = acl.rt.malloc(size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    check(acl.rt.memset(ptr_, size, 0, size), "memset")
    return ptr_


def complete(event):
    status, ret = acl.rt.query_event_status(event)
    check(ret, "query_event_status")
    return status == acl.ACL_EVENT_RECORDED_STATUS_COMPLETE


def main():
    check(acl.init(), "init")
    check(acl.rt.set_device(DEVICE_ID), "set_device")
    least, greatest, ret = acl.rt.device_get_stream_priority_range()
    check(ret, "device_get_stream_priority_range")
    print(f"stream priorities: greatest {greatest}, least {least}")
    cores, ret = acl.rt.get_device_info(DEVICE_ID, acl.ACL_DEV_ATTR_VECTOR_CORE_NUM)
    check(ret, "get_device_info")

    busy, ret = acl.rt.create_stream()             # default priority
    check(ret, "create_stream")
    streams = {}
    for name, wanted in (("low", least), ("high", greatest)):
        streams[name], ret = acl.rt.create_stream_with_config(wanted, acl.ACL_STREAM_FAST_LAUNCH)
        check(ret, "create_stream_with_config")
        priority, ret = acl.rt.stream_get_priority(streams[name])
        check(ret, "stream_get_priority")
        print(f"{name} stream: priority {priority}")
    started, release, log = malloc_zeroed(8), malloc_zeroed(8), malloc_zeroed(24)
    events = {}
    for name in ("low_queued", "low", "high_queued", "high"):
        events[name], ret = acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_TIME_LINE)
        check(ret, "create_event_ex_with_flag")

    check(hold[cores, busy](started, release), "hold launch")
    for name, value in (("low", least), ("high", greatest)):     # low priority queued first
        stream = streams[name]
        check(acl.rt.value_wait(started, 1, acl.ACL_STREAM_WAIT_VALUE_EQ, stream), "value_wait")
        check(acl.rt.record_event(events[f"{name}_queued"], stream), "record_event")
        check(take_turn[cores, stream](log, value), "take_turn launch")
        check(acl.rt.record_event(events[name], stream), "record_event")
    deadline = time.monotonic() + 30.0
    while not (complete(events["low_queued"]) and complete(events["high_queued"])):
        if time.monotonic() > deadline:
            print("stream_priority: the hold kernel never started")
            return 1
        time.sleep(0.001)
    time.sleep(SETTLE_S)
    ran_while_held = complete(events["low"]) or complete(events["high"])
    one = np.ones(1, np.uint64)
    check(acl.rt.memcpy(release, 8, acl.util.numpy_to_ptr(one), 8, acl.ACL_MEMCPY_HOST_TO_DEVICE), "memcpy")
    for stream in (busy, *streams.values()):
        check(acl.rt.synchronize_stream(stream), "synchronize_stream")

    turns = np.zeros(3, np.int64)
    check(acl.rt.memcpy(acl.util.numpy_to_ptr(turns), 24, log, 24, acl.ACL_MEMCPY_DEVICE_TO_HOST), "memcpy")
    stamps = {}
    for name, event in events.items():
        stamps[name], ret = acl.rt.event_get_timestamp(event)
        check(ret, "event_get_timestamp")
        check(acl.rt.destroy_event(event), "destroy_event")
    first = min(stamps.values())
    for name in sorted(stamps, key=stamps.get):
        print(f"  {name:11s} at +{stamps[name] - first:7d} us")
    print(f"turns taken: {turns[0]}, first priority {turns[1]}, second priority {turns[2]}")

    for buffer in (started, release, log):
        check(acl.rt.free(buffer), "free")
    for stream in (busy, *streams.values()):
        check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(DEVICE_ID), "reset_device")
    check(acl.finalize(), "finalize")
    # the log is the order the kernels ran in; the timestamps are for show (a record runs
    # after its kernel released the cores, so on a loaded host the later kernel's record
    # can run first)
    ok = turns.tolist() == [2, greatest, least] and not ran_while_held
    print(f"both kernels waited for the running one to end (no pre-emption): {not ran_while_held}; "
          f"high-priority work ran before low-priority work queued earlier: {turns[1] == greatest}")
    print(f"stream_priority: {'high priority first, no pre-emption: OK' if ok else 'UNEXPECTED ORDER'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
