"""The board as a thing of its own: CLI start/status/stop, mdev smi, on-demand start and idle
stop, privacy (0600 files, per-board secret), lazy HBM on an 8 x 32 GiB board."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import PREFIX
from helpers import GiB, MiB, attached, extra_board, shm_entries, stack_bytes, wait_until
import mdev
from mdev import protocol
from mdev.board import launcher
from mdev.naming import BoardPaths, runtime_dir
from mdev.board.proctitle import shown_title


def mdev_cli(*args, timeout=60, env=None):
    return subprocess.run([sys.executable, "-m", "mdev", *args], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, **(env or {})))


def holder(name: str, code: str = "", env: dict | None = None) -> subprocess.Popen:
    """A host process attached to board ``name`` that runs ``code``, prints 'ready' and waits
    for a line on stdin (or EOF) before exiting."""
    script = textwrap.dedent("""
        import sys
        import mdev.acl as acl
        assert acl.rt.set_device(0) == 0
    """) + textwrap.dedent(code) + textwrap.dedent("""
        print("ready", flush=True)
        sys.stdin.readline()
    """)
    full_env = dict(os.environ, MDEV_BOARD=name, MDEV_AUTOSTART="0", **(env or {}))
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=full_env)
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        raise AssertionError(f"holder did not start: {line!r} {proc.stderr.read()}")
    return proc


def release(proc: subprocess.Popen) -> None:
    try:
        proc.stdin.close()
    except OSError:
        pass
    proc.wait(30)


# ---------------------------------------------------------------------------- CLI
def test_cli_start_status_smi_stop():
    name = PREFIX + "cli"
    try:
        out = mdev_cli("board", "start", "--name", name, "--topology", "laptop2", "--hbm", "64MiB")
        assert out.returncode == 0, out.stderr
        assert f"board {name!r} started: 2 x Ascend910B1" in out.stdout
        assert len(shm_entries(name)) == 4                       # hbm + control page per device
        again = mdev_cli("board", "start", "--name", name, "--topology", "laptop2")
        assert again.returncode == 0 and "already running" in again.stdout

        proc = holder(name, """
            ptr, ret = acl.rt.malloc(3 * 1024 * 1024, acl.ACL_MEM_MALLOC_HUGE_ONLY)
            s, ret = acl.rt.create_stream()
        """)
        try:
            status = mdev_cli("board", "status", "--name", name)
            assert status.returncode == 0
            assert f"board {name!r}: topology laptop2" in status.stdout
            assert status.stdout.splitlines()[0].endswith(f", mdev {mdev.__version__}")
            assert "2 devices, 1 attached processes" in status.stdout

            info = launcher.status(name)
            d0 = info["devices"][0]
            stack = 32 * 1024 * 24                  # set_device's AI Core stacks on Ascend910B1
            assert (d0["hbm_total"], d0["hbm_used"], d0["streams"], d0["state"]) == (64 * MiB, 4 * MiB + stack, 2, "ok")
            assert info["devices"][1]["hbm_used"] == 0
            assert [c["pid"] for c in info["clients"]] == [proc.pid]

            smi = mdev_cli("smi", "--name", name)
            assert smi.returncode == 0, smi.stderr
            lines = smi.stdout.splitlines()
            row0 = next(line for line in lines if line.startswith("| 0 "))
            row1 = next(line for line in lines if line.startswith("| 1 "))
            assert "Ascend910B1" in row0 and "ok" in row0
            assert "HBM-Usage(MB)" in smi.stdout
            assert f"| mdev smi {mdev.__version__} " in smi.stdout
            assert row0.split()[4:8] == ["4", "/", "64", "2"], row0      # HBM used / total, streams
            assert row1.split()[4:8] == ["0", "/", "64", "0"], row1
            # the process table, as npu-smi's: a row per process and device it holds HBM on
            proc_rows = [line.split() for line in lines if line.split()[2:3] == [str(proc.pid)]]
            assert [r[1:4] for r in proc_rows] == [["0", str(proc.pid), "4"]], proc_rows   # 4.75 MiB on npu 0
            assert "-c" in proc_rows[0]                                 # the command line
            assert info["clients"][0]["hbm"] == {}                      # only when asked
            held = launcher.status(name, memory=True)["clients"][0]["hbm"]
            assert held == {0: 4 * MiB + stack}, held
        finally:
            release(proc)

        stop = mdev_cli("board", "stop", "--name", name)
        assert stop.returncode == 0 and f"board {name!r} stopped" in stop.stdout
        assert shm_entries(name) == []
        paths = BoardPaths(name)
        assert not os.path.exists(paths.socket) and not paths.key.exists()
        assert paths.sockets() == []
        status = mdev_cli("board", "status", "--name", name)
        assert status.returncode == 1 and "not running" in status.stdout
        stop = mdev_cli("board", "stop", "--name", name)
        assert stop.returncode == 0 and "was not running" in stop.stdout
    finally:
        launcher.stop(name)


def test_version_is_one_and_printed():
    out = mdev_cli("--version")
    assert out.returncode == 0 and out.stdout == f"mdev {mdev.__version__}\n"
    assert re.fullmatch(r"\d+\.\d+\.\d+", mdev.__version__)
    root = Path(__file__).resolve().parents[1]
    assert 'dynamic = ["version"]' in (root / "pyproject.toml").read_text()       # read from mdev.__version__
    assert f"## {mdev.__version__} " in (root / "CHANGELOG.md").read_text()


def test_board_processes_are_titled_for_ps_and_top():
    import psutil
    with extra_board("title", "laptop2") as name:
        info = launcher.status(name)
        expected = {info["pid"]: (f"mdev: board {name} supervisor", f"mdev sup {name}"[:15])}
        expected.update({d["pid"]: (f"mdev: board {name} device {d['id']}", f"mdev d{d['id']} {name}"[:15])
                         for d in info["devices"]})
        for pid, (command, comm) in expected.items():
            proc = psutil.Process(pid)
            assert shown_title(proc.cmdline()) == command                  # ps aux, top -c
            assert proc.name() == comm                                    # top, ps -e (15 characters)


def test_cli_start_devices_override():
    name = PREFIX + "cli3"
    try:
        out = mdev_cli("board", "start", "--name", name, "--topology", "hccs8", "--devices", "3",
                       "--hbm", "32MiB")
        assert out.returncode == 0, out.stderr
        assert "3 x Ascend910B1" in out.stdout
        info = launcher.status(name)
        assert [d["hbm_total"] for d in info["devices"]] == [32 * MiB] * 3
    finally:
        assert mdev_cli("board", "stop", "--name", name).returncode == 0
    assert shm_entries(name) == []


# ---------------------------------------------------------------------------- on demand
def test_on_demand_board_starts_and_stops_when_idle():
    name = PREFIX + "auto"
    env = dict(os.environ, MDEV_BOARD=name, MDEV_AUTOSTART="1", MDEV_IDLE_TIMEOUT="1",
               MDEV_TOPOLOGY="laptop2")
    code = textwrap.dedent("""
        import sys, time
        import mdev.acl as acl
        from mdev.board import launcher
        assert acl.init() == 0
        assert acl.rt.set_device(1) == 0
        ptr, ret = acl.rt.malloc(1 << 20, 0); assert ret == 0
        host, ret = acl.rt.malloc_host(4096); assert ret == 0
        info = launcher.status()
        print(info["on_demand"], len(info["devices"]), flush=True)
        time.sleep(2.5)          # longer than the idle timeout: attached means not idle
        print(launcher.status()["board"], flush=True)
        assert acl.finalize() == 0
    """)
    try:
        assert shm_entries(name) == []
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["True", "2", name]
        # the last client left: the board stops by itself and leaves nothing behind
        # the supervisor removes segments, then sockets and secret: wait for all of it
        paths = BoardPaths(name)
        assert wait_until(lambda: not shm_entries(name) and not paths.sockets() and not paths.key.exists(),
                          timeout=20)
        assert not launcher.is_running(paths)
    finally:
        launcher.stop(name)


def test_an_idle_board_does_not_cut_off_a_host_still_handshaking(monkeypatch):
    """An on-demand board past its idle time keeps serving while a connection is still
    proving its secret: before, it shut down under a host whose handshake or hello had not
    reached the serving loop yet (507901 'supervisor is gone' at a loaded host's attach)."""
    import socket
    import time
    name = PREFIX + "idlehs"
    monkeypatch.setenv("MDEV_TOPOLOGY", "laptop2")
    paths, started = launcher.start(name, on_demand=True, idle_timeout=0.3, owner_pid=os.getpid())
    try:
        assert started
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(paths.socket))
        time.sleep(1.5)                          # well past the idle time, the handshake not begun
        protocol.handshake(sock, launcher.read_key(paths), server=False)
        channel = protocol.Channel(sock)
        channel.send(("hello", os.getpid(), "test"))
        assert launcher.request(channel, "status")["board"] == name
        channel.close()
        # the last client left: now it goes idle and leaves nothing behind
        assert wait_until(lambda: not shm_entries(name) and not paths.sockets() and not paths.key.exists(),
                          timeout=20)
    finally:
        launcher.stop(name)


