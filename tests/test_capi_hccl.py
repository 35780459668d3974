"""libhccl.so (``mdev cann-home``'s lib64/, over mdev.runtime.collectives like mdev.hccl):

    wrapper style   two processes load it with ctypes as vllm-ascend's and sglang's
                    pyhccl_wrapper.py do (HCCL_SO_PATH, argtypes / restype, a 4108-byte
                    root-info structure), one device each, memory and streams from mdev.acl
    C threads       tests/c/hccl_allreduce.c: one thread per rank as HCCL's examples run it,
                    communicators from HcclCommInitAll or from HcclGetRootInfo +
                    HcclCommInitRootInfo, on 2 and 4 devices
    errors          bad data type / op / rank, NULL and destroyed communicators, NULL outputs,
                    functions mdev does not have (HCCL_E_NOT_SUPPORT with a message, never 0)
    arrays          HcclBatchSendRecv's items and HcclAlltoAllV's counts read from the caller;
                    Reduce, Scatter, AlltoAll, GetCommAsyncError, GroupStatusGet
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from capi_helpers import board_env, compile_c
from mdev import hccl_types as H
from mdev.capi import adapter, prototypes
from mdev.runtime import boundary

# the C functions libhccl.so must implement (the wrappers' and HCCL's examples' calls)
REQUIRED = ("HcclGetErrorString HcclGetRootInfo HcclCommInitRootInfo HcclCommInitAll HcclAllReduce HcclAllGather "
            "HcclReduceScatter HcclBroadcast HcclSend HcclRecv HcclCommDestroy HcclGetRankSize HcclGetRankId "
            "HcclBarrier").split()

# The loading and the prototypes of pyhccl_wrapper.py (vllm-ascend; sglang's adds the rest):
# a ctypes structure of 4108 bytes for the root info, c_void_p for buffers, communicators and
# streams, c_size_t counts, c_int enums.
WRAPPER = """
import ctypes, os

hcclResult_t = ctypes.c_int
hcclComm_t = ctypes.c_void_p
buffer_type = ctypes.c_void_p
aclrtStream_t = ctypes.c_void_p
hcclDataType_t = ctypes.c_int
hcclRedOp_t = ctypes.c_int


class hcclUniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 4108)]


FUNCTIONS = {
    "HcclGetErrorString": (ctypes.c_char_p, [hcclResult_t]),
    "HcclGetRootInfo": (hcclResult_t, [ctypes.POINTER(hcclUniqueId)]),
    "HcclCommInitRootInfo": (hcclResult_t, [ctypes.c_int, ctypes.POINTER(hcclUniqueId), ctypes.c_int,
                                            ctypes.POINTER(hcclComm_t)]),
    "HcclAllReduce": (hcclResult_t, [buffer_type, buffer_type, ctypes.c_size_t, hcclDataType_t, hcclRedOp_t,
                                     hcclComm_t, aclrtStream_t]),
    "HcclAllGather": (hcclResult_t, [buffer_type, buffer_type, ctypes.c_size_t, hcclDataType_t, hcclComm_t,
                                     aclrtStream_t]),
    "HcclReduceScatter": (hcclResult_t, [buffer_type, buffer_type, ctypes.c_size_t, hcclDataType_t, hcclRedOp_t,
                                         hcclComm_t, aclrtStream_t]),
    "HcclBroadcast": (hcclResult_t, [buffer_type, ctypes.c_size_t, hcclDataType_t, ctypes.c_int, hcclComm_t,
                                     aclrtStream_t]),
    "HcclSend": (hcclResult_t, [buffer_type, ctypes.c_size_t, hcclDataType_t, ctypes.c_int, hcclComm_t,
                                aclrtStream_t]),
    "HcclRecv": (hcclResult_t, [buffer_type, ctypes.c_size_t, hcclDataType_t, ctypes.c_int, hcclComm_t,
                                aclrtStream_t]),
    "HcclBarrier": (hcclResult_t, [hcclComm_t, aclrtStream_t]),
    "HcclGetRankSize": (hcclResult_t, [hcclComm_t, ctypes.POINTER(ctypes.c_uint32)]),
    "HcclGetRankId": (hcclResult_t, [hcclComm_t, ctypes.POINTER(ctypes.c_uint32)]),
    "HcclCommDestroy": (hcclResult_t, [hcclComm_t]),
}

