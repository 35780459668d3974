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

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2

DEVICE_ID = 0
NUM_BLOCKS = 8
N = 8 * 2048                             # float32 elements


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


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def main():
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)

    x_host = np.random.default_rng(0).random(N, dtype=np.float32)
    y_host = np.arange(N, dtype=np.float32)
    z_host = np.zeros(N, dtype=np.float32)
    nbytes = x_host.nbytes

    ptrs = []
    for host in (x_host, y_host, None):
        dev, ret = acl.rt.malloc(nbytes, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("acl.rt.malloc", ret)
        if host is not None:
            ret = acl.rt.memcpy(dev, nbytes, acl.util.numpy_to_ptr(host), nbytes, ACL_MEMCPY_HOST_TO_DEVICE)
            check_ret("acl.rt.memcpy H2D", ret)
        ptrs.append(dev)
    x_dev, y_dev, z_dev = ptrs

    # add_custom<<<NUM_BLOCKS, nullptr, stream>>>(x, y, z, N)
    check_ret("add_custom launch", add_custom[NUM_BLOCKS, stream](x_dev, y_dev, z_dev, N))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))

    ret = acl.rt.memcpy(acl.util.numpy_to_ptr(z_host), nbytes, z_dev, nbytes, ACL_MEMCPY_DEVICE_TO_HOST)
    check_ret("acl.rt.memcpy D2H", ret)
    ok = np.array_equal(z_host, x_host + y_host)
    print(f"z[:4] = {z_host[:4]}  (x[:4] = {x_host[:4]}, y[:4] = {y_host[:4]})")

    for dev in ptrs:
        check_ret("acl.rt.free", acl.rt.free(dev))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())
    if not ok:
        print("vector_add_mixed: MISMATCH")
        return 1
    print(f"vector_add_mixed: add_custom<<<{NUM_BLOCKS}, nullptr, stream>>> on {N} float32, verified: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
