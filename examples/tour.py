"""A five-minute tour of mdev: an emulated Ascend board behind the pyACL API.

    python examples/tour.py

The first call starts the board named by $MDEV_BOARD (default "default", the 8-device
HCCS preset unless $MDEV_TOPOLOGY says otherwise) in the background; it stops by itself
after a few idle seconds.  The tour

  1. shows the board: device count, SoC name, HBM and AI cores per device;
  2. round-trips data host -> device -> host on two devices;
  3. watches get_mem_info change with an allocation;
  4. makes a mistake on purpose: an out-of-bounds copy returns an error code, and
     acl.get_recent_err_msg() says what went wrong;
  5. splits an asynchronous copy over four streams.
"""

import sys
import time

import numpy as np

import mdev.acl as acl
from mdev.acl import (ACL_DEV_ATTR_AICORE_CORE_NUM, ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE, ACL_HBM_MEM,
                      ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE,
                      ACL_SUCCESS)

NPY_UINT8 = 2
MiB, GiB = 1 << 20, 1 << 30


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def show_board():
    count, ret = acl.rt.get_device_count()
    check_ret("acl.rt.get_device_count", ret)
    print(f"[1] board: {count} x {acl.get_soc_name()}")
    for dev in range(count):
        hbm, ret = acl.rt.get_device_info(dev, ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE)
        check_ret("acl.rt.get_device_info", ret)
        cores, ret = acl.rt.get_device_info(dev, ACL_DEV_ATTR_AICORE_CORE_NUM)
        check_ret("acl.rt.get_device_info", ret)
        print(f"      device {dev}: HBM {hbm / GiB:g} GiB, {cores} AI cores")
    return count


def round_trip(dev, context):
    check_ret("acl.rt.set_context", acl.rt.set_context(context))     # work on device ``dev``
    data = np.arange(1 << 16, dtype=np.float32) * (dev + 1)
    back = np.empty_like(data)
    ptr, ret = acl.rt.malloc(data.nbytes, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    check_ret("acl.rt.memcpy H2D", acl.rt.memcpy(ptr, data.nbytes, acl.util.numpy_to_ptr(data),
                                                 data.nbytes, ACL_MEMCPY_HOST_TO_DEVICE))
    check_ret("acl.rt.memcpy D2H", acl.rt.memcpy(acl.util.numpy_to_ptr(back), back.nbytes, ptr,
                                                 data.nbytes, ACL_MEMCPY_DEVICE_TO_HOST))
    check_ret("acl.rt.free", acl.rt.free(ptr))
    ok = np.array_equal(back, data)
    print(f"      device {dev}: {data.nbytes >> 10} KiB at {ptr:#x}, back on the host "
          f"{'identical' if ok else 'DIFFERENT'}")
    return ok


def mem_info_demo():
    free0, total, ret = acl.rt.get_mem_info(ACL_HBM_MEM)
    check_ret("acl.rt.get_mem_info", ret)
    ptr, ret = acl.rt.malloc(256 * MiB, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    free1, _, ret = acl.rt.get_mem_info(ACL_HBM_MEM)
    check_ret("acl.rt.get_mem_info", ret)
    check_ret("acl.rt.free", acl.rt.free(ptr))
    free2, _, ret = acl.rt.get_mem_info(ACL_HBM_MEM)
    check_ret("acl.rt.get_mem_info", ret)
    print(f"[3] device 0 HBM free: {free0 / MiB:,.0f} MiB of {total / MiB:,.0f} MiB; "
          f"after malloc(256 MiB) {free1 / MiB:,.0f} MiB; after free {free2 / MiB:,.0f} MiB")
    return free0 - free1 >= 256 * MiB and free2 == free0


def error_demo():
    ptr, ret = acl.rt.malloc(4096, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    host = np.zeros(8192, dtype=np.uint8)
    # 8 KiB into a 4 KiB allocation: refused with an error code, nothing is written
    ret = acl.rt.memcpy(ptr, 8192, acl.util.numpy_to_ptr(host), 8192, ACL_MEMCPY_HOST_TO_DEVICE)
    print(f"[4] memcpy of 8 KiB into a 4 KiB allocation: ret = {ret}")
    print(f"      acl.get_recent_err_msg(): {acl.get_recent_err_msg()}")
    check_ret("acl.rt.free", acl.rt.free(ptr))
    return ret != ACL_SUCCESS


def multi_stream_demo(streams=4, size=64 * MiB):
    chunk = size // streams
    host_in, ret = acl.rt.malloc_host(size)
    check_ret("acl.rt.malloc_host", ret)
    host_out, ret = acl.rt.malloc_host(size)
    check_ret("acl.rt.malloc_host", ret)
    dev, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    src = acl.util.ptr_to_numpy(host_in, (size,), NPY_UINT8)
    src.reshape(-1, 256)[:] = np.arange(256, dtype=np.uint8)      # 0, 1, ..., 255, 0, 1, ...
    handles = []
    for _ in range(streams):
        stream, ret = acl.rt.create_stream()
        check_ret("acl.rt.create_stream", ret)
        handles.append(stream)

    t0 = time.perf_counter()
    for i, stream in enumerate(handles):        # chunk i travels on stream i
        off = i * chunk
        check_ret("acl.rt.memcpy_async H2D", acl.rt.memcpy_async(
            dev + off, chunk, host_in + off, chunk, ACL_MEMCPY_HOST_TO_DEVICE, stream))
        check_ret("acl.rt.memcpy_async D2H", acl.rt.memcpy_async(
            host_out + off, chunk, dev + off, chunk, ACL_MEMCPY_DEVICE_TO_HOST, stream))
    for stream in handles:
        check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    elapsed = time.perf_counter() - t0

    out = acl.util.ptr_to_numpy(host_out, (size,), NPY_UINT8)
    ok = np.array_equal(out, src)
    print(f"[5] {size >> 20} MiB pinned -> device 0 -> pinned as {streams} streams x {chunk >> 20} MiB "
          f"(async H2D + D2H each): {elapsed * 1e3:.0f} ms, {'verified' if ok else 'MISMATCH'}")
    del src, out
    for stream in handles:
        check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.free", acl.rt.free(dev))
    check_ret("acl.rt.free_host", acl.rt.free_host(host_in))
    check_ret("acl.rt.free_host", acl.rt.free_host(host_out))
    return ok


def main():
    t0 = time.perf_counter()
    check_ret("acl.init", acl.init())
    count = show_board()
    if count < 2:
        print("tour: this board has a single device; use one with two or more (e.g. MDEV_TOPOLOGY=laptop2)")
        return 1
    # one set_device per device; set_context switches the calling thread between them
    contexts = []
    for dev in (0, 1):
        check_ret("acl.rt.set_device", acl.rt.set_device(dev))
        context, ret = acl.rt.get_context()
        check_ret("acl.rt.get_context", ret)
        contexts.append(context)
    print("[2] host -> device -> host round trips")
    ok = all([round_trip(0, contexts[0]), round_trip(1, contexts[1])])
    check_ret("acl.rt.set_context", acl.rt.set_context(contexts[0]))  # device 0 from here on
    ok = mem_info_demo() and ok
    ok = error_demo() and ok
    ok = multi_stream_demo() and ok
    for dev in (1, 0):
        check_ret("acl.rt.reset_device", acl.rt.reset_device(dev))
    check_ret("acl.finalize", acl.finalize())
    print(f"tour: {'all steps OK' if ok else 'SOME STEPS FAILED'} in {time.perf_counter() - t0:.2f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
