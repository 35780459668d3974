"""The runtime functions torch_npu and the C ABI call (issue 18's lists): what each does,
and the code bad input gets.  Host memory registration and the kernels run in the device
processes of the test board, so every check crosses real processes."""

from __future__ import annotations

import mmap
import textwrap
import time

import numpy as np

from async_util import device_buffer, ok, out
from helpers import from_device, to_device
from mdev.kernel import kernel, ptr

E_PARAM, E_INVALID, E_NOT_SUPPORT, E_TIMEOUT, E_NOT_CAPTURED = 107000, 100000, 207000, 107020, 107029
SIZE_MAX = (1 << 64) - 1
H2D, D2H, INNER_D2D = 1, 2, 6
HOST, DEVICE, UNREGISTERED = 0, 1, 2          # aclrtMemLocationType


def held_stream(acl):
    """A stream held back by a value wait until ``release()`` writes its word."""
    stream = out(acl, acl.rt.create_stream())
    word = device_buffer(acl, 4096)
    ok(acl, acl.rt.value_wait(word, 1, acl.ACL_STREAM_WAIT_VALUE_EQ, stream))
    return stream, lambda: to_device(acl, word, np.array([1], np.uint64))


@kernel
def write_word(ctx, where: ptr, value: ptr):
    ctx.gm(where, np.uint64, 1)[0] = value


# ============================================================================ execute timeouts
def test_op_execute_timeouts(dev):
    acl = dev
    interval = out(acl, acl.rt.get_op_timeout_interval())
    assert interval == 4_294_967
    assert out(acl, acl.rt.get_op_execute_timeout()) == 254 * interval // 1000       # default: about 1091 s
    ok(acl, acl.rt.set_op_execute_time_out(10))                    # rounds up to whole ticks
    assert out(acl, acl.rt.get_op_execute_timeout()) == 3 * interval // 1000
    assert out(acl, acl.rt.set_op_execute_timeout_v2(1)) == interval
    assert out(acl, acl.rt.set_op_execute_timeout_v2(0)) == 254 * interval           # 0: the longest
    ok(acl, acl.rt.set_op_execute_time_out_with_ms(5000))
    assert out(acl, acl.rt.get_op_execute_timeout()) == 2 * interval // 1000
    assert acl.rt.set_op_execute_time_out(-1) == E_INVALID


def test_a_kernel_past_its_timeout_is_stopped(dev):
    """A busy kernel (a Python loop) past its launch timeout is stopped at once, not when it
    would have ended, and writes nothing more."""
    acl = dev
    path_source = textwrap.dedent("""
        import numpy as np
        from mdev.kernel import kernel, ptr
        @kernel
        def busy(ctx, out: ptr):
            word = ctx.gm(out, np.uint64, 1)
            while word[0] == 0:
                pass
            word[0] = 7
    """).encode()
    binary = acl.rt.create_binary(path_source, len(path_source))
    assert binary
    handle = out(acl, acl.rt.binary_load(binary))
    func = out(acl, acl.rt.binary_get_function(handle, "busy"))
    result = device_buffer(acl, 4096)
    args = result.to_bytes(8, "little")
    cfg = {acl.ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US: {"timeoutLow": 100_000, "timeoutHigh": 0}}
    ok(acl, acl.rt.launch_kernel_with_host_args(func, 1, 0, cfg, args, len(args), None, 0))
    assert acl.rt.synchronize_stream_with_timeout(0, 30000) == acl.ACL_ERROR_RT_VECTOR_CORE_TIMEOUT
    assert from_device(acl, result, 8, np.uint64)[0] == 0
    ok(acl, acl.rt.destroy_binary(binary))
    assert acl.rt.destroy_binary(binary) == acl.ACL_ERROR_RT_INVALID_HANDLE


# ============================================================================ host memory
def page_aligned(nbytes: int):
    """Host memory of this process at a page boundary (as the registration demands)."""
    area = mmap.mmap(-1, nbytes)
    return area, np.frombuffer(area, np.uint8)


