"""System tasks a device runs on the stream (guide 03-04): SDMA reduce and random numbers.

    "reduce"      dst[i] = op(dst[i], src[i]) over ``nbytes`` of one data type
                  (SUM / MAX / MIN / EQUAL, like aclrtReduceAsync's SDMA reduce kinds, and
                  PROD for collectives; aclrtReduceAsync's checks keep to its own kinds and types)
    "random_num"  ``num`` random values into device memory, reproducible from
                  (seed, 16-byte counter); the counter in device memory advances by ``num``

Operands arrive as locations resolved and bounds-checked by the host (see
``mdev.runtime.execution.systasks``).  Parameters that live in device memory (``isAddr`` in
aclrtRandomParaInfo) are read here, when the task runs, so a value written by an earlier
task of the stream counts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mdev import constants as C
from mdev import errors as E
from mdev.board.tasktable import TaskFault, dma_fault, op
from mdev.dtypes import BF16, DTYPES, bf16_to_float32, float32_to_bf16, itemsize
from mdev.taskspec import REDUCE_PROD

if TYPE_CHECKING:
    from mdev.board.device import Device
    from mdev.board.stream import DeviceStream

# ---------------------------------------------------------------------------- reduce
_REDUCE = {
    C.ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM: np.add,
    C.ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX: np.maximum,
    C.ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN: np.minimum,
    REDUCE_PROD: np.multiply,
}


def _reduce_values(kind: int, a: np.ndarray, b: np.ndarray, dtype) -> np.ndarray:
    if kind == C.ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL:
        return (a == b).astype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return _REDUCE[kind](a, b).astype(dtype, copy=False)


@op()
def reduce(device: "Device", stream: "DeviceStream", dst: tuple, src: tuple, nbytes: int,
           kind: int, data_type: int) -> None:
    n = nbytes // itemsize(data_type) * itemsize(data_type)
    with np.errstate(over="ignore", invalid="ignore"):
        d = device.memory.view(dst, n, stream, write=True)
        reduce_into(d, d, device.memory.view(src, n, stream), kind, data_type)
    device.wake()


def elementwise(kind: int, data_type: int):
    """(ufunc, dtype) that reduces ``data_type`` elements straight into an ``out``, for
    callers that view their operands once (and reduce_into); None where reduce_into takes
    another way (bf16 through float32, the equality kind)."""
    dtype = DTYPES[data_type]
    if dtype is BF16 or kind == C.ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL:
        return None
    return _REDUCE[kind], np.dtype(dtype)


def reduce_into(d_raw: np.ndarray, a_raw: np.ndarray, s_raw: np.ndarray, kind: int, data_type: int) -> None:
    """d = op(a, s) over raw bytes (uint8 views of whole elements; ``a`` may be ``d``) in
    ``data_type``; the caller says how numpy treats overflows (np.errstate: a sum that
    overflows is no error)."""
    typed = elementwise(kind, data_type)
    if typed is not None:
        ufunc, dtype = typed
        ufunc(a_raw.view(dtype), s_raw.view(dtype), out=d_raw.view(dtype))
        return
    dtype = DTYPES[data_type]
    if dtype is BF16:
        result = _reduce_values(kind, bf16_to_float32(a_raw.view(np.uint16)), bf16_to_float32(s_raw.view(np.uint16)),
                                np.float32)
        d_raw.view(np.uint16)[:] = float32_to_bf16(result)
    else:         # the equality kind
        d_raw.view(dtype)[:] = _reduce_values(kind, a_raw.view(dtype), s_raw.view(dtype), dtype)


# ---------------------------------------------------------------------------- random numbers
# a parameter is ("v", value) -- an immediate, already decoded by the host -- or
# ("a", location, size): ``size`` bytes of device memory, decoded here in the task's type
def _param(device: "Device", stream: "DeviceStream", para: tuple, data_type: int | None, what: str):
    if para[0] == "v":
        return para[1]
    _, loc, size = para
    raw = device.memory.view(loc, size, stream).tobytes()
    if data_type is None:                     # seeds and counts: unsigned 64-bit
        return int.from_bytes(raw.ljust(8, b"\0")[:8], "little")
    dtype = DTYPES[data_type]
    if dtype is BF16:
        return float(bf16_to_float32(np.frombuffer(raw[:2].ljust(2, b"\0"), np.uint16))[0])
    if len(raw) < dtype.itemsize:
        raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"{what}: {len(raw)} bytes cannot hold a {dtype}")
    return np.frombuffer(raw[:dtype.itemsize], dtype)[0].item()


def _below(limit: float, dtype) -> float:
    """The largest value of ``dtype`` (a float type or BF16) strictly below ``limit``."""
    if dtype is BF16:
        bits = int(float32_to_bf16(np.array([limit], np.float32))[0])
        while float(bf16_to_float32(np.array([bits], np.uint16))[0]) >= limit:
            if bits & 0x8000:
                bits += 1                              # negative: one step away from zero
            else:
                bits = bits - 1 if bits else 0x8001    # positive: one step towards zero
        return float(bf16_to_float32(np.array([bits], np.uint16))[0])
    value = dtype.type(limit)
    if float(value) >= limit:
        value = np.nextafter(value, dtype.type(-np.inf))
    return float(value)


def _store_floats(values: np.ndarray, dtype, out: np.ndarray, upper: float | None = None) -> None:
    """Write float64 ``values`` into ``out`` (raw bytes) as ``dtype``; keep them < ``upper``."""
    if dtype is BF16:
        bits = float32_to_bf16(values.astype(np.float32))
        if upper is not None:
            over = bf16_to_float32(bits) >= upper
            if over.any():
                bits[over] = float32_to_bf16(np.array([_below(upper, BF16)], np.float32))[0]
        out.view(np.uint16)[:] = bits
        return
    cast = values.astype(dtype)
    if upper is not None:
        over = cast >= upper
        if over.any():
            cast[over] = _below(upper, dtype)
    out.view(dtype)[:] = cast


def _truncated_normal(gen: np.random.Generator, mean: float, std: float, n: int) -> np.ndarray:
    """Normal values, those beyond 2 standard deviations drawn again."""
    values = gen.standard_normal(n)
    bad = np.abs(values) > 2.0
    while bad.any():
        values[bad] = gen.standard_normal(int(bad.sum()))
        bad = np.abs(values) > 2.0
    return mean + std * values


@op()
def random_num(device: "Device", stream: "DeviceStream", data_type: int, func_type: int, params: dict,
               result: tuple, result_bytes: int | None, counter: tuple, seed: tuple, num: tuple) -> None:
    n = _param(device, stream, num, None, "randomNum")
    seed_value = _param(device, stream, seed, None, "randomSeed") & 0xFFFFFFFFFFFFFFFF
    if n == 0:
        return
    dtype = DTYPES[data_type]
    size = itemsize(data_type)
    nbytes = -(-n // 8) if func_type == C.ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK else n * size
    if result_bytes is not None and nbytes > result_bytes:
        raise dma_fault(f"random_num: {n} values need {nbytes} bytes; the result buffer holds "
                        f"{result_bytes} bytes")
    out = device.memory.view(result, nbytes, stream, write=True)
    word = device.memory.view(counter, 16, stream, write=True)
    count = int.from_bytes(word.tobytes(), "little")
    gen = np.random.Generator(np.random.Philox(key=seed_value, counter=count))
    get = {k: _param(device, stream, v, data_type, k) for k, v in params.items()}
    if func_type == C.ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK:
        ratio = float(get["ratio"])
        if not 0.0 <= ratio <= 1.0:
            raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"dropout ratio {ratio} is outside [0, 1]")
        keep = gen.random(n) >= ratio
        out[:] = np.packbits(keep, bitorder="little")
    elif func_type == C.ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS:
        lo, hi = get["min"], get["max"]
        if not lo < hi:
            raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"uniform distribution needs min < max, got [{lo}, {hi})")
        if dtype is not BF16 and dtype.kind in "iu":
            out.view(dtype)[:] = gen.integers(int(lo), int(hi), n, dtype=dtype)
        else:
            _store_floats(lo + (hi - lo) * gen.random(n), dtype, out, upper=float(hi))
    else:
        mean, std = float(get["mean"]), float(get["stddev"])
        if not std >= 0:
            raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"stddev must be >= 0, got {std}")
        if func_type == C.ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS:
            values = gen.normal(mean, std, n)
        else:
            values = _truncated_normal(gen, mean, std, n)
        _store_floats(values, dtype, out)
    word[:] = np.frombuffer(((count + n) % (1 << 128)).to_bytes(16, "little"), np.uint8)
    device.wake()
