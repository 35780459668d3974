"""Two streams ordered by events, in the style of the public pyACL samples.

stream_copy:    H2D(src -> dev_a) ........ record(ev_copied)
stream_compute:                    wait(ev_copied) D2D(dev_a -> dev_b) D2H(dev_b -> host)
                                   record(ev_start) ...             record(ev_end)

The second stream must not touch dev_a before the first has filled it: the event wait is
what orders them.  Timeline events give the elapsed time of the second stream's work.
"""
import sys

import numpy as np

import acl

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_DEVICE_TO_DEVICE = 1, 2, 3   # aclrtMemcpyKind
ACL_EVENT_TIME_LINE = 0x00000008
ACL_EVENT_RECORDED_STATUS_COMPLETE = 1
ACL_STREAM_STATUS_COMPLETE = 0
NPY_INT32 = 5

DEVICE_ID = 0
COUNT = 1 << 20                          # int32 elements (4 MiB)
ROUNDS = 3


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception("{} failed ret={}".format(message, ret))


def main():
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    context, ret = acl.rt.create_context(DEVICE_ID)
    check_ret("acl.rt.create_context", ret)
    stream_copy, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    stream_compute, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    ev_copied, ret = acl.rt.create_event()
    check_ret("acl.rt.create_event", ret)
    ev_start, ret = acl.rt.create_event_with_flag(ACL_EVENT_TIME_LINE)
    check_ret("acl.rt.create_event_with_flag", ret)
    ev_end, ret = acl.rt.create_event_with_flag(ACL_EVENT_TIME_LINE)
    check_ret("acl.rt.create_event_with_flag", ret)

    size = COUNT * 4
    host_src, ret = acl.rt.malloc_host(size)
    check_ret("acl.rt.malloc_host", ret)
    host_dst, ret = acl.rt.malloc_host(size)
    check_ret("acl.rt.malloc_host", ret)
    dev_a, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    dev_b, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    src = acl.util.ptr_to_numpy(host_src, (COUNT,), NPY_INT32)
    dst = acl.util.ptr_to_numpy(host_dst, (COUNT,), NPY_INT32)

    for i in range(ROUNDS):
        src[:] = np.arange(COUNT, dtype=np.int32) * (i + 1)
        dst[:] = -1
        check_ret("acl.rt.memcpy_async", acl.rt.memcpy_async(
            dev_a, size, host_src, size, ACL_MEMCPY_HOST_TO_DEVICE, stream_copy))
        check_ret("acl.rt.record_event", acl.rt.record_event(ev_copied, stream_copy))

        check_ret("acl.rt.stream_wait_event", acl.rt.stream_wait_event(stream_compute, ev_copied))
        check_ret("acl.rt.record_event", acl.rt.record_event(ev_start, stream_compute))
        check_ret("acl.rt.memcpy_async", acl.rt.memcpy_async(
            dev_b, size, dev_a, size, ACL_MEMCPY_DEVICE_TO_DEVICE, stream_compute))
        check_ret("acl.rt.memcpy_async", acl.rt.memcpy_async(
            host_dst, size, dev_b, size, ACL_MEMCPY_DEVICE_TO_HOST, stream_compute))
        check_ret("acl.rt.record_event", acl.rt.record_event(ev_end, stream_compute))

        check_ret("acl.rt.synchronize_event", acl.rt.synchronize_event(ev_end))
        status, ret = acl.rt.query_event_status(ev_end)
        check_ret("acl.rt.query_event_status", ret)
        if status != ACL_EVENT_RECORDED_STATUS_COMPLETE:
            raise Exception("ev_end not complete after synchronize_event")
        ms, ret = acl.rt.event_elapsed_time(ev_start, ev_end)
        check_ret("acl.rt.event_elapsed_time", ret)
        if not np.array_equal(dst, src):
            raise Exception("round {}: data mismatch".format(i))
        print("[INFO] round {}: stream_compute saw the data of stream_copy, {:.3f} ms".format(i, ms))
        check_ret("acl.rt.reset_event", acl.rt.reset_event(ev_copied, stream_copy))

    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream_copy))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream_compute))
    for stream in (stream_copy, stream_compute):
        status, ret = acl.rt.stream_query(stream)
        check_ret("acl.rt.stream_query", ret)
        if status != ACL_STREAM_STATUS_COMPLETE:
            raise Exception("stream not complete after synchronize_stream")

    for event in (ev_copied, ev_start, ev_end):
        check_ret("acl.rt.destroy_event", acl.rt.destroy_event(event))
    for stream in (stream_copy, stream_compute):
        check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    for ptr in (dev_a, dev_b):
        check_ret("acl.rt.free", acl.rt.free(ptr))
    for ptr in (host_src, host_dst):
        check_ret("acl.rt.free_host", acl.rt.free_host(ptr))
    check_ret("acl.rt.destroy_context", acl.rt.destroy_context(context))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())
    print("[INFO] multi stream events OK")


if __name__ == "__main__":
    main()
    sys.exit(0)
