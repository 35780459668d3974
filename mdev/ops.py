"""Built-in kernels for examples and tests: add, mul, axpy, fill, copy, scale.

Element-wise over ``n`` elements of device memory, ``float32`` unless ``dtype`` (an
aclDataType such as ``ACL_FLOAT16``, or for mixed-style launches anything numpy accepts)
says otherwise.  Each block takes a contiguous share (``ceil(n / blocks)`` elements); the
kernels are vectorised: a launch runs all of its blocks in one numpy call, or, for more
than ``SPLIT`` elements per part, in parallel parts on up to min(blocks, CPUs) threads.

Mixed style (``<<<blocks, nullptr, stream>>>``)::

    from mdev import ops
    ops.add[8, stream](x, y, z, n)              # z = x + y
    ops.axpy[8, stream](x, y, out, 2.0, n)      # out = x + 2.0 * y   (as aclnnAdd with alpha)

Binary style: this file is Python source, so it is a kernel "binary" too::

    binary, ret = acl.rt.binary_load_from_file(os.path.abspath(ops.__file__), None)
    func, ret = acl.rt.binary_get_function(binary, "add")

Parameters (in order; the packed argument block puts each in an 8-byte slot):

    add(x, y, out, n, dtype)            out = x + y
    mul(x, y, out, n, dtype)            out = x * y
    axpy(x, y, out, alpha, n, dtype)    out = x + alpha * y      alpha: float32
    fill(out, value, n, dtype)          out = value              value: float64
    copy(x, out, n, dtype)              out = x
    scale(x, out, alpha, n, dtype)      out = alpha * x          alpha: float32

pointers are ``ptr``, ``n`` is ``int64``, ``dtype`` is ``int32`` (default ACL_FLOAT = 0).
"""

from __future__ import annotations

import concurrent.futures
import os
import threading

import numpy as np

from mdev.constants import ACL_DTYPE_TO_NUMPY, ACL_FLOAT
from mdev.kernel import float32, float64, int32, int64, kernel, ptr

__all__ = ["add", "mul", "axpy", "fill", "copy", "scale"]


def _dtype(dtype) -> np.dtype:
    if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
        name = ACL_DTYPE_TO_NUMPY.get(int(dtype))
        if name is None:
            raise ValueError(f"aclDataType {dtype} is not supported by the built-in kernels")
        return np.dtype(name)
    return np.dtype(dtype)


def _span(ctx, n: int) -> slice:
    """The elements of the blocks this call covers: block b owns [b*per, (b+1)*per)."""
    n = int(n)
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    per = -(-n // ctx.block_num) if n else 0
    blocks = ctx.blocks
    return slice(min(n, blocks.start * per), min(n, blocks.stop * per))


def _views(ctx, n, dtype, *pointers):
    dt = _dtype(dtype)
    return [ctx.gm(p, dt, int(n)) for p in pointers]


SPLIT = 1 << 20           # elements per thread at least, when a launch's work is split
_threads = None
_threads_lock = threading.Lock()


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    global _threads
    with _threads_lock:
        if _threads is None:
            _threads = concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1, "ops")
        return _threads


def _run(ctx, n, body) -> None:
    """``body(part)`` over the elements of the blocks this call covers.  Small launches are
    one numpy call; large ones are cut into contiguous parts run at once on up to
    min(blocks, CPUs) threads (numpy lets go of the GIL), as the blocks would on cores."""
    part = _span(ctx, n)
    size = part.stop - part.start
    ways = min(len(ctx.blocks), os.cpu_count() or 1, size // SPLIT)
    if ways <= 1:
        body(part)
        return
    step = -(-size // ways)
    parts = [slice(lo, min(part.stop, lo + step)) for lo in range(part.start, part.stop, step)]
    futures = [_executor().submit(body, p) for p in parts[1:]]
    body(parts[0])
    for future in futures:
        future.result()


@kernel(vectorized=True)
def add(ctx, x: ptr, y: ptr, out: ptr, n: int64, dtype: int32 = ACL_FLOAT):
    a, b, o = _views(ctx, n, dtype, x, y, out)
    _run(ctx, n, lambda s: np.add(a[s], b[s], out=o[s]))


@kernel(vectorized=True)
def mul(ctx, x: ptr, y: ptr, out: ptr, n: int64, dtype: int32 = ACL_FLOAT):
    a, b, o = _views(ctx, n, dtype, x, y, out)
    _run(ctx, n, lambda s: np.multiply(a[s], b[s], out=o[s]))


@kernel(vectorized=True)
def axpy(ctx, x: ptr, y: ptr, out: ptr, alpha: float32, n: int64, dtype: int32 = ACL_FLOAT):
    a, b, o = _views(ctx, n, dtype, x, y, out)
    wide = np.result_type(b.dtype, np.float32)
    _run(ctx, n, lambda s: np.add(a[s], np.multiply(b[s], alpha, casting="unsafe", dtype=wide),
                                  out=o[s], casting="unsafe"))


@kernel(vectorized=True)
def fill(ctx, out: ptr, value: float64, n: int64, dtype: int32 = ACL_FLOAT):
    (o,) = _views(ctx, n, dtype, out)
    v = np.asarray(value).astype(o.dtype)
    _run(ctx, n, lambda s: o[s].fill(v))


@kernel(vectorized=True)
def copy(ctx, x: ptr, out: ptr, n: int64, dtype: int32 = ACL_FLOAT):
    a, o = _views(ctx, n, dtype, x, out)
    _run(ctx, n, lambda s: np.copyto(o[s], a[s]))


@kernel(vectorized=True)
def scale(ctx, x: ptr, out: ptr, alpha: float32, n: int64, dtype: int32 = ACL_FLOAT):
    a, o = _views(ctx, n, dtype, x, out)
    _run(ctx, n, lambda s: np.multiply(a[s], alpha, out=o[s], casting="unsafe"))
