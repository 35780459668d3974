"""Faults: a device process killed, a host process killed, the supervisor killed, a hung
task.  Every fault here is real (SIGKILL of the real process), and every test checks the
calls return in bounded time with the documented code:

    device lost           ACL_ERROR_RT_SOCKET_CLOSE (507901) for every call touching it,
                          until the process resets the device; reset_device_force (or
                          reset_device down to zero) restarts a dead device process
    sync timeout          ACL_ERROR_RT_STREAM_SYNC_TIMEOUT (507046)
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import psutil

from async_util import ok, out, stream_done
from helpers import MiB, attached, extra_board, from_device, hbm_free, kill, shm_entries, to_device, wait_until
from mdev.board import launcher
from mdev import status as S
from mdev.naming import BoardPaths
from mdev.kernel import kernel
from mdev.memory.segment import Segment
from peer import Peer

LOST = 507901          # ACL_ERROR_RT_SOCKET_CLOSE
SYNC_TIMEOUT = 507046  # ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
E_PARAM = 107000       # ACL_ERROR_RT_PARAM_INVALID
GEQ = 0                # ACL_STREAM_WAIT_VALUE_GEQ


def device_pid(name: str, device: int) -> int:
    return launcher.status(name)["devices"][device]["pid"]


def device_state(name: str, device: int) -> str:
    return launcher.status(name)["devices"][device]["state"]


def smi(name: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "mdev", "smi", "--name", name],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def smi_state(text: str, device: int) -> str:
    for line in text.splitlines():
        cells = line.strip("| ").split()
        if cells and cells[0] == str(device):
            return cells[2]
    raise AssertionError(f"device {device} not in\n{text}")


def events_on(name: str, device: int) -> int:
    """Live events of a device, from its control page."""
    page = S.ControlPage(Segment(BoardPaths(name).control(device)))
    try:
        return int(page.header[S.H_EVENTS])
    finally:
        page.segment.close()


def hang(acl, stream) -> int:
    """Queue a wait that never ends on ``stream`` (a value wait on a fresh, zero word)."""
    word = out(acl, acl.rt.malloc(8, 0))
    ok(acl, acl.rt.memset(word, 8, 0, 8))
    ok(acl, acl.rt.value_wait(word, 1, GEQ, stream))
    return word


def round_trip(acl, nbytes: int = 64 * 1024, seed: int = 1) -> None:
    """Allocate on the current device, copy a pattern there and back, check it, free."""
    data = np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)
    ptr = out(acl, acl.rt.malloc(nbytes, 0))
    to_device(acl, ptr, data)
    assert from_device(acl, ptr, nbytes).tobytes() == data.tobytes()
    ok(acl, acl.rt.free(ptr))


# ============================================================================ device killed
def test_killed_device_reports_device_lost_and_comes_back(monkeypatch):
    with extra_board("flt-dev", "laptop2") as name, attached(monkeypatch, name) as acl:
        ok(acl, acl.rt.set_device(1))
        ok(acl, acl.rt.set_device(0))
        ctx = out(acl, acl.rt.get_context())
        stream = out(acl, acl.rt.create_stream())
        buf = out(acl, acl.rt.malloc(1 * MiB, 0))
        host = np.zeros(1 * MiB, np.uint8)
        hang(acl, stream)                                       # work queued behind a wait
        ok(acl, acl.rt.memcpy_async(buf, 1 * MiB, buf, 1 * MiB, 3, stream))
        event = out(acl, acl.rt.create_event())
        ok(acl, acl.rt.record_event(event, stream))
        result = {}

        def sync(what, call):
            acl.rt.set_context(ctx)
            result[what] = call()

        blocked = [threading.Thread(target=sync, args=(what, call), daemon=True) for what, call in (
            ("stream", lambda: acl.rt.synchronize_stream(stream)),
            ("device", lambda: acl.rt.synchronize_device()),
            ("event", lambda: acl.rt.synchronize_event(event)))]
        for thread in blocked:
            thread.start()
        time.sleep(0.3)
        assert all(t.is_alive() for t in blocked)              # really parked on the device
        old_pid = device_pid(name, 0)
        kill(old_pid)
        for thread in blocked:
            thread.join(10)
        assert not any(t.is_alive() for t in blocked), "a synchronisation on a killed device hangs"
        assert result == {"stream": LOST, "device": LOST, "event": LOST}

        # every call touching device 0 says so, quickly
        t0 = time.monotonic()
        assert acl.rt.synchronize_stream(stream) == LOST
        assert acl.rt.synchronize_device() == LOST
        assert acl.rt.malloc(4096, 0)[1] == LOST
        assert acl.rt.create_stream()[1] == LOST
        assert acl.rt.memset(buf, 64, 1, 64) == LOST
        assert acl.rt.memcpy(acl.util.numpy_to_ptr(host), 64, buf, 64, 2) == LOST
        assert acl.rt.memset_async(buf, 64, 1, 64, stream) == LOST
        assert time.monotonic() - t0 < 5

        # device 1 keeps working, also from this process
        ok(acl, acl.rt.set_device(1))
        round_trip(acl)
        s1 = out(acl, acl.rt.create_stream())
        ok(acl, acl.rt.synchronize_stream(s1))

        # the supervisor and mdev smi see the fault
        assert wait_until(lambda: device_state(name, 0) == "faulted", timeout=5)
        text = smi(name)
        assert smi_state(text, 0) == "faulted" and smi_state(text, 1) == "ok", text

        # reset_device_force brings the device back: a new process, a fresh device
        ok(acl, acl.rt.reset_device_force(0))
        assert device_pid(name, 0) != old_pid
        assert device_state(name, 0) == "ok"
        # the handles of the dead device are gone (invalid), never aliases of new objects
        assert acl.rt.free(buf) == E_PARAM
        assert acl.rt.synchronize_stream(stream) == 100000           # ACL_ERROR_INVALID_PARAM
        ok(acl, acl.rt.set_device(0))
        round_trip(acl, seed=2)
        s0 = out(acl, acl.rt.create_stream())
        ok(acl, acl.rt.memset_async(out(acl, acl.rt.malloc(4096, 0)), 4096, 7, 4096, s0))
        ok(acl, acl.rt.synchronize_stream(s0))
        assert acl.rt.synchronize_stream(stream) == 100000
        assert smi_state(smi(name), 0) == "ok"
        ok(acl, acl.rt.set_device(1))
        ok(acl, acl.rt.synchronize_stream(s1))                  # device 1 untouched throughout


def test_other_processes_of_a_killed_device_see_it_lost_until_they_reset(monkeypatch):
    with extra_board("flt-dev2", "laptop2") as name, attached(monkeypatch, name) as acl:
        ok(acl, acl.rt.set_device(0))
        with Peer(name) as b:
            b.do("""
                ok(acl.rt.set_device(0)); ok(acl.rt.set_device(1))
                ok(acl.rt.set_device(0))
                s, ret = acl.rt.create_stream(); ok(ret)
                p, ret = acl.rt.malloc(4096, 0); ok(ret)
            """)
            kill(device_pid(name, 0))
            assert b.ev("acl.rt.memset(p, 4096, 1, 4096)") == LOST
            assert b.ev("acl.rt.synchronize_stream(s)") == LOST
            # this process restarts it; the peer's old handles stay lost, device 1 unaffected
            ok(acl, acl.rt.reset_device_force(0))
            assert b.ev("acl.rt.memset(p, 4096, 1, 4096)") == LOST
            assert b.ev("acl.rt.synchronize_stream(s)") == LOST
            b.do("ok(acl.rt.set_device(1)); q, ret = acl.rt.malloc(4096, 0); ok(ret); put(q, b'x' * 4096)")
            # the peer resets its references: set_device gives it the restarted device
            b.do("""
                ok(acl.rt.reset_device(0)); ok(acl.rt.reset_device(0))     # it set device 0 twice
                ok(acl.rt.set_device(0))
                p2, ret = acl.rt.malloc(4096, 0); ok(ret)
                put(p2, b'y' * 4096); assert get(p2, 4096).tobytes() == b'y' * 4096
                assert acl.rt.free(p) == 107000
            """)
        ok(acl, acl.rt.set_device(0))
        round_trip(acl)


def current_segments(name: str, devices: int) -> list[str]:
    """The /dev/shm entries of the current processes of the board's devices, as recorded."""
    paths = BoardPaths(name)
    return sorted(n.lstrip("/") for i in range(devices) for n in (paths.hbm(i), paths.control(i)))