def test_host_register_in_place(dev):
    acl = dev
    area, host = page_aligned(2 * 4096)
    host[:] = 3
    p = host.ctypes.data
    dev_p = out(acl, acl.rt.host_register(p, 8192, acl.ACL_HOST_REGISTER_MAPPED))
    assert dev_p == p == out(acl, acl.rt.host_get_device_pointer(p, 0))
    assert (host == 3).all()                                    # contents kept, same address
    attrs = out(acl, acl.rt.pointer_get_attributes(p))
    assert attrs["location"]["type"] == HOST
    stream = out(acl, acl.rt.create_stream())
    ok(acl, write_word[1, stream](p + 8, 0xABCD))               # a kernel writes the user's pages
    ok(acl, acl.rt.synchronize_stream(stream))
    assert host[8:16].view(np.uint64)[0] == 0xABCD
    held, release = held_stream(acl)                            # pinned now: async copies are queued
    d = device_buffer(acl, 8192)
    ok(acl, acl.rt.memcpy_async(d, 8192, p, 8192, H2D, held))
    assert out(acl, acl.rt.stream_query(held)) == acl.ACL_STREAM_STATUS_NOT_READY
    release()
    ok(acl, acl.rt.synchronize_stream(held))
    assert from_device(acl, d, 16).tolist()[8:10] == [0xCD, 0xAB]
    ok(acl, acl.rt.host_unregister(p))
    assert host[8:16].view(np.uint64)[0] == 0xABCD              # private pages again, contents kept
    host[0] = 9
    assert out(acl, acl.rt.pointer_get_attributes(p))["location"]["type"] == UNREGISTERED
    del host
    area.close()


def test_host_register_rules(dev):
    acl = dev
    area, host = page_aligned(3 * 4096)
    p = host.ctypes.data
    assert acl.rt.host_register(p + 8, 64, 0)[1] == E_PARAM                   # not 4 KiB aligned
    assert acl.rt.host_register(p, 4096, acl.ACL_HOST_REGISTER_IOMEMORY)[1] == E_NOT_SUPPORT
    ok(acl, acl.rt.host_register_v2(p, 4096, acl.ACL_HOST_REG_PINNED | acl.ACL_HOST_REG_MAPPED))
    assert acl.rt.host_register_v2(p, 4096, acl.ACL_HOST_REG_PINNED) == acl.ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED
    assert acl.rt.host_register_v2(p, 4096, 0x1) == E_INVALID
    pinned = out(acl, acl.rt.malloc_host(4096))
    assert acl.rt.host_register(pinned - pinned % 4096, 4096, 0)[1] == acl.ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED
    assert acl.rt.free_host(p) == E_PARAM                    # a registration ends with host_unregister
    assert acl.rt.host_unregister(p + 4096) == acl.ACL_ERROR_HOST_MEMORY_NOT_REGISTERED
    ok(acl, acl.rt.host_unregister(p))
    assert acl.rt.host_unregister(p) == acl.ACL_ERROR_HOST_MEMORY_NOT_REGISTERED
    assert acl.rt.host_get_device_pointer(p, 0)[1] == acl.ACL_ERROR_HOST_MEMORY_NOT_REGISTERED
    del host
    area.close()


def test_host_register_checks_ranges_not_pages(board, run_py):
    """A registration of 2**48 bytes is refused at once (the walk page by page took hours), and
    a range whose middle is pinned memory is refused like one that starts there."""
    proc = run_py("""
        import mmap, time
        import numpy as np
        import mdev.acl as acl
        assert acl.init() == 0 and acl.rt.set_device(0) == 0
        area = mmap.mmap(-1, 4 * 4096)
        p = np.frombuffer(area, np.uint8).ctypes.data
        t0 = time.monotonic()
        print(acl.rt.host_register(p, 1 << 48, acl.ACL_HOST_REGISTER_MAPPED)[1],
              acl.rt.host_register_v2(p, 1 << 48, acl.ACL_HOST_REG_MAPPED), time.monotonic() - t0 < 1)
        assert acl.rt.host_register_v2(p + 4096, 4096, acl.ACL_HOST_REG_MAPPED) == 0
        print(acl.rt.host_register_v2(p, 3 * 4096, acl.ACL_HOST_REG_MAPPED),
              acl.rt.host_register(p, 3 * 4096, acl.ACL_HOST_REGISTER_MAPPED)[1])
        assert acl.rt.host_unregister(p + 4096) == 0
    """, board, timeout=30)
    assert proc.stdout.split() == ["107000", "107000", "True", "507910", "507910"]   # 507910: ALREADY_REGISTERED


