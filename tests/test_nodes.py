"""Cluster boards at run time: a process on node k sees that node's devices from 0, peer
access and IPC stay inside a node, nodes start at their first attach, big boards start
and stop clean, and a device's fixed cost does not grow with the board."""
from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys

import numpy as np
import pytest

from helpers import MiB, attached, extra_board, shm_entries
from mdev.board import launcher
from mdev import status as S
from mdev.naming import BoardPaths
from mdev.memory.segment import Segment
from test_cluster_topology import TRIO

# What a program on a node reports: device count, ids, the board device of its memory.
PROBE = r"""
import json
import mdev.acl as acl
from mdev.memory import address
n, ret = acl.rt.get_device_count()
assert ret == 0, acl.get_recent_err_msg()
last = n - 1
assert acl.rt.set_device(last) == 0
ptr, ret = acl.rt.malloc(4096, 0)
assert ret == 0
info = {a: acl.rt.get_device_info(last, a)[0] for a in (402, 403, 404)}   # chip, super-pod device, server
out = {"count": n, "device": acl.rt.get_device()[0], "board_device": address.split(ptr)[0], "info": info,
       "peer": acl.rt.device_can_access_peer(last, 0)[0] if n > 1 else None,
       "beyond": acl.rt.set_device(n), "enable_beyond": acl.rt.device_enable_peer_access(n, 0)}
acl.rt.free(ptr)
acl.rt.reset_device(last)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def trio_board(tmp_path_factory):
    path = tmp_path_factory.mktemp("trio") / "trio.toml"
    path.write_text(TRIO)
    with extra_board("trio", str(path)) as name:
        yield name


def probe(run_py, name: str, node: int, code: str = PROBE) -> dict:
    proc = run_py(code, name, env={"MDEV_NODE": str(node)})
    return json.loads(proc.stdout.strip().splitlines()[-1])


def states(name: str) -> list[str]:
    return [d["state"] for d in launcher.status(name)["devices"]]


def test_nodes_start_at_their_first_attach(trio_board, run_py):
    before = states(trio_board)
    assert before[4:] == ["off", "off"] or before[4:] == ["ok", "ok"]     # another test may have been first
    probe(run_py, trio_board, 2)
    assert states(trio_board)[4:] == ["ok", "ok"]


@pytest.mark.parametrize("node", [0, 2])
def test_each_node_numbers_its_devices_from_zero(trio_board, run_py, node):
    out = probe(run_py, trio_board, node)
    assert out["count"] == 2 and out["device"] == 1
    assert out["board_device"] == 2 * node + 1                        # pointers name the board device
    assert out["info"] == {"402": 1, "403": 2 * node + 1, "404": node}  # chip, super-pod device, server
    assert out["peer"] == 1                                           # HCCS inside the node
    assert out["beyond"] == out["enable_beyond"] == 107001            # no device 2 on a node of 2


def test_peer_copies_work_inside_the_last_node(trio_board, run_py):
    code = r"""
    import numpy as np
    import mdev.acl as acl
    assert acl.rt.set_device(0) == 0
    assert acl.rt.device_enable_peer_access(1, 0) == 0
    a, _ = acl.rt.malloc(1024, 0)
    assert acl.rt.set_device(1) == 0
    b, _ = acl.rt.malloc(1024, 0)
    data = np.arange(256, dtype=np.int32)
    assert acl.rt.memcpy(b, 1024, acl.util.numpy_to_ptr(data), 1024, acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    assert acl.rt.set_device(0) == 0
    assert acl.rt.memcpy(a, 1024, b, 1024, acl.ACL_MEMCPY_DEVICE_TO_DEVICE) == 0
    out = np.zeros(256, dtype=np.int32)
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(out), 1024, a, 1024, acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    assert (out == data).all()
    print("ok")
    """
    assert run_py(code, trio_board, env={"MDEV_NODE": "2"}).stdout.strip() == "ok"


def test_a_node_the_board_does_not_have_is_refused(trio_board, run_py):
    code = "import mdev.acl as acl; print(acl.rt.get_device_count()[1])"
    for node in ("3", "x"):
        assert run_py(code, trio_board, env={"MDEV_NODE": node}).stdout.strip() == "107001"


def test_ipc_keys_do_not_cross_nodes(trio_board, run_py, monkeypatch):
    monkeypatch.setenv("MDEV_NODE", "0")
    with attached(monkeypatch, trio_board) as acl:
        assert acl.rt.set_device(0) == 0
        ptr, _ = acl.rt.malloc(4096, 0)
        key, ret = acl.rt.ipc_mem_get_export_key(ptr, 4096, 65, acl.ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION)
        assert ret == 0
        code = f"""
        import mdev.acl as acl
        assert acl.rt.set_device(0) == 0
        ptr, ret = acl.rt.ipc_mem_import_by_key({key!r}, 0)
        print(ret, (acl.get_recent_err_msg() or "-").splitlines()[0])
        if ret == 0:
            acl.rt.ipc_mem_close({key!r})
        """
        same = run_py(code, trio_board, env={"MDEV_NODE": "0"}).stdout.strip()
        assert same.startswith("0 ")                                   # a process of the same node may
        ret, message = run_py(code, trio_board, env={"MDEV_NODE": "1"}).stdout.strip().split(" ", 1)
        assert ret == "107000" and "another node" in message
        acl.rt.ipc_mem_close(key)
        acl.rt.free(ptr)


def test_smi_shows_a_node_and_a_summary_of_all(trio_board, run_py):
    probe(run_py, trio_board, 1)
    out = subprocess.run([sys.executable, "-m", "mdev", "smi", "--name", trio_board, "--node", "1"],
                         capture_output=True, text=True, check=True).stdout
    assert "node 1: board devices npu2-3, seen on the node as 0-1" in out
    rows = [line for line in out.splitlines() if "Ascend910B1" in line]
    assert [row.split()[1] for row in rows] == ["0", "1"]
    summary = [line.split()[1:3] for line in out.splitlines() if line[:8].strip("| ").isdigit()
               and "Ascend" not in line]
    assert summary == [["0", "2"], ["1", "2"], ["2", "2"]]            # node, devices: every node


# ---------------------------------------------------------------------------- big boards

def test_cloudmatrix384_first_and_last_node(run_py):
    with extra_board("cm384", "cloudmatrix384") as name:
        paths = BoardPaths(name)
        assert oct(paths.topology.stat().st_mode & 0o777) == "0o600"
        first, last = probe(run_py, name, 0), probe(run_py, name, 47)
        for node, out in ((0, first), (47, last)):
            assert out["count"] == 16 and out["device"] == 15
            assert out["board_device"] == 16 * node + 15 and out["info"]["404"] == node
            assert out["peer"] == 1 and out["beyond"] == out["enable_beyond"] == 107001
        up = [d["node"] for d in launcher.status(name)["devices"] if d["state"] == "ok"]
        assert sorted(set(up)) == [0, 47] and len(up) == 32          # nobody attached to the others
    assert shm_entries(name) == [] and not paths.topology.exists() and not paths.sockets()


def test_a2_4x8_four_nodes_of_eight(run_py):
    with extra_board("a2", "a2-4x8") as name:
        for node in (0, 3):
            out = probe(run_py, name, node)
            assert out["count"] == 8 and out["board_device"] == 8 * node + 7 and out["peer"] == 1
    assert shm_entries(name) == []


def test_a_128_device_board_starts_whole_and_its_pages_do_not_grow():
    # 128 devices did not fit the old address space, nor their topology a command line
    with extra_board("big", "cloudmatrix384", devices=128, eager=True) as name:
        assert states(name) == ["ok"] * 128
        paths = BoardPaths(name)
        size = os.stat(f"/dev/shm{paths.control(127)}").st_size
        assert size == S.size_for(64 * MiB)                            # no per-device part


def _add_under_lock(name: str, times: int) -> None:
    seg = Segment(name)
    cell = seg.array[8:16].view(np.uint64)
    for _ in range(times):
        with seg.locked(8, 8):
            cell[0] += 1
    seg.close()


def test_segment_lock_makes_increments_from_processes_exact():
    name = f"/mdev-test-lock-{os.getpid()}"
    seg = Segment(name, 4096, create=True)
    try:
        ctx = multiprocessing.get_context("fork")
        procs = [ctx.Process(target=_add_under_lock, args=(name, 3000)) for _ in range(3)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert int(seg.array[8:16].view(np.uint64)[0]) == 9000
    finally:
        seg.close()
        seg.unlink()


def test_mdev_run_node_sets_the_node(trio_board, tmp_path):
    prog = tmp_path / "where.py"
    prog.write_text("import acl\nfrom mdev.memory import address\nacl.rt.set_device(0)\n"
                    "print(acl.rt.get_device_count()[0], address.split(acl.rt.malloc(64, 0)[0])[0])\n")
    env = dict(os.environ, MDEV_AUTOSTART="0")
    env.pop("MDEV_NODE", None)
    out = subprocess.run([sys.executable, "-m", "mdev", "run", "--board", trio_board, "--node", "1", str(prog)],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "2"]                          # node 1's device 0 is board device 2
