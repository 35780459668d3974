"""Move a buffer from the first device to the last, the way the board allows, and trace it.

    mdev run --topology laptop2 --trace t.json examples/topology_whatif_trace.py
    mdev trace summary t.json
    mdev whatif examples/topology_whatif_trace.py --topology hccs8 --topology islands8 --hbm 1GiB

Device 0 receives 8 MiB from pinned host memory (H2D) on stream A, records an event; stream
B of device 0 waits on it and copies the buffer inside the device (D2D).  Then the data goes
to the last device: directly (P2P) where the topology allows peer access, otherwise staged
through pinned host memory (D2H, a notify, H2D on the last device).  Finally it comes back
to the host and is checked.  An unmodified pyACL program: under ``mdev run``, ``import acl``
is mdev.acl.
"""

import sys

import numpy as np

try:
    import acl
except ImportError:                       # plain python: use mdev directly
    import mdev.acl as acl

# pyACL exports no constants: the program defines the ones it uses
ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_DEVICE_TO_DEVICE = 1, 2, 3
ACL_EVENT_SYNC = 0x1
NPY_UINT8 = 2
SIZE = 8 << 20


def check(ret, what):
    if ret != ACL_SUCCESS:
        raise SystemExit(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def main():
    check(acl.init(), "init")
    count, ret = acl.rt.get_device_count()
    check(ret, "get_device_count")
    last = count - 1
    peer, ret = acl.rt.device_can_access_peer(0, last)
    check(ret, "device_can_access_peer")

    check(acl.rt.set_device(last), "set_device")
    stream_last, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    dst, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    notify, ret = acl.rt.create_notify(0)
    check(ret, "create_notify")
    if peer:
        check(acl.rt.device_enable_peer_access(0, 0), "enable_peer_access")

    # device 0: streams A and B, buffers a and b, the pinned data and the event between A and B
    check(acl.rt.set_device(0), "set_device")
    if peer:
        check(acl.rt.device_enable_peer_access(last, 0), "enable_peer_access")
    streams, buffers = [], []
    for _ in range(2):
        stream, ret = acl.rt.create_stream()
        check(ret, "create_stream")
        buffer, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        streams.append(stream)
        buffers.append(buffer)
    (stream_a, stream_b), (a, b) = streams, buffers
    host, ret = acl.rt.malloc_host(SIZE)
    check(ret, "malloc_host")
    data = acl.util.ptr_to_numpy(host, (SIZE,), NPY_UINT8)
    data[:] = np.arange(SIZE) % 251
    expected = data.copy()
    event, ret = acl.rt.create_event_ex_with_flag(ACL_EVENT_SYNC)
    check(ret, "create_event")

    check(acl.rt.memcpy_async(a, SIZE, host, SIZE, ACL_MEMCPY_HOST_TO_DEVICE, stream_a), "h2d")
    check(acl.rt.record_event(event, stream_a), "record_event")
    check(acl.rt.stream_wait_event(stream_b, event), "stream_wait_event")
    check(acl.rt.memcpy_async(b, SIZE, a, SIZE, ACL_MEMCPY_DEVICE_TO_DEVICE, stream_b), "d2d")
    if peer:
        check(acl.rt.memcpy_async(dst, SIZE, b, SIZE, ACL_MEMCPY_DEVICE_TO_DEVICE, stream_b), "p2p")
        check(acl.rt.synchronize_stream(stream_b), "sync")
        how = "P2P"
    else:
        check(acl.rt.memset_async(host, SIZE, 0, SIZE, stream_b), "memset host")
        check(acl.rt.memcpy_async(host, SIZE, b, SIZE, ACL_MEMCPY_DEVICE_TO_HOST, stream_b), "d2h")
        check(acl.rt.record_notify(notify, stream_b), "record_notify")
        check(acl.rt.set_device(last), "set_device")
        check(acl.rt.wait_and_reset_notify(notify, stream_last, 30), "wait_notify")
        check(acl.rt.memcpy_async(dst, SIZE, host, SIZE, ACL_MEMCPY_HOST_TO_DEVICE, stream_last), "h2d")
        check(acl.rt.synchronize_stream(stream_last), "sync")
        check(acl.rt.set_device(0), "set_device")
        how = "staged through pinned host memory"
    check(acl.rt.memset(host, SIZE, 0, SIZE), "memset host")
    check(acl.rt.set_device(last), "set_device")
    check(acl.rt.memcpy_async(host, SIZE, dst, SIZE, ACL_MEMCPY_DEVICE_TO_HOST, stream_last), "d2h")
    check(acl.rt.synchronize_stream(stream_last), "sync")
    if not np.array_equal(data, expected):
        raise SystemExit("topology_whatif_trace: data mismatch")
    for ptr in (dst, a, b):
        check(acl.rt.free(ptr), "free")
    check(acl.rt.free_host(host), "free_host")
    check(acl.finalize(), "finalize")
    print(f"topology_whatif_trace: 8 MiB device 0 -> device {last} ({how}), verified: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