def test_configured_allocations_and_usage(dev):
    acl = dev
    va = {"attrs": [{"attr": acl.ACL_RT_MEM_ATTR_VA_FLAG, "value": {"vaFlag": 1}}], "numAttrs": 1}
    h = out(acl, acl.rt.malloc_host_with_cfg(4096, va))
    assert out(acl, acl.rt.pointer_get_attributes(h))["location"]["type"] == HOST
    assert acl.rt.malloc_host_with_cfg(4096, {"attrs": [{"attr": 2, "value": {"deviceId": 0}}]})[1] == E_INVALID
    ok(acl, acl.rt.malloc_host_with_cfg(64, {})[1])
    module = {"attrs": [{"attr": acl.ACL_RT_MEM_ATTR_MODULE_ID, "value": {"moduleId": 7}}], "numAttrs": 1}
    d = out(acl, acl.rt.malloc_with_cfg(4 << 20, acl.ACL_MEM_MALLOC_HUGE_FIRST | acl.ACL_MEM_TYPE_HIGH_BAND_WIDTH,
                                        module))
    attrs = out(acl, acl.rt.pointer_get_attributes(d))
    assert attrs["location"] == {"id": 0, "type": DEVICE} and attrs["page_size"] == 2 << 20
    wrong = {"attrs": [{"attr": acl.ACL_RT_MEM_ATTR_DEVICE_ID, "value": {"deviceId": 1}}]}
    assert acl.rt.malloc_with_cfg(64, 0, wrong)[1] == E_PARAM
    ok(acl, acl.rt.malloc_for_task_scheduler(64, 0, {})[1])
    app = out(acl, acl.rt.malloc(1 << 20, 0))
    usage = {u["name"]: u for u in out(acl, acl.rt.get_mem_usage_info(0, 10))}
    assert usage["MODULE_7"]["cur_mem_size"] == 6 << 20        # 4 MiB + 32 on 2 MiB pages
    assert usage["APP"]["cur_mem_size"] >= 1 << 20 and "RUNTIME" in usage     # the AI Core stacks
    ok(acl, acl.rt.free(d))
    usage = {u["name"]: u for u in out(acl, acl.rt.get_mem_usage_info(0, 10))}
    assert usage["MODULE_7"]["cur_mem_size"] == 0 and usage["MODULE_7"]["mem_peak_size"] == 6 << 20
    assert len(out(acl, acl.rt.get_mem_usage_info(0, 1))) == 1
    assert out(acl, acl.rt.pointer_get_attributes(np.zeros(8).ctypes.data))["location"]["type"] == UNREGISTERED
    assert acl.rt.pointer_get_attributes(0)[1] == E_INVALID
    assert out(acl, acl.rt.check_mem_type([app], 1, acl.ACL_RT_MEM_TYPE_DEV, 0)) == 1
    assert out(acl, acl.rt.check_mem_type([app, h], 2, acl.ACL_RT_MEM_TYPE_DEV, 0)) == 0
    assert out(acl, acl.rt.check_mem_type([app], 1, acl.ACL_RT_MEM_TYPE_DVPP, 0)) == 0


# ============================================================================ fills and copies
def test_memset_d32(dev):
    acl = dev
    d = device_buffer(acl, 64)
    ok(acl, acl.rt.memset_d32(d, 64, 0xDEADBEEF, 4))
    assert from_device(acl, d, 20, np.uint32).tolist() == [0xDEADBEEF] * 4 + [0]
    held, release = held_stream(acl)
    ok(acl, acl.rt.memset_d32_async(d, 64, 7, 16, held))
    assert from_device(acl, d, 4, np.uint32)[0] == 0xDEADBEEF      # queued behind the wait
    release()
    ok(acl, acl.rt.synchronize_stream(held))
    assert (from_device(acl, d, 64, np.uint32) == 7).all()
    h = out(acl, acl.rt.malloc_host(64))
    ok(acl, acl.rt.memset_d32_async(h, 64, 5, 16, held))            # host memory: at once
    assert (acl.util.ptr_to_numpy(h, (16,), 6) == 5).all()          # NPY_UINT32
    assert acl.rt.memset_d32(d, 8, 1, 4) == E_PARAM                  # memSize < 4 N
    assert acl.rt.memset_d32(np.zeros(4, np.uint32).ctypes.data, 16, 1, 4) == E_PARAM
    ok(acl, acl.rt.memset_d32(d, 64, 1, 0))


