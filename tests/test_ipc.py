"""Sharing between host processes: IPC memory keys, IPC event handles, IPC notify keys.

Every test runs two (or more) real host processes on one board: this test process (the
``acl`` fixture) and peers driven step by step (``tests/peer.py``), so the order in which
the processes act is exactly the one written in the test.

    exporter (this process)                importer (a peer)
    malloc, export -> key  ----key---->    import(key) -> the same device memory
    set_import_pid([peer pid])             read / write it, close(key)
    close(key), free
"""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest

from helpers import MiB, from_device, hbm_free, to_device, wait_until
from mdev.board import launcher
from peer import Peer, PeerError

E_PARAM = 107000            # ACL_ERROR_RT_PARAM_INVALID
E_INVALID = 100000          # ACL_ERROR_INVALID_PARAM
E_UNALIGNED = 107008        # ACL_ERROR_RT_ADDR_UNALIGNED
E_NO_PERMISSION = 207006    # ACL_ERROR_RT_NO_PERMISSION
E_NOT_SUPPORT = 207000      # ACL_ERROR_RT_FEATURE_NOT_SUPPORT
NO_PID = 0x1                # ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION
PEER_FLAG = 0x1             # ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS
NOTIFY_NO_PID = 0x2         # ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION
NOTIFY_PEER_FLAG = 0x2      # ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS


# ---------------------------------------------------------------------------- helpers
def exported(acl, nbytes: int = 2 * MiB, policy: int = 1, flags: int = NO_PID, device: int = 0,
             pattern: int = 0) -> tuple[int, str, np.ndarray]:
    """Device memory of this process filled with a pattern, and a key exporting all of it."""
    assert acl.rt.set_device(device) == 0
    ptr, ret = acl.rt.malloc(nbytes, policy)
    assert ret == 0, acl.get_recent_err_msg()
    data = (np.arange(nbytes, dtype=np.uint64).view(np.uint8)[:nbytes] + pattern).astype(np.uint8)
    to_device(acl, ptr, data)
    key, ret = acl.rt.ipc_mem_get_export_key(ptr, nbytes, 65, flags)
    assert ret == 0, acl.get_recent_err_msg()
    return ptr, key, data


def peer_on(board: str, device: int) -> Peer:
    p = Peer(board)
    p.do("ok(acl.rt.set_device(dev), 'set_device')", dev=device)
    return p


def client_pids(board: str) -> list[int]:
    return [c["pid"] for c in launcher.status(board)["clients"]]


# ============================================================================ IPC memory
def test_export_import_close_same_device(acl, board):
    ptr, key, data = exported(acl, flags=0)
    assert isinstance(key, str) and 32 <= len(key) < 65 and key.isprintable()
    with peer_on(board, 0) as b:
        assert acl.rt.ipc_mem_set_import_pid(key, [b.pid]) == 0
        b.do("shared, ret = acl.rt.ipc_mem_import_by_key(key, 0); ok(ret, 'import')", key=key)
        assert b.ev("shared") == ptr                       # the exporter's device address
        assert b.ev("get(shared, n).tobytes()", n=data.size) == data.tobytes()
        # the importer writes (same device: synchronous copies are allowed); we see it
        b.do("put(shared, np.full(n, 0xAB, np.uint8))", n=data.size)
        assert (from_device(acl, ptr, data.size) == 0xAB).all()
        # importers close first, then the exporter
        assert b.ev("acl.rt.ipc_mem_close(key)") == 0
        assert b.ev("acl.rt.memcpy(acl.util.numpy_to_ptr(np.zeros(8, np.uint8)), 8, shared, 8, 2)") == E_PARAM
        assert b.ev("acl.rt.ipc_mem_close(key)") == E_PARAM          # closed already
    assert acl.rt.ipc_mem_close(key) == 0
    assert acl.rt.free(ptr) == 0


def test_export_argument_errors(acl):
    assert acl.rt.set_device(0) == 0
    ptr, _ = acl.rt.malloc(2 * MiB, 1)
    assert acl.rt.ipc_mem_get_export_key(ptr, 2 * MiB, 64, 0) == (None, E_INVALID)     # len is 65
    assert acl.rt.ipc_mem_get_export_key(ptr, 2 * MiB, 65, 0x4)[1] == E_INVALID       # unknown flag
    assert acl.rt.ipc_mem_get_export_key(ptr, 0, 65, 0)[1] == E_INVALID
    assert acl.rt.ipc_mem_get_export_key(ptr, 6 * MiB, 65, 0)[1] == E_PARAM           # past the end (2 MiB + 32 -> 4 MiB)
    host, _ = acl.rt.malloc_host(4096)
    assert acl.rt.ipc_mem_get_export_key(host, 4096, 65, 0)[1] == E_PARAM             # not device memory
    assert acl.rt.ipc_mem_import_by_key("no-such-key", 0)[1] == E_PARAM
    assert acl.rt.ipc_mem_import_by_key("x", 0x8)[1] == E_INVALID                      # unknown flag
    assert acl.rt.ipc_mem_set_import_pid("no-such-key", [1]) == E_PARAM
    assert acl.rt.free_host(host) == 0
    assert acl.rt.free(ptr) == 0


