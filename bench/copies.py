"""Large copies: 256 MiB H2D (from pinned), D2H (into pinned) and D2D (same device).

What a user sees is timed: ``memcpy_async`` + ``synchronize_stream`` for the asynchronous
copies and the bare ``memcpy`` call for the synchronous ones.  Each is warmed up once (the
first touch of fresh shared-memory pages is page-fault bound, in every process that maps
them) and the best of N runs is kept.  The baseline is ``numpy.copyto`` between two
256 MiB arrays, timed the same way with its runs interleaved with the copy's runs, so both
see the same machine (another program's burst of work slows both, not just one).

Target: every copy at >= 0.7 of the numpy.copyto bandwidth.
"""

from __future__ import annotations

import numpy as np

from bench.common import GiB, MiB, Result, best_of_interleaved, check, dedicated_board, print_table

SIZE = 256 * MiB
RUNS = 7
TARGET = ("ratio", ">=", 0.7)


def run(runs: int = RUNS) -> list[Result]:
    import mdev.acl as acl

    H2D, D2H, D2D = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST, acl.ACL_MEMCPY_DEVICE_TO_DEVICE
    results: list[Result] = []
    with dedicated_board("copies", "laptop2", hbm=2 * GiB):
        check(acl.rt.set_device(0), "set_device")
        stream, ret = acl.rt.create_stream()
        check(ret, "create_stream")
        dev_a, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        dev_b, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        host_src, ret = acl.rt.malloc_host(SIZE)
        check(ret, "malloc_host")
        host_dst, ret = acl.rt.malloc_host(SIZE)
        check(ret, "malloc_host")
        acl.util.ptr_to_numpy(host_src, (SIZE,), 2)[:] = 7      # 2 = NPY_UBYTE
        acl.util.ptr_to_numpy(host_dst, (SIZE,), 2)[:] = 0
        pageable_src = np.full(SIZE, 5, np.uint8)
        pageable_dst = np.zeros(SIZE, np.uint8)
        base_src = np.full(SIZE, 1, np.uint8)
        base_dst = np.full(SIZE, 2, np.uint8)

        def baseline():
            np.copyto(base_dst, base_src)

        def async_copy(dst, src, kind):
            def go():
                check(acl.rt.memcpy_async(dst, SIZE, src, SIZE, kind, stream), "memcpy_async")
                check(acl.rt.synchronize_stream(stream), "synchronize_stream")
            return go

        def sync_copy(dst, src, kind):
            def go():
                check(acl.rt.memcpy(dst, SIZE, src, SIZE, kind), "memcpy")
            return go

        cases = [
            ("H2D async, pinned src", async_copy(dev_a, host_src, H2D)),
            ("D2H async, pinned dst", async_copy(host_dst, dev_a, D2H)),
            ("D2D async, same device", async_copy(dev_b, dev_a, D2D)),
            ("H2D sync, pinned src", sync_copy(dev_a, host_src, H2D)),
            ("D2H sync, pinned dst", sync_copy(host_dst, dev_a, D2H)),
            ("D2D sync, same device", sync_copy(dev_b, dev_a, D2D)),
        ]
        extras = [
            ("H2D sync, pageable src", sync_copy(dev_a, acl.util.numpy_to_ptr(pageable_src), H2D)),
            ("D2H sync, pageable dst", sync_copy(acl.util.numpy_to_ptr(pageable_dst), dev_a, D2H)),
        ]
        for label, fn, target in [(l, f, TARGET) for l, f in cases] + [(l, f, None) for l, f in extras]:
            t, base = best_of_interleaved(fn, baseline, runs)
            gbps, base_gbps = SIZE / t / GiB, SIZE / base / GiB
            results.append(Result(f"{label} 256 MiB", gbps, "GiB/s", base_gbps, "GiB/s",
                                  "np.copyto", gbps / base_gbps, target))

        # the data really moved
        check(acl.rt.memcpy_async(dev_b, SIZE, host_src, SIZE, H2D, stream), "memcpy_async")
        check(acl.rt.memcpy_async(host_dst, SIZE, dev_b, SIZE, D2H, stream), "memcpy_async")
        check(acl.rt.synchronize_stream(stream), "synchronize_stream")
        assert (acl.util.ptr_to_numpy(host_dst, (SIZE,), 2)[::4096] == 7).all()

        for ptr in (dev_a, dev_b):
            check(acl.rt.free(ptr), "free")
        for ptr in (host_src, host_dst):
            check(acl.rt.free_host(ptr), "free_host")
        check(acl.rt.destroy_stream(stream), "destroy_stream")
        check(acl.rt.reset_device(0), "reset_device")
    return results


def main() -> list[Result]:
    results = run()
    print_table("Large copies (256 MiB, best of %d, GiB/s = 2^30 B/s)" % RUNS, results)
    return results


if __name__ == "__main__":
    main()
