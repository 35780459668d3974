"""Several devices: contexts, per-thread device and context, the guide's four multi-device
patterns, device affinity of streams and events, reset_device_force, peer access and
cross-device copies, device topology (the CANN Runtime API reference on hiascend.com: Device
Management, Context Management; programming guide 05 "多设备编程")."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from mdev import topology
from async_util import ok, out
from conftest import SMALL_HBM
from helpers import MiB, attached, extra_board, from_device, to_device
from mdev.kernel import int64, kernel, ptr
from mdev.memory import address

H2D, D2H, D2D = 1, 2, 3
HUGE_FIRST = 0


# ---------------------------------------------------------------------------- helpers
def sync(acl, stream) -> None:
    """synchronize_stream, bounded: a lost completion fails the test instead of hanging the suite."""
    ok(acl, acl.rt.synchronize_stream_with_timeout(stream, 30000))


def pattern(seed: int, nbytes: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)


def malloc(acl, nbytes: int) -> int:
    return out(acl, acl.rt.malloc(nbytes, HUGE_FIRST))


def device_of(ptr: int) -> int:
    return address.split(ptr)[0]


def in_threads(*fns, timeout: float = 60):
    """Run each ``fn`` in its own thread; return their results (first exception re-raised)."""
    results: list = [None] * len(fns)
    errors: list = []

    def run(i, fn):
        try:
            results[i] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i, fn)) for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), "thread hung"
    if errors:
        raise errors[0]
    return results


def spawn(code: str, board: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ, MDEV_BOARD=board, MDEV_AUTOSTART="0")
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(procs: list[subprocess.Popen], timeout: float = 120) -> list[str]:
    outs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=timeout)
        assert p.returncode == 0, f"process failed ({p.returncode}):\n{stdout}\n{stderr}"
        outs.append(stdout)
    return outs


@pytest.fixture
def acl_isl(islands_board, monkeypatch):
    with attached(monkeypatch, islands_board) as acl:
        yield acl


# ============================================================================ contexts
def test_no_synchronize_context_in_the_api(acl):
    # there is no aclrtSynchronizeContext: synchronize_device is context-scoped
    assert not hasattr(acl.rt, "synchronize_context")
    assert hasattr(acl.rt, "synchronize_device")


def test_current_context_names(acl):
    # pyACL names (set_context / get_context) and the C names are the same functions
    assert acl.rt.set_current_context is acl.rt.set_context
    assert acl.rt.get_current_context is acl.rt.get_context
    assert acl.rt.get_current_context() == (0, acl.ACL_ERROR_RT_CONTEXT_NULL)
    ok(acl, acl.rt.set_device(1))
    ctx = out(acl, acl.rt.get_current_context())
    assert ctx == out(acl, acl.rt.get_context()) != 0


def test_create_context_becomes_current(acl):
    ok(acl, acl.rt.set_device(0))
    default0 = out(acl, acl.rt.get_context())
    default_stream0 = out(acl, acl.rt.ctx_get_current_default_stream())
    ctx = out(acl, acl.rt.create_context(2))
    assert ctx not in (0, default0)
    # the new context is current and its device is the thread's device now
    assert acl.rt.get_context() == (ctx, 0)
    assert acl.rt.get_device() == (2, 0)
    # it owns its own default stream
    ds = out(acl, acl.rt.ctx_get_current_default_stream())
    assert ds not in (0, default_stream0)
    # memory allocated now is on device 2
    ptr = malloc(acl, 4096)
    assert device_of(ptr) == 2
    # switching back to device 0's default context switches the device back
    ok(acl, acl.rt.set_context(default0))
    assert acl.rt.get_device() == (0, 0)
    assert acl.rt.ctx_get_current_default_stream() == (default_stream0, 0)
    # ... and setting the explicit context again switches to device 2
    ok(acl, acl.rt.set_current_context(ctx))
    assert acl.rt.get_device() == (2, 0)
    ok(acl, acl.rt.free(ptr))
    ok(acl, acl.rt.destroy_context(ctx))


def test_create_context_invalid_device(acl):
    assert acl.rt.create_context(4) == (0, acl.ACL_ERROR_RT_INVALID_DEVICEID)
    assert acl.rt.create_context(-1) == (0, acl.ACL_ERROR_RT_INVALID_DEVICEID)
    assert acl.rt.get_context() == (0, acl.ACL_ERROR_RT_CONTEXT_NULL)


def test_two_contexts_on_one_device_have_separate_default_streams(acl):
    a = out(acl, acl.rt.create_context(1))
    sa = out(acl, acl.rt.ctx_get_current_default_stream())
    b = out(acl, acl.rt.create_context(1))
    sb = out(acl, acl.rt.ctx_get_current_default_stream())
    assert a != b and sa != sb
    # work on the NULL stream goes to the current context's default stream
    buf = malloc(acl, 1 * MiB)
    data = pattern(1, 1 * MiB)
    host, ret = acl.rt.malloc_host(1 * MiB)
    ok(acl, ret)
    acl.util.ptr_to_numpy(host, (1 * MiB,), 2)[:] = data
    ok(acl, acl.rt.memcpy_async(buf, 1 * MiB, host, 1 * MiB, H2D, 0))
    sync(acl, 0)
    assert (from_device(acl, buf, 1 * MiB) == data).all()
    # an explicit stream of context a cannot be used while b is current
    ok(acl, acl.rt.set_context(a))
    sa_explicit = out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.set_context(b))
    assert acl.rt.memcpy_async(buf, 16, host, 16, H2D, sa_explicit) == acl.ACL_ERROR_RT_STREAM_CONTEXT == 107003
    ok(acl, acl.rt.set_context(a))
    ok(acl, acl.rt.memcpy_async(buf, 16, host, 16, H2D, sa_explicit))
    sync(acl, sa_explicit)
    ok(acl, acl.rt.destroy_stream(sa_explicit))
    ok(acl, acl.rt.free(buf))
    ok(acl, acl.rt.free_host(host))
    ok(acl, acl.rt.destroy_context(a))
    ok(acl, acl.rt.destroy_context(b))


def test_destroy_context_rules(acl):
    ok(acl, acl.rt.set_device(3))
    default = out(acl, acl.rt.get_context())
    # the default context of a device cannot be destroyed
    assert acl.rt.destroy_context(default) == acl.ACL_ERROR_RT_PARAM_INVALID == 107000
    assert acl.rt.get_context() == (default, 0)          # still current and usable
    ok(acl, acl.rt.free(malloc(acl, 4096)))
    # NULL and unknown handles
    assert acl.rt.destroy_context(0) == acl.ACL_ERROR_INVALID_PARAM == 100000
    assert acl.rt.destroy_context(12345) == 107000
    # destroying the current explicit context leaves the thread without a context
    ctx = out(acl, acl.rt.create_context(3))
    ok(acl, acl.rt.destroy_context(ctx))
    assert acl.rt.get_context() == (0, acl.ACL_ERROR_RT_CONTEXT_NULL)
    assert acl.rt.create_stream() == (0, acl.ACL_ERROR_RT_CONTEXT_NULL)
    assert acl.rt.malloc(4096, HUGE_FIRST) == (0, acl.ACL_ERROR_RT_CONTEXT_NULL)
    # a destroyed context is gone: destroying or setting it again fails
    assert acl.rt.destroy_context(ctx) == 107000
    assert acl.rt.set_context(ctx) == 107000
    assert acl.rt.set_context(0) == acl.ACL_ERROR_INVALID_PARAM
    # the device's default context survives all that
    ok(acl, acl.rt.set_context(default))
    assert acl.rt.get_device() == (3, 0)


def test_destroy_context_releases_its_streams(acl):
    ctx = out(acl, acl.rt.create_context(0))
    s = out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.set_device(0))
    ok(acl, acl.rt.destroy_context(ctx))
    # its stream is gone with it: an error, not a crash
    assert acl.rt.synchronize_stream(s) != 0
    assert acl.rt.stream_query(s)[1] != 0
    assert acl.rt.destroy_stream(s) != 0
    # the thread's own (default) context is untouched
    assert acl.rt.get_device() == (0, 0)
    ok(acl, acl.rt.synchronize_device())


def test_context_used_from_another_thread(acl):
    ctx = out(acl, acl.rt.create_context(2))
    s = out(acl, acl.rt.create_stream())
    buf = malloc(acl, 64 * 1024)
    data = pattern(7, 64 * 1024)

    def worker():
        # a fresh thread has no context until it sets one
        assert acl.rt.get_context() == (0, acl.ACL_ERROR_RT_CONTEXT_NULL)
        ok(acl, acl.rt.set_context(ctx))
        assert acl.rt.get_device() == (2, 0)
        to_device(acl, buf, data)
        ok(acl, acl.rt.memset_async(buf, 16, 0xEE, 16, s))    # the context's stream is usable
        sync(acl, s)
        return bytes(from_device(acl, buf, 64 * 1024))

    got = in_threads(worker)[0]
    expect = data.copy()
    expect[:16] = 0xEE
    assert got == expect.tobytes()
    # this thread still has the context current too (set_context is per thread)
    assert acl.rt.get_context() == (ctx, 0)
    ok(acl, acl.rt.free(buf))
    ok(acl, acl.rt.destroy_stream(s))
    ok(acl, acl.rt.destroy_context(ctx))


def test_synchronize_device_is_context_scoped(acl):
    """A stream held in context A does not hold synchronize_device in context B."""
    ok(acl, acl.rt.set_device(1))
    held = out(acl, acl.rt.create_stream())
    release = threading.Event()
    ok(acl, acl.rt.launch_host_func(held, lambda _: release.wait(30), None))
    other = out(acl, acl.rt.create_context(1))
    t0 = time.monotonic()
    ok(acl, acl.rt.synchronize_device())          # context `other`: nothing to wait for
    assert time.monotonic() - t0 < 5
    ok(acl, acl.rt.set_device(1))                  # back to the default context: it is held
    assert acl.rt.stream_query(held) == (acl.ACL_STREAM_STATUS_NOT_READY, 0)
    threading.Timer(0.3, release.set).start()
    t0 = time.monotonic()
    ok(acl, acl.rt.synchronize_device_with_timeout(20000))
    assert release.is_set() and time.monotonic() - t0 >= 0.2
    ok(acl, acl.rt.destroy_stream(held))
    ok(acl, acl.rt.destroy_context(other))


def test_timed_out_device_sync_does_not_break_later_syncs(monkeypatch):
    """Regression (board side): a synchronize_device_with_timeout that expires cancels a wait
    registered on several streams; later parked waits on that device must still be answered.
    On its own board: a device left in a bad state must not hang other tests."""
    with extra_board("mdxwait", "laptop2", hbm=64 * MiB) as name, attached(monkeypatch, name) as acl:
        ok(acl, acl.rt.set_device(0))
        held = out(acl, acl.rt.create_stream())
        first = threading.Event()
        ok(acl, acl.rt.launch_host_func(held, lambda _: first.wait(30), None))
        # default stream + held stream: one waiter on two slots, cancelled at expiry
        assert acl.rt.synchronize_device_with_timeout(200) == acl.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
        first.set()
        assert acl.rt.synchronize_stream_with_timeout(held, 10000) == 0, \
            "a parked synchronisation was never answered after an earlier timed-out device sync"
        # a wait that has to park on the device, completed while parked
        second = threading.Event()
        ok(acl, acl.rt.launch_host_func(held, lambda _: second.wait(30), None))
        threading.Timer(0.3, second.set).start()
        assert acl.rt.synchronize_stream_with_timeout(held, 10000) == 0, \
            "a parked synchronisation was never answered after an earlier timed-out device sync"
        ok(acl, acl.rt.destroy_stream(held))


# ---------------------------------------------------------------------------- system parameters
def test_ctx_sys_param_opt(acl):
    # no context yet
    assert acl.rt.ctx_set_sys_param_opt(acl.ACL_OPT_DETERMINISTIC, 1) == acl.ACL_ERROR_RT_CONTEXT_NULL
    assert acl.rt.ctx_get_sys_param_opt(acl.ACL_OPT_DETERMINISTIC) == (0, acl.ACL_ERROR_RT_CONTEXT_NULL)
    ok(acl, acl.rt.set_device(0))
    # never set in this context: no default, 107021
    for opt in (acl.ACL_OPT_DETERMINISTIC, acl.ACL_OPT_ENABLE_DEBUG_KERNEL, acl.ACL_OPT_STRONG_CONSISTENCY):
        assert acl.rt.ctx_get_sys_param_opt(opt) == (0, acl.ACL_ERROR_RT_SYSPARAMOPT_NOT_SET)
    assert acl.ACL_ERROR_RT_SYSPARAMOPT_NOT_SET == 107021
    ok(acl, acl.rt.ctx_set_sys_param_opt(acl.ACL_OPT_DETERMINISTIC, 1))
    assert acl.rt.ctx_get_sys_param_opt(acl.ACL_OPT_DETERMINISTIC) == (1, 0)
    ok(acl, acl.rt.ctx_set_sys_param_opt(acl.ACL_OPT_DETERMINISTIC, 3))        # last write wins
    assert acl.rt.ctx_get_sys_param_opt(acl.ACL_OPT_DETERMINISTIC) == (3, 0)
    ok(acl, acl.rt.ctx_set_sys_param_opt(acl.ACL_OPT_ENABLE_DEBUG_KERNEL, 1))
    assert acl.rt.ctx_get_sys_param_opt(acl.ACL_OPT_ENABLE_DEBUG_KERNEL) == (1, 0)
    # values out of range: DETERMINISTIC [0, 4), the switches 0/1
    assert acl.rt.ctx_set_sys_param_opt(acl.ACL_OPT_DETERMINISTIC, 4) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.ctx_set_sys_param_opt(acl.ACL_OPT_DETERMINISTIC, -1) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.ctx_set_sys_param_opt(acl.ACL_OPT_ENABLE_DEBUG_KERNEL, 2) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.ctx_get_sys_param_opt(acl.ACL_OPT_DETERMINISTIC) == (3, 0)    # unchanged
    # options a context does not know
    assert acl.rt.ctx_set_sys_param_opt(acl.ACL_OPT_ENABLE_KERNEL_EARLY_START, 1) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.ctx_get_sys_param_opt(acl.ACL_OPT_ENABLE_KERNEL_EARLY_START) == (0, acl.ACL_ERROR_INVALID_PARAM)
    assert acl.rt.ctx_set_sys_param_opt(99, 0) == acl.ACL_ERROR_INVALID_PARAM
    # per context: another context (same device or not) has its own, empty, set
    ctx = out(acl, acl.rt.create_context(0))
    assert acl.rt.ctx_get_sys_param_opt(acl.ACL_OPT_DETERMINISTIC) == (0, 107021)
    ok(acl, acl.rt.ctx_set_sys_param_opt(acl.ACL_OPT_DETERMINISTIC, 2))
    ok(acl, acl.rt.set_device(1))
    assert acl.rt.ctx_get_sys_param_opt(acl.ACL_OPT_DETERMINISTIC) == (0, 107021)
    ok(acl, acl.rt.set_device(0))
    assert acl.rt.ctx_get_sys_param_opt(acl.ACL_OPT_DETERMINISTIC) == (3, 0)
    ok(acl, acl.rt.set_context(ctx))
    assert acl.rt.ctx_get_sys_param_opt(acl.ACL_OPT_DETERMINISTIC) == (2, 0)
    # another thread sharing device 0's default context sees its values
    assert in_threads(lambda: (acl.rt.set_device(0),
                               acl.rt.ctx_get_sys_param_opt(acl.ACL_OPT_DETERMINISTIC)))[0] == (0, (3, 0))
    ok(acl, acl.rt.destroy_context(ctx))


def test_process_sys_param_opt(acl):
    # process-wide: no device needed, default 0
    for opt in (acl.ACL_OPT_DETERMINISTIC, acl.ACL_OPT_ENABLE_DEBUG_KERNEL,
                acl.ACL_OPT_STRONG_CONSISTENCY, acl.ACL_OPT_ENABLE_KERNEL_EARLY_START):
        assert acl.rt.get_sys_param_opt(opt) == (0, 0)
    ok(acl, acl.rt.set_sys_param_opt(acl.ACL_OPT_DETERMINISTIC, 2))
    ok(acl, acl.rt.set_sys_param_opt(acl.ACL_OPT_ENABLE_KERNEL_EARLY_START, 1))
    assert acl.rt.get_sys_param_opt(acl.ACL_OPT_DETERMINISTIC) == (2, 0)
    assert acl.rt.get_sys_param_opt(acl.ACL_OPT_ENABLE_KERNEL_EARLY_START) == (1, 0)
    # every thread sees the process value
    assert in_threads(lambda: acl.rt.get_sys_param_opt(acl.ACL_OPT_DETERMINISTIC))[0] == (2, 0)
    assert acl.rt.set_sys_param_opt(acl.ACL_OPT_DETERMINISTIC, 4) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.set_sys_param_opt(acl.ACL_OPT_ENABLE_DEBUG_KERNEL, 7) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.set_sys_param_opt(4, 0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.get_sys_param_opt(-1) == (0, acl.ACL_ERROR_INVALID_PARAM)
    # the process value is not a context value: a context still has none set
    ok(acl, acl.rt.set_device(2))
    assert acl.rt.ctx_get_sys_param_opt(acl.ACL_OPT_DETERMINISTIC) == (0, 107021)


# ============================================================================ the four patterns
N_PATTERN = 2 * MiB


def _drive_device(acl, d: int, seed: int) -> str:
    """H2D (pinned, async) -> D2D (async) -> D2H (sync) on device ``d``; byte-for-byte check."""
    ok(acl, acl.rt.set_device(d))
    stream = out(acl, acl.rt.create_stream())
    a, b = malloc(acl, N_PATTERN), malloc(acl, N_PATTERN)
    assert device_of(a) == device_of(b) == d
    host = out(acl, acl.rt.malloc_host(N_PATTERN))
    data = pattern(seed, N_PATTERN)
    acl.util.ptr_to_numpy(host, (N_PATTERN,), 2)[:] = data
    ok(acl, acl.rt.memcpy_async(a, N_PATTERN, host, N_PATTERN, H2D, stream))
    ok(acl, acl.rt.memcpy_async(b, N_PATTERN, a, N_PATTERN, D2D, stream))
    sync(acl, stream)
    assert acl.rt.get_device() == (d, 0)
    got = from_device(acl, b, N_PATTERN)
    same = bool((got == data).all())
    ok(acl, acl.rt.free(a))
    ok(acl, acl.rt.free(b))
    ok(acl, acl.rt.free_host(host))
    ok(acl, acl.rt.destroy_stream(stream))
    ok(acl, acl.rt.reset_device(d))
    return "OK" if same else f"MISMATCH on device {d}"


def test_pattern_one_thread_many_devices(acl8):
    """Guide pattern 1: one host thread drives all 8 devices, switching with set_device."""
    acl = acl8
    streams, bufs, hosts, datas = {}, {}, {}, {}
    for d in range(8):                       # phase 1: queue work on every device
        ok(acl, acl.rt.set_device(d))
        streams[d] = out(acl, acl.rt.create_stream())
        bufs[d] = malloc(acl, N_PATTERN)
        assert device_of(bufs[d]) == d
        hosts[d] = out(acl, acl.rt.malloc_host(N_PATTERN))
        datas[d] = pattern(100 + d, N_PATTERN)
        acl.util.ptr_to_numpy(hosts[d], (N_PATTERN,), 2)[:] = datas[d]
        ok(acl, acl.rt.memcpy_async(bufs[d], N_PATTERN, hosts[d], N_PATTERN, H2D, streams[d]))
        ok(acl, acl.rt.memset_async(hosts[d], N_PATTERN, 0, N_PATTERN, streams[d]))
        ok(acl, acl.rt.memcpy_async(hosts[d], N_PATTERN, bufs[d], N_PATTERN, D2H, streams[d]))
    assert acl.rt.get_device() == (7, 0)
    for d in range(8):                       # phase 2: collect, each on its own device
        ok(acl, acl.rt.set_device(d))
        sync(acl, streams[d])
        assert (acl.util.ptr_to_numpy(hosts[d], (N_PATTERN,), 2) == datas[d]).all(), d
        assert (from_device(acl, bufs[d], N_PATTERN) == datas[d]).all(), d
    for d in range(8):                       # the guide's recommended clean-up
        ok(acl, acl.rt.set_device(d))
        ok(acl, acl.rt.free(bufs[d]))
        ok(acl, acl.rt.free_host(hosts[d]))
        ok(acl, acl.rt.destroy_stream(streams[d]))
    for d in range(8):
        ok(acl, acl.rt.reset_device_force(d))
    assert acl.rt.get_context() == (0, acl.ACL_ERROR_RT_CONTEXT_NULL)


def test_pattern_thread_per_device(acl8):
    """Guide pattern 2: one host thread per device; set_device affects the calling thread only."""
    acl = acl8
    barrier = threading.Barrier(8)

    def worker(d):
        ok(acl, acl.rt.set_device(d))
        barrier.wait(30)                     # every thread has a different device at once
        assert acl.rt.get_device() == (d, 0)
        result = _drive_device(acl, d, seed=200 + d)
        return result

    assert in_threads(*[lambda d=d: worker(d) for d in range(8)]) == ["OK"] * 8
    # the main thread never set a device
    assert acl.rt.get_device() == (0, acl.ACL_ERROR_RT_CONTEXT_NULL)


_PROCESS_CODE = """
    import sys, threading
    import numpy as np
    import mdev.acl as acl

    def check(ret, what):
        if ret != 0:
            raise SystemExit(f"{what}: ret={ret} {acl.get_recent_err_msg()}")

    N = 2 << 20
    def drive(d, seed, results):
        check(acl.rt.set_device(d), "set_device")
        stream, ret = acl.rt.create_stream(); check(ret, "create_stream")
        a, ret = acl.rt.malloc(N, 0); check(ret, "malloc")
        b, ret = acl.rt.malloc(N, 0); check(ret, "malloc")
        host, ret = acl.rt.malloc_host(N); check(ret, "malloc_host")
        data = np.random.default_rng(seed).integers(0, 256, N, dtype=np.uint8)
        acl.util.ptr_to_numpy(host, (N,), 2)[:] = data
        check(acl.rt.memcpy_async(a, N, host, N, 1, stream), "H2D")
        check(acl.rt.memcpy_async(b, N, a, N, 3, stream), "D2D")
        check(acl.rt.memset_async(host, N, 0, N, stream), "memset")
        check(acl.rt.memcpy_async(host, N, b, N, 2, stream), "D2H")
        check(acl.rt.synchronize_stream(stream), "sync")
        dev, ret = acl.rt.get_device(); check(ret, "get_device")
        same = bool((acl.util.ptr_to_numpy(host, (N,), 2) == data).all()) and dev == d
        for p in (a, b):
            check(acl.rt.free(p), "free")
        check(acl.rt.free_host(host), "free_host")
        check(acl.rt.destroy_stream(stream), "destroy_stream")
        check(acl.rt.reset_device(d), "reset_device")
        results[d] = "OK" if same else "MISMATCH"

    check(acl.init(), "init")
    devices = [int(x) for x in sys.argv[1].split(",")]
    base = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    results = {}
    if len(devices) == 1:
        drive(devices[0], base + devices[0], results)
    else:
        errors = []
        def run(d):
            try:
                drive(d, base + d, results)
            except BaseException as exc:
                errors.append(exc)
        threads = [threading.Thread(target=run, args=(d,)) for d in devices]
        for t in threads: t.start()
        for t in threads: t.join()
        if errors:
            raise errors[0]
    check(acl.finalize(), "finalize")
    print(" ".join(f"{d}:{results[d]}" for d in devices))