def test_page_alignment(acl):
    """Only whole pages of an allocation can be exported (its policy decides the page size)."""
    assert acl.rt.set_device(0) == 0
    small, _ = acl.rt.malloc(64 * 1024, acl.ACL_MEM_MALLOC_NORMAL_ONLY)         # 4 KiB pages
    big, _ = acl.rt.malloc(4 * MiB, acl.ACL_MEM_MALLOC_HUGE_ONLY)               # 2 MiB pages
    assert acl.rt.ipc_mem_get_export_key(small + 100, 4096, 65, 0)[1] == E_UNALIGNED
    assert acl.rt.ipc_mem_get_export_key(small, 4000, 65, 0)[1] == E_UNALIGNED
    assert acl.rt.ipc_mem_get_export_key(big, MiB, 65, 0)[1] == E_UNALIGNED
    assert acl.rt.ipc_mem_get_export_key(big + 4096, 2 * MiB, 65, 0)[1] == E_UNALIGNED
    keys = [acl.rt.ipc_mem_get_export_key(small + 4096, 8192, 65, 0),
            acl.rt.ipc_mem_get_export_key(big + 2 * MiB, 2 * MiB, 65, 0)]
    assert all(ret == 0 for _, ret in keys)
    for key, _ in keys:
        assert acl.rt.ipc_mem_close(key) == 0
    assert acl.rt.free(small) == 0 and acl.rt.free(big) == 0


def test_pid_validation(acl, board):
    ptr, key, data = exported(acl, flags=0)
    with peer_on(board, 0) as b:
        import_ = "acl.rt.ipc_mem_import_by_key(key, 0)"
        assert b.ev(import_, key=key) == (0, E_NO_PERMISSION)          # not on the list
        assert acl.rt.ipc_mem_set_import_pid(key, [1, b.pid + 100000]) == 0
        assert b.ev(import_) == (0, E_NO_PERMISSION)                   # still not on it
        # only the exporter may edit the list
        assert b.ev("acl.rt.ipc_mem_set_import_pid(key, [os.getpid()])") == E_NO_PERMISSION
        pid, ret = b.ev("acl.rt.device_get_bare_tgid()")
        assert ret == 0 and pid == b.pid                               # the real OS pid
        assert acl.rt.ipc_mem_set_import_pid(key, [pid]) == 0
        shared, ret = b.ev(import_)
        assert ret == 0 and shared == ptr
        assert b.ev("get(shared, 64).tobytes()", shared=shared) == data[:64].tobytes()
        assert b.ev("acl.rt.ipc_mem_close(key)") == 0
    assert acl.rt.ipc_mem_close(key) == 0
    assert acl.rt.free(ptr) == 0


def test_pid_validation_disabled(acl, board):
    ptr, key, data = exported(acl, flags=NO_PID)
    with peer_on(board, 0) as b:
        shared, ret = b.ev("acl.rt.ipc_mem_import_by_key(key, 0)", key=key)
        assert ret == 0 and shared == ptr
        assert b.ev("get(shared, 4096).tobytes()", shared=shared) == data[:4096].tobytes()
        assert b.ev("acl.rt.ipc_mem_close(key)") == 0
    assert acl.rt.ipc_mem_close(key) == 0
    assert acl.rt.free(ptr) == 0


def test_exporter_cannot_import_its_own_key(acl):
    ptr, key, _ = exported(acl)
    assert acl.rt.ipc_mem_import_by_key(key, 0)[1] == E_PARAM
    assert acl.rt.ipc_mem_close(key) == 0
    assert acl.rt.free(ptr) == 0


def test_import_after_exporter_closed_fails(acl, board):
    ptr, key, _ = exported(acl)
    assert acl.rt.ipc_mem_close(key) == 0
    with peer_on(board, 0) as b:
        assert b.ev("acl.rt.ipc_mem_import_by_key(key, 0)", key=key) == (0, E_PARAM)
        assert re.search("closed|unknown", b.ev("acl.get_recent_err_msg()"))
    assert acl.rt.free(ptr) == 0


