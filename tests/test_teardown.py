"""Teardown ends work (issue 18, items 2 and 4).

A kernel still running after a timed-out synchronisation writes no device memory once
destroy_stream_force, stream_abort, stream_stop, finalize or the exit of its process has
returned: its launch's mappings are cut off (mdev.board.windows).  Memory that a running
task uses is not handed out again until the task ends, whoever frees it.  Stream stop,
abort and state callbacks follow 1_basic_features/stream/1_stream_with_failure_mode, and
the 2_multi_stream sample's flow (a timed-out long kernel, teardown, a second round on the
reused address) prints the right answer.

The long kernel waits for a flag the test writes, so the order is the test's, not the
machine's; that it has ended is seen from the device's memory use: its allocations are
released only when it ends.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from async_util import device_buffer, ok, out
from helpers import from_device, hbm_free, to_device, wait_until
from mdev import sanitizer
from mdev.kernel import kernel, ptr
from peer import Peer

SYNC_TIMEOUT, ABORTED, INTERNAL, NOT_SUPPORT = 507046, 107023, 507000, 207000
DEVICE_USE_ONLY = 0x20            # ACL_STREAM_DEVICE_USE_ONLY (0x10 is ACL_STREAM_CPU_SCHEDULE)


@kernel
def long_op(ctx, out: ptr, flag: ptr):
    """Take views first, then wait (like a long kernel mid-run), then write."""
    result = ctx.gm(out, np.uint32, 1)
    word = ctx.gm(flag, np.uint64, 1)
    while word[0] == 0:
        time.sleep(0.005)
    result[0] += 1
    word[0] = 2


@kernel
def stubborn_op(ctx, out: ptr, flag: ptr):
    """long_op that swallows the stop: its writes must land nowhere all the same."""
    result = ctx.gm(out, np.uint32, 1)
    word = ctx.gm(flag, np.uint64, 1)
    for _ in range(2):            # the stop interrupts the first wait; wait for the flag again
        try:
            while word[0] == 0:
                time.sleep(0.005)
        except BaseException:
            pass
    result[0] += 1
    word[0] = 2


def hung(acl, stream):
    """A long kernel on ``stream`` whose synchronisation times out: (its result word, its flag)."""
    result, flag = device_buffer(acl, 4096), device_buffer(acl, 4096)
    ok(acl, long_op[1, stream](result, flag))
    assert acl.rt.synchronize_stream_with_timeout(stream, 100) == SYNC_TIMEOUT
    return result, flag


@pytest.mark.parametrize("op", [long_op, stubborn_op], ids=["stopped", "cut-off"])
def test_destroy_stream_force_stops_a_running_kernel(dev, op):
    """2_multi_stream's teardown: a hung kernel, destroy_stream_force; then the kernel is
    stopped, and what it writes if it runs on anyway lands nowhere -- not in its own
    buffers, not in the next allocation at a freed address."""
    acl = dev
    stream = out(acl, acl.rt.create_stream())
    result, flag, doomed = device_buffer(acl, 4096), device_buffer(acl, 4096), device_buffer(acl, 4096)
    ok(acl, op[1, stream](result, flag))
    assert acl.rt.synchronize_stream_with_timeout(stream, 100) == SYNC_TIMEOUT
    ok(acl, long_op[1, stream](doomed, flag))  # queued behind it: dropped
    before = hbm_free(acl)
    ok(acl, acl.rt.destroy_stream_force(stream))
    ok(acl, acl.rt.free(doomed))
    to_device(acl, flag, np.array([1], np.uint64))          # lets a kernel that runs on write
    assert wait_until(lambda: hbm_free(acl) > before)       # everything it used is released
    again = device_buffer(acl, 4096)
    assert from_device(acl, flag, 8, np.uint64)[0] == 1     # its "flag = 2" went nowhere
    assert from_device(acl, result, 4, np.uint32)[0] == 0   # nor its "result += 1"
    assert from_device(acl, again, 4096).max() == 0


@pytest.mark.parametrize("teardown", ["destroy_context", "reset_device_force"])
def test_context_and_device_teardown_stop_a_running_kernel(dev, tmp_path, teardown):
    """The kernel of a stream of the torn-down context (or device), blocked in a system call
    and swallowing the stop, writes nowhere when it comes back: not into the allocations
    made after the teardown, which may take its freed address only once it has ended."""
    acl = dev
    fifo = str(tmp_path / "kernel.fifo")
    os.mkfifo(fifo)

    @kernel
    def blocked_op(ctx, out: ptr, kept: ptr):
        result, other = ctx.gm(out, np.uint8, 4096), ctx.gm(kept, np.uint8, 4096)
        try:
            with open(fifo, "rb") as f:
                f.read(1)
        except BaseException:
            pass
        result[:] = 0xBA
        other[:] = 0xBA

    if teardown == "destroy_context":
        context = out(acl, acl.rt.create_context(0))
    stream = out(acl, acl.rt.create_stream())    # reset_device_force: of the default context
    result = device_buffer(acl, 4096)
    # memory of the process that outlives a destroyed context: the kernel still names it when
    # it comes back (a reset frees every allocation of the device: then the result itself)
    kept = device_buffer(acl, 4096) if teardown == "destroy_context" else result
    ok(acl, blocked_op[1, stream](result, kept))
    assert acl.rt.synchronize_stream_with_timeout(stream, 100) == SYNC_TIMEOUT
    if teardown == "destroy_context":
        ok(acl, acl.rt.free(result))                 # memory is the process's: freed by hand
        ok(acl, acl.rt.destroy_context(context))
    else:
        ok(acl, acl.rt.reset_device_force(0))        # frees every allocation of the device
    ok(acl, acl.rt.set_device(0))
    later = [device_buffer(acl, 4096) for _ in range(4)]
    assert result not in later                       # its range is in use while it runs
    held = hbm_free(acl)
    _release(fifo)
    assert wait_until(lambda: hbm_free(acl) > held)  # it ended: its range is back
    later.append(device_buffer(acl, 4096))
    assert all(from_device(acl, p, 4096).max() == 0 for p in later)
    if kept != result:
        assert from_device(acl, kept, 4096).max() == 0   # cut off memory: its write went nowhere
        ok(acl, acl.rt.free(kept))


def test_free_while_a_kernel_runs_keeps_the_range(dev):
    """Freeing memory a running kernel uses is the program's error (memcheck reports it);
    the range is not handed out again (to this process or another) before the kernel ends."""
    acl = dev
    stream = out(acl, acl.rt.create_stream())
    with sanitizer.checking("memcheck") as found:
        result, flag = hung(acl, stream)
        before = hbm_free(acl)
        ok(acl, acl.rt.free(result))
    assert [(r.checker, r.kind) for r in found] == [("memcheck", "free of memory in use")]
    assert "long_op" in found[0].lines[1], found[0].lines
    assert hbm_free(acl) == before                           # still in use
    other = device_buffer(acl, 4096)
    assert not result <= other < result + 4096
    busy = hbm_free(acl)
    to_device(acl, flag, np.array([1], np.uint64))
    ok(acl, acl.rt.synchronize_stream(stream))               # the kernel ran to its end ...
    assert from_device(acl, flag, 8, np.uint64)[0] == 2      # ... writing through its views
    assert from_device(acl, other, 4096).max() == 0          # not into the newer allocation
    assert wait_until(lambda: hbm_free(acl) > busy)          # result's range is free now


@pytest.mark.parametrize("how", ["abort", "stop"])
def test_abort_and_stop_stop_the_running_kernel(dev, how):
    """1_stream_with_failure_mode: abort on an ordinary stream (the sync reports the abort),
    stop on a DEVICE_USE_ONLY stream (the sync reports 507000); the stopped kernel writes
    nothing, the stream works on."""
    acl = dev
    flags = DEVICE_USE_ONLY if how == "stop" else 0
    stream = out(acl, acl.rt.create_stream_with_config(0, flags))
    result, flag = device_buffer(acl, 4096), device_buffer(acl, 4096)
    ok(acl, long_op[1, stream](result, flag))
    if how == "abort":
        assert acl.rt.synchronize_stream_with_timeout(stream, 100) == SYNC_TIMEOUT
        ok(acl, acl.rt.stream_abort(stream))
        assert acl.rt.synchronize_stream_with_timeout(stream, 10000) == ABORTED
    else:
        ok(acl, acl.rt.stream_stop(stream))
        assert acl.rt.synchronize_stream(stream) == INTERNAL
    to_device(acl, flag, np.array([1], np.uint64))
    assert wait_until(lambda: acl.rt.stream_query(stream) == (acl.ACL_STREAM_STATUS_COMPLETE, 0))
    assert from_device(acl, result, 4, np.uint32)[0] == 0
    assert from_device(acl, flag, 8, np.uint64)[0] == 1
    ok(acl, acl.rt.memset_async(result, 4, 7, 4, stream))       # the stream works on
    ok(acl, acl.rt.synchronize_stream_with_timeout(stream, 10000))
    if how == "abort":
        assert from_device(acl, result, 1)[0] == 7
    ok(acl, acl.rt.destroy_stream_force(stream))


def test_stop_and_abort_rules(dev):
    """aclrtStreamStop takes only a DEVICE_USE_ONLY stream on A2/A3 (the runtime's own test:
    a plain stream gets ACL_ERROR_RT_FEATURE_NOT_SUPPORT), aclrtStreamAbort only one that is
    not (the sample's README); neither a model-bound stream."""
    acl = dev
    assert DEVICE_USE_ONLY == acl.ACL_STREAM_DEVICE_USE_ONLY
    assert acl.rt.stream_stop(0) == 100000                       # not the default stream
    head = out(acl, acl.rt.create_stream_with_config(0, 0x4))    # ACL_STREAM_PERSISTENT
    model = out(acl, acl.mdl.ri_build_begin(0))
    ok(acl, acl.mdl.ri_bind_stream(model, head, 0))
    assert acl.rt.stream_stop(head) == NOT_SUPPORT               # bound to a model
    assert acl.rt.stream_abort(head) == NOT_SUPPORT
    plain = out(acl, acl.rt.create_stream())
    cpu = out(acl, acl.rt.create_stream_with_config(0, acl.ACL_STREAM_CPU_SCHEDULE))
    assert acl.rt.stream_stop(plain) == NOT_SUPPORT              # not DEVICE_USE_ONLY
    assert acl.rt.stream_stop(cpu) == NOT_SUPPORT
    idle = out(acl, acl.rt.create_stream_with_config(0, DEVICE_USE_ONLY))
    assert acl.rt.stream_abort(idle) == NOT_SUPPORT
    ok(acl, acl.rt.stream_stop(idle))
    assert acl.rt.synchronize_stream(idle) == INTERNAL           # reported once
    ok(acl, acl.rt.synchronize_stream(idle))


@kernel
def error_op(ctx, out: ptr):
    ctx.gm(out, np.uint32, 1)[0] = 1 // 0


def test_failure_mode_sample_stop_and_abort_in_a_stopped_context(dev):
    """1_stream_with_failure_mode in its order: its stop-on-failure part leaves the context
    stopped (507035), then its stop demo (a DEVICE_USE_ONLY stream) and abort demo (a new
    ordinary stream) run there; the README's output: the sync after the stop returns
    507000, the one after the abort 507035."""
    acl = dev
    VECTOR_FAULT = 507035                                       # ACL_ERROR_RT_VECTOR_CORE_EXCEPTION
    context = out(acl, acl.rt.create_context(0))
    stream = out(acl, acl.rt.create_stream())
    num = device_buffer(acl, 4096)
    ok(acl, acl.rt.set_stream_failure_mode(stream, acl.ACL_STOP_ON_FAILURE))
    ok(acl, error_op[1, stream](num))
    assert acl.rt.synchronize_stream(stream) == VECTOR_FAULT
    flag = device_buffer(acl, 4096)
    stop_stream = out(acl, acl.rt.create_stream_with_config(0, DEVICE_USE_ONLY))
    assert long_op[1, stop_stream](num, flag) == VECTOR_FAULT   # the stopped context refuses it
    ok(acl, acl.rt.stream_stop(stop_stream))
    assert acl.rt.synchronize_stream(stop_stream) == INTERNAL   # "(after stop) returned 507000"
    abort_stream = out(acl, acl.rt.create_stream())
    assert long_op[1, abort_stream](num, flag) == VECTOR_FAULT
    ok(acl, acl.rt.stream_abort(abort_stream))
    assert acl.rt.synchronize_stream(abort_stream) == VECTOR_FAULT  # "(after abort) returned 507035"
    for s in (stop_stream, abort_stream, stream):
        ok(acl, acl.rt.destroy_stream_force(s))
    ok(acl, acl.rt.destroy_context(context))


def test_stream_state_callbacks(acl):
    seen = []
    tag = "stream_failure_mode_sample"
    ok(acl, acl.init())
    ok(acl, acl.rt.reg_stream_state_callback(tag, lambda s, state, args: seen.append((s, state, args)), tag))
    assert acl.rt.reg_stream_state_callback(tag, print, None) == 107000       # a name registers once
    assert acl.rt.reg_stream_state_callback("", print, None) == 107000
    ok(acl, acl.rt.set_device(0))                       # the default stream is created
    default = out(acl, acl.rt.ctx_get_current_default_stream())
    stream = out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.destroy_stream(stream))
    assert seen == [(default, acl.ACL_RT_STREAM_STATE_CREATE_POST, tag), (stream, 1, tag),
                    (stream, acl.ACL_RT_STREAM_STATE_DESTROY_PRE, tag)]
    ok(acl, acl.rt.reg_stream_state_callback(tag, None, None))
    ok(acl, acl.rt.reg_stream_state_callback(tag, None, None))   # unregistering twice is fine
    ok(acl, acl.rt.destroy_stream(out(acl, acl.rt.create_stream())))
    assert len(seen) == 3
    ok(acl, acl.finalize())


