"""Captured collectives replay: aclmdlRICaptureBegin / HcclAllReduce / aclmdlRICaptureEnd, then
aclmdlRIExecuteAsync again and again with fresh input -- every replay sums right, on 2, 4 and 8
ranks, with a thread per rank and with a process per rank, on every algorithm (as graph mode in
torch_npu and vllm-ascend relies on)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import mdev.hccl as hccl
from hccl_ranks import run_rank_processes, run_ranks
from helpers import attached, from_device, to_device
from mdev import hccl_types as H

# case -> (board fixture, devices of the ranks, the algorithm the preset makes HCCL pick)
CASES = {"ring2": ("board", [0, 1], "ring"),                  # pcie4: through a switch
         "ring4": ("board", [0, 1, 2, 3], "ring"),
         "mesh8": ("board8", list(range(8)), "mesh"),         # hccs8: a link per pair
         "hierarchical": ("islands_board", [0, 1, 4, 5], "hierarchical"),   # mesh inside islands, ring across
         "staged": ("islands_board", [0, 4, 1], "ring")}      # unequal islands: one ring of staged hops
COUNT = 1000                       # fp32 elements a rank: small, and not a multiple of the ranks
REPLAYS = 5
THREAD_LOCAL = 1                   # ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL: the other ranks' threads copy


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("HCCL_BUFFSIZE", "4")
    monkeypatch.setenv("HCCL_EXEC_TIMEOUT", "20")      # bounds a replay that would hang
    monkeypatch.delenv("HCCL_ALGO", raising=False)


def fresh(replay: int, rank: int) -> np.ndarray:
    """Rank ``rank``'s input at replay ``replay``: small integers, so any order sums exactly."""
    return np.random.default_rng(1000 * replay + rank).integers(-50, 50, COUNT).astype(np.float32)


def replay_rank(acl, rank: int, nranks: int, comm: int, stream: int, dump: bool = False,
                eager: bool = False) -> list[bool]:
    """One rank: capture an all_reduce, replay it REPLAYS times with fresh input; whether each
    replay's output was the sum of every rank's input (an assertion for any failed call).
    ``dump``: rank 0 prints its model (aclmdlRIDebugPrint); ``eager``: an all_reduce outside
    the model follows each replay (its result counts too)."""
    def ok(ret):
        assert ret == 0, acl.get_recent_err_msg()

    nbytes = COUNT * 4
    send, ret = acl.rt.malloc(nbytes, 0)
    ok(ret)
    recv, ret = acl.rt.malloc(nbytes, 0)
    ok(ret)
    ok(acl.mdl.ri_capture_begin(stream, THREAD_LOCAL))
    ok(hccl.all_reduce(send, recv, COUNT, H.HCCL_DATA_TYPE_FP32, H.HCCL_REDUCE_SUM, comm, stream))
    model, ret = acl.mdl.ri_capture_end(stream)
    ok(ret)
    if dump and rank == 0:
        ok(acl.mdl.ri_debug_print(model))
    right = []
    for k in range(REPLAYS):
        to_device(acl, send, fresh(k, rank))
        ok(acl.mdl.ri_execute_async(model, stream))
        ok(acl.rt.synchronize_stream(stream))
        want = sum(fresh(k, r) for r in range(nranks))
        right.append(bool(np.array_equal(from_device(acl, recv, nbytes, np.float32), want)))
        if eager:
            ok(acl.rt.memset(recv, nbytes, 0, nbytes))
            ok(hccl.all_reduce(send, recv, COUNT, H.HCCL_DATA_TYPE_FP32, H.HCCL_REDUCE_SUM, comm, stream))
            ok(acl.rt.synchronize_stream(stream))
            right[-1] &= bool(np.array_equal(from_device(acl, recv, nbytes, np.float32), want))
    ok(acl.mdl.ri_destroy(model))
    ok(acl.rt.free(send))
    ok(acl.rt.free(recv))
    return right




def _algorithm(handle: int) -> str:
    from mdev.runtime.collectives.select import layout
    from mdev.runtime.collectives.comm import held as comm_state
    comm = comm_state.comms[handle]
    return layout(comm.levels, comm.choice, "allreduce", comm.rank, comm.nranks).algorithm


@pytest.mark.parametrize("case", list(CASES))
def test_thread_per_rank(case, request, monkeypatch):
    """Replays with an eager all_reduce between them (the descriptors' operation numbers go
    back and forth: the consistency check must not take that for a disagreement)."""
    fixture, devices, algorithm = CASES[case]
    p = len(devices)
    with attached(monkeypatch, request.getfixturevalue(fixture)) as acl:
        comms, ret = hccl.comm_init_all(p, devices)
        assert ret == 0, acl.get_recent_err_msg()
        try:
            assert _algorithm(comms[0]) == algorithm
            results = run_ranks(acl, devices, lambda r, s: replay_rank(acl, r, p, comms[r], s, eager=True),
                                timeout=120)
        finally:
            for c in comms:
                assert hccl.comm_destroy(c) == H.HCCL_SUCCESS
    assert results == [[True] * REPLAYS] * p