def test_exporter_close_does_not_break_existing_importers(acl, board):
    """Closing early only stops later imports; a process that imported keeps its mapping."""
    ptr, key, data = exported(acl)
    with peer_on(board, 0) as b, peer_on(board, 0) as c:
        b.do("shared, ret = acl.rt.ipc_mem_import_by_key(key, 0); ok(ret)", key=key)
        assert acl.rt.ipc_mem_close(key) == 0
        assert c.ev("acl.rt.ipc_mem_import_by_key(key, 0)", key=key)[1] == E_PARAM
        assert b.ev("get(shared, 256).tobytes()") == data[:256].tobytes()
        assert b.ev("acl.rt.ipc_mem_close(key)") == 0
    assert acl.rt.free(ptr) == 0


def test_writes_visible_after_stream_sync(acl, board):
    """Asynchronous writes of either process are seen by the other once its stream is synchronised."""
    nbytes = 2 * MiB
    ptr, key, _ = exported(acl, nbytes)
    stream, _ = acl.rt.create_stream()
    pinned, _ = acl.rt.malloc_host(nbytes)
    with peer_on(board, 0) as b:
        b.do("""
            shared, ret = acl.rt.ipc_mem_import_by_key(key, 0); ok(ret)
            s, ret = acl.rt.create_stream(); ok(ret)
            ok(acl.rt.memset_async(shared, n, 0x5A, n, s))
            ok(acl.rt.synchronize_stream(s))
        """, key=key, n=nbytes)
        assert (from_device(acl, ptr, nbytes) == 0x5A).all()
        acl.util.ptr_to_numpy(pinned, (nbytes,), 2)[:] = 0xC3
        assert acl.rt.memcpy_async(ptr, nbytes, pinned, nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE, stream) == 0
        assert acl.rt.synchronize_stream(stream) == 0
        assert b.ev("bool((get(shared, n) == 0xC3).all())", n=nbytes)
        # a device-to-device copy by the importer, from the shared buffer into its own
        b.do("""
            mine, ret = acl.rt.malloc(n, 0); ok(ret)
            ok(acl.rt.memcpy_async(mine, n, shared, n, 3, s))
            ok(acl.rt.synchronize_stream(s))
            assert (get(mine, n) == 0xC3).all()
            ok(acl.rt.ipc_mem_close(key))
        """)
    assert acl.rt.ipc_mem_close(key) == 0
    assert acl.rt.free(ptr) == 0
    assert acl.rt.free_host(pinned) == 0
    assert acl.rt.destroy_stream(stream) == 0


def test_importer_close_comes_after_the_kernel_it_launched_before(acl, board):
    """10_ipc_memory_withpid: the importer launches a kernel that reads the shared memory and
    closes it at once, with no synchronisation between.  On an NPU the short kernel is done
    by then; mdev's close lets the launches this process made end first (for
    LAUNCH_GRACE_MS at most), so a kernel that starts late still reads the memory."""
    nbytes = 2 * MiB
    _, key, data = exported(acl, nbytes)
    with peer_on(board, 0) as b:
        b.do("""
            import hashlib
            from mdev.kernel import kernel
            @kernel(vectorized=True)
            def late_copy(ctx, src, dst, n):
                time.sleep(0.1)     # a busy host: the close is sent before the kernel reads
                ctx.gm(dst, np.uint8, n)[:] = ctx.gm(src, np.uint8, n)
            shared, ret = acl.rt.ipc_mem_import_by_key(key, 0); ok(ret)
            mine, ret = acl.rt.malloc(n, 0); ok(ret)
            s, ret = acl.rt.create_stream(); ok(ret)
            ok(late_copy[1, s](shared, mine, n))
            ok(acl.rt.ipc_mem_close(key))
            ok(acl.rt.synchronize_stream(s), "the kernel launched before the close")
        """, key=key, n=nbytes)
        assert b.ev("hashlib.sha256(get(mine, n)).hexdigest()", n=nbytes) == hashlib.sha256(data).hexdigest()
    assert acl.rt.ipc_mem_close(key) == 0


