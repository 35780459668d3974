"""Helpers of the collectives tests (not a test module): ranks as threads, and numpy's answers.

    run_ranks(acl, devices, body)      one thread per rank: set_device, a stream, body(rank, stream)
    run_rank_processes(script, argvs, env)   one process per rank: the JSON each printed last
    device_alloc(acl, nbytes)          device memory of the thread's current device
    every_operation(...)               one rank's part of each operation (a thread's or a process's)
    check_every_operation(...)         those results against numpy
    reduce_in_order(xs, op, order)     the reduction HCCL's algorithms compute, in their order
    ring_order(j, p) / mesh_order(j, p)   the order in which chunk j of p ranks is summed
    DTYPES                             HcclDataType -> numpy dtype (bf16 as uint16 bit patterns)
    drill(...)                         one rank's part of a failure drill (tests/test_hccl_failures.py)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np

from mdev import hccl_types as H
from mdev.dtypes import bf16_to_float32, float32_to_bf16
from mdev.runtime.collectives.algorithms import split      # how the algorithms cut a buffer into chunks

DTYPES = {value: (np.dtype(np.uint16) if name == "bfloat16" else np.dtype(name))
          for value, name in H.DATA_TYPE_NUMPY.items() if name is not None}
BF16 = H.HCCL_DATA_TYPE_BFP16
_OPS = {H.HCCL_REDUCE_SUM: np.add, H.HCCL_REDUCE_PROD: np.multiply, H.HCCL_REDUCE_MAX: np.maximum,
        H.HCCL_REDUCE_MIN: np.minimum}


def device_alloc(acl, nbytes: int) -> int:
    """``nbytes`` (at least 1) of the current device's memory."""
    ptr, ret = acl.rt.malloc(max(nbytes, 1), 0)
    assert ret == 0, acl.get_recent_err_msg()
    return ptr


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