def test_status_queries_do_not_keep_an_idle_board_alive(monkeypatch):
    """Polling ``board status`` (a connection that never attaches) does not reset an
    on-demand board's idle time: before, each query's leaving restarted it, and a board
    polled more often than its idle timeout never stopped."""
    import time
    name = PREFIX + "idlepoll"
    monkeypatch.setenv("MDEV_TOPOLOGY", "laptop2")
    paths, started = launcher.start(name, on_demand=True, idle_timeout=1.0, owner_pid=os.getpid())
    try:
        assert started
        t0, polls = time.monotonic(), 0
        while time.monotonic() - t0 < 8:
            try:
                assert launcher.status(name)["board"] == name
            except (launcher.BoardError, protocol.ChannelClosed, OSError):
                break                                     # it stopped
            polls += 1
            time.sleep(0.2)
        else:
            raise AssertionError(f"the board kept running through {polls} status queries")
        assert time.monotonic() - t0 < 4, "stopped, but well after its idle time"
        assert wait_until(lambda: not shm_entries(name) and not paths.sockets() and not paths.key.exists(),
                          timeout=20)
    finally:
        launcher.stop(name)


def test_explicit_board_does_not_stop_when_idle(run_py):
    with extra_board("keep", "laptop2", hbm=32 * MiB) as name:
        run_py("import mdev.acl as acl; assert acl.rt.set_device(0) == 0", name,
               env={"MDEV_IDLE_TIMEOUT": "0.5"})
        import time
        time.sleep(2)
        assert launcher.is_running(BoardPaths(name))
        assert launcher.status(name)["on_demand"] is False