"""


def test_pattern_process_per_device(board8):
    """Guide pattern 3: eight single-threaded processes, each driving its own device."""
    procs = [spawn(_PROCESS_CODE, board8, str(d)) for d in range(8)]
    outs = finish(procs)
    assert [o.split() for o in outs] == [[f"{d}:OK"] for d in range(8)]


def test_pattern_processes_with_threads(board8):
    """Guide pattern 4: two processes, each with four threads, each thread its own device."""
    procs = [spawn(_PROCESS_CODE, board8, "0,1,2,3"), spawn(_PROCESS_CODE, board8, "4,5,6,7")]
    outs = finish(procs)
    assert outs[0].split() == ["0:OK", "1:OK", "2:OK", "3:OK"]
    assert outs[1].split() == ["4:OK", "5:OK", "6:OK", "7:OK"]


def test_two_processes_share_a_device_without_interfering(board8):
    """Same device from three processes at once, different data: each sees only its own."""
    procs = [spawn(_PROCESS_CODE, board8, "5", str(seed)) for seed in (1000, 2000, 3000)]
    outs = finish(procs)
    assert [o.split() for o in outs] == [["5:OK"]] * 3


# ============================================================================ affinity
@kernel
def stamp(ctx, x: ptr, value: int64):
    """Every block writes ``value`` into its own int32 of ``x``."""
    ctx.gm(x, np.int32, ctx.block_num)[ctx.block_idx] = value


def test_guide_kernel_on_stream_of_another_device(acl):
    """Guide 05: myKernel<<<8, nullptr, s0>>> with device 1 current fails; on s1 it runs."""
    ok(acl, acl.rt.set_device(0))
    s0 = out(acl, acl.rt.create_stream())
    x0 = malloc(acl, 32)
    ok(acl, stamp[8, s0](x0, 10))
    ok(acl, acl.rt.set_device(1))
    s1 = out(acl, acl.rt.create_stream())
    x1 = malloc(acl, 32)
    ok(acl, stamp[8, s1](x1, 11))
    assert stamp[8, s0](x0, 12) == acl.ACL_ERROR_RT_STREAM_CONTEXT == 107003
    sync(acl, s1)
    assert (from_device(acl, x1, 32, np.int32) == 11).all()
    ok(acl, acl.rt.set_device(0))
    sync(acl, s0)
    assert (from_device(acl, x0, 32, np.int32) == 10).all()      # the refused launch never ran
    ok(acl, acl.rt.free(x0))
    ok(acl, acl.rt.destroy_stream(s0))
    ok(acl, acl.rt.set_device(1))
    ok(acl, acl.rt.free(x1))
    ok(acl, acl.rt.destroy_stream(s1))


def test_stream_of_another_device_is_refused(acl):
    """Guide 05 "Stream和Event的行为": work on a stream that is not the current device's fails."""
    ok(acl, acl.rt.set_device(0))
    s0 = out(acl, acl.rt.create_stream())
    e0 = out(acl, acl.rt.create_event())
    buf0 = malloc(acl, 4096)
    host = out(acl, acl.rt.malloc_host(4096))
    ok(acl, acl.rt.set_device(1))
    s1 = out(acl, acl.rt.create_stream())
    e1 = out(acl, acl.rt.create_event())
    buf1 = malloc(acl, 4096)
    code = acl.ACL_ERROR_RT_STREAM_CONTEXT
    assert code == 107003
    # device 1 current, stream s0 of device 0
    assert acl.rt.memcpy_async(buf0, 4096, host, 4096, H2D, s0) == code
    assert acl.rt.memcpy_async(buf1, 4096, host, 4096, H2D, s0) == code
    assert acl.rt.memset_async(buf0, 4096, 1, 4096, s0) == code
    assert acl.rt.record_event(e0, s0) == code
    assert acl.rt.stream_wait_event(s0, e1) == code
    assert acl.rt.set_stream_failure_mode(s0, acl.ACL_STOP_ON_FAILURE) == code
    assert acl.rt.destroy_stream(s0) == code
    assert acl.rt.peek_at_last_error() == code
    # event and stream of different devices: a record fails (emu code 107000), a wait is accepted
    assert acl.rt.record_event(e0, s1) == acl.ACL_ERROR_RT_PARAM_INVALID
    ok(acl, acl.rt.stream_wait_event(s1, e0))
    # ... while synchronising or querying an event of another device succeeds
    ok(acl, acl.rt.record_event(e1, s1))
    ok(acl, acl.rt.set_device(0))
    ok(acl, acl.rt.synchronize_event(e1))
    assert acl.rt.query_event(e1) == (acl.ACL_EVENT_STATUS_COMPLETE, 0)
    # back on device 0, s0 works again
    ok(acl, acl.rt.memcpy_async(buf0, 4096, host, 4096, H2D, s0))
    ok(acl, acl.rt.record_event(e0, s0))
    sync(acl, s0)
    ok(acl, acl.rt.destroy_stream(s0))
    ok(acl, acl.rt.destroy_event(e0))
    ok(acl, acl.rt.free(buf0))
    ok(acl, acl.rt.set_device(1))
    ok(acl, acl.rt.destroy_stream(s1))
    ok(acl, acl.rt.destroy_event(e1))
    ok(acl, acl.rt.free(buf1))
    ok(acl, acl.rt.free_host(host))


