"""mdev.hccl: HCCL's API on emulated boards -- every operation, both rank models (threads of one
process, processes), every data type and reduce op, the error cases, and modelled time
against HCCL's alpha-beta-gamma formulas (mdev.runtime.collectives.cost)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import mdev.hccl as hccl
from hccl_ranks import (BF16, DTYPES, all_reduce_expected, check_every_operation, device_alloc, every_operation,
                        inputs, mesh_order, ring_order, run_ranks)
from helpers import extra_board, from_device, to_device
from mdev import hccl_types as H
from mdev.naming import runtime_dir
from mdev.cli.trace import collective_times

MiB = 1 << 20
REDUCIBLE = sorted(DTYPES)
OPS = [H.HCCL_REDUCE_SUM, H.HCCL_REDUCE_PROD, H.HCCL_REDUCE_MAX, H.HCCL_REDUCE_MIN]


@pytest.fixture(autouse=True)
def _small_buffer(monkeypatch):
    monkeypatch.setenv("HCCL_BUFFSIZE", "4")          # MB: fits the small test boards
    monkeypatch.setenv("HCCL_EXEC_TIMEOUT", "60")
    monkeypatch.delenv("HCCL_ALGO", raising=False)


def _comms(acl, devices):
    comms, ret = hccl.comm_init_all(len(devices), devices)
    assert ret == H.HCCL_SUCCESS, acl.get_recent_err_msg()
    return comms


def _destroy(comms):
    for c in comms:
        assert hccl.comm_destroy(c) == H.HCCL_SUCCESS


def test_constants_have_hccls_values():
    assert (hccl.HCCL_DATA_TYPE_INT8, hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_DATA_TYPE_BFP16) == (0, 4, 11)
    assert (hccl.HCCL_DATA_TYPE_INT64, hccl.HCCL_DATA_TYPE_UINT64, hccl.HCCL_DATA_TYPE_FP64) == (5, 6, 10)
    assert (hccl.HCCL_REDUCE_SUM, hccl.HCCL_REDUCE_PROD, hccl.HCCL_REDUCE_MAX, hccl.HCCL_REDUCE_MIN) == (0, 1, 2, 3)
    assert (hccl.HCCL_SUCCESS, hccl.HCCL_E_PARA, hccl.HCCL_E_PTR, hccl.HCCL_E_TIMEOUT, hccl.HCCL_E_REMOTE) == \
        (0, 1, 2, 9, 21)
    assert (hccl.HCCL_SEND, hccl.HCCL_RECV, hccl.HCCL_ROOT_INFO_BYTES) == (0, 1, 4108)
    # hicann/hcomm include/hccl/hccl_types.h: the enums' later values and end markers
    assert (hccl.HCCL_E_OOM, hccl.HCCL_E_IN_STATUS, hccl.HCCL_E_RESERVED) == (24, 1041, 1042)
    assert (hccl.HCCL_REDUCE_RESERVED, hccl.HCCL_DATA_TYPE_RESERVED, hccl.HCCL_SEND_RECV_RESERVED) == (255, 255, 2)
    assert (hccl.HCCL_DATA_TYPE_INT128, hccl.HCCL_DATA_TYPE_HIF8, hccl.HCCL_DATA_TYPE_FP8E8M0) == (12, 14, 17)
    assert hccl.HCCL_COMM_DEFAULT_BUFFSIZE == 200
    assert hccl.get_error_string(hccl.HCCL_E_PARA) == "parameter error"


# ---------------------------------------------------------------------------- all_reduce
def _all_reduce_every(acl, devices, cases, count):
    """all_reduce of each (dtype, op) case on every rank; the results by rank and case."""
    comms = _comms(acl, devices)
    data = {case: inputs(case[0], len(devices), count, seed=i) for i, case in enumerate(cases)}

    def body(r, stream):
        bufs = {}
        for (dtype, op), xs in data.items():
            n = xs[r].nbytes
            send, recv = device_alloc(acl, n), device_alloc(acl, n)
            to_device(acl, send, xs[r])
            assert hccl.all_reduce(send, recv, count, dtype, op, comms[r], stream) == 0, acl.get_recent_err_msg()
            bufs[dtype, op] = (send, recv, n)
        assert acl.rt.synchronize_stream(stream) == 0, acl.get_recent_err_msg()
        out = {k: from_device(acl, recv, n, DTYPES[k[0]]) for k, (_, recv, n) in bufs.items()}
        for send, recv, _ in bufs.values():
            acl.rt.free(send), acl.rt.free(recv)
        return out

    try:
        return data, run_ranks(acl, devices, body)
    finally:
        _destroy(comms)


def test_all_reduce_every_dtype_and_op_ring(acl):
    """pcie4: the devices reach each other through a PCIe switch -- a ring.  Integers and
    max/min do not depend on the order; sums and products of floats are checked in the
    ring's order."""
    cases = [(d, op) for d in REDUCIBLE for op in OPS]
    data, results = _all_reduce_every(acl, [0, 1, 2, 3], cases, 1001)
    for case, xs in data.items():
        expect = all_reduce_expected(xs, *case, ring_order)
        for r, got in enumerate(results):
            np.testing.assert_array_equal(got[case], expect, err_msg=f"rank {r} {case}")


