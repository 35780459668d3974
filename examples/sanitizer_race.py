"""The sanitizer names a missing synchronisation that a lucky run hides.

stream1 fills a device buffer and stream2 copies it back to the host.  Without an event
between them the copy may read the buffer before it is filled -- on this run, or on the
next.  The program runs the racy version and the fixed one (record on stream1,
stream_wait_event on stream2) under racecheck, and prints what the sanitizer said about
each: the racy one draws a report naming both copies and the missing event, whether or
not its data happened to come out right; the fixed one draws none.

    python examples/sanitizer_race.py
    MDEV_SANITIZE=racecheck python examples/sanitizer_race.py     # the same, for any program
"""

import sys

import numpy as np

import mdev.acl as acl
from mdev import sanitizer

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_EVENT_SYNC = 0x1
NPY_UINT8 = 2

SIZE = 1 << 20


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def fill_and_read(stream1, stream2, dev, src, dst, event, synchronised):
    """stream1: host -> device; stream2: device -> host; an event between them, or not."""
    check_ret("memcpy_async H2D", acl.rt.memcpy_async(dev, SIZE, src, SIZE, ACL_MEMCPY_HOST_TO_DEVICE, stream1))
    if synchronised:
        check_ret("acl.rt.record_event", acl.rt.record_event(event, stream1))
        check_ret("acl.rt.stream_wait_event", acl.rt.stream_wait_event(stream2, event))
    check_ret("memcpy_async D2H", acl.rt.memcpy_async(dst, SIZE, dev, SIZE, ACL_MEMCPY_DEVICE_TO_HOST, stream2))
    check_ret("acl.rt.synchronize_device", acl.rt.synchronize_device())


def main():
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(0))
    stream1, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    stream2, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    event, ret = acl.rt.create_event_ex_with_flag(ACL_EVENT_SYNC)
    check_ret("acl.rt.create_event_ex_with_flag", ret)
    dev, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    src, ret = acl.rt.malloc_host(SIZE)
    check_ret("acl.rt.malloc_host", ret)
    dst, ret = acl.rt.malloc_host(SIZE)
    check_ret("acl.rt.malloc_host", ret)
    acl.util.ptr_to_numpy(src, (SIZE,), NPY_UINT8)[:] = np.arange(SIZE) % 253
    out = acl.util.ptr_to_numpy(dst, (SIZE,), NPY_UINT8)

    found = {}
    for synchronised in (False, True):
        out[:] = 0
        sanitizer.enable("racecheck")
        fill_and_read(stream1, stream2, dev, src, dst, event, synchronised)
        reports = sanitizer.disable()
        right = bool((out == np.arange(SIZE) % 253).all())
        name = "with the event" if synchronised else "without the event"
        print(f"{name}: data {'right' if right else 'WRONG'}, {len(reports)} racecheck report(s)")
        for report in reports:
            print(f"    {report.kind}: {report.lines[1]}")
            print(f"    {' ' * len(report.kind)}  {report.lines[2]}")
        found[synchronised] = reports

    check_ret("acl.rt.free", acl.rt.free(dev))
    check_ret("acl.rt.free_host", acl.rt.free_host(src))
    check_ret("acl.rt.free_host", acl.rt.free_host(dst))
    check_ret("acl.rt.destroy_event", acl.rt.destroy_event(event))
    for stream in (stream1, stream2):
        check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(0))
    check_ret("acl.finalize", acl.finalize())
    racy, fixed = found[False], found[True]
    if [r.kind for r in racy] != ["read-after-write hazard"] or fixed:
        print("sanitizer_race: UNEXPECTED REPORTS")
        return 1
    print("sanitizer_race: racecheck named the missing event between the two copies, the fixed program "
          "drew no report: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
