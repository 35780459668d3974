"""HCCL's configured communicators, sub-communicators, V variants and registrations (mdev.hccl),
as torch_npu's ProcessGroupHCCL and hccl_test use them; and acl.prof over the trace.

    configs     comm_init_root_info_config: buffer size, name, exec timeout, algorithm honoured;
                bad fields HCCL_E_PARA; get_comm_config_capability; set_config / get_config
    sub comms   create_sub_comm_config of some ranks of a global communicator (new_group)
    V variants  all_gather_v, reduce_scatter_v, all_to_all_vc on uneven counts against numpy,
                blocks larger than a landing slot (run in parts)
    memory      memory ranges and activated memory on VMM ranges; symmetric windows
    groups      a communicator made inside group_start / group_end: HCCL_E_NOT_SUPPORT
    profiling   acl.prof.init / create_config / start / stop / finalize write a trace file
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import mdev.hccl as hccl
from hccl_ranks import device_alloc, run_ranks
from mdev import hccl_types as H
from mdev.runtime.collectives.comm import held

F32 = H.HCCL_DATA_TYPE_FP32


@pytest.fixture(autouse=True)
def _small_buffer(monkeypatch):
    monkeypatch.setenv("HCCL_BUFFSIZE", "1")           # MB: slots of 64 KiB .. 256 KiB, so blocks run in parts
    monkeypatch.setenv("HCCL_EXEC_TIMEOUT", "60")
    monkeypatch.delenv("HCCL_ALGO", raising=False)


def _put(acl, array: np.ndarray) -> int:
    ptr = device_alloc(acl, array.nbytes)
    assert acl.rt.memcpy(ptr, array.nbytes, acl.util.numpy_to_ptr(array), array.nbytes, 1) == 0
    return ptr


def _get(acl, ptr: int, count: int, dtype=np.float32) -> np.ndarray:
    out = np.zeros(count, dtype)
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(out), out.nbytes, ptr, out.nbytes, 2) == 0
    return out


def _root_info_ranks(acl, devices, body, config=None):
    """A communicator of ``devices`` from one root info and ``config``, a thread per rank;
    ``body(rank, comm, stream)``'s results."""
    root, ret = hccl.get_root_info()
    assert ret == 0

    def rank(r, stream):
        comm, ret = hccl.comm_init_root_info_config(len(devices), root, r, config)
        assert ret == 0, acl.get_recent_err_msg()
        try:
            return body(r, comm, stream)
        finally:
            assert hccl.comm_destroy(comm) == 0
    return run_ranks(acl, devices, rank)


def test_a_config_sets_buffer_name_timeout_and_algorithm(acl):
    cfg = hccl.comm_config_init()
    assert cfg["hcclBufferSize"] == H.HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET and cfg["hcclExecTimeOut"] == -1
    cfg.update(hcclBufferSize=3, hcclCommName="grads", hcclExecTimeOut=42, hcclAlgo="level0:ring")

    def body(r, comm, stream):
        c = held.comms[comm]
        name, ret = hccl.get_comm_name(comm)
        return c.slot_bytes, name, c.timeout_s, c.choice.level0["allreduce"], ret

    got = _root_info_ranks(acl, [0, 1, 2], body, cfg)
    assert got == [(768 << 10, "grads", 42.0, "ring", 0)] * 3         # 3 MB: 2 slots for each of 2 peers
    # without a config: HCCL_BUFFSIZE (1 MB) and a name made for the communicator, the same on every rank
    names = _root_info_ranks(acl, [0, 1], lambda r, comm, s: (held.comms[comm].slot_bytes, hccl.get_comm_name(comm)))
    assert names[0] == names[1] and names[0][0] == 512 << 10 and names[0][1][0].startswith("hccl_comm_")


def test_a_rank_table_with_a_config(acl, tmp_path):
    """comm_init_cluster_info_config: the rank table's communicator, named and sized by the config."""
    table = {"server_list": [{"device": [{"device_id": str(d), "rank_id": str(r)} for r, d in enumerate((1, 0))]}]}
    path = tmp_path / "ranktable.json"
    path.write_text(json.dumps(table))
    cfg = dict(hccl.comm_config_init(), hcclCommName="table", hcclBufferSize=2)

    def body(r, stream):
        comm, ret = hccl.comm_init_cluster_info_config(str(path), r, cfg)
        assert ret == 0, acl.get_recent_err_msg()
        try:
            return hccl.get_comm_name(comm), held.comms[comm].slot_bytes
        finally:
            assert hccl.comm_destroy(comm) == 0

    assert run_ranks(acl, [1, 0], body) == [(("table", 0), 1 << 20)] * 2