def test_batch_copies(dev):
    acl = dev
    d = [device_buffer(acl, 4096) for _ in range(3)]
    h = [np.full(16, i + 1, np.uint8) for i in range(3)]
    to_dev = [{"dstLoc": {"id": 0, "type": DEVICE}, "srcLoc": {"id": 0, "type": HOST}}]
    hp = [a.ctypes.data for a in h]
    assert out(acl, acl.rt.memcpy_batch(d, [4096] * 3, hp, [16] * 3, 3, to_dev, [0], 1)) == SIZE_MAX
    assert [int(from_device(acl, p, 1)[0]) for p in d] == [1, 2, 3]
    back = [np.zeros(16, np.uint8) for _ in range(3)]
    from_dev = [{"dstLoc": {"id": 0, "type": HOST}, "srcLoc": {"id": 0, "type": DEVICE}}]
    stream = out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.memcpy_batch_async_v2([b.ctypes.data for b in back], [16] * 3, d, [16] * 3, 3, from_dev, [0], 1,
                                         stream))
    ok(acl, acl.rt.synchronize_stream(stream))
    assert [int(b[0]) for b in back] == [1, 2, 3]
    # the second copy's destination is host memory: the batch fails naming it
    fail, ret = acl.rt.memcpy_batch([d[0], hp[1]], [4096] * 2, hp[:2], [16] * 2, 2, to_dev, [0], 1)
    assert ret != 0 and fail == 1
    fail, ret = acl.rt.memcpy_batch(d, [4096] * 3, hp, [16] * 3, 3, to_dev + from_dev, [0, 1], 2)
    assert ret == E_INVALID and fail == SIZE_MAX                    # two directions in one batch
    assert acl.rt.memcpy_batch(d, [4096] * 3, hp, [16] * 3, 3, to_dev, [1], 1)[1] == E_INVALID
    assert out(acl, acl.rt.memcpy_batch(d, [4096] * 3, hp, [0] * 3, 3, to_dev, [0], 1)) == SIZE_MAX


def test_batch_copy_async_with_fail_index(dev):
    """aclrtMemcpyBatchAsync (torch_npu's form: failIndex out): pinned memory is copied in
    stream order, behind what the stream holds; a copy the attributes do not describe fails
    the batch with its index, as in the synchronous form."""
    acl = dev
    d = [device_buffer(acl, 4096) for _ in range(2)]
    pinned = [out(acl, acl.rt.malloc_host(4096)) for _ in range(2)]
    for i, p in enumerate(pinned):
        ok(acl, acl.rt.memset(p, 4096, 0x30 + i, 4096))
    to_dev = [{"dstLoc": {"id": 0, "type": DEVICE}, "srcLoc": {"id": 0, "type": HOST}}]
    held, release = held_stream(acl)
    assert out(acl, acl.rt.memcpy_batch_async(d, [4096] * 2, pinned, [4096] * 2, 2, to_dev, [0], 1,
                                              held)) == SIZE_MAX
    assert [int(from_device(acl, p, 1)[0]) for p in d] == [0, 0]     # queued behind the wait
    release()
    ok(acl, acl.rt.synchronize_stream(held))
    assert [int(from_device(acl, p, 4096).min()) for p in d] == [0x30, 0x31]
    fail, ret = acl.rt.memcpy_batch_async([d[0], pinned[1]], [4096] * 2, pinned, [16] * 2, 2, to_dev, [0], 1,
                                          held)
    assert ret != 0 and fail == 1                                     # the second lands in host memory
    assert acl.rt.memcpy_batch_async(d, [4096] * 2, pinned, [16] * 2, 2, to_dev, [0], 1, 12345)[1] != 0
    ok(acl, acl.rt.synchronize_stream(held))
    for p in pinned:
        ok(acl, acl.rt.free_host(p))


