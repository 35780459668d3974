"""The sanitizer (MDEV_SANITIZE): each checker finds a seeded bug and stays silent on the
correct version of the same program.

Every test runs the same program twice -- ``buggy`` and ``correct`` differ by the one
line that carries the bug -- under ``mdev.sanitizer.enable`` in this process, and looks
at the reports ``disable`` returns.  The last tests run programs under ``mdev run
--sanitize`` and MDEV_SANITIZE, as users do.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from async_util import device_buffer, ok, out, pinned
from random_tasks import UNIFORM, para, task, uniform
from mdev import sanitizer
from mdev.kernel import kernel
from mdev.runtime.devices.lifecycle import detach

N = 4096
BOTH = pytest.mark.parametrize("buggy", [True, False], ids=["buggy", "correct"])


sanitized = sanitizer.checking


def kinds(reports) -> list[tuple[str, str]]:
    return [(r.checker, r.kind) for r in reports]


def text(reports) -> str:
    return "\n".join("\n".join(r.lines) for r in reports)


def streams(acl, k: int = 2) -> list[int]:
    return [out(acl, acl.rt.create_stream()) for _ in range(k)]


D2D, D2H, H2D = 3, 2, 1    # ACL_MEMCPY_* kinds


# ---------------------------------------------------------------------------- memcheck
@BOTH
def test_memcheck_out_of_bounds_copy_names_call_stream_allocation_offset(acl, buggy):
    ok(acl, acl.rt.set_device(0))
    (s,) = streams(acl, 1)
    src, dst = device_buffer(acl, N), device_buffer(acl, N)
    with sanitized("memcheck") as found:
        ret = acl.rt.memcpy_async(dst + 1024, N, src, N if buggy else N - 1024, D2D, s)
        ok(acl, acl.rt.synchronize_stream(s))
    if not buggy:
        ok(acl, ret)
        assert found == []
        return
    assert ret == acl.ACL_ERROR_RT_PARAM_INVALID
    assert kinds(found) == [("memcheck", "out of bounds")]
    msg = text(found)
    assert "memcpy_async" in msg and f"stream {s:#x}" in msg and "device 0" in msg
    assert f"offset 1024 of allocation {dst:#x}" in msg and "overrun it by 1024 bytes" in msg
    assert "test_sanitizer.py" in msg          # the user's line, and the allocation's


@BOTH
def test_memcheck_use_after_free_and_double_free(acl, buggy):
    ok(acl, acl.rt.set_device(0))
    buf = device_buffer(acl, N)
    host = np.zeros(16, np.uint8)
    with sanitized("memcheck") as found:
        if buggy:
            ok(acl, acl.rt.free(buf))
        ret = acl.rt.memcpy(host.ctypes.data, 16, buf + 32, 16, D2H)
        last = acl.rt.free(buf)
    if buggy:
        assert ret == last == acl.ACL_ERROR_RT_PARAM_INVALID
        assert kinds(found) == [("memcheck", "use after free"), ("memcheck", "double free")]
        assert f"offset 32 of allocation {buf:#x}" in found[0].lines[0] and "freed at" in found[0].lines[0]
        assert "already freed at" in found[1].lines[0]
    else:
        ok(acl, ret), ok(acl, last)
        assert found == []


def test_memcheck_free_inside_an_allocation(acl):
    ok(acl, acl.rt.set_device(0))
    buf = device_buffer(acl, N)
    with sanitized("memcheck") as found:
        assert acl.rt.free(buf + 64) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert kinds(found) == [("memcheck", "invalid free")] and "offset 64 inside allocation" in found[0].lines[0]
    ok(acl, acl.rt.free(buf))


@BOTH
def test_memcheck_leaks_at_finalize(acl, buggy):
    ok(acl, acl.rt.set_device(0))
    with sanitized("memcheck") as found:
        dev = out(acl, acl.rt.malloc(N, 0))
        host = out(acl, acl.rt.malloc_host(N))
        if not buggy:
            ok(acl, acl.rt.free(dev))
            ok(acl, acl.rt.free_host(host))
        detach()                       # finalize: releases whatever is left
    if buggy:
        assert kinds(found) == [("memcheck", "leak")] * 2
        assert "device 0 memory" in found[0].lines[0] and "pinned host memory" in found[1].lines[0]
        assert "test_sanitizer.py" in found[0].lines[0]
    else:
        assert found == []


@kernel
def scale(ctx, x, y, n):
    """y = 2 * x over n float32, one share per block."""
    per = n // ctx.block_num
    lo = ctx.block_idx * per
    xs, ys = ctx.gm(x, np.float32, n), ctx.gm(y, np.float32, n)
    ys[lo:lo + per] = 2 * xs[lo:lo + per]


@BOTH
def test_memcheck_kernel_out_of_bounds(acl, buggy):
    ok(acl, acl.rt.set_device(0))
    (s,) = streams(acl, 1)
    x, y = device_buffer(acl, N), device_buffer(acl, N)
    n = N // 4 * (2 if buggy else 1)
    with sanitized("memcheck") as found:
        ok(acl, scale[4, s](x, y, n))
        ret = acl.rt.synchronize_stream(s)
    if buggy:
        assert ret == acl.ACL_ERROR_RT_VECTOR_CORE_EXCEPTION
        assert kinds(found) == [("memcheck", "out of bounds")]
        assert "kernel scale" in found[0].lines[0] and f"{2 * N}-byte access" in found[0].lines[0]
        assert "overrun it by 4096 bytes" in found[0].lines[0] and "test_sanitizer.py" in found[0].lines[1]
    else:
        ok(acl, ret)
        assert found == []


def test_memcheck_kernel_use_after_free(acl):
    ok(acl, acl.rt.set_device(0))
    (s,) = streams(acl, 1)
    x, y = device_buffer(acl, N), device_buffer(acl, N)
    with sanitized("memcheck") as found:
        ok(acl, acl.rt.free(x))
        ok(acl, scale[1, s](x, y, 16))
        assert acl.rt.synchronize_stream(s) == acl.ACL_ERROR_RT_VECTOR_CORE_EXCEPTION
    assert kinds(found) == [("memcheck", "use after free")] and f"allocation {x:#x}" in found[0].lines[0]


# ---------------------------------------------------------------------------- racecheck
@BOTH
def test_racecheck_two_streams_ordered_by_an_event(acl, buggy):
    ok(acl, acl.rt.set_device(0))
    s1, s2 = streams(acl)
    a, b, c = (device_buffer(acl, N) for _ in range(3))
    event = out(acl, acl.rt.create_event())
    with sanitized("racecheck") as found:
        ok(acl, acl.rt.memcpy_async(b, N, a, N, D2D, s1))        # writes b
        if not buggy:
            ok(acl, acl.rt.record_event(event, s1))
            ok(acl, acl.rt.stream_wait_event(s2, event))
        ok(acl, acl.rt.memcpy_async(c, N, b, N, D2D, s2))        # reads b
        ok(acl, acl.rt.synchronize_device())
    if buggy:
        assert kinds(found) == [("racecheck", "read-after-write hazard")]
        msg = text(found)
        assert f"stream {s1:#x}" in msg and f"stream {s2:#x}" in msg and f"allocation {b:#x}" in msg
        assert "missing synchronisation" in msg
    else:
        assert found == []


@BOTH
def test_racecheck_across_devices_ordered_by_a_notify(acl, buggy):
    ok(acl, acl.rt.set_device(1))
    (s1,) = streams(acl, 1)
    notify = out(acl, acl.rt.create_notify(0))
    src1 = device_buffer(acl, N)
    ok(acl, acl.rt.set_device(0))
    (s0,) = streams(acl, 1)
    src0 = device_buffer(acl, N)
    host_ptr, host = pinned(acl, N)
    with sanitized("racecheck") as found:
        ok(acl, acl.rt.memcpy_async(host_ptr, N, src0, N, D2H, s0))      # device 0 writes the buffer
        if not buggy:
            ok(acl, acl.rt.record_notify(notify, s0))
        ok(acl, acl.rt.set_device(1))
        if not buggy:
            ok(acl, acl.rt.wait_and_reset_notify(notify, s1, 0))
        ok(acl, acl.rt.memcpy_async(host_ptr, N, src1, N, D2H, s1))      # device 1 writes it too
        ok(acl, acl.rt.synchronize_stream(s1))
        ok(acl, acl.rt.set_device(0))
        ok(acl, acl.rt.synchronize_stream(s0))
    if buggy:
        assert kinds(found) == [("racecheck", "write-after-write hazard")]
        assert "of device 0" in text(found) and "of device 1" in text(found) and "pinned host memory" in text(found)
    else:
        assert found == []
    ok(acl, acl.rt.free_host(host_ptr))


@BOTH
def test_racecheck_value_write_and_wait(acl, buggy):
    ok(acl, acl.rt.set_device(0))
    s1, s2 = streams(acl)
    a, b, c, flag = (device_buffer(acl, N) for _ in range(4))
    with sanitized("racecheck") as found:
        ok(acl, acl.rt.memcpy_async(b, N, a, N, D2D, s1))
        ok(acl, acl.rt.value_write(flag, 1, 0, s1))
        if not buggy:
            ok(acl, acl.rt.value_wait(flag, 1, acl.ACL_STREAM_WAIT_VALUE_GEQ, s2))
        ok(acl, acl.rt.memcpy_async(c, N, b, N, D2D, s2))
        ok(acl, acl.rt.synchronize_device())
    assert kinds(found) == ([("racecheck", "read-after-write hazard")] if buggy else [])


@BOTH
def test_racecheck_host_copy_needs_a_stream_sync(acl, buggy):
    ok(acl, acl.rt.set_device(0))
    (s,) = streams(acl, 1)
    a, b = device_buffer(acl, N), device_buffer(acl, N)
    host = np.zeros(N, np.uint8)
    with sanitized("racecheck") as found:
        ok(acl, acl.rt.memset_async(b, N, 7, N, s))
        if not buggy:
            ok(acl, acl.rt.synchronize_stream(s))
        ok(acl, acl.rt.memcpy(host.ctypes.data, N, b, N, D2H))          # a synchronous copy waits for no stream
        ok(acl, acl.rt.synchronize_stream(s))
    if buggy:
        assert kinds(found) == [("racecheck", "read-after-write hazard")]
        assert "memset_async" in found[0].lines[1] and "in the host process" in found[0].lines[2]
    else:
        assert found == [] and (host == 7).all()


@BOTH
def test_racecheck_kernels_on_two_streams(acl, buggy):
    """A kernel writing y races with a copy reading y; two kernels only reading x do not."""
    ok(acl, acl.rt.set_device(0))
    s1, s2, s3 = streams(acl, 3)
    x, y, z, w = (device_buffer(acl, N) for _ in range(4))
    event = out(acl, acl.rt.create_event())
    with sanitized("racecheck") as found:
        ok(acl, scale[4, s1](x, y, N // 4))           # reads x, writes y
        ok(acl, scale[4, s3](x, w, N // 4))           # reads x too: no hazard
        if not buggy:
            ok(acl, acl.rt.record_event(event, s1))
            ok(acl, acl.rt.stream_wait_event(s2, event))
        ok(acl, acl.rt.memcpy_async(z, N, y, N, D2D, s2))
        ok(acl, acl.rt.synchronize_device())
    if buggy:
        assert kinds(found) == [("racecheck", "read-after-write hazard")]
        assert "kernel" in found[0].lines[1] and "memcpy_async" in found[0].lines[2]
    else:
        assert found == []


def test_racecheck_reports_a_loop_once(acl):
    ok(acl, acl.rt.set_device(0))
    s1, s2 = streams(acl)
    a, b = device_buffer(acl, N), device_buffer(acl, N)
    with sanitized("racecheck") as found:
        for _ in range(50):
            ok(acl, acl.rt.memset_async(a, N, 1, N, s1))
            ok(acl, acl.rt.memcpy_async(b, N, a, N, D2D, s2))
        ok(acl, acl.rt.synchronize_device())
    assert len(found) == 2 and {k for _, k in kinds(found)} == {"read-after-write hazard", "write-after-read hazard"}
    assert found[0].count > 1


def _captured(acl, s1, s2, a, b, c, fork_late: bool, inner: str = "copy") -> int:
    """A graph: s1 fills a, s2 copies a to b (or a kernel scales it into b) between fork and
    join, s1 copies b to c after the join.  With ``fork_late`` s1 fills a after the fork,
    beside s2's task."""
    e1, e2 = (out(acl, acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC)) for _ in range(2))
    ok(acl, acl.mdl.ri_capture_begin(s1, acl.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL))
    if not fork_late:
        ok(acl, acl.rt.memset_async(a, N, 5, N, s1))
    ok(acl, acl.rt.record_event(e1, s1))
    ok(acl, acl.rt.stream_wait_event(s2, e1))
    if fork_late:
        ok(acl, acl.rt.memset_async(a, N, 5, N, s1))
    if inner == "copy":
        ok(acl, acl.rt.memcpy_async(b, N, a, N, D2D, s2))
    else:
        ok(acl, scale[2, s2](a, b, N // 4))
    ok(acl, acl.rt.record_event(e2, s2))
    ok(acl, acl.rt.stream_wait_event(s1, e2))
    ok(acl, acl.rt.memcpy_async(c, N, b, N, D2D, s1))
    return out(acl, acl.mdl.ri_capture_end(s1))


@BOTH
@pytest.mark.parametrize("inner", ["copy", "kernel"])
def test_racecheck_inside_a_graph_replay(acl, buggy, inner):
    ok(acl, acl.rt.set_device(0))
    s1, s2 = streams(acl)
    a, b, c = (device_buffer(acl, N) for _ in range(3))
    model = _captured(acl, s1, s2, a, b, c, fork_late=buggy, inner=inner)
    with sanitized("racecheck") as found:
        for _ in range(3):
            ok(acl, acl.mdl.ri_execute_async(model, s1))
        ok(acl, acl.rt.synchronize_stream(s1))
    if buggy:
        assert kinds(found) == [("racecheck", "write-after-read hazard")] or \
            kinds(found) == [("racecheck", "read-after-write hazard")]
        assert f"allocation {a:#x}" in found[0].lines[0] and f"of model {model:#x}" in text(found)
        assert "ri_execute_async" in text(found)
    else:
        assert found == []
    ok(acl, acl.mdl.ri_destroy(model))


@BOTH
def test_racecheck_between_a_graph_replay_and_eager_work(acl, buggy):
    ok(acl, acl.rt.set_device(0))
    s1, s2, s3 = streams(acl, 3)
    a, b, c, d = (device_buffer(acl, N) for _ in range(4))
    model = _captured(acl, s1, s2, a, b, c, fork_late=False)
    with sanitized("racecheck") as found:
        ok(acl, acl.mdl.ri_execute_async(model, s1))      # the replay writes c last
        if not buggy:
            ok(acl, acl.rt.synchronize_stream(s1))
        ok(acl, acl.rt.memcpy_async(d, N, c, N, D2D, s3))
        ok(acl, acl.rt.synchronize_device())
    if buggy:
        assert kinds(found) == [("racecheck", "read-after-write hazard")]
        assert f"allocation {c:#x}" in found[0].lines[0] and "memcpy_async" in found[0].lines[2]
    else:
        assert found == []
    ok(acl, acl.mdl.ri_destroy(model))


# ---------------------------------------------------------------------------- initcheck
@BOTH
def test_initcheck_copy_of_never_written_memory(acl, buggy):
    ok(acl, acl.rt.set_device(0))
    (s,) = streams(acl, 1)
    with sanitized("initcheck") as found:
        src = out(acl, acl.rt.malloc(N, 0))
        dst = out(acl, acl.rt.malloc(N, 0))
        ok(acl, acl.rt.memset_async(src, N, 3, N // 2 if buggy else N, s))
        ok(acl, acl.rt.memcpy_async(dst, N, src, N, D2D, s))
        ok(acl, acl.rt.synchronize_stream(s))
    if buggy:
        assert kinds(found) == [("initcheck", "uninitialised read")]
        assert f"{N // 2} of {N} bytes read at offset {N // 2} of allocation {src:#x}" in found[0].lines[0]
    else:
        assert found == []
    ok(acl, acl.rt.free(src)), ok(acl, acl.rt.free(dst))


@BOTH
def test_initcheck_kernel_input_never_written(acl, buggy):
    """The kernel's output (y) is fresh memory in both versions: writing it is fine."""
    ok(acl, acl.rt.set_device(0))
    (s,) = streams(acl, 1)
    with sanitized("initcheck") as found:
        x = out(acl, acl.rt.malloc(N, 0))
        y = out(acl, acl.rt.malloc(N, 0))
        if not buggy:
            ok(acl, acl.rt.memset(x, N, 1, N))
        ok(acl, scale[2, s](x, y, N // 4))
        ok(acl, acl.rt.synchronize_stream(s))
    if buggy:
        assert kinds(found) == [("initcheck", "uninitialised read")] and f"allocation {x:#x}" in found[0].lines[0]
    else:
        assert found == []
    ok(acl, acl.rt.free(x)), ok(acl, acl.rt.free(y))


@BOTH
def test_initcheck_waits_for_the_kernel_that_writes(acl, buggy):
    """A copy right behind a kernel reads what the kernel wrote, though the kernel's report
    of its writes arrives after the copy was submitted."""
    ok(acl, acl.rt.set_device(0))
    (s,) = streams(acl, 1)
    with sanitized("initcheck") as found:
        x, y, z, w = (out(acl, acl.rt.malloc(N, 0)) for _ in range(4))
        ok(acl, acl.rt.memset(x, N, 1, N))
        ok(acl, scale[2, s](x, y, N // 4))
        ok(acl, acl.rt.memcpy_async(z, N, w if buggy else y, N, D2D, s))
        ok(acl, acl.rt.synchronize_stream(s))
    if buggy:
        assert kinds(found) == [("initcheck", "uninitialised read")] and f"allocation {w:#x}" in found[0].lines[0]
    else:
        assert found == []
    for p in (x, y, z, w):
        ok(acl, acl.rt.free(p))


# ---------------------------------------------------------------------------- synccheck
@BOTH
def test_synccheck_deadlock_between_streams(acl, buggy):
    ok(acl, acl.rt.set_device(0))
    s1, s2 = streams(acl)
    n1, n2 = out(acl, acl.rt.create_notify(0)), out(acl, acl.rt.create_notify(0))
    with sanitized("synccheck") as found:
        if buggy:     # each stream waits for what the other records only after its own wait
            ok(acl, acl.rt.wait_and_reset_notify(n1, s1, 0))
            ok(acl, acl.rt.record_notify(n2, s1))
            ok(acl, acl.rt.wait_and_reset_notify(n2, s2, 0))
            ok(acl, acl.rt.record_notify(n1, s2))
        else:
            ok(acl, acl.rt.record_notify(n2, s1))
            ok(acl, acl.rt.wait_and_reset_notify(n1, s1, 0))
            ok(acl, acl.rt.wait_and_reset_notify(n2, s2, 0))
            ok(acl, acl.rt.record_notify(n1, s2))
        ret = acl.rt.synchronize_stream_with_timeout(s1, 300)
    if buggy:
        assert ret == acl.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
        assert kinds(found) == [("synccheck", "deadlock")]
        msg = text(found)
        assert f"stream {s1:#x}" in msg and f"stream {s2:#x}" in msg and "wait on each other" in msg
        for s in (s1, s2):
            ok(acl, acl.rt.stream_abort(s))
    else:
        ok(acl, ret)
        ok(acl, acl.rt.synchronize_stream(s2))
        assert found == []


def test_synccheck_names_a_deadlock_while_the_host_is_blocked(acl, monkeypatch):
    """A synchronisation without a timeout never returns from a deadlock: synccheck reports it
    after MDEV_SANITIZE_GRACE seconds, while the host thread is still blocked."""
    import threading
    import time
    monkeypatch.setenv("MDEV_SANITIZE_GRACE", "0.2")
    ok(acl, acl.rt.set_device(0))
    s1, s2 = streams(acl)
    n1, n2 = out(acl, acl.rt.create_notify(0)), out(acl, acl.rt.create_notify(0))
    with sanitized("synccheck") as found:
        ok(acl, acl.rt.wait_and_reset_notify(n1, s1, 0))
        ok(acl, acl.rt.record_notify(n2, s1))
        ok(acl, acl.rt.wait_and_reset_notify(n2, s2, 0))
        ok(acl, acl.rt.record_notify(n1, s2))
        seen = []

        def watchdog():      # a daemon: it cannot be the one to release the wait
            deadline = time.monotonic() + 10
            while not sanitizer.reports() and time.monotonic() < deadline:
                time.sleep(0.02)
            seen.extend(kinds(sanitizer.reports()))
            acl.rt.set_device(0)                     # the context is per thread
            for s in (s1, s2):
                acl.rt.stream_abort(s)

        threading.Thread(target=watchdog, daemon=True).start()
        ret = acl.rt.synchronize_stream(s1)          # blocks until the watchdog aborts
    assert seen == [("synccheck", "deadlock")]       # named while this thread was blocked
    assert ret != acl.ACL_SUCCESS and len(found) == 1


@BOTH
def test_synccheck_notify_waited_twice(acl, buggy):
    ok(acl, acl.rt.set_device(0))
    s1, s2 = streams(acl)
    notify = out(acl, acl.rt.create_notify(0))
    with sanitized("synccheck") as found:
        ok(acl, acl.rt.record_notify(notify, s1))
        ok(acl, acl.rt.wait_and_reset_notify(notify, s2, 0))
        if buggy:     # a second wait for the same record
            ok(acl, acl.rt.wait_and_reset_notify(notify, s2, 0))
        ret = acl.rt.synchronize_stream_with_timeout(s2, 300)
    if buggy:
        assert ret == acl.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
        assert kinds(found) == [("synccheck", "wait that can never end")]
        assert "waited 2 time(s) and recorded 1 time(s)" in text(found)
        ok(acl, acl.rt.stream_abort(s2))
    else:
        ok(acl, ret)
        assert found == []


def test_synccheck_value_never_written(acl):
    ok(acl, acl.rt.set_device(0))
    (s,) = streams(acl, 1)
    flag = device_buffer(acl, 64)
    with sanitized("synccheck") as found:
        ok(acl, acl.rt.value_wait(flag, 5, acl.ACL_STREAM_WAIT_VALUE_EQ, s))
        assert acl.rt.synchronize_stream_with_timeout(s, 200) == acl.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
        ok(acl, acl.rt.memset(flag, 8, 0, 8))           # the host's write does not make it 5 either
        ok(acl, acl.rt.stream_abort(s))
    assert kinds(found) == [("synccheck", "wait that can never end")]
    assert "no submitted task writes a value that satisfies it" in text(found)


def test_synccheck_names_a_wait_the_device_gave_up_on(acl, monkeypatch):
    """The device's wait timeout (set_op_wait_timeout) ends the wait before the grace period:
    the failed synchronisation names it all the same."""
    monkeypatch.setenv("MDEV_SANITIZE_GRACE", "60")
    ok(acl, acl.rt.set_device(0))
    ok(acl, acl.rt.set_op_wait_timeout(1))
    (s,) = streams(acl, 1)
    flag = device_buffer(acl, 64)
    try:
        with sanitized("synccheck") as found:
            ok(acl, acl.rt.value_wait(flag, 1, acl.ACL_STREAM_WAIT_VALUE_EQ, s))
            assert acl.rt.synchronize_stream(s) == acl.ACL_ERROR_RT_TASK_TIMEOUT
    finally:
        ok(acl, acl.rt.set_op_wait_timeout(0))
    assert kinds(found) == [("synccheck", "wait that can never end")]


def test_synccheck_trusts_a_wait_the_device_got_past(acl):
    """A value written behind the runtime's back (here: straight into HBM) releases the real
    wait; the model follows the real device and reports nothing."""
    ok(acl, acl.rt.set_device(0))
    (s,) = streams(acl, 1)
    flag = device_buffer(acl, 64)
    with sanitized("all") as found:
        ok(acl, acl.rt.value_wait(flag, 1, acl.ACL_STREAM_WAIT_VALUE_EQ, s))
        from mdev.memory import address
        from mdev.runtime.core import RUNTIME
        offset = flag - address.device_base(0)
        RUNTIME.link(0).hbm().array[offset] = 1
        ok(acl, acl.rt.synchronize_stream(s))
    assert found == []


def test_sanitizer_keeps_results_right(acl):
    """The checks only watch: data of a correct multi-stream program is the same."""
    ok(acl, acl.rt.set_device(0))
    s1, s2 = streams(acl)
    x, y = device_buffer(acl, N), device_buffer(acl, N)
    event = out(acl, acl.rt.create_event())
    host = np.zeros(N // 4, np.float32)
    data = np.arange(N // 4, dtype=np.float32)
    with sanitized() as found:
        ok(acl, acl.rt.memcpy(x, N, data.ctypes.data, N, H2D))
        ok(acl, scale[4, s1](x, y, N // 4))
        ok(acl, acl.rt.record_event(event, s1))
        ok(acl, acl.rt.stream_wait_event(s2, event))
        ok(acl, acl.rt.memcpy_async(x, N, y, N, D2D, s2))
        ok(acl, acl.rt.synchronize_stream(s2))
        ok(acl, acl.rt.memcpy(host.ctypes.data, N, x, N, D2H))
    assert found == []
    assert (host == 2 * np.arange(N // 4)).all()


# ---------------------------------------------------------------------------- as users run it
RACY = """
    import acl
    acl.init()
    acl.rt.set_device(0)
    s1, _ = acl.rt.create_stream()
    s2, _ = acl.rt.create_stream()
    a, _ = acl.rt.malloc(4096, 0)
    b, _ = acl.rt.malloc(4096, 0)
    acl.rt.memset(a, 4096, 1, 4096)
    acl.rt.memcpy_async(b, 4096, a, 4096, 3, s1)
    {sync}
    acl.rt.memcpy_async(a, 4096, b, 4096, 3, s2)
    acl.rt.synchronize_device()
    acl.rt.free(a)
    acl.rt.free(b)
    acl.rt.destroy_stream(s1)
    acl.rt.destroy_stream(s2)
    acl.rt.reset_device(0)
    acl.finalize()
"""


@BOTH
def test_mdev_run_sanitize(board, tmp_path, buggy):
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(RACY.format(sync="" if buggy else "acl.rt.synchronize_stream(s1)")))
    env = dict(os.environ, MDEV_AUTOSTART="0")
    env.pop("MDEV_SANITIZE_LOG", None)
    proc = subprocess.run([sys.executable, "-m", "mdev", "run", "--board", board, "--sanitize", "all", str(prog)],
                          env=env, capture_output=True, text=True, timeout=120)
    if buggy:
        assert proc.returncode == 1, proc.stderr
        assert "mdev racecheck" in proc.stderr and "read-after-write hazard" in proc.stderr
        assert "prog.py:10" in proc.stderr and "prog.py:12" in proc.stderr and "ERROR SUMMARY: 2 error(s)" in proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr
        assert "ERROR SUMMARY: 0 error(s)" in proc.stderr


def test_mdev_run_sanitize_counts_reports_of_the_programs_own_blocks(board):
    """The README's example: sanitizer_race.py enables and disables racecheck around each
    round itself; under ``mdev run --sanitize`` the process's checking goes on, so the
    racy round's report reaches the summary and the run exits 1 as the README says."""
    example = Path(__file__).resolve().parent.parent / "examples" / "sanitizer_race.py"
    env = dict(os.environ, MDEV_AUTOSTART="0")
    env.pop("MDEV_SANITIZE_LOG", None)
    proc = subprocess.run([sys.executable, "-m", "mdev", "run", "--board", board, "--sanitize", "racecheck",
                           str(example)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "without the event: data" in proc.stdout and "1 racecheck report(s)" in proc.stdout
    assert "with the event: data right, 0 racecheck report(s)" in proc.stdout
    assert "ERROR SUMMARY: 1 error(s) (1 racecheck)" in proc.stderr


def test_mdev_run_rejects_an_unknown_check(board, tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text("print('never runs')\n")
    proc = subprocess.run([sys.executable, "-m", "mdev", "run", "--board", board, "--sanitize", "racechek",
                           str(prog)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "unknown sanitizer check" in proc.stderr and "never runs" not in proc.stdout


def test_racecheck_event_recorded_before_the_sanitizer_started(acl):
    """Waits name records by their number since the event was created, not since enable()."""
    ok(acl, acl.rt.set_device(0))
    s1, s2 = streams(acl)
    a, b = device_buffer(acl, N), device_buffer(acl, N)
    event = out(acl, acl.rt.create_event())
    for _ in range(5):
        ok(acl, acl.rt.record_event(event, s1))
    with sanitized("racecheck") as found:
        ok(acl, acl.rt.memset_async(a, N, 1, N, s1))
        ok(acl, acl.rt.record_event(event, s1))
        ok(acl, acl.rt.stream_wait_event(s2, event))
        ok(acl, acl.rt.memcpy_async(b, N, a, N, D2D, s2))
        ok(acl, acl.rt.synchronize_device())
    assert found == []


# ---------------------------------------------------------------------------- racecheck vs an oracle
BUFFERS, STREAMS, EVENTS = 4, 3, 2
program_ops = st_ops = None     # built lazily: hypothesis is a test-only dependency


def _program_strategy():
    from hypothesis import strategies as st
    s, b, e = (st.integers(0, n - 1) for n in (STREAMS, BUFFERS, EVENTS))
    two = st.tuples(b, b).filter(lambda p: p[0] != p[1])
    return st.lists(st.one_of(
        st.tuples(st.just("memset"), s, b),
        st.tuples(st.just("copy"), s, two),
        st.tuples(st.just("kernel"), s, two),
        st.tuples(st.just("record"), s, e),
        st.tuples(st.just("wait"), s, e),
        st.tuples(st.just("sync"), s),
        st.tuples(st.just("host_copy"), two),
    ), max_size=20)


def _oracle(program) -> set[int]:
    """Buffers two unordered accesses (one a write) touch: plain vector clocks, the
    runtime's documented ordering rules, written independently of mdev.sanitizer."""
    host = {"h": 0}
    clocks = [dict() for _ in range(STREAMS)]
    events: dict[int, dict] = {}
    accesses = []                                   # (buffer, write, owner, epoch, clock)

    def touch(owner, clock, reads, writes):
        for buf, write in [(r, False) for r in reads] + [(w, True) for w in writes]:
            accesses.append((buf, write, owner, clock[owner], dict(clock)))

    for op in program:
        if op[0] in ("memset", "copy", "kernel", "record", "wait"):
            c = clocks[op[1]]
            for k, v in host.items():
                c[k] = max(c.get(k, 0), v)
            if op[0] == "wait":
                for k, v in events.get(op[2], {}).items():
                    c[k] = max(c.get(k, 0), v)
            c[op[1]] = c.get(op[1], 0) + 1
            if op[0] == "record":
                events[op[2]] = dict(c)
            elif op[0] == "memset":
                touch(op[1], c, [], [op[2]])
            elif op[0] in ("copy", "kernel"):
                dst, src = op[2]
                touch(op[1], c, [src], [dst])
        elif op[0] == "sync":
            for k, v in clocks[op[1]].items():
                host[k] = max(host.get(k, 0), v)
        else:
            host["h"] += 1
            dst, src = op[1]
            touch("h", host, [src], [dst])
    racy = set()
    for i, (b1, w1, o1, e1, c1) in enumerate(accesses):
        for b2, w2, o2, e2, c2 in accesses[i + 1:]:
            if b1 == b2 and (w1 or w2) and o1 != o2 and c2.get(o1, 0) < e1 and c1.get(o2, 0) < e2:
                racy.add(b1)
    return racy


def test_racecheck_agrees_with_a_happens_before_oracle(acl):
    """Random programs of copies, memsets, kernels, event records/waits, stream syncs and
    host copies over 3 streams: the buffers racecheck names are exactly the ones an
    independent vector-clock oracle finds racing, and no other check speaks."""
    from hypothesis import HealthCheck, given, settings

    ok(acl, acl.rt.set_device(0))
    ss = streams(acl, STREAMS)
    bufs = [device_buffer(acl, N) for _ in range(BUFFERS)]
    evs = [out(acl, acl.rt.create_event()) for _ in range(EVENTS)]
    names = {buf: i for i, buf in enumerate(bufs)}

    @settings(max_examples=int(os.environ.get("MDEV_PROPERTY_EXAMPLES", "60")), deadline=None,
              derandomize=os.environ.get("MDEV_PROPERTY_RANDOM") != "1",
              suppress_health_check=list(HealthCheck))
    @given(_program_strategy())
    def check(program):
        with sanitized() as found:
            for op in program:
                kind = op[0]
                if kind == "memset":
                    ok(acl, acl.rt.memset_async(bufs[op[2]], N, 1, N, ss[op[1]]))
                elif kind == "copy":
                    ok(acl, acl.rt.memcpy_async(bufs[op[2][0]], N, bufs[op[2][1]], N, D2D, ss[op[1]]))
                elif kind == "kernel":
                    ok(acl, scale[2, ss[op[1]]](bufs[op[2][1]], bufs[op[2][0]], N // 4))
                elif kind == "record":
                    ok(acl, acl.rt.record_event(evs[op[2]], ss[op[1]]))
                elif kind == "wait":
                    ok(acl, acl.rt.stream_wait_event(ss[op[1]], evs[op[2]]))
                elif kind == "sync":
                    ok(acl, acl.rt.synchronize_stream(ss[op[1]]))
                else:
                    ok(acl, acl.rt.memcpy(bufs[op[1][0]], N, bufs[op[1][1]], N, D2D))
            ok(acl, acl.rt.synchronize_device())
        assert {c for c, _ in kinds(found)} <= {"racecheck"}, text(found)
        named = {names[a] for r in found for a in bufs
                 if f"allocation {a:#x}" in r.lines[0]}
        assert named == _oracle(program), (program, text(found))

    check()


def test_a_forked_child_starts_its_own_checks(acl):
    ok(acl, acl.rt.set_device(0))
    buf = device_buffer(acl, N)
    with sanitized("memcheck") as found:
        assert acl.rt.free(buf + 8) == acl.ACL_ERROR_RT_PARAM_INVALID      # one report in the parent
        parent = sanitizer.active
        pid = os.fork()
        if pid == 0:
            fresh = sanitizer.active is not None and sanitizer.active is not parent and not sanitizer.reports()
            os._exit(0 if fresh and sanitizer.active.checks == {"memcheck"} else 1)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert kinds(found) == [("memcheck", "invalid free")]
    ok(acl, acl.rt.free(buf))


def test_synccheck_stream_waiting_for_its_own_later_write(acl):
    ok(acl, acl.rt.set_device(0))
    (s,) = streams(acl, 1)
    flag = device_buffer(acl, 64)
    with sanitized("synccheck") as found:
        ok(acl, acl.rt.value_wait(flag, 1, acl.ACL_STREAM_WAIT_VALUE_EQ, s))
        ok(acl, acl.rt.value_write(flag, 1, 0, s))          # queued behind the wait it should release
        assert acl.rt.synchronize_stream_with_timeout(s, 200) == acl.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
        ok(acl, acl.rt.stream_abort(s))
    assert kinds(found) == [("synccheck", "deadlock")]
    assert "value_write" in text(found) and "queued behind a wait" in text(found)


def test_mdev_run_sanitize_without_a_check_list(board, tmp_path):
    """``--sanitize prog.py``: the program is not taken for a list of checks."""
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(RACY.format(sync="")) + "import sys; print('args', sys.argv[1:])\n")
    proc = subprocess.run([sys.executable, "-m", "mdev", "run", "--board", board, "--sanitize", str(prog), "x"],
                          env=dict(os.environ, MDEV_AUTOSTART="0"), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "args ['x']" in proc.stdout and "mdev racecheck" in proc.stderr, proc.stderr


# ---------------------------------------------------------------------------- from an adversarial review
def test_memcheck_free_while_a_task_may_still_use_it(acl):
    ok(acl, acl.rt.set_device(0))
    (s,) = streams(acl, 1)
    a, b = device_buffer(acl, N), device_buffer(acl, N)
    with sanitized("memcheck") as found:
        ok(acl, acl.rt.memcpy_async(b, N, a, N, D2D, s))
        ok(acl, acl.rt.free(b))                               # the copy may not have run yet
        # the bug is real: when the copy ran after the free, the sync reports it lost
        assert acl.rt.synchronize_stream(s) in (acl.ACL_SUCCESS, acl.ACL_ERROR_RT_SYS_DMA)
        ok(acl, acl.rt.free(a))                               # after the sync: fine
    assert kinds(found) == [("memcheck", "free of memory in use")]
    assert f"allocation {b:#x}" in found[0].lines[0] and "memcpy_async" in found[0].lines[1]


def test_racecheck_one_graph_replayed_on_two_unordered_streams(acl):
    ok(acl, acl.rt.set_device(0))
    s1, s2, s3 = streams(acl, 3)
    a, b = device_buffer(acl, N), device_buffer(acl, N)
    ok(acl, acl.mdl.ri_capture_begin(s1, acl.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL))
    ok(acl, acl.rt.memcpy_async(b, N, a, N, D2D, s1))
    model = out(acl, acl.mdl.ri_capture_end(s1))
    with sanitized("racecheck") as found:
        ok(acl, acl.mdl.ri_execute_async(model, s2))
        ok(acl, acl.mdl.ri_execute_async(model, s3))
        ok(acl, acl.rt.synchronize_device())
    assert kinds(found) == [("racecheck", "write-after-write hazard")] and f"allocation {b:#x}" in found[0].lines[0]
    ok(acl, acl.mdl.ri_destroy(model))


def test_synccheck_a_timed_out_poll_that_later_ends_is_no_finding(acl):
    ok(acl, acl.rt.set_device(0))
    s1, s2 = streams(acl)
    flag = device_buffer(acl, 64)
    with sanitized("synccheck") as found:
        ok(acl, acl.rt.value_wait(flag, 1, acl.ACL_STREAM_WAIT_VALUE_EQ, s2))
        assert acl.rt.synchronize_stream_with_timeout(s2, 20) == acl.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
        ok(acl, acl.rt.value_write(flag, 1, 0, s1))               # released after all
        ok(acl, acl.rt.synchronize_stream(s2))
    assert found == []


def test_initcheck_goes_on_after_a_stream_with_a_queued_launch_is_destroyed(acl):
    ok(acl, acl.rt.set_device(0))
    s1, s2 = streams(acl)
    from async_util import Gate
    x, y = device_buffer(acl, N), device_buffer(acl, N)
    with sanitized("initcheck") as found:
        gate = Gate(acl, s1)
        ok(acl, scale[1, s1](x, y, 16))                          # never runs
        ok(acl, acl.rt.destroy_stream_force(s1))
        gate.open()
        src, dst = out(acl, acl.rt.malloc(N, 0)), out(acl, acl.rt.malloc(N, 0))
        ok(acl, acl.rt.memcpy_async(dst, N, src, N, D2D, s2))    # src was never written
        ok(acl, acl.rt.synchronize_stream(s2))
    assert kinds(found) == [("initcheck", "uninitialised read")] and f"allocation {src:#x}" in found[0].lines[0]
    ok(acl, acl.rt.free(src)), ok(acl, acl.rt.free(dst))


@kernel
def fill_half(ctx, y, n, which):
    """Whole-buffer view, one half written: the other half is neither read nor written."""
    ys = ctx.gm(y, np.float32, n)
    h = n // 2
    ys[which * h:(which + 1) * h] = which + 1


@kernel
def count_and_store(ctx, counter, result):
    ctx.atomic_add(counter, 1)                       # a flag word
    ctx.gm(result, np.float64, 1)[0] = 42.0          # data, though as small as a flag


@kernel
def spin_then_copy(ctx, flag, src, dst, n):
    word = ctx.gm(flag, np.uint64, 1)
    ctx.spin_until(lambda: int(word[0]) == 1)
    ctx.gm(dst, np.uint8, n)[:] = ctx.gm(src, np.uint8, n)


def test_racecheck_kernels_writing_halves_of_one_view_do_not_race(acl):
    ok(acl, acl.rt.set_device(0))
    s1, s2 = streams(acl)
    y = device_buffer(acl, N)
    with sanitized() as found:
        ok(acl, fill_half[1, s1](y, N // 4, 0))
        ok(acl, fill_half[1, s2](y, N // 4, 1))
        ok(acl, acl.rt.synchronize_device())
    assert found == []


def test_racecheck_small_data_view_in_a_kernel_using_atomics(acl):
    ok(acl, acl.rt.set_device(0))
    s1, s2 = streams(acl)
    counter, result, dst = (device_buffer(acl, 64) for _ in range(3))
    with sanitized("racecheck") as found:
        ok(acl, count_and_store[1, s1](counter, result))
        ok(acl, acl.rt.memcpy_async(dst, 8, result, 8, D2D, s2))
        ok(acl, acl.rt.synchronize_device())
    assert kinds(found) == [("racecheck", "read-after-write hazard")] and f"allocation {result:#x}" in found[0].lines[0]


@BOTH
def test_racecheck_a_kernel_spinning_on_a_flag_acquires_its_writer(acl, buggy):
    """stream 1 fills src and sets the flag; a kernel on stream 2 spins on the flag, then reads src."""
    ok(acl, acl.rt.set_device(0))
    s1, s2 = streams(acl)
    flag, src, dst = (device_buffer(acl, N) for _ in range(3))
    with sanitized() as found:
        ok(acl, spin_then_copy[1, s2](flag, src, dst, N))
        ok(acl, acl.rt.memset_async(src, N, 3, N, s1))
        if buggy:
            ok(acl, acl.rt.value_write(flag, 1, 0, s1))
            ok(acl, acl.rt.memset_async(src, N, 4, N, s1))      # after the flag: races with the reader
        else:
            ok(acl, acl.rt.value_write(flag, 1, 0, s1))
        ok(acl, acl.rt.synchronize_device())
    if buggy:
        assert kinds(found) == [("racecheck", "write-after-read hazard")]
    else:
        assert found == []


@BOTH
def test_random_number_seed_and_count_given_by_address_are_reads(acl, buggy):
    """random_num_async reads its seed and count words when the task runs: an unwritten seed
    is an uninitialised read, and a count rewritten on another stream races."""
    ok(acl, acl.rt.set_device(0))
    s1, s2 = streams(acl)
    result, counter, count = (device_buffer(acl, N) for _ in range(3))
    with sanitized("racecheck,initcheck") as found:
        seed = out(acl, acl.rt.malloc(N, 0))                     # allocated while checking: unwritten
        ok(acl, acl.rt.memset(counter, 16, 0, 16))
        ok(acl, acl.rt.memset(count, 8, 0, 8))
        if buggy:
            ok(acl, acl.rt.memset_async(count, 8, 0, 8, s2))     # the count, rewritten unordered
        else:
            ok(acl, acl.rt.memset(seed, 8, 7, 8))
        info = task(acl.ACL_FLOAT, UNIFORM, uniform(0.0, 1.0), result, counter, para(seed, 1, 8), para(count, 1, 8))
        ok(acl, acl.rt.random_num_async(info, s1, None))
        ok(acl, acl.rt.synchronize_device())
    if buggy:
        assert sorted(kinds(found)) == [("initcheck", "uninitialised read"), ("racecheck", "read-after-write hazard")]
        assert f"allocation {seed:#x}" in text(found) and f"allocation {count:#x}" in text(found)
    else:
        assert found == []
    ok(acl, acl.rt.free(seed))


def test_synccheck_a_wait_another_thread_releases_is_no_finding(acl, monkeypatch):
    """The host blocks past the grace period on a value wait that a second thread's later
    submission releases: while another thread could still release it, nothing is reported."""
    import threading
    import time
    monkeypatch.setenv("MDEV_SANITIZE_GRACE", "0.1")
    ok(acl, acl.rt.set_device(0))
    ctx = out(acl, acl.rt.get_context())
    s1, s2 = streams(acl)
    flag = device_buffer(acl, 64)
    ok(acl, acl.rt.memset(flag, 64, 0, 64))
    with sanitized("synccheck") as found:
        ok(acl, acl.rt.value_wait(flag, 1, acl.ACL_STREAM_WAIT_VALUE_EQ, s2))

        def producer():
            acl.rt.set_context(ctx)
            time.sleep(0.5)                                       # past the grace period
            acl.rt.value_write(flag, 1, 0, s1)

        thread = threading.Thread(target=producer)
        thread.start()
        ok(acl, acl.rt.synchronize_stream(s2))
        thread.join()
    assert found == []