@pytest.mark.parametrize("field, value", [("hcclBufferSize", 0), ("hcclDeterministic", 3), ("hcclExecTimeOut", 0),
                                          ("hcclCommName", "x" * 128), ("hcclAlgo", "level9:ring"),
                                          ("hcclNoSuchField", 1), ("hcclJobID", "one")])
def test_a_bad_config_is_refused_before_anything_is_made(acl, field, value):
    assert acl.rt.set_device(0) == 0
    root, _ = hccl.get_root_info()
    cfg = dict(hccl.comm_config_init(), **{field: value})
    comm, ret = hccl.comm_init_root_info_config(1, root, 0, cfg)
    message = acl.get_recent_err_msg()
    assert ret == H.HCCL_E_PARA and not comm, message
    assert field in message or "HCCL_ALGO" in message, message


def test_capability_and_process_settings(acl):
    cap, ret = hccl.get_comm_config_capability()
    assert ret == 0 and cap == H.HCCL_COMM_CONFIG_RETRY
    assert cap > H.HCCL_COMM_CONFIG_EXEC_TIMEOUT and cap > H.HCCL_COMM_CONFIG_ALGO     # both honoured
    assert hccl.get_config(H.HCCL_DETERMINISTIC) == (0, 0)
    assert hccl.set_config(H.HCCL_DETERMINISTIC, 2) == 0
    assert hccl.get_config(H.HCCL_DETERMINISTIC) == (2, 0)
    assert hccl.set_config(H.HCCL_DETERMINISTIC, 3) == H.HCCL_E_PARA
    assert hccl.set_config(H.HCCL_CONFIG_RESERVED, 1) == H.HCCL_E_PARA
    assert hccl.set_config(H.HCCL_DETERMINISTIC, 0) == 0


def test_a_sub_communicator_of_some_ranks_reduces_among_them(acl):
    """new_group([1, 3]): ranks 1 and 3 make a communicator of two; 0 and 2 pass no ranks."""
    comms, ret = hccl.comm_init_all(4, [0, 1, 2, 3])
    assert ret == 0
    members = [1, 3]

    def body(r, stream):
        rank_ids = members if r in members else None
        sub, ret = hccl.create_sub_comm_config(comms[r], rank_ids, 7, members.index(r) if r in members else 0,
                                               None)
        assert ret == 0, acl.get_recent_err_msg()
        if sub is None:
            return None
        try:
            assert hccl.get_rank_size(sub) == (2, 0) and hccl.get_rank_id(sub) == (members.index(r), 0)
            assert hccl.create_sub_comm_config(sub, [0, 1], 1, 0, None)[1] == H.HCCL_E_NOT_SUPPORT
            x = np.arange(10, dtype=np.float32) * (r + 1)
            buf = _put(acl, x)
            assert hccl.all_reduce(buf, buf, 10, F32, H.HCCL_REDUCE_SUM, sub, stream) == 0
            assert acl.rt.synchronize_stream(stream) == 0
            out = _get(acl, buf, 10)
            acl.rt.free(buf)
            return out, hccl.get_comm_name(sub)[0]
        finally:
            assert hccl.comm_destroy(sub) == 0

    try:
        got = run_ranks(acl, [0, 1, 2, 3], body)
    finally:
        for c in comms:
            hccl.comm_destroy(c)
    assert got[0] is None and got[2] is None
    for r in members:
        assert np.array_equal(got[r][0], np.arange(10, dtype=np.float32) * 6)        # ranks 1 and 3: x2 + x4
        assert got[r][1].endswith("_sub_7")


def test_sub_communicator_arguments_are_checked(acl):
    comms, ret = hccl.comm_init_all(2, [0, 1])
    assert ret == 0
    try:
        assert acl.rt.set_device(0) == 0
        for ids, me in (([1, 0], 0), ([0, 0], 0), ([0, 2], 0), ([0, 1], 1), ([], 0)):
            assert hccl.create_sub_comm_config(comms[0], ids, 1, me, None) == (None, H.HCCL_E_PARA), (ids, me)
        assert hccl.create_sub_comm_config(0, [0], 1, 0, None) == (None, H.HCCL_E_PTR)
    finally:
        for c in comms:
            hccl.comm_destroy(c)


COUNTS = [70_000, 0, 5, 123_457]         # elements per rank: larger than a slot, empty, tiny