def test_descriptor_copy(dev):
    acl = dev
    size = out(acl, acl.rt.get_memcpy_desc_size(INNER_D2D))
    desc, src, dst = device_buffer(acl, size), device_buffer(acl, 4096), device_buffer(acl, 4096)
    to_device(acl, src, np.arange(64, dtype=np.uint8))
    assert out(acl, acl.rt.set_memcpy_desc(desc, INNER_D2D, src, dst, 64, None)) == desc
    stream = out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.memcpy_async_with_desc(desc, INNER_D2D, stream))
    ok(acl, acl.rt.synchronize_stream(stream))
    assert (from_device(acl, dst, 64) == np.arange(64)).all()
    assert acl.rt.get_memcpy_desc_size(D2H)[1] == E_INVALID
    assert acl.rt.set_memcpy_desc(desc, INNER_D2D, src, np.zeros(64).ctypes.data, 64, None)[1] != 0


def test_cache_maintenance(dev):
    acl = dev
    d = device_buffer(acl, 4096)
    stream = out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.mem_flush(d, 4096))
    ok(acl, acl.rt.mem_invalidate(d, 64))
    assert acl.rt.mem_flush(d, 0) == E_INVALID
    assert acl.rt.mem_flush(np.zeros(4).ctypes.data, 8) == E_PARAM
    for kind in (acl.ACL_RT_CMO_TYPE_PREFETCH, acl.ACL_RT_CMO_TYPE_FLUSH):
        ok(acl, acl.rt.cmo_async(d, 4096, kind, stream))
    ok(acl, acl.rt.synchronize_stream(stream))
    assert acl.rt.cmo_async(d, 4096, 9, stream) == E_INVALID
    ok(acl, acl.rt.memcpy_async_with_condition(d, 4096, d + 64, 64, 3, stream))
    ok(acl, acl.rt.synchronize_stream(stream))


# ============================================================================ events
def test_wait_with_timeout_and_flags(dev):
    acl = dev
    held, release = held_stream(acl)
    ev = out(acl, acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC))
    ok(acl, acl.rt.record_event_with_flag(ev, held, acl.ACL_EVENT_RECORD_DEFAULT))
    waiter = out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.stream_wait_event_with_timeout(waiter, ev, 1))       # gives up after 1 s
    assert acl.rt.synchronize_stream(waiter) == E_TIMEOUT
    ok(acl, acl.rt.stream_wait_event_with_flag(waiter, ev, 0, acl.ACL_EVENT_WAIT_DEFAULT))
    release()
    ok(acl, acl.rt.synchronize_stream(waiter))
    assert acl.rt.stream_wait_event_with_timeout(waiter, ev, -1) == E_INVALID
    assert acl.rt.record_event_with_flag(ev, held, acl.ACL_EVENT_RECORD_EXTERNAL) == E_NOT_CAPTURED
    assert acl.rt.stream_wait_event_with_flag(waiter, ev, 0, 7) == E_INVALID


def test_external_record_and_wait_in_a_capture(dev):
    """An EXTERNAL record inside a graph is a real record on each replay: a stream outside
    waits for the replay; an EXTERNAL wait waits for the latest record outside the graph."""
    acl = dev
    stream, other = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    done = out(acl, acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC))
    gate = out(acl, acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC))
    word = device_buffer(acl, 4096)
    ok(acl, acl.mdl.ri_capture_begin(stream, acl.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL))
    ok(acl, acl.rt.stream_wait_event_with_flag(stream, gate, 0, acl.ACL_EVENT_WAIT_EXTERNAL))
    ok(acl, acl.rt.value_write(word, 5, 0, stream))
    ok(acl, acl.rt.record_event_with_flag(done, stream, acl.ACL_EVENT_RECORD_EXTERNAL))
    model = out(acl, acl.mdl.ri_capture_end(stream))
    assert acl.rt.record_event_with_flag(done, other, acl.ACL_EVENT_RECORD_DEFAULT) == E_PARAM     # flag is sticky
    held, release = held_stream(acl)
    ok(acl, acl.rt.record_event(gate, held))            # the replay waits for this record
    ok(acl, acl.mdl.ri_execute_async(model, stream))
    ok(acl, acl.rt.stream_wait_event(other, done))      # outside the graph: waits for the replay
    buf = device_buffer(acl, 4096)
    ok(acl, acl.rt.memset_async(buf, 8, 1, 8, other))
    time.sleep(0.1)
    assert out(acl, acl.rt.stream_query(other)) == acl.ACL_STREAM_STATUS_NOT_READY
    assert from_device(acl, word, 8, np.uint64)[0] == 0
    release()
    ok(acl, acl.rt.synchronize_stream(other))
    assert from_device(acl, word, 8, np.uint64)[0] == 5 and from_device(acl, buf, 1)[0] == 1
    ok(acl, acl.mdl.ri_destroy(model))
    once = out(acl, acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC))     # one EXTERNAL record a graph
    ok(acl, acl.mdl.ri_capture_begin(stream, acl.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL))
    ok(acl, acl.rt.record_event_with_flag(once, stream, acl.ACL_EVENT_RECORD_EXTERNAL))
    assert acl.rt.record_event_with_flag(once, stream, acl.ACL_EVENT_RECORD_EXTERNAL) == E_PARAM
    assert acl.mdl.ri_capture_end(stream)[1] == acl.ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED


