"""Host callbacks: launch_host_func, and launch_callback with the subscribe_report /
process_report thread pattern of pyACL programs."""

from __future__ import annotations

import threading
import time

import numpy as np
from async_util import device_buffer, ok, out, pinned, stream_done
from helpers import from_device


# ---------------------------------------------------------------------------- launch_host_func
def test_host_func_runs_after_earlier_work_and_holds_later_work(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    n = 1 << 16
    dev = device_buffer(acl, n)
    host_ptr, host = pinned(acl, n)
    seen = {}

    def host_func(args):
        # earlier work is done: the D2H copy's bytes are in the pinned buffer
        seen["before"] = int(host[0]), int(host[-1])
        seen["args"] = args
        seen["thread"] = threading.get_ident()
        time.sleep(0.2)
        host[:] = 0xEE          # later tasks must see this (they run after we return)
        seen["returned"] = time.monotonic()

    ok(acl, acl.rt.memset_async(dev, n, 0x42, n, stream))
    ok(acl, acl.rt.memcpy_async(host_ptr, n, dev, n, acl.ACL_MEMCPY_DEVICE_TO_HOST, stream))
    ok(acl, acl.rt.launch_host_func(stream, host_func, {"tag": 7}))
    ok(acl, acl.rt.memcpy_async(dev, n, host_ptr, n, acl.ACL_MEMCPY_HOST_TO_DEVICE, stream))
    assert "returned" not in seen                 # launching does not wait for the 0.2 s func
    ok(acl, acl.rt.synchronize_stream(stream))
    assert seen["before"] == (0x42, 0x42)
    assert seen["args"] == {"tag": 7}
    assert seen["thread"] != threading.get_ident()
    assert (from_device(acl, dev, n) == 0xEE).all()
    ok(acl, acl.rt.free_host(host_ptr))


def test_host_funcs_keep_stream_order(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    order = []
    word = device_buffer(acl, 8)
    for i in range(20):
        ok(acl, acl.rt.launch_host_func(stream, order.append, i))
        ok(acl, acl.rt.value_write(word, i, 0, stream))
    ok(acl, acl.rt.synchronize_stream(stream))
    assert order == list(range(20))


def test_host_func_on_default_stream_and_several_devices(acl):
    done = []
    for dev in (0, 1):
        ok(acl, acl.rt.set_device(dev))
        ok(acl, acl.rt.launch_host_func(0, done.append, dev))
        ok(acl, acl.rt.synchronize_stream(0))
    assert done == [0, 1]


def test_host_func_argument_errors(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    assert acl.rt.launch_host_func(stream, None, None) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.launch_host_func(stream, 42, None) == acl.ACL_ERROR_INVALID_PARAM


def test_raising_host_func_is_a_task_failure(acl):
    """The runtime survives; the stream's next sync reports it; later work still runs."""
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    word = device_buffer(acl, 8)

    def boom(_):
        raise ValueError("host func failed")

    ret = acl.rt.launch_host_func(stream, boom, None)
    assert ret == acl.ACL_SUCCESS                         # submission succeeds
    ok(acl, acl.rt.value_write(word, 11, 0, stream))
    assert acl.rt.peek_at_last_error() == acl.ACL_SUCCESS
    code = acl.rt.synchronize_stream(stream)
    assert code == acl.ACL_ERROR_RT_INTERNAL_ERROR
    assert "host func failed" in (acl.get_recent_err_msg() or "")
    assert acl.rt.peek_at_last_error() == code
    assert acl.rt.get_last_error() == code
    assert acl.rt.get_last_error() == acl.ACL_SUCCESS
    assert from_device(acl, word, 8, np.uint64)[0] == 11   # continue-on-failure
    ok(acl, acl.rt.synchronize_stream(stream))             # reported once
    # the host-func thread is alive: more callbacks run
    ran = []
    ok(acl, acl.rt.launch_host_func(stream, ran.append, 1))
    ok(acl, acl.rt.synchronize_stream(stream))
    assert ran == [1]


def test_host_func_failure_reported_to_the_syncing_thread(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.launch_host_func(stream, lambda _: 1 / 0, None))
    result = {}

    def other_thread():
        ok(acl, acl.rt.set_device(0))
        result["sync"] = acl.rt.synchronize_stream(stream)
        result["last"] = acl.rt.get_last_error()

    t = threading.Thread(target=other_thread)
    t.start()
    t.join(20)
    assert result == {"sync": acl.ACL_ERROR_RT_INTERNAL_ERROR, "last": acl.ACL_ERROR_RT_INTERNAL_ERROR}
    assert acl.rt.get_last_error() == acl.ACL_SUCCESS     # not this thread's error


# ---------------------------------------------------------------------------- subscribe / report
class ReportThread:
    """The pyACL sample pattern: a thread from acl.util.start_thread loops on process_report."""

    def __init__(self, acl, timeout_ms: int = 100) -> None:
        self.acl = acl
        self.timeout_ms = timeout_ms
        self.running = True
        self.rets: list[int] = []
        self.idents: list[int] = []
        context, ret = acl.rt.get_context()
        ok(acl, ret)
        tid, ret = acl.util.start_thread(self._loop, [context, timeout_ms])
        ok(acl, ret)
        self.tid = tid

    def _loop(self, args_list):
        context, timeout_ms = args_list
        self.rets.append(self.acl.rt.set_context(context))
        while self.running:
            ret = self.acl.rt.process_report(timeout_ms)
            self.rets.append(ret)

    def stop(self) -> int:
        self.running = False
        return self.acl.util.stop_thread(self.tid)


def test_report_thread_pattern(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    reporter = ReportThread(acl)
    assert isinstance(reporter.tid, int) and reporter.tid > 0
    ok(acl, acl.rt.subscribe_report(reporter.tid, stream))
    time.sleep(0.25)               # idle: process_report times out meanwhile
    calls = []

    def callback(user_data):
        calls.append((user_data, threading.get_ident()))

    word = device_buffer(acl, 8)
    for i in range(5):
        ok(acl, acl.rt.value_write(word, i, 0, stream))
        ok(acl, acl.rt.launch_callback(callback, i, acl.ACL_CALLBACK_BLOCK, stream))
    ok(acl, acl.rt.synchronize_stream(stream))
    assert calls == [(i, reporter.tid) for i in range(5)]
    ok(acl, acl.rt.unsubscribe_report(reporter.tid, stream))
    assert reporter.stop() == acl.ACL_SUCCESS
    assert acl.ACL_SUCCESS in reporter.rets
    # while idle, process_report timed out with its documented code; before subscribe_report
    # and after unsubscribe_report the thread is not subscribed
    assert acl.ACL_ERROR_RT_REPORT_TIMEOUT in reporter.rets
    assert set(reporter.rets) <= {acl.ACL_SUCCESS, acl.ACL_ERROR_RT_REPORT_TIMEOUT,
                                  acl.ACL_ERROR_RT_THREAD_SUBSCRIBE}


def test_blocking_callback_holds_later_work(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    reporter = ReportThread(acl)
    ok(acl, acl.rt.subscribe_report(reporter.tid, stream))
    release = threading.Event()
    word = device_buffer(acl, 8)
    ok(acl, acl.rt.launch_callback(lambda _: release.wait(10), None, acl.ACL_CALLBACK_BLOCK, stream))
    ok(acl, acl.rt.value_write(word, 1, 0, stream))
    time.sleep(0.15)
    assert not stream_done(acl, stream)
    assert from_device(acl, word, 8, np.uint64)[0] == 0
    release.set()
    ok(acl, acl.rt.synchronize_stream(stream))
    assert from_device(acl, word, 8, np.uint64)[0] == 1
    ok(acl, acl.rt.unsubscribe_report(reporter.tid, stream))
    ok(acl, reporter.stop())


def test_non_blocking_callback_does_not_hold_the_stream(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    reporter = ReportThread(acl)
    ok(acl, acl.rt.subscribe_report(reporter.tid, stream))
    release, ran = threading.Event(), threading.Event()

    def slow(_):
        release.wait(10)
        ran.set()

    word = device_buffer(acl, 8)
    ok(acl, acl.rt.launch_callback(slow, None, acl.ACL_CALLBACK_NO_BLOCK, stream))
    ok(acl, acl.rt.value_write(word, 2, 0, stream))
    ok(acl, acl.rt.synchronize_stream_with_timeout(stream, 5000))   # not held by the callback
    assert from_device(acl, word, 8, np.uint64)[0] == 2
    assert not ran.is_set()
    release.set()
    assert ran.wait(5)
    ok(acl, acl.rt.unsubscribe_report(reporter.tid, stream))
    ok(acl, reporter.stop())


def test_one_thread_serves_several_streams(acl):
    ok(acl, acl.rt.set_device(0))
    streams = [out(acl, acl.rt.create_stream()) for _ in range(3)]
    reporter = ReportThread(acl)
    for s in streams:
        ok(acl, acl.rt.subscribe_report(reporter.tid, s))
    got = []
    for i, s in enumerate(streams):
        ok(acl, acl.rt.launch_callback(got.append, i, acl.ACL_CALLBACK_BLOCK, s))
    for s in streams:
        ok(acl, acl.rt.synchronize_stream(s))
    assert sorted(got) == [0, 1, 2]
    for s in streams:
        ok(acl, acl.rt.unsubscribe_report(reporter.tid, s))
    ok(acl, reporter.stop())


def test_raising_report_callback_is_a_task_failure(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    reporter = ReportThread(acl)
    ok(acl, acl.rt.subscribe_report(reporter.tid, stream))

    def boom(_):
        raise RuntimeError("report callback failed")

    ok(acl, acl.rt.launch_callback(boom, None, acl.ACL_CALLBACK_BLOCK, stream))
    assert acl.rt.synchronize_stream(stream) == acl.ACL_ERROR_RT_INTERNAL_ERROR
    # the report thread survived and serves the next callback
    got = []
    ok(acl, acl.rt.launch_callback(got.append, "after", acl.ACL_CALLBACK_BLOCK, stream))
    ok(acl, acl.rt.synchronize_stream(stream))
    assert got == ["after"]
    ok(acl, acl.rt.unsubscribe_report(reporter.tid, stream))
    ok(acl, reporter.stop())


def test_report_error_codes(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    # no subscriber
    assert acl.rt.launch_callback(print, None, acl.ACL_CALLBACK_BLOCK, stream) == acl.ACL_ERROR_RT_STREAM_NO_CB_REG
    # this thread is not subscribed
    assert acl.rt.process_report(10) == acl.ACL_ERROR_RT_THREAD_SUBSCRIBE
    reporter = ReportThread(acl)
    ok(acl, acl.rt.subscribe_report(reporter.tid, stream))
    assert acl.rt.subscribe_report(reporter.tid, stream) == acl.ACL_ERROR_RT_STREAM_SUBSCRIBE
    other = ReportThread(acl)
    assert acl.rt.subscribe_report(other.tid, stream) == acl.ACL_ERROR_RT_STREAM_SUBSCRIBE
    assert acl.rt.launch_callback(print, None, 2, stream) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.launch_callback("not callable", None, acl.ACL_CALLBACK_BLOCK, stream) == acl.ACL_ERROR_INVALID_PARAM
    ok(acl, acl.rt.unsubscribe_report(reporter.tid, stream))
    assert acl.rt.unsubscribe_report(reporter.tid, stream) == acl.ACL_ERROR_RT_STREAM_SUBSCRIBE
    assert acl.rt.launch_callback(print, None, acl.ACL_CALLBACK_BLOCK, stream) == acl.ACL_ERROR_RT_STREAM_NO_CB_REG
    # one report thread serves streams of one device only
    ok(acl, acl.rt.subscribe_report(reporter.tid, stream))
    ok(acl, acl.rt.set_device(1))
    stream1 = out(acl, acl.rt.create_stream())
    assert acl.rt.subscribe_report(reporter.tid, stream1) == acl.ACL_ERROR_RT_THREAD_SUBSCRIBE
    ok(acl, acl.rt.subscribe_report(other.tid, stream1))
    ok(acl, acl.rt.unsubscribe_report(other.tid, stream1))
    ok(acl, acl.rt.set_device(0))
    ok(acl, acl.rt.unsubscribe_report(reporter.tid, stream))
    ok(acl, reporter.stop())
    ok(acl, other.stop())
    assert acl.util.stop_thread(reporter.tid) == acl.ACL_ERROR_INVALID_PARAM   # stopped already


def test_process_report_timeouts(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    result = {}

    def worker():
        ok(acl, acl.rt.set_device(0))
        ok(acl, acl.rt.subscribe_report(threading.get_ident(), stream))
        for bad in (0, -2):
            result[bad] = acl.rt.process_report(bad)
        t0 = time.monotonic()
        result["timeout"] = acl.rt.process_report(150)
        result["waited"] = time.monotonic() - t0
        ok(acl, acl.rt.unsubscribe_report(threading.get_ident(), stream))

    t = threading.Thread(target=worker)
    t.start()
    t.join(10)
    assert result[0] == result[-2] == acl.ACL_ERROR_INVALID_PARAM
    assert result["timeout"] == acl.ACL_ERROR_RT_REPORT_TIMEOUT
    assert 0.14 <= result["waited"] < 2


def test_start_thread_shapes(acl):
    got = []
    tid, ret = acl.util.start_thread(got.append, ["a", 1])
    assert ret == acl.ACL_SUCCESS and isinstance(tid, int)
    assert acl.util.stop_thread(tid) == acl.ACL_SUCCESS     # joins it
    assert got == [["a", 1]]
    assert acl.util.start_thread(None, []) == (0, acl.ACL_ERROR_INVALID_PARAM)
    assert acl.util.stop_thread(12345) == acl.ACL_ERROR_INVALID_PARAM


def test_idle_sync_after_slot_reuse_is_quick(acl, board):
    """A stream slot freed by one process and reused by another: synchronising the new,
    empty stream returns at once (it must not wait for the old owner's messages)."""
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    for i in range(5):
        ok(acl, acl.rt.launch_host_func(stream, lambda _: None, None))
    ok(acl, acl.rt.synchronize_stream(stream))
    ok(acl, acl.rt.destroy_stream(stream))
    from mdev.runtime.devices.lifecycle import detach
    detach()                       # a new attachment: a new client of the devices
    ok(acl, acl.rt.set_device(0))
    fresh = out(acl, acl.rt.create_stream())
    t0 = time.monotonic()
    ok(acl, acl.rt.synchronize_stream(fresh))
    assert time.monotonic() - t0 < 1.0, "sync of an empty stream waited for another client's messages"


# ---------------------------------------------------------------------------- unsubscribing with work queued
def test_unsubscribed_host_func_thread_leaves_no_host_func_stranded(acl):
    """Host funcs queued for a subscribed thread that unsubscribes before running them run on
    the device's own host-func thread: the stream does not wait for ever."""
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    ran = []
    ok(acl, acl.rt.subscribe_host_func(threading.get_ident(), stream))    # never processes
    for i in range(3):
        ok(acl, acl.rt.launch_host_func(stream, lambda arg: ran.append((arg, threading.get_ident())), i))
    deadline = time.monotonic() + 10
    # host funcs block their stream: the device hands over the first, the rest wait behind it
    while not _queued("host_func_queues", threading.get_ident()) and time.monotonic() < deadline:
        time.sleep(0.01)
    ok(acl, acl.rt.unsubscribe_host_func(threading.get_ident(), stream))
    ok(acl, acl.rt.synchronize_stream_with_timeout(stream, 10_000))     # not 507046: nobody runs them
    assert [arg for arg, _ in ran] == [0, 1, 2]
    assert all(tid != threading.get_ident() for _, tid in ran)
    ok(acl, acl.rt.destroy_stream(stream))


def test_unsubscribed_report_thread_fails_its_queued_callbacks(acl):
    """A blocking callback queued for a report thread that unsubscribes without processing it
    fails as one reaching an unsubscribed stream does, and frees the stream."""
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    ran = []
    tid = threading.get_ident()
    ok(acl, acl.rt.subscribe_report(tid, stream))
    ok(acl, acl.rt.launch_callback(ran.append, 1, acl.ACL_CALLBACK_BLOCK, stream))
    deadline = time.monotonic() + 10
    while not _queued("reports", tid) and time.monotonic() < deadline:
        time.sleep(0.01)
    ok(acl, acl.rt.unsubscribe_report(tid, stream))
    assert acl.rt.synchronize_stream_with_timeout(stream, 10_000) == acl.ACL_ERROR_RT_STREAM_NO_CB_REG
    assert ran == []
    acl.rt.destroy_stream(stream)


def _queued(kind: str, tid: int) -> bool:
    """Whether a callback waits in thread ``tid``'s queue (kind: host_func_queues or reports)."""
    from mdev.runtime.execution import callbacks
    q = getattr(callbacks.hub(), kind).get(tid)
    return q is not None and q.qsize() > 0
