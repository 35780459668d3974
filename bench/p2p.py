"""Peer-to-peer copies between devices, and an 8-device all-to-all.

P2P: 256 MiB from device 0 to device 1 with peer access enabled both ways, timed as a user
sees it: ``memcpy_async`` + ``synchronize_stream`` on a stream of the executing device
(pull: device 1's stream reads its peer; push: device 0's stream writes its peer), and the
bare synchronous ``memcpy``.  Each is warmed up once (the first touch of fresh
shared-memory pages is page-fault bound, in every process that maps them) and the best of
N runs is kept.  The baseline is ``numpy.copyto`` between two 256 MiB arrays, measured in
the same run the same way.  Target: the async P2P copies at >= 0.6 of numpy.copyto.

All-to-all: 8 devices (hccs8), every device pushes 16 MiB to every other device (56 peer
copies, 896 MiB) on its send stream and records the receiver's notify after each copy;
every receive stream waits for its 7 notifies.  Timed from the first submission until
every receive stream has synchronised; best of N after a warm-up.  Reported: wall time and
aggregate GB/s; for scale, the baseline is one host thread doing the same 56 copies of
16 MiB with numpy.copyto (no target: the emulator's devices share the host's cores and
memory bandwidth, so the figure says how much of the machine the exchange gets).
"""

from __future__ import annotations

import numpy as np

from bench.common import GiB, MiB, Result, best_of, check, dedicated_board, print_table

SIZE = 256 * MiB
PAIR = 16 * MiB
RUNS = 7
A2A_RUNS = 5
TARGET = ("ratio", ">=", 0.6)
SRC, DST = 0, 1


def numpy_baseline(nbytes: int = SIZE, runs: int = RUNS) -> float:
    a = np.full(nbytes, 1, np.uint8)
    b = np.full(nbytes, 2, np.uint8)
    return best_of(lambda: np.copyto(b, a), runs)