def test_resource_counts_and_last_task(dev):
    acl = dev
    streams_left, events_left = out(acl, acl.rt.get_stream_available_num()), out(acl, acl.rt.get_event_avail_num())
    stream = out(acl, acl.rt.create_stream())
    ev = out(acl, acl.rt.create_event())
    assert out(acl, acl.rt.get_stream_available_num()) == streams_left - 1
    assert out(acl, acl.rt.get_event_avail_num()) == events_left - 1
    d = device_buffer(acl, 4096)
    for expected in (1, 2):
        ok(acl, acl.rt.memset_async(d, 8, 0, 8, stream))
        assert out(acl, acl.rt.get_thread_last_task_id()) == expected
    ok(acl, acl.rt.memset_async(d, 8, 0, 8, 0))         # the default stream does not count
    assert out(acl, acl.rt.get_thread_last_task_id()) == 2
    ok(acl, acl.rt.destroy_event(ev))


def test_device_task_abort(dev):
    acl = dev
    held, _ = held_stream(acl)
    other, _ = held_stream(acl)
    d = device_buffer(acl, 4096)
    ok(acl, acl.rt.memset_async(d, 8, 9, 8, held))       # queued: dropped
    ok(acl, acl.rt.device_task_abort(0, 10000))
    assert acl.rt.synchronize_stream(held) == acl.ACL_ERROR_RT_STREAM_ABORT
    assert acl.rt.synchronize_stream(other) == acl.ACL_ERROR_RT_STREAM_ABORT
    assert from_device(acl, d, 1)[0] == 0
    assert acl.rt.device_task_abort(0, 36 * 60 * 1000 + 1) == E_PARAM
    assert acl.rt.device_task_abort(7, 0) == 107001


