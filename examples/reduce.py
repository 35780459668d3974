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

DEVICE_ID = 0


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def copy(dst, src, nbytes, kind):
    check(acl.rt.memcpy(dst, nbytes, src, nbytes, kind), "memcpy")


def main():
    check(acl.init(), "init")
    check(acl.rt.set_device(DEVICE_ID), "set_device")
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")

    host = np.array([1, 2, 3, 4], dtype=np.float32)
    size = host.nbytes
    src, ret = acl.rt.malloc(size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    dst, ret = acl.rt.malloc(size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    copy(src, acl.util.numpy_to_ptr(host), size, acl.ACL_MEMCPY_HOST_TO_DEVICE)

    results = {}
    other = np.array([4, 3, 2, 1], dtype=np.float32)
    for name, kind, dst_init in (("SUM", acl.ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, host),
                                 ("MAX", acl.ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX, other),
                                 ("MIN", acl.ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN, other)):
        copy(dst, acl.util.numpy_to_ptr(dst_init), size, acl.ACL_MEMCPY_HOST_TO_DEVICE)
        # dst[i] = op(dst[i], src[i]); count in bytes
        check(acl.rt.reduce_async(dst, src, size, kind, acl.ACL_FLOAT, stream, None), "reduce_async")
        check(acl.rt.synchronize_stream(stream), "synchronize_stream")
        results[name] = np.zeros(4, dtype=np.float32)
        copy(acl.util.numpy_to_ptr(results[name]), dst, size, acl.ACL_MEMCPY_DEVICE_TO_HOST)
        print(f"{name}: dst {dst_init} op= src {host} -> {results[name]}")

    for ptr in (src, dst):
        check(acl.rt.free(ptr), "free")
    check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(DEVICE_ID), "reset_device")
    check(acl.finalize(), "finalize")
    ok = (np.array_equal(results["SUM"], [2, 4, 6, 8]) and np.array_equal(results["MAX"], [4, 3, 3, 4])
          and np.array_equal(results["MIN"], [1, 2, 2, 1]))
    print(f"reduce: SUM of {{1,2,3,4}} into a copy of itself = {results['SUM']}, MAX and MIN verified: "
          f"{'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