def test_exporter_free_keeps_memory_alive_until_importers_close(acl, board):
    with peer_on(board, 0) as b:       # (its set_device reserves the AI Core stacks: before we count)
        assert acl.rt.set_device(0) == 0
        before = hbm_free(acl)
        nbytes = 8 * MiB
        ptr, key, data = exported(acl, nbytes)
        assert hbm_free(acl) == before - 10 * MiB          # 8 MiB + 32 on 2 MiB pages
        b.do("shared, ret = acl.rt.ipc_mem_import_by_key(key, 0); ok(ret)", key=key)
        assert acl.rt.free(ptr) == 0                     # the exporter lets go first
        assert acl.rt.memset(ptr, 16, 0, 16) == E_PARAM  # gone for the exporter ...
        assert hbm_free(acl) == before - 10 * MiB        # ... but still allocated on the device
        assert b.ev("get(shared, n).tobytes() == data", n=nbytes, data=data.tobytes())
        b.do("put(shared, np.full(4096, 9, np.uint8))")  # and still writable by the importer
        # a late importer finds the memory freed
        with peer_on(board, 0) as c:
            assert c.ev("acl.rt.ipc_mem_import_by_key(key, 0)", key=key)[1] == E_PARAM
        assert b.ev("acl.rt.ipc_mem_close(key)") == 0
        assert wait_until(lambda: hbm_free(acl) == before), hbm_free(acl)
    assert acl.rt.ipc_mem_close(key) == E_PARAM         # free closed the key already


def test_key_of_freed_memory_cannot_reach_a_later_allocation(acl, board):
    """Export, then free without closing: the stale key must not map whatever the device
    hands out next at the same address (here: another allocation with secret data)."""
    assert acl.rt.set_device(0) == 0
    ptr, key, _ = exported(acl, 2 * MiB)
    assert acl.rt.free(ptr) == 0
    again, _ = acl.rt.malloc(2 * MiB, 1)
    assert again == ptr                                   # the allocator reuses the hole
    to_device(acl, again, np.full(2 * MiB, 0x77, np.uint8))
    with peer_on(board, 0) as b:
        shared, ret = b.ev("acl.rt.ipc_mem_import_by_key(key, 0)", key=key)
        assert ret == E_PARAM, "a stale IPC key imported a newer allocation"
    assert acl.rt.free(again) == 0


def test_importer_killed_leaves_exporter_memory_intact(acl, board):
    assert acl.rt.set_device(0) == 0
    before = hbm_free(acl)
    ptr, key, data = exported(acl, 4 * MiB)
    b = peer_on(board, 0)
    try:
        b.do("""
            shared, ret = acl.rt.ipc_mem_import_by_key(key, 0); ok(ret)
            s, ret = acl.rt.create_stream(); ok(ret)
            ok(acl.rt.memset_async(shared, 4096, 0xEE, 4096, s)); ok(acl.rt.synchronize_stream(s))
        """, key=key)
        pid = b.pid
        assert pid in client_pids(board)
    finally:
        b.kill()
        b.close()
    assert wait_until(lambda: pid not in client_pids(board), timeout=15)
    seen = from_device(acl, ptr, data.size)
    assert (seen[:4096] == 0xEE).all() and seen[4096:].tobytes() == data[4096:].tobytes()
    to_device(acl, ptr, data)
    assert from_device(acl, ptr, data.size).tobytes() == data.tobytes()
    # a new importer can still come
    with peer_on(board, 0) as c:
        assert c.ev("acl.rt.ipc_mem_import_by_key(key, 0)", key=key)[1] == 0
        assert c.ev("get(ptr, 8).tolist()", ptr=ptr) == data[:8].tolist()
        assert c.ev("acl.rt.ipc_mem_close(key)") == 0
    assert acl.rt.ipc_mem_close(key) == 0
    assert acl.rt.free(ptr) == 0
    assert wait_until(lambda: hbm_free(acl) == before)


def test_cross_device_import_needs_peer_access(acl, board):
    ptr, key, data = exported(acl, 2 * MiB, device=0)
    with peer_on(board, 1) as b:
        # without peer access (and without the flag): refused
        assert b.ev("acl.rt.ipc_mem_import_by_key(key, 0)", key=key)[1] == E_PARAM
        assert "peer access" in b.ev("acl.get_recent_err_msg()")
        # the ENABLE_PEER_ACCESS flag enables 1 -> 0 as part of the import
        shared, ret = b.ev("acl.rt.ipc_mem_import_by_key(key, flag)", flag=PEER_FLAG)
        assert ret == 0 and shared == ptr
        assert b.ev("acl.rt.device_peer_access_status(1, 0)") == (1, 0)
        b.do("""
            s, ret = acl.rt.create_stream(); ok(ret)
            local, ret = acl.rt.malloc(n, 0); ok(ret)
            ok(acl.rt.memcpy_async(local, n, shared, n, 3, s)); ok(acl.rt.synchronize_stream(s))
            assert get(local, n).tobytes() == data
            ok(acl.rt.memset_async(local, n, 0x11, n, s))
            ok(acl.rt.memcpy_async(shared, n, local, n, 3, s)); ok(acl.rt.synchronize_stream(s))
        """, shared=shared, n=data.size, data=data.tobytes())
        assert (from_device(acl, ptr, data.size) == 0x11).all()
        assert b.ev("acl.rt.ipc_mem_close(key)") == 0
    # the other way: enable peer access first, then import with the default flag
    with peer_on(board, 2) as c:
        c.do("ok(acl.rt.device_enable_peer_access(0, 0))")
        assert c.ev("acl.rt.ipc_mem_import_by_key(key, 0)", key=key) == (ptr, 0)
        assert c.ev("acl.rt.ipc_mem_close(key)") == 0
    assert acl.rt.ipc_mem_close(key) == 0
    assert acl.rt.free(ptr) == 0