# ---------------------------------------------------------------------------- other processes
PEER_KERNEL = """
from mdev.kernel import kernel, ptr

@kernel
def blocked_op(ctx, out: ptr):
    # blocks in a system call (a stop can interrupt only Python code), and swallows the stop
    result = ctx.gm(out, np.uint32, 1)
    try:
        with open(FIFO, "rb") as f:
            f.read(1)
    except BaseException:
        pass
    result[0] = 0xBAD

ok(acl.init()); ok(acl.rt.set_device(1))
s, ret = acl.rt.create_stream(); ok(ret)
res, ret = acl.rt.malloc(2 << 20, 1); ok(ret)          # huge pages: a 2 MiB range
ok(acl.rt.memset(res, 2 << 20, 0, 2 << 20))
ok(blocked_op[1, s](res))
assert acl.rt.synchronize_stream_with_timeout(s, 100) == 507046
"""


def _release(fifo) -> None:
    """Let a kernel blocked reading ``fifo`` go on (once it has the read end open)."""
    def released() -> bool:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:              # ENXIO: no reader yet
            return False
        try:
            os.write(fd, b"x")
        except BrokenPipeError:      # the open alone woke it, and the stop ended it there
            pass
        os.close(fd)
        return True
    assert wait_until(released)


@pytest.mark.parametrize("ending", ["finalize", "exit", "kill"])
def test_a_process_teardown_stops_its_work(acl, board, tmp_path, ending):
    """A peer's kernel, hung in a system call, outlives neither the peer's finalize nor
    its exit nor its death: the range it uses is not given to this process while it still
    runs, and what it writes when it comes back lands nowhere."""
    ok(acl, acl.rt.set_device(1))
    fifo = str(tmp_path / "kernel.fifo")
    os.mkfifo(fifo)
    peer = Peer(board)
    peer.do(PEER_KERNEL, FIFO=fifo)
    peer_res = peer.ev("res")
    if ending == "finalize":
        peer.do("ok(acl.finalize())")
        peer.close()
    elif ending == "exit":
        peer.close()                      # the interpreter ends without aclFinalize
    else:
        peer.kill()
    mine = device_buffer(acl, 2 << 20)
    assert not (peer_res <= mine < peer_res + (2 << 20))     # the kernel's range is still in use
    held = hbm_free(acl)
    _release(fifo)
    assert wait_until(lambda: hbm_free(acl) > held)          # it ended: its memory is back
    assert from_device(acl, mine, 2 << 20).max() == 0
    ok(acl, acl.rt.free(mine))