lib = ctypes.CDLL(os.environ["HCCL_SO_PATH"])
hccl = {}
for name, (restype, argtypes) in FUNCTIONS.items():
    f = getattr(lib, name)
    f.restype, f.argtypes = restype, argtypes
    hccl[name] = f


def check(name, *args):
    ret = hccl[name](*args)
    assert ret == 0, f"{name}: {ret} {hccl['HcclGetErrorString'](ret)!r} {acl.get_recent_err_msg()}"
"""

# One rank of a two-process job (argv: rank, root-info file): rank 0 writes the root info,
# rank 1 waits for it; every operation's result is checked exactly against numpy.
RANK = """
import sys, time
import numpy as np
import mdev.acl as acl
from helpers import from_device, to_device

rank, path = int(sys.argv[1]), sys.argv[2]
FP32, SUM, MAX, N = 4, 0, 2, 3000
assert acl.init() == 0 and acl.rt.set_device(rank) == 0
stream, ret = acl.rt.create_stream()
uid = hcclUniqueId()
if rank == 0:
    check("HcclGetRootInfo", ctypes.byref(uid))
    with open(path + ".tmp", "wb") as f:
        f.write(bytes(uid))
    os.rename(path + ".tmp", path)
else:
    deadline = time.monotonic() + 60
    while not os.path.exists(path):
        assert time.monotonic() < deadline, "no root info"
        time.sleep(0.01)
    ctypes.memmove(ctypes.byref(uid), open(path, "rb").read(), ctypes.sizeof(uid))
comm = hcclComm_t()
check("HcclCommInitRootInfo", 2, ctypes.byref(uid), rank, ctypes.byref(comm))
size, me = ctypes.c_uint32(), ctypes.c_uint32()
check("HcclGetRankSize", comm, ctypes.byref(size))
check("HcclGetRankId", comm, ctypes.byref(me))
assert (size.value, me.value) == (2, rank)

def alloc(n):
    ptr, ret = acl.rt.malloc(n * 4, 0)
    assert ret == 0
    return ptr

data = [np.random.default_rng(r).standard_normal(2 * N).astype(np.float32) for r in range(2)]
send, recv, gathered = alloc(2 * N), alloc(2 * N), alloc(4 * N)
to_device(acl, send, data[rank])
check("HcclAllReduce", send, recv, 2 * N, FP32, SUM, comm, stream)
assert acl.rt.synchronize_stream(stream) == 0
assert np.array_equal(from_device(acl, recv, 8 * N, np.float32), data[0] + data[1])   # two terms: exact
check("HcclAllGather", send, gathered, 2 * N, FP32, comm, stream)
check("HcclReduceScatter", send, recv, N, FP32, MAX, comm, stream)
assert acl.rt.synchronize_stream(stream) == 0
assert np.array_equal(from_device(acl, gathered, 16 * N, np.float32), np.concatenate(data))
half = slice(rank * N, (rank + 1) * N)
assert np.array_equal(from_device(acl, recv, 4 * N, np.float32), np.maximum(data[0], data[1])[half])
check("HcclBroadcast", send, 2 * N, FP32, 1, comm, stream)
assert acl.rt.synchronize_stream(stream) == 0
assert np.array_equal(from_device(acl, send, 8 * N, np.float32), data[1])
# rank 0 sends its own numbers to rank 1 (its buffer now holds rank 1's, after the broadcast)
to_device(acl, send, data[rank])
if rank == 0:
    check("HcclSend", send, N, FP32, 1, comm, stream)
else:
    check("HcclRecv", recv, N, FP32, 0, comm, stream)
check("HcclBarrier", comm, stream)
assert acl.rt.synchronize_stream(stream) == 0
if rank == 1:
    assert np.array_equal(from_device(acl, recv, 4 * N, np.float32), data[0][:N])
