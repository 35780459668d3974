"""Error codes at the API boundary, the per-thread last error, error messages, and a board that
keeps running whatever the input (the CANN Runtime API reference on hiascend.com: aclError,
Exception Handling)."""

from __future__ import annotations

import threading
import time

import numpy as np

from conftest import SMALL_HBM
from helpers import MiB, from_device, to_device
from mdev.board import launcher
from mdev.kernel import kernel
from mdev.memory import address


def test_error_names_and_numbers():
    import mdev.acl as acl
    expected = {
        "ACL_SUCCESS": 0,
        "ACL_ERROR_INVALID_PARAM": 100000,
        "ACL_ERROR_REPEAT_INITIALIZE": 100002,
        "ACL_ERROR_INVALID_FILE": 100003,
        "ACL_ERROR_PARSE_FILE": 100006,
        "ACL_ERROR_REPEAT_FINALIZE": 100037,
        "ACL_ERROR_RT_PARAM_INVALID": 107000,
        "ACL_ERROR_RT_INVALID_DEVICEID": 107001,
        "ACL_ERROR_RT_CONTEXT_NULL": 107002,
        "ACL_ERROR_RT_STREAM_CONTEXT": 107003,
        "ACL_ERROR_RT_FEATURE_NOT_SUPPORT": 207000,
        "ACL_ERROR_RT_MEMORY_ALLOCATION": 207001,
        "ACL_ERROR_RT_CONTEXT_RELEASE_ERROR": 507007,
        "ACL_ERROR_RT_SYS_DMA": 507013,
        "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT": 507046,
    }
    for name, value in expected.items():
        assert getattr(acl, name) == value, name
        assert acl.errors.error_name(value) == name


def _cases(acl):
    """(label, call, expected code, words the error message must contain)."""
    K = acl
    ptr, _ = acl.rt.malloc(4096, 0)
    freed, _ = acl.rt.malloc(4096, 0)
    assert acl.rt.free(freed) == 0
    host = np.zeros(4096, np.uint8)
    hp = acl.util.numpy_to_ptr(host)
    stray = address.device_base(0) + 0x7_0000_0000                  # device range, never allocated
    H2D, D2H = K.ACL_MEMCPY_HOST_TO_DEVICE, K.ACL_MEMCPY_DEVICE_TO_HOST
    return [
        ("count > destMax", lambda: acl.rt.memcpy(ptr, 100, hp, 200, H2D), 107000, ["exceeds destMax"]),
        ("destMax 0", lambda: acl.rt.memcpy(ptr, 0, hp, 16, H2D), 107000, ["destMax"]),
        ("memset count > max", lambda: acl.rt.memset(ptr, 10, 0, 20), 107000, ["maxCount"]),
        ("NULL dst", lambda: acl.rt.memcpy(0, 16, hp, 16, H2D), 100000, ["dst", "NULL"]),
        ("NULL src", lambda: acl.rt.memcpy(ptr, 16, None, 16, H2D), 100000, ["src", "NULL"]),
        ("NULL free", lambda: acl.rt.free(0), 100000, ["NULL"]),
        ("NULL memset", lambda: acl.rt.memset(0, 16, 0, 16), 100000, ["NULL"]),
        ("unknown device ptr", lambda: acl.rt.memcpy(stray, 16, hp, 16, H2D), 107000, ["not inside a live device allocation"]),
        ("unmapped host ptr", lambda: acl.rt.memcpy(ptr, 16, 0x1000, 16, H2D), 107000, ["neither device memory nor"]),
        ("out of bounds", lambda: acl.rt.memcpy(ptr + 4090, 16, hp, 16, H2D), 107000, ["overruns"]),
        ("out of bounds D2H", lambda: acl.rt.memcpy(hp, 4096, ptr + 8, 4096, D2H), 107000, ["overruns"]),
        ("freed ptr", lambda: acl.rt.memcpy(freed, 16, hp, 16, H2D), 107000, ["freed"]),
        ("freed memset", lambda: acl.rt.memset(freed, 16, 0, 16), 107000, ["freed"]),
        ("double free", lambda: acl.rt.free(freed), 107000, ["double free"]),
        ("wrong kind", lambda: acl.rt.memcpy_async(ptr, 16, hp, 16, D2H, 0), 107000,
         ["ACL_MEMCPY_DEVICE_TO_HOST", "cannot copy from pageable"]),
        ("kind INNER D2D", lambda: acl.rt.memcpy(ptr, 16, ptr, 16, K.ACL_MEMCPY_INNER_DEVICE_TO_DEVICE), 100000, ["kind"]),
        ("kind 99", lambda: acl.rt.memcpy(ptr, 16, hp, 16, 99), 100000, ["kind"]),
        ("destroy default stream", lambda: acl.rt.destroy_stream(0), 100000, ["default stream"]),
        ("bad stream handle", lambda: acl.rt.synchronize_stream(0xDEAD), 100000, ["stream"]),
        ("bad device id", lambda: acl.rt.set_device(17), 107001, ["device 17"]),
        ("out of HBM", lambda: acl.rt.malloc(SMALL_HBM * 2, 0)[1], 207001, ["ACL_ERROR_RT_MEMORY_ALLOCATION"]),
        ("size 0", lambda: acl.rt.malloc(0, 0)[1], 100000, ["size"]),
        ("reset unset device", lambda: acl.rt.reset_device(3), 507007, ["reset"]),
        ("sync timeout 0", lambda: acl.rt.synchronize_stream_with_timeout(0, 0), 107000, ["timeout"]),
        ("not an int", lambda: acl.rt.memcpy(ptr, "16", hp, 16, H2D), 100000, ["destMax"]),
    ]