def test_all_reduce_mesh_sums_each_chunk_from_its_owner(acl8):
    """hccs8 (full HCCS mesh): each rank's chunk is reduced by its owner, own data first;
    float results are bit-exact against numpy summing in that order."""
    cases = [(d, H.HCCL_REDUCE_SUM) for d in (H.HCCL_DATA_TYPE_FP32, H.HCCL_DATA_TYPE_FP16, BF16,
                                              H.HCCL_DATA_TYPE_FP64, H.HCCL_DATA_TYPE_INT8)]
    data, results = _all_reduce_every(acl8, list(range(8)), cases, 777)
    for case, xs in data.items():
        expect = all_reduce_expected(xs, *case, mesh_order)
        for got in results:
            np.testing.assert_array_equal(got[case], expect)


# ---------------------------------------------------------------------------- every operation
def _every_operation(acl, devices, order, count=1003, dtype=H.HCCL_DATA_TYPE_INT32):
    """Each operation once on every rank (thread per rank), checked against numpy (sums in
    the algorithm's ``order``)."""
    p = len(devices)
    xs = inputs(dtype, p, p * count, seed=7)
    comms = _comms(acl, devices)
    try:
        results = run_ranks(acl, devices, lambda r, stream: every_operation(acl, hccl, r, p, comms[r], stream,
                                                                            xs[r], count, dtype))
    finally:
        _destroy(comms)
    check_every_operation(results, xs, count, dtype, order)


def test_every_operation_ring(acl):
    _every_operation(acl, [0, 1, 2, 3], ring_order)


def test_every_operation_mesh(acl8):
    _every_operation(acl8, list(range(8)), mesh_order, count=257, dtype=H.HCCL_DATA_TYPE_FP32)


EVERY_OPERATION_PROCESS = """
    import pickle, sys
    sys.path.insert(0, sys.argv[5])
    import mdev.acl as acl
    import mdev.hccl as hccl
    from hccl_ranks import every_operation, inputs
    rank, nranks, count, dtype = (int(a) for a in sys.argv[1:5])
    assert acl.init() == 0 and acl.rt.set_device(rank) == 0
    with open(sys.argv[6], "rb") as f:
        comm, ret = hccl.comm_init_root_info(nranks, f.read(), rank)
    assert ret == 0, acl.get_recent_err_msg()
    stream, _ = acl.rt.create_stream()
    out = every_operation(acl, hccl, rank, nranks, comm, stream, inputs(dtype, nranks, nranks * count, seed=7)[rank],
                          count, dtype)
    assert hccl.comm_destroy(comm) == 0
    sys.stdout.buffer.write(pickle.dumps(out))
"""


def test_every_operation_process_per_rank(acl, board, tmp_path):
    """The same operations with a process per rank (root info in a file)."""
    import pickle
    p, count, dtype = 4, 601, H.HCCL_DATA_TYPE_INT16
    root, _ = hccl.get_root_info()
    (tmp_path / "root").write_bytes(root)
    env = dict(os.environ, MDEV_BOARD=board, MDEV_AUTOSTART="0")
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(EVERY_OPERATION_PROCESS), str(r), str(p),
                               str(count), str(dtype), os.path.dirname(__file__), str(tmp_path / "root")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) for r in range(p)]
    outs = [proc.communicate(timeout=180) for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), [err.decode()[-2000:] for _, err in outs]
    check_every_operation([pickle.loads(out) for out, _ in outs], inputs(dtype, p, p * count, seed=7), count, dtype,
                          ring_order)


# ---------------------------------------------------------------------------- islands: hierarchical, staged
@pytest.fixture(scope="module")
def islands():
    with extra_board("hccl-islands", "islands8", hbm=64 * MiB) as name:
        yield name


@pytest.fixture
def acl_islands(islands, monkeypatch):
    from helpers import attached
    with attached(monkeypatch, islands) as acl:
        yield acl


