"""Event wait between streams (guide 03-05 "Event管理": Event等待).

stream1 fills a device buffer (host -> device copy, then a memset of its second half) and
records an event; stream2 and stream3 each wait for that event (one record, two waiters)
and then copy the buffer back to the host.  Without the waits, the read-back could run
before the buffer is filled; with them, both copies see the finished data.

    python examples/event_wait.py
"""

import sys

import numpy as np

import mdev.acl as acl

NPY_UINT8 = 2                            # NumPy type number, as acl.util.ptr_to_numpy takes it
DEVICE_ID = 0
SIZE = 16 << 20


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def pinned(fill):
    host, ret = acl.rt.malloc_host(SIZE)
    check(ret, "malloc_host")
    acl.util.ptr_to_numpy(host, (SIZE,), NPY_UINT8)[:] = fill
    return host


def main():
    check(acl.init(), "init")
    check(acl.rt.set_device(DEVICE_ID), "set_device")

    # create the event first, as the guide does; ACL_EVENT_SYNC: usable by stream_wait_event
    event, ret = acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC)
    check(ret, "create_event_ex_with_flag")
    streams = []
    for _ in range(3):
        stream, ret = acl.rt.create_stream()
        check(ret, "create_stream")
        streams.append(stream)
    stream1, stream2, stream3 = streams
    dev, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    host_in, outs = pinned(0x11), [pinned(0), pinned(0)]

    # stream1: produce, then record the event at its end
    check(acl.rt.memcpy_async(dev, SIZE, host_in, SIZE, acl.ACL_MEMCPY_HOST_TO_DEVICE, stream1), "memcpy_async H2D")
    check(acl.rt.memset_async(dev + SIZE // 2, SIZE // 2, 0x22, SIZE // 2, stream1), "memset_async")
    check(acl.rt.record_event(event, stream1), "record_event")

    # stream2 and stream3: wait for the event (host does not block), then consume
    for stream, host_out in zip((stream2, stream3), outs):
        check(acl.rt.stream_wait_event(stream, event), "stream_wait_event")
        check(acl.rt.memcpy_async(host_out, SIZE, dev, SIZE, acl.ACL_MEMCPY_DEVICE_TO_HOST, stream),
              "memcpy_async D2H")
    for stream in streams:
        check(acl.rt.synchronize_stream(stream), "synchronize_stream")

    status, ret = acl.rt.query_event_status(event)
    check(ret, "query_event_status")
    print(f"event status after the syncs: "
          f"{'COMPLETE' if status == acl.ACL_EVENT_RECORDED_STATUS_COMPLETE else 'NOT_READY'}")
    expected = np.full(SIZE, 0x11, np.uint8)
    expected[SIZE // 2:] = 0x22
    same = []
    for name, host_out in zip(("stream2", "stream3"), outs):
        same.append(bool((acl.util.ptr_to_numpy(host_out, (SIZE,), NPY_UINT8) == expected).all()))
        print(f"{name} read back {SIZE >> 20} MiB after waiting: {'as produced' if same[-1] else 'WRONG'}")

    check(acl.rt.destroy_event(event), "destroy_event")
    for host in (host_in, *outs):
        check(acl.rt.free_host(host), "free_host")
    check(acl.rt.free(dev), "free")
    for stream in streams:
        check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(DEVICE_ID), "reset_device")
    check(acl.finalize(), "finalize")
    ok = all(same)
    print(f"event_wait: 1 record on stream1, 2 streams waited on it, verified: {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