def shm_mappings(pid: int, name: str) -> list[str]:
    """Segments of board ``name`` that process ``pid`` maps ("... (deleted)" once unlinked)."""
    prefix = "/dev/shm/" + BoardPaths(name).shm_prefix
    with open(f"/proc/{pid}/maps") as f:
        fields = [line.split(None, 5) for line in f]
    return sorted({f[5].strip() for f in fields if len(f) == 6 and f[5].startswith(prefix)})


def deleted_mappings(pid: int, name: str) -> list[str]:
    """Segments process ``pid`` still maps after they were unlinked: each keeps the memory
    of a dead device (or buffer) alive."""
    return [m for m in shm_mappings(pid, name) if m.endswith("(deleted)")]


def test_peer_copies_reach_a_restarted_device(monkeypatch):
    """Device 1 mapped device 0's HBM and control page for P2P copies; device 0 is killed and
    restarted with a fresh HBM segment (under new names): device 1 (and this process) drop the
    old mappings, copies both ways land in the new HBM, and nothing maps the dead segments
    any more."""
    nbytes = 256 * 1024
    pattern = np.random.default_rng(7).integers(0, 256, nbytes, dtype=np.uint8)
    with extra_board("flt-p2p", "pcie4", devices=3) as name, attached(monkeypatch, name) as acl:
        segments = sorted(shm_entries(name))
        assert segments == current_segments(name, 3)

        def p2p_round(seed: int) -> None:
            """0 -> 1 and 1 -> 0 copies run by device 1, then by device 0; all read back."""
            data = np.roll(pattern, seed)
            ok(acl, acl.rt.set_device(0))
            if not acl.rt.device_peer_access_status(0, 1)[0]:
                ok(acl, acl.rt.device_enable_peer_access(1, 0))
            s0 = out(acl, acl.rt.create_stream())
            a0, b0 = out(acl, acl.rt.malloc(nbytes, 0)), out(acl, acl.rt.malloc(nbytes, 0))
            to_device(acl, a0, data)
            ok(acl, acl.rt.set_device(1))
            if not acl.rt.device_peer_access_status(1, 0)[0]:
                ok(acl, acl.rt.device_enable_peer_access(0, 0))
            s1 = out(acl, acl.rt.create_stream())
            a1, b1 = out(acl, acl.rt.malloc(nbytes, 0)), out(acl, acl.rt.malloc(nbytes, 0))
            ok(acl, acl.rt.memcpy_async(a1, nbytes, a0, nbytes, 3, s1))       # device 1 reads device 0
            ok(acl, acl.rt.memcpy_async(b0, nbytes, a1, nbytes, 3, s1))       # device 1 writes device 0
            ok(acl, acl.rt.synchronize_stream(s1))
            assert from_device(acl, a1, nbytes).tobytes() == data.tobytes()
            ok(acl, acl.rt.set_device(0))
            assert from_device(acl, b0, nbytes).tobytes() == data.tobytes()
            ok(acl, acl.rt.memset(a0, nbytes, 0, nbytes))
            ok(acl, acl.rt.memcpy_async(a0, nbytes, a1, nbytes, 3, s0))       # device 0 reads device 1
            ok(acl, acl.rt.memcpy_async(b1, nbytes, b0, nbytes, 3, s0))       # device 0 writes device 1
            ok(acl, acl.rt.synchronize_stream(s0))
            assert from_device(acl, a0, nbytes).tobytes() == data.tobytes()
            ok(acl, acl.rt.set_device(1))
            assert from_device(acl, b1, nbytes).tobytes() == data.tobytes()
            for dev, ptrs, stream in ((0, (a0, b0), s0), (1, (a1, b1), s1)):
                ok(acl, acl.rt.set_device(dev))
                ok(acl, acl.rt.destroy_stream(stream))
                for ptr in ptrs:
                    ok(acl, acl.rt.free(ptr))

        p2p_round(0)                                  # device 1 now maps device 0's segments
        ok(acl, acl.rt.set_device(0))
        survivor = device_pid(name, 1)
        with Peer(name) as b:
            # another process holds memory of device 0 (its HBM mapped here too) and does not
            # reset the device after the kill
            b.do("""
                ok(acl.rt.set_device(0))
                p, ret = acl.rt.malloc(4096, 0); ok(ret)
                put(p, b'p' * 4096); assert get(p, 4096).tobytes() == b'p' * 4096
                ok(acl.rt.set_device(1)); ok(acl.rt.device_enable_peer_access(0, 0))
                q, ret = acl.rt.malloc(4096, 0); ok(ret)
                s, ret = acl.rt.create_stream(); ok(ret)
            """)
            kill(device_pid(name, 0))
            assert acl.rt.malloc(4096, 0)[1] == LOST
            # once the supervisor found it dead, device 1 unmapped it and still allocates
            assert wait_until(lambda: device_state(name, 0) == "faulted", timeout=5)
            assert wait_until(lambda: not any(m.endswith(("hbm0", "ctl0")) for m in shm_mappings(survivor, name)),
                              timeout=5), shm_mappings(survivor, name)
            ok(acl, acl.rt.set_device(1))
            ok(acl, acl.rt.free(out(acl, acl.rt.malloc(4096, 0))))
            ok(acl, acl.rt.reset_device_force(0))
            assert device_state(name, 0) == "ok"
            # the survivor was told to unmap the dead device before the new one started
            assert wait_until(lambda: deleted_mappings(survivor, name) == [], timeout=5), \
                deleted_mappings(survivor, name)
            p2p_round(1)
            # the peer's stale pointer never reaches the restarted device's memory
            assert b.ev("acl.rt.memcpy_async(q, 4096, p, 4096, 3, s)") == LOST
            assert b.ev("acl.rt.memcpy_async(p, 4096, q, 4096, 3, s)") == LOST
            b.do("ok(acl.rt.synchronize_stream(s))")
            # it let go of the dead HBM when it saw the device die, of its control page
            # when it resets the device
            assert all("hbm" not in m for m in deleted_mappings(b.pid, name)), deleted_mappings(b.pid, name)
            b.do("ok(acl.rt.reset_device(0)); ok(acl.rt.set_device(0)); ok(acl.rt.set_device(1))")
            assert deleted_mappings(b.pid, name) == []
        assert device_pid(name, 1) == survivor
        # no process keeps the dead device's memory mapped; no segment is left behind
        for pid in (survivor, device_pid(name, 0), os.getpid()):
            assert deleted_mappings(pid, name) == [], (pid, deleted_mappings(pid, name))
        assert wait_until(lambda: sorted(shm_entries(name)) == current_segments(name, 3), timeout=5), \
            shm_entries(name)
        restarted = current_segments(name, 3)
        assert len(set(restarted) - set(segments)) == 2          # device 0's two, named afresh
        # a second kill and restart: the remapped mappings are dropped again
        kill(device_pid(name, 0))
        ok(acl, acl.rt.reset_device_force(0))
        p2p_round(2)
        assert deleted_mappings(survivor, name) == [] and deleted_mappings(os.getpid(), name) == []
        assert sorted(shm_entries(name)) == current_segments(name, 3) != restarted


