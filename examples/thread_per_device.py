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

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_MEMCPY_DEVICE_TO_DEVICE = 3
NPY_UINT8 = 2

SIZE = 8 << 20                           # 8 MiB per device
STRIPE = 4096                            # bytes the device overwrites with memset_async


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def job(device, barrier, results):
    check_ret("acl.rt.set_device", acl.rt.set_device(device))
    barrier.wait()                      # every thread has set a different device by now
    current, ret = acl.rt.get_device()
    check_ret("acl.rt.get_device", ret)
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    dev_a, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    dev_b, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    host, ret = acl.rt.malloc_host(SIZE)
    check_ret("acl.rt.malloc_host", ret)
    view = acl.util.ptr_to_numpy(host, (SIZE,), NPY_UINT8)
    expected = np.random.default_rng(device).integers(0, 256, SIZE, dtype=np.uint8)
    view[:] = expected
    expected[:STRIPE] = 0xA0 + device

    t0 = time.perf_counter()
    check_ret("memcpy_async H2D", acl.rt.memcpy_async(dev_a, SIZE, host, SIZE, ACL_MEMCPY_HOST_TO_DEVICE, stream))
    check_ret("memcpy_async D2D", acl.rt.memcpy_async(dev_b, SIZE, dev_a, SIZE, ACL_MEMCPY_DEVICE_TO_DEVICE, stream))
    check_ret("memset_async", acl.rt.memset_async(dev_b, SIZE, 0xA0 + device, STRIPE, stream))
    check_ret("memcpy_async D2H", acl.rt.memcpy_async(host, SIZE, dev_b, SIZE, ACL_MEMCPY_DEVICE_TO_HOST, stream))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    elapsed = time.perf_counter() - t0

    same = bool(np.array_equal(view, expected))
    del view
    check_ret("acl.rt.free", acl.rt.free(dev_a))
    check_ret("acl.rt.free", acl.rt.free(dev_b))
    check_ret("acl.rt.free_host", acl.rt.free_host(host))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(device))
    results[device] = (current, same, elapsed)


def main():
    check_ret("acl.init", acl.init())
    count, ret = acl.rt.get_device_count()
    check_ret("acl.rt.get_device_count", ret)
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
    for device in sorted(results):
        current, same, elapsed = results[device]
        ok &= same and current == device
        print(f"thread device-{device}: get_device -> {current}, 4 tasks on its stream in "
              f"{elapsed * 1e3:.1f} ms, data {'verified' if same else 'MISMATCH'}")
    # the main thread never set a device: it has no current device
    _, ret = acl.rt.get_device()
    print(f"main thread: get_device -> ret {ret} (no device of its own)")
    check_ret("acl.finalize", acl.finalize())

    if not ok:
        print("thread_per_device: FAILED")
        return 1
    print(f"thread_per_device: {count} threads, each drove its own device, "
          f"{SIZE >> 20} MiB per device verified: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
