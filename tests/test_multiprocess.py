"""Several host processes on one board: shared device accounting, client tracking, and the
board freeing a client's memory, streams and pinned segments when the process exits, is
killed, or leaves a forked child behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np

from conftest import SMALL_HBM
from helpers import MiB, from_device, hbm_free, shm_entries, stack_bytes, to_device, wait_until
from mdev.board import launcher


HOLD = """
    import os, sys, time
    import mdev.acl as acl
    assert acl.rt.set_device({device}) == 0
    ptr, ret = acl.rt.malloc({size}, acl.ACL_MEM_MALLOC_NORMAL_ONLY); assert ret == 0
    host, ret = acl.rt.malloc_host(1 << 20); assert ret == 0
    s, ret = acl.rt.create_stream(); assert ret == 0
    assert acl.rt.memset_async(ptr, {size}, 7, {size}, s) == 0
    assert acl.rt.memcpy_async(host, 4096, ptr, 4096, acl.ACL_MEMCPY_DEVICE_TO_HOST, s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    info = []
    {extra}
    print("ready", os.getpid(), *info, flush=True)
    time.sleep(120)
"""


def spawn_holder(board: str, device: int, size: int, extra: str = "") -> tuple[subprocess.Popen, list[str]]:
    code = textwrap.dedent(HOLD).format(device=device, size=size, extra=extra)
    env = dict(os.environ, MDEV_BOARD=board, MDEV_AUTOSTART="0")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    line = proc.stdout.readline().split()
    if not line or line[0] != "ready":
        proc.kill()
        raise AssertionError(f"holder failed: {line} {proc.stderr.read()}")
    return proc, line[1:]


def pinned_of(board: str, pid: int) -> list[str]:
    return [e for e in shm_entries(board) if f".pin.{pid}." in e]


def client_pids(board: str) -> list[int]:
    return [c["pid"] for c in launcher.status(board)["clients"]]


def device_state(board: str, device: int) -> tuple[int, int]:
    d = launcher.status(board)["devices"][device]
    return d["hbm_used"], d["streams"]


def test_two_processes_share_device_accounting(acl, board, run_py):
    assert acl.rt.set_device(0) == 0
    stack = stack_bytes(acl, 0)                 # each process's set_device takes one
    mine, _ = acl.rt.malloc(16 * MiB, acl.ACL_MEM_MALLOC_NORMAL_ONLY)      # 16 MiB + 4 KiB
    to_device(acl, mine, np.full(4096, 3, np.uint8))
    assert hbm_free(acl) == SMALL_HBM - stack - 16 * MiB - 4096
    out = run_py("""
        import mdev.acl as acl
        assert acl.rt.set_device(0) == 0
        free, total, _ = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
        ptr, ret = acl.rt.malloc(8 * 1024 * 1024, acl.ACL_MEM_MALLOC_HUGE_ONLY)   # 8 MiB + 32 -> 10 MiB
        free2, _, _ = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
        print(total, free, free2)
    """, board)
    total, free, free2 = map(int, out.stdout.split())
    assert total == SMALL_HBM
    assert free == SMALL_HBM - 2 * stack - 16 * MiB - 4096      # sees this process's allocation
    assert free2 == free - 10 * MiB
    # the other process exited: its memory is back, ours is untouched
    assert wait_until(lambda: hbm_free(acl) == SMALL_HBM - stack - 16 * MiB - 4096)
    assert (from_device(acl, mine, 4096) == 3).all()


def test_board_tracks_clients(acl, board):
    assert acl.rt.set_device(0) == 0
    procs = [spawn_holder(board, 1, MiB)[0] for _ in range(2)]
    try:
        pids = client_pids(board)
        assert os.getpid() in pids and all(p.pid in pids for p in procs)
        commands = {c["pid"]: c["command"] for c in launcher.status(board)["clients"]}
        assert all("-c" in commands[p.pid] for p in procs)
    finally:
        for p in procs:
            p.terminate()
            p.wait(30)
    assert wait_until(lambda: not any(p.pid in client_pids(board) for p in procs))
    assert wait_until(lambda: device_state(board, 1) == (0, 0))


def test_killed_client_is_cleaned_up(acl, board):
    """SIGKILL a process holding memory, a stream and a pinned buffer: the board frees them."""
    assert acl.rt.set_device(2) == 0
    stack = stack_bytes(acl, 2)
    before = hbm_free(acl)
    proc, _ = spawn_holder(board, 2, 32 * MiB)
    try:
        assert hbm_free(acl) == before - 32 * MiB - 4096 - stack             # seen from this process
        assert device_state(board, 2) == (32 * MiB + 4096 + 2 * stack, 3)    # its two streams, our default one
        assert len(pinned_of(board, proc.pid)) == 1
        assert proc.pid in client_pids(board)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    assert wait_until(lambda: hbm_free(acl) == before, timeout=15), hbm_free(acl)
    assert wait_until(lambda: device_state(board, 2) == (stack, 1))
    assert wait_until(lambda: not pinned_of(board, proc.pid))
    assert wait_until(lambda: proc.pid not in client_pids(board))
    # the device is healthy and usable
    ptr, ret = acl.rt.malloc(32 * MiB, 0)
    assert ret == 0 and not from_device(acl, ptr, 32 * MiB).any()    # the dead client's data is gone
    assert acl.rt.free(ptr) == 0


def test_killed_client_pinned_memory_unmapped_by_devices(board):
    """A dead client's pinned buffers must really go: unlinking the name is not enough while
    a device process still maps the segment (its pages stay in RAM until unmapped)."""
    proc, _ = spawn_holder(board, 1, MiB)         # its async D2H copy made device 1 map the buffer
    device_pid = launcher.status(board)["devices"][1]["pid"]

    def mapped():
        with open(f"/proc/{device_pid}/maps") as f:
            return [line.split()[-2] for line in f if f".pin.{proc.pid}." in line]

    assert mapped(), "device 1 should map the client's pinned buffer while the client lives"
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert wait_until(lambda: not pinned_of(board, proc.pid))        # the name is gone ...
    assert wait_until(lambda: not mapped(), timeout=5), mapped()     # ... and so is the memory


def test_dead_parent_with_living_forked_child(acl, board):
    """A forked child inherits the parent's sockets; when the parent dies its resources must
    still be released although the child lives on."""
    assert acl.rt.set_device(3) == 0
    stack = stack_bytes(acl, 3)
    before = hbm_free(acl)
    fork = "child = os.fork()\nif child == 0: time.sleep(60); os._exit(0)\ninfo = [child]"
    proc, (_, child) = spawn_holder(board, 3, 16 * MiB, fork)
    child = int(child)
    try:
        assert hbm_free(acl) == before - 16 * MiB - 4096 - stack
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        os.kill(child, 0)                           # the child is still alive
        assert wait_until(lambda: hbm_free(acl) == before, timeout=15), hbm_free(acl)
        assert wait_until(lambda: device_state(board, 3) == (stack, 1))
        assert wait_until(lambda: not pinned_of(board, proc.pid))
        assert proc.pid not in client_pids(board)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        os.kill(child, signal.SIGKILL)


def test_exit_without_cleanup_releases(acl, board, run_py):
    assert acl.rt.set_device(1) == 0
    before = hbm_free(acl)
    out = run_py("""
        import os
        import mdev.acl as acl
        assert acl.rt.set_device(1) == 0
        for _ in range(4):
            ptr, ret = acl.rt.malloc(4 * 1024 * 1024, 0); assert ret == 0
            host, ret = acl.rt.malloc_host(65536); assert ret == 0
        print(os.getpid())
        # no free, no finalize: the process just ends
    """, board)
    pid = int(out.stdout.split()[0])
    assert wait_until(lambda: hbm_free(acl) == before)
    assert wait_until(lambda: not pinned_of(board, pid))


def test_reset_in_one_process_keeps_another_process_memory(acl, board):
    proc, _ = spawn_holder(board, 0, 8 * MiB)
    try:
        used, streams = device_state(board, 0)
        assert acl.rt.set_device(0) == 0
        stack = stack_bytes(acl, 0)
        assert (used, streams) == (8 * MiB + 4096 + stack, 2)
        mine, _ = acl.rt.malloc(MiB, 0)
        s, _ = acl.rt.create_stream()
        # (the device counts a stream once it has read of it: in order with this process's
        # tasks, which nothing here sends at once)
        assert wait_until(lambda: device_state(board, 0) == (used + stack + MiB + 4096, streams + 2))
        assert acl.rt.reset_device_force(0) == 0
        assert wait_until(lambda: device_state(board, 0) == (used, streams))   # only ours went
    finally:
        proc.kill()
        proc.wait(30)
    assert wait_until(lambda: device_state(board, 0) == (0, 0))


def test_concurrent_processes_copy_correctly(board):
    code = textwrap.dedent("""
        import sys
        import numpy as np
        import mdev.acl as acl
        seed = int(sys.argv[1])
        assert acl.rt.set_device(seed % 2) == 0
        n = 4 << 20
        data = np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)
        ptr, _ = acl.rt.malloc(n, 0)
        host, _ = acl.rt.malloc_host(n)
        view = acl.util.ptr_to_numpy(host, (n,), 2)
        s, _ = acl.rt.create_stream()
        for i in range(10):
            out = np.zeros(n, np.uint8)
            assert acl.rt.memcpy(ptr, n, acl.util.numpy_to_ptr(data), n, acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
            assert acl.rt.memcpy_async(host, n, ptr, n, acl.ACL_MEMCPY_DEVICE_TO_HOST, s) == 0
            assert acl.rt.synchronize_stream(s) == 0
            assert (view == data).all(), i
            data = np.roll(data, 1)
        print("ok")
    """)
    env = dict(os.environ, MDEV_BOARD=board, MDEV_AUTOSTART="0")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(seed)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for seed in range(4)]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, results
    assert all(out.strip() == "ok" for out, _ in results)