def test_cross_island_import_is_refused(islands_board, monkeypatch):
    """islands8: devices 0-3 and 4-7 are HCCS quads joined only through the host: no P2P."""
    from helpers import attached
    with attached(monkeypatch, islands_board) as acl:
        ptr, key, data = exported(acl, 2 * MiB, device=0)
        with peer_on(islands_board, 4) as far, peer_on(islands_board, 3) as near:
            assert far.ev("acl.rt.ipc_mem_import_by_key(key, 0)", key=key)[1] == E_PARAM
            assert far.ev("acl.rt.ipc_mem_import_by_key(key, flag)", flag=PEER_FLAG)[1] == E_NOT_SUPPORT
            assert far.ev("acl.rt.device_enable_peer_access(0, 0)") == E_NOT_SUPPORT
            # inside the island it works
            shared, ret = near.ev("acl.rt.ipc_mem_import_by_key(key, flag)", key=key, flag=PEER_FLAG)
            assert ret == 0
            near.do("""
                s, ret = acl.rt.create_stream(); ok(ret)
                local, ret = acl.rt.malloc(n, 0); ok(ret)
                ok(acl.rt.memcpy_async(local, n, shared, n, 3, s)); ok(acl.rt.synchronize_stream(s))
                assert get(local, n).tobytes() == data
                ok(acl.rt.ipc_mem_close(key))
            """, shared=shared, n=data.size, data=data.tobytes())
        assert acl.rt.ipc_mem_close(key) == 0
        assert acl.rt.free(ptr) == 0


def test_keys_are_long_random_and_dead_after_close(acl, board):
    assert acl.rt.set_device(0) == 0
    ptr, _ = acl.rt.malloc(8 * MiB, 1)
    keys = []
    for i in range(4):
        key, ret = acl.rt.ipc_mem_get_export_key(ptr + i * 2 * MiB, 2 * MiB, 65, NO_PID)
        assert ret == 0
        keys.append(key)
    assert len(set(keys)) == 4
    for key in keys:
        # at least 128 random bits: a key cannot be guessed from another one
        assert len(re.sub(r"[^0-9a-f]", "", key.split("-")[-1])) >= 32
    with peer_on(board, 0) as b:
        assert b.ev("acl.rt.ipc_mem_import_by_key(key, 0)[1]", key=keys[0]) == 0
        assert b.ev("acl.rt.ipc_mem_close(key)") == 0
        for key in keys:
            assert acl.rt.ipc_mem_close(key) == 0
        for key in keys:                              # closed by everyone: gone for good
            assert b.ev("acl.rt.ipc_mem_import_by_key(key, 0)[1]", key=key) == E_PARAM
            assert b.ev("acl.rt.ipc_mem_set_import_pid(key, [1])", key=key) == E_PARAM
        # a made-up key of the right shape is just as unknown
        forged = keys[0][:-8] + "00000000"
        assert b.ev("acl.rt.ipc_mem_import_by_key(key, 0)[1]", key=forged) == E_PARAM
    assert acl.rt.free(ptr) == 0


def test_key_from_another_board_is_refused(acl, board, board8):
    ptr, key, _ = exported(acl)
    with peer_on(board8, 0) as other:
        assert other.ev("acl.rt.ipc_mem_import_by_key(key, 0)", key=key)[1] == E_PARAM
        assert other.ev("acl.rt.ipc_mem_set_import_pid(key, [1])") == E_PARAM
    assert acl.rt.ipc_mem_close(key) == 0
    assert acl.rt.free(ptr) == 0


def test_importer_reset_device_lets_go(acl, board):
    """reset_device in the importer releases what it imported there, as its exit would."""
    with peer_on(board, 0) as b:
        ptr, key, _ = exported(acl, 2 * MiB)                      # 2 MiB + 32 -> 4 MiB of pages
        b.do("shared, ret = acl.rt.ipc_mem_import_by_key(key, 0); ok(ret)", key=key)
        b.do("ok(acl.rt.reset_device(0))")
        assert b.ev("acl.rt.ipc_mem_close(key)") == E_PARAM        # no longer imported
        before = hbm_free(acl)
        assert acl.rt.free(ptr) == 0
        assert hbm_free(acl) == before + 4 * MiB                  # freed at once: nobody holds it


