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

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_DEVICE_TO_DEVICE = 1, 2, 3
ACL_EVENT_SYNC = 0x1
NPY_UINT8 = 2
SIZE = 8 << 20


def check(what, ret):
    if ret != ACL_SUCCESS:
        raise SystemExit(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def main():
    check("init", acl.init())
    count, ret = acl.rt.get_device_count()
    check("get_device_count", ret)
    last = count - 1
    peer, ret = acl.rt.device_can_access_peer(0, last)
    check("device_can_access_peer", ret)

    check("set_device", acl.rt.set_device(last))
    stream_last, ret = acl.rt.create_stream()
    check("create_stream", ret)
    dst, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
    check("malloc", ret)
    notify, ret = acl.rt.create_notify(0)
    check("create_notify", ret)
    if peer:
        check("enable_peer_access", acl.rt.device_enable_peer_access(0, 0))

    check("set_device", acl.rt.set_device(0))
    if peer:
        check("enable_peer_access", acl.rt.device_enable_peer_access(last, 0))
    stream_a, ret = acl.rt.create_stream()
    check("create_stream", ret)
    stream_b, ret = acl.rt.create_stream()
    check("create_stream", ret)
    a, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
    check("malloc", ret)
    b, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
    check("malloc", ret)
    host, ret = acl.rt.malloc_host(SIZE)
    check("malloc_host", ret)
    data = acl.util.ptr_to_numpy(host, (SIZE,), NPY_UINT8)
    data[:] = np.arange(SIZE) % 251
    expected = data.copy()
    event, ret = acl.rt.create_event_ex_with_flag(ACL_EVENT_SYNC)
    check("create_event", ret)

    check("h2d", acl.rt.memcpy_async(a, SIZE, host, SIZE, ACL_MEMCPY_HOST_TO_DEVICE, stream_a))
    check("record_event", acl.rt.record_event(event, stream_a))
    check("stream_wait_event", acl.rt.stream_wait_event(stream_b, event))
    check("d2d", acl.rt.memcpy_async(b, SIZE, a, SIZE, ACL_MEMCPY_DEVICE_TO_DEVICE, stream_b))
    if peer:
        check("p2p", acl.rt.memcpy_async(dst, SIZE, b, SIZE, ACL_MEMCPY_DEVICE_TO_DEVICE, stream_b))
        check("sync", acl.rt.synchronize_stream(stream_b))
        how = "P2P"
    else:
        check("memset host", acl.rt.memset_async(host, SIZE, 0, SIZE, stream_b))
        check("d2h", acl.rt.memcpy_async(host, SIZE, b, SIZE, ACL_MEMCPY_DEVICE_TO_HOST, stream_b))
        check("record_notify", acl.rt.record_notify(notify, stream_b))
        check("set_device", acl.rt.set_device(last))
        check("wait_notify", acl.rt.wait_and_reset_notify(notify, stream_last, 30))
        check("h2d", acl.rt.memcpy_async(dst, SIZE, host, SIZE, ACL_MEMCPY_HOST_TO_DEVICE, stream_last))
        check("sync", acl.rt.synchronize_stream(stream_last))
        check("set_device", acl.rt.set_device(0))
        how = "staged through pinned host memory"
    check("memset host", acl.rt.memset(host, SIZE, 0, SIZE))
    check("set_device", acl.rt.set_device(last))
    check("d2h", acl.rt.memcpy_async(host, SIZE, dst, SIZE, ACL_MEMCPY_DEVICE_TO_HOST, stream_last))
    check("sync", acl.rt.synchronize_stream(stream_last))
    if not np.array_equal(data, expected):
        raise SystemExit("topology_whatif_trace: data mismatch")
    check("free", acl.rt.free(dst))
    for ptr in (a, b):
        check("free", acl.rt.free(ptr))
    check("free_host", acl.rt.free_host(host))
    check("finalize", acl.finalize())
    print(f"topology_whatif_trace: 8 MiB device 0 -> device {last} ({how}), verified: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
