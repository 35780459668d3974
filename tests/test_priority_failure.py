"""Stream priorities (ready work of the higher-priority stream takes a free engine first,
running work is never pre-empted) and failure modes (asynchronous task failures, stop-on-
failure vs continue-on-failure, the per-thread last error), with the failures the runtime
can meet: a raising host callback, a copy whose source was freed while queued, a value
wait that times out, and stream_abort."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from async_util import device_buffer, ok, out, stream_done
from helpers import from_device, wait_until



def _boom(_):
    raise RuntimeError("injected host callback failure")


# ---------------------------------------------------------------------------- priority API
def test_priority_range_and_clamping(acl):
    ok(acl, acl.rt.set_device(0))
    least, greatest, ret = acl.rt.device_get_stream_priority_range()
    assert (least, greatest, ret) == (7, 0, acl.ACL_SUCCESS)
    for asked, stored in ((0, 0), (3, 3), (7, 7), (9, 7), (-1, 0)):
        stream = out(acl, acl.rt.create_stream_with_config(asked, 0))
        assert out(acl, acl.rt.stream_get_priority(stream)) == stored
        assert out(acl, acl.rt.get_stream_attribute(stream, acl.ACL_STREAM_ATTR_PRIORITY)) == stored
        ok(acl, acl.rt.destroy_stream(stream))
    assert out(acl, acl.rt.stream_get_priority(0)) == 0          # default stream: highest
    plain = out(acl, acl.rt.create_stream())
    assert out(acl, acl.rt.stream_get_priority(plain)) == 0
    ok(acl, acl.rt.set_stream_attribute(plain, acl.ACL_STREAM_ATTR_PRIORITY, 5))
    assert out(acl, acl.rt.stream_get_priority(plain)) == 5
    assert acl.rt.set_stream_attribute(plain, acl.ACL_STREAM_ATTR_PRIORITY, 8) == acl.ACL_ERROR_INVALID_PARAM
    fast = out(acl, acl.rt.create_stream_with_config(greatest, acl.ACL_STREAM_FAST_LAUNCH))
    assert out(acl, acl.rt.stream_get_flags(fast)) == acl.ACL_STREAM_FAST_LAUNCH


ENGINE_PROGRAM = b"""
import time
import numpy as np
from mdev.kernel import kernel, ptr, int64

@kernel
def hold(ctx, flag: ptr):
    word = ctx.gm(flag, np.uint64, 1)
    while word[0] == 0:
        time.sleep(0.002)

@kernel
def take_turn(ctx, log: ptr, who: int64):
    entries = ctx.gm(log, np.int64, 3)
    entries[1 + entries[0]] = who
    entries[0] += 1