# ============================================================================ host killed
def test_host_killed_mid_stream_frees_everything(acl, board):
    """A peer with memory, pinned buffers, streams with queued work, events and an IPC export
    is killed: the board frees all of it; our import of its memory lives until we close."""
    ok(acl, acl.rt.set_device(0))
    # processes of earlier tests are gone (their cleanup may still be running)
    assert wait_until(lambda: [c["pid"] for c in launcher.status(board)["clients"]] == [os.getpid()], timeout=15)
    base_free = hbm_free(acl)
    before = shm_entries(board)
    base_events = events_on(board, 0)
    b = Peer(board)
    try:
        b.do("""
            ok(acl.rt.set_device(0))
            s, ret = acl.rt.create_stream(); ok(ret)
            s2, ret = acl.rt.create_stream(); ok(ret)
        """)
        free_before_big = hbm_free(acl)
        b.do("""
            big, ret = acl.rt.malloc(8 << 20, 0); ok(ret)
            put(big, np.full(8 << 20, 0x5A, np.uint8))
            key, ret = acl.rt.ipc_mem_get_export_key(big, 8 << 20, 65, 1); ok(ret)
            pins = [acl.rt.malloc_host(1 << 20)[0] for _ in range(3)]
            ev, ret = acl.rt.create_event(); ok(ret)
            word, ret = acl.rt.malloc(8, 2); ok(ret)                # ACL_MEM_MALLOC_NORMAL_ONLY: 4 KiB
            ok(acl.rt.memset(word, 8, 0, 8))
            ok(acl.rt.value_wait(word, 1, 0, s))                  # hangs forever
            for _ in range(20):
                ok(acl.rt.memcpy_async(big, 1 << 20, pins[0], 1 << 20, 1, s))
            ok(acl.rt.record_event(ev, s))
            ok(acl.rt.memcpy_async(pins[1], 1 << 20, big, 1 << 20, 2, s2))
        """)
        key = b.ev("key")
        assert events_on(board, 0) == base_events + 1
        big_reserved = free_before_big - hbm_free(acl) - 4096          # HBM the 8 MiB block takes
        assert len(shm_entries(board)) == len(before) + 3            # the peer's pinned buffers
        shared = out(acl, acl.rt.ipc_mem_import_by_key(key, 0))
        assert hbm_free(acl) < base_free - (8 << 20)
    finally:
        b.kill()
        b.close()
    # its pinned segments are unlinked, its streams and memory freed, except what we import
    assert wait_until(lambda: sorted(shm_entries(board)) == sorted(before), timeout=10), shm_entries(board)
    assert wait_until(lambda: base_free - hbm_free(acl) == big_reserved, timeout=10), \
        (base_free - hbm_free(acl), big_reserved)
    assert (from_device(acl, shared, 8 << 20) == 0x5A).all()        # imported memory outlives it
    stats = launcher.status(board)["devices"][0]
    assert stats["state"] == "ok" and stats["streams"] == 1          # our default stream only
    assert events_on(board, 0) == base_events
    ok(acl, acl.rt.ipc_mem_close(key))
    assert wait_until(lambda: hbm_free(acl) == base_free, timeout=10)
    # its key died with it: nobody can import it any more
    assert acl.rt.ipc_mem_import_by_key(key, 0)[1] != 0
    round_trip(acl)
    assert sorted(shm_entries(board)) == sorted(before)