# ============================================================================ notifies
def test_counting_notify(dev):
    acl = dev
    cn = out(acl, acl.rt.cnt_notify_create(0))
    assert out(acl, acl.rt.cnt_notify_get_id(cn)) >= 0
    recorder, waiter = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    d = device_buffer(acl, 4096)
    wait = {"mode": acl.ACL_RT_CNT_NOTIFY_WAIT_BIGGER_OR_EQUAL_MODE, "value": 3, "timeout": 30, "isClear": 1}
    ok(acl, acl.rt.cnt_notify_wait_with_timeout(cn, waiter, wait))
    ok(acl, acl.rt.memset_async(d, 8, 4, 8, waiter))
    add = {"mode": acl.ACL_RT_CNT_NOTIFY_RECORD_ADD_MODE, "value": 1}
    for _ in range(2):
        ok(acl, acl.rt.cnt_notify_record(cn, recorder, add))
    ok(acl, acl.rt.synchronize_stream(recorder))
    time.sleep(0.1)
    assert out(acl, acl.rt.stream_query(waiter)) == acl.ACL_STREAM_STATUS_NOT_READY      # 2 < 3
    ok(acl, acl.rt.cnt_notify_record(cn, recorder, add))
    ok(acl, acl.rt.synchronize_stream(waiter))
    assert from_device(acl, d, 1)[0] == 4
    # cleared on release: a wait for 1 now times out
    ok(acl, acl.rt.cnt_notify_wait_with_timeout(cn, waiter, {"mode": acl.ACL_RT_CNT_NOTIFY_WAIT_EQUAL_MODE,
                                                             "value": 0, "timeout": 5, "isClear": 0}))
    ok(acl, acl.rt.synchronize_stream(waiter))
    ok(acl, acl.rt.cnt_notify_record(cn, recorder, {"mode": acl.ACL_RT_CNT_NOTIFY_RECORD_SET_VALUE_MODE,
                                                    "value": 0b1010}))
    ok(acl, acl.rt.cnt_notify_wait_with_timeout(cn, waiter, {
        "mode": acl.ACL_RT_CNT_NOTIFY_WAIT_EQUAL_WITH_BITMASK_MODE, "value": 0b1000, "timeout": 30}))
    ok(acl, acl.rt.synchronize_stream(waiter))
    ok(acl, acl.rt.cnt_notify_reset(cn, recorder))
    ok(acl, acl.rt.cnt_notify_wait_with_timeout(cn, waiter, {"mode": acl.ACL_RT_CNT_NOTIFY_WAIT_BIGGER_MODE,
                                                             "value": 0, "timeout": 1}))
    assert acl.rt.synchronize_stream(waiter) == E_TIMEOUT                  # reset to 0, never bigger
    assert acl.rt.cnt_notify_record(cn, recorder, {"mode": 3, "value": 1}) == E_INVALID
    assert acl.rt.cnt_notify_create(1)[1] == E_INVALID
    ok(acl, acl.rt.cnt_notify_destroy(cn))
    assert acl.rt.cnt_notify_destroy(cn) == E_PARAM


def test_notify_batch_reset(dev):
    acl = dev
    n = [out(acl, acl.rt.create_notify(0)) for _ in range(2)]
    s = out(acl, acl.rt.create_stream())
    for notify in n:
        ok(acl, acl.rt.record_notify(notify, s))
    ok(acl, acl.rt.synchronize_stream(s))
    ok(acl, acl.rt.notify_batch_reset(n, 2))             # both records are gone
    ok(acl, acl.rt.wait_and_reset_notify(n[0], s, 1))
    assert acl.rt.synchronize_stream(s) == E_TIMEOUT
    assert acl.rt.notify_batch_reset(n, 3) == E_INVALID


# ============================================================================ streams and kernels
def test_stream_config_handle(dev):
    acl = dev
    handle = acl.rt.create_stream_config_handle()
    assert handle
    ok(acl, acl.rt.set_stream_config_opt(handle, acl.ACL_RT_STREAM_PRIORITY, 3, 4))
    ok(acl, acl.rt.set_stream_config_opt(handle, acl.ACL_RT_STREAM_FLAG, acl.ACL_STREAM_FAST_LAUNCH, 8))
    work = device_buffer(acl, 1 << 16)
    ok(acl, acl.rt.set_stream_config_opt(handle, acl.ACL_RT_STREAM_WORK_ADDR_PTR, work, 8))
    ok(acl, acl.rt.set_stream_config_opt(handle, acl.ACL_RT_STREAM_WORK_SIZE, 1 << 16, 8))
    stream = out(acl, acl.rt.create_stream_v2(handle))
    assert out(acl, acl.rt.stream_get_priority(stream)) == 3
    assert out(acl, acl.rt.stream_get_flags(stream)) == acl.ACL_STREAM_FAST_LAUNCH
    assert acl.rt.set_stream_config_opt(handle, acl.ACL_RT_STREAM_PRIORITY, 9, 4) == E_INVALID
    assert acl.rt.set_stream_config_opt(handle, acl.ACL_RT_STREAM_PRIORITY, 1, 8) == E_INVALID    # valueSize
    ok(acl, acl.rt.destroy_stream_config_handle(handle))
    assert acl.rt.create_stream_v2(handle)[1] == E_INVALID


CPU_SOURCE = textwrap.dedent("""
    import numpy as np
    from mdev.kernel import kernel, ptr, int64
    @kernel
    def fill(ctx, out: ptr, value: int64):
        ctx.gm(out, np.int64, 1)[0] = value
""").encode()