def test_exporter_exit_closes_its_keys(acl, board):
    with peer_on(board, 1) as b:
        b.do("""
            p, ret = acl.rt.malloc(2 << 20, 1); ok(ret)
            key, ret = acl.rt.ipc_mem_get_export_key(p, 2 << 20, 65, 1); ok(ret)
        """)
        key = b.ev("key")
    assert acl.rt.set_device(1) == 0
    assert acl.rt.ipc_mem_import_by_key(key, 0)[1] == E_PARAM


# ============================================================================ IPC events
# a stream held back by a value wait on a device word, so that work queued behind it (a
# record) stays pending until the test writes the word
WAIT_WORD = """
s, ret = acl.rt.create_stream(); ok(ret)
word, ret = acl.rt.malloc(4096, 2); ok(ret)
ok(acl.rt.memset(word, 8, 0, 8))
ok(acl.rt.value_wait(word, 1, 1, s))          # ACL_STREAM_WAIT_VALUE_EQ
"""


@pytest.mark.parametrize("waiter_device", [0, 1])
def test_ipc_event_wait_on_a_record_of_another_process(acl, board, waiter_device):
    """B's stream waits for a record issued in A: same device and another device."""
    with peer_on(board, 0) as a, peer_on(board, waiter_device) as b:
        a.do(WAIT_WORD)
        a.do("""
            ev, ret = acl.rt.create_event_ex_with_flag(0x40); ok(ret)     # ACL_EVENT_IPC
            handle, ret = acl.rt.ipc_get_event_handle(ev); ok(ret)
            ok(acl.rt.record_event(ev, s))             # issued, but held behind the value wait
        """)
        handle = a.ev("handle")
        assert isinstance(handle, bytes) and len(handle) == 64
        b.do("""
            ev, ret = acl.rt.ipc_open_event_handle(handle); ok(ret)
            s, ret = acl.rt.create_stream(); ok(ret)
            buf, ret = acl.rt.malloc(4096, 2); ok(ret)
            ok(acl.rt.stream_wait_event(s, ev))        # A's record was issued before: a real wait
            ok(acl.rt.memset_async(buf, 4096, 0x42, 4096, s))
        """, handle=handle)
        import time
        time.sleep(0.2)
        assert b.ev("acl.rt.stream_query(s)") == (1, 0)          # ACL_STREAM_STATUS_NOT_READY
        assert b.ev("int(get(buf, 1)[0])") == 0
        a.do("put(word, np.array([1], np.uint64))")               # release A's stream
        b.do("ok(acl.rt.synchronize_stream(s)); assert (get(buf, 4096) == 0x42).all()")
        assert a.ev("acl.rt.synchronize_stream(s)") == 0
        assert b.ev("acl.rt.query_event_status(ev)") == (1, 0)     # ACL_EVENT_RECORDED_STATUS_COMPLETE
        assert b.ev("acl.rt.destroy_event(ev)") == 0
        assert a.ev("acl.rt.destroy_event(ev)") == 0