def test_no_autostart_gives_error(run_py):
    name = PREFIX + "absent"
    out = run_py("""
        import mdev.acl as acl
        print(acl.rt.set_device(0), acl.rt.get_device_count()[1])
        print(acl.get_recent_err_msg())
    """, name)
    code, count_code = out.stdout.split()[:2]
    assert code == count_code == str(acl_code("ACL_ERROR_RT_DRV_INTERNAL_ERROR"))
    assert "not running" in out.stdout
    assert shm_entries(name) == []


def acl_code(name):
    import mdev.acl as acl
    return getattr(acl, name)


# ---------------------------------------------------------------------------- privacy
def test_files_and_segments_are_private(acl, board):
    assert acl.rt.set_device(0) == 0
    host, ret = acl.rt.malloc_host(4096)
    assert ret == 0
    paths = BoardPaths(board)
    assert stat.S_IMODE(os.stat(runtime_dir()).st_mode) == 0o700
    sockets = paths.sockets()
    assert paths.socket in sockets and len(sockets) == 1 + 4          # supervisor + one per device
    for path in sockets:
        st = os.stat(path)
        assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, path
    assert stat.S_IMODE(paths.key.stat().st_mode) == 0o600
    segments = shm_entries(board)
    assert any(".hbm0" in s for s in segments) and any(".ctl3" in s for s in segments)
    assert any(".pin." in s for s in segments)
    for seg in segments:
        st = os.stat("/dev/shm/" + seg)
        assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.getuid(), seg
    assert acl.rt.free_host(host) == 0