RANK = """
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import mdev.acl as acl
    import mdev.hccl as hccl
    from test_hccl_replay import replay_rank
    rank, nranks, device = (int(a) for a in sys.argv[2:5])
    assert acl.init() == 0 and acl.rt.set_device(device) == 0
    with open(sys.argv[5], "rb") as f:
        comm, ret = hccl.comm_init_root_info(nranks, f.read(), rank)
    assert ret == 0, acl.get_recent_err_msg()
    stream, _ = acl.rt.create_stream()
    right = replay_rank(acl, rank, nranks, comm, stream)
    assert hccl.comm_destroy(comm) == 0
    print(json.dumps(right))
"""


@pytest.mark.parametrize("case", list(CASES))
def test_process_per_rank(case, request, monkeypatch, tmp_path):
    fixture, devices, _ = CASES[case]
    name = request.getfixturevalue(fixture)
    with attached(monkeypatch, name):
        root, ret = hccl.get_root_info()
        assert ret == 0
    (tmp_path / "root").write_bytes(root)
    env = dict(os.environ, MDEV_BOARD=name, MDEV_AUTOSTART="0")
    results = run_rank_processes(RANK, [[os.path.dirname(__file__), str(r), str(len(devices)), str(dev),
                                         str(tmp_path / "root")] for r, dev in enumerate(devices)], env)
    assert results == [[True] * REPLAYS] * len(devices)


TRACED = """
    import sys
    sys.path.insert(0, sys.argv[1])
    import mdev.acl as acl
    import mdev.hccl as hccl
    from hccl_ranks import run_ranks
    from test_hccl_replay import REPLAYS, replay_rank
    assert acl.init() == 0
    comms, ret = hccl.comm_init_all(2, [0, 1])
    assert ret == 0, acl.get_recent_err_msg()
    right = run_ranks(acl, [0, 1], lambda r, s: replay_rank(acl, r, 2, comms[r], s, dump=True), timeout=120)
    assert right == [[True] * REPLAYS] * 2, right
    for c in comms:
        assert hccl.comm_destroy(c) == 0
    assert acl.finalize() == 0
"""


@pytest.mark.parametrize("steps", [False, True], ids=["whole", "steps"])
def test_replays_show_in_the_model_dump_and_the_trace(board, tmp_path, steps):
    """The dump names the captured collective and its task (whole: one per rank; step by step:
    on the side stream it pulled into the capture too); the trace lists every replay of it on
    every rank, which ``mdev trace`` times."""
    from mdev.cli.trace import collective_times
    path = tmp_path / "trace.json"
    env = dict(os.environ, MDEV_BOARD=board, MDEV_AUTOSTART="0", MDEV_TRACE=str(path), MDEV_HCCL_STEPS=str(int(steps)))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(TRACED), os.path.dirname(__file__)], env=env,
                          capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stderr[-2000:]
    if steps:
        assert "(side stream of HCCL rank 0):" in proc.stdout, proc.stdout
    else:
        assert "1 stream(s), 1 task(s)" in proc.stdout and \
            f"HCCL            rank 0 (root 0), operation word 0x400, count {COUNT}, {COUNT * 4} B in" in proc.stdout
    assert f"-- HCCL all_reduce {COUNT * 4} B, 2 ranks, ring, operation 0 of rank 0" in proc.stdout, proc.stdout
    data = json.loads(path.read_text())
    named = data["mdev"]["collectives"]
    assert sorted((dev, number) for dev, *_, number in named) == \
        [(dev, f"0 replay {k}") for dev in (0, 1) for k in range(REPLAYS)]
    times = collective_times(data)
    assert list(times) == [("all_reduce", COUNT * 4, 2, "ring")] and times[("all_reduce", COUNT * 4, 2, "ring")] > 0


