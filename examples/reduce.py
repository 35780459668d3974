"""SDMA reduce (guide 03-04 "系统任务", aclrtReduceAsync).

``reduce_async(dst, src, count, kind, type, stream, reserve)`` combines ``src`` into
``dst`` element by element on the device: ``dst[i] = op(dst[i], src[i])``; ``count`` is in
bytes.  The guide's example: input {1, 2, 3, 4} reduced (SUM) into a copy of itself gives
{2, 4, 6, 8}.  MAX and MIN work the same way.

    python examples/reduce.py
"""

import sys

import numpy as np

import mdev.acl as acl

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_MEMCPY_DEVICE_TO_DEVICE = 3
ACL_FLOAT = 0
ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM = 10
ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX = 11
ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN = 12

DEVICE_ID = 0


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def main():
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)

    host = np.array([1, 2, 3, 4], dtype=np.float32)
    size = host.nbytes
    src, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    dst, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    check_ret("acl.rt.memcpy", acl.rt.memcpy(src, size, acl.util.numpy_to_ptr(host), size, ACL_MEMCPY_HOST_TO_DEVICE))

    results = {}
    other = np.array([4, 3, 2, 1], dtype=np.float32)
    for name, kind, dst_init in (("SUM", ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, host),
                                 ("MAX", ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX, other),
                                 ("MIN", ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN, other)):
        check_ret("acl.rt.memcpy", acl.rt.memcpy(dst, size, acl.util.numpy_to_ptr(dst_init), size,
                                                 ACL_MEMCPY_HOST_TO_DEVICE))
        check_ret("acl.rt.reduce_async", acl.rt.reduce_async(dst, src, size, kind, ACL_FLOAT, stream, None))
        check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
        out = np.zeros(4, dtype=np.float32)
        check_ret("acl.rt.memcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(out), size, dst, size, ACL_MEMCPY_DEVICE_TO_HOST))
        results[name] = out
        print(f"{name}: dst {dst_init} op= src {host} -> {out}")

    ok = (np.array_equal(results["SUM"], [2, 4, 6, 8]) and np.array_equal(results["MAX"], [4, 3, 3, 4])
          and np.array_equal(results["MIN"], [1, 2, 2, 1]))
    for ptr in (src, dst):
        check_ret("acl.rt.free", acl.rt.free(ptr))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())
    if not ok:
        print("reduce: MISMATCH")
        return 1
    print(f"reduce: SUM of {{1,2,3,4}} into a copy of itself = {results['SUM']}, MAX and MIN verified: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
