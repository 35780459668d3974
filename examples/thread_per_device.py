"""One host thread per device (guide 05 "多设备编程总述", second pattern).

Each thread calls set_device for its own device: the current device (and context) is per
thread, so the threads never disturb each other.  Every thread then runs the same job on
its device and checks the result byte for byte:

    set_device(d) -> create_stream -> malloc x2 -> malloc_host -> fill
    -> memcpy_async H2D -> memcpy_async D2D -> memset_async (a stripe) -> memcpy_async D2H
    -> synchronize_stream -> verify -> free -> destroy_stream -> reset_device(d)

    python examples/thread_per_device.py
"""

import sys
import threading
import time

import numpy as np

import mdev.acl as acl

NPY_UINT8 = 2                            # NumPy type number, as acl.util.ptr_to_numpy takes it
SIZE = 8 << 20                           # 8 MiB per device
STRIPE = 4096                            # bytes the device overwrites with memset_async


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def job(device, barrier, results):
    check(acl.rt.set_device(device), "set_device")
    barrier.wait()                      # every thread has set a different device by now
    current, ret = acl.rt.get_device()
    check(ret, "get_device")
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    dev_a, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    dev_b, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    host, ret = acl.rt.malloc_host(SIZE)
    check(ret, "malloc_host")
    view = acl.util.ptr_to_numpy(host, (SIZE,), NPY_UINT8)
    expected = np.random.default_rng(device).integers(0, 256, SIZE, dtype=np.uint8)
    view[:] = expected
    expected[:STRIPE] = 0xA0 + device

    t0 = time.perf_counter()
    check(acl.rt.memcpy_async(dev_a, SIZE, host, SIZE, acl.ACL_MEMCPY_HOST_TO_DEVICE, stream), "memcpy_async H2D")
    check(acl.rt.memcpy_async(dev_b, SIZE, dev_a, SIZE, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, stream), "memcpy_async D2D")
    check(acl.rt.memset_async(dev_b, SIZE, 0xA0 + device, STRIPE, stream), "memset_async")
    check(acl.rt.memcpy_async(host, SIZE, dev_b, SIZE, acl.ACL_MEMCPY_DEVICE_TO_HOST, stream), "memcpy_async D2H")
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    elapsed = time.perf_counter() - t0
    same = bool(np.array_equal(view, expected))

    del view
    for ptr in (dev_a, dev_b):
        check(acl.rt.free(ptr), "free")
    check(acl.rt.free_host(host), "free_host")
    check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(device), "reset_device")
    results[device] = (current, same, elapsed)


def main():
    check(acl.init(), "init")
    count, ret = acl.rt.get_device_count()
    check(ret, "get_device_count")
    barrier = threading.Barrier(count)
    results, errors = {}, []

    def run(device):
        try:
            job(device, barrier, results)
        except Exception as exc:       # report it from the main thread
            errors.append(f"device {device}: {exc}")
            barrier.abort()

    threads = [threading.Thread(target=run, args=(d,), name=f"device-{d}") for d in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for error in errors:
        print(error)

    ok = not errors and len(results) == count
    for device, (current, same, elapsed) in sorted(results.items()):
        ok &= same and current == device
        print(f"thread device-{device}: get_device -> {current}, 4 tasks on its stream in "
              f"{elapsed * 1e3:.1f} ms, data {'verified' if same else 'MISMATCH'}")
    # the main thread never set a device: it has no current device
    _, ret = acl.rt.get_device()
    print(f"main thread: get_device -> ret {ret} (no device of its own)")
    check(acl.finalize(), "finalize")
    print(f"thread_per_device: {count} threads, each drove its own device, "
          f"{SIZE >> 20} MiB per device verified: {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