@pytest.mark.parametrize("consumer_device", [0, 1])
def test_ipc_event_sample_consumer_records_back(acl, board, consumer_device):
    """2_advanced_features/ipcevent: the producer records, syncs and queries its IPC event and
    exports it; the consumer opens it, waits for it on its stream, then records it on its own
    stream, syncs and queries it; the producer then sees the consumer's record -- in its
    queries, its synchronisation and a wait of its stream -- on the same device or another."""
    with peer_on(board, 0) as a, peer_on(board, consumer_device) as b:
        a.do("""
            s, ret = acl.rt.create_stream(); ok(ret)
            ev, ret = acl.rt.create_event_ex_with_flag(0x40); ok(ret)     # ACL_EVENT_IPC
            ok(acl.rt.record_event(ev, s))
            ok(acl.rt.synchronize_event(ev))
            assert acl.rt.query_event_status(ev) == (1, 0)
            handle, ret = acl.rt.ipc_get_event_handle(ev); ok(ret)
        """)
        b.do(WAIT_WORD)
        b.do("""
            ev, ret = acl.rt.ipc_open_event_handle(handle); ok(ret)
            mine, ret = acl.rt.create_stream(); ok(ret)
            ok(acl.rt.stream_wait_event(mine, ev))
            ok(acl.rt.synchronize_stream(mine))
            ok(acl.rt.record_event(ev, s))            # held behind B's value wait
        """, handle=a.ev("handle"))
        # the consumer's record is the latest: not complete anywhere until it runs
        assert a.ev("acl.rt.query_event_status(ev)") == (0, 0)          # ACL_EVENT_RECORDED_STATUS_NOT_READY
        assert b.ev("acl.rt.query_event_status(ev)") == (0, 0)
        assert a.ev("acl.rt.synchronize_event_with_timeout(ev, 200)") == 507047   # ACL_ERROR_RT_EVENT_SYNC_TIMEOUT
        a.do("""
            buf, ret = acl.rt.malloc(4096, 2); ok(ret)
            ok(acl.rt.stream_wait_event(s, ev))       # A's stream waits for B's record
            ok(acl.rt.memset_async(buf, 4096, 0x5A, 4096, s))
        """)
        import time
        time.sleep(0.2)
        assert a.ev("acl.rt.stream_query(s)") == (1, 0)                 # ACL_STREAM_STATUS_NOT_READY
        b.do("put(word, np.array([1], np.uint64))")                     # B's stream runs its record
        b.do("ok(acl.rt.synchronize_event(ev)); assert acl.rt.query_event_status(ev) == (1, 0)")
        a.do("""
            ok(acl.rt.synchronize_event(ev))
            assert acl.rt.query_event_status(ev) == (1, 0)
            ok(acl.rt.synchronize_stream(s))
            assert (get(buf, 4096) == 0x5A).all()
        """)
        assert b.ev("acl.rt.destroy_event(ev)") == 0
        assert a.ev("acl.rt.destroy_event(ev)") == 0
        assert a.ev("acl.rt.record_event(ev, s)") == E_PARAM       # destroyed: not a live event


def test_ipc_event_wait_before_any_record_is_a_noop(acl, board):
    """Snapshot rule: a wait issued before the exporter's first record does not wait."""
    with peer_on(board, 0) as a, peer_on(board, 0) as b:
        a.do("""
            ev, ret = acl.rt.create_event_ex_with_flag(0x40); ok(ret)
            handle, ret = acl.rt.ipc_get_event_handle(ev); ok(ret)
        """)
        b.do("""
            ev, ret = acl.rt.ipc_open_event_handle(handle); ok(ret)
            s, ret = acl.rt.create_stream(); ok(ret)
            ok(acl.rt.stream_wait_event(s, ev))
            ok(acl.rt.synchronize_stream_with_timeout(s, 5000))
        """, handle=a.ev("handle"))


def test_ipc_event_handle_rules(acl, board):
    assert acl.rt.set_device(0) == 0
    plain, _ = acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC)
    legacy, _ = acl.rt.create_event()
    assert acl.rt.ipc_get_event_handle(plain)[1] == E_PARAM
    assert acl.rt.ipc_get_event_handle(legacy)[1] == E_PARAM
    assert acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_IPC | acl.ACL_EVENT_SYNC)[1] == E_PARAM
    ipc_ev, _ = acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_IPC)
    h1, ret = acl.rt.ipc_get_event_handle(ipc_ev)
    assert ret == 0 and acl.rt.ipc_get_event_handle(ipc_ev) == (h1, 0)     # one handle per event
    assert acl.rt.event_elapsed_time(ipc_ev, ipc_ev)[1] != 0               # IPC events carry no time
    with peer_on(board, 0) as b:
        assert b.ev("acl.rt.ipc_open_event_handle(b'mdev-event-' + b'0' * 40)")[1] == E_PARAM
        assert b.ev("acl.rt.ipc_open_event_handle(h)[1]", h=h1) == 0
    for ev in (plain, legacy, ipc_ev):
        assert acl.rt.destroy_event(ev) == 0