def test_a_replay_fails_when_a_peer_left(acl):
    """Rank 1 replays twice and destroys its communicator; rank 0's third replay fails with the
    departed peer's code (507057) well within HCCL_EXEC_TIMEOUT, as an eager operation does."""
    import threading
    import time
    comms, ret = hccl.comm_init_all(2, [0, 1])
    assert ret == 0, acl.get_recent_err_msg()
    left = threading.Event()
    seen: dict = {}

    def body(r, stream):
        send, _ = acl.rt.malloc(COUNT * 4, 0)
        recv, _ = acl.rt.malloc(COUNT * 4, 0)
        assert acl.mdl.ri_capture_begin(stream, THREAD_LOCAL) == 0
        assert hccl.all_reduce(send, recv, COUNT, H.HCCL_DATA_TYPE_FP32, H.HCCL_REDUCE_SUM, comms[r], stream) == 0
        model, ret = acl.mdl.ri_capture_end(stream)
        assert ret == 0, acl.get_recent_err_msg()
        for _ in range(2):
            assert acl.mdl.ri_execute_async(model, stream) == 0
            assert acl.rt.synchronize_stream(stream) == 0, acl.get_recent_err_msg()
        if r == 1:
            assert acl.mdl.ri_destroy(model) == 0
            assert hccl.comm_destroy(comms[1]) == H.HCCL_SUCCESS
            left.set()
        else:
            assert left.wait(30)
            t0 = time.monotonic()
            assert acl.mdl.ri_execute_async(model, stream) == 0
            seen["sync"] = acl.rt.synchronize_stream(stream)
            seen["seconds"] = time.monotonic() - t0
            assert acl.mdl.ri_destroy(model) == 0
            assert hccl.comm_destroy(comms[0]) == H.HCCL_SUCCESS
        acl.rt.free(send)
        acl.rt.free(recv)

    run_ranks(acl, [0, 1], body, timeout=90)
    assert seen["sync"] == 507057 and seen["seconds"] < 5, seen


def test_a_persistent_stream_takes_no_collective(acl):
    """A persistent stream's tasks build a model whose lanes are the bound streams only: a
    collective there (its side streams not among them) is refused, not left half-recorded."""
    comms, ret = hccl.comm_init_all(2, [0, 1])
    assert ret == 0, acl.get_recent_err_msg()
    try:
        assert acl.rt.set_device(0) == 0
        stream, ret = acl.rt.create_stream_with_config(0, acl.ACL_STREAM_PERSISTENT)
        assert ret == 0
        buf, _ = acl.rt.malloc(COUNT * 4, 0)
        ret = hccl.all_reduce(buf, buf, COUNT, H.HCCL_DATA_TYPE_FP32, H.HCCL_REDUCE_SUM, comms[0], stream)
        assert ret == H.HCCL_E_NOT_SUPPORT and "persistent" in acl.get_recent_err_msg()
        assert acl.rt.free(buf) == 0 and acl.rt.destroy_stream(stream) == 0
    finally:
        for c in comms:
            assert hccl.comm_destroy(c) == H.HCCL_SUCCESS


def test_every_kind_of_operation_replays(acl):
    """all_gather, broadcast, reduce_scatter, barrier and send / recv captured in one model:
    4 replays with fresh input on 4 ranks, every output right each time."""
    p, n = 4, 256
    comms, ret = hccl.comm_init_all(p, list(range(p)))
    assert ret == 0, acl.get_recent_err_msg()
    fp32 = H.HCCL_DATA_TYPE_FP32

    def body(r, s):
        x, gathered, bcast, scattered, got = (acl.rt.malloc(n * 4 * k, 0)[0] for k in (1, p, 1, 1, 1))
        peer = r ^ 1
        assert acl.mdl.ri_capture_begin(s, THREAD_LOCAL) == 0
        assert hccl.all_gather(x, gathered, n, fp32, comms[r], s) == 0
        assert hccl.broadcast(bcast, n, fp32, 0, comms[r], s) == 0
        assert hccl.reduce_scatter(gathered, scattered, n, fp32, H.HCCL_REDUCE_SUM, comms[r], s) == 0
        assert hccl.barrier(comms[r], s) == 0
        assert (hccl.send(x, n, fp32, peer, comms[r], s) if r % 2 == 0 else
                hccl.recv(got, n, fp32, peer, comms[r], s)) == 0
        model, ret = acl.mdl.ri_capture_end(s)
        assert ret == 0, acl.get_recent_err_msg()
        right = []
        for k in range(4):
            xs = [np.full(n, 10 * k + q, np.float32) for q in range(p)]
            to_device(acl, x, xs[r])
            if r == 0:
                to_device(acl, bcast, np.full(n, 100 + k, np.float32))
            assert acl.mdl.ri_execute_async(model, s) == 0
            assert acl.rt.synchronize_stream(s) == 0, acl.get_recent_err_msg()
            outs = [(gathered, np.concatenate(xs)), (bcast, np.full(n, 100 + k, np.float32)),
                    (scattered, p * xs[r])] + ([(got, xs[peer])] if r % 2 else [])
            right.append(all(np.array_equal(from_device(acl, ptr, want.nbytes, np.float32), want)
                             for ptr, want in outs))
        assert acl.mdl.ri_destroy(model) == 0
        for ptr in (x, gathered, bcast, scattered, got):
            assert acl.rt.free(ptr) == 0
        return right

    try:
        results = run_ranks(acl, list(range(p)), body, timeout=120)
    finally:
        for c in comms:
            assert hccl.comm_destroy(c) == H.HCCL_SUCCESS
    assert results == [[True] * 4] * p
