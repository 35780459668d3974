"""A kernel "binary" for examples/vector_add_binary.py.

On real hardware this would be the ``*.o`` the Ascend C compiler builds from
``add_custom.cpp``; in mdev a binary is Python source whose ``@kernel`` functions become
the binary's kernels (``aclrtBinaryGetFunction(bin, "add_custom")``).  Parameter
annotations give the layout of the packed argument block: each parameter takes the next
8-byte slot.
"""

import numpy as np

from mdev.kernel import int64, kernel, ptr


def block_share(ctx, n):
    """The elements of n this block handles: an equal share, the last block takes the rest."""
    per_block = n // ctx.block_num
    lo = ctx.block_idx * per_block
    return slice(lo, n if ctx.block_idx == ctx.block_num - 1 else lo + per_block)


@kernel
def add_custom(ctx, x: ptr, y: ptr, z: ptr, n: int64):
    share = block_share(ctx, n)
    ctx.gm(z, np.float32, n)[share] = ctx.gm(x, np.float32, n)[share] + ctx.gm(y, np.float32, n)[share]


@kernel
def sub_custom(ctx, x: ptr, y: ptr, z: ptr, n: int64):
    share = block_share(ctx, n)
    ctx.gm(z, np.float32, n)[share] = ctx.gm(x, np.float32, n)[share] - ctx.gm(y, np.float32, n)[share]
