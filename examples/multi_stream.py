"""Two streams working at the same time (guide 03-02 "Stream管理").

Tasks of one stream run in order; tasks of different streams run concurrently when the
device has the resources (here: its DMA engines).  Each stream moves its own buffer
host -> device -> host; the host queries both streams right after submitting, then
synchronises each one and checks both results.

    python examples/multi_stream.py
"""

import sys
import time

import numpy as np

import mdev.acl as acl

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_STREAM_STATUS_COMPLETE = 0
NPY_UINT8 = 2

DEVICE_ID = 0
SIZE = 32 << 20                          # bytes per stream


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def status_name(status):
    return "COMPLETE" if status == ACL_STREAM_STATUS_COMPLETE else "NOT_READY"


def main():
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))

    work = []                            # (stream, host_in, dev, host_out, fill byte)
    for fill in (0x11, 0x22):
        stream, ret = acl.rt.create_stream()
        check_ret("acl.rt.create_stream", ret)
        host_in, ret = acl.rt.malloc_host(SIZE)
        check_ret("acl.rt.malloc_host", ret)
        host_out, ret = acl.rt.malloc_host(SIZE)
        check_ret("acl.rt.malloc_host", ret)
        dev, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("acl.rt.malloc", ret)
        acl.util.ptr_to_numpy(host_in, (SIZE,), NPY_UINT8)[:] = fill
        acl.util.ptr_to_numpy(host_out, (SIZE,), NPY_UINT8)[:] = 0
        work.append((stream, host_in, dev, host_out, fill))

    t0 = time.perf_counter()
    for stream, host_in, dev, host_out, _ in work:
        ret = acl.rt.memcpy_async(dev, SIZE, host_in, SIZE, ACL_MEMCPY_HOST_TO_DEVICE, stream)
        check_ret("acl.rt.memcpy_async H2D", ret)
        ret = acl.rt.memcpy_async(host_out, SIZE, dev, SIZE, ACL_MEMCPY_DEVICE_TO_HOST, stream)
        check_ret("acl.rt.memcpy_async D2H", ret)

    # the copies run in the background: query does not wait
    states = []
    for stream, *_ in work:
        status, ret = acl.rt.stream_query(stream)
        check_ret("acl.rt.stream_query", ret)
        states.append(status_name(status))
    print(f"right after submission: stream 1 {states[0]}, stream 2 {states[1]}")

    for stream, *_ in work:
        check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    elapsed = time.perf_counter() - t0
    states = []
    for stream, *_ in work:
        status, ret = acl.rt.stream_query(stream)
        check_ret("acl.rt.stream_query", ret)
        states.append(status_name(status))
    print(f"after synchronize_stream: stream 1 {states[0]}, stream 2 {states[1]}")

    ok = all(s == "COMPLETE" for s in states)
    for stream, host_in, dev, host_out, fill in work:
        out = acl.util.ptr_to_numpy(host_out, (SIZE,), NPY_UINT8)
        ok = ok and bool((out == fill).all())
        del out
        check_ret("acl.rt.free", acl.rt.free(dev))
        check_ret("acl.rt.free_host", acl.rt.free_host(host_in))
        check_ret("acl.rt.free_host", acl.rt.free_host(host_out))
        check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())

    if not ok:
        print("multi_stream: MISMATCH")
        return 1
    print(f"multi_stream: 2 streams x (H2D + D2H of {SIZE >> 20} MiB) in {elapsed * 1e3:.0f} ms, "
          f"both buffers verified: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
