"""Two streams working at the same time (guide 03-02 "Stream管理").

Tasks of one stream run in order; tasks of different streams run concurrently when the
device has the resources (here: its DMA engines).  Each stream moves its own buffer
host -> device -> host; the host queries both streams right after submitting, then
synchronises each one and checks both results.

    python examples/multi_stream.py
"""

import sys
import time

import mdev.acl as acl

NPY_UINT8 = 2                            # NumPy type number, as acl.util.ptr_to_numpy takes it
DEVICE_ID = 0
SIZE = 32 << 20                          # bytes per stream


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def states(work):
    """stream_query of every stream: it answers at once, whether the stream is done or not."""
    names = []
    for stream, *_ in work:
        status, ret = acl.rt.stream_query(stream)
        check(ret, "stream_query")
        names.append("COMPLETE" if status == acl.ACL_STREAM_STATUS_COMPLETE else "NOT_READY")
    return names


def main():
    check(acl.init(), "init")
    check(acl.rt.set_device(DEVICE_ID), "set_device")

    work = []                            # (stream, host_in, dev, host_out, fill byte)
    for fill in (0x11, 0x22):
        stream, ret = acl.rt.create_stream()
        check(ret, "create_stream")
        host_in, ret = acl.rt.malloc_host(SIZE)
        check(ret, "malloc_host")
        host_out, ret = acl.rt.malloc_host(SIZE)
        check(ret, "malloc_host")
        dev, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        acl.util.ptr_to_numpy(host_in, (SIZE,), NPY_UINT8)[:] = fill
        acl.util.ptr_to_numpy(host_out, (SIZE,), NPY_UINT8)[:] = 0
        work.append((stream, host_in, dev, host_out, fill))

    t0 = time.perf_counter()
    for stream, host_in, dev, host_out, _ in work:
        check(acl.rt.memcpy_async(dev, SIZE, host_in, SIZE, acl.ACL_MEMCPY_HOST_TO_DEVICE, stream), "memcpy_async H2D")
        check(acl.rt.memcpy_async(host_out, SIZE, dev, SIZE, acl.ACL_MEMCPY_DEVICE_TO_HOST, stream), "memcpy_async D2H")
    # the copies run in the background: query does not wait
    print("right after submission: stream 1 {}, stream 2 {}".format(*states(work)))
    for stream, *_ in work:
        check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    elapsed = time.perf_counter() - t0
    after = states(work)
    print("after synchronize_stream: stream 1 {}, stream 2 {}".format(*after))

    verified = []
    for stream, host_in, dev, host_out, fill in work:
        verified.append(bool((acl.util.ptr_to_numpy(host_out, (SIZE,), NPY_UINT8) == fill).all()))
        check(acl.rt.free(dev), "free")
        for host in (host_in, host_out):
            check(acl.rt.free_host(host), "free_host")
        check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(DEVICE_ID), "reset_device")
    check(acl.finalize(), "finalize")
    ok = after == ["COMPLETE", "COMPLETE"] and all(verified)
    print(f"multi_stream: 2 streams x (H2D + D2H of {SIZE >> 20} MiB) in {elapsed * 1e3:.0f} ms, "
          f"both buffers verified: {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
