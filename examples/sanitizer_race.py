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

NPY_UINT8 = 2                            # NumPy type number, as acl.util.ptr_to_numpy takes it
SIZE = 1 << 20


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def fill_and_read(stream1, stream2, dev, src, dst, event, synchronised):
    """stream1: host -> device; stream2: device -> host; an event between them, or not."""
    check(acl.rt.memcpy_async(dev, SIZE, src, SIZE, acl.ACL_MEMCPY_HOST_TO_DEVICE, stream1), "memcpy_async H2D")
    if synchronised:
        check(acl.rt.record_event(event, stream1), "record_event")
        check(acl.rt.stream_wait_event(stream2, event), "stream_wait_event")
    check(acl.rt.memcpy_async(dst, SIZE, dev, SIZE, acl.ACL_MEMCPY_DEVICE_TO_HOST, stream2), "memcpy_async D2H")
    check(acl.rt.synchronize_device(), "synchronize_device")


def main():
    check(acl.init(), "init")
    check(acl.rt.set_device(0), "set_device")
    streams = []
    for _ in range(2):
        stream, ret = acl.rt.create_stream()
        check(ret, "create_stream")
        streams.append(stream)
    event, ret = acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC)
    check(ret, "create_event_ex_with_flag")
    dev, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    src, ret = acl.rt.malloc_host(SIZE)
    check(ret, "malloc_host")
    dst, ret = acl.rt.malloc_host(SIZE)
    check(ret, "malloc_host")
    acl.util.ptr_to_numpy(src, (SIZE,), NPY_UINT8)[:] = np.arange(SIZE) % 253
    out = acl.util.ptr_to_numpy(dst, (SIZE,), NPY_UINT8)

    found = {}
    for synchronised in (False, True):
        out[:] = 0
        sanitizer.enable("racecheck")
        fill_and_read(*streams, dev, src, dst, event, synchronised)
        reports = sanitizer.disable()
        right = bool((out == np.arange(SIZE) % 253).all())
        name = "with the event" if synchronised else "without the event"
        print(f"{name}: data {'right' if right else 'WRONG'}, {len(reports)} racecheck report(s)")
        for report in reports:
            print(f"    {report.kind}: {report.lines[1]}")
            print(f"    {' ' * len(report.kind)}  {report.lines[2]}")
        found[synchronised] = reports

    check(acl.rt.free(dev), "free")
    for host in (src, dst):
        check(acl.rt.free_host(host), "free_host")
    check(acl.rt.destroy_event(event), "destroy_event")
    for stream in streams:
        check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(0), "reset_device")
    check(acl.finalize(), "finalize")
    racy, fixed = found[False], found[True]
    ok = [r.kind for r in racy] == ["read-after-write hazard"] and not fixed
    print("sanitizer_race: racecheck named the missing event between the two copies, the fixed program "
          f"drew no report: {'OK' if ok else 'UNEXPECTED REPORTS'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