def test_each_error_has_its_code_and_message(dev, board):
    acl = dev
    for label, call, code, words in _cases(acl):
        acl.get_recent_err_msg()                      # start from an empty message list
        assert acl.rt.get_last_error() is not None
        assert call() == code, label
        assert acl.rt.peek_at_last_error() == code, label
        message = acl.get_recent_err_msg()
        assert message is not None, label
        assert message.startswith(f"{acl.errors.error_name(code)}({code})"), (label, message)
        for word in words:
            assert word in message, (label, word, message)
    # nothing of this took the board down: every device answers, data round-trips
    status = launcher.status(board)
    assert [d["state"] for d in status["devices"]] == ["ok"] * 4
    ptr, ret = acl.rt.malloc(MiB, 0)
    assert ret == 0
    to_device(acl, ptr, np.arange(MiB, dtype=np.uint8))
    assert (from_device(acl, ptr, MiB) == np.arange(MiB, dtype=np.uint8)).all()


def test_use_before_set_device(acl):
    K = acl
    host = np.zeros(16, np.uint8)
    hp = acl.util.numpy_to_ptr(host)
    calls = {
        "malloc": lambda: acl.rt.malloc(16, 0)[1],
        "create_stream": lambda: acl.rt.create_stream()[1],
        "get_mem_info": lambda: acl.rt.get_mem_info(K.ACL_HBM_MEM)[2],
        "memcpy_async": lambda: acl.rt.memcpy_async(hp, 16, hp, 16, K.ACL_MEMCPY_HOST_TO_HOST, 0),
        "memset_async": lambda: acl.rt.memset_async(hp, 16, 0, 16, 0),
        "synchronize_stream": lambda: acl.rt.synchronize_stream(0),
        "synchronize_device": acl.rt.synchronize_device,
        "get_device": lambda: acl.rt.get_device()[1],
        "get_context": lambda: acl.rt.get_context()[1],
    }
    for name, call in calls.items():
        assert call() == K.ACL_ERROR_RT_CONTEXT_NULL == 107002, name
        assert acl.rt.get_last_error() == 107002
        assert "set_device" in acl.get_recent_err_msg(), name


def test_last_error_slot_semantics(dev):
    acl = dev
    assert acl.rt.peek_at_last_error() == acl.ACL_SUCCESS
    assert acl.rt.set_device(99) == 107001
    ptr, ret = acl.rt.malloc(64, 0)                  # a success does not clear the slot
    assert ret == 0
    assert acl.rt.peek_at_last_error() == 107001
    assert acl.rt.peek_at_last_error() == 107001     # peek leaves it
    assert acl.rt.free(0) == 100000                  # every failure overwrites it
    assert acl.rt.get_last_error() == 100000         # get returns and resets
    assert acl.rt.get_last_error() == 0
    assert acl.rt.peek_at_last_error() == 0
    # the level must be ACL_RT_THREAD_LEVEL (0)
    assert acl.rt.peek_at_last_error(1) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.get_last_error(acl.ACL_RT_THREAD_LEVEL) == 0


def test_last_error_is_per_thread(dev):
    acl = dev
    ready = threading.Barrier(3)
    done = threading.Barrier(3)
    seen = {}

    def worker(name, fail):
        fail()
        ready.wait()                 # both threads have failed before anyone reads
        seen[name] = (acl.rt.peek_at_last_error(), acl.get_recent_err_msg())
        done.wait()
        seen[name + "-get"] = (acl.rt.get_last_error(), acl.rt.get_last_error())

    t1 = threading.Thread(target=worker, args=("t1", lambda: acl.rt.get_device()))        # 107002
    t2 = threading.Thread(target=worker, args=("t2", lambda: acl.rt.set_device(42)))      # 107001
    t1.start(), t2.start()
    ready.wait()
    main_err = acl.rt.peek_at_last_error()
    done.wait()
    t1.join(10), t2.join(10)
    assert main_err == 0                                  # the main thread failed nothing
    assert seen["t1"][0] == 107002 and "ACL_ERROR_RT_CONTEXT_NULL" in seen["t1"][1]
    assert seen["t2"][0] == 107001 and "device 42" in seen["t2"][1]
    assert "device 42" not in seen["t1"][1]
    assert seen["t1-get"] == (107002, 0) and seen["t2-get"] == (107001, 0)
    assert acl.get_recent_err_msg() is None               # their messages are not ours