def test_islands_run_hierarchical_with_staged_transfers_between_them(acl_islands):
    """islands8: two HCCS quads without peer access between them.  AllReduce, AllGather and
    ReduceScatter go hierarchical (mesh inside a quad, a ring of staged transfers -- through
    pinned host memory -- between the quads); the other operations a flat ring with staged
    hops.  Data larger than a landing slot runs in parts."""
    acl = acl_islands
    from mdev.runtime.collectives.select import HIERARCHICAL, layout
    from mdev.runtime.collectives.comm import held as comm_state
    count, p, dtype = 400_000, 8, H.HCCL_DATA_TYPE_INT32         # 1.6 MB per rank: chunks over a slot
    comms = _comms(acl, list(range(p)))
    c0 = comm_state.comms[comms[0]]
    assert c0.levels.groups == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert layout(c0.levels, c0.choice, "allreduce", 0, p).algorithm == HIERARCHICAL
    assert (c0.channels[4].kind, c0.channels[1].kind) == ("staged", "direct") and c0.slot_bytes < count * 4 // 4
    xs = inputs(dtype, p, count, seed=3)

    def body(r, stream):
        n = count * 4
        send, recv, gathered, scattered = (device_alloc(acl, size) for size in (n, n, p * n, n // p))
        to_device(acl, send, xs[r])
        assert hccl.all_reduce(send, recv, count, dtype, 0, comms[r], stream) == 0
        assert hccl.all_gather(send, gathered, count, dtype, comms[r], stream) == 0
        assert hccl.reduce_scatter(send, scattered, count // p, dtype, 0, comms[r], stream) == 0
        assert hccl.broadcast(send, count, dtype, 5, comms[r], stream) == 0
        assert acl.rt.synchronize_stream(stream) == 0, acl.get_recent_err_msg()
        return (from_device(acl, recv, n, np.int32), from_device(acl, gathered, p * n, np.int32),
                from_device(acl, scattered, n // p, np.int32), from_device(acl, send, n, np.int32))

    try:
        results = run_ranks(acl, list(range(p)), body)
    finally:
        _destroy(comms)
    total = sum(x.astype(np.int64) for x in xs).astype(np.int32)
    for r, (ar, ag, rs, bc) in enumerate(results):
        np.testing.assert_array_equal(ar, total)
        np.testing.assert_array_equal(ag, np.concatenate(xs))
        np.testing.assert_array_equal(rs, total[r * (count // p):(r + 1) * (count // p)])
        np.testing.assert_array_equal(bc, xs[5])


# ---------------------------------------------------------------------------- process per rank
RANK_PROCESS = """
    import json, os, sys
    import numpy as np
    import mdev.acl as acl
    import mdev.hccl as hccl
    from mdev.runtime.collectives.comm import held as comm_state
    rank, nranks, count = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    with open(sys.argv[4], "rb") as f:
        root = f.read()
    if os.environ.get("MDEV_RANK_NODES"):              # this rank's cluster node
        os.environ["MDEV_NODE"] = os.environ["MDEV_RANK_NODES"].split(",")[rank]
    devices = os.environ.get("MDEV_RANK_DEVICES", ",".join(map(str, range(nranks)))).split(",")
    assert acl.init() == 0 and acl.rt.set_device(int(devices[rank])) == 0
    comm, ret = hccl.comm_init_root_info(nranks, root, rank)
    if ret:
        print(json.dumps({"init": ret, "msg": acl.get_recent_err_msg()})); sys.exit(0)
    open(f"{sys.argv[4]}.ready{rank}", "w").close()
    if os.environ.get("DIE_RANK") == str(rank):
        # gone before the collective, once every rank's communicator is made (a rank still
        # in its init would fail there instead, which is not what the test is about)
        import time
        deadline = time.monotonic() + 30
        while not all(os.path.exists(f"{sys.argv[4]}.ready{r}") for r in range(nranks)):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os._exit(3)
    stream, _ = acl.rt.create_stream()
    x = (np.arange(count, dtype=np.int64) * (rank + 1)).astype(np.int32)
    send, _ = acl.rt.malloc(count * 4, 0); recv, _ = acl.rt.malloc(count * 4, 0)
    gathered, _ = acl.rt.malloc(nranks * count * 4, 0)
    assert acl.rt.memcpy(send, count * 4, acl.util.numpy_to_ptr(x), count * 4, 1) == 0
    n = count if os.environ.get("ODD_RANK") != str(rank) else count - 1
    ops = [hccl.all_reduce(send, recv, n, hccl.HCCL_DATA_TYPE_INT32, hccl.HCCL_REDUCE_SUM, comm, stream)]
    if not os.environ.get("ODD_RANK") and not os.environ.get("DIE_RANK"):
        ops.append(hccl.all_gather(send, gathered, count, hccl.HCCL_DATA_TYPE_INT32, comm, stream))
    sync = acl.rt.synchronize_stream(stream)
    msg = acl.get_recent_err_msg()
    err, ret = hccl.get_comm_async_error(comm)
    # no rank destroys its communicator before every live one has its own error: a peer still
    # waiting would see the destroy first, and report that instead
    open(f"{sys.argv[4]}.synced{rank}", "w").close()
    live = [r for r in range(nranks) if os.environ.get("DIE_RANK") != str(r)]
    import time
    deadline = time.monotonic() + 60
    while not all(os.path.exists(f"{sys.argv[4]}.synced{r}") for r in live) and time.monotonic() < deadline:
        time.sleep(0.01)
    out = np.empty(count, np.int32); g = np.empty(nranks * count, np.int32)
    acl.rt.memcpy(acl.util.numpy_to_ptr(out), count * 4, recv, count * 4, 2)
    acl.rt.memcpy(acl.util.numpy_to_ptr(g), nranks * count * 4, gathered, nranks * count * 4, 2)
    xs = [(np.arange(count, dtype=np.int64) * (q + 1)).astype(np.int32) for q in range(nranks)]
    print(json.dumps({"ops": ops, "sync": sync, "async": err, "msg": msg, "sum": int(out.astype(np.int64).sum()),
                      "gathered": int(g.astype(np.int64).sum()),
                      "transports": sorted({c.kind for c in comm_state.comms[comm].channels.values()}),
                      "exact": bool(np.array_equal(out, np.sum(xs, axis=0, dtype=np.int32))
                                    and np.array_equal(g, np.concatenate(xs))),
                      "destroy": hccl.comm_destroy(comm)}))
"""


def _spawn_ranks(board: str, nranks: int, count: int, tmp_path, env: dict | None = None, timeout: float = 120):
    """Each rank in a process of its own (as torch_npu's mp.spawn jobs run); the root info
    travels in a file.  Returns each rank's JSON report (None for a rank that printed none)."""
    import mdev.acl as acl
    root, ret = hccl.get_root_info()
    assert ret == 0 and len(root) == hccl.HCCL_ROOT_INFO_BYTES
    blob = tmp_path / "root.info"
    blob.write_bytes(root)
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(RANK_PROCESS), str(r), str(nranks), str(count),
                               str(blob)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, MDEV_BOARD=board, MDEV_AUTOSTART="0", **(env or {})))
             for r in range(nranks)]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        lines = [line for line in out.splitlines() if line.startswith("{")]
        reports.append(json.loads(lines[-1]) if lines else None)
        assert lines or proc.returncode == 3, err
    del acl
    return reports


def test_process_per_rank_root_info_in_a_file(acl, board, tmp_path):
    count = 5000
    reports = _spawn_ranks(board, 4, count, tmp_path)
    total = sum(int((np.arange(count, dtype=np.int64) * (r + 1)).astype(np.int32).astype(np.int64).sum())
                for r in range(4))
    for rep in reports:
        assert "ops" in rep, rep
        assert rep["ops"] == [0, 0] and rep["sync"] == 0 and rep["async"] == 0 and rep["destroy"] == 0, rep
        assert rep["sum"] == total and rep["gathered"] == total and rep["exact"]
    assert not (runtime_dir() / f"{board}.hccl").exists(), "rendezvous files left behind"


def test_process_per_rank_across_cluster_nodes(tmp_path, monkeypatch):
    """a2-4x8: ranks on devices 0 and 1 of nodes 0 and 2, a process each.  Inside a node the
    pair has peer access (HCCS); between nodes its transfers are fabric writes over RoCE."""
    from helpers import attached
    with extra_board("hccl-a2", "a2-4x8", hbm=64 * MiB) as name, attached(monkeypatch, name):
        reports = _spawn_ranks(name, 4, 3000, tmp_path, env={"MDEV_RANK_NODES": "0,0,2,2",
                                                             "MDEV_RANK_DEVICES": "0,1,0,1"})
    total = sum(int((np.arange(3000, dtype=np.int64) * (r + 1)).astype(np.int32).astype(np.int64).sum())
                for r in range(4))
    for rep in reports:
        assert rep["sync"] == 0 and rep["ops"] == [0, 0] and rep["sum"] == total and rep["exact"], rep


def test_cloudmatrix384_first_and_last_node_all_reduce_exactly(tmp_path, monkeypatch):
    """The whole supernode's board (768 logical devices, nodes started on demand): rank 0 on
    node 0, rank 1 on node 47, a process each; their AllReduce (and AllGather) crosses the
    UB fabric and is exact; the board stops clean (extra_board checks /dev/shm)."""
    from helpers import attached
    with extra_board("hccl-cm384", "cloudmatrix384") as name, attached(monkeypatch, name):
        reports = _spawn_ranks(name, 2, 3000, tmp_path, env={"MDEV_RANK_NODES": "0,47",
                                                             "MDEV_RANK_DEVICES": "0,15"})
    for rep in reports:
        assert rep["sync"] == 0 and rep["ops"] == [0, 0] and rep["exact"] and rep["destroy"] == 0, rep
        assert rep["transports"] == ["fabric"], rep


def test_process_per_rank_across_islands(acl_islands, islands, tmp_path):
    """Ranks 0 and 4 of islands8 in processes of their own: no peer access between them, so
    their transfers go through pinned host memory of the receiving process."""
    reports = _spawn_ranks(islands, 2, 3000, tmp_path, env={"MDEV_RANK_DEVICES": "0,4"})
    assert all(rep["sync"] == 0 and rep["ops"] == [0, 0] for rep in reports), reports


# ---------------------------------------------------------------------------- errors
def test_bad_arguments_get_their_hcclresult_and_a_message(acl):
    comms = _comms(acl, [0, 1])

    def body(r, stream):
        c = comms[r]
        buf = device_alloc(acl, 4096)
        host = np.zeros(1024, np.float32)
        out = {
            "negative count": hccl.all_reduce(buf, buf, -1, 4, 0, c, stream),
            "no such dtype": hccl.all_reduce(buf, buf, 4, 99, 0, c, stream),
            "int128": hccl.all_reduce(buf, buf, 4, hccl.HCCL_DATA_TYPE_INT128, 0, c, stream),
            "no such op": hccl.all_reduce(buf, buf, 4, 4, 7, c, stream),
            "NULL buffer": hccl.all_reduce(0, buf, 4, 4, 0, c, stream),
            "host buffer": hccl.all_reduce(acl.util.numpy_to_ptr(host), buf, 4, 4, 0, c, stream),
            "too small": hccl.all_reduce(buf, buf, 2048, 4, 0, c, stream),
            "NULL comm": hccl.all_reduce(buf, buf, 4, 4, 0, 0, stream),
            "root": hccl.broadcast(buf, 4, 4, 2, c, stream),
            "send to self": hccl.send(buf, 4, 4, r, c, stream),
            "not a handle": hccl.get_rank_size(12345)[1],
        }
        message = acl.get_recent_err_msg()
        size, rank = hccl.get_rank_size(c), hccl.get_rank_id(c)
        return out, message, size, rank

    try:
        results = run_ranks(acl, [0, 1], body)
    finally:
        _destroy(comms)
    out, message, size, rank = results[1]
    assert out == {"negative count": H.HCCL_E_PARA, "no such dtype": H.HCCL_E_PARA, "int128": H.HCCL_E_NOT_SUPPORT,
                   "no such op": H.HCCL_E_PARA, "NULL buffer": H.HCCL_E_PTR, "host buffer": H.HCCL_E_PARA,
                   "too small": H.HCCL_E_PARA, "NULL comm": H.HCCL_E_PTR, "root": H.HCCL_E_PARA,
                   "send to self": H.HCCL_E_PARA, "not a handle": H.HCCL_E_PARA}
    assert "HCCL_E_PARA(1): 12345 is not a live communicator" in message
    assert "destRank 1 is this rank itself" in message and "is not an HcclDataType" in message
    assert size == (2, 0) and rank == (1, 0)
    # a destroyed communicator is no communicator
    assert hccl.all_reduce(1, 1, 0, 4, 0, comms[0], 0) == H.HCCL_E_PARA
    assert hccl.comm_destroy(comms[0]) == H.HCCL_E_PARA


def test_ranks_that_disagree_fail_on_every_rank(acl, board, tmp_path):
    """Rank 1 asks for one element fewer: every rank's synchronisation fails (the descriptor
    check of the first transfer, spread along the ring) instead of mixing buffers."""
    reports = _spawn_ranks(board, 4, 3000, tmp_path, env={"ODD_RANK": "1"})
    for rep in reports:
        assert rep["ops"] == [0] and rep["sync"] == 107000 and rep["async"] == H.HCCL_E_PARA, rep
    assert any("ranks disagree: count 3000 on rank 0, 2999 here" in rep["msg"] or
               "ranks disagree: count 2999 on rank 1, 3000 here" in rep["msg"] for rep in reports), reports


def test_disagreeing_data_types_between_threads(acl):
    comms = _comms(acl, [0, 1, 2])

    def body(r, stream):
        buf = device_alloc(acl, 4096)
        dtype = H.HCCL_DATA_TYPE_FP32 if r else H.HCCL_DATA_TYPE_INT32
        assert hccl.all_reduce(buf, buf, 64, dtype, 0, comms[r], stream) == 0
        return acl.rt.synchronize_stream(stream), acl.get_recent_err_msg(), hccl.get_comm_async_error(comms[r])

    try:
        results = run_ranks(acl, [0, 1, 2], body)
    finally:
        _destroy(comms)
    assert all(sync == 107000 and err == (H.HCCL_E_PARA, 0) for sync, _, err in results), results
    # the first rank to find out says what differs; the others that its failure reached first say so
    assert any("ranks disagree: data type HCCL_DATA_TYPE_" in m for _, m, _ in results), [m for _, m, _ in results]


def test_a_rank_that_never_joins_times_out(acl, board, monkeypatch):
    monkeypatch.setenv("HCCL_CONNECT_TIMEOUT", "0.5")
    root, _ = hccl.get_root_info()
    assert acl.rt.set_device(0) == 0
    comm, ret = hccl.comm_init_root_info(2, root, 0)
    assert (comm, ret) == (0, H.HCCL_E_TIMEOUT)
    assert "rank(s) [1] of 2 did not join within 0.5 s (HCCL_CONNECT_TIMEOUT)" in acl.get_recent_err_msg()
    assert not (runtime_dir() / f"{board}.hccl").exists(), "the rank that gave up left its card"
    assert hccl.comm_init_root_info(2, b"not a root info", 0) == (0, H.HCCL_E_PARA)
    assert acl.rt.reset_device(0) == 0


def test_a_rank_process_that_dies_fails_the_others(acl, board, tmp_path):
    """Rank 2 exits after the communicator is made; the others' all_reduce fails within a
    fraction of a second (their waits watch the process that is to record) -- no hang."""
    reports = _spawn_ranks(board, 4, 3000, tmp_path, env={"DIE_RANK": "2", "HCCL_EXEC_TIMEOUT": "600"},
                           timeout=60)
    assert reports[2] is None
    for r in (0, 1, 3):
        assert reports[r]["sync"] in (507057, 107000) and reports[r]["async"] == H.HCCL_E_REMOTE, reports[r]


# ---------------------------------------------------------------------------- modelled time
TIMED = """
    import json, sys, threading
    import mdev.acl as acl
    import mdev.hccl as hccl
    from mdev.runtime.collectives import cost, select
    from mdev.runtime.core import RUNTIME as rt
    from mdev.runtime.collectives.comm import held as comm_state
    op, nbytes, p = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    acl.init()
    comms, ret = hccl.comm_init_all(p, list(range(p)))
    assert ret == 0, acl.get_recent_err_msg()
    sizes = {"all_reduce": (nbytes, nbytes), "all_gather": (nbytes // p, nbytes), "reduce_scatter": (nbytes, nbytes // p)}
    ms, together = [0.0] * p, threading.Barrier(p)

    def rank(r):
        acl.rt.set_device(r)
        s, _ = acl.rt.create_stream()
        send, _ = acl.rt.malloc(sizes[op][0], 0); recv, _ = acl.rt.malloc(sizes[op][1], 0)
        e0, _ = acl.rt.create_event(); e1, _ = acl.rt.create_event()
        assert hccl.barrier(comms[r], s) == 0 and acl.rt.synchronize_stream(s) == 0
        together.wait()
        acl.rt.record_event(e0, s)
        call = {"all_reduce": lambda: hccl.all_reduce(send, recv, nbytes // 4, 4, 0, comms[r], s),
                "all_gather": lambda: hccl.all_gather(send, recv, nbytes // p // 4, 4, comms[r], s),
                "reduce_scatter": lambda: hccl.reduce_scatter(send, recv, nbytes // p // 4, 4, 0, comms[r], s)}[op]
        assert call() == 0, acl.get_recent_err_msg()
        acl.rt.record_event(e1, s)
        assert acl.rt.synchronize_stream(s) == 0, acl.get_recent_err_msg()
        ms[r] = acl.rt.event_elapsed_time(e0, e1)[0]

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(p)]
    [t.start() for t in threads]; [t.join() for t in threads]
    comm = comm_state.comms[comms[0]]
    lay = select.layout(comm.levels, comm.choice, op.replace("_", ""), 0, p)
    print(json.dumps({"live_ms": ms, "formula_ms": cost.predict(rt.attach().topology, comm.devices, lay, op, nbytes) / 1e6,
                      "algorithm": lay.algorithm}))
    [hccl.comm_destroy(c) for c in comms]
    acl.finalize()
"""


def _timed(board: str, op: str, nbytes: int, p: int, tmp_path, algo: str | None = None):
    """(live modelled ms per rank, modelled ms per rank from the trace's model and the time
    ``mdev trace summary`` gives the operation it names, formula ms, algorithm); the HCCL buffer holds a chunk per slot, so the operation runs in one part,
    as HCCL's formulas assume."""
    trace = tmp_path / f"{op}.json"
    env = dict(os.environ, MDEV_BOARD=board, MDEV_AUTOSTART="0", MDEV_MODEL_TIME="1", MDEV_TRACE=str(trace),
               HCCL_BUFFSIZE=str(-(-4 * (p - 1) * nbytes // p >> 20) + 1))
    if algo:
        env["HCCL_ALGO"] = algo
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(TIMED), op, str(nbytes), str(p)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout.splitlines()[-1])
    events = [e["args"] for e in json.loads(trace.read_text())["traceEvents"]
              if e.get("cat") == "task" and e["args"]["kind"] == "record_event"]
    offline = []
    for dev in range(p):
        mine = sorted((a for a in events if a["device"] == dev), key=lambda a: a["wall_start_ns"])
        offline.append((mine[-1]["modelled_end_ns"] - mine[-2]["modelled_end_ns"]) / 1e6)
    named = {key: us / 1e3 for key, us in collective_times(json.loads(trace.read_text())).items() if key[0] == op}
    assert list(named) == [(op, nbytes, p, report["algorithm"])], named
    return report["live_ms"], offline + list(named.values()), report["formula_ms"], report["algorithm"]


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter"])
@pytest.mark.parametrize("algo", [None, "level0:ring"], ids=["mesh", "ring"])
def test_modelled_time_meets_hccls_formula_on_hccs8(board8, tmp_path, op, algo):
    """16 MiB on the full HCCS mesh, mesh (HCCL's choice) and ring (HCCL_ALGO level0:ring):
    the devices' live clocks and the trace's model within 10% of HCCL's formula."""
    live, offline, formula, algorithm = _timed(board8, op, 16 * MiB, 8, tmp_path, algo)
    assert algorithm == ("ring" if algo else "mesh")
    for ms in live + offline:
        assert ms == pytest.approx(formula, rel=0.10), (live, offline, formula)


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter"])
def test_modelled_time_meets_hccls_formula_on_a_pcie_switch(board, tmp_path, op):
    live, offline, formula, algorithm = _timed(board, op, 8 * MiB, 4, tmp_path)
    assert algorithm == "ring"
    for ms in live + offline:
        assert ms == pytest.approx(formula, rel=0.10), (live, offline, formula)


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter"])
def test_modelled_time_meets_hccls_formula_across_islands(islands, tmp_path, op):
    """islands8, hierarchical: the quads' 4 staged rings share each island's PCIe uplink, which
    the formula's level-1 beta counts.  Live clocks share bandwidth only among transfers that
    overlap in wall time (see the README), so the trace's model -- exact -- is the measure."""
    live, offline, formula, algorithm = _timed(islands, op, 4 * MiB, 8, tmp_path)
    assert algorithm == "hierarchical"
    for ms in offline:
        assert ms == pytest.approx(formula, rel=0.10), (offline, formula)
    assert max(live) <= formula * 1.10


TIMED_RANK = """
    import json, os, sys
    rank, nranks, nbytes = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    os.environ["MDEV_NODE"] = os.environ["MDEV_RANK_NODES"].split(",")[rank]
    import mdev.acl as acl
    import mdev.hccl as hccl
    from mdev.runtime.collectives import cost, select
    from mdev.runtime.core import RUNTIME as rt
    from mdev.runtime.collectives.comm import held as comm_state
    with open(sys.argv[4], "rb") as f:
        root = f.read()
    assert acl.init() == 0 and acl.rt.set_device(int(os.environ["MDEV_RANK_DEVICES"].split(",")[rank])) == 0
    comm, ret = hccl.comm_init_root_info(nranks, root, rank)
    assert ret == 0, acl.get_recent_err_msg()
    s, _ = acl.rt.create_stream()
    buf, _ = acl.rt.malloc(nbytes, 0)
    e0, _ = acl.rt.create_event(); e1, _ = acl.rt.create_event()
    assert hccl.barrier(comm, s) == 0 and acl.rt.synchronize_stream(s) == 0
    assert hccl.barrier(comm, s) == 0 and acl.rt.synchronize_stream(s) == 0    # every rank is past the first
    assert acl.rt.record_event(e0, s) == 0
    assert hccl.all_reduce(buf, buf, nbytes // 4, 4, 0, comm, s) == 0
    assert acl.rt.record_event(e1, s) == 0
    assert acl.rt.synchronize_stream(s) == 0, acl.get_recent_err_msg()
    c = comm_state.comms[comm]
    lay = select.layout(c.levels, c.choice, "allreduce", rank, nranks)
    print(json.dumps({"ms": acl.rt.event_elapsed_time(e0, e1)[0], "algorithm": lay.algorithm,
                      "formula_ms": cost.predict(rt.attach().topology, c.devices, lay, "all_reduce", nbytes) / 1e6}))
    hccl.comm_destroy(comm)
"""


def test_modelled_time_meets_hccls_formula_across_cluster_nodes(tmp_path, monkeypatch):
    """a2-4x8, 2 nodes x 2 devices, a process per rank: hierarchical (HCCS mesh inside a
    node, a ring over RoCE between them), the ranks' live clocks within 10% of the formula."""
    from helpers import attached
    nbytes, n = 4 * MiB, 4
    with extra_board("hccl-a2-timed", "a2-4x8", hbm=64 * MiB) as name, attached(monkeypatch, name):
        root, _ = hccl.get_root_info()
        (tmp_path / "root").write_bytes(root)
        env = dict(os.environ, MDEV_BOARD=name, MDEV_AUTOSTART="0", MDEV_MODEL_TIME="1", HCCL_BUFFSIZE="16",
                   MDEV_RANK_NODES="0,0,1,1", MDEV_RANK_DEVICES="0,1,0,1")
        procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(TIMED_RANK), str(r), str(n), str(nbytes),
                                   str(tmp_path / "root")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=env) for r in range(n)]
        outs = [p.communicate(timeout=180) for p in procs]
    reports = [json.loads(out.splitlines()[-1]) for out, err in outs]
    for rep, (_, err) in zip(reports, outs):
        assert rep["algorithm"] == "hierarchical", err
        assert rep["ms"] == pytest.approx(rep["formula_ms"], rel=0.10), reports


# ---------------------------------------------------------------------------- tools see the operations
def test_the_sanitizer_sees_a_collectives_tasks(acl):
    """An all-reduce's copies, notifies and reduces are tasks the sanitizer orders like any
    others: reading the result before synchronising the stream is a race it names; reading
    it after is clean."""
    from mdev import sanitizer
    comms = _comms(acl, [0, 1])

    def body(r, stream, early):
        buf = device_alloc(acl, 4096)
        host = np.zeros(1024, np.float32)
        assert hccl.all_reduce(buf, buf, 1024, hccl.HCCL_DATA_TYPE_FP32, 0, comms[r], stream) == 0
        if not early:
            assert acl.rt.synchronize_stream(stream) == 0
        acl.rt.memcpy(acl.util.numpy_to_ptr(host), 4096, buf, 4096, acl.ACL_MEMCPY_DEVICE_TO_HOST)
        acl.rt.synchronize_stream(stream)
        acl.rt.free(buf)

    try:
        with sanitizer.checking("racecheck") as racy:
            run_ranks(acl, [0, 1], lambda r, s: body(r, s, True))
        with sanitizer.checking("racecheck,synccheck") as clean:
            run_ranks(acl, [0, 1], lambda r, s: body(r, s, False))
    finally:
        _destroy(comms)
    assert any(rep.checker == "racecheck" for rep in racy), racy
    assert not clean, clean


def test_hccl_algo_is_read_when_a_communicator_is_made(acl, monkeypatch):
    from mdev.runtime.collectives.select import parse_algo
    from mdev.runtime.collectives.comm import held as comm_state
    choice = parse_algo("allreduce=level0:ring;level1:H-D_R/allgather=level0:NA")
    assert choice.level0["allreduce"] == "ring" and choice.level0["allgather"] is None
    assert choice.level1["allreduce"] == "ring"            # every level 1 algorithm runs as a ring
    monkeypatch.setenv("HCCL_ALGO", "level0:bogus")
    assert hccl.comm_init_all(2, [0, 1]) == (None, H.HCCL_E_PARA)
    assert "HCCL_ALGO: level0 cannot be 'bogus'" in acl.get_recent_err_msg()
    monkeypatch.setenv("HCCL_ALGO", "level0:mesh")          # mdev's extension: a mesh over the PCIe switch
    comms = _comms(acl, [0, 1, 2])
    try:
        from mdev.runtime.collectives.select import layout
        c = comm_state.comms[comms[0]]
        assert layout(c.levels, c.choice, "allreduce", 0, 3).algorithm == "mesh"
    finally:
        _destroy(comms)


def test_hccl_buffsize_sizes_the_landing_slots(acl, monkeypatch):
    """HCCL_BUFFSIZE (MB) is each rank's buffer: 2 landing slots per peer share it; a value
    that is not a whole number of MB >= 1 is refused when the communicator is made."""
    from mdev.runtime.collectives.comm import held as comm_state
    for mb, devices, slot in (("2", [0, 1], 1 * MiB), ("6", [0, 1, 2, 3], 1 * MiB), ("1", [0, 1, 2], 256 << 10)):
        monkeypatch.setenv("HCCL_BUFFSIZE", mb)
        comms = _comms(acl, devices)
        try:
            assert {comm_state.comms[c].slot_bytes for c in comms} == {slot}, (mb, devices)
        finally:
            _destroy(comms)
    for bad in ("0", "1.5", "lots"):
        monkeypatch.setenv("HCCL_BUFFSIZE", bad)
        assert hccl.comm_init_all(2, [0, 1]) == (None, H.HCCL_E_PARA)
        assert f"HCCL_BUFFSIZE={bad!r} must be an integer >= 1 (MB)" in acl.get_recent_err_msg()


def test_a_rank_table_file_makes_the_communicator(acl, board, tmp_path):
    """comm_init_cluster_info: HCCL's rank table JSON; every process reading the same file meets."""
    table = {"version": "1.0", "server_count": "1", "status": "completed",
             "server_list": [{"server_id": "node0", "device": [
                 {"device_id": str(d), "device_ip": f"192.168.1.{d}", "rank_id": str(r)}
                 for r, d in enumerate((2, 0, 3))]}]}
    path = tmp_path / "ranktable.json"
    path.write_text(json.dumps(table))
    comms = [None] * 3

    def body(r, stream):
        comm, ret = hccl.comm_init_cluster_info(str(path), r)
        assert ret == 0, acl.get_recent_err_msg()
        comms[r] = comm
        buf = device_alloc(acl, 64)
        to_device(acl, buf, np.full(16, r + 1, np.int32))
        assert hccl.all_reduce(buf, buf, 16, hccl.HCCL_DATA_TYPE_INT32, 0, comm, stream) == 0
        assert acl.rt.synchronize_stream(stream) == 0
        return hccl.get_rank_id(comm), from_device(acl, buf, 64, np.int32)

    try:
        results = run_ranks(acl, [2, 0, 3], body)
    finally:
        _destroy([c for c in comms if c])
    assert [rank for (rank, _), _ in results] == [0, 1, 2]
    assert all(np.all(out == 6) for _, out in results)
    assert hccl.comm_init_cluster_info(str(tmp_path / "missing.json"), 0) == (0, H.HCCL_E_PARA)


def test_a_peer_waiting_for_a_destroyed_communicator_gives_up(acl):
    """Rank 0 destroys its communicator; rank 1's all-reduce fails instead of waiting for it."""
    comms = _comms(acl, [0, 1])
    assert hccl.comm_destroy(comms[0]) == 0

    def body(r, stream):
        buf = device_alloc(acl, 4096)
        assert hccl.all_reduce(buf, buf, 1024, hccl.HCCL_DATA_TYPE_FP32, 0, comms[1], stream) == 0
        return acl.rt.synchronize_stream(stream), acl.get_recent_err_msg(), hccl.get_comm_async_error(comms[1])

    try:
        (sync, message, error), = run_ranks(acl, [1], body)
    finally:
        hccl.comm_destroy(comms[1])
    # its wait for rank 0 gives up; rank 0's buffer, which its copy wrote, stays until the last
    # rank of this process is destroyed (a rank of another process imported it)
    assert sync == 507057 and error == (H.HCCL_E_REMOTE, 0), message