def test_objects_belong_to_the_device_current_at_creation(acl8):
    acl = acl8
    for d in (6, 2, 7):
        ok(acl, acl.rt.set_device(d))
        ptr = malloc(acl, 4096)
        assert device_of(ptr) == d
        free, total = out(acl, acl.rt.get_mem_info(acl.ACL_HBM_MEM))
        assert total == SMALL_HBM and free <= SMALL_HBM - 4096
        ok(acl, acl.rt.free(ptr))


# ============================================================================ reset_device_force
def test_reset_device_force_releases_default_context_and_streams(acl):
    for _ in range(3):
        ok(acl, acl.rt.set_device(2))           # counted three times
    default = out(acl, acl.rt.get_context())
    s1 = out(acl, acl.rt.create_stream())
    s2 = out(acl, acl.rt.create_stream_with_config(3, 0))
    buf = malloc(acl, 1 * MiB)
    host = out(acl, acl.rt.malloc_host(1 * MiB))
    for s in (s1, s2, 0):
        ok(acl, acl.rt.memcpy_async(buf, 1 * MiB, host, 1 * MiB, H2D, s))
    free_before = out(acl, acl.rt.get_mem_info(acl.ACL_HBM_MEM))[0]
    assert acl.rt.get_primary_ctx_state(2) == (1, 0, 0)

    ok(acl, acl.rt.reset_device_force(2))       # one call undoes all three sets

    assert acl.rt.get_primary_ctx_state(2) == (0, 0, 0)
    # the thread's current context was the default one: gone
    assert acl.rt.get_context() == (0, acl.ACL_ERROR_RT_CONTEXT_NULL)
    assert acl.rt.get_device() == (0, acl.ACL_ERROR_RT_CONTEXT_NULL)
    # every resource of the default context is unusable: errors, never a crash
    assert acl.rt.synchronize_stream(s1) != 0
    assert acl.rt.stream_query(s2)[1] != 0
    assert acl.rt.destroy_stream(s2) != 0
    assert acl.rt.set_context(default) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.memcpy(buf, 16, host, 16, H2D) != 0
    # resetting again fails, whichever reset it is
    assert acl.rt.reset_device_force(2) == acl.ACL_ERROR_RT_CONTEXT_RELEASE_ERROR == 507007
    assert acl.rt.reset_device(2) == 507007
    # the device itself is fine: set it again and everything is new
    ok(acl, acl.rt.set_device(2))
    assert out(acl, acl.rt.get_context()) != default
    assert out(acl, acl.rt.get_mem_info(acl.ACL_HBM_MEM))[0] > free_before   # buf was released
    s3 = out(acl, acl.rt.create_stream())
    buf2 = malloc(acl, 4096)
    ok(acl, acl.rt.memcpy_async(buf2, 4096, host, 4096, H2D, s3))
    sync(acl, s3)
    ok(acl, acl.rt.free_host(host))
    ok(acl, acl.rt.reset_device(2))             # count is 1 now


