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

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_NOTIFY_DEFAULT = 0
NPY_UINT8 = 2

CHUNKS = 6
CHUNK = 4 << 20
WAIT_TIMEOUT_S = 30            # a device-side wait gives up (error at sync) after this


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def main():
    check_ret("acl.init", acl.init())
    count, ret = acl.rt.get_device_count()
    check_ret("acl.rt.get_device_count", ret)
    if count < 2:
        print(f"notify_two_devices: needs 2 devices, the board has {count}")
        return 1

    # device 1: the consumer owns "ready"
    check_ret("acl.rt.set_device", acl.rt.set_device(1))
    ready, ret = acl.rt.create_notify(ACL_NOTIFY_DEFAULT)
    check_ret("acl.rt.create_notify", ret)
    stream1, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    dev1, ret = acl.rt.malloc(CHUNK * CHUNKS, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    ready_id, ret = acl.rt.get_notify_id(ready)
    check_ret("acl.rt.get_notify_id", ret)

    # device 0: the producer owns "free"
    check_ret("acl.rt.set_device", acl.rt.set_device(0))
    free, ret = acl.rt.create_notify(ACL_NOTIFY_DEFAULT)
    check_ret("acl.rt.create_notify", ret)
    stream0, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    dev0, ret = acl.rt.malloc(CHUNK * CHUNKS, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    free_id, ret = acl.rt.get_notify_id(free)
    check_ret("acl.rt.get_notify_id", ret)
    print(f"notify 'ready' (id {ready_id}) lives on device 1, 'free' (id {free_id}) on device 0")

    source = np.repeat(np.arange(1, CHUNKS + 1, dtype=np.uint8), CHUNK)
    ret = acl.rt.memcpy(dev0, source.nbytes, acl.util.numpy_to_ptr(source), source.nbytes,
                        ACL_MEMCPY_HOST_TO_DEVICE)
    check_ret("acl.rt.memcpy", ret)
    staging, ret = acl.rt.malloc_host(CHUNK)
    check_ret("acl.rt.malloc_host", ret)
    result, ret = acl.rt.malloc_host(CHUNK * CHUNKS)
    check_ret("acl.rt.malloc_host", ret)

    for i in range(CHUNKS):
        # device 0: wait until device 1 has taken the previous chunk, stage chunk i, signal
        check_ret("acl.rt.set_device", acl.rt.set_device(0))
        if i:
            check_ret("acl.rt.wait_and_reset_notify",
                      acl.rt.wait_and_reset_notify(free, stream0, WAIT_TIMEOUT_S))
        ret = acl.rt.memcpy_async(staging, CHUNK, dev0 + i * CHUNK, CHUNK, ACL_MEMCPY_DEVICE_TO_HOST, stream0)
        check_ret("acl.rt.memcpy_async D2H", ret)
        check_ret("acl.rt.record_notify", acl.rt.record_notify(ready, stream0))
        # device 1: wait for the chunk, take it, hand the staging buffer back
        check_ret("acl.rt.set_device", acl.rt.set_device(1))
        check_ret("acl.rt.wait_and_reset_notify",
                  acl.rt.wait_and_reset_notify(ready, stream1, WAIT_TIMEOUT_S))
        ret = acl.rt.memcpy_async(dev1 + i * CHUNK, CHUNK, staging, CHUNK, ACL_MEMCPY_HOST_TO_DEVICE, stream1)
        check_ret("acl.rt.memcpy_async H2D", ret)
        check_ret("acl.rt.record_notify", acl.rt.record_notify(free, stream1))
    print(f"queued {CHUNKS} chunks of {CHUNK >> 20} MiB: device 0 -> staging -> device 1")

    check_ret("acl.rt.set_device", acl.rt.set_device(1))
    ret = acl.rt.memcpy_async(result, CHUNK * CHUNKS, dev1, CHUNK * CHUNKS, ACL_MEMCPY_DEVICE_TO_HOST, stream1)
    check_ret("acl.rt.memcpy_async D2H", ret)
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream1))
    check_ret("acl.rt.set_device", acl.rt.set_device(0))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream0))

    got = acl.util.ptr_to_numpy(result, (CHUNK * CHUNKS,), NPY_UINT8)
    ok = bool((got == source).all())
    chunks_seen = [int(got[i * CHUNK]) for i in range(CHUNKS)]
    del got
    print(f"device 1 received chunks {chunks_seen}")

    check_ret("acl.rt.free_host", acl.rt.free_host(staging))
    check_ret("acl.rt.free_host", acl.rt.free_host(result))
    check_ret("acl.rt.free", acl.rt.free(dev0))
    check_ret("acl.rt.destroy_notify", acl.rt.destroy_notify(free))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream0))
    check_ret("acl.rt.set_device", acl.rt.set_device(1))
    check_ret("acl.rt.free", acl.rt.free(dev1))
    check_ret("acl.rt.destroy_notify", acl.rt.destroy_notify(ready))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream1))
    for device in (0, 1):
        check_ret("acl.rt.reset_device", acl.rt.reset_device(device))
    check_ret("acl.finalize", acl.finalize())

    if not ok:
        print("notify_two_devices: MISMATCH")
        return 1
    print(f"notify_two_devices: {CHUNKS} chunks handed from device 0 to device 1, verified: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
