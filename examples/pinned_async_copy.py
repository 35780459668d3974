"""Pinned (page-locked) host memory and asynchronous copies (guide 02 "Host锁页内存使用").

Memory from ``malloc_host`` is page-locked: the device reaches it by DMA, so
``memcpy_async`` returns at once and the copy overlaps with the host's work until
``synchronize_stream``.

    malloc_host -> fill through ptr_to_numpy -> malloc (device) -> create_stream
    -> memcpy_async H2D -> memcpy_async D2H -> synchronize_stream -> verify -> free

    python examples/pinned_async_copy.py
"""

import sys

import numpy as np

import mdev.acl as acl

ACL_SUCCESS = 0
ACL_MEM_MALLOC_NORMAL_ONLY = 2
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
NPY_FLOAT32 = 11                         # NumPy type number taken by acl.util.ptr_to_numpy

DEVICE_ID = 0
N = 1 << 20                              # 1 Mi float32 = 4 MiB


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def main():
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)

    size = N * 4
    # page-locked host buffers
    host_src, ret = acl.rt.malloc_host(size)
    check_ret("acl.rt.malloc_host", ret)
    host_dst, ret = acl.rt.malloc_host(size)
    check_ret("acl.rt.malloc_host", ret)
    # fill the source through a numpy view of the pinned buffer (no copy)
    src = acl.util.ptr_to_numpy(host_src, (N,), NPY_FLOAT32)
    src[:] = np.arange(N, dtype=np.float32) * 0.5
    dst = acl.util.ptr_to_numpy(host_dst, (N,), NPY_FLOAT32)
    dst[:] = -1.0

    dev_ptr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_NORMAL_ONLY)
    check_ret("acl.rt.malloc", ret)

    # asynchronous H2D then D2H on one stream: they run in order on the device
    ret = acl.rt.memcpy_async(dev_ptr, size, host_src, size, ACL_MEMCPY_HOST_TO_DEVICE, stream)
    check_ret("acl.rt.memcpy_async H2D", ret)
    ret = acl.rt.memcpy_async(host_dst, size, dev_ptr, size, ACL_MEMCPY_DEVICE_TO_HOST, stream)
    check_ret("acl.rt.memcpy_async D2H", ret)

    # wait for both copies
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))

    ok = np.array_equal(dst, src)
    print(f"pinned dst after the round trip: {dst[:4]} ... {dst[-1]}")

    del src, dst                         # views of the pinned buffers go before the buffers
    check_ret("acl.rt.free", acl.rt.free(dev_ptr))
    check_ret("acl.rt.free_host", acl.rt.free_host(host_src))
    check_ret("acl.rt.free_host", acl.rt.free_host(host_dst))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())

    if not ok:
        print("pinned_async_copy: MISMATCH")
        return 1
    print(f"pinned_async_copy: {size >> 20} MiB pinned -> device {DEVICE_ID} -> pinned "
          f"with memcpy_async on one stream, verified: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