check("HcclCommDestroy", comm)
for ptr in (send, recv, gathered):
    assert acl.rt.free(ptr) == 0
assert acl.rt.destroy_stream(stream) == 0 and acl.rt.reset_device(rank) == 0 and acl.finalize() == 0
print(f"rank {rank} exact")
"""


TESTS = str(Path(__file__).resolve().parent)


def _python(code: str, board: str, home: Path, *args: str) -> subprocess.Popen:
    """``code`` in a process of its own on ``board``, HCCL_SO_PATH naming the tree's libhccl.so
    (tests/ on its path for the helpers)."""
    path = os.pathsep.join(p for p in (TESTS, os.environ.get("PYTHONPATH")) if p)
    env = board_env(board, HCCL_SO_PATH=str(home / "lib64" / "libhccl.so"), HCCL_BUFFSIZE="4",
                    HCCL_EXEC_TIMEOUT="60", PYTHONPATH=path)
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], cwd=TESTS, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_library_has_every_required_function_and_no_silent_stub():
    """Each required function has its implementation; each other declared one answers
    HCCL_E_NOT_SUPPORT (5) with a message naming it -- never HCCL_SUCCESS."""
    declared = prototypes.declared_in("hccl")
    assert {f.name for f in declared} >= set(REQUIRED)
    for fn in declared:
        entry = adapter.build(fn.name)
        stub = getattr(entry, "mdev_unsupported", None) is not None
        assert not (stub and fn.name in REQUIRED), f"{fn.name} is not implemented"
        if stub:
            assert entry(*([0] * len(fn.params))) == H.HCCL_E_NOT_SUPPORT
            assert f"{fn.name} is not supported" in boundary.recent_messages()


def test_wrapper_style_two_processes_all_reduce_exact(board, cann_home, tmp_path):
    """vllm-ascend's way: root info from rank 0 to rank 1 (a file here), HcclCommInitRootInfo
    in two processes on devices 0 and 1, then AllReduce / AllGather / ReduceScatter /
    Broadcast / Send+Recv / Barrier, each result compared exactly."""
    procs = [_python(WRAPPER + RANK, board, cann_home, str(rank), str(tmp_path / "root.bin")) for rank in (0, 1)]
    outputs = [p.communicate(timeout=180)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(outputs)
    assert "rank 0 exact" in outputs[0] and "rank 1 exact" in outputs[1]


@pytest.mark.parametrize("init, ranks", [("all", 2), ("all", 4), ("root", 4)])
def test_c_thread_per_rank_all_reduce(init, ranks, board, cann_home, tmp_path):
    binary = compile_c(cann_home, "hccl_allreduce.c", tmp_path / "hccl_allreduce", libs=("ascendcl", "hccl"))
    proc = subprocess.run([str(binary), init, str(ranks)], env=board_env(board, HCCL_BUFFSIZE="4"),
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sums = " ".join(str(ranks * i + ranks * (ranks - 1) // 2) for i in range(8))
    lines = sorted(line for line in proc.stdout.splitlines() if line.startswith("rankId"))
    assert lines == [f"rankId: {r}, output: [ {sums} ]" for r in range(ranks)]
    assert "0 failures" in proc.stdout


ERRORS = """
import mdev.acl as acl
assert acl.init() == 0 and acl.rt.set_device(0) == 0
stream, _ = acl.rt.create_stream()
buf, _ = acl.rt.malloc(64, 0)
comms = (ctypes.c_void_p * 2)()
lib.HcclCommInitAll.argtypes = [ctypes.c_uint32, ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_void_p)]
assert lib.HcclCommInitAll(2, (ctypes.c_int32 * 2)(0, 1), comms) == 0
comm = comms[0]
def expect(code, text, name, *args):
    ret = hccl[name](*args)
    message = acl.get_recent_err_msg() or ""
    assert ret == code and text in message, (name, ret, message)