def test_reset_device_force_ends_queued_work(acl):
    """A reset ends the device's work (issue 18: the real device kills it) instead of
    waiting for it: a host func that never returns on its own does not hold the reset,
    and the task queued behind it is dropped."""
    ok(acl, acl.rt.set_device(1))
    s = out(acl, acl.rt.create_stream())
    release, returned, after = threading.Event(), threading.Event(), threading.Event()
    ok(acl, acl.rt.launch_host_func(s, lambda _: (release.wait(60), returned.set()), None))
    ok(acl, acl.rt.launch_host_func(s, lambda _: after.set(), None))
    assert in_threads(lambda: acl.rt.reset_device_force(1), timeout=30) == [0]
    assert not returned.is_set()          # the reset came back while the host func still waited
    release.set()
    ok(acl, acl.rt.set_device(1))
    ok(acl, acl.rt.synchronize_device())
    assert not after.wait(0.2), "a task queued before the reset ran after it"


def test_reset_device_force_other_threads_lose_the_context(acl):
    ok(acl, acl.rt.set_device(3))
    s = out(acl, acl.rt.create_stream())
    shared = in_threads(lambda: (acl.rt.set_device(3), acl.rt.get_context()))[0]
    assert shared == (0, (out(acl, acl.rt.get_context()), 0))   # the same default context
    started, go = threading.Event(), threading.Event()

    def other():
        ok(acl, acl.rt.set_device(3))
        started.set()
        go.wait(30)
        # thread 1 force-reset device 3: this thread's context and the stream are gone
        return (acl.rt.get_context()[1], acl.rt.memset_async(0x1, 1, 0, 1, s) != 0,
                acl.rt.reset_device_force(3))

    t = threading.Thread(target=lambda: box.append(other()))
    box: list = []
    t.start()
    assert started.wait(30)
    ok(acl, acl.rt.reset_device_force(3))
    go.set()
    t.join(30)
    # a later force reset of the same device in another thread fails (guide, 507007)
    assert box == [(acl.ACL_ERROR_RT_CONTEXT_NULL, True, 507007)]


