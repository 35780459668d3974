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

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_EVENT_SYNC = 0x1
ACL_EVENT_RECORDED_STATUS_COMPLETE = 1
ACL_EVENT_WAIT_STATUS_COMPLETE = 0
NPY_UINT8 = 2

DEVICE_ID = 0
SIZE = 16 << 20


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def main():
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))

    # create the event first, as the guide does; ACL_EVENT_SYNC: usable by stream_wait_event
    event, ret = acl.rt.create_event_ex_with_flag(ACL_EVENT_SYNC)
    check_ret("acl.rt.create_event_ex_with_flag", ret)
    streams = []
    for _ in range(3):
        stream, ret = acl.rt.create_stream()
        check_ret("acl.rt.create_stream", ret)
        streams.append(stream)
    stream1, stream2, stream3 = streams

    dev, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    host_in, ret = acl.rt.malloc_host(SIZE)
    check_ret("acl.rt.malloc_host", ret)
    outs = []
    for _ in range(2):
        host_out, ret = acl.rt.malloc_host(SIZE)
        check_ret("acl.rt.malloc_host", ret)
        acl.util.ptr_to_numpy(host_out, (SIZE,), NPY_UINT8)[:] = 0
        outs.append(host_out)
    acl.util.ptr_to_numpy(host_in, (SIZE,), NPY_UINT8)[:] = 0x11

    # stream1: produce, then record the event at its end
    ret = acl.rt.memcpy_async(dev, SIZE, host_in, SIZE, ACL_MEMCPY_HOST_TO_DEVICE, stream1)
    check_ret("acl.rt.memcpy_async H2D", ret)
    ret = acl.rt.memset_async(dev + SIZE // 2, SIZE // 2, 0x22, SIZE // 2, stream1)
    check_ret("acl.rt.memset_async", ret)
    check_ret("acl.rt.record_event", acl.rt.record_event(event, stream1))

    # stream2 and stream3: wait for the event (host does not block), then consume
    for stream, host_out in zip((stream2, stream3), outs):
        check_ret("acl.rt.stream_wait_event", acl.rt.stream_wait_event(stream, event))
        ret = acl.rt.memcpy_async(host_out, SIZE, dev, SIZE, ACL_MEMCPY_DEVICE_TO_HOST, stream)
        check_ret("acl.rt.memcpy_async D2H", ret)

    for stream in streams:
        check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))

    status, ret = acl.rt.query_event_status(event)
    check_ret("acl.rt.query_event_status", ret)
    print(f"event status after the syncs: "
          f"{'COMPLETE' if status == ACL_EVENT_RECORDED_STATUS_COMPLETE else 'NOT_READY'}")

    expected = np.full(SIZE, 0x11, np.uint8)
    expected[SIZE // 2:] = 0x22
    ok = True
    for name, host_out in zip(("stream2", "stream3"), outs):
        data = acl.util.ptr_to_numpy(host_out, (SIZE,), NPY_UINT8)
        same = bool((data == expected).all())
        print(f"{name} read back {SIZE >> 20} MiB after waiting: {'as produced' if same else 'WRONG'}")
        ok = ok and same
        del data

    check_ret("acl.rt.destroy_event", acl.rt.destroy_event(event))
    for host_out in outs:
        check_ret("acl.rt.free_host", acl.rt.free_host(host_out))
    check_ret("acl.rt.free_host", acl.rt.free_host(host_in))
    check_ret("acl.rt.free", acl.rt.free(dev))
    for stream in streams:
        check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())

    if not ok:
        print("event_wait: MISMATCH")
        return 1
    print("event_wait: 1 record on stream1, 2 streams waited on it, verified: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
