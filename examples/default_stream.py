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

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_STREAM_STATUS_COMPLETE = 0
NPY_INT32 = 5

DEFAULT_STREAM = 0                       # nullptr: the current context's default stream
DEVICE_ID = 0
N = 4096                                 # int32 elements


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def main():
    check_ret("acl.init", acl.init())
    # set_device creates the default context and its default stream
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))

    size = N * 4
    host_in, ret = acl.rt.malloc_host(size)
    check_ret("acl.rt.malloc_host", ret)
    host_out, ret = acl.rt.malloc_host(size)
    check_ret("acl.rt.malloc_host", ret)
    src = acl.util.ptr_to_numpy(host_in, (N,), NPY_INT32)
    src[:] = np.arange(N, dtype=np.int32)
    dev_ptr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)

    # all on the default stream, in order: fill with 0x01 bytes, overwrite the first half
    # with host data, copy everything back
    ret = acl.rt.memset_async(dev_ptr, size, 0x01, size, DEFAULT_STREAM)
    check_ret("acl.rt.memset_async", ret)
    ret = acl.rt.memcpy_async(dev_ptr, size, host_in, size // 2, ACL_MEMCPY_HOST_TO_DEVICE, DEFAULT_STREAM)
    check_ret("acl.rt.memcpy_async H2D", ret)
    ret = acl.rt.memcpy_async(host_out, size, dev_ptr, size, ACL_MEMCPY_DEVICE_TO_HOST, DEFAULT_STREAM)
    check_ret("acl.rt.memcpy_async D2H", ret)

    # wait for every stream of the current context, the default one included
    check_ret("acl.rt.synchronize_device", acl.rt.synchronize_device())
    status, ret = acl.rt.stream_query(DEFAULT_STREAM)
    check_ret("acl.rt.stream_query", ret)

    out = acl.util.ptr_to_numpy(host_out, (N,), NPY_INT32)
    expected = np.full(N, 0x01010101, dtype=np.int32)
    expected[:N // 2] = np.arange(N // 2, dtype=np.int32)
    ok = np.array_equal(out, expected) and status == ACL_STREAM_STATUS_COMPLETE
    print(f"default stream after synchronize_device: "
          f"{'COMPLETE' if status == ACL_STREAM_STATUS_COMPLETE else 'NOT READY'}")
    middle = ", ".join(f"{v:#x}" for v in out[N // 2 - 2:N // 2 + 2])
    print(f"out[{N // 2 - 2}:{N // 2 + 2}] = [{middle}]  (host data, then the memset's 0x01 bytes)")

    del src, out
    check_ret("acl.rt.free", acl.rt.free(dev_ptr))
    check_ret("acl.rt.free_host", acl.rt.free_host(host_in))
    check_ret("acl.rt.free_host", acl.rt.free_host(host_out))
    # reset_device destroys the default stream with the default context
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())

    if not ok:
        print("default_stream: MISMATCH")
        return 1
    print("default_stream: memset_async + 2 memcpy_async on stream 0, synchronize_device, verified: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
