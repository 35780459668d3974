"""Notifies (one record releases exactly one wait, across streams and devices) and
memory-semantic synchronisation (value_write / value_wait with every comparison)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from async_util import Gate, device_buffer, ok, out, pinned, stream_done
from helpers import from_device, to_device, wait_until
from mdev.kernel import kernel, ptr

GEQ, EQ, AND, NOR = 0, 1, 2, 3
U64 = (1 << 64) - 1


def test_constants(acl):
    assert (acl.ACL_NOTIFY_DEFAULT, acl.ACL_NOTIFY_DEVICE_USE_ONLY) == (0, 1)
    assert (acl.ACL_STREAM_WAIT_VALUE_GEQ, acl.ACL_STREAM_WAIT_VALUE_EQ,
            acl.ACL_STREAM_WAIT_VALUE_AND, acl.ACL_STREAM_WAIT_VALUE_NOR) == (GEQ, EQ, AND, NOR)


# ---------------------------------------------------------------------------- notify basics
def test_create_destroy_and_ids(acl):
    ok(acl, acl.rt.set_device(0))
    notifies = [out(acl, acl.rt.create_notify(flag)) for flag in (0, 1, 0)]
    assert len(set(notifies)) == 3 and 0 not in notifies
    ids = [out(acl, acl.rt.get_notify_id(n)) for n in notifies]
    assert len(set(ids)) == 3 and all(isinstance(i, int) and i >= 0 for i in ids)
    for n in notifies:
        ok(acl, acl.rt.destroy_notify(n))
    assert acl.rt.destroy_notify(notifies[0]) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.get_notify_id(notifies[1]) == (0, acl.ACL_ERROR_RT_PARAM_INVALID)
    assert acl.rt.destroy_notify(0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.create_notify(2) == (0, acl.ACL_ERROR_INVALID_PARAM)


def test_create_notify_needs_a_context(acl):
    assert acl.rt.create_notify(0) == (0, acl.ACL_ERROR_RT_CONTEXT_NULL)


def test_notify_orders_two_streams(acl):
    ok(acl, acl.rt.set_device(0))
    s1, s2 = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    notify = out(acl, acl.rt.create_notify(0))
    n = 4096
    buf = device_buffer(acl, n)
    host_ptr, host = pinned(acl, n)
    gate = Gate(acl, s1)
    ok(acl, acl.rt.memset_async(buf, n, 0x6B, n, s1))
    ok(acl, acl.rt.record_notify(notify, s1))
    ok(acl, acl.rt.wait_and_reset_notify(notify, s2, 0))
    ok(acl, acl.rt.memcpy_async(host_ptr, n, buf, n, acl.ACL_MEMCPY_DEVICE_TO_HOST, s2))
    time.sleep(0.1)
    assert not stream_done(acl, s2) and (host == 0).all()
    gate.open()
    ok(acl, acl.rt.synchronize_stream(s2))
    assert (host == 0x6B).all()
    ok(acl, acl.rt.free_host(host_ptr))


def test_record_before_wait_is_latched(acl):
    ok(acl, acl.rt.set_device(0))
    s1, s2 = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    notify = out(acl, acl.rt.create_notify(0))
    ok(acl, acl.rt.record_notify(notify, s1))
    ok(acl, acl.rt.synchronize_stream(s1))
    ok(acl, acl.rt.wait_and_reset_notify(notify, s2, 5))
    ok(acl, acl.rt.synchronize_stream_with_timeout(s2, 5000))


def test_one_record_releases_exactly_one_wait(acl):
    ok(acl, acl.rt.set_device(0))
    recorder = out(acl, acl.rt.create_stream())
    waiters = [out(acl, acl.rt.create_stream()) for _ in range(3)]
    notify = out(acl, acl.rt.create_notify(0))
    for s in waiters:
        ok(acl, acl.rt.wait_and_reset_notify(notify, s, 0))
    time.sleep(0.05)
    assert not any(stream_done(acl, s) for s in waiters)
    for released in (1, 2, 3):
        ok(acl, acl.rt.record_notify(notify, recorder))
        assert wait_until(lambda: sum(stream_done(acl, s) for s in waiters) >= released)
        time.sleep(0.1)   # give a wrongly released second waiter time to show up
        assert sum(stream_done(acl, s) for s in waiters) == released


def test_notify_auto_resets_unlike_an_event(acl):
    """Two waits in a row on one stream after one record: the second one blocks (a notify),
    while two waits on one event record both pass."""
    ok(acl, acl.rt.set_device(0))
    s1, s2 = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    event = out(acl, acl.rt.create_event_with_flag(acl.ACL_EVENT_SYNC))
    ok(acl, acl.rt.record_event(event, s1))
    ok(acl, acl.rt.stream_wait_event(s2, event))
    ok(acl, acl.rt.stream_wait_event(s2, event))
    ok(acl, acl.rt.synchronize_stream_with_timeout(s2, 5000))

    notify = out(acl, acl.rt.create_notify(0))
    ok(acl, acl.rt.record_notify(notify, s1))
    ok(acl, acl.rt.wait_and_reset_notify(notify, s2, 0))
    ok(acl, acl.rt.wait_and_reset_notify(notify, s2, 0))
    time.sleep(0.15)
    assert not stream_done(acl, s2)
    ok(acl, acl.rt.record_notify(notify, s1))
    ok(acl, acl.rt.synchronize_stream_with_timeout(s2, 5000))


def test_notify_wait_timeout(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    notify = out(acl, acl.rt.create_notify(0))
    buf = device_buffer(acl, 64)
    t0 = time.monotonic()
    ok(acl, acl.rt.wait_and_reset_notify(notify, stream, 1))      # the call itself succeeds
    ok(acl, acl.rt.memset_async(buf, 64, 9, 64, stream))
    assert time.monotonic() - t0 < 0.5
    assert acl.rt.synchronize_stream(stream) == acl.ACL_ERROR_RT_TASK_TIMEOUT
    assert 0.9 <= time.monotonic() - t0 < 5
    assert acl.rt.get_last_error() == acl.ACL_ERROR_RT_TASK_TIMEOUT
    assert acl.rt.get_last_error() == acl.ACL_SUCCESS
    # continue-on-failure: the task after the timed-out wait ran
    assert (from_device(acl, buf, 64) == 9).all()
    ok(acl, acl.rt.synchronize_stream(stream))
    assert acl.rt.wait_and_reset_notify(notify, stream, -1) == acl.ACL_ERROR_INVALID_PARAM


def test_destroying_a_notify_releases_its_waits(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    notify = out(acl, acl.rt.create_notify(0))
    ok(acl, acl.rt.wait_and_reset_notify(notify, stream, 0))
    time.sleep(0.05)
    assert not stream_done(acl, stream)
    ok(acl, acl.rt.destroy_notify(notify))
    ok(acl, acl.rt.synchronize_stream_with_timeout(stream, 5000))


# ---------------------------------------------------------------------------- notify between devices
def test_notify_between_devices(acl):
    """Device 0 finishes a copy and notifies device 1, which then copies the result on."""
    n = 1 << 16
    ok(acl, acl.rt.set_device(1))
    s1 = out(acl, acl.rt.create_stream())
    notify = out(acl, acl.rt.create_notify(0))           # owned by device 1, the waiter
    dev1 = device_buffer(acl, n)
    staging_ptr, staging = pinned(acl, n)
    result_ptr, result = pinned(acl, n)
    ok(acl, acl.rt.wait_and_reset_notify(notify, s1, 10))
    ok(acl, acl.rt.memcpy_async(dev1, n, staging_ptr, n, acl.ACL_MEMCPY_HOST_TO_DEVICE, s1))
    ok(acl, acl.rt.memcpy_async(result_ptr, n, dev1, n, acl.ACL_MEMCPY_DEVICE_TO_HOST, s1))

    ok(acl, acl.rt.set_device(0))
    s0 = out(acl, acl.rt.create_stream())
    dev0 = device_buffer(acl, n)
    to_device(acl, dev0, np.arange(n, dtype=np.uint8))
    gate = Gate(acl, s0)
    ok(acl, acl.rt.memcpy_async(staging_ptr, n, dev0, n, acl.ACL_MEMCPY_DEVICE_TO_HOST, s0))
    ok(acl, acl.rt.record_notify(notify, s0))            # recorded by device 0
    # a notify is waited on by its own device only
    assert acl.rt.wait_and_reset_notify(notify, s0, 0) == acl.ACL_ERROR_RT_PARAM_INVALID
    time.sleep(0.1)
    ok(acl, acl.rt.set_device(1))
    assert not stream_done(acl, s1)
    gate.open()
    ok(acl, acl.rt.synchronize_stream(s1))
    assert (result == np.arange(n, dtype=np.uint8)).all()
    ok(acl, acl.rt.set_device(0))
    ok(acl, acl.rt.synchronize_stream(s0))


def test_notify_ping_pong_between_devices(acl):
    """Devices 0 and 1 take turns 20 times; each turn appends to a pinned log in order."""
    rounds = 20
    ok(acl, acl.rt.set_device(0))
    log_ptr, log = pinned(acl, 8 * 2 * rounds, np.uint64)
    to0 = out(acl, acl.rt.create_notify(0))
    s0 = out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.set_device(1))
    to1 = out(acl, acl.rt.create_notify(0))
    s1 = out(acl, acl.rt.create_stream())
    words = {}
    for dev in (0, 1):
        ok(acl, acl.rt.set_device(dev))
        words[dev] = device_buffer(acl, 8 * 2 * rounds)
    for i in range(rounds):
        # device 0's turn: write 2i, copy it into the log, notify device 1
        ok(acl, acl.rt.set_device(0))
        if i:
            ok(acl, acl.rt.wait_and_reset_notify(to0, s0, 10))
        ok(acl, acl.rt.value_write(words[0] + 16 * i, 2 * i + 1, 0, s0))
        ok(acl, acl.rt.memcpy_async(log_ptr + 16 * i, 8, words[0] + 16 * i, 8, acl.ACL_MEMCPY_DEVICE_TO_HOST, s0))
        ok(acl, acl.rt.record_notify(to1, s0))
        # device 1's turn
        ok(acl, acl.rt.set_device(1))
        ok(acl, acl.rt.wait_and_reset_notify(to1, s1, 10))
        ok(acl, acl.rt.value_write(words[1] + 16 * i + 8, 2 * i + 2, 0, s1))
        ok(acl, acl.rt.memcpy_async(log_ptr + 16 * i + 8, 8, words[1] + 16 * i + 8, 8,
                                    acl.ACL_MEMCPY_DEVICE_TO_HOST, s1))
        ok(acl, acl.rt.record_notify(to0, s1))
    ok(acl, acl.rt.synchronize_stream(s1))
    ok(acl, acl.rt.set_device(0))
    ok(acl, acl.rt.synchronize_stream(s0))
    assert list(log) == list(range(1, 2 * rounds + 1))


# ---------------------------------------------------------------------------- values
@pytest.mark.parametrize("flag,value,blocking,releasing", [
    (GEQ, 10, 9, 10),
    (GEQ, 10, 3, 11),
    (GEQ, U64, 0xFFFFFFFFFFFFFFF0, 5),   # (int64)(cur - value) >= 0: wraps around
    (EQ, 42, 41, 42),
    (EQ, 0xDEADBEEFCAFEF00D, 0, 0xDEADBEEFCAFEF00D),
    (AND, 0b1010, 0b0101, 0b0010),        # (cur & value) != 0
    (AND, 1 << 63, U64 >> 1, 1 << 63),
    (NOR, 0b1111, U64 ^ 0b1111, 0b1111),  # ~(cur | value) != 0
    (NOR, 0, U64, U64 - 1),
])
def test_value_wait_comparisons(acl, flag, value, blocking, releasing):
    ok(acl, acl.rt.set_device(0))
    waiter, writer = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    word = device_buffer(acl, 8)
    marker = device_buffer(acl, 8)
    to_device(acl, word, np.array([blocking], np.uint64))
    ok(acl, acl.rt.value_wait(word, value, flag, waiter))
    ok(acl, acl.rt.value_write(marker, 77, 0, waiter))
    time.sleep(0.1)
    assert not stream_done(acl, waiter), "released by a value that does not satisfy the wait"
    assert from_device(acl, marker, 8, np.uint64)[0] == 0
    ok(acl, acl.rt.value_write(word, releasing, 0, writer))
    ok(acl, acl.rt.synchronize_stream_with_timeout(waiter, 5000))
    assert from_device(acl, marker, 8, np.uint64)[0] == 77
    assert from_device(acl, word, 8, np.uint64)[0] == releasing


def test_value_wait_already_satisfied(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    word = device_buffer(acl, 8)
    ok(acl, acl.rt.value_wait(word, 0, EQ, stream))          # fresh memory reads 0
    ok(acl, acl.rt.value_wait(word, 0, GEQ, stream))
    ok(acl, acl.rt.value_wait(word, 0, NOR, stream))
    ok(acl, acl.rt.synchronize_stream_with_timeout(stream, 5000))


def test_value_write_orders_streams_like_the_guide(acl):
    """Guide 03-07: stream1 waits for 1 written by stream2, then writes 2 for stream2."""
    ok(acl, acl.rt.set_device(0))
    s1, s2 = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    sync_mem = device_buffer(acl, 8)
    data = device_buffer(acl, 256)
    host_ptr, host = pinned(acl, 256)
    ok(acl, acl.rt.value_wait(sync_mem, 1, EQ, s1))
    ok(acl, acl.rt.memcpy_async(host_ptr, 256, data, 256, acl.ACL_MEMCPY_DEVICE_TO_HOST, s1))
    ok(acl, acl.rt.value_write(sync_mem, 2, 0, s1))
    gate = Gate(acl, s2)
    ok(acl, acl.rt.memset_async(data, 256, 0xA5, 256, s2))
    ok(acl, acl.rt.value_write(sync_mem, 1, 0, s2))
    ok(acl, acl.rt.value_wait(sync_mem, 2, EQ, s2))
    time.sleep(0.1)
    assert not stream_done(acl, s1) and not stream_done(acl, s2)
    gate.open()
    ok(acl, acl.rt.synchronize_stream(s1))
    ok(acl, acl.rt.synchronize_stream(s2))
    assert (host == 0xA5).all()
    assert from_device(acl, sync_mem, 8, np.uint64)[0] == 2


@pytest.mark.parametrize("how", ["memset", "memset_async", "memcpy", "memcpy_async"])
def test_value_wait_released_by_ordinary_writes(acl, how):
    ok(acl, acl.rt.set_device(0))
    waiter, other = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    word = device_buffer(acl, 8)
    ok(acl, acl.rt.value_wait(word, 0x0101010101010101, EQ, waiter))
    time.sleep(0.05)
    assert not stream_done(acl, waiter)
    ones = np.full(8, 1, np.uint8)
    if how == "memset":
        ok(acl, acl.rt.memset(word, 8, 1, 8))                 # host-side write, another process
    elif how == "memset_async":
        ok(acl, acl.rt.memset_async(word, 8, 1, 8, other))    # a DMA task of another stream
    elif how == "memcpy":
        to_device(acl, word, ones)
    else:
        host_ptr, host = pinned(acl, 8)
        host[:] = 1
        ok(acl, acl.rt.memcpy_async(word, 8, host_ptr, 8, acl.ACL_MEMCPY_HOST_TO_DEVICE, other))
    ok(acl, acl.rt.synchronize_stream_with_timeout(waiter, 5000))


def test_value_wait_released_from_another_device(acl):
    """A value written by device 1 (peer access) releases a wait on device 0."""
    ok(acl, acl.rt.set_device(0))
    waiter = out(acl, acl.rt.create_stream())
    word = device_buffer(acl, 8)
    ok(acl, acl.rt.value_wait(word, 5, GEQ, waiter))
    ok(acl, acl.rt.set_device(1))
    ok(acl, acl.rt.device_enable_peer_access(0, 0))
    writer = out(acl, acl.rt.create_stream())
    time.sleep(0.05)
    ok(acl, acl.rt.value_write(word, 6, 0, writer))
    ok(acl, acl.rt.synchronize_stream(writer))
    ok(acl, acl.rt.set_device(0))
    ok(acl, acl.rt.synchronize_stream_with_timeout(waiter, 5000))


def test_value_wait_timeout(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    word = device_buffer(acl, 8)
    marker = device_buffer(acl, 8)
    ok(acl, acl.rt.set_op_wait_timeout(1))
    ok(acl, acl.rt.value_wait(word, 1, EQ, stream))
    ok(acl, acl.rt.value_write(marker, 3, 0, stream))
    t0 = time.monotonic()
    assert acl.rt.synchronize_stream(stream) == acl.ACL_ERROR_RT_TASK_TIMEOUT
    assert 0.5 <= time.monotonic() - t0 < 5
    assert acl.rt.peek_at_last_error() == acl.ACL_ERROR_RT_TASK_TIMEOUT
    assert from_device(acl, marker, 8, np.uint64)[0] == 3      # later task ran
    ok(acl, acl.rt.set_op_wait_timeout(0))


def test_value_argument_errors(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    word = device_buffer(acl, 64)
    host_ptr, _ = pinned(acl, 64)
    assert acl.rt.value_write(word + 4, 1, 0, stream) == acl.ACL_ERROR_RT_PARAM_INVALID      # unaligned
    assert acl.rt.value_wait(word + 4, 1, EQ, stream) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.value_write(host_ptr, 1, 0, stream) == acl.ACL_ERROR_RT_PARAM_INVALID      # not device memory
    assert acl.rt.value_write(word, 1, 1, stream) == acl.ACL_ERROR_INVALID_PARAM             # flag must be 0
    assert acl.rt.value_wait(word, 1, 4, stream) == acl.ACL_ERROR_INVALID_PARAM              # unknown comparison
    assert acl.rt.value_write(word + 64, 1, 0, stream) != acl.ACL_SUCCESS                     # past the end
    assert acl.rt.value_write(0, 1, 0, stream) != acl.ACL_SUCCESS
    ok(acl, acl.rt.value_write(word, -1, 0, stream))                                          # as uint64
    ok(acl, acl.rt.synchronize_stream(stream))
    assert from_device(acl, word, 8, np.uint64)[0] == U64
    ok(acl, acl.rt.value_write(word, 5, 0, 0))                                                # default stream
    ok(acl, acl.rt.synchronize_stream(0))
    assert from_device(acl, word, 8, np.uint64)[0] == 5


def test_value_wait_released_by_a_kernel(acl):
    """A kernel writing the word is a write like any other: it releases the wait."""
    @kernel
    def set_word(ctx, word: ptr, value: int):
        if ctx.block_idx == 0:
            ctx.gm(word, np.uint64, 1)[0] = value

    ok(acl, acl.rt.set_device(0))
    waiter, runner = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    word, marker = device_buffer(acl, 8), device_buffer(acl, 8)
    ok(acl, acl.rt.value_wait(word, 0x77, GEQ, waiter))
    ok(acl, acl.rt.value_write(marker, 1, 0, waiter))
    time.sleep(0.05)
    assert not stream_done(acl, waiter)
    ok(acl, set_word[2, runner](word, 0x78))
    ok(acl, acl.rt.synchronize_stream(runner))
    ok(acl, acl.rt.synchronize_stream_with_timeout(waiter, 5000))
    assert from_device(acl, marker, 8, np.uint64)[0] == 1