def test_binaries_cpu_functions_and_user_memory_args(dev):
    acl = dev
    binary = acl.rt.create_binary(CPU_SOURCE, len(CPU_SOURCE))
    handle = out(acl, acl.rt.binary_load(binary))
    vector = out(acl, acl.rt.binary_get_function(handle, "fill"))
    aic, aiv = out(acl, acl.rt.get_function_addr(vector))
    assert aic == 0 and aiv > 0
    cpu = out(acl, acl.rt.register_cpu_func(handle, "fill", "fill_on_cpu"))
    assert out(acl, acl.rt.get_function_addr(cpu)) == (0, 0)
    assert acl.rt.register_cpu_func(handle, "nothing", "x")[1] == acl.ACL_ERROR_RT_KERNEL_LOOKUP
    d = device_buffer(acl, 4096)
    args = d.to_bytes(8, "little") + (42).to_bytes(8, "little")
    ok(acl, acl.rt.launch_kernel_with_host_args(cpu, 1, 0, None, args, len(args), None, 0))
    ok(acl, acl.rt.synchronize_stream(0))
    assert from_device(acl, d, 8, np.int64)[0] == 42
    # an argument handle in the caller's memory
    handle_mem = np.zeros(out(acl, acl.rt.kernel_args_get_handle_mem_size(vector)), np.uint8)
    user = np.zeros(64, np.uint8)
    ah = handle_mem.ctypes.data
    ok(acl, acl.rt.kernel_args_init_by_user_mem(vector, ah, user.ctypes.data, 16))
    out(acl, acl.rt.kernel_args_append(ah, d.to_bytes(8, "little"), 8))
    out(acl, acl.rt.kernel_args_append(ah, (7).to_bytes(8, "little"), 8))
    ok(acl, acl.rt.kernel_args_finalize(ah))
    ok(acl, acl.rt.launch_kernel_with_config(vector, 1, 0, None, ah))
    ok(acl, acl.rt.synchronize_stream(0))
    assert from_device(acl, d, 8, np.int64)[0] == 7
    assert acl.rt.kernel_args_init_by_user_mem(vector, ah, user.ctypes.data, 16) == E_PARAM
    assert acl.rt.create_binary(b"", 0) == 0


def test_groups_as_the_emulated_parts_answer(dev):
    acl = dev
    assert acl.rt.create_group_info() == 0                 # NULL: no groups on an A2 part
    assert acl.rt.get_group_count()[1] == E_NOT_SUPPORT
    assert acl.rt.set_group(0) == E_NOT_SUPPORT
    assert acl.rt.get_all_group_info(0) == E_NOT_SUPPORT


# ============================================================================ DVPP memory
def test_dvpp_memory(dev):
    """acl.media's buffers: device memory on huge pages of the DVPP type, 128-byte aligned;
    the media engines themselves answer 200001."""
    acl = dev
    d = out(acl, acl.media.dvpp_malloc(1000))
    assert d % 128 == 0
    assert out(acl, acl.rt.pointer_get_attributes(d))["page_size"] == 2 << 20
    assert out(acl, acl.rt.check_mem_type([d], 1, acl.ACL_RT_MEM_TYPE_DVPP, 0)) == 1
    assert out(acl, acl.rt.check_mem_type([d], 1, acl.ACL_RT_MEM_TYPE_DEV, 0)) == 0
    picture = np.arange(1000, dtype=np.uint16).astype(np.uint8)
    to_device(acl, d, picture)
    ok(acl, write_word[1, 0](d + 992, 0x55))                        # kernels use it as device memory
    ok(acl, acl.rt.synchronize_stream(0))
    assert (from_device(acl, d, 992) == picture[:992]).all() and from_device(acl, d + 992, 1)[0] == 0x55
    plain = out(acl, acl.rt.malloc(64, 0))
    assert acl.media.dvpp_free(plain) == acl.ACL_ERROR_RT_PARAM_INVALID
    ok(acl, acl.media.dvpp_free(d))
    assert acl.media.dvpp_free(d) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.media.dvpp_malloc(0)[1] == E_INVALID
    assert acl.media.dvpp_create_channel_desc() == 0
    assert "dvpp_malloc" in dir(acl.media) and "dvpp_vpc_resize_async" not in dir(acl.media)
