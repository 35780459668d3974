"""Native Ascend C kernels: launch rate and a half-precision add, beside their baselines.

    launch rate     LAUNCHES launches of an empty native kernel (``<<<1>>>`` and ``<<<48>>>``,
                    through aclrtLaunchKernelWithHostArgs as the <<<>>> stub does), then one
                    ``synchronize_stream``, beside a Python ``@kernel`` of the same shape in the
                    same run, timed the same way
    add_custom      the CANN samples' add_custom shape: 8 blocks x 2048 halves, DataCopy into the
                    Unified Buffer, Add, DataCopy out, plus ``synchronize_stream``, beside numpy's
                    add of the same arrays (float16)

The kernels are built with ``mdev cann-home``'s ascendc.cmake (a tree in a temporary folder).
Targets: an empty native launch at >= the Python kernel's rate; the add within 5x of numpy.
"""

from __future__ import annotations

import os
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import Result, best_of, check, device_and_stream, print_table

LAUNCHES = 2_000
RUNS = 7
BLOCKS, PER_BLOCK = 8, 2048

KERNELS = r"""
#include "kernel_operator.h"
using namespace AscendC;
extern "C" __global__ __aicore__ void empty() {}
constexpr int32_t LEN = 2048;
extern "C" __global__ __aicore__ void add_custom(GM_ADDR x, GM_ADDR y, GM_ADDR z) {
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> qx, qy;
    TQue<QuePosition::VECOUT, 1> qz;
    pipe.InitBuffer(qx, 1, LEN * sizeof(half));
    pipe.InitBuffer(qy, 1, LEN * sizeof(half));
    pipe.InitBuffer(qz, 1, LEN * sizeof(half));
    GlobalTensor<half> gx, gy, gz;
    gx.SetGlobalBuffer((__gm__ half*)x + LEN * GetBlockIdx(), LEN);
    gy.SetGlobalBuffer((__gm__ half*)y + LEN * GetBlockIdx(), LEN);
    gz.SetGlobalBuffer((__gm__ half*)z + LEN * GetBlockIdx(), LEN);
    LocalTensor<half> a = qx.AllocTensor<half>(), b = qy.AllocTensor<half>(), c = qz.AllocTensor<half>();
    DataCopy(a, gx, LEN);
    DataCopy(b, gy, LEN);
    Add(c, a, b, LEN);
    DataCopy(gz, c, LEN);
    qx.FreeTensor(a);
    qy.FreeTensor(b);
    qz.FreeTensor(c);
}
"""


def build(workdir: Path) -> Path:
    """The benchmark's kernels as a fatbin device image."""
    from mdev.capi import cann_home

    home = cann_home.make(workdir / "cann", log=lambda line: None)
    (workdir / "k.cpp").write_text(KERNELS)
    (workdir / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(bench_kernels CXX)\n"
        f"include({home}/tikcpp/ascendc_kernel_cmake/ascendc.cmake)\n"
        "ascendc_fatbin_library(bench_kernels k.cpp)\n")
    for command in (["cmake", "-S", str(workdir), "-B", str(workdir / "build")], ["cmake", "--build", str(workdir / "build")]):
        subprocess.run(command, check=True, capture_output=True, text=True)
    return workdir / "build" / "mdev_ascendc" / "bench_kernels" / "bench_kernels.o"


def _rates(first, second, sync, count: int, repeats: int = 3) -> tuple[float, float]:
    """Best launches/s of ``count`` submissions of each, then one sync; the two alternate."""
    best = [0.0, 0.0]
    for _ in range(repeats):
        for i, submit in enumerate((first, second)):
            t0 = time.perf_counter()
            for _ in range(count):
                submit()
            sync()
            best[i] = max(best[i], count / (time.perf_counter() - t0))
    return best[0], best[1]


def run() -> list[Result]:
    import mdev.acl as acl

    with tempfile.TemporaryDirectory(prefix="mdev-bench-ascendc-") as tmp:
        image = build(Path(tmp))        # before the board starts: the compilers' CPU is not its
        with device_and_stream("ascendc", "laptop2", hbm=256 << 20) as (stream, dev, sync, empty_py):
            return _measure(acl, image, stream, dev, sync, empty_py)


def _measure(acl, image: Path, stream: int, dev: int, sync, empty_py) -> list[Result]:
    """The launch rates and the add on the running board, the image loaded on its device 0."""
    results: list[Result] = []
    binary, ret = acl.rt.binary_load_from_file(str(image), None)
    check(ret, "binary_load_from_file")
    functions = {}
    for name in ("empty", "add_custom"):
        functions[name], ret = acl.rt.binary_get_function(binary, name)
        check(ret, "binary_get_function")

    def native(name: str, blocks: int, *slots: int):
        args = struct.pack(f"<{len(slots)}Q", *slots)
        fn = functions[name]
        return lambda: check(acl.rt.launch_kernel_with_host_args(fn, blocks, stream, None, args, len(args),
                                                                 None, 0), "launch")

    for blocks in (1, 48):
        launch_native, launch_py = native("empty", blocks), empty_py[blocks, stream]
        for _ in range(100):            # warm-up: runners, block threads, registration
            launch_native()
            check(launch_py(), "launch")
        sync()
        rate_native, rate_py = _rates(launch_native, lambda: check(launch_py(), "launch"), sync, LAUNCHES)
        results.append(Result(f"empty native kernel <<<{blocks}>>>", rate_native, "launches/s", rate_py,
                              "launches/s", "Python @kernel, same shape", rate_native / rate_py,
                              ("ratio", ">=", 1.0), note=f"{LAUNCHES} launches + 1 sync, best of 3, alternating with the baseline"))

    n = BLOCKS * PER_BLOCK
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-1, 1, n).astype(np.float16), rng.uniform(-1, 1, n).astype(np.float16)
    ptrs = []
    for host in (x, y, np.zeros(n, np.float16)):
        p, ret = acl.rt.malloc(host.nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        check(acl.rt.memcpy(p, host.nbytes, host.ctypes.data, host.nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE), "memcpy")
        ptrs.append(p)
    add = native("add_custom", BLOCKS, *ptrs)

    def device_add():
        add()
        sync()

    out = np.empty(n, np.float16)
    t_dev = best_of(device_add, RUNS)
    t_host = best_of(lambda: np.add(x, y, out=out), RUNS)
    got = np.empty(n, np.float16)
    check(acl.rt.memcpy(got.ctypes.data, got.nbytes, ptrs[2], got.nbytes, acl.ACL_MEMCPY_DEVICE_TO_HOST), "memcpy")
    if not np.array_equal(got, x + y):
        raise RuntimeError("add_custom gave a wrong result")
    results.append(Result(f"add_custom <<<{BLOCKS}>>> of {BLOCKS}x{PER_BLOCK} halves + sync", t_dev * 1e6, "us",
                          t_host * 1e6, "us", "numpy float16 add", t_dev / t_host, ("ratio", "<=", 5.0),
                          note=f"best of {RUNS}"))
    for p in ptrs + [dev]:
        check(acl.rt.free(p), "free")
    check(acl.rt.binary_unload(binary), "binary_unload")
    check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(0), "reset_device")
    return results


def main() -> list[Result]:
    results = run()
    print_table("Native Ascend C kernels", results)
    return results


if __name__ == "__main__":
    os.environ.setdefault("MDEV_AUTOSTART", "0")
    main()
