"""The default stream (guide 03-02 "默认Stream").

``set_device`` creates the device's default context and its default stream.  APIs that
take a stream use it when given ``0`` (nullptr in C); ``synchronize_device`` waits for it
along with every other stream of the context; ``reset_device`` destroys it — a default
stream is never destroyed explicitly.

    python examples/default_stream.py
"""

import sys

import numpy as np

import mdev.acl as acl

NPY_INT32 = 5                            # NumPy type number, as acl.util.ptr_to_numpy takes it
DEFAULT_STREAM = 0                       # nullptr: the current context's default stream
DEVICE_ID = 0
N = 4096                                 # int32 elements


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def main():
    check(acl.init(), "init")
    # set_device creates the default context and its default stream
    check(acl.rt.set_device(DEVICE_ID), "set_device")

    size = N * 4
    host_in, ret = acl.rt.malloc_host(size)
    check(ret, "malloc_host")
    host_out, ret = acl.rt.malloc_host(size)
    check(ret, "malloc_host")
    acl.util.ptr_to_numpy(host_in, (N,), NPY_INT32)[:] = np.arange(N, dtype=np.int32)
    dev_ptr, ret = acl.rt.malloc(size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")

    # all on the default stream, in order: fill with 0x01 bytes, overwrite the first half
    # with host data, copy everything back
    check(acl.rt.memset_async(dev_ptr, size, 0x01, size, DEFAULT_STREAM), "memset_async")
    check(acl.rt.memcpy_async(dev_ptr, size, host_in, size // 2, acl.ACL_MEMCPY_HOST_TO_DEVICE, DEFAULT_STREAM),
          "memcpy_async H2D")
    check(acl.rt.memcpy_async(host_out, size, dev_ptr, size, acl.ACL_MEMCPY_DEVICE_TO_HOST, DEFAULT_STREAM),
          "memcpy_async D2H")

    # wait for every stream of the current context, the default one included
    check(acl.rt.synchronize_device(), "synchronize_device")
    status, ret = acl.rt.stream_query(DEFAULT_STREAM)
    check(ret, "stream_query")
    complete = status == acl.ACL_STREAM_STATUS_COMPLETE
    print(f"default stream after synchronize_device: {'COMPLETE' if complete else 'NOT READY'}")

    out = acl.util.ptr_to_numpy(host_out, (N,), NPY_INT32).copy()
    expected = np.full(N, 0x01010101, dtype=np.int32)
    expected[:N // 2] = np.arange(N // 2, dtype=np.int32)
    middle = ", ".join(f"{v:#x}" for v in out[N // 2 - 2:N // 2 + 2])
    print(f"out[{N // 2 - 2}:{N // 2 + 2}] = [{middle}]  (host data, then the memset's 0x01 bytes)")

    check(acl.rt.free(dev_ptr), "free")
    for host in (host_in, host_out):
        check(acl.rt.free_host(host), "free_host")
    # reset_device destroys the default stream with the default context
    check(acl.rt.reset_device(DEVICE_ID), "reset_device")
    check(acl.finalize(), "finalize")
    ok = complete and np.array_equal(out, expected)
    print(f"default_stream: memset_async + 2 memcpy_async on stream 0, synchronize_device, verified: "
          f"{'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
