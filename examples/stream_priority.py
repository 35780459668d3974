"""Stream priorities (guide "配置Stream优先级").

Priorities range from greatest 0 to least 7 (acl.rt.device_get_stream_priority_range).
When an engine of the device frees up, the ready task of the higher-priority stream gets
it first; a running task is never pre-empted.  To see it, both DMA engines are kept busy
with two large memsets (the second twice as long), then a small memset + TIME_LINE event
is queued on a LOW priority stream first and on a HIGH priority stream second.  The event timestamps show the HIGH
stream's work ran first, although it was queued last -- and only after a large memset
ended.

    python examples/stream_priority.py
"""

import sys
import time

import mdev.acl as acl

DEVICE_ID = 0
BIG = (128 << 20, 256 << 20)    # the second engine stays busy well after the first frees up
SMALL = 4096


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def query(event):
    status, ret = acl.rt.query_event_status(event)
    check(ret, "query_event_status")
    return status


def one_round(busy, low, high, big, small):
    """Returns {name: timestamp}, or None when the round could not show priorities: a small
    task found an engine free at once, or reached the device after an engine freed."""
    events = {}
    for name in ("busy0_started", "busy1_started", "busy0", "busy1", "low_queued", "low", "high_queued", "high"):
        events[name], ret = acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_TIME_LINE)
        check(ret, "create_event_ex_with_flag")
    for i, stream in enumerate(busy):
        check(acl.rt.record_event(events[f"busy{i}_started"], stream), "record_event")
        check(acl.rt.memset_async(big[i], BIG[i], i + 1, BIG[i], stream), "memset_async")
        check(acl.rt.record_event(events[f"busy{i}"], stream), "record_event")
    # both large memsets have an engine once the device has passed the records before them
    # (a fixed sleep is too short on a loaded host and too long on a fast one)
    deadline = time.monotonic() + 1.0
    while any(query(events[f"busy{i}_started"]) != acl.ACL_EVENT_RECORDED_STATUS_COMPLETE for i in range(2)):
        if time.monotonic() > deadline:
            break
        time.sleep(0.0002)
    for name, stream, value in (("low", low, 7), ("high", high, 0)):
        # the *_queued record runs when the device reaches the small memset (needs no engine)
        check(acl.rt.record_event(events[f"{name}_queued"], stream), "record_event")
        check(acl.rt.memset_async(small, SMALL, value, SMALL, stream), "memset_async")
        check(acl.rt.record_event(events[name], stream), "record_event")
    for stream in (*busy, low, high):
        check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    stamps = {}
    for name, event in events.items():
        stamps[name], ret = acl.rt.event_get_timestamp(event)
        check(ret, "event_get_timestamp")
        check(acl.rt.destroy_event(event), "destroy_event")
    # the round shows priorities only if both small tasks were waiting for an engine
    # when the first one freed (a loaded host may submit the second one too late)
    first_busy_end, second_busy_end = sorted((stamps["busy0"], stamps["busy1"]))
    queued = max(stamps.pop("low_queued"), stamps.pop("high_queued"))
    del stamps["busy0_started"], stamps["busy1_started"]
    # ... and both ran on the engine that freed first, the other one still busy (a loaded
    # device may take long enough to hand out the freed engine that the second frees too)
    small_ends = (stamps["low"], stamps["high"])
    return stamps if queued < first_busy_end <= min(small_ends) and max(small_ends) < second_busy_end else None


def main():
    check(acl.init(), "init")
    check(acl.rt.set_device(DEVICE_ID), "set_device")
    least, greatest, ret = acl.rt.device_get_stream_priority_range()
    check(ret, "device_get_stream_priority_range")
    print(f"stream priorities: greatest {greatest}, least {least}")

    busy = []                                    # two streams of the default priority
    for _ in range(2):
        stream, ret = acl.rt.create_stream()
        check(ret, "create_stream")
        busy.append(stream)
    prioritised = {}
    for name, wanted in (("high", greatest), ("low", least)):
        prioritised[name], ret = acl.rt.create_stream_with_config(wanted, acl.ACL_STREAM_FAST_LAUNCH)
        check(ret, "create_stream_with_config")
        priority, ret = acl.rt.stream_get_priority(prioritised[name])
        check(ret, "stream_get_priority")
        print(f"{name} stream: priority {priority}")
    high, low = prioritised["high"], prioritised["low"]
    buffers = []
    for size in (*BIG, SMALL):
        ptr, ret = acl.rt.malloc(size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        buffers.append(ptr)
    for stream in (*busy, low, high):            # warm up: every stream has run a task
        check(acl.rt.launch_host_func(stream, len, ()), "launch_host_func")
        check(acl.rt.synchronize_stream(stream), "synchronize_stream")

    for _ in range(5):
        stamps = one_round(busy, low, high, buffers[:2], buffers[2])
        if stamps is not None:
            break
    if stamps is None:
        print("stream_priority: no round had both small tasks waiting for an engine (machine too busy?)")
        return 1
    first_busy_end = min(stamps["busy0"], stamps["busy1"])
    for name in sorted(stamps, key=stamps.get):
        print(f"  {name:6s} completed at +{stamps[name] - first_busy_end:7d} us "
              f"(relative to the first large memset's end)")

    for ptr in buffers:
        check(acl.rt.free(ptr), "free")
    for stream in (*busy, low, high):
        check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(DEVICE_ID), "reset_device")
    check(acl.finalize(), "finalize")
    high_first = stamps["high"] < stamps["low"]
    print(f"both small tasks waited for a large memset to end (no pre-emption); high-priority work "
          f"ran before low-priority work queued earlier: {high_first}")
    print(f"stream_priority: {'high priority first, no pre-emption: OK' if high_first else 'UNEXPECTED ORDER'}")
    return 0 if high_first else 1


if __name__ == "__main__":
    sys.exit(main())
