"""Notify between two devices (guide 03-06 "Notify管理").

Device 0 produces chunks of data and device 1 consumes them through one pinned staging
buffer, with two notifies as the handshake:

    ready   created on device 1 (the waiter), recorded by device 0 when a chunk is staged
    free    created on device 0 (the waiter), recorded by device 1 when it has taken it

A notify's wait resets it, so each record releases exactly one wait: one chunk per
handshake, and device 0 never overwrites the staging buffer before device 1 has read it.
The host only queues work; both devices run the whole exchange by themselves.

    python examples/notify_two_devices.py
"""

import sys

import numpy as np

import mdev.acl as acl

NPY_UINT8 = 2                  # NumPy type number, as acl.util.ptr_to_numpy takes it
CHUNKS = 6
CHUNK = 4 << 20
WAIT_TIMEOUT_S = 30            # a device-side wait gives up (error at sync) after this


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def on_device(device):
    """set_device, then the notify this device waits on, a stream and a device buffer."""
    check(acl.rt.set_device(device), "set_device")
    notify, ret = acl.rt.create_notify(acl.ACL_NOTIFY_DEFAULT)
    check(ret, "create_notify")
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    dev, ret = acl.rt.malloc(CHUNK * CHUNKS, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    notify_id, ret = acl.rt.get_notify_id(notify)
    check(ret, "get_notify_id")
    return notify, stream, dev, notify_id


def release(device, notify, stream, dev):
    check(acl.rt.set_device(device), "set_device")
    check(acl.rt.free(dev), "free")
    check(acl.rt.destroy_notify(notify), "destroy_notify")
    check(acl.rt.destroy_stream(stream), "destroy_stream")


def main():
    check(acl.init(), "init")
    count, ret = acl.rt.get_device_count()
    check(ret, "get_device_count")
    if count < 2:
        print(f"notify_two_devices: needs 2 devices, the board has {count}")
        return 1
    ready, stream1, dev1, ready_id = on_device(1)     # device 1: the consumer owns "ready"
    free, stream0, dev0, free_id = on_device(0)       # device 0: the producer owns "free"
    print(f"notify 'ready' (id {ready_id}) lives on device 1, 'free' (id {free_id}) on device 0")

    source = np.repeat(np.arange(1, CHUNKS + 1, dtype=np.uint8), CHUNK)
    check(acl.rt.memcpy(dev0, source.nbytes, acl.util.numpy_to_ptr(source), source.nbytes,
                        acl.ACL_MEMCPY_HOST_TO_DEVICE), "memcpy")
    staging, ret = acl.rt.malloc_host(CHUNK)
    check(ret, "malloc_host")
    result, ret = acl.rt.malloc_host(CHUNK * CHUNKS)
    check(ret, "malloc_host")

    for i in range(CHUNKS):
        # device 0: wait until device 1 has taken the previous chunk, stage chunk i, signal
        check(acl.rt.set_device(0), "set_device")
        if i:
            check(acl.rt.wait_and_reset_notify(free, stream0, WAIT_TIMEOUT_S), "wait_and_reset_notify")
        check(acl.rt.memcpy_async(staging, CHUNK, dev0 + i * CHUNK, CHUNK, acl.ACL_MEMCPY_DEVICE_TO_HOST, stream0),
              "memcpy_async D2H")
        check(acl.rt.record_notify(ready, stream0), "record_notify")
        # device 1: wait for the chunk, take it, hand the staging buffer back
        check(acl.rt.set_device(1), "set_device")
        check(acl.rt.wait_and_reset_notify(ready, stream1, WAIT_TIMEOUT_S), "wait_and_reset_notify")
        check(acl.rt.memcpy_async(dev1 + i * CHUNK, CHUNK, staging, CHUNK, acl.ACL_MEMCPY_HOST_TO_DEVICE, stream1),
              "memcpy_async H2D")
        check(acl.rt.record_notify(free, stream1), "record_notify")
    print(f"queued {CHUNKS} chunks of {CHUNK >> 20} MiB: device 0 -> staging -> device 1")

    check(acl.rt.set_device(1), "set_device")
    check(acl.rt.memcpy_async(result, CHUNK * CHUNKS, dev1, CHUNK * CHUNKS, acl.ACL_MEMCPY_DEVICE_TO_HOST, stream1),
          "memcpy_async D2H")
    check(acl.rt.synchronize_stream(stream1), "synchronize_stream")
    check(acl.rt.set_device(0), "set_device")
    check(acl.rt.synchronize_stream(stream0), "synchronize_stream")
    got = acl.util.ptr_to_numpy(result, (CHUNK * CHUNKS,), NPY_UINT8)
    ok = bool((got == source).all())
    print(f"device 1 received chunks {[int(got[i * CHUNK]) for i in range(CHUNKS)]}")
    del got

    for host in (staging, result):
        check(acl.rt.free_host(host), "free_host")
    release(0, free, stream0, dev0)
    release(1, ready, stream1, dev1)
    for device in (0, 1):
        check(acl.rt.reset_device(device), "reset_device")
    check(acl.finalize(), "finalize")
    verdict = "OK" if ok else "MISMATCH"
    print(f"notify_two_devices: {CHUNKS} chunks handed from device 0 to device 1, verified: {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
