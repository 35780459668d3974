"""All-to-all exchange across every device of the board, ordered by notifies.

Device s holds one block for every device d in ``send[s]`` and pushes it into slot s of
``recv[d]`` with a peer copy; right after the copy it records notify[d][s], a notify owned
by the receiver.  The receiver's stream waits for (and so resets) each of its notifies
before reading what arrived.  The host only queues work; the devices run the exchange.

    per device: a send stream (copies + record_notify) and a receive stream
    receivers first:  wait_and_reset_notify x (n-1) -> memcpy_async D2H into pinned memory
    senders:          for each peer: memcpy_async D2D (peer access) -> record_notify
    host:             synchronize the receive streams -> verify every block

    python examples/all_to_all_notify.py
"""

import sys
import time

import numpy as np

import mdev.acl as acl

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_MEMCPY_DEVICE_TO_DEVICE = 3
ACL_NOTIFY_DEFAULT = 0
NPY_UINT8 = 2

BLOCK = 4 << 20                 # bytes each device sends to each other device
WAIT_TIMEOUT_S = 60             # a device-side notify wait gives up (error at sync) after this


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def block_of(src, dst):
    """The bytes device ``src`` sends to device ``dst``."""
    return np.random.default_rng(src * 1000 + dst).integers(0, 256, BLOCK, dtype=np.uint8)


def main():
    check_ret("acl.init", acl.init())
    n, ret = acl.rt.get_device_count()
    check_ret("acl.rt.get_device_count", ret)

    # peer access from every device to every other one (each direction is its own call)
    for a in range(n):
        check_ret("acl.rt.set_device", acl.rt.set_device(a))
        for b in range(n):
            if a == b:
                continue
            can, ret = acl.rt.device_can_access_peer(a, b)
            check_ret("acl.rt.device_can_access_peer", ret)
            if not can:
                print(f"all_to_all_notify: devices {a} and {b} cannot use peer access on this board")
                return 1
            check_ret("acl.rt.device_enable_peer_access", acl.rt.device_enable_peer_access(b, 0))

    ctx, tx, rx, send, recv, host, notify = {}, {}, {}, {}, {}, {}, {}
    for d in range(n):
        check_ret("acl.rt.set_device", acl.rt.set_device(d))
        ctx[d], ret = acl.rt.get_context()
        check_ret("acl.rt.get_context", ret)
        tx[d], ret = acl.rt.create_stream()
        check_ret("acl.rt.create_stream", ret)
        rx[d], ret = acl.rt.create_stream()
        check_ret("acl.rt.create_stream", ret)
        send[d], ret = acl.rt.malloc(n * BLOCK, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("acl.rt.malloc", ret)
        recv[d], ret = acl.rt.malloc(n * BLOCK, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("acl.rt.malloc", ret)
        check_ret("acl.rt.memset", acl.rt.memset(recv[d], n * BLOCK, 0, n * BLOCK))
        host[d], ret = acl.rt.malloc_host(n * BLOCK)
        check_ret("acl.rt.malloc_host", ret)
        outgoing = np.concatenate([block_of(d, p) if p != d else np.zeros(BLOCK, np.uint8) for p in range(n)])
        ret = acl.rt.memcpy(send[d], n * BLOCK, acl.util.numpy_to_ptr(outgoing), n * BLOCK,
                            ACL_MEMCPY_HOST_TO_DEVICE)
        check_ret("acl.rt.memcpy H2D", ret)
        notify[d] = {}
        for s in range(n):                # the receiver owns the notifies it waits on
            if s != d:
                notify[d][s], ret = acl.rt.create_notify(ACL_NOTIFY_DEFAULT)
                check_ret("acl.rt.create_notify", ret)
    print(f"{n} devices, {n * (n - 1)} blocks of {BLOCK >> 20} MiB, {n * (n - 1)} notifies")

    t0 = time.perf_counter()
    # receivers: wait for every sender, then read the whole receive buffer
    for d in range(n):
        check_ret("acl.rt.set_context", acl.rt.set_context(ctx[d]))
        for s in range(n):
            if s != d:
                ret = acl.rt.wait_and_reset_notify(notify[d][s], rx[d], WAIT_TIMEOUT_S)
                check_ret("acl.rt.wait_and_reset_notify", ret)
        ret = acl.rt.memcpy_async(host[d], n * BLOCK, recv[d], n * BLOCK, ACL_MEMCPY_DEVICE_TO_HOST, rx[d])
        check_ret("acl.rt.memcpy_async D2H", ret)
    # senders: push each block into the receiver's buffer, then notify the receiver
    t1 = time.perf_counter()
    for s in range(n):
        check_ret("acl.rt.set_context", acl.rt.set_context(ctx[s]))
        for k in range(1, n):             # staggered: device s first feeds s+1, then s+2, ...
            d = (s + k) % n
            ret = acl.rt.memcpy_async(recv[d] + s * BLOCK, BLOCK, send[s] + d * BLOCK, BLOCK,
                                      ACL_MEMCPY_DEVICE_TO_DEVICE, tx[s])
            check_ret("acl.rt.memcpy_async D2D", ret)
            check_ret("acl.rt.record_notify", acl.rt.record_notify(notify[d][s], tx[s]))
    for d in range(n):
        check_ret("acl.rt.set_context", acl.rt.set_context(ctx[d]))
        check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(tx[d]))
    t2 = time.perf_counter()
    for d in range(n):
        check_ret("acl.rt.set_context", acl.rt.set_context(ctx[d]))
        check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(rx[d]))

    ok = True
    for d in range(n):
        got = acl.util.ptr_to_numpy(host[d], (n, BLOCK), NPY_UINT8)
        for s in range(n):
            expected = block_of(s, d) if s != d else np.zeros(BLOCK, np.uint8)
            if not np.array_equal(got[s], expected):
                print(f"device {d}: block from device {s} MISMATCH")
                ok = False
        del got
    moved = n * (n - 1) * BLOCK
    exchange = t2 - t1
    print(f"exchange (senders queued -> every send stream drained): {exchange * 1e3:.1f} ms, "
          f"{moved / exchange / 1e9:.2f} GB/s aggregate over {n * (n - 1)} peer copies")
    print(f"whole run incl. queuing the waits: {(t2 - t0) * 1e3:.1f} ms")

    for d in range(n):
        check_ret("acl.rt.set_context", acl.rt.set_context(ctx[d]))
        for s, handle in notify[d].items():
            check_ret("acl.rt.destroy_notify", acl.rt.destroy_notify(handle))
        check_ret("acl.rt.free", acl.rt.free(send[d]))
        check_ret("acl.rt.free", acl.rt.free(recv[d]))
        check_ret("acl.rt.free_host", acl.rt.free_host(host[d]))
        check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(tx[d]))
        check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(rx[d]))
        for p in range(n):
            if p != d:
                check_ret("acl.rt.device_disable_peer_access", acl.rt.device_disable_peer_access(p))
    for d in range(n):
        check_ret("acl.rt.reset_device", acl.rt.reset_device(d))
    check_ret("acl.finalize", acl.finalize())

    if not ok:
        print("all_to_all_notify: MISMATCH")
        return 1
    print(f"all_to_all_notify: {n} devices exchanged {n * (n - 1)} blocks of {BLOCK >> 20} MiB, "
          f"ordered by notifies, verified: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
