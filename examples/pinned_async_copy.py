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

NPY_FLOAT32 = 11                         # NumPy type number taken by acl.util.ptr_to_numpy
DEVICE_ID = 0
N = 1 << 20                              # 1 Mi float32 = 4 MiB


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def main():
    check(acl.init(), "init")
    check(acl.rt.set_device(DEVICE_ID), "set_device")
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")

    size = N * 4
    pinned = []                          # page-locked host buffers: source, destination
    for fill in (np.arange(N, dtype=np.float32) * 0.5, -1.0):
        host, ret = acl.rt.malloc_host(size)
        check(ret, "malloc_host")
        # fill it through a numpy view of the pinned buffer (no copy)
        acl.util.ptr_to_numpy(host, (N,), NPY_FLOAT32)[:] = fill
        pinned.append(host)
    host_src, host_dst = pinned
    dev_ptr, ret = acl.rt.malloc(size, acl.ACL_MEM_MALLOC_NORMAL_ONLY)
    check(ret, "malloc")

    # asynchronous H2D then D2H on one stream: they run in order on the device
    check(acl.rt.memcpy_async(dev_ptr, size, host_src, size, acl.ACL_MEMCPY_HOST_TO_DEVICE, stream),
          "memcpy_async H2D")
    check(acl.rt.memcpy_async(host_dst, size, dev_ptr, size, acl.ACL_MEMCPY_DEVICE_TO_HOST, stream),
          "memcpy_async D2H")
    # the host is free until here: wait for both copies
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")

    src, dst = (acl.util.ptr_to_numpy(host, (N,), NPY_FLOAT32) for host in pinned)
    ok = np.array_equal(dst, src)
    print(f"pinned dst after the round trip: {dst[:4]} ... {dst[-1]}")
    del src, dst                         # views of the pinned buffers go before the buffers

    check(acl.rt.free(dev_ptr), "free")
    for host in pinned:
        check(acl.rt.free_host(host), "free_host")
    check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(DEVICE_ID), "reset_device")
    check(acl.finalize(), "finalize")
    verdict = "OK" if ok else "MISMATCH"
    print(f"pinned_async_copy: {size >> 20} MiB pinned -> device {DEVICE_ID} -> pinned with memcpy_async on one "
          f"stream, verified: {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