def run_rank_processes(script: str, argvs: list[list[str]], env: dict, timeout: float = 150.0) -> list:
    """``script`` (indented source, run by ``python -c``) in one process per rank, each with its
    arguments; what each printed as JSON on its last line, by rank.  A process that fails fails
    the call (with the tail of its stderr); any still running at the end is killed."""
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *argv], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for argv in argvs]
    results = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, err[-2000:]
            results.append(json.loads(out.splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
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


def every_operation(acl, hccl, r: int, p: int, comm: int, stream: int, x: np.ndarray, count: int, dtype: int):
    """Rank r's part of each operation, on its stream, with its data ``x`` (p blocks of
    ``count``): (outputs by operation, the all_to_all_v displacements and sizes it received)."""
    dt, root = DTYPES[dtype], p - 1
    item = dt.itemsize
    ptrs = []

    def alloc(nbytes: int) -> int:
        ptr, ret = acl.rt.malloc(max(nbytes, 1), 0)
        assert ret == 0, acl.get_recent_err_msg()
        ptrs.append(ptr)
        return ptr

    def to_device(ptr: int, data: np.ndarray) -> None:
        data = np.ascontiguousarray(data)
        assert acl.rt.memcpy(ptr, data.nbytes, acl.util.numpy_to_ptr(data), data.nbytes, 1) == 0

    send = alloc(p * count * item)
    to_device(send, x)
    out = {}

    def run(name, nbytes, call):
        recv = alloc(nbytes)
        assert call(recv) == 0, f"{name}: {acl.get_recent_err_msg()}"
        out[name] = (recv, nbytes)

    run("broadcast", count * item, lambda b: (to_device(b, x[:count]) if r == root else None) or
        hccl.broadcast(b, count, dtype, root, comm, stream))
    run("all_gather", p * count * item, lambda b: hccl.all_gather(send, b, count, dtype, comm, stream))
    run("reduce_scatter", count * item, lambda b: hccl.reduce_scatter(send, b, count, dtype, 0, comm, stream))
    run("reduce", count * item, lambda b: hccl.reduce(send, b, count, dtype, 2, root, comm, stream))
    run("scatter", count * item, lambda b: hccl.scatter(send, b, count, dtype, root, comm, stream))
    run("all_to_all", p * count * item, lambda b: hccl.all_to_all(send, count, dtype, b, count, dtype, comm, stream))
    sizes = [(r + q) % 3 * 5 + 1 for q in range(p)]            # what r sends q
    got = [(q + r) % 3 * 5 + 1 for q in range(p)]               # what q sends r
    rdispls = [int(d) for d in np.cumsum([0] + got[:-1])]
    run("all_to_all_v", p * count * item, lambda b: hccl.all_to_all_v(
        send, sizes, [q * count for q in range(p)], dtype, b, got, rdispls, dtype, comm, stream))
    right, left = (r + 1) % p, (r - 1) % p
    run("send_recv", count * item, lambda b: (hccl.group_start() or hccl.send(send, count, dtype, right, comm, stream)
                                             or hccl.recv(b, count, dtype, left, comm, stream) or hccl.group_end()))
    run("batch", 2 * count * item, lambda b: hccl.batch_send_recv(
        [{"sendRecvType": hccl.HCCL_SEND, "buf": send + count * item, "count": count, "dataType": dtype,
          "remoteRank": left},
         (hccl.HCCL_RECV, b, count, dtype, right), (hccl.HCCL_RECV, b + count * item, count, dtype, left),
         (hccl.HCCL_SEND, send, count, dtype, right)], 4, comm, stream))
    assert hccl.barrier(comm, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0, acl.get_recent_err_msg()
    result = {}
    for name, (ptr, n) in out.items():
        host = np.empty(n, np.uint8)
        assert acl.rt.memcpy(acl.util.numpy_to_ptr(host), n, ptr, n, 2) == 0
        result[name] = host.view(dt)
    for ptr in ptrs:
        acl.rt.free(ptr)
    return result, rdispls, got


def check_every_operation(results: list, xs: list[np.ndarray], count: int, dtype: int, order) -> None:
    p, root = len(xs), len(xs) - 1
    blocks = [[x[q * count:(q + 1) * count] for q in range(p)] for x in xs]
    for r, (got, rdispls, sizes) in enumerate(results):
        np.testing.assert_array_equal(got["broadcast"], xs[root][:count])
        np.testing.assert_array_equal(got["all_gather"], np.concatenate([x[:count] for x in xs]))
        np.testing.assert_array_equal(got["reduce_scatter"], reduce_in_order([b[r] for b in blocks], dtype, 0,
                                                                             order(r, p)))
        if r == root:
            np.testing.assert_array_equal(got["reduce"], np.maximum.reduce([x[:count] for x in xs]))
        np.testing.assert_array_equal(got["scatter"], blocks[root][r])
        np.testing.assert_array_equal(got["all_to_all"], np.concatenate([blocks[q][r] for q in range(p)]))
        for q in range(p):
            np.testing.assert_array_equal(got["all_to_all_v"][rdispls[q]:rdispls[q] + sizes[q]], blocks[q][r][:sizes[q]])
        np.testing.assert_array_equal(got["send_recv"], xs[(r - 1) % p][:count])
        np.testing.assert_array_equal(got["batch"][:count], xs[(r + 1) % p][count:2 * count])
        np.testing.assert_array_equal(got["batch"][count:], xs[(r - 1) % p][:count])


CAUSE_AT, DRILL_OPS = 2, 5           # the drill's op that meets the failure, and how many each rank runs


def drill(acl, hccl, r: int, p: int, comm: int, stream: int, count: int, cause: str, odd: int, marks: str,
          live: list[int]) -> dict:
    """Rank r's part of a failure drill: DRILL_OPS all_reduces (sum) of fresh fp32 data (rank q
    sends q + 1 + 10 i in op i), each synchronised and its output checked.  Rank ``odd``
    causes the failure at op CAUSE_AT: ``cause`` "count" / "dtype" asks for another count /
    data type, "destroy" destroys its communicator right after queuing the op, "death"
    SIGKILLs its own process right after queuing it.  ``marks``: a directory where the
    cause writes its time (time.monotonic, one clock for every process) and each rank in
    ``live`` says it is done; none returns before all are (a communicator destroyed early
    would change what a slower peer reports).  Returns what each op gave."""
    nbytes = count * 4
    send, _ = acl.rt.malloc(nbytes, 0)
    recv, _ = acl.rt.malloc(nbytes, 0)
    report: dict = {"rank": r, "ops": [], "issued": []}
    for i in range(DRILL_OPS):
        x = np.full(count, r + 1 + 10 * i, np.float32)
        assert acl.rt.memcpy(send, nbytes, acl.util.numpy_to_ptr(x), nbytes, 1) == 0
        causing = r == odd and i == CAUSE_AT
        n = count - 1 if causing and cause == "count" else count
        dtype = H.HCCL_DATA_TYPE_INT32 if causing and cause == "dtype" else H.HCCL_DATA_TYPE_FP32
        ret = hccl.all_reduce(send, recv, n, dtype, H.HCCL_REDUCE_SUM, comm, stream)
        report["issued"].append(time.monotonic())
        if causing and cause in ("death", "destroy"):
            with open(os.path.join(marks, "cause"), "w") as f:
                f.write(repr(time.monotonic()))
            if cause == "death":
                os.kill(os.getpid(), signal.SIGKILL)
            t = time.monotonic()
            report["destroy"] = (hccl.comm_destroy(comm), time.monotonic() - t)
        sync = acl.rt.synchronize_stream(stream)
        end = time.monotonic()
        msg = acl.get_recent_err_msg() or ""
        out = np.empty(count, np.float32)
        acl.rt.memcpy(acl.util.numpy_to_ptr(out), nbytes, recv, nbytes, 2)
        exact = bool(np.all(out == p * (p + 1) // 2 + 10 * i * p))
        report["ops"].append((ret, sync, end, exact, msg))
        if "destroy" in report:
            break
    open(os.path.join(marks, f"done{r}"), "w").close()
    deadline = time.monotonic() + 60
    while not all(os.path.exists(os.path.join(marks, f"done{q}")) for q in live):
        assert time.monotonic() < deadline, "a rank of the drill never finished"
        time.sleep(0.01)
    acl.rt.free(send)
    acl.rt.free(recv)
    return json.loads(json.dumps(report))