def test_recent_err_msg(dev):
    acl = dev
    assert acl.get_recent_err_msg() is None
    ptr, _ = acl.rt.malloc(128, 0)
    assert acl.rt.memcpy(ptr, 64, ptr, 128, acl.ACL_MEMCPY_DEVICE_TO_DEVICE) == 107000
    assert acl.rt.free(ptr + 1) == 107000
    text = acl.get_recent_err_msg()
    first, second = text.splitlines()
    # newest first, each with the code's name and number and the cause in words
    assert first.startswith("ACL_ERROR_RT_PARAM_INVALID(107000)") and "double free" in first
    assert "count 128 exceeds destMax 64" in second
    assert acl.get_recent_err_msg() is None                   # reading clears


def test_async_fault_reported_at_sync(dev, board):
    """Memory freed while a queued task still uses it: a device error at the next sync,
    not a crash (spec rule 15)."""
    acl = dev
    n = 64 * MiB
    big, _ = acl.rt.malloc(n, 0)
    victim, _ = acl.rt.malloc(4096, 0)
    s, _ = acl.rt.create_stream()
    for _ in range(4):
        assert acl.rt.memset_async(big, n, 1, n, s) == 0
    assert acl.rt.memset_async(victim, 4096, 2, 4096, s) == 0      # submission is fine ...
    assert acl.rt.free(victim) == 0                                 # ... the memory goes first
    code = acl.rt.synchronize_stream(s)
    assert code == acl.ACL_ERROR_RT_SYS_DMA == 507013
    assert acl.rt.get_last_error() == 507013
    assert "freed" in acl.get_recent_err_msg()
    assert acl.rt.synchronize_stream(s) == 0                        # reported once
    # the stream and the device carry on
    assert acl.rt.memset_async(big, 4096, 3, 4096, s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    assert from_device(acl, big, 1)[0] == 3
    assert [d["state"] for d in launcher.status(board)["devices"]] == ["ok"] * 4


@kernel(vectorized=True)
def nap(ctx, seconds: float):
    time.sleep(seconds)


@kernel(vectorized=True)
def copy_bytes(ctx, src, dst, n):
    ctx.gm(dst, np.uint8, n)[:] = ctx.gm(src, np.uint8, n)


def test_free_comes_after_the_kernel_launched_before(dev):
    """A free right after a launch that reads the memory: on an NPU the short kernel is done
    by then (the CANN samples free so); mdev's free lets this process's launches end first,
    for LAUNCH_GRACE_MS at most (rule 15 stands for what is still queued after that, as
    test_async_fault_reported_at_sync shows)."""
    acl = dev
    src, _ = acl.rt.malloc(4096, 0)
    dst, _ = acl.rt.malloc(4096, 0)
    data = np.arange(4096, dtype=np.uint8)
    to_device(acl, src, data)
    s, _ = acl.rt.create_stream()
    assert nap[1, s](0.1) == 0       # a busy host: the free is sent before the copy starts
    assert copy_bytes[1, s](src, dst, 4096) == 0
    assert acl.rt.free(src) == 0
    assert acl.rt.synchronize_stream(s) == 0, acl.get_recent_err_msg()
    assert (from_device(acl, dst, 4096) == data).all()
    assert acl.rt.free(dst) == 0
    assert acl.rt.destroy_stream(s) == 0


def test_errors_do_not_leak_into_other_process_state(dev, board, run_py):
    """Bad input from one process does not disturb another process on the same board."""
    acl = dev
    ptr, _ = acl.rt.malloc(4096, 0)
    to_device(acl, ptr, np.full(4096, 0x5A, np.uint8))
    out = run_py(f"""
        import mdev.acl as acl
        assert acl.rt.set_device(0) == 0
        # another process's pointer is not this process's memory
        print(acl.rt.free({ptr}), acl.rt.memset({ptr}, 16, 0, 16))
    """, board)
    assert out.stdout.split() == ["107000", "107000"]
    time.sleep(0.1)
    assert (from_device(acl, ptr, 4096) == 0x5A).all()