def test_reset_device_force_keeps_explicit_contexts(acl):
    ctx = out(acl, acl.rt.create_context(1))
    s = out(acl, acl.rt.create_stream())
    buf = malloc(acl, 4096)
    ok(acl, acl.rt.set_device(1))
    ok(acl, acl.rt.reset_device_force(1))
    # the explicit context, its stream and the memory allocated in it survive
    ok(acl, acl.rt.set_context(ctx))
    assert acl.rt.get_device() == (1, 0)
    host = np.arange(4096, dtype=np.uint8)
    ok(acl, acl.rt.memcpy_async(buf, 4096, acl.util.numpy_to_ptr(host), 4096, H2D, s))
    sync(acl, s)
    assert (from_device(acl, buf, 4096) == host).all()
    ok(acl, acl.rt.free(buf))
    ok(acl, acl.rt.destroy_stream(s))
    ok(acl, acl.rt.destroy_context(ctx))


def test_reset_is_per_process(board8, acl8, run_py):
    """Another process's reset of a device never touches this process's resources there."""
    acl = acl8
    ok(acl, acl.rt.set_device(4))
    s = out(acl, acl.rt.create_stream())
    buf = malloc(acl, 64 * 1024)
    data = pattern(44, 64 * 1024)
    to_device(acl, buf, data)
    run_py("""
        import mdev.acl as acl
        assert acl.rt.set_device(4) == 0
        s, ret = acl.rt.create_stream(); assert ret == 0
        assert acl.rt.reset_device_force(4) == 0
    """, board8)
    ok(acl, acl.rt.memset_async(buf, 16, 0, 16, s))
    sync(acl, s)
    data[:16] = 0
    assert (from_device(acl, buf, 64 * 1024) == data).all()
    ok(acl, acl.rt.free(buf))
    ok(acl, acl.rt.destroy_stream(s))


# ============================================================================ peer access
def test_can_access_peer_hccs8(acl8):
    acl = acl8
    for a in range(8):
        for b in range(8):
            if a != b:
                assert acl.rt.device_can_access_peer(a, b) == (1, 0), (a, b)
    # no device needs to be set for the query
    assert acl.rt.get_device() == (0, acl.ACL_ERROR_RT_CONTEXT_NULL)
    assert acl.rt.device_can_access_peer(3, 3) == (0, acl.ACL_ERROR_INVALID_PARAM)
    assert acl.rt.device_can_access_peer(0, 8) == (0, acl.ACL_ERROR_RT_INVALID_DEVICEID)
    assert acl.rt.device_can_access_peer(-1, 0) == (0, acl.ACL_ERROR_RT_INVALID_DEVICEID)


def test_peer_access_is_directional(acl8):
    acl = acl8
    ok(acl, acl.rt.set_device(0))
    assert acl.rt.device_peer_access_status(0, 1) == (0, 0)
    ok(acl, acl.rt.device_enable_peer_access(1, 0))
    assert acl.rt.device_peer_access_status(0, 1) == (1, 0)
    assert acl.rt.device_peer_access_status(1, 0) == (0, 0)        # enabling 0->1 is not 1->0
    # the reverse needs the peer current
    ok(acl, acl.rt.set_device(1))
    ok(acl, acl.rt.device_enable_peer_access(0, 0))
    assert acl.rt.device_peer_access_status(1, 0) == (1, 0)
    # other pairs are untouched
    assert acl.rt.device_peer_access_status(0, 2) == (0, 0)
    assert acl.rt.device_peer_access_status(2, 0) == (0, 0)
    # disable one direction only
    ok(acl, acl.rt.device_disable_peer_access(0))                 # 1 -> 0
    assert acl.rt.device_peer_access_status(1, 0) == (0, 0)
    assert acl.rt.device_peer_access_status(0, 1) == (1, 0)
    ok(acl, acl.rt.set_device(0))
    ok(acl, acl.rt.device_disable_peer_access(1))
    assert acl.rt.device_peer_access_status(0, 1) == (0, 0)


