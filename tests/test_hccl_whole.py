"""Whole collectives (mdev.board.collective_run): where every pair of ranks has peer access,
an operation runs as one task per rank.  Its bytes are the step-by-step schedule's
(MDEV_HCCL_STEPS=1) for every operation, data type, algorithm and in place; a reduction
shared out among the ranks, or among the last two to enter (a thread or a process per rank),
too; one task per rank whatever the number of ranks; and a malformed coll_run task fails
with the documented code instead of hanging a rank."""

from __future__ import annotations

import numpy as np
import pytest

import mdev.hccl as hccl
from hccl_ranks import BF16, device_alloc, every_operation, inputs, run_rank_processes, run_ranks
from helpers import from_device, to_device
from mdev import hccl_types as H
from mdev import status as S
from mdev.taskspec import SHARERS_SHIFT

FP32 = H.HCCL_DATA_TYPE_FP32


@pytest.fixture(autouse=True)
def _buffer(monkeypatch):
    monkeypatch.setenv("HCCL_BUFFSIZE", "16")          # MB: an IN and an OUT area of 8 MB on 2 ranks
    monkeypatch.setenv("HCCL_EXEC_TIMEOUT", "60")
    monkeypatch.delenv("HCCL_ALGO", raising=False)
    monkeypatch.delenv("MDEV_HCCL_STEPS", raising=False)


def _both_ways(acl, monkeypatch, devices, body):
    """``body(comms, r, stream)`` on every rank, whole and step by step: (whole, steps) results."""
    out = []
    for steps in ("0", "1"):
        monkeypatch.setenv("MDEV_HCCL_STEPS", steps)
        comms, ret = hccl.comm_init_all(len(devices), devices)
        assert ret == 0, acl.get_recent_err_msg()
        try:
            out.append(run_ranks(acl, devices, lambda r, s: body(comms, r, s)))
        finally:
            for c in comms:
                assert hccl.comm_destroy(c) == 0
    return out


@pytest.mark.parametrize("algo", [None, "level0:mesh"], ids=["ring", "mesh"])
@pytest.mark.parametrize("dtype", [FP32, BF16], ids=["fp32", "bf16"])
def test_every_operation_gives_the_bytes_of_the_step_by_step_schedule(acl, monkeypatch, algo, dtype):
    """4 ranks of a PCIe switch (ring, HCCL's choice; mesh forced): every operation whole and
    step by step, random data whose sums round differently in another order -- bit-equal."""
    if algo:
        monkeypatch.setenv("HCCL_ALGO", algo)
    p, count = 4, 1000
    xs = inputs(dtype, p, p * count, seed=3)
    whole, steps = _both_ways(acl, monkeypatch, list(range(p)),
                              lambda comms, r, s: every_operation(acl, hccl, r, p, comms[r], s, xs[r], count, dtype)[0])
    for r in range(p):
        assert whole[r].keys() == steps[r].keys()
        for name in whole[r]:
            assert whole[r][name].tobytes() == steps[r][name].tobytes(), (r, name)


def test_operations_issued_on_two_streams_run_in_the_order_issued(acl, monkeypatch):
    """Each rank issues a communicator's all-reduces on two streams in turn (as HCCL allows: its
    own streams keep them in order): every sum is right, whole and step by step (whole ones
    paired different operations and failed, step-by-step ones waited for ever)."""
    p, count, ops = 2, 1000, 6
    xs = [inputs(FP32, p, count, seed=20 + k) for k in range(ops)]

    def body(comms, r, s):
        other, ret = acl.rt.create_stream()
        assert ret == 0
        bufs = []
        for k in range(ops):
            send, recv = device_alloc(acl, 4 * count), device_alloc(acl, 4 * count)
            to_device(acl, send, xs[k][r])
            bufs.append((send, recv))
        for k, (send, recv) in enumerate(bufs):
            assert hccl.all_reduce(send, recv, count, FP32, H.HCCL_REDUCE_SUM, comms[r], (s, other)[k % 2]) == 0
        assert acl.rt.synchronize_stream(other) == 0 and acl.rt.synchronize_stream(s) == 0, acl.get_recent_err_msg()
        out = [from_device(acl, recv, 4 * count, np.float32) for _, recv in bufs]
        for ptr in (ptr for pair in bufs for ptr in pair):
            acl.rt.free(ptr)
        acl.rt.destroy_stream(other)
        return out

    for results in _both_ways(acl, monkeypatch, list(range(p)), body):
        for r in range(p):
            for k in range(ops):
                assert np.array_equal(results[r][k], xs[k][0] + xs[k][1]), (r, k)


