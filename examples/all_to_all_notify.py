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

NPY_UINT8 = 2                   # NumPy type number, as acl.util.ptr_to_numpy takes it
BLOCK = 4 << 20                 # bytes each device sends to each other device
WAIT_TIMEOUT_S = 60             # a device-side notify wait gives up (error at sync) after this


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def block_of(src, dst):
    """The bytes device ``src`` sends to device ``dst`` (nothing to itself: zeros)."""
    if src == dst:
        return np.zeros(BLOCK, np.uint8)
    return np.random.default_rng(src * 1000 + dst).integers(0, 256, BLOCK, dtype=np.uint8)


def synchronize_each(contexts, streams):
    """Wait for one stream of every device, each with its own device current."""
    for d, context in contexts.items():
        check(acl.rt.set_context(context), "set_context")
        check(acl.rt.synchronize_stream(streams[d]), "synchronize_stream")


def main():
    check(acl.init(), "init")
    n, ret = acl.rt.get_device_count()
    check(ret, "get_device_count")

    # peer access from every device to every other one (each direction is its own call)
    for a in range(n):
        check(acl.rt.set_device(a), "set_device")
        for b in range(n):
            if a == b:
                continue
            can, ret = acl.rt.device_can_access_peer(a, b)
            check(ret, "device_can_access_peer")
            if not can:
                print(f"all_to_all_notify: devices {a} and {b} cannot use peer access on this board")
                return 1
            check(acl.rt.device_enable_peer_access(b, 0), "device_enable_peer_access")

    ctx, tx, rx, send, recv, host, notify = {}, {}, {}, {}, {}, {}, {}
    for d in range(n):
        check(acl.rt.set_device(d), "set_device")
        ctx[d], ret = acl.rt.get_context()
        check(ret, "get_context")
        tx[d], ret = acl.rt.create_stream()
        check(ret, "create_stream")
        rx[d], ret = acl.rt.create_stream()
        check(ret, "create_stream")
        send[d], ret = acl.rt.malloc(n * BLOCK, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        recv[d], ret = acl.rt.malloc(n * BLOCK, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        check(acl.rt.memset(recv[d], n * BLOCK, 0, n * BLOCK), "memset")
        host[d], ret = acl.rt.malloc_host(n * BLOCK)
        check(ret, "malloc_host")
        outgoing = np.concatenate([block_of(d, p) for p in range(n)])
        check(acl.rt.memcpy(send[d], n * BLOCK, acl.util.numpy_to_ptr(outgoing), n * BLOCK,
                            acl.ACL_MEMCPY_HOST_TO_DEVICE), "memcpy H2D")
        notify[d] = {}
        for s in range(n):                # the receiver owns the notifies it waits on
            if s != d:
                notify[d][s], ret = acl.rt.create_notify(acl.ACL_NOTIFY_DEFAULT)
                check(ret, "create_notify")
    print(f"{n} devices, {n * (n - 1)} blocks of {BLOCK >> 20} MiB, {n * (n - 1)} notifies")

    t0 = time.perf_counter()
    # receivers: wait for every sender, then read the whole receive buffer
    for d in range(n):
        check(acl.rt.set_context(ctx[d]), "set_context")
        for handle in notify[d].values():
            check(acl.rt.wait_and_reset_notify(handle, rx[d], WAIT_TIMEOUT_S), "wait_and_reset_notify")
        check(acl.rt.memcpy_async(host[d], n * BLOCK, recv[d], n * BLOCK, acl.ACL_MEMCPY_DEVICE_TO_HOST, rx[d]),
              "memcpy_async D2H")
    # senders: push each block into the receiver's buffer, then notify the receiver
    t1 = time.perf_counter()
    for s in range(n):
        check(acl.rt.set_context(ctx[s]), "set_context")
        for k in range(1, n):             # staggered: device s first feeds s+1, then s+2, ...
            d = (s + k) % n
            check(acl.rt.memcpy_async(recv[d] + s * BLOCK, BLOCK, send[s] + d * BLOCK, BLOCK,
                                      acl.ACL_MEMCPY_DEVICE_TO_DEVICE, tx[s]), "memcpy_async D2D")
            check(acl.rt.record_notify(notify[d][s], tx[s]), "record_notify")
    synchronize_each(ctx, tx)
    t2 = time.perf_counter()
    synchronize_each(ctx, rx)

    wrong = []                            # (receiver, sender) of every block that came wrong
    for d in range(n):
        got = acl.util.ptr_to_numpy(host[d], (n, BLOCK), NPY_UINT8)
        wrong += [(d, s) for s in range(n) if not np.array_equal(got[s], block_of(s, d))]
        del got                           # a view of pinned memory: gone before free_host
    for d, s in wrong:
        print(f"device {d}: block from device {s} MISMATCH")
    moved = n * (n - 1) * BLOCK
    exchange = t2 - t1
    print(f"exchange (senders queued -> every send stream drained): {exchange * 1e3:.1f} ms, "
          f"{moved / exchange / 1e9:.2f} GB/s aggregate over {n * (n - 1)} peer copies")
    print(f"whole run incl. queuing the waits: {(t2 - t0) * 1e3:.1f} ms")

    for d in range(n):
        check(acl.rt.set_context(ctx[d]), "set_context")
        for handle in notify[d].values():
            check(acl.rt.destroy_notify(handle), "destroy_notify")
        for ptr in (send[d], recv[d]):
            check(acl.rt.free(ptr), "free")
        check(acl.rt.free_host(host[d]), "free_host")
        for stream in (tx[d], rx[d]):
            check(acl.rt.destroy_stream(stream), "destroy_stream")
        for peer in notify[d]:
            check(acl.rt.device_disable_peer_access(peer), "device_disable_peer_access")
    for d in range(n):
        check(acl.rt.reset_device(d), "reset_device")
    check(acl.finalize(), "finalize")
    ok = not wrong
    print(f"all_to_all_notify: {n} devices exchanged {n * (n - 1)} blocks of {BLOCK >> 20} MiB, "
          f"ordered by notifies, verified: {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
