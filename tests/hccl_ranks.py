"""Helpers of the collectives tests (not a test module): ranks as threads, and numpy's answers.

    run_ranks(acl, devices, body)      one thread per rank: set_device, a stream, body(rank, stream)
    reduce_in_order(xs, op, order)     the reduction HCCL's algorithms compute, in their order
    ring_order(j, p) / mesh_order(j, p)   the order in which chunk j of p ranks is summed
    DTYPES                             HcclDataType -> numpy dtype (bf16 as uint16 bit patterns)
"""

from __future__ import annotations

import threading

import numpy as np

from mdev import hccl_types as H
from mdev.board.systasks import bf16_to_float32, float32_to_bf16
from mdev.runtime.collectives.algorithms import split      # how the algorithms cut a buffer into chunks

DTYPES = {value: (np.dtype(np.uint16) if name == "bfloat16" else np.dtype(name))
          for value, name in H.DATA_TYPE_NUMPY.items() if name is not None}
BF16 = H.HCCL_DATA_TYPE_BFP16
_OPS = {H.HCCL_REDUCE_SUM: np.add, H.HCCL_REDUCE_PROD: np.multiply, H.HCCL_REDUCE_MAX: np.maximum,
        H.HCCL_REDUCE_MIN: np.minimum}


def run_ranks(acl, devices: list[int], body, timeout: float = 120.0) -> list:
    """``body(rank, stream)`` on a thread per rank (its device current, a stream of its own);
    the results by rank.  An exception in any rank fails the call."""
    results: list = [None] * len(devices)
    errors: list = []

    def rank(r: int) -> None:
        try:
            assert acl.rt.set_device(devices[r]) == 0
            stream, ret = acl.rt.create_stream()
            assert ret == 0
            try:
                results[r] = body(r, stream)
            finally:
                acl.rt.destroy_stream(stream)
                acl.rt.reset_device(devices[r])
        except BaseException as exc:      # reported by the caller's thread
            errors.append((r, exc))

    threads = [threading.Thread(target=rank, args=(r,), daemon=True) for r in range(len(devices))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), "a rank did not finish"
    if errors:
        raise AssertionError(f"rank {errors[0][0]} failed: {errors[0][1]!r}") from errors[0][1]
    return results


def inputs(dtype: int, p: int, count: int, seed: int = 0) -> list[np.ndarray]:
    """Per-rank data of ``dtype`` that exercises its range (small values where products grow)."""
    rng = np.random.default_rng(seed)
    dt = DTYPES[dtype]
    if dtype == BF16:
        return [float32_to_bf16(rng.uniform(-4, 4, count).astype(np.float32)) for _ in range(p)]
    if dt.kind == "f":
        return [rng.uniform(-4, 4, count).astype(dt) for _ in range(p)]
    info = np.iinfo(dt)
    lo, hi = max(info.min, -100), min(info.max, 100)
    return [rng.integers(lo, hi, count, dtype=dt, endpoint=True) for _ in range(p)]


def reduce_in_order(xs: list[np.ndarray], dtype: int, op: int, order: list[int]) -> np.ndarray:
    """acc = x[order[0]]; acc = op(acc, x[r]) for the others, rounding each step as the device does."""
    fn = _OPS[op]
    if dtype == BF16:
        acc = bf16_to_float32(xs[order[0]])
        for r in order[1:]:
            acc = bf16_to_float32(float32_to_bf16(fn(acc, bf16_to_float32(xs[r]))))
        return float32_to_bf16(acc)
    acc = xs[order[0]].copy()
    with np.errstate(over="ignore", invalid="ignore"):
        for r in order[1:]:
            acc = fn(acc, xs[r]).astype(acc.dtype)
    return acc


def mesh_order(j: int, p: int) -> list[int]:
    """Chunk j, reduced by its owner: its own first, then the next ranks."""
    return [(j + d) % p for d in range(p)]


def ring_order(j: int, p: int) -> list[int]:
    """Chunk j, around the ring: from the rank after its owner, the owner last."""
    return [(j + d) % p for d in range(1, p)] + [j]


def all_reduce_expected(xs: list[np.ndarray], dtype: int, op: int, order) -> np.ndarray:
    """The result every rank holds: chunk by chunk (chunks as the algorithm splits), each in ``order(j, p)``."""
    p = len(xs)
    out = np.empty_like(xs[0])
    for j, (o, n) in enumerate(split(len(xs[0]), p)):
        out[o:o + n] = reduce_in_order([x[o:o + n] for x in xs], dtype, op, order(j, p))
    return out