def test_all_gather_v_uneven_blocks(acl):
    n = len(COUNTS)
    displs = [sum(COUNTS[:q]) + 3 * q for q in range(n)]           # gaps between the blocks stay untouched
    total = displs[-1] + COUNTS[-1]
    xs = [np.random.default_rng(q).standard_normal(COUNTS[q]).astype(np.float32) for q in range(n)]
    comms, _ = hccl.comm_init_all(n, list(range(n)))

    def body(r, stream):
        send = _put(acl, xs[r] if COUNTS[r] else np.zeros(1, np.float32))
        recv = _put(acl, np.full(total, -1, np.float32))
        assert hccl.all_gather_v(send, COUNTS[r], recv, COUNTS, displs, F32, comms[r], stream) == 0, \
            acl.get_recent_err_msg()
        assert acl.rt.synchronize_stream(stream) == 0
        return _get(acl, recv, total)

    try:
        got = run_ranks(acl, list(range(n)), body)
    finally:
        for c in comms:
            hccl.comm_destroy(c)
    want = np.full(total, -1, np.float32)
    for q in range(n):
        want[displs[q]:displs[q] + COUNTS[q]] = xs[q]
    for r in range(n):
        assert np.array_equal(got[r], want), r


def test_reduce_scatter_v_sums_each_block_in_the_mesh_order(acl):
    n = len(COUNTS)
    displs = [sum(COUNTS[:q]) for q in range(n)]
    size = sum(COUNTS)
    xs = [np.random.default_rng(10 + r).standard_normal(size).astype(np.float32) for r in range(n)]
    comms, _ = hccl.comm_init_all(n, list(range(n)))

    def body(r, stream):
        send = _put(acl, xs[r])
        recv = device_alloc(acl, COUNTS[r] * 4)
        assert hccl.reduce_scatter_v(send, COUNTS, displs, recv, COUNTS[r], F32, H.HCCL_REDUCE_SUM, comms[r],
                                     stream) == 0, acl.get_recent_err_msg()
        assert acl.rt.synchronize_stream(stream) == 0
        return _get(acl, recv, COUNTS[r])

    try:
        got = run_ranks(acl, list(range(n)), body)
    finally:
        for c in comms:
            hccl.comm_destroy(c)
    for r in range(n):
        block = slice(displs[r], displs[r] + COUNTS[r])
        acc = xs[r][block].copy()
        for d in range(1, n):                                       # ours, then the next ranks' in turn
            acc = acc + xs[(r + d) % n][block]
        assert np.array_equal(got[r], acc), r


def test_all_to_all_vc_follows_the_count_matrix(acl):
    n = 3
    matrix = [[1000, 0, 70_001], [3, 90_000, 2], [0, 7, 0]]        # matrix[i][j]: i sends j
    xs = [np.arange(sum(matrix[i]), dtype=np.float32) + 1000 * i for i in range(n)]
    comms, _ = hccl.comm_init_all(n, list(range(n)))

    def body(r, stream):
        rcount = sum(matrix[q][r] for q in range(n))
        send = _put(acl, xs[r])
        recv = device_alloc(acl, rcount * 4)
        flat = [c for row in matrix for c in row]
        assert hccl.all_to_all_vc(send, flat, F32, recv, F32, comms[r], stream) == 0, acl.get_recent_err_msg()
        assert acl.rt.synchronize_stream(stream) == 0
        return _get(acl, recv, rcount)

    try:
        got = run_ranks(acl, list(range(n)), body)
        assert hccl.all_to_all_vc(0, [1] * 4, F32, 0, F32, comms[0], 0) == H.HCCL_E_PARA      # 3 ranks need 9
    finally:
        for c in comms:
            hccl.comm_destroy(c)
    for r in range(n):
        want = np.concatenate([xs[q][sum(matrix[q][:r]):sum(matrix[q][:r]) + matrix[q][r]] for q in range(n)])
        assert np.array_equal(got[r], want), r


def test_v_variant_counts_must_agree_with_this_rank(acl):
    comms, _ = hccl.comm_init_all(2, [0, 1])
    try:
        assert acl.rt.set_device(0) == 0
        buf = device_alloc(acl, 64)
        assert hccl.all_gather_v(buf, 3, buf, [4, 4], [0, 4], F32, comms[0], 0) == H.HCCL_E_PARA
        assert "recvCounts" in acl.get_recent_err_msg()
        assert hccl.reduce_scatter_v(buf, [2, 2], [0, 2], buf, 3, F32, 0, comms[0], 0) == H.HCCL_E_PARA
        assert hccl.all_gather_v(buf, 4, buf, [4], [0], F32, comms[0], 0) == H.HCCL_E_PARA       # one per rank
    finally:
        for c in comms:
            hccl.comm_destroy(c)


