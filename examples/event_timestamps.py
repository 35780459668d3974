"""Timing work on a stream with events (guide 03-05 "Event管理": 记录Event时间戳).

Two ACL_EVENT_TIME_LINE events are recorded around a 64 MiB host -> device copy; after
synchronising, acl.rt.event_elapsed_time gives the milliseconds between them and
acl.rt.event_get_timestamp the device time of each (microseconds since the device
booted).  A host callback that sleeps 50 ms is timed the same way, as a sanity check.

    python examples/event_timestamps.py
"""

import sys
import time

import mdev.acl as acl

NPY_UINT8 = 2                            # NumPy type number, as acl.util.ptr_to_numpy takes it
DEVICE_ID = 0
SIZE = 64 << 20
SLEEP_S = 0.05


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def timeline_event():
    """An event that records the device time: ACL_EVENT_TIME_LINE."""
    event, ret = acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_TIME_LINE)
    check(ret, "create_event_ex_with_flag")
    return event


def main():
    check(acl.init(), "init")
    check(acl.rt.set_device(DEVICE_ID), "set_device")
    host, ret = acl.rt.malloc_host(SIZE)
    check(ret, "malloc_host")
    acl.util.ptr_to_numpy(host, (SIZE,), NPY_UINT8)[:] = 7
    dev, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")

    # start, end: around the copy; slept: after a host callback that sleeps
    start, end, slept = timeline_event(), timeline_event(), timeline_event()
    events = (start, end, slept)
    check(acl.rt.record_event(start, stream), "record_event")
    check(acl.rt.memcpy_async(dev, SIZE, host, SIZE, acl.ACL_MEMCPY_HOST_TO_DEVICE, stream), "memcpy_async")
    check(acl.rt.record_event(end, stream), "record_event")
    check(acl.rt.launch_host_func(stream, time.sleep, SLEEP_S), "launch_host_func")
    check(acl.rt.record_event(slept, stream), "record_event")
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")

    copy_ms, ret = acl.rt.event_elapsed_time(start, end)
    check(ret, "event_elapsed_time")
    sleep_ms, ret = acl.rt.event_elapsed_time(end, slept)
    check(ret, "event_elapsed_time")
    stamps = []
    for event in events:
        stamp, ret = acl.rt.event_get_timestamp(event)
        check(ret, "event_get_timestamp")
        stamps.append(stamp)
    print(f"timestamps (us since device boot): start {stamps[0]}, end {stamps[1]}, after sleep {stamps[2]}")
    print(f"H2D copy of {SIZE >> 20} MiB: {copy_ms:.3f} ms ({SIZE / (copy_ms / 1e3) / 1e9:.2f} GB/s)")
    print(f"host callback sleeping {SLEEP_S * 1e3:.0f} ms: {sleep_ms:.3f} ms")

    # end before start is refused with its documented code
    _, reversed_ret = acl.rt.event_elapsed_time(slept, start)
    print(f"event_elapsed_time(later, earlier): ret = {reversed_ret} (ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL)")

    for event in events:
        check(acl.rt.destroy_event(event), "destroy_event")
    check(acl.rt.free_host(host), "free_host")
    check(acl.rt.free(dev), "free")
    check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(DEVICE_ID), "reset_device")
    check(acl.finalize(), "finalize")
    ok = (stamps[0] <= stamps[1] <= stamps[2] and copy_ms > 0 and SLEEP_S * 1e3 * 0.95 <= sleep_ms < SLEEP_S * 1e3 * 20
          and reversed_ret == acl.ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL)
    print(f"event_timestamps: elapsed times and timestamps consistent: {'OK' if ok else 'UNEXPECTED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