"""


def _engine_stats(engine: str) -> tuple[int, int]:
    from mdev.runtime.core import RUNTIME
    stats = RUNTIME.link(0).request("stats")
    return stats["engines"][engine], stats["engines_waiting"][engine]


def test_higher_priority_stream_gets_the_free_engine_first(acl):
    """Every AI CPU slot is held by a running kernel (stream X) until the test writes its
    flag; meanwhile a task is queued on a priority-7 stream, then one on a priority-0
    stream.  When the slots free, the priority-0 task runs first although it was queued
    later, and neither pre-empted the running kernel."""
    ok(acl, acl.rt.set_device(0))
    handle = out(acl, acl.rt.binary_load(acl.rt.create_binary(ENGINE_PROGRAM, len(ENGINE_PROGRAM))))
    hold = out(acl, acl.rt.register_cpu_func(handle, "hold", "hold"))
    take_turn = out(acl, acl.rt.register_cpu_func(handle, "take_turn", "take_turn"))
    slots = out(acl, acl.rt.get_device_info(0, acl.ACL_DEV_ATTR_AICPU_CORE_NUM))
    x = out(acl, acl.rt.create_stream())
    low = out(acl, acl.rt.create_stream_with_config(7, 0))
    high = out(acl, acl.rt.create_stream_with_config(0, 0))
    flag, log = device_buffer(acl, 8), device_buffer(acl, 24)

    def launch(func, stream, *words):
        args = b"".join(int(w).to_bytes(8, "little") for w in words)
        ok(acl, acl.rt.launch_kernel_with_host_args(func, slots if func == hold else 1, stream, None,
                                                    args, len(args), None, 0))

    launch(hold, x, flag)
    assert wait_until(lambda: _engine_stats("aicpu") == (slots, 0))
    launch(take_turn, low, log, 7)
    launch(take_turn, high, log, 0)
    assert wait_until(lambda: _engine_stats("aicpu") == (slots, 2))      # both queued behind the kernel
    assert (from_device(acl, log, 24) == 0).all()
    ok(acl, acl.rt.memcpy(flag, 8, np.array([1], np.uint64).ctypes.data, 8, acl.ACL_MEMCPY_HOST_TO_DEVICE))
    for s in (x, low, high):
        ok(acl, acl.rt.synchronize_stream(s))
    assert from_device(acl, log, 24).view(np.int64).tolist() == [2, 0, 7]


# ---------------------------------------------------------------------------- failure mode API
def test_failure_mode_attribute(acl):
    ok(acl, acl.rt.set_device(0))
    s1, s2, s3 = (out(acl, acl.rt.create_stream()) for _ in range(3))
    assert (acl.ACL_CONTINUE_ON_FAILURE, acl.ACL_STOP_ON_FAILURE) == (0, 1)
    assert out(acl, acl.rt.get_stream_attribute(s1, acl.ACL_STREAM_ATTR_FAILURE_MODE)) == 0
    ok(acl, acl.rt.set_stream_failure_mode(s1, acl.ACL_STOP_ON_FAILURE))
    assert out(acl, acl.rt.get_stream_attribute(s1, acl.ACL_STREAM_ATTR_FAILURE_MODE)) == 1
    ok(acl, acl.rt.set_stream_failure_mode(s1, acl.ACL_STOP_ON_FAILURE))      # same mode again: accepted
    assert acl.rt.set_stream_failure_mode(s1, acl.ACL_CONTINUE_ON_FAILURE) == acl.ACL_ERROR_RT_PARAM_INVALID
    ok(acl, acl.rt.set_stream_attribute(s2, acl.ACL_STREAM_ATTR_FAILURE_MODE, acl.ACL_STOP_ON_FAILURE))
    assert out(acl, acl.rt.get_stream_attribute(s2, acl.ACL_STREAM_ATTR_FAILURE_MODE)) == 1
    ok(acl, acl.rt.set_stream_attribute(s3, acl.ACL_STREAM_ATTR_FAILURE_MODE, {"failureMode": 0}))
    assert out(acl, acl.rt.get_stream_attribute(s3, acl.ACL_STREAM_ATTR_FAILURE_MODE)) == 0
    assert acl.rt.set_stream_failure_mode(s3, 2) == acl.ACL_ERROR_INVALID_PARAM
    ok(acl, acl.rt.set_stream_failure_mode(0, acl.ACL_CONTINUE_ON_FAILURE))   # default stream allowed
    ok(acl, acl.rt.set_device(1))
    assert acl.rt.set_stream_failure_mode(s3, acl.ACL_STOP_ON_FAILURE) == acl.ACL_ERROR_RT_STREAM_CONTEXT


# ---------------------------------------------------------------------------- failures, one by one
def _host_callback_failure(acl, stream):
    ok(acl, acl.rt.launch_host_func(stream, _boom, None))
    return acl.ACL_ERROR_RT_INTERNAL_ERROR, None


def _freed_source_failure(acl, stream):
    """memcpy_async whose source is freed while the copy waits in the queue."""
    hold = device_buffer(acl, 8)
    src, dst = device_buffer(acl, 4096), device_buffer(acl, 4096)
    ok(acl, acl.rt.value_wait(hold, 1, acl.ACL_STREAM_WAIT_VALUE_EQ, stream))
    ok(acl, acl.rt.memcpy_async(dst, 4096, src, 4096, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, stream))
    ok(acl, acl.rt.free(src))
    return acl.ACL_ERROR_RT_SYS_DMA, lambda: ok(acl, acl.rt.memset(hold, 8, 1, 1))


def _value_wait_timeout_failure(acl, stream):
    word = device_buffer(acl, 8)
    ok(acl, acl.rt.set_op_wait_timeout(1))
    ok(acl, acl.rt.value_wait(word, 1, acl.ACL_STREAM_WAIT_VALUE_EQ, stream))
    ok(acl, acl.rt.set_op_wait_timeout(0))     # applies to waits submitted later
    return acl.ACL_ERROR_RT_TASK_TIMEOUT, None


def _abort_failure(acl, stream):
    word = device_buffer(acl, 8)
    ok(acl, acl.rt.value_wait(word, 1, acl.ACL_STREAM_WAIT_VALUE_EQ, stream))
    return acl.ACL_ERROR_RT_STREAM_ABORT, lambda: (time.sleep(0.05), ok(acl, acl.rt.stream_abort(stream)))


FAILURES = {
    "host_callback_raises": _host_callback_failure,
    "copy_source_freed": _freed_source_failure,
    "value_wait_timeout": _value_wait_timeout_failure,
    "stream_abort": _abort_failure,
}


@pytest.mark.parametrize("kind", sorted(FAILURES))
def test_task_failure_is_asynchronous(acl, kind):
    """Submitting succeeds; the next sync of the stream returns the code; the syncing thread's
    last error holds it until get_last_error resets it; the stream is usable afterwards."""
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    code, trigger = FAILURES[kind](acl, stream)
    assert acl.rt.peek_at_last_error() == acl.ACL_SUCCESS      # every submission succeeded
    if trigger:
        trigger()
    assert acl.rt.synchronize_stream(stream) == code
    assert acl.get_recent_err_msg()
    assert acl.rt.peek_at_last_error() == code
    assert acl.rt.get_last_error() == code
    assert acl.rt.get_last_error() == acl.ACL_SUCCESS
    ok(acl, acl.rt.synchronize_stream(stream))               # reported once
    word = device_buffer(acl, 8)
    ok(acl, acl.rt.value_write(word, 99, 0, stream))
    ok(acl, acl.rt.synchronize_stream(stream))
    assert from_device(acl, word, 8, np.uint64)[0] == 99


@pytest.mark.parametrize("kind", sorted(FAILURES))
def test_synchronize_device_reports_task_failure(acl, kind):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    code, trigger = FAILURES[kind](acl, stream)
    if trigger:
        trigger()
    assert acl.rt.synchronize_device() == code
    assert acl.rt.get_last_error() == code


def test_continue_on_failure_runs_later_tasks(acl):
    ok(acl, acl.rt.set_device(0))
    stream, other = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    marks = device_buffer(acl, 16)
    ok(acl, acl.rt.launch_host_func(stream, _boom, None))
    ok(acl, acl.rt.value_write(marks, 1, 0, stream))           # after the failure: runs
    ok(acl, acl.rt.value_write(marks + 8, 2, 0, other))        # another stream: unaffected
    ok(acl, acl.rt.synchronize_stream(other))
    assert acl.rt.synchronize_stream(stream) == acl.ACL_ERROR_RT_INTERNAL_ERROR
    assert list(from_device(acl, marks, 16, np.uint64)) == [1, 2]
    ok(acl, acl.rt.value_write(marks, 3, 0, stream))           # new submissions accepted
    ok(acl, acl.rt.synchronize_stream(stream))
    assert from_device(acl, marks, 8, np.uint64)[0] == 3


# ---------------------------------------------------------------------------- stop on failure
def _stop_setup(acl):
    ok(acl, acl.rt.set_device(0))
    failing, sibling = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.set_stream_failure_mode(failing, acl.ACL_STOP_ON_FAILURE))
    return failing, sibling


def test_stop_on_failure_stops_the_context(acl):
    failing, sibling = _stop_setup(acl)
    hold = device_buffer(acl, 8)
    marks = device_buffer(acl, 24)
    # the sibling stream has queued work behind a wait when the failure happens
    ok(acl, acl.rt.value_wait(hold, 1, acl.ACL_STREAM_WAIT_VALUE_EQ, sibling))
    ok(acl, acl.rt.value_write(marks + 8, 2, 0, sibling))
    ok(acl, acl.rt.launch_host_func(failing, _boom, None))
    ok(acl, acl.rt.value_write(marks, 1, 0, failing))          # after the failure: dropped
    code = acl.ACL_ERROR_RT_INTERNAL_ERROR
    assert acl.rt.synchronize_stream(failing) == code
    ok(acl, acl.rt.memset(hold, 8, 1, 1))                      # let the sibling's wait finish
    assert acl.rt.synchronize_stream(sibling) == code
    assert list(from_device(acl, marks, 24, np.uint64)) == [0, 0, 0]   # nothing ran after the failure
    # later sync calls keep returning the error, new submissions are refused with it
    assert acl.rt.synchronize_stream(failing) == code
    assert acl.rt.synchronize_device() == code
    assert acl.rt.value_write(marks + 16, 3, 0, sibling) == code
    assert acl.rt.memset_async(marks, 8, 1, 8, 0) == code     # the context's default stream too
    assert acl.rt.get_last_error() == code
    late = out(acl, acl.rt.create_stream())
    assert acl.rt.value_write(marks + 16, 3, 0, late) == code
    assert list(from_device(acl, marks, 24, np.uint64)) == [0, 0, 0]


def test_stop_on_failure_leaves_other_contexts_alone(acl):
    failing, _ = _stop_setup(acl)
    ok(acl, acl.rt.launch_host_func(failing, _boom, None))
    assert acl.rt.synchronize_stream(failing) == acl.ACL_ERROR_RT_INTERNAL_ERROR
    # an explicit context on the same device, and the default context of device 1
    ctx = out(acl, acl.rt.create_context(0))
    stream = out(acl, acl.rt.create_stream())
    word = device_buffer(acl, 8)
    ok(acl, acl.rt.value_write(word, 4, 0, stream))
    ok(acl, acl.rt.synchronize_stream(stream))
    assert from_device(acl, word, 8, np.uint64)[0] == 4
    ok(acl, acl.rt.destroy_stream(stream))
    ok(acl, acl.rt.destroy_context(ctx))
    ok(acl, acl.rt.set_device(1))
    ok(acl, acl.rt.value_write(device_buffer(acl, 8), 1, 0, 0))
    ok(acl, acl.rt.synchronize_device())


def test_stop_on_failure_interrupts_a_blocked_sibling(acl):
    """A sibling stream blocked in a wait that nobody will release: the stopped context's
    sync calls return the failure instead of hanging."""
    failing, sibling = _stop_setup(acl)
    hold = device_buffer(acl, 8)
    ok(acl, acl.rt.value_wait(hold, 1, acl.ACL_STREAM_WAIT_VALUE_EQ, sibling))
    ok(acl, acl.rt.launch_host_func(failing, _boom, None))
    code = acl.ACL_ERROR_RT_INTERNAL_ERROR
    assert acl.rt.synchronize_stream(failing) == code
    assert acl.rt.synchronize_stream_with_timeout(sibling, 3000) == code
    assert acl.rt.synchronize_device_with_timeout(3000) == code


def test_stop_on_failure_set_through_attribute(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.set_stream_attribute(stream, acl.ACL_STREAM_ATTR_FAILURE_MODE, acl.ACL_STOP_ON_FAILURE))
    word = device_buffer(acl, 8)
    ok(acl, acl.rt.launch_host_func(stream, _boom, None))
    ok(acl, acl.rt.value_write(word, 1, 0, stream))
    assert acl.rt.synchronize_stream(stream) == acl.ACL_ERROR_RT_INTERNAL_ERROR
    assert from_device(acl, word, 8, np.uint64)[0] == 0


def test_error_reaches_only_the_syncing_thread(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.launch_host_func(stream, _boom, None))
    seen = {}

    def syncer():
        ok(acl, acl.rt.set_device(0))
        seen["ret"] = acl.rt.synchronize_stream(stream)
        seen["peek"] = acl.rt.peek_at_last_error()

    t = threading.Thread(target=syncer)
    t.start()
    t.join(20)
    assert seen == {"ret": acl.ACL_ERROR_RT_INTERNAL_ERROR, "peek": acl.ACL_ERROR_RT_INTERNAL_ERROR}
    assert acl.rt.peek_at_last_error() == acl.ACL_SUCCESS


def test_abort_drops_queued_work(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    hold = device_buffer(acl, 8)
    marks = device_buffer(acl, 8 * 10)
    ok(acl, acl.rt.value_wait(hold, 1, acl.ACL_STREAM_WAIT_VALUE_EQ, stream))
    for i in range(10):
        ok(acl, acl.rt.value_write(marks + 8 * i, i + 1, 0, stream))
    time.sleep(0.05)
    t0 = time.monotonic()
    ok(acl, acl.rt.stream_abort(stream))
    assert acl.rt.synchronize_stream_with_timeout(stream, 5000) == acl.ACL_ERROR_RT_STREAM_ABORT
    assert time.monotonic() - t0 < 2
    assert wait_until(lambda: stream_done(acl, stream))
    assert not from_device(acl, marks, 80, np.uint64).any()
    ok(acl, acl.rt.value_write(marks, 5, 0, stream))          # the stream works again
    ok(acl, acl.rt.synchronize_stream(stream))
    assert from_device(acl, marks, 8, np.uint64)[0] == 5