def test_peer_access_errors(acl8):
    acl = acl8
    # no current device
    assert acl.rt.device_enable_peer_access(1, 0) == acl.ACL_ERROR_RT_CONTEXT_NULL
    assert acl.rt.device_disable_peer_access(1) == acl.ACL_ERROR_RT_CONTEXT_NULL
    ok(acl, acl.rt.set_device(2))
    # self
    assert acl.rt.device_enable_peer_access(2, 0) == acl.ACL_ERROR_INVALID_PARAM == 100000
    assert acl.rt.device_disable_peer_access(2) == 100000
    assert acl.rt.device_peer_access_status(2, 2) == (0, 100000)
    # reserved flags must be 0: 200006, not 100000
    assert acl.rt.device_enable_peer_access(3, 1) == acl.ACL_ERROR_FEATURE_UNSUPPORTED == 200006
    assert acl.rt.device_peer_access_status(2, 3) == (0, 0)
    # bad peer id
    assert acl.rt.device_enable_peer_access(8, 0) == acl.ACL_ERROR_RT_INVALID_DEVICEID
    assert acl.rt.device_disable_peer_access(-1) == acl.ACL_ERROR_RT_INVALID_DEVICEID
    # disabling what is not enabled, enabling twice
    assert acl.rt.device_disable_peer_access(3) == acl.ACL_ERROR_RT_PARAM_INVALID == 107000
    ok(acl, acl.rt.device_enable_peer_access(3, 0))
    assert acl.rt.device_enable_peer_access(3, 0) == 107000
    assert acl.rt.device_peer_access_status(2, 3) == (1, 0)        # still enabled once
    ok(acl, acl.rt.device_disable_peer_access(3))
    assert acl.rt.device_disable_peer_access(3) == 107000


def test_peer_access_is_device_level(acl8):
    """Enabled in one context (or thread) of a device, it holds for every context of it."""
    acl = acl8
    ok(acl, acl.rt.set_device(5))
    src = malloc(acl, 4096)
    data = pattern(5, 4096)
    to_device(acl, src, data)
    ok(acl, acl.rt.set_device(6))
    dst = malloc(acl, 4096)
    # another thread, device 6's default context, enables 6 -> 5
    assert in_threads(lambda: (acl.rt.set_device(6), acl.rt.device_enable_peer_access(5, 0)))[0] == (0, 0)
    # an explicit context on device 6 uses it
    ctx = out(acl, acl.rt.create_context(6))
    ok(acl, acl.rt.memcpy(dst, 4096, src, 4096, D2D))
    assert acl.rt.device_peer_access_status(6, 5) == (1, 0)
    ok(acl, acl.rt.destroy_context(ctx))
    ok(acl, acl.rt.set_device(6))
    assert (from_device(acl, dst, 4096) == data).all()
    ok(acl, acl.rt.free(dst))
    ok(acl, acl.rt.set_device(5))
    ok(acl, acl.rt.free(src))


def test_islands_peer_access(acl_isl):
    acl = acl_isl
    topo = topology.resolve("islands8")
    for a in range(8):
        for b in range(8):
            if a != b:
                same_island = (a < 4) == (b < 4)
                assert acl.rt.device_can_access_peer(a, b) == (int(same_island), 0), (a, b)
                assert topo.can_access_peer(a, b) == same_island
    ok(acl, acl.rt.set_device(0))
    # same island: fine
    ok(acl, acl.rt.device_enable_peer_access(3, 0))
    assert acl.rt.device_peer_access_status(0, 3) == (1, 0)
    # across islands the topology says no: 207000, and nothing is enabled
    assert acl.rt.device_enable_peer_access(4, 0) == acl.ACL_ERROR_RT_FEATURE_NOT_SUPPORT == 207000
    assert "0" in acl.get_recent_err_msg()
    assert acl.rt.device_peer_access_status(0, 4) == (0, 0)
    assert acl.rt.device_disable_peer_access(4) == 107000
    ok(acl, acl.rt.set_device(7))
    assert acl.rt.device_enable_peer_access(1, 0) == 207000
    ok(acl, acl.rt.device_enable_peer_access(4, 0))
    # a copy across islands fails: no peer access can ever be enabled for it
    ok(acl, acl.rt.set_device(7))
    b7 = malloc(acl, 4096)
    ok(acl, acl.rt.set_device(0))
    b0 = malloc(acl, 4096)
    assert acl.rt.memcpy(b0, 4096, b7, 4096, D2D) == 107000
    s = out(acl, acl.rt.create_stream())
    assert acl.rt.memcpy_async(b0, 4096, b7, 4096, D2D, s) == 107000
    ok(acl, acl.rt.free(b0))
    ok(acl, acl.rt.destroy_stream(s))
    ok(acl, acl.rt.set_device(7))
    ok(acl, acl.rt.free(b7))


# ---------------------------------------------------------------------------- devices topology
def test_devices_topo_hccs8(acl8):
    acl = acl8
    assert acl.ACL_RT_DEVS_TOPOLOGY_HCCS == 0x1
    for a, b in [(0, 1), (0, 7), (3, 4), (6, 2)]:
        assert acl.rt.get_devices_topo(a, b) == (0x1, 0)
    assert acl.rt.get_devices_topo(0, 8)[1] == acl.ACL_ERROR_RT_INVALID_DEVICEID


def test_devices_topo_pcie4(acl):
    assert acl.ACL_RT_DEVS_TOPOLOGY_PIX == 0x2
    for a in range(4):
        for b in range(4):
            if a != b:
                assert acl.rt.get_devices_topo(a, b) == (0x2, 0)
                assert acl.rt.device_can_access_peer(a, b) == (1, 0)


def test_devices_topo_islands(acl_isl):
    acl = acl_isl
    assert acl.rt.get_devices_topo(0, 1) == (acl.ACL_RT_DEVS_TOPOLOGY_HCCS, 0)
    assert acl.rt.get_devices_topo(5, 6) == (acl.ACL_RT_DEVS_TOPOLOGY_HCCS, 0)
    cross, ret = acl.rt.get_devices_topo(0, 4)
    assert ret == 0 and cross in (acl.ACL_RT_DEVS_TOPOLOGY_PHB, acl.ACL_RT_DEVS_TOPOLOGY_SYS)
    assert cross == topology.resolve("islands8").topo_class(0, 4)
    assert acl.rt.get_devices_topo(7, 3) == (cross, 0)


# ============================================================================ cross-device copies
SIZE = 4 * MiB


def _enable_both(acl, a: int, b: int) -> None:
    for x, y in ((a, b), (b, a)):
        ok(acl, acl.rt.set_device(x))
        assert acl.rt.device_can_access_peer(x, y) == (1, 0)
        ok(acl, acl.rt.device_enable_peer_access(y, 0))


def test_p2p_copy_sync_both_directions(acl8):
    """The guide's P2P flow: can-access both ways, enable both ways, malloc on each, copy."""
    acl = acl8
    _enable_both(acl, 0, 1)
    ok(acl, acl.rt.set_device(0))
    d0 = malloc(acl, SIZE)
    data0 = pattern(10, SIZE)
    to_device(acl, d0, data0)
    ok(acl, acl.rt.set_device(1))
    d1 = malloc(acl, SIZE)
    data1 = pattern(11, SIZE)
    to_device(acl, d1, data1)
    scratch = malloc(acl, SIZE)
    # device 1 current: pull from device 0
    ok(acl, acl.rt.memcpy(scratch, SIZE, d0, SIZE, D2D))
    assert (from_device(acl, scratch, SIZE) == data0).all()
    # device 1 current: push to device 0 (a sub-range, at an offset)
    ok(acl, acl.rt.memcpy(d0 + 4096, SIZE - 8192, d1 + 8192, SIZE - 8192, D2D))
    ok(acl, acl.rt.set_device(0))
    got = from_device(acl, d0, SIZE)
    assert (got[:4096] == data0[:4096]).all()
    assert (got[4096:SIZE - 4096] == data1[8192:]).all()
    assert (got[SIZE - 4096:] == data0[SIZE - 4096:]).all()
    # ACL_MEMCPY_DEFAULT infers the direction from the pointers
    ok(acl, acl.rt.memcpy(d0, SIZE, d1, SIZE, acl.ACL_MEMCPY_DEFAULT))
    assert (from_device(acl, d0, SIZE) == data1).all()
    ok(acl, acl.rt.free(d0))
    ok(acl, acl.rt.set_device(1))
    ok(acl, acl.rt.free(d1))
    ok(acl, acl.rt.free(scratch))