MULTI_STREAM = """
import numpy as np, time
import mdev.acl as acl
from mdev.kernel import kernel, ptr

@kernel
def long_op(ctx, x: ptr):          # "x += 1", slowly (the sample's LongOP)
    time.sleep(1.5)
    v = ctx.gm(x, np.uint32, 1)
    v[0] += 1

@kernel
def short_op(ctx, x: ptr):         # "x *= 2"
    v = ctx.gm(x, np.uint32, 1)
    v[0] *= 2

def ok(ret):
    assert ret == 0, (ret, acl.get_recent_err_msg())

def answer(host):
    return int(np.frombuffer(host, np.uint32)[0])

results = []
for round_ in range(2):            # StreamSynchronization, then EventSynchronization
    acl.init()
    ok(acl.rt.set_device(0))
    ctx, ret = acl.rt.create_context(0); ok(ret)
    s1, ret = acl.rt.create_stream(); ok(ret)
    s2, ret = acl.rt.create_stream(); ok(ret)
    ok(acl.rt.set_stream_failure_mode(s1, 1)); ok(acl.rt.set_stream_failure_mode(s2, 1))
    ev, ret = acl.rt.create_event(); ok(ret)
    num, ret = acl.rt.malloc(4, 0); ok(ret)
    host = np.zeros(1, np.uint32)
    ok(acl.rt.memcpy(num, 4, acl.util.numpy_to_ptr(host), 4, 1))
    ok(long_op[1, s1](num))
    ok(acl.rt.record_event(ev, s1))
    ok(acl.rt.stream_wait_event(s2, ev))
    ok(acl.rt.reset_event(ev, s2))
    ok(short_op[1, s2](num))
    ok(acl.rt.record_event(ev, s2))
    ok(acl.rt.synchronize_event(ev))
    ok(acl.rt.memcpy(acl.util.numpy_to_ptr(host), 4, num, 4, 2))
    results.append(answer(host))                                         # "The answer is 2."
    ok(long_op[1, s1](num))                                              # "Simulate timeout"
    ok(acl.rt.record_event(ev, s1))
    assert acl.rt.synchronize_event_with_timeout(ev, 1000) == 507047
    ok(acl.rt.free(num)); ok(acl.rt.destroy_event(ev))
    ok(acl.rt.destroy_stream_force(s1)); ok(acl.rt.destroy_stream_force(s2))
    ok(acl.rt.destroy_context(ctx)); ok(acl.rt.reset_device_force(0))
    acl.finalize()
time.sleep(1.5)                    # past the end of the second timed-out kernel
print("answers", results)
"""


def test_multi_stream_sample_flow(run_py, board):
    """2_multi_stream: the first round's timed-out LongOP must not add 1 to the second
    round's num (the same address, after finalize and init)."""
    proc = run_py(MULTI_STREAM, board, timeout=120)
    assert "answers [2, 2]" in proc.stdout
