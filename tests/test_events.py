"""Events: the three creation APIs and their flags, record / wait / reset / query /
synchronise, snapshot semantics, timestamps, device affinity, and waits that do not burn
a core."""

from __future__ import annotations

import threading
import time

import numpy as np
import psutil
import pytest

from async_util import Gate, device_buffer, ok, out, pinned, stream_done
from helpers import from_device, wait_until
from mdev.board import launcher

SYNC, PROGRESS, TIME_LINE = 0x1, 0x2, 0x8           # checked against the constants below
DEVICE_USE_ONLY, EXTERNAL, IPC = 0x10, 0x20, 0x40


def test_flag_values(acl):
    assert (acl.ACL_EVENT_SYNC, acl.ACL_EVENT_CAPTURE_STREAM_PROGRESS, acl.ACL_EVENT_TIME_LINE,
            acl.ACL_EVENT_DEVICE_USE_ONLY, acl.ACL_EVENT_EXTERNAL, acl.ACL_EVENT_IPC) == \
        (SYNC, PROGRESS, TIME_LINE, DEVICE_USE_ONLY, EXTERNAL, IPC)
    assert (acl.ACL_EVENT_RECORDED_STATUS_NOT_READY, acl.ACL_EVENT_RECORDED_STATUS_COMPLETE) == (0, 1)
    assert (acl.ACL_EVENT_STATUS_COMPLETE, acl.ACL_EVENT_STATUS_NOT_READY) == (0, 1)
    assert (acl.ACL_EVENT_WAIT_STATUS_COMPLETE, acl.ACL_EVENT_WAIT_STATUS_NOT_READY) == (0, 1)


# ---------------------------------------------------------------------------- creation
@pytest.mark.parametrize("flag", [SYNC, PROGRESS, TIME_LINE, DEVICE_USE_ONLY, EXTERNAL,
                                  SYNC | TIME_LINE, SYNC | PROGRESS | TIME_LINE | DEVICE_USE_ONLY])
def test_create_event_with_flag(acl, flag):
    ok(acl, acl.rt.set_device(0))
    event, ret = acl.rt.create_event_with_flag(flag)
    ok(acl, ret)
    assert event != 0
    assert out(acl, acl.rt.query_event_status(event)) == acl.ACL_EVENT_RECORDED_STATUS_COMPLETE
    ok(acl, acl.rt.destroy_event(event))


@pytest.mark.parametrize("flag", [SYNC, PROGRESS, TIME_LINE, IPC, 0, SYNC | TIME_LINE | PROGRESS])
def test_create_event_ex_with_flag(acl, flag):
    ok(acl, acl.rt.set_device(0))
    event = out(acl, acl.rt.create_event_ex_with_flag(flag))
    assert event != 0
    # an Ex event never recorded reports COMPLETE
    assert out(acl, acl.rt.query_event_status(event)) == acl.ACL_EVENT_RECORDED_STATUS_COMPLETE
    ok(acl, acl.rt.destroy_event(event))


@pytest.mark.parametrize("api,flag", [
    ("create_event_with_flag", EXTERNAL | SYNC),          # EXTERNAL must be alone
    ("create_event_with_flag", IPC),                      # IPC only with the Ex API
    ("create_event_with_flag", 0x100),                    # unknown bit
    ("create_event_ex_with_flag", IPC | SYNC),            # IPC must be alone
    ("create_event_ex_with_flag", DEVICE_USE_ONLY),       # not an Ex flag
    ("create_event_ex_with_flag", EXTERNAL),
])
def test_create_event_bad_flags(acl, api, flag):
    ok(acl, acl.rt.set_device(0))
    event, ret = getattr(acl.rt, api)(flag)
    assert (event, ret) == (0, acl.ACL_ERROR_RT_PARAM_INVALID)
    assert acl.rt.get_last_error() == acl.ACL_ERROR_RT_PARAM_INVALID


def test_create_needs_a_context(acl):
    event, ret = acl.rt.create_event()
    assert (event, ret) == (0, acl.ACL_ERROR_RT_CONTEXT_NULL)