# ============================================================================ supervisor killed
def test_killed_supervisor_gives_a_clear_error_and_board_start_recovers(monkeypatch):
    with extra_board("flt-sup", "laptop2") as name, attached(monkeypatch, name) as acl:
        ok(acl, acl.rt.set_device(0))
        stream = out(acl, acl.rt.create_stream())
        hang(acl, stream)
        info = launcher.status(name)
        device_pids = [d["pid"] for d in info["devices"]]
        ctx = out(acl, acl.rt.get_context())
        result = {}

        def sync():
            acl.rt.set_context(ctx)
            result["ret"] = acl.rt.synchronize_stream(stream)

        blocked = threading.Thread(target=sync, daemon=True)
        blocked.start()
        time.sleep(0.2)
        kill(info["pid"])
        # the devices do not outlive their supervisor, and the blocked sync returns
        assert wait_until(lambda: not any(psutil.pid_exists(p) for p in device_pids), timeout=10)
        blocked.join(10)
        assert not blocked.is_alive() and result["ret"] == LOST
        assert acl.rt.malloc(4096, 0)[1] == LOST
        assert acl.rt.malloc_host(4096)[1] == LOST
        assert "not reachable" in acl.get_recent_err_msg() or "gone" in acl.get_recent_err_msg()
        assert not launcher.is_running(BoardPaths(name))
        # its devices removed the board as they went (HBM, control and board pages, files)
        assert wait_until(lambda: not shm_entries(name), timeout=10), shm_entries(name)
        # mdev board start on the same name starts fresh
        proc = subprocess.run([sys.executable, "-m", "mdev", "board", "start", "--name", name,
                               "--topology", "laptop2", "--hbm", "64MiB"],
                              capture_output=True, text=True, timeout=90)
        assert proc.returncode == 0, proc.stderr
        assert "started" in proc.stdout
        new = launcher.status(name)
        assert new["pid"] != info["pid"] and all(d["state"] == "ok" for d in new["devices"])
        fresh = BoardPaths(name)
        assert sorted(shm_entries(name)) == sorted([fresh.hbm(i).lstrip("/") for i in range(2)]
                                                   + [fresh.control(i).lstrip("/") for i in range(2)])
        # the process detaches from the dead board (finalize) and works on the new one
        from mdev.runtime.devices.lifecycle import detach
        detach()
        ok(acl, acl.rt.set_device(0))
        round_trip(acl)
        assert all(d["hbm_used"] < 1 * MiB for d in launcher.status(name)["devices"])