def test_wrong_secret_refused(board):
    from multiprocessing import AuthenticationError
    paths = BoardPaths(board)
    right = launcher.read_key(paths)
    wrong = bytes(b ^ 0xFF for b in right)
    for path in (paths.socket, paths.device_socket(0), paths.device_socket(3)):
        with pytest.raises(AuthenticationError):
            protocol.connect(path, wrong, ("hello", 0, os.getpid(), "main", "intruder"))
    # nobody was let in, and the board still serves the right secret
    info = launcher.status(board)
    assert [d["state"] for d in info["devices"]] == ["ok"] * 4
    channel = protocol.connect(paths.socket, right, ("hello", os.getpid(), "test"))
    try:
        assert launcher.request(channel, "status")["board"] == board
    finally:
        channel.close()


# ---------------------------------------------------------------------------- lazy HBM
def test_8x32gib_board_is_lazy(monkeypatch):
    """8 x 32 GiB (256 GiB) of HBM on a machine with far less RAM: only touched pages count."""
    name = PREFIX + "huge8"
    topo = launcher.resolve_topology("hccs8", hbm=32 * GiB)
    launcher.start(name, topo, owner_pid=os.getpid())
    try:
        with attached(monkeypatch, name) as acl:
            assert acl.rt.get_device_count() == (8, 0)
            stack = stack_bytes(acl, 0)
            for d in range(8):
                assert acl.rt.set_device(d) == 0
                assert acl.rt.get_mem_info(acl.ACL_HBM_MEM) == (32 * GiB - stack, 32 * GiB, 0)
                assert acl.rt.get_device_info(d, acl.ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE) == (32 * GiB, 0)
            assert acl.rt.set_device(5) == 0
            # more than the device has: the allocation error, the device lives on
            assert acl.rt.malloc(33 * GiB, 0) == (0, acl.ACL_ERROR_RT_MEMORY_ALLOCATION)
            assert acl.rt.malloc(32 * GiB + 1, acl.ACL_MEM_MALLOC_NORMAL_ONLY) == (0, 207001)
            assert "ACL_ERROR_RT_MEMORY_ALLOCATION(207001)" in acl.get_recent_err_msg()
            # an allocation is backed in /dev/shm when it is made (touching it can never be
            # a SIGBUS), the rest of the 32 GiB stays a hole
            ptr, ret = acl.rt.malloc(256 * MiB, acl.ACL_MEM_MALLOC_HUGE_ONLY)
            assert ret == 0
            free, total, _ = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
            assert total - free - stack == 256 * MiB + 2 * MiB      # + 32 bytes of 2 MiB pages
            assert acl.rt.memset(ptr, 4096, 0xAB, 4096) == 0
            assert acl.rt.memset(ptr + 256 * MiB - 4096, 4096, 0xCD, 4096) == 0
            seg = "/dev/shm/" + BoardPaths(name).hbm(5).lstrip("/")
            st = os.stat(seg)
            assert st.st_size == 32 * GiB
            assert 258 * MiB <= st.st_blocks * 512 <= 258 * MiB + 16 * MiB     # what is allocated
            info = launcher.status(name)
            assert info["devices"][5]["hbm_used"] == 256 * MiB + 2 * MiB + stack
            assert [d["state"] for d in info["devices"]] == ["ok"] * 8
            assert acl.rt.free(ptr) == 0
            assert os.stat(seg).st_blocks * 512 <= 16 * MiB                    # given back
            assert acl.rt.get_mem_info(acl.ACL_HBM_MEM) == (32 * GiB - stack, 32 * GiB, 0)
    finally:
        launcher.stop(name)
    assert shm_entries(name) == []