def test_memory_ranges_activated_memory_and_symmetric_windows(acl):
    comms, _ = hccl.comm_init_all(2, [0, 1])
    try:
        assert acl.rt.set_device(0) == 0
        c = comms[0]
        prop = {"handleType": 0, "allocationType": 0, "memAttr": 4, "location": {"type": 1, "id": 0}, "reserve": 0}
        va, ret = acl.rt.reserve_mem_address(4 << 20, 0, 0, 1)
        assert ret == 0
        handle, ret = acl.rt.malloc_physical(2 << 20, prop, 0)
        assert ret == 0, acl.get_recent_err_msg()
        assert acl.rt.map_mem(va, 2 << 20, 0, handle, 0) == 0
        assert hccl.comm_activate_comm_memory(c, va, 2 << 20, 0, handle, 0) == H.HCCL_E_PARA     # no range yet
        assert hccl.comm_set_memory_range(c, va + 4096, 4096, 0, 0) == H.HCCL_E_PARA           # not a reservation
        assert hccl.comm_set_memory_range(c, va, 4 << 20, 0, 0) == 0
        assert hccl.comm_set_memory_range(c, va, 4 << 20, 0, 0) == H.HCCL_E_PARA               # set already
        assert hccl.comm_activate_comm_memory(c, va, 4 << 20, 0, handle, 0) != 0              # half is unmapped
        assert hccl.comm_activate_comm_memory(c, va, 2 << 20, 0, handle, 0) == 0
        assert hccl.comm_unset_memory_range(c, va) == H.HCCL_E_PARA                            # still active
        assert hccl.comm_deactivate_comm_memory(c, va) == 0
        assert hccl.comm_deactivate_comm_memory(c, va) == H.HCCL_E_PARA
        assert hccl.comm_unset_memory_range(c, va) == 0
        win, ret = hccl.comm_sym_win_register(c, va, 2 << 20, 1)
        assert ret == 0 and win
        assert hccl.comm_sym_win_register(c, va, 2 << 20, 0)[1] == H.HCCL_E_PARA               # flag must be 1
        assert hccl.comm_sym_win_register(c, va, 17 << 30, 1)[1] == H.HCCL_E_PARA              # past 16 GB
        assert hccl.comm_sym_win_deregister(win) == 0
        assert hccl.comm_sym_win_deregister(win) == H.HCCL_E_PARA
        reg, ret = hccl.comm_register(c, va, 4096, 0)                          # torch_npu's window memory
        assert ret == 0 and reg
        assert hccl.comm_register(c, va + (2 << 20), 4096, 0)[1] == H.HCCL_E_PARA   # not mapped
        assert hccl.comm_deregister(comms[1], reg) == H.HCCL_E_PARA                 # another communicator's
        assert hccl.comm_deregister(c, reg) == 0
        assert acl.rt.unmap_mem(va) == 0 and acl.rt.free_physical(handle) == 0
        assert acl.rt.release_mem_address(va) == 0
    finally:
        for c in comms:
            hccl.comm_destroy(c)


def test_a_communicator_is_not_made_inside_a_group(acl):
    assert acl.rt.set_device(0) == 0
    root, _ = hccl.get_root_info()
    assert hccl.group_start() == 0
    try:
        assert hccl.comm_init_root_info(1, root, 0) == (0, H.HCCL_E_NOT_SUPPORT)
        assert "HcclGroupStart" in acl.get_recent_err_msg()
    finally:
        assert hccl.group_end() == 0


def test_acl_prof_writes_a_trace_of_the_configured_devices(acl, tmp_path):
    assert acl.rt.set_device(0) == 0
    assert acl.prof.start(1) == acl.ACL_ERROR_INVALID_PARAM                    # no such configuration
    config = acl.prof.create_config([0], 1, 0, 0x2 | 0x20)
    assert config
    assert acl.prof.start(config) == acl.ACL_ERROR_PROF_NOT_RUN               # before init
    assert acl.prof.init(str(tmp_path / "prof")) == 0
    assert acl.prof.init(str(tmp_path / "prof")) == acl.ACL_ERROR_REPEAT_INITIALIZE
    assert acl.prof.start(config) == 0
    assert acl.prof.start(config) == acl.ACL_ERROR_PROF_ALREADY_RUN
    buf = device_alloc(acl, 4096)
    stream, _ = acl.rt.create_stream()
    assert acl.rt.memset_async(buf, 4096, 7, 4096, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    assert acl.prof.destroy_config(config) == acl.ACL_ERROR_INVALID_PARAM       # still collecting
    assert acl.prof.stop(config) == 0
    assert acl.prof.stop(config) == acl.ACL_ERROR_PROF_NOT_RUN
    assert acl.prof.destroy_config(config) == 0 and acl.prof.finalize() == 0
    assert acl.prof.create_config([0], 1, 0, 1 << 40) == 0                       # no such ACL_PROF_* switch
    traces = list((tmp_path / "prof").glob("mdev_trace_*.json"))
    assert len(traces) == 1
    tasks = [e for e in json.loads(traces[0].read_text())["traceEvents"] if e.get("cat") == "task"]
    assert any(e["args"]["kind"] == "memset" and e["args"]["bytes"] == 4096 for e in tasks), tasks
    acl.rt.destroy_stream(stream)
    acl.rt.free(buf)