# ============================================================================ hung tasks
@kernel
def spin_on(ctx, flag):
    word = ctx.gm(flag, np.uint64, 1)
    ctx.spin_until(lambda: int(word[0]) == 1)


def test_hung_wait_times_out_and_abort_clears_the_stream(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    hang(acl, stream)
    buf = out(acl, acl.rt.malloc(4096, 0))
    ok(acl, acl.rt.memset_async(buf, 4096, 0x11, 4096, stream))     # queued behind the wait
    t0 = time.monotonic()
    assert acl.rt.synchronize_stream_with_timeout(stream, 200) == SYNC_TIMEOUT
    assert acl.rt.synchronize_device_with_timeout(200) == SYNC_TIMEOUT
    assert time.monotonic() - t0 < 3
    assert not stream_done(acl, stream)
    ok(acl, acl.rt.stream_abort(stream))
    assert wait_until(lambda: stream_done(acl, stream), 5)
    acl.rt.synchronize_stream(stream)                                 # reports the abort, if any
    assert (from_device(acl, buf, 4096) == 0).all()                   # the queued memset was dropped
    # the stream is usable again
    ok(acl, acl.rt.memset_async(buf, 4096, 0x22, 4096, stream))
    ok(acl, acl.rt.synchronize_stream_with_timeout(stream, 5000))
    assert (from_device(acl, buf, 4096) == 0x22).all()
    ok(acl, acl.rt.destroy_stream(stream))


def test_hung_kernel_times_out_and_abort_clears_the_stream(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    flag = out(acl, acl.rt.malloc(8, 0))
    ok(acl, acl.rt.memset(flag, 8, 0, 8))
    ok(acl, spin_on[1, stream](flag))
    assert acl.rt.synchronize_stream_with_timeout(stream, 200) == SYNC_TIMEOUT
    assert acl.rt.synchronize_device_with_timeout(100) == SYNC_TIMEOUT
    ok(acl, acl.rt.stream_abort(stream))
    assert wait_until(lambda: stream_done(acl, stream), 5)
    acl.rt.synchronize_stream(stream)
    ok(acl, acl.rt.memset_async(flag, 8, 3, 8, stream))
    ok(acl, acl.rt.synchronize_stream_with_timeout(stream, 5000))
    ok(acl, acl.rt.synchronize_device_with_timeout(5000))
    ok(acl, acl.rt.destroy_stream(stream))