@pytest.mark.parametrize("p, nbytes, cores, sharers", [(2, 4 << 10, 8, 1), (2, 1 << 20, 1, 1), (2, 1 << 20, 8, 2),
                                                      (2, 6 << 20, 1, 2), (4, 2 << 20, 2, 2)],
                         ids=["small", "1M-one-core", "1M-a-core-each", "shared", "last-two-share"])
def test_in_place_reductions_match_the_step_by_step_schedule(acl, monkeypatch, p, nbytes, cores, sharers):
    """All-reduce and reduce-scatter with the output over the input, and an all-reduce into
    another buffer; 1 MiB on 2 ranks with a core each (straight into the outputs) and 6 MiB on 2
    ranks of one core (through the OUT area) run as a reduction every rank shares, 2 MiB on 4
    ranks of a 2-core machine as one the last two ranks to enter share -- and each matches too."""
    from mdev.runtime.collectives import whole
    monkeypatch.setattr(whole, "CORES", cores)
    assert whole._sharers(p, "all_reduce", nbytes) == sharers
    count = nbytes // 4
    xs = inputs(FP32, p, count, seed=5)

    def body(comms, r, s):
        buf = device_alloc(acl, nbytes)
        to_device(acl, buf, xs[r])
        assert hccl.all_reduce(buf, buf, count, FP32, H.HCCL_REDUCE_SUM, comms[r], s) == 0
        block = device_alloc(acl, nbytes)                    # reduce-scatter into its own block
        to_device(acl, block, xs[r])
        assert hccl.reduce_scatter(block, block + r * nbytes // p, count // p, FP32, H.HCCL_REDUCE_SUM,
                                   comms[r], s) == 0
        apart = device_alloc(acl, nbytes)                    # and out of place
        assert hccl.all_reduce(block, apart, count, FP32, H.HCCL_REDUCE_SUM, comms[r], s) == 0
        assert acl.rt.synchronize_stream(s) == 0, acl.get_recent_err_msg()
        out = tuple(from_device(acl, ptr, nbytes, np.float32) for ptr in (buf, block, apart))
        for ptr in (buf, block, apart):
            acl.rt.free(ptr)
        return out

    whole, steps = _both_ways(acl, monkeypatch, list(range(p)), body)
    expected = np.sum(xs, axis=0, dtype=np.float64)
    for r in range(p):
        assert whole[r][0].tobytes() == steps[r][0].tobytes()
        assert np.allclose(whole[r][0], expected, rtol=1e-5, atol=1e-5)
        mine = slice(r * count // p, (r + 1) * count // p)
        assert whole[r][1][mine].tobytes() == steps[r][1][mine].tobytes()
        assert whole[r][2].tobytes() == steps[r][2].tobytes()


SHARING_RANK = """
    import json, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import mdev.acl as acl
    import mdev.hccl as hccl
    from helpers import from_device, to_device
    from mdev import hccl_types as H
    from mdev.runtime.collectives import whole
    from mdev.runtime.collectives.comm import held
    whole.CORES = 2                   # as on a 2-core machine: the last two ranks to enter share
    rank, nranks, device, count = (int(a) for a in sys.argv[2:6])
    assert whole._sharers(nranks, "all_reduce", 4 * count) == 2
    assert acl.init() == 0 and acl.rt.set_device(device) == 0
    with open(sys.argv[6], "rb") as f:
        comm, ret = hccl.comm_init_root_info(nranks, f.read(), rank)
    assert ret == 0, acl.get_recent_err_msg()
    assert held.comms[comm].whole is not None
    stream, _ = acl.rt.create_stream()
    buf, _ = acl.rt.malloc(4 * count, 0)

    def x(k, r):                      # small integers: any order sums exactly
        return np.random.default_rng(100 * k + r).integers(-50, 50, count).astype(np.float32)

    right = []
    for k in range(3):
        to_device(acl, buf, x(k, rank))
        assert hccl.all_reduce(buf, buf, count, H.HCCL_DATA_TYPE_FP32, H.HCCL_REDUCE_SUM, comm, stream) == 0
        assert acl.rt.synchronize_stream(stream) == 0, acl.get_recent_err_msg()
        want = sum(x(k, r) for r in range(nranks))
        right.append(bool(np.array_equal(from_device(acl, buf, 4 * count, np.float32), want)))
    assert acl.rt.free(buf) == 0 and acl.rt.destroy_stream(stream) == 0
    assert hccl.comm_destroy(comm) == 0
    print(json.dumps(right))
"""


def test_the_last_two_ranks_of_four_processes_share_a_reduction(board, monkeypatch, tmp_path):
    """A process per rank (inputs through the ranks' IN areas), 4 ranks of a 2-core machine: a
    2 MiB in-place all-reduce is shared by the last two ranks to enter, three times over --
    every rank gets the sum each time."""
    import os
    from helpers import attached
    with attached(monkeypatch, board):
        root, ret = hccl.get_root_info()
        assert ret == 0
    (tmp_path / "root").write_bytes(root)
    env = dict(os.environ, MDEV_BOARD=board, MDEV_AUTOSTART="0")
    count = (2 << 20) // 4
    results = run_rank_processes(SHARING_RANK, [[os.path.dirname(__file__), str(r), "4", str(r), str(count),
                                                 str(tmp_path / "root")] for r in range(4)], env)
    assert results == [[True] * 3] * 4


@pytest.mark.parametrize("p", [2, 4])
def test_an_operation_is_one_task_per_rank(acl, p):
    """The devices' task counters over 5 all-reduces of 64 KiB: 5 tasks each (13-164 per
    operation step by step)."""
    import time
    from mdev.runtime.core import RUNTIME as rt
    comms, ret = hccl.comm_init_all(p, list(range(p)))
    assert ret == 0, acl.get_recent_err_msg()

    def settled(page) -> int:
        """The device's task counter once it stopped moving (it is written just after the
        completion a synchronisation sees)."""
        seen = -1
        while (now := int(page[S.H_TASKS_DONE])) != seen:
            seen = now
            time.sleep(0.05)
        return seen

    def body(r, s):
        buf = device_alloc(acl, 64 << 10)
        assert hccl.barrier(comms[r], s) == 0 and acl.rt.synchronize_stream(s) == 0
        page = rt.link(r).control.header
        before = settled(page)
        for _ in range(5):
            assert hccl.all_reduce(buf, buf, 16 << 10, FP32, H.HCCL_REDUCE_SUM, comms[r], s) == 0
        assert acl.rt.synchronize_stream(s) == 0, acl.get_recent_err_msg()
        ran = settled(page) - before
        acl.rt.free(buf)
        return ran

    try:
        assert run_ranks(acl, list(range(p)), body) == [5] * p
    finally:
        for c in comms:
            assert hccl.comm_destroy(c) == 0


@pytest.mark.parametrize("case", ["peers", "order", "rank", "mode"])
def test_a_malformed_task_fails_with_param_invalid_at_once(acl, monkeypatch, case):
    """A coll_run whose places are not packed rows, whose order reads past the input, whose
    rank is not on the device that runs it, or whose mode shares its reduction among more ranks
    than it has: 107000 on that stream within a second, no rank left waiting, the device
    serving on."""
    import time
    from mdev.runtime import streams
    from mdev.runtime.collectives.comm import held
    from mdev.runtime.core import RUNTIME as rt
    comms, ret = hccl.comm_init_all(1, [0])
    assert ret == 0, acl.get_recent_err_msg()
    c = held.comms[comms[0]]
    assert acl.rt.set_device(0) == 0
    stream, _ = acl.rt.create_stream()
    buf = device_alloc(acl, 64)
    loc = rt.memory.operand(buf, 64, write=True).location()
    peers, order, rank, mode = c.places, np.array([(0, 64, 0)], np.int64).tobytes(), 0, 2
    if case == "peers":
        peers = peers[:-8]
    elif case == "order":
        order = np.array([(32, 64, 0)], np.int64).tobytes()
    elif case == "rank":
        peers = np.frombuffer(peers, np.int64).copy()
        peers[0] = 1                                          # rank 0 "on device 1"
        peers = peers.tobytes()
    else:
        mode = 2 | 2 << SHARERS_SHIFT                         # 2 sharers of 1 rank
    started = time.monotonic()
    streams.submit(rt.stream_in_context(stream), "coll_run", rank, peers, 0, 0, 16, loc, loc, 64, 64, order, mode,
                   (0, 4, 0, 0), 60.0, 0.0)
    assert acl.rt.synchronize_stream(stream) == 107000, acl.get_recent_err_msg()
    assert time.monotonic() - started < 1.0
    assert "coll_run" in acl.get_recent_err_msg()
    assert acl.rt.free(buf) == 0 and acl.rt.destroy_stream(stream) == 0
    assert hccl.comm_destroy(comms[0]) == 0