def test_handles_distinct_and_destroy(acl):
    ok(acl, acl.rt.set_device(0))
    events = [out(acl, acl.rt.create_event()) for _ in range(3)]
    events.append(out(acl, acl.rt.create_event_with_flag(SYNC)))
    events.append(out(acl, acl.rt.create_event_ex_with_flag(SYNC)))
    assert len(set(events)) == 5
    ids = [out(acl, acl.rt.get_event_id(e)) for e in events]
    assert len(set(ids)) == 5
    for e in events:
        ok(acl, acl.rt.destroy_event(e))
    # a destroyed handle is recognised as such, not aliased to a new event
    assert acl.rt.destroy_event(events[0]) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.query_event_status(events[1]) == (0, acl.ACL_ERROR_RT_PARAM_INVALID)
    assert acl.rt.record_event(events[2], 0) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.destroy_event(0) == acl.ACL_ERROR_INVALID_PARAM


def test_destroy_pending_event_does_not_block(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    gate = Gate(acl, stream)
    event = out(acl, acl.rt.create_event_ex_with_flag(SYNC))
    ok(acl, acl.rt.record_event(event, stream))
    t0 = time.monotonic()
    ok(acl, acl.rt.destroy_event(event))
    assert time.monotonic() - t0 < 1.0
    gate.open()
    ok(acl, acl.rt.synchronize_stream(stream))


def test_a_wait_outlives_the_destroy_of_its_event(acl):
    """Documented: destroy does not block and the event goes when its pending work is done;
    real code relies on it (record, stream_wait_event, destroy at once)."""
    ok(acl, acl.rt.set_device(0))
    producer, waiter = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    event = out(acl, acl.rt.create_event_ex_with_flag(SYNC))
    word = device_buffer(acl, 8)
    ok(acl, acl.rt.value_wait(word, 1, acl.ACL_STREAM_WAIT_VALUE_EQ, producer))   # holds the record
    ok(acl, acl.rt.record_event(event, producer))
    ok(acl, acl.rt.stream_wait_event(waiter, event))
    time.sleep(0.05)
    assert not stream_done(acl, waiter)
    ok(acl, acl.rt.destroy_event(event))
    assert acl.rt.synchronize_stream_with_timeout(waiter, 100) == acl.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
    ok(acl, acl.rt.memset(word, 8, 1, 1))                  # the record runs: the wait ends
    ok(acl, acl.rt.synchronize_stream_with_timeout(waiter, 5000))
    ok(acl, acl.rt.synchronize_stream_with_timeout(producer, 5000))


# ---------------------------------------------------------------------------- record and query
@pytest.mark.parametrize("create", ["legacy", "with_flag", "ex"])
def test_query_not_ready_then_complete(acl, create):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    event = out(acl, {"legacy": lambda: acl.rt.create_event(),
                      "with_flag": lambda: acl.rt.create_event_with_flag(SYNC),
                      "ex": lambda: acl.rt.create_event_ex_with_flag(PROGRESS)}[create]())
    gate = Gate(acl, stream)
    ok(acl, acl.rt.record_event(event, stream))
    assert out(acl, acl.rt.query_event_status(event)) == acl.ACL_EVENT_RECORDED_STATUS_NOT_READY
    if create != "ex":
        assert out(acl, acl.rt.query_event(event)) == acl.ACL_EVENT_STATUS_NOT_READY
    gate.open()
    ok(acl, acl.rt.synchronize_event(event))
    assert out(acl, acl.rt.query_event_status(event)) == acl.ACL_EVENT_RECORDED_STATUS_COMPLETE
    if create != "ex":
        assert out(acl, acl.rt.query_event(event)) == acl.ACL_EVENT_STATUS_COMPLETE
    else:
        assert acl.rt.query_event(event) == (0, acl.ACL_ERROR_RT_PARAM_INVALID)
    ok(acl, acl.rt.destroy_event(event))
    ok(acl, acl.rt.destroy_stream(stream))


def test_record_is_a_snapshot(acl):
    """The record covers the work submitted before it, not what comes after."""
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    event = out(acl, acl.rt.create_event_ex_with_flag(SYNC))
    ok(acl, acl.rt.record_event(event, stream))
    ok(acl, acl.rt.synchronize_event(event))
    gate = Gate(acl, stream)               # work after the record: the event stays complete
    assert out(acl, acl.rt.query_event_status(event)) == acl.ACL_EVENT_RECORDED_STATUS_COMPLETE
    ok(acl, acl.rt.synchronize_event(event))
    assert not stream_done(acl, stream)
    gate.open()
    ok(acl, acl.rt.synchronize_stream(stream))


def test_rerecord_replaces_snapshot_for_later_waits_only(acl):
    ok(acl, acl.rt.set_device(0))
    s1, s2, s3 = (out(acl, acl.rt.create_stream()) for _ in range(3))
    event = out(acl, acl.rt.create_event_ex_with_flag(SYNC))
    g1 = Gate(acl, s1)
    ok(acl, acl.rt.record_event(event, s1))        # record #1: behind g1
    ok(acl, acl.rt.stream_wait_event(s2, event))   # waits for record #1
    # record #2 on s3 behind a value wait (not a host func: g1 holds the host-func thread)
    word = device_buffer(acl, 8)
    ok(acl, acl.rt.value_wait(word, 1, acl.ACL_STREAM_WAIT_VALUE_EQ, s3))
    ok(acl, acl.rt.record_event(event, s3))        # record #2: replaces the snapshot
    ok(acl, acl.rt.stream_wait_event(s1, event))   # later wait: record #2 (harmless on s1)
    time.sleep(0.1)
    assert not stream_done(acl, s2)
    g1.open()
    # s2's wait needs record #1 only: it completes while record #2 is still held
    assert wait_until(lambda: stream_done(acl, s2), 10)
    assert out(acl, acl.rt.query_event_status(event)) == acl.ACL_EVENT_RECORDED_STATUS_NOT_READY
    assert not stream_done(acl, s1)                # waits for record #2
    ok(acl, acl.rt.memset(word, 8, 1, 1))          # releases s3 -> record #2
    ok(acl, acl.rt.synchronize_stream(s1))
    ok(acl, acl.rt.synchronize_stream(s3))
    assert out(acl, acl.rt.query_event_status(event)) == acl.ACL_EVENT_RECORDED_STATUS_COMPLETE


def test_synchronize_event_with_timeout(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    event = out(acl, acl.rt.create_event_ex_with_flag(SYNC))
    gate = Gate(acl, stream)
    ok(acl, acl.rt.record_event(event, stream))
    t0 = time.monotonic()
    assert acl.rt.synchronize_event_with_timeout(event, 200) == acl.ACL_ERROR_RT_EVENT_SYNC_TIMEOUT
    assert 0.18 <= time.monotonic() - t0 < 2.0
    assert acl.rt.get_last_error() == acl.ACL_ERROR_RT_EVENT_SYNC_TIMEOUT
    for bad in (0, -2):
        assert acl.rt.synchronize_event_with_timeout(event, bad) == acl.ACL_ERROR_RT_PARAM_INVALID
    threading.Timer(0.2, gate.open).start()
    ok(acl, acl.rt.synchronize_event_with_timeout(event, -1))
    ok(acl, acl.rt.synchronize_event_with_timeout(event, 100))   # complete: returns at once
    ok(acl, acl.rt.synchronize_stream(stream))


def test_synchronize_event_reports_failure_of_its_snapshot(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    event = out(acl, acl.rt.create_event_ex_with_flag(SYNC))

    def boom(_):
        raise RuntimeError("callback failure")

    ok(acl, acl.rt.launch_host_func(stream, boom, None))
    ok(acl, acl.rt.record_event(event, stream))
    code = acl.rt.synchronize_event(event)
    assert code == acl.ACL_ERROR_RT_INTERNAL_ERROR
    assert acl.rt.get_last_error() == code
    # the stream's own synchronisation still reports it (event sync does not consume it)
    assert acl.rt.synchronize_stream(stream) == code
    ok(acl, acl.rt.synchronize_stream(stream))


def test_synchronize_event_reports_failure_after_completion_too(acl):
    """Whether the record has executed by the time of the call or not, a failed task of the
    snapshot is reported."""
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    event = out(acl, acl.rt.create_event_ex_with_flag(SYNC))
    ok(acl, acl.rt.launch_host_func(stream, lambda _: 1 / 0, None))
    ok(acl, acl.rt.record_event(event, stream))
    assert wait_until(lambda: out(acl, acl.rt.query_event_status(event)) == acl.ACL_EVENT_RECORDED_STATUS_COMPLETE)
    assert acl.rt.synchronize_event(event) == acl.ACL_ERROR_RT_INTERNAL_ERROR
    assert acl.rt.synchronize_stream(stream) == acl.ACL_ERROR_RT_INTERNAL_ERROR
    ok(acl, acl.rt.synchronize_event(event))        # reported (and consumed) by the stream sync


# ---------------------------------------------------------------------------- stream_wait_event
def test_one_waits_one_orders_data(acl):
    """stream2's copy runs only after stream1's memset: it sees the memset's bytes."""
    ok(acl, acl.rt.set_device(0))
    s1, s2 = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    event = out(acl, acl.rt.create_event_ex_with_flag(SYNC))
    n = 1 << 16
    buf = device_buffer(acl, n)
    host_ptr, host = pinned(acl, n)
    gate = Gate(acl, s1)
    ok(acl, acl.rt.memset_async(buf, n, 0x5A, n, s1))
    ok(acl, acl.rt.record_event(event, s1))
    ok(acl, acl.rt.stream_wait_event(s2, event))
    ok(acl, acl.rt.memcpy_async(host_ptr, n, buf, n, acl.ACL_MEMCPY_DEVICE_TO_HOST, s2))
    _held_until_opened(acl, s2, gate, host, 0x5A)    # held by the wait while stream1 is held
    ok(acl, acl.rt.free_host(host_ptr))
    ok(acl, acl.rt.free(buf))


def _held_until_opened(acl, stream, gate, host, value: int) -> None:
    """``stream`` waits (its copy into ``host`` has not run) until ``gate`` opens; then the
    copy brings ``value``."""
    time.sleep(0.1)
    assert not stream_done(acl, stream)
    assert (host == 0).all()
    gate.open()
    ok(acl, acl.rt.synchronize_stream(stream))
    assert (host == value).all()


def test_a_stream_waits_for_an_event_of_another_device(acl):
    """As torch_npu's copies between devices do: device 1 records, a stream of device 0
    waits (the runtime accepts it; mdev answered 107000) and runs only after the record."""
    _, event, gate = _held_record(acl, 1)
    ok(acl, acl.rt.set_device(0))
    s0 = out(acl, acl.rt.create_stream())
    n = 4096
    buf = device_buffer(acl, n)
    host_ptr, host = pinned(acl, n)
    ok(acl, acl.rt.stream_wait_event(s0, event))
    ok(acl, acl.rt.memset_async(buf, n, 0x33, n, s0))
    ok(acl, acl.rt.memcpy_async(host_ptr, n, buf, n, acl.ACL_MEMCPY_DEVICE_TO_HOST, s0))
    _held_until_opened(acl, s0, gate, host, 0x33)    # held by device 1's event
    ok(acl, acl.rt.free_host(host_ptr))
    ok(acl, acl.rt.free(buf))


def test_many_wait_one(acl):
    ok(acl, acl.rt.set_device(0))
    producer = out(acl, acl.rt.create_stream())
    waiters = [out(acl, acl.rt.create_stream()) for _ in range(4)]
    event = out(acl, acl.rt.create_event_with_flag(SYNC))
    n = 4096
    src = device_buffer(acl, n)
    dsts = [device_buffer(acl, n) for _ in waiters]
    gate = Gate(acl, producer)
    ok(acl, acl.rt.memset_async(src, n, 0x33, n, producer))
    ok(acl, acl.rt.record_event(event, producer))
    for s, d in zip(waiters, dsts):
        ok(acl, acl.rt.stream_wait_event(s, event))
        ok(acl, acl.rt.memcpy_async(d, n, src, n, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, s))
    time.sleep(0.1)
    assert out(acl, acl.rt.query_event_wait_status(event)) == acl.ACL_EVENT_WAIT_STATUS_NOT_READY
    assert not any(stream_done(acl, s) for s in waiters)
    gate.open()
    for s in waiters:
        ok(acl, acl.rt.synchronize_stream(s))
    for d in dsts:
        assert (from_device(acl, d, n) == 0x33).all()
    # one record released every waiter, and the event stays complete (unlike a notify)
    assert out(acl, acl.rt.query_event_wait_status(event)) == acl.ACL_EVENT_WAIT_STATUS_COMPLETE
    assert out(acl, acl.rt.query_event_status(event)) == acl.ACL_EVENT_RECORDED_STATUS_COMPLETE
    late = out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.stream_wait_event(late, event))
    ok(acl, acl.rt.synchronize_stream(late))


def test_wait_needs_a_sync_event(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    for flag in (TIME_LINE, PROGRESS):
        for create in (acl.rt.create_event_with_flag, acl.rt.create_event_ex_with_flag):
            event = out(acl, create(flag))
            ok(acl, acl.rt.record_event(event, stream))
            assert acl.rt.stream_wait_event(stream, event) == acl.ACL_ERROR_RT_PARAM_INVALID
            ok(acl, acl.rt.destroy_event(event))
    legacy = out(acl, acl.rt.create_event())
    ok(acl, acl.rt.record_event(legacy, stream))
    ok(acl, acl.rt.stream_wait_event(stream, legacy))     # legacy events may be waited on
    ok(acl, acl.rt.synchronize_stream(stream))


def test_wait_on_never_recorded_event_is_a_no_op(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    for event in (out(acl, acl.rt.create_event_ex_with_flag(SYNC)), out(acl, acl.rt.create_event())):
        ok(acl, acl.rt.stream_wait_event(stream, event))
        ok(acl, acl.rt.synchronize_stream_with_timeout(stream, 2000))


def test_wait_status_and_reset(acl):
    """The loop pattern of the guide: record on s1, wait + reset on s2, again and again."""
    ok(acl, acl.rt.set_device(0))
    s1, s2 = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    event = out(acl, acl.rt.create_event_with_flag(SYNC))
    counter = device_buffer(acl, 8)
    host_ptr, host = pinned(acl, 8 * 5, np.uint64)
    for i in range(5):
        ok(acl, acl.rt.value_write(counter, i + 1, 0, s1))
        ok(acl, acl.rt.record_event(event, s1))
        ok(acl, acl.rt.stream_wait_event(s2, event))
        ok(acl, acl.rt.reset_event(event, s2))
        ok(acl, acl.rt.memcpy_async(host_ptr + 8 * i, 8, counter, 8, acl.ACL_MEMCPY_DEVICE_TO_HOST, s2))
    ok(acl, acl.rt.synchronize_stream(s2))
    # each copy ran after the matching write (a later write may have landed too)
    assert all(host[i] >= i + 1 for i in range(5)), host
    assert out(acl, acl.rt.query_event_wait_status(event)) == acl.ACL_EVENT_WAIT_STATUS_COMPLETE
    ok(acl, acl.rt.synchronize_stream(s1))
    ok(acl, acl.rt.free_host(host_ptr))


def test_reset_rules(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    ex = out(acl, acl.rt.create_event_ex_with_flag(SYNC))
    assert acl.rt.reset_event(ex, stream) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.query_event_wait_status(ex) == (0, acl.ACL_ERROR_RT_PARAM_INVALID)
    timeline = out(acl, acl.rt.create_event_with_flag(TIME_LINE))
    assert acl.rt.reset_event(timeline, stream) == acl.ACL_ERROR_RT_PARAM_INVALID
    for flag in (SYNC, EXTERNAL, SYNC | TIME_LINE):
        event = out(acl, acl.rt.create_event_with_flag(flag))
        ok(acl, acl.rt.record_event(event, stream))
        ok(acl, acl.rt.reset_event(event, stream))
    ok(acl, acl.rt.synchronize_stream(stream))


# ---------------------------------------------------------------------------- timing
def test_elapsed_time_and_timestamps(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    start = out(acl, acl.rt.create_event_ex_with_flag(TIME_LINE))
    end = out(acl, acl.rt.create_event_ex_with_flag(TIME_LINE))
    before_ns = time.monotonic_ns()
    ok(acl, acl.rt.record_event(start, stream))
    ok(acl, acl.rt.launch_host_func(stream, lambda _: time.sleep(0.25), None))
    ok(acl, acl.rt.record_event(end, stream))
    ok(acl, acl.rt.synchronize_stream(stream))
    after_ns = time.monotonic_ns()
    ms = out(acl, acl.rt.event_elapsed_time(start, end))
    assert isinstance(ms, float)
    assert 245 <= ms < 1000, ms
    t0, t1 = out(acl, acl.rt.event_get_timestamp(start)), out(acl, acl.rt.event_get_timestamp(end))
    assert isinstance(t0, int) and 0 < t0 < t1
    assert abs((t1 - t0) / 1000 - ms) < 0.01
    # microseconds since the device booted: device-side stamps taken inside the host's window
    boot_ns = launcher_boot_ns(acl, 0)
    assert before_ns <= boot_ns + t0 * 1000 + 1000 and boot_ns + t1 * 1000 <= after_ns + 1000
    # end before start
    assert acl.rt.event_elapsed_time(end, start) == (0.0, acl.ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL)


def launcher_boot_ns(acl, device: int) -> int:
    """CLOCK_MONOTONIC of the device's boot, from its control page."""
    from mdev import status as S
    from mdev.runtime.core import RUNTIME
    return int(RUNTIME.link(device).control.header[S.H_BOOT_NS])


def test_legacy_events_have_timestamps(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    a, b = out(acl, acl.rt.create_event()), out(acl, acl.rt.create_event())
    ok(acl, acl.rt.record_event(a, stream))
    ok(acl, acl.rt.record_event(b, stream))
    ok(acl, acl.rt.synchronize_stream(stream))
    assert out(acl, acl.rt.event_elapsed_time(a, b)) >= 0.0


def test_timing_errors(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    sync_only = out(acl, acl.rt.create_event_ex_with_flag(SYNC))
    timed = out(acl, acl.rt.create_event_ex_with_flag(TIME_LINE))
    never = out(acl, acl.rt.create_event_ex_with_flag(TIME_LINE))
    ok(acl, acl.rt.record_event(sync_only, stream))
    ok(acl, acl.rt.record_event(timed, stream))
    ok(acl, acl.rt.synchronize_stream(stream))
    assert acl.rt.event_elapsed_time(sync_only, timed) == (0.0, acl.ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID)
    assert acl.rt.event_get_timestamp(sync_only) == (0, acl.ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID)
    assert acl.rt.event_elapsed_time(timed, never) == (0.0, acl.ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID)
    gate = Gate(acl, stream)
    pending = out(acl, acl.rt.create_event_ex_with_flag(TIME_LINE))
    ok(acl, acl.rt.record_event(pending, stream))
    assert acl.rt.event_elapsed_time(timed, pending) == (0.0, acl.ACL_ERROR_RT_EVENT_NOT_COMPLETE)
    assert acl.rt.event_get_timestamp(pending) == (0, acl.ACL_ERROR_RT_EVENT_NOT_COMPLETE)
    gate.open()
    ok(acl, acl.rt.synchronize_stream(stream))
    assert out(acl, acl.rt.event_elapsed_time(timed, pending)) >= 0.0


# ---------------------------------------------------------------------------- device affinity
def _held_record(acl, device: int) -> tuple:
    """On ``device``: a stream held by a gate, and a SYNC event recorded behind the gate."""
    ok(acl, acl.rt.set_device(device))
    stream = out(acl, acl.rt.create_stream())
    event = out(acl, acl.rt.create_event_with_flag(SYNC))
    gate = Gate(acl, stream)
    ok(acl, acl.rt.record_event(event, stream))
    return stream, event, gate


def test_device_affinity(acl):
    s0, event0, gate = _held_record(acl, 0)
    ok(acl, acl.rt.set_device(1))
    s1 = out(acl, acl.rt.create_stream())
    # recording / resetting on a stream of another device fails; waiting is accepted
    assert acl.rt.record_event(event0, s1) == acl.ACL_ERROR_RT_PARAM_INVALID
    ok(acl, acl.rt.stream_wait_event(s1, event0))
    assert acl.rt.reset_event(event0, s1) == acl.ACL_ERROR_RT_PARAM_INVALID
    # a stream of another context (device 0's, while device 1 is current)
    assert acl.rt.record_event(event0, s0) == acl.ACL_ERROR_RT_STREAM_CONTEXT
    # query and synchronize of device 0's event succeed from device 1
    assert out(acl, acl.rt.query_event_status(event0)) == acl.ACL_EVENT_RECORDED_STATUS_NOT_READY
    assert out(acl, acl.rt.query_event(event0)) == acl.ACL_EVENT_STATUS_NOT_READY
    threading.Timer(0.1, gate.open).start()
    ok(acl, acl.rt.synchronize_event(event0))
    assert out(acl, acl.rt.query_event_status(event0)) == acl.ACL_EVENT_RECORDED_STATUS_COMPLETE
    ok(acl, acl.rt.destroy_event(event0))        # any device may destroy it
    ok(acl, acl.rt.destroy_stream(s1))


def test_query_from_another_thread(acl):
    """Thread B queries the event thread A recorded (the buffer-reuse pattern of the guide)."""
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    event = out(acl, acl.rt.create_event_ex_with_flag(PROGRESS))
    gate = Gate(acl, stream)
    ok(acl, acl.rt.record_event(event, stream))
    seen = []

    def observer():
        seen.append(acl.rt.query_event_status(event))
        gate.open()
        seen.append(acl.rt.synchronize_event(event))
        seen.append(acl.rt.query_event_status(event))

    t = threading.Thread(target=observer)
    t.start()
    t.join(10)
    assert seen == [(acl.ACL_EVENT_RECORDED_STATUS_NOT_READY, 0), 0,
                    (acl.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0)]


def test_query_event_status_is_cheap(acl):
    """A read of shared state: no round trip to the device process."""
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    event = out(acl, acl.rt.create_event_ex_with_flag(SYNC))
    ok(acl, acl.rt.record_event(event, stream))
    ok(acl, acl.rt.synchronize_stream(stream))
    query = acl.rt.query_event_status
    n = 20_000
    t0 = time.perf_counter()
    for _ in range(n):
        query(event)
    per_call_us = (time.perf_counter() - t0) / n * 1e6
    assert per_call_us < 50, per_call_us        # bench/async_tasks.py measures the real figure


# ---------------------------------------------------------------------------- waiting costs no core
def _device_pid(board: str, device: int) -> int:
    return launcher.status(board)["devices"][device]["pid"]


def test_waiting_stream_does_not_burn_a_core(acl, board):
    """A stream blocked 2 s on an event costs its device process < 5% of a core."""
    ok(acl, acl.rt.set_device(0))
    producer, waiter = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    event = out(acl, acl.rt.create_event_ex_with_flag(SYNC))
    ok(acl, acl.rt.launch_host_func(producer, lambda _: time.sleep(2.0), None))
    ok(acl, acl.rt.record_event(event, producer))
    ok(acl, acl.rt.stream_wait_event(waiter, event))
    buf = device_buffer(acl, 64)
    ok(acl, acl.rt.memset_async(buf, 64, 7, 64, waiter))
    proc = psutil.Process(_device_pid(board, 0))
    time.sleep(0.1)                                  # the host func is running
    c0, t0 = proc.cpu_times(), time.monotonic()
    ok(acl, acl.rt.synchronize_stream(waiter))
    c1, t1 = proc.cpu_times(), time.monotonic()
    assert t1 - t0 >= 1.7
    share = ((c1.user + c1.system) - (c0.user + c0.system)) / (t1 - t0)
    assert share < 0.05, f"device process used {share:.1%} of a core while a stream waited"
    assert (from_device(acl, buf, 64) == 7).all()


def test_destroying_an_event_keeps_its_queued_record_and_waits(acl):
    """Documented: destroy does not block, and the event's resources go when its queued work
    has run -- a wait queued before the destroy still waits for the record."""
    ok(acl, acl.rt.set_device(0))
    s1, s2 = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    n = 4096
    buf = device_buffer(acl, n)
    host_ptr, host = pinned(acl, n)
    gate = Gate(acl, s1)
    event = out(acl, acl.rt.create_event())
    ok(acl, acl.rt.memset_async(buf, n, 0x5A, n, s1))
    ok(acl, acl.rt.record_event(event, s1))
    ok(acl, acl.rt.stream_wait_event(s2, event))
    ok(acl, acl.rt.destroy_event(event))
    ok(acl, acl.rt.memcpy_async(host_ptr, n, buf, n, acl.ACL_MEMCPY_DEVICE_TO_HOST, s2))
    time.sleep(0.1)
    assert not stream_done(acl, s2)            # still waiting for the record behind the gate
    gate.open()
    ok(acl, acl.rt.synchronize_stream(s2))
    assert (host == 0x5A).all()
    assert acl.rt.query_event_status(event)[1] == acl.ACL_ERROR_RT_PARAM_INVALID   # the handle is gone
    ok(acl, acl.rt.free_host(host_ptr))
