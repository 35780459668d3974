"""Kernel launches and a device-side vector add.

    launch rate     LAUNCHES launches of an empty kernel on one stream, then one
                    ``synchronize_stream``: launches / (time of the submissions + the sync);
                    with 1 block and with 48 blocks (one wave on the 48 vector cores),
                    beside ``memset_async`` of 4 bytes timed the same way (the cheapest task)
    vector add      ``mdev.ops.add[48, stream]`` of 16M float32 (64 MiB per operand) plus
                    ``synchronize_stream``, elements/s, beside host ``np.add(a, b, out=c)``
                    on arrays of the same size in the same run (best of RUNS each)

Target: vector add >= 0.5 x the host's np.add.
"""

from __future__ import annotations

import time

import numpy as np

from bench.common import Result, best_of, check, device_and_stream, print_table

LAUNCHES = 5_000
N = 16 << 20
RUNS = 7


def _rate(submit, sync, count: int, repeats: int = 3) -> tuple[float, float]:
    """Best (tasks/s, submissions/s) of ``count`` submissions followed by one sync."""
    best, best_submit = 0.0, 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(count):
            submit()
        t1 = time.perf_counter()
        sync()
        t2 = time.perf_counter()
        if count / (t2 - t0) > best:
            best, best_submit = count / (t2 - t0), count / (t1 - t0)
    return best, best_submit


def run() -> list[Result]:
    import mdev.acl as acl
    from mdev import ops

    results: list[Result] = []
    with device_and_stream("kernels", "laptop2", hbm=512 << 20) as (stream, dev, sync, empty):

        # ---- launch rate (warm-up: registration of the kernel, the stream's worker)
        for blocks in (1, 48):
            for _ in range(200):
                check(empty[blocks, stream](), "launch")
            sync()
        memset_rate, _ = _rate(lambda: acl.rt.memset_async(dev, 4, 0, 4, stream), sync, LAUNCHES)
        for blocks in (1, 48):
            launch = empty[blocks, stream]
            rate, submit_rate = _rate(launch, sync, LAUNCHES)
            results.append(Result(f"empty kernel launch, {blocks} block{'s' if blocks > 1 else ''}", rate,
                                  "tasks/s", memset_rate, "tasks/s", "memset_async 4 B", rate / memset_rate,
                                  note=f"{LAUNCHES} launches + 1 sync, best of 3; submissions alone "
                                       f"{submit_rate:,.0f}/s"))

        # ---- vector add, 16M float32
        nbytes = 4 * N
        ptrs = []
        for _ in range(3):
            p, ret = acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
            check(ret, "malloc")
            ptrs.append(p)
        x_host = np.random.default_rng(0).random(N, dtype=np.float32)
        y_host = np.arange(N, dtype=np.float32)
        for p, host in zip(ptrs, (x_host, y_host)):
            check(acl.rt.memcpy(p, nbytes, acl.util.numpy_to_ptr(host), nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE),
                  "memcpy")
        x, y, z = ptrs

        def device_add():
            check(ops.add[48, stream](x, y, z, N), "ops.add")
            sync()

        out = np.empty(N, np.float32)
        host_add = lambda: np.add(x_host, y_host, out=out)  # noqa: E731
        t_host = best_of(host_add, RUNS)
        t_dev = best_of(device_add, RUNS)
        t_host = min(t_host, best_of(host_add, RUNS))        # timed on both sides of the device runs
        check(acl.rt.memcpy(acl.util.numpy_to_ptr(out), nbytes, z, nbytes, acl.ACL_MEMCPY_DEVICE_TO_HOST), "memcpy")
        if not np.array_equal(out, x_host + y_host):
            raise RuntimeError("ops.add gave a wrong result")
        results.append(Result("ops.add[48] of 16M float32 + sync", N / t_dev / 1e6, "M elem/s",
                              N / t_host / 1e6, "M elem/s", "host np.add(out=)", t_host / t_dev,
                              ("ratio", ">=", 0.5),
                              note=f"best of {RUNS}: device {t_dev * 1e3:.1f} ms per launch + sync, "
                                   f"host {t_host * 1e3:.1f} ms"))

        for p in ptrs + [dev]:
            check(acl.rt.free(p), "free")
        check(acl.rt.destroy_stream(stream), "destroy_stream")
        check(acl.rt.reset_device(0), "reset_device")
    return results


def main() -> list[Result]:
    results = run()
    print_table("Kernel launches and device vector add", results)
    return results


if __name__ == "__main__":
    main()