def test_p2p_copy_async_push_and_pull(acl8):
    """Async copies run in the executing device's process, which maps the peer's HBM."""
    acl = acl8
    _enable_both(acl, 2, 5)
    ok(acl, acl.rt.set_device(2))
    s2 = out(acl, acl.rt.create_stream())
    a = malloc(acl, SIZE)
    data = pattern(25, SIZE)
    to_device(acl, a, data)
    ok(acl, acl.rt.set_device(5))
    s5 = out(acl, acl.rt.create_stream())
    b, c = malloc(acl, SIZE), malloc(acl, SIZE)
    # pull on device 5's stream: 2 -> 5
    ok(acl, acl.rt.memcpy_async(b, SIZE, a, SIZE, D2D, s5))
    sync(acl, s5)
    assert (from_device(acl, b, SIZE) == data).all()
    # push on device 2's stream: 2 -> 5, then 2-D copy 5 -> 2 on the same stream, ordered
    ok(acl, acl.rt.set_device(2))
    ok(acl, acl.rt.memset_async(a, SIZE, 0x33, SIZE // 2, s2))
    ok(acl, acl.rt.memcpy_async(c, SIZE, a, SIZE, D2D, s2))
    ok(acl, acl.rt.memcpy2d_async(a, 2048, b, 4096, 1024, SIZE // 4096, D2D, s2))
    sync(acl, s2)
    expect_c = data.copy()
    expect_c[:SIZE // 2] = 0x33
    got_a = from_device(acl, a, SIZE)
    rows = SIZE // 4096
    assert (got_a[:rows * 2048].reshape(rows, 2048)[:, :1024] == data.reshape(rows, 4096)[:, :1024]).all()
    ok(acl, acl.rt.set_device(5))
    assert (from_device(acl, c, SIZE) == expect_c).all()
    for p in (b, c):
        ok(acl, acl.rt.free(p))
    ok(acl, acl.rt.destroy_stream(s5))
    ok(acl, acl.rt.set_device(2))
    ok(acl, acl.rt.free(a))
    ok(acl, acl.rt.destroy_stream(s2))


def test_a_peer_buffer_freed_while_a_copy_of_it_waits_fails_the_copy(acl8):
    """Device 1 pulls a buffer of device 0 twice (its device remembers the operand checked),
    then queues the same copy behind a wait; device 0's buffer is freed meanwhile: the copy
    fails with the DMA error, it does not read the freed pages."""
    acl = acl8
    _enable_both(acl, 0, 1)
    ok(acl, acl.rt.set_device(0))
    src = malloc(acl, 8192)
    to_device(acl, src, pattern(7, 8192))
    ok(acl, acl.rt.set_device(1))
    dst, hold = malloc(acl, 8192), malloc(acl, 8)
    stream = out(acl, acl.rt.create_stream())
    for _ in range(2):
        ok(acl, acl.rt.memcpy_async(dst, 8192, src, 8192, D2D, stream))
        sync(acl, stream)
    assert (from_device(acl, dst, 8192) == pattern(7, 8192)).all()
    ok(acl, acl.rt.memset(dst, 8192, 0, 8192))
    ok(acl, acl.rt.value_wait(hold, 1, acl.ACL_STREAM_WAIT_VALUE_EQ, stream))
    ok(acl, acl.rt.memcpy_async(dst, 8192, src, 8192, D2D, stream))
    ok(acl, acl.rt.set_device(0))
    ok(acl, acl.rt.free(src))
    ok(acl, acl.rt.set_device(1))
    ok(acl, acl.rt.memset(hold, 8, 1, 1))
    assert acl.rt.synchronize_stream(stream) == acl.ACL_ERROR_RT_SYS_DMA
    assert "not inside a live allocation" in acl.get_recent_err_msg()
    assert not from_device(acl, dst, 8192).any()
    ok(acl, acl.rt.free(dst))
    ok(acl, acl.rt.free(hold))
    ok(acl, acl.rt.destroy_stream(stream))


def test_cross_device_copy_without_peer_access_fails(acl8):
    acl = acl8
    ok(acl, acl.rt.set_device(3))
    a = malloc(acl, 4096)
    s3 = out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.set_device(4))
    b = malloc(acl, 4096)
    s4 = out(acl, acl.rt.create_stream())
    code = acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.memcpy(b, 4096, a, 4096, D2D) == code
    assert acl.rt.memcpy_async(b, 4096, a, 4096, D2D, s4) == code
    assert acl.rt.memcpy2d_async(b, 64, a, 64, 64, 4, D2D, s4) == code
    assert "peer" in acl.get_recent_err_msg()
    # enabling the other direction (3 -> 4) does not help device 4
    ok(acl, acl.rt.set_device(3))
    ok(acl, acl.rt.device_enable_peer_access(4, 0))
    ok(acl, acl.rt.set_device(4))
    assert acl.rt.memcpy(b, 4096, a, 4096, D2D) == code
    # ... but device 3 may copy now, sync and async
    ok(acl, acl.rt.set_device(3))
    ok(acl, acl.rt.memcpy(b, 4096, a, 4096, D2D))
    ok(acl, acl.rt.memcpy_async(a, 4096, b, 4096, D2D, s3))
    sync(acl, s3)
    # after disabling, it fails again
    ok(acl, acl.rt.device_disable_peer_access(4))
    assert acl.rt.memcpy(b, 4096, a, 4096, D2D) == code
    assert acl.rt.memcpy_async(b, 4096, a, 4096, D2D, s3) == code
    # a memset of another device's memory is a cross-device access too
    assert acl.rt.memset(b, 4096, 0, 4096) == code
    ok(acl, acl.rt.free(a))
    ok(acl, acl.rt.destroy_stream(s3))
    ok(acl, acl.rt.set_device(4))
    ok(acl, acl.rt.free(b))
    ok(acl, acl.rt.destroy_stream(s4))


def test_p2p_copy_between_threads_with_events(acl8):
    """Thread per device: producer on device 0 fills, consumer on device 1 pulls after the event."""
    acl = acl8
    _enable_both(acl, 0, 1)
    ok(acl, acl.rt.set_device(0))
    src = malloc(acl, SIZE)
    ok(acl, acl.rt.set_device(1))
    dst = malloc(acl, SIZE)
    data = pattern(33, SIZE)
    ready = threading.Event()
    box = {}

    def producer():
        ok(acl, acl.rt.set_device(0))
        s = out(acl, acl.rt.create_stream())
        host = out(acl, acl.rt.malloc_host(SIZE))
        acl.util.ptr_to_numpy(host, (SIZE,), 2)[:] = data
        ok(acl, acl.rt.memcpy_async(src, SIZE, host, SIZE, H2D, s))
        ev = out(acl, acl.rt.create_event())
        ok(acl, acl.rt.record_event(ev, s))
        box["event"] = ev
        ready.set()
        sync(acl, s)
        ok(acl, acl.rt.destroy_stream(s))
        return host

    def consumer():
        ok(acl, acl.rt.set_device(1))
        assert ready.wait(30)
        # the event lives on device 0: a device-1 stream cannot wait on it, the host can
        ok(acl, acl.rt.synchronize_event(box["event"]))
        s = out(acl, acl.rt.create_stream())
        ok(acl, acl.rt.memcpy_async(dst, SIZE, src, SIZE, D2D, s))
        sync(acl, s)
        ok(acl, acl.rt.destroy_stream(s))
        return bytes(from_device(acl, dst, SIZE)) == data.tobytes()

    host, same = in_threads(producer, consumer)
    assert same
    ok(acl, acl.rt.free_host(host))
    ok(acl, acl.rt.set_device(0))
    ok(acl, acl.rt.destroy_event(box["event"]))
    ok(acl, acl.rt.free(src))
    ok(acl, acl.rt.set_device(1))
    ok(acl, acl.rt.free(dst))


def test_notify_across_devices_orders_p2p_copies(acl8):
    """Sender device records a notify of the receiver device; the receiver's stream waits."""
    acl = acl8
    _enable_both(acl, 4, 7)
    ok(acl, acl.rt.set_device(7))
    recv = malloc(acl, SIZE)
    s7 = out(acl, acl.rt.create_stream())
    notify = out(acl, acl.rt.create_notify(0))
    host = out(acl, acl.rt.malloc_host(SIZE))
    ok(acl, acl.rt.set_device(4))
    send = malloc(acl, SIZE)
    data = pattern(47, SIZE)
    to_device(acl, send, data)
    s4 = out(acl, acl.rt.create_stream())
    # receiver first: its stream waits, then reads the block into pinned memory
    ok(acl, acl.rt.set_device(7))
    ok(acl, acl.rt.wait_and_reset_notify(notify, s7, 0))
    ok(acl, acl.rt.memcpy_async(host, SIZE, recv, SIZE, D2H, s7))
    time.sleep(0.1)
    assert acl.rt.stream_query(s7) == (acl.ACL_STREAM_STATUS_NOT_READY, 0)
    # sender pushes the block, then records the receiver's notify
    ok(acl, acl.rt.set_device(4))
    ok(acl, acl.rt.memcpy_async(recv, SIZE, send, SIZE, D2D, s4))
    ok(acl, acl.rt.record_notify(notify, s4))
    sync(acl, s4)
    ok(acl, acl.rt.set_device(7))
    sync(acl, s7)
    assert (acl.util.ptr_to_numpy(host, (SIZE,), 2) == data).all()
    ok(acl, acl.rt.free_host(host))
    ok(acl, acl.rt.destroy_notify(notify))
    ok(acl, acl.rt.free(recv))
    ok(acl, acl.rt.destroy_stream(s7))
    ok(acl, acl.rt.set_device(4))
    ok(acl, acl.rt.free(send))
    ok(acl, acl.rt.destroy_stream(s4))


def test_peer_copy_of_freed_memory_is_an_error(acl8):
    acl = acl8
    _enable_both(acl, 0, 2)
    ok(acl, acl.rt.set_device(2))
    peer = malloc(acl, 4096)
    ok(acl, acl.rt.free(peer))
    ok(acl, acl.rt.set_device(0))
    mine = malloc(acl, 4096)
    s = out(acl, acl.rt.create_stream())
    assert acl.rt.memcpy(mine, 4096, peer, 4096, D2D) == 107000
    assert acl.rt.memcpy_async(mine, 4096, peer, 4096, D2D, s) == 107000
    sync(acl, s)
    ok(acl, acl.rt.free(mine))
    ok(acl, acl.rt.destroy_stream(s))


def test_all_to_all_eight_devices(acl8):
    """Every device pushes one block to every other device; notifies order the reads.

    Each device has a send stream (its pushes, each followed by a record of the receiver's
    notify) and a receive stream (waits for all its senders, then reads what arrived)."""
    acl = acl8
    n, block = 8, 256 * 1024
    for a in range(n):
        ok(acl, acl.rt.set_device(a))
        for b in range(n):
            if a != b:
                ok(acl, acl.rt.device_enable_peer_access(b, 0))
    ctx, tx, rx, send, recv, notes, host = {}, {}, {}, {}, {}, {}, {}
    for d in range(n):
        ok(acl, acl.rt.set_device(d))
        ctx[d] = out(acl, acl.rt.get_context())
        tx[d], rx[d] = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
        send[d] = malloc(acl, n * block)
        recv[d] = malloc(acl, n * block)
        host[d] = out(acl, acl.rt.malloc_host(n * block))
        to_device(acl, send[d], np.concatenate([pattern(d * n + p, block) for p in range(n)]))
        notes[d] = {s: out(acl, acl.rt.create_notify(0)) for s in range(n) if s != d}
    for d in range(n):      # receivers: wait for every sender, then read the blocks
        ok(acl, acl.rt.set_context(ctx[d]))
        for s in range(n):
            if s != d:
                ok(acl, acl.rt.wait_and_reset_notify(notes[d][s], rx[d], 0))
        ok(acl, acl.rt.memcpy_async(host[d], n * block, recv[d], n * block, D2H, rx[d]))
    time.sleep(0.05)
    for d in range(n):      # nothing was sent yet: every receiver is still waiting
        ok(acl, acl.rt.set_context(ctx[d]))
        assert acl.rt.stream_query(rx[d]) == (acl.ACL_STREAM_STATUS_NOT_READY, 0)
    for s in range(n):      # senders push and notify
        ok(acl, acl.rt.set_context(ctx[s]))
        for d in range(n):
            if d != s:
                ok(acl, acl.rt.memcpy_async(recv[d] + s * block, block, send[s] + d * block, block, D2D, tx[s]))
                ok(acl, acl.rt.record_notify(notes[d][s], tx[s]))
    for d in range(n):
        ok(acl, acl.rt.set_context(ctx[d]))
        ok(acl, acl.rt.synchronize_stream_with_timeout(rx[d], 30000))
        got = acl.util.ptr_to_numpy(host[d], (n, block), 2)
        for s in range(n):
            if s != d:
                assert (got[s] == pattern(s * n + d, block)).all(), (s, d)
            else:
                assert not got[s].any()            # nobody wrote the diagonal
        del got
    for d in range(n):
        ok(acl, acl.rt.set_context(ctx[d]))
        ok(acl, acl.rt.synchronize_stream_with_timeout(tx[d], 30000))
        for h in notes[d].values():
            ok(acl, acl.rt.destroy_notify(h))
        ok(acl, acl.rt.free(send[d]))
        ok(acl, acl.rt.free(recv[d]))
        ok(acl, acl.rt.free_host(host[d]))
        ok(acl, acl.rt.destroy_stream(tx[d]))
        ok(acl, acl.rt.destroy_stream(rx[d]))


def test_queued_peer_copy_into_freed_peer_memory_is_reported(monkeypatch):
    """Rule 15 across devices: a queued P2P copy whose peer buffer was freed before it ran is
    a device error at sync (as on one device), and never writes into the freed range -- the
    next allocation there must read as zero.  On its own board: a failure must not leave
    dirty HBM on a board other tests share."""
    with extra_board("mdxuaf", "laptop2", hbm=64 * MiB) as name, attached(monkeypatch, name) as acl:
        for a, b in ((0, 1), (1, 0)):
            ok(acl, acl.rt.set_device(a))
            ok(acl, acl.rt.device_enable_peer_access(b, 0))
        ok(acl, acl.rt.set_device(1))
        peer = malloc(acl, 1 * MiB)
        ok(acl, acl.rt.set_device(0))
        s = out(acl, acl.rt.create_stream())
        src = malloc(acl, 1 * MiB)
        ok(acl, acl.rt.memset(src, 1 * MiB, 0x77, 1 * MiB))
        gate = threading.Event()
        ok(acl, acl.rt.launch_host_func(s, lambda _: gate.wait(30), None))
        ok(acl, acl.rt.memcpy_async(peer, 1 * MiB, src, 1 * MiB, D2D, s))     # queued behind the gate
        ok(acl, acl.rt.set_device(1))
        ok(acl, acl.rt.free(peer))                                            # freed before it runs
        ok(acl, acl.rt.set_device(0))
        gate.set()
        ret = acl.rt.synchronize_stream_with_timeout(s, 20000)
        ok(acl, acl.rt.set_device(1))
        again = malloc(acl, 1 * MiB)
        fresh = from_device(acl, again, 1 * MiB)
        assert not fresh.any(), (f"a freed peer range was written by a queued P2P copy (sync ret {ret}): "
                                 f"the next allocation reads {fresh[:4]}, not zero")
        assert ret == acl.ACL_ERROR_RT_SYS_DMA, f"use-after-free of peer memory not reported: sync ret {ret}"