expect(1, "dataType 99 is not an HcclDataType", "HcclAllReduce", buf, buf, 4, 99, 0, comm, stream)
expect(1, "op 7 is not an HcclReduceOp", "HcclAllReduce", buf, buf, 4, 4, 7, comm, stream)
expect(2, "comm is NULL", "HcclAllReduce", buf, buf, 4, 4, 0, None, stream)
expect(1, "root 5 is not a rank", "HcclBroadcast", buf, 4, 4, 5, comm, stream)
expect(1, "destRank 0 is this rank itself", "HcclSend", buf, 4, 4, 0, comm, stream)
expect(1, "device memory", "HcclAllReduce", buf, ctypes.addressof(ctypes.create_string_buffer(64)), 4, 4, 0,
       comm, stream)
expect(2, "rankSize is NULL", "HcclGetRankSize", comm, None)
expect(2, "rootInfo is NULL", "HcclGetRootInfo", None)
out = hcclComm_t()
expect(2, "rootInfo is NULL", "HcclCommInitRootInfo", 2, None, 0, ctypes.byref(out))
expect(1, "rootInfo must be", "HcclCommInitRootInfo", 2, ctypes.byref(hcclUniqueId()), 0, ctypes.byref(out))
assert lib.HcclCommInitClusterInfo(b"/nonexistent/rank_table.json", 0, ctypes.byref(out)) == 1
assert "cannot read rank table /nonexistent/rank_table.json" in acl.get_recent_err_msg()
assert lib.HcclCommSuspend(ctypes.c_void_p(comm)) == 5
assert "HcclCommSuspend is not supported by mdev" in acl.get_recent_err_msg()
assert [hccl["HcclGetErrorString"](code) for code in (0, 1, 5)] == [b"success", b"parameter error", b"feature not supported"]
for c in comms:
    assert hccl["HcclCommDestroy"](c) == 0
expect(1, "not a live communicator", "HcclAllReduce", buf, buf, 4, 4, 0, comm, stream)
expect(1, "not a live communicator", "HcclCommDestroy", comm)
assert acl.rt.free(buf) == 0 and acl.rt.destroy_stream(stream) == 0 and acl.rt.reset_device(0) == 0
assert acl.finalize() == 0
print("errors as codes")
"""


def test_errors_are_hccl_results_with_messages(board, cann_home):
    proc = _python(WRAPPER + ERRORS, board, cann_home)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 0 and "errors as codes" in out, out


# The arrays libhccl.so reads from the caller (HcclSendRecvItem[], AlltoAllV's counts) and the
# operations the wrappers do not call, on two ranks driven by two threads of one process.
ARRAYS = """
import threading
import numpy as np
import mdev.acl as acl
from helpers import from_device, to_device

class Item(ctypes.Structure):
    _fields_ = [("sendRecvType", ctypes.c_int), ("buf", ctypes.c_void_p), ("count", ctypes.c_uint64),
                ("dataType", ctypes.c_int), ("remoteRank", ctypes.c_uint32)]

assert acl.init() == 0
comms = (ctypes.c_void_p * 2)()
assert lib.HcclCommInitAll(2, (ctypes.c_int32 * 2)(0, 1), comms) == 0, acl.get_recent_err_msg()
N, INT32 = 256, 2
results, errors = {}, []

