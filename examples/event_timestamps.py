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

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_EVENT_TIME_LINE = 0x8
NPY_UINT8 = 2

DEVICE_ID = 0
SIZE = 64 << 20
SLEEP_S = 0.05


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def new_timeline_event():
    event, ret = acl.rt.create_event_ex_with_flag(ACL_EVENT_TIME_LINE)
    check_ret("acl.rt.create_event_ex_with_flag", ret)
    return event


def main():
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    dev, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    host, ret = acl.rt.malloc_host(SIZE)
    check_ret("acl.rt.malloc_host", ret)
    acl.util.ptr_to_numpy(host, (SIZE,), NPY_UINT8)[:] = 7

    start, end, slept = new_timeline_event(), new_timeline_event(), new_timeline_event()
    check_ret("acl.rt.record_event", acl.rt.record_event(start, stream))
    ret = acl.rt.memcpy_async(dev, SIZE, host, SIZE, ACL_MEMCPY_HOST_TO_DEVICE, stream)
    check_ret("acl.rt.memcpy_async", ret)
    check_ret("acl.rt.record_event", acl.rt.record_event(end, stream))
    check_ret("acl.rt.launch_host_func", acl.rt.launch_host_func(stream, time.sleep, SLEEP_S))
    check_ret("acl.rt.record_event", acl.rt.record_event(slept, stream))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))

    copy_ms, ret = acl.rt.event_elapsed_time(start, end)
    check_ret("acl.rt.event_elapsed_time", ret)
    sleep_ms, ret = acl.rt.event_elapsed_time(end, slept)
    check_ret("acl.rt.event_elapsed_time", ret)
    stamps = []
    for event in (start, end, slept):
        stamp, ret = acl.rt.event_get_timestamp(event)
        check_ret("acl.rt.event_get_timestamp", ret)
        stamps.append(stamp)

    print(f"timestamps (us since device boot): start {stamps[0]}, end {stamps[1]}, after sleep {stamps[2]}")
    print(f"H2D copy of {SIZE >> 20} MiB: {copy_ms:.3f} ms ({SIZE / (copy_ms / 1e3) / 1e9:.2f} GB/s)")
    print(f"host callback sleeping {SLEEP_S * 1e3:.0f} ms: {sleep_ms:.3f} ms")

    # end before start is refused with its documented code
    _, ret = acl.rt.event_elapsed_time(slept, start)
    print(f"event_elapsed_time(later, earlier): ret = {ret} (ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL)")

    for event in (start, end, slept):
        check_ret("acl.rt.destroy_event", acl.rt.destroy_event(event))
    check_ret("acl.rt.free_host", acl.rt.free_host(host))
    check_ret("acl.rt.free", acl.rt.free(dev))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())

    ok = (stamps[0] <= stamps[1] <= stamps[2] and copy_ms > 0
          and SLEEP_S * 1e3 * 0.95 <= sleep_ms < SLEEP_S * 1e3 * 20 and ret == 107007)
    if not ok:
        print("event_timestamps: UNEXPECTED")
        return 1
    print("event_timestamps: elapsed times and timestamps consistent: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
