"""Vector add, mixed-compile style (guide 03-03 "Kernel加载与执行").

In C++ a kernel written with the ``__global__ __aicore__`` qualifiers is launched with
``add_custom<<<numBlocks, nullptr, stream>>>(x, y, z, n)``.  In mdev a kernel is a Python
function run by the device over device memory; ``@kernel`` makes it launchable and
``add_custom[numBlocks, stream](x, y, z, n)`` is the ``<<<>>>`` launch.  Each block adds
its share of the vectors (``ctx.block_idx`` of ``ctx.block_num``).

    python examples/vector_add_mixed.py
"""

import sys

import numpy as np

import mdev.acl as acl
from mdev.kernel import int64, kernel, ptr

DEVICE_ID = 0
NUM_BLOCKS = 8
N = 8 * 2048                             # float32 elements


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


@kernel
def add_custom(ctx, x: ptr, y: ptr, z: ptr, n: int64):
    """z = x + y; block i handles elements [i * n / blocks, (i + 1) * n / blocks)."""
    per_block = n // ctx.block_num
    lo = ctx.block_idx * per_block
    hi = n if ctx.block_idx == ctx.block_num - 1 else lo + per_block
    x_gm = ctx.gm(x, np.float32, n)      # numpy views of global (device) memory
    y_gm = ctx.gm(y, np.float32, n)
    z_gm = ctx.gm(z, np.float32, n)
    z_gm[lo:hi] = x_gm[lo:hi] + y_gm[lo:hi]


def main():
    check(acl.init(), "init")
    check(acl.rt.set_device(DEVICE_ID), "set_device")
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")

    x_host = np.random.default_rng(0).random(N, dtype=np.float32)
    y_host = np.arange(N, dtype=np.float32)
    z_host = np.zeros(N, dtype=np.float32)
    nbytes = x_host.nbytes
    ptrs = []
    for host in (x_host, y_host, z_host):
        dev, ret = acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        check(acl.rt.memcpy(dev, nbytes, acl.util.numpy_to_ptr(host), nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE),
              "memcpy H2D")
        ptrs.append(dev)
    x_dev, y_dev, z_dev = ptrs

    # add_custom<<<NUM_BLOCKS, nullptr, stream>>>(x, y, z, N)
    check(add_custom[NUM_BLOCKS, stream](x_dev, y_dev, z_dev, N), "add_custom launch")
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    check(acl.rt.memcpy(acl.util.numpy_to_ptr(z_host), nbytes, z_dev, nbytes, acl.ACL_MEMCPY_DEVICE_TO_HOST),
          "memcpy D2H")
    print(f"z[:4] = {z_host[:4]}  (x[:4] = {x_host[:4]}, y[:4] = {y_host[:4]})")

    for dev in ptrs:
        check(acl.rt.free(dev), "free")
    check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(DEVICE_ID), "reset_device")
    check(acl.finalize(), "finalize")
    ok = np.array_equal(z_host, x_host + y_host)
    print(f"vector_add_mixed: add_custom<<<{NUM_BLOCKS}, nullptr, stream>>> on {N} float32, verified: "
          f"{'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
