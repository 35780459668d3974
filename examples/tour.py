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

NPY_UINT8 = 2                            # NumPy type number, as acl.util.ptr_to_numpy takes it
MiB, GiB = 1 << 20, 1 << 30


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def show_board():
    count, ret = acl.rt.get_device_count()
    check(ret, "get_device_count")
    print(f"[1] board: {count} x {acl.get_soc_name()}")
    for dev in range(count):
        hbm, ret = acl.rt.get_device_info(dev, acl.ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE)
        check(ret, "get_device_info")
        cores, ret = acl.rt.get_device_info(dev, acl.ACL_DEV_ATTR_AICORE_CORE_NUM)
        check(ret, "get_device_info")
        print(f"      device {dev}: HBM {hbm / GiB:g} GiB, {cores} AI cores")
    return count


def round_trip(dev, context):
    check(acl.rt.set_context(context), "set_context")     # work on device ``dev``
    data = np.arange(1 << 16, dtype=np.float32) * (dev + 1)
    back = np.empty_like(data)
    ptr, ret = acl.rt.malloc(data.nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    check(acl.rt.memcpy(ptr, data.nbytes, acl.util.numpy_to_ptr(data), data.nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE),
          "memcpy H2D")
    check(acl.rt.memcpy(acl.util.numpy_to_ptr(back), back.nbytes, ptr, data.nbytes, acl.ACL_MEMCPY_DEVICE_TO_HOST),
          "memcpy D2H")
    check(acl.rt.free(ptr), "free")
    ok = np.array_equal(back, data)
    print(f"      device {dev}: {data.nbytes >> 10} KiB at {ptr:#x}, back on the host "
          f"{'identical' if ok else 'DIFFERENT'}")
    return ok


def mem_info_demo():
    def hbm_free():
        free, total, ret = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
        check(ret, "get_mem_info")
        return free, total

    free0, total = hbm_free()
    ptr, ret = acl.rt.malloc(256 * MiB, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    free1, _ = hbm_free()
    check(acl.rt.free(ptr), "free")
    free2, _ = hbm_free()
    print(f"[3] device 0 HBM free: {free0 / MiB:,.0f} MiB of {total / MiB:,.0f} MiB; "
          f"after malloc(256 MiB) {free1 / MiB:,.0f} MiB; after free {free2 / MiB:,.0f} MiB")
    return free0 - free1 >= 256 * MiB and free2 == free0


def error_demo():
    ptr, ret = acl.rt.malloc(4096, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    host = np.zeros(8192, dtype=np.uint8)
    # 8 KiB into a 4 KiB allocation: refused with an error code, nothing is written
    ret = acl.rt.memcpy(ptr, 8192, acl.util.numpy_to_ptr(host), 8192, acl.ACL_MEMCPY_HOST_TO_DEVICE)
    print(f"[4] memcpy of 8 KiB into a 4 KiB allocation: ret = {ret}")
    print(f"      acl.get_recent_err_msg(): {acl.get_recent_err_msg()}")
    check(acl.rt.free(ptr), "free")
    return ret != acl.ACL_SUCCESS


def multi_stream_demo(streams=4, size=64 * MiB):
    chunk = size // streams
    pinned = []
    for _ in range(2):
        host, ret = acl.rt.malloc_host(size)
        check(ret, "malloc_host")
        pinned.append(host)
    host_in, host_out = pinned
    dev, ret = acl.rt.malloc(size, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    src = acl.util.ptr_to_numpy(host_in, (size,), NPY_UINT8)
    src.reshape(-1, 256)[:] = np.arange(256, dtype=np.uint8)      # 0, 1, ..., 255, 0, 1, ...
    handles = []
    for _ in range(streams):
        stream, ret = acl.rt.create_stream()
        check(ret, "create_stream")
        handles.append(stream)

    t0 = time.perf_counter()
    for i, stream in enumerate(handles):        # chunk i travels on stream i
        off = i * chunk
        check(acl.rt.memcpy_async(dev + off, chunk, host_in + off, chunk, acl.ACL_MEMCPY_HOST_TO_DEVICE, stream),
              "memcpy_async H2D")
        check(acl.rt.memcpy_async(host_out + off, chunk, dev + off, chunk, acl.ACL_MEMCPY_DEVICE_TO_HOST, stream),
              "memcpy_async D2H")
    for stream in handles:
        check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    elapsed = time.perf_counter() - t0

    ok = np.array_equal(acl.util.ptr_to_numpy(host_out, (size,), NPY_UINT8), src)
    print(f"[5] {size >> 20} MiB pinned -> device 0 -> pinned as {streams} streams x {chunk >> 20} MiB "
          f"(async H2D + D2H each): {elapsed * 1e3:.0f} ms, {'verified' if ok else 'MISMATCH'}")
    del src
    for stream in handles:
        check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.free(dev), "free")
    for host in pinned:
        check(acl.rt.free_host(host), "free_host")
    return ok


def main():
    t0 = time.perf_counter()
    check(acl.init(), "init")
    count = show_board()
    if count < 2:
        print("tour: this board has a single device; use one with two or more (e.g. MDEV_TOPOLOGY=laptop2)")
        return 1
    # one set_device per device; set_context switches the calling thread between them
    contexts = []
    for dev in (0, 1):
        check(acl.rt.set_device(dev), "set_device")
        context, ret = acl.rt.get_context()
        check(ret, "get_context")
        contexts.append(context)
    print("[2] host -> device -> host round trips")
    ok = all([round_trip(0, contexts[0]), round_trip(1, contexts[1])])
    check(acl.rt.set_context(contexts[0]), "set_context")  # device 0 from here on
    ok = mem_info_demo() and ok
    ok = error_demo() and ok
    ok = multi_stream_demo() and ok
    for dev in (1, 0):
        check(acl.rt.reset_device(dev), "reset_device")
    check(acl.finalize(), "finalize")
    print(f"tour: {'all steps OK' if ok else 'SOME STEPS FAILED'} in {time.perf_counter() - t0:.2f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
