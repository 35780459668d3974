"""Stream priorities (guide "配置Stream优先级").

Priorities range from greatest 0 to least 7 (acl.rt.device_get_stream_priority_range).
When an engine of the device frees up, the ready task of the higher-priority stream gets
it first; a running task is never pre-empted.  To see it, both DMA engines are kept busy
with two large memsets, then a small memset + TIME_LINE event is queued on a LOW priority
stream first and on a HIGH priority stream second.  The event timestamps show the HIGH
stream's work ran first, although it was queued last -- and only after a large memset
ended.

    python examples/stream_priority.py
"""

import sys
import time

import mdev.acl as acl

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_STREAM_FAST_LAUNCH = 0x1
ACL_EVENT_TIME_LINE = 0x8

DEVICE_ID = 0
BIG = 128 << 20
SMALL = 4096


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def timeline_event():
    event, ret = acl.rt.create_event_ex_with_flag(ACL_EVENT_TIME_LINE)
    check_ret("acl.rt.create_event_ex_with_flag", ret)
    return event


def one_round(busy, low, high, big, small):
    """Returns {name: timestamp}, or None when the round could not show priorities: a small
    task found an engine free at once, or reached the device after an engine freed."""
    names = ("busy0", "busy1", "low_queued", "low", "high_queued", "high")
    events = {name: timeline_event() for name in names}
    for i, stream in enumerate(busy):
        check_ret("acl.rt.memset_async", acl.rt.memset_async(big[i], BIG, i + 1, BIG, stream))
        check_ret("acl.rt.record_event", acl.rt.record_event(events[f"busy{i}"], stream))
    time.sleep(0.01)                             # let both large memsets take an engine
    for name, stream, value in (("low", low, 7), ("high", high, 0)):
        # the *_queued record runs when the device reaches the small memset (needs no engine)
        check_ret("acl.rt.record_event", acl.rt.record_event(events[f"{name}_queued"], stream))
        check_ret("acl.rt.memset_async", acl.rt.memset_async(small, SMALL, value, SMALL, stream))
        check_ret("acl.rt.record_event", acl.rt.record_event(events[name], stream))
    for stream in (*busy, low, high):
        check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    stamps = {}
    for name, event in events.items():
        stamps[name], ret = acl.rt.event_get_timestamp(event)
        check_ret("acl.rt.event_get_timestamp", ret)
        check_ret("acl.rt.destroy_event", acl.rt.destroy_event(event))
    # the round shows priorities only if both small tasks were waiting for an engine
    # when the first one freed (a loaded host may submit the second one too late)
    first_busy_end = min(stamps["busy0"], stamps["busy1"])
    queued = max(stamps.pop("low_queued"), stamps.pop("high_queued"))
    return stamps if queued < first_busy_end <= min(stamps["low"], stamps["high"]) else None


def main():
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    least, greatest, ret = acl.rt.device_get_stream_priority_range()
    check_ret("acl.rt.device_get_stream_priority_range", ret)
    print(f"stream priorities: greatest {greatest}, least {least}")

    busy = []
    for _ in range(2):
        stream, ret = acl.rt.create_stream()
        check_ret("acl.rt.create_stream", ret)
        busy.append(stream)
    high, ret = acl.rt.create_stream_with_config(greatest, ACL_STREAM_FAST_LAUNCH)
    check_ret("acl.rt.create_stream_with_config", ret)
    low, ret = acl.rt.create_stream_with_config(least, ACL_STREAM_FAST_LAUNCH)
    check_ret("acl.rt.create_stream_with_config", ret)
    for name, stream in (("high", high), ("low", low)):
        priority, ret = acl.rt.stream_get_priority(stream)
        check_ret("acl.rt.stream_get_priority", ret)
        print(f"{name} stream: priority {priority}")

    big = []
    for _ in range(2):
        ptr, ret = acl.rt.malloc(BIG, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("acl.rt.malloc", ret)
        big.append(ptr)
    small, ret = acl.rt.malloc(SMALL, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    for stream in (*busy, low, high):            # warm up: every stream has run a task
        check_ret("acl.rt.launch_host_func", acl.rt.launch_host_func(stream, len, ()))
        check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))

    stamps = None
    for _ in range(5):
        stamps = one_round(busy, low, high, big, small)
        if stamps is not None:
            break
    if stamps is None:
        print("stream_priority: no round had both small tasks waiting for an engine (machine too busy?)")
        return 1
    first_busy_end = min(stamps["busy0"], stamps["busy1"])
    for name in sorted(stamps, key=stamps.get):
        print(f"  {name:6s} completed at +{stamps[name] - first_busy_end:7d} us "
              f"(relative to the first large memset's end)")

    for ptr in (*big, small):
        check_ret("acl.rt.free", acl.rt.free(ptr))
    for stream in (*busy, low, high):
        check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())

    high_first = stamps["high"] < stamps["low"]
    print(f"both small tasks waited for a large memset to end (no pre-emption); high-priority work "
          f"ran before low-priority work queued earlier: {high_first}")
    if not high_first:
        print("stream_priority: UNEXPECTED ORDER")
        return 1
    print("stream_priority: high priority first, no pre-emption: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