def _p2p(acl, runs: int) -> list[Result]:
    D2D = acl.ACL_MEMCPY_DEVICE_TO_DEVICE
    for a, b in ((SRC, DST), (DST, SRC)):
        check(acl.rt.set_device(a), "set_device")
        can, ret = acl.rt.device_can_access_peer(a, b)
        check(ret, "device_can_access_peer")
        assert can == 1
        check(acl.rt.device_enable_peer_access(b, 0), "device_enable_peer_access")
    check(acl.rt.set_device(SRC), "set_device")
    s_src, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    src, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_ONLY)
    check(ret, "malloc")
    page = np.repeat((np.arange(SIZE // 4096) % 251).astype(np.uint8), 4096)
    check(acl.rt.memcpy(src, SIZE, acl.util.numpy_to_ptr(page), SIZE, acl.ACL_MEMCPY_HOST_TO_DEVICE), "memcpy")
    check(acl.rt.set_device(DST), "set_device")
    s_dst, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    dst, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_ONLY)
    check(ret, "malloc")

    base = numpy_baseline(SIZE, runs)
    base_gbps = SIZE / base / GiB

    def async_copy(device, stream):
        def go():
            check(acl.rt.memcpy_async(dst, SIZE, src, SIZE, D2D, stream), "memcpy_async")
            check(acl.rt.synchronize_stream(stream), "synchronize_stream")
        return device, go

    def sync_copy(device):
        def go():
            check(acl.rt.memcpy(dst, SIZE, src, SIZE, D2D), "memcpy")
        return device, go

    cases = [
        (f"P2P async pull {SRC}->{DST} (stream of {DST})", async_copy(DST, s_dst), TARGET),
        (f"P2P async push {SRC}->{DST} (stream of {SRC})", async_copy(SRC, s_src), TARGET),
        (f"P2P sync memcpy {SRC}->{DST} (device {DST} current)", sync_copy(DST), None),
    ]
    results = []
    for label, (device, fn), target in cases:
        check(acl.rt.set_device(device), "set_device")
        t = best_of(fn, runs)
        gbps = SIZE / t / GiB
        results.append(Result(f"{label} 256 MiB", gbps, "GiB/s", base_gbps, "GiB/s", "np.copyto",
                              gbps / base_gbps, target))
    # the data really moved: sample one byte per page through D2H copies
    check(acl.rt.set_device(DST), "set_device")
    back = np.empty(SIZE, np.uint8)
    check(acl.rt.memcpy(acl.util.numpy_to_ptr(back), SIZE, dst, SIZE, acl.ACL_MEMCPY_DEVICE_TO_HOST), "memcpy")
    assert np.array_equal(back[::4096], page[::4096]), "P2P copy corrupted the data"
    del back, page

    check(acl.rt.free(dst), "free")
    check(acl.rt.destroy_stream(s_dst), "destroy_stream")
    check(acl.rt.device_disable_peer_access(SRC), "device_disable_peer_access")
    check(acl.rt.set_device(SRC), "set_device")
    check(acl.rt.free(src), "free")
    check(acl.rt.destroy_stream(s_src), "destroy_stream")
    check(acl.rt.device_disable_peer_access(DST), "device_disable_peer_access")
    return results


def _all_to_all(acl, runs: int) -> list[Result]:
    n, _ = acl.rt.get_device_count()
    D2D = acl.ACL_MEMCPY_DEVICE_TO_DEVICE
    ctx, tx, rx, send, recv, notify = {}, {}, {}, {}, {}, {}
    for d in range(n):
        check(acl.rt.set_device(d), "set_device")
        for p in range(n):
            if p != d:
                check(acl.rt.device_enable_peer_access(p, 0), "device_enable_peer_access")
        ctx[d], ret = acl.rt.get_context()
        check(ret, "get_context")
        tx[d], ret = acl.rt.create_stream()
        check(ret, "create_stream")
        rx[d], ret = acl.rt.create_stream()
        check(ret, "create_stream")
        send[d], ret = acl.rt.malloc(n * PAIR, acl.ACL_MEM_MALLOC_HUGE_ONLY)
        check(ret, "malloc")
        recv[d], ret = acl.rt.malloc(n * PAIR, acl.ACL_MEM_MALLOC_HUGE_ONLY)
        check(ret, "malloc")
        blocks = np.repeat(np.array([(d * n + p) % 251 for p in range(n)], np.uint8), PAIR)
        check(acl.rt.memcpy(send[d], n * PAIR, acl.util.numpy_to_ptr(blocks), n * PAIR,
                            acl.ACL_MEMCPY_HOST_TO_DEVICE), "memcpy")
        notify[d] = {}
        for s in range(n):
            if s != d:
                notify[d][s], ret = acl.rt.create_notify(0)
                check(ret, "create_notify")

    def exchange():
        for d in range(n):
            check(acl.rt.set_context(ctx[d]), "set_context")
            for s in range(n):
                if s != d:
                    check(acl.rt.wait_and_reset_notify(notify[d][s], rx[d], 60), "wait_and_reset_notify")
        for s in range(n):
            check(acl.rt.set_context(ctx[s]), "set_context")
            for k in range(1, n):
                d = (s + k) % n
                check(acl.rt.memcpy_async(recv[d] + s * PAIR, PAIR, send[s] + d * PAIR, PAIR, D2D, tx[s]),
                      "memcpy_async")
                check(acl.rt.record_notify(notify[d][s], tx[s]), "record_notify")
        for d in range(n):
            check(acl.rt.set_context(ctx[d]), "set_context")
            check(acl.rt.synchronize_stream(rx[d]), "synchronize_stream")
            check(acl.rt.synchronize_stream(tx[d]), "synchronize_stream")

    t = best_of(exchange, runs)
    moved = n * (n - 1) * PAIR
    # verify: receiver d holds in slot s the byte (s * n + d) % 251 everywhere
    out = np.empty(n * PAIR, np.uint8)
    for d in range(n):
        check(acl.rt.set_context(ctx[d]), "set_context")
        check(acl.rt.memcpy(acl.util.numpy_to_ptr(out), n * PAIR, recv[d], n * PAIR,
                            acl.ACL_MEMCPY_DEVICE_TO_HOST), "memcpy")
        for s in range(n):
            if s != d:
                blk = out[s * PAIR:(s + 1) * PAIR]
                assert (blk[::4096] == (s * n + d) % 251).all() and blk[-1] == (s * n + d) % 251, (s, d)

    # baseline: one host thread, the same 56 copies of 16 MiB
    srcs = [np.full(PAIR, i % 251, np.uint8) for i in range(n)]
    dsts = [np.zeros(PAIR, np.uint8) for _ in range(n)]

    def host_copies():
        for s in range(n):
            for k in range(1, n):
                np.copyto(dsts[(s + k) % n], srcs[s])

    base = best_of(host_copies, runs)
    gbps, base_gbps = moved / t / 1e9, moved / base / 1e9
    results = [
        Result(f"all-to-all {n} devices, {PAIR >> 20} MiB per pair: wall time", t * 1e3, "ms",
               base * 1e3, "ms", "56 np.copyto, 1 thread", None, None,
               f"{n * (n - 1)} peer copies ({moved >> 20} MiB) + {n * (n - 1)} notify record/wait pairs"),
        Result(f"all-to-all {n} devices, {PAIR >> 20} MiB per pair: aggregate", gbps, "GB/s",
               base_gbps, "GB/s", "56 np.copyto, 1 thread", gbps / base_gbps, None),
    ]
    for d in range(n):
        check(acl.rt.set_context(ctx[d]), "set_context")
        for h in notify[d].values():
            check(acl.rt.destroy_notify(h), "destroy_notify")
        for ptr in (send[d], recv[d]):
            check(acl.rt.free(ptr), "free")
        for s in (tx[d], rx[d]):
            check(acl.rt.destroy_stream(s), "destroy_stream")
    return results


def run(runs: int = RUNS, a2a_runs: int = A2A_RUNS) -> list[Result]:
    import mdev.acl as acl

    with dedicated_board("p2p", "hccs8", hbm=1 * GiB):
        results = _p2p(acl, runs)
        results += _all_to_all(acl, a2a_runs)
        for d in range(8):
            check(acl.rt.reset_device_force(d), "reset_device_force")
    return results


def main() -> list[Result]:
    results = run()
    print_table(f"Peer-to-peer copies (256 MiB, best of {RUNS}) and 8-device all-to-all "
                f"(best of {A2A_RUNS}; GiB/s = 2^30 B/s, GB/s = 10^9 B/s)", results)
    return results


if __name__ == "__main__":
    main()