# ============================================================================ IPC notify
@pytest.mark.parametrize("importer_device", [0, 1])
def test_ipc_notify_importer_records_creator_waits(acl, board, importer_device):
    with peer_on(board, 0) as a, peer_on(board, importer_device) as b:
        a.do("""
            n, ret = acl.rt.create_notify(0); ok(ret)
            key, ret = acl.rt.notify_get_export_key(n, 65, 0); ok(ret)
            ok(acl.rt.notify_set_import_pid(n, [pid]))
            s, ret = acl.rt.create_stream(); ok(ret)
            buf, ret = acl.rt.malloc(4096, 2); ok(ret)
            ok(acl.rt.wait_and_reset_notify(n, s, 0))     # the creator waits ...
            ok(acl.rt.memset_async(buf, 4096, 0x33, 4096, s))
        """, pid=b.pid)
        key = a.ev("key")
        assert isinstance(key, str) and 32 <= len(key) < 65
        import time
        time.sleep(0.2)
        assert a.ev("acl.rt.stream_query(s)") == (1, 0)
        flag = 0 if importer_device == 0 else NOTIFY_PEER_FLAG
        b.do("""
            n, ret = acl.rt.notify_import_by_key(key, flag); ok(ret)
            s, ret = acl.rt.create_stream(); ok(ret)
            ok(acl.rt.record_notify(n, s))                # ... for the importer's record
            ok(acl.rt.synchronize_stream(s))
        """, key=key, flag=flag)
        a.do("ok(acl.rt.synchronize_stream_with_timeout(s, 10000)); assert (get(buf, 4096) == 0x33).all()")
        # the importer may not wait: the creator owns the notify
        assert b.ev("acl.rt.wait_and_reset_notify(n, s, 0)") == E_PARAM
        assert b.ev("acl.rt.destroy_notify(n)") == 0
        assert a.ev("acl.rt.destroy_notify(n)") == 0


def test_ipc_notify_imported_without_the_peer_flag_needs_peer_access(acl, board):
    with peer_on(board, 0) as a, peer_on(board, 3) as b:
        a.do("""
            n, ret = acl.rt.create_notify(0); ok(ret)
            key, ret = acl.rt.notify_get_export_key(n, 65, 2); ok(ret)
        """)
        b.do("""
            n, ret = acl.rt.notify_import_by_key(key, 0); ok(ret)
            s, ret = acl.rt.create_stream(); ok(ret)
        """, key=a.ev("key"))
        assert b.ev("acl.rt.record_notify(n, s)") == E_PARAM
        b.do("ok(acl.rt.device_enable_peer_access(0, 0)); ok(acl.rt.record_notify(n, s)); ok(acl.rt.synchronize_stream(s))")
        a.do("""
            s, ret = acl.rt.create_stream(); ok(ret)
            ok(acl.rt.wait_and_reset_notify(n, s, 10)); ok(acl.rt.synchronize_stream(s))
        """)


def test_ipc_notify_pid_validation(acl, board):
    with peer_on(board, 0) as a, peer_on(board, 0) as b:
        a.do("""
            n, ret = acl.rt.create_notify(0); ok(ret)
            key, ret = acl.rt.notify_get_export_key(n, 65, 0); ok(ret)
            n2, ret = acl.rt.create_notify(0); ok(ret)
            key2, ret = acl.rt.notify_get_export_key(n2, 65, flag); ok(ret)
        """, flag=NOTIFY_NO_PID)
        key, key2 = a.ev("key"), a.ev("key2")
        assert b.ev("acl.rt.notify_import_by_key(key, 0)[1]", key=key) == E_NO_PERMISSION
        assert b.ev("acl.rt.notify_import_by_key(key2, 0)[1]", key2=key2) == 0       # no list needed
        a.do("ok(acl.rt.notify_set_import_pid(n, [pid]))", pid=b.pid)
        assert b.ev("acl.rt.notify_import_by_key(key, 0)[1]") == 0
        # IPC memory's "disable" bit (0x1) is not the notify one (0x2)
        assert a.ev("acl.rt.notify_get_export_key(n2, 65, 0x1)[1]") == E_INVALID
        assert a.ev("acl.rt.notify_get_export_key(n, 64, 0)[1]") == E_INVALID


def test_ipc_notify_key_dead_after_destroy(acl, board):
    with peer_on(board, 0) as a, peer_on(board, 0) as b:
        a.do("""
            n, ret = acl.rt.create_notify(0); ok(ret)
            key, ret = acl.rt.notify_get_export_key(n, 65, 2); ok(ret)
            ok(acl.rt.destroy_notify(n))
        """)
        assert b.ev("acl.rt.notify_import_by_key(key, 0)[1]", key=a.ev("key")) == E_PARAM
        assert b.ev("acl.rt.notify_import_by_key('mdev-notify-' + '0' * 40, 0)[1]") == E_PARAM


def test_ipc_notify_cross_island_needs_p2p(islands_board):
    with peer_on(islands_board, 0) as a, peer_on(islands_board, 5) as b:
        a.do("""
            n, ret = acl.rt.create_notify(0); ok(ret)
            key, ret = acl.rt.notify_get_export_key(n, 65, 2); ok(ret)
        """)
        assert b.ev("acl.rt.notify_import_by_key(key, flag)[1]", key=a.ev("key"),
                    flag=NOTIFY_PEER_FLAG) == E_NOT_SUPPORT