def rank(r):
    try:
        assert acl.rt.set_device(r) == 0
        stream, _ = acl.rt.create_stream()
        send, _ = acl.rt.malloc(4 * 3 * N, 0)
        recv, _ = acl.rt.malloc(4 * 3 * N, 0)
        mine = np.arange(3 * N, dtype=np.int32) + 10000 * r
        to_device(acl, send, mine)
        # one send to and one receive from the other rank, in one call
        items = (Item * 2)(Item(0, send, N, INT32, 1 - r), Item(1, recv, N, INT32, 1 - r))
        assert lib.HcclBatchSendRecv(items, 2, ctypes.c_void_p(comms[r]), ctypes.c_void_p(stream)) == 0
        assert acl.rt.synchronize_stream(stream) == 0
        results[r, "batch"] = from_device(acl, recv, 4 * N, np.int32)
        # AlltoAllV: rank q gets (q + 1) * N // 2 elements from each rank, at sdispls q * N
        counts = (ctypes.c_uint64 * 2)(N // 2, N)
        displs = (ctypes.c_uint64 * 2)(0, N)
        rcount = (r + 1) * N // 2
        rcounts, rdispls = (ctypes.c_uint64 * 2)(rcount, rcount), (ctypes.c_uint64 * 2)(0, rcount)
        assert lib.HcclAlltoAllV(ctypes.c_void_p(send), counts, displs, INT32, ctypes.c_void_p(recv), rcounts,
                                 rdispls, INT32, ctypes.c_void_p(comms[r]), ctypes.c_void_p(stream)) == 0, \\
            acl.get_recent_err_msg()
        assert lib.HcclAlltoAllV(ctypes.c_void_p(send), None, displs, INT32, ctypes.c_void_p(recv), rcounts,
                                 rdispls, INT32, ctypes.c_void_p(comms[r]), ctypes.c_void_p(stream)) == 2
        assert acl.rt.synchronize_stream(stream) == 0
        results[r, "v"] = from_device(acl, recv, 4 * 2 * rcount, np.int32)
        # Reduce (sum into rank 0), Scatter (rank 1's halves), AlltoAll: marshalled from the prototype
        c, st = ctypes.c_void_p(comms[r]), ctypes.c_void_p(stream)
        assert lib.HcclReduce(ctypes.c_void_p(send), ctypes.c_void_p(recv), ctypes.c_uint64(N), INT32, 0,
                              ctypes.c_uint32(0), c, st) == 0
        assert acl.rt.synchronize_stream(stream) == 0
        if r == 0:
            results[r, "reduce"] = from_device(acl, recv, 4 * N, np.int32)
        assert lib.HcclScatter(ctypes.c_void_p(send), ctypes.c_void_p(recv), ctypes.c_uint64(N), INT32,
                               ctypes.c_uint32(1), c, st) == 0
        assert acl.rt.synchronize_stream(stream) == 0
        results[r, "scatter"] = from_device(acl, recv, 4 * N, np.int32)
        assert lib.HcclAlltoAll(ctypes.c_void_p(send), ctypes.c_uint64(N), INT32, ctypes.c_void_p(recv),
                                ctypes.c_uint64(N), INT32, c, st) == 0
        assert acl.rt.synchronize_stream(stream) == 0
        results[r, "alltoall"] = from_device(acl, recv, 4 * 2 * N, np.int32)
        status = ctypes.c_int(-1)
        assert lib.HcclGetCommAsyncError(c, ctypes.byref(status)) == 0 and status.value == 0
        enabled = ctypes.c_bool(True)
        assert lib.HcclGroupStatusGet(ctypes.byref(enabled)) == 0 and not enabled.value
        for ptr in (send, recv):
            assert acl.rt.free(ptr) == 0
        assert acl.rt.destroy_stream(stream) == 0
    except BaseException as exc:
        errors.append((r, exc))

threads = [threading.Thread(target=rank, args=(r,)) for r in (0, 1)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not errors, errors
base = np.arange(3 * N, dtype=np.int32)
for r in (0, 1):
    assert np.array_equal(results[r, "batch"], base[:N] + 10000 * (1 - r))
    rcount = (r + 1) * N // 2
    offset = 0 if r == 0 else N
    expected = np.concatenate([base[offset:offset + rcount] + 10000 * q for q in (0, 1)])
    assert np.array_equal(results[r, "v"], expected), r
    assert np.array_equal(results[r, "scatter"], base[r * N:(r + 1) * N] + 10000)
    assert np.array_equal(results[r, "alltoall"], np.concatenate([base[r * N:(r + 1) * N] + 10000 * q
                                                                  for q in (0, 1)]))
assert np.array_equal(results[0, "reduce"], 2 * base[:N] + 10000)
for c in comms:
    assert lib.HcclCommDestroy(ctypes.c_void_p(c)) == 0
assert acl.rt.reset_device(0) == 0 and acl.rt.reset_device(1) == 0 and acl.finalize() == 0
print("arrays read")
"""


def test_batch_send_recv_and_all_to_all_v_read_the_callers_arrays(board, cann_home):
    proc = _python(WRAPPER + ARRAYS, board, cann_home)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 0 and "arrays read" in out, out
