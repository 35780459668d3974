"""Model run instances (aclmdlRI): persistent-stream builds, stream capture (single and
cross-stream), capture restrictions and invalidation, task groups and update, debug dumps,
and the host cost of a replay."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from async_util import ok, out
from mdev import ops
from mdev.runtime.core import RUNTIME as rt

F32 = 11             # NPY_FLOAT32 for acl.util.ptr_to_numpy
GLOBAL, THREAD_LOCAL, RELAXED = 0, 1, 2
NONE, ACTIVE, INVALIDATED = 0, 1, 2
H2D, D2H = 1, 2


# ---------------------------------------------------------------------------- helpers
def dev_floats(acl, n: int, value: float = 0.0) -> int:
    ptr = out(acl, acl.rt.malloc(n * 4, acl.ACL_MEM_MALLOC_HUGE_FIRST))
    data = np.full(n, value, np.float32)
    ok(acl, acl.rt.memcpy(ptr, n * 4, acl.util.numpy_to_ptr(data), n * 4, H2D))
    return ptr


def read_floats(acl, ptr: int, n: int) -> np.ndarray:
    host = np.zeros(n, np.float32)
    ok(acl, acl.rt.memcpy(acl.util.numpy_to_ptr(host), n * 4, ptr, n * 4, D2H))
    return host


def pinned_floats(acl, n: int, value: float = 0.0) -> tuple[int, np.ndarray]:
    ptr = out(acl, acl.rt.malloc_host(n * 4))
    view = acl.util.ptr_to_numpy(ptr, (n,), F32)
    view[:] = value
    return ptr, view


def info(acl, stream) -> tuple[int, int]:
    return out(acl, acl.mdl.ri_capture_get_info(stream))


@pytest.fixture
def dev(dev):
    """conftest's, and this thread's capture mode back to GLOBAL after the test."""
    yield dev
    dev.mdl.ri_capture_thread_exchange_mode(GLOBAL)


def constants_ok(acl):
    assert (acl.ACL_STREAM_PERSISTENT, acl.ACL_MODEL_STREAM_FLAG_HEAD, acl.ACL_MODEL_STREAM_FLAG_DEFAULT) == \
        (0x4, 0x0, 0x7FFFFFFF)


def test_constants_and_names(acl):
    constants_ok(acl)
    assert (acl.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL, acl.ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL,
            acl.ACL_MODEL_RI_CAPTURE_MODE_RELAXED) == (GLOBAL, THREAD_LOCAL, RELAXED)
    assert (acl.ACL_MODEL_RI_CAPTURE_STATUS_NONE, acl.ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE,
            acl.ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED) == (NONE, ACTIVE, INVALIDATED)
    # aclmdlRIBuildBegin -> acl.mdl.ri_build_begin, also under its full snake_case name
    assert acl.mdl.mdl_ri_build_begin is acl.mdl.ri_build_begin
    assert acl.mdl.mdl_ri_capture_task_update_end is acl.mdl.ri_capture_task_update_end
    from mdev.acl import pyacl_names
    assert pyacl_names.status("mdl", "ri_capture_begin") == "implemented"
    assert pyacl_names.c_name("mdl", "ri_capture_task_grp_end") == "aclmdlRICaptureTaskGrpEnd"
    # the offline-model names of pyACL are still unsupported stubs
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert acl.mdl.load_from_file("x.om") == (None, acl.ACL_ERROR_API_NOT_SUPPORT)


# ---------------------------------------------------------------------------- persistent streams
def _accumulate(acl, stream, acc, one, n, host=None):
    """acc += 1 (a kernel), then acc -> host (a copy) if given."""
    ok(acl, ops.axpy[1, stream](acc, one, acc, 1.0, n))
    if host is not None:
        ok(acl, acl.rt.memcpy_async(host, n * 4, acc, n * 4, D2H, stream))


def test_persistent_stream_build_and_execute_twice(dev):
    acl, n = dev, 8
    acc, one = dev_floats(acl, n), dev_floats(acl, n, 1.0)
    host, view = pinned_floats(acl, n, -1.0)
    stream = out(acl, acl.rt.create_stream_with_config(0, acl.ACL_STREAM_PERSISTENT))
    model = out(acl, acl.mdl.ri_build_begin(0))
    ok(acl, acl.mdl.ri_bind_stream(model, stream, acl.ACL_MODEL_STREAM_FLAG_HEAD))
    _accumulate(acl, stream, acc, one, n, host)
    # stored, not run: sync and query of a persistent stream answer at once
    ok(acl, acl.rt.synchronize_stream(stream))
    assert out(acl, acl.rt.stream_query(stream)) == acl.ACL_STREAM_STATUS_COMPLETE
    time.sleep(0.05)
    assert (read_floats(acl, acc, n) == 0).all() and (view == -1).all()
    ok(acl, acl.mdl.ri_end_task(model, stream))
    assert acl.mdl.ri_execute(model, -1) == acl.ACL_ERROR_RT_MODEL_EXECUTE      # before build end: 507011
    ok(acl, acl.mdl.ri_build_end(model, None))
    ok(acl, acl.mdl.ri_execute(model, -1))
    assert (view == 1).all()
    ok(acl, acl.mdl.ri_execute(model, 5000))
    assert (view == 2).all() and (read_floats(acl, acc, n) == 2).all()
    # execute_async on any stream of the context: one task each
    s2 = out(acl, acl.rt.create_stream())
    for _ in range(3):
        ok(acl, acl.mdl.ri_execute_async(model, s2))
    ok(acl, acl.rt.synchronize_stream(s2))
    assert (view == 5).all()
    ok(acl, acl.mdl.ri_unbind_stream(model, stream))
    ok(acl, acl.rt.destroy_stream(stream))
    ok(acl, acl.mdl.ri_execute(model, -1))          # the model keeps what it stored
    assert (view == 6).all()
    ok(acl, acl.mdl.ri_destroy(model))
    assert acl.mdl.ri_execute(model, -1) == acl.ACL_ERROR_RT_PARAM_INVALID
    ok(acl, acl.rt.destroy_stream(s2))


def test_build_errors(dev):
    acl = dev
    plain = out(acl, acl.rt.create_stream())
    pers = out(acl, acl.rt.create_stream_with_config(0, acl.ACL_STREAM_PERSISTENT))
    model = out(acl, acl.mdl.ri_build_begin(0))
    other = out(acl, acl.mdl.ri_build_begin(0))
    assert acl.mdl.ri_build_begin(1) == (0, acl.ACL_ERROR_INVALID_PARAM)
    assert acl.mdl.ri_bind_stream(model, plain, 0) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.mdl.ri_bind_stream(model, 0, 0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.mdl.ri_bind_stream(model, pers, 5) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.mdl.ri_bind_stream(0, pers, 0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.mdl.ri_end_task(model, pers) == acl.ACL_ERROR_RT_STREAM_MODEL       # not bound yet
    ok(acl, acl.mdl.ri_bind_stream(model, pers, acl.ACL_MODEL_STREAM_FLAG_HEAD))
    assert acl.mdl.ri_bind_stream(other, pers, 0) == acl.ACL_ERROR_RT_STREAM_MODEL  # one model per stream
    assert acl.mdl.ri_execute_async(model, plain) == acl.ACL_ERROR_RT_MODEL_EXECUTE
    assert acl.mdl.ri_execute(model, 0) == acl.ACL_ERROR_RT_PARAM_INVALID          # timeout 0
    assert acl.mdl.ri_build_end(model, 1) == acl.ACL_ERROR_INVALID_PARAM
    ok(acl, acl.mdl.ri_build_end(model, None))
    assert acl.mdl.ri_build_end(model, None) == acl.ACL_ERROR_RT_PARAM_INVALID
    pers2 = out(acl, acl.rt.create_stream_with_config(0, acl.ACL_STREAM_PERSISTENT))
    assert acl.mdl.ri_bind_stream(model, pers2, 0) == acl.ACL_ERROR_RT_PARAM_INVALID  # already built
    assert acl.rt.create_stream_with_config(0, acl.ACL_STREAM_PERSISTENT | acl.ACL_STREAM_DEVICE_USE_ONLY)[1] \
        == acl.ACL_ERROR_RT_PARAM_INVALID
    ok(acl, acl.mdl.ri_execute(model, -1))           # an empty model runs
    for m in (model, other):
        ok(acl, acl.mdl.ri_destroy(m))
    for s in (plain, pers, pers2):
        ok(acl, acl.rt.destroy_stream(s))


def test_build_two_streams_events_and_activation(dev):
    """A head stream forks to a second persistent stream through an event (a graph-local
    marker) and activates a third, non-head stream (aclrtActiveStream)."""
    acl, n = dev, 16
    a, b, c = (dev_floats(acl, n) for _ in range(3))
    one = dev_floats(acl, n, 1.0)
    s1, s2, s3 = (out(acl, acl.rt.create_stream_with_config(0, acl.ACL_STREAM_PERSISTENT)) for _ in range(3))
    ev = out(acl, acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC))
    model = out(acl, acl.mdl.ri_build_begin(0))
    ok(acl, acl.mdl.ri_bind_stream(model, s1, acl.ACL_MODEL_STREAM_FLAG_HEAD))
    ok(acl, acl.mdl.ri_bind_stream(model, s2, acl.ACL_MODEL_STREAM_FLAG_HEAD))
    ok(acl, acl.mdl.ri_bind_stream(model, s3, acl.ACL_MODEL_STREAM_FLAG_DEFAULT))
    ok(acl, ops.axpy[1, s1](a, one, a, 1.0, n))                  # a += 1
    ok(acl, acl.rt.record_event(ev, s1))
    ok(acl, acl.rt.stream_wait_event(s2, ev))
    ok(acl, ops.axpy[1, s2](a, one, b, 10.0, n))                 # b = a + 10  (after a += 1)
    ok(acl, acl.rt.active_stream(s3, s1))
    ok(acl, ops.axpy[1, s3](c, one, c, 1.0, n))                  # c += 1, only when activated
    for s in (s1, s2, s3):
        ok(acl, acl.mdl.ri_end_task(model, s))
    ok(acl, acl.mdl.ri_build_end(model, None))
    ok(acl, acl.mdl.ri_execute(model, -1))
    ok(acl, acl.mdl.ri_execute(model, -1))
    assert (read_floats(acl, a, n) == 2).all()
    assert (read_floats(acl, b, n) == 12).all()
    assert (read_floats(acl, c, n) == 2).all()
    plain = out(acl, acl.rt.create_stream())
    assert acl.rt.active_stream(plain, s1) == acl.ACL_ERROR_RT_STREAM_MODEL
    ok(acl, acl.mdl.ri_destroy(model))
    for s in (s1, s2, s3, plain):
        ok(acl, acl.rt.destroy_stream(s))
    ok(acl, acl.rt.destroy_event(ev))


def test_switch_stream_starts_its_stream_and_stops_the_switching_one(dev):
    """aclrtSwitchStream: when *left cond *right holds (read at each execution) the true
    stream runs and the switching stream's later tasks do not; else the switching stream
    goes on (the model_ri/2_model_switch sample's pattern)."""
    acl, n = dev, 16
    after, branch = dev_floats(acl, n), dev_floats(acl, n)
    one = dev_floats(acl, n, 1.0)
    left = out(acl, acl.rt.malloc(8, 0))
    right = out(acl, acl.rt.malloc(8, 0))
    ok(acl, acl.rt.memcpy(right, 8, acl.util.numpy_to_ptr(np.array([5, 0], np.int32)), 8, H2D))
    s1, s2 = (out(acl, acl.rt.create_stream_with_config(0, acl.ACL_STREAM_PERSISTENT)) for _ in range(2))
    model = out(acl, acl.mdl.ri_build_begin(0))
    ok(acl, acl.mdl.ri_bind_stream(model, s1, acl.ACL_MODEL_STREAM_FLAG_HEAD))
    ok(acl, acl.mdl.ri_bind_stream(model, s2, acl.ACL_MODEL_STREAM_FLAG_DEFAULT))
    assert acl.rt.switch_stream(left, 9, right, acl.ACL_RT_SWITCH_INT32, s2, None, s1) == acl.ACL_ERROR_INVALID_PARAM
    plain = out(acl, acl.rt.create_stream())
    assert acl.rt.switch_stream(left, acl.ACL_RT_EQUAL, right, acl.ACL_RT_SWITCH_INT32, plain, None, s1) == \
        acl.ACL_ERROR_RT_STREAM_MODEL
    ok(acl, acl.rt.switch_stream(left, acl.ACL_RT_GREATER_OR_EQUAL, right, acl.ACL_RT_SWITCH_INT32, s2, None, s1))
    ok(acl, ops.axpy[1, s1](after, one, after, 1.0, n))          # after += 1, when no switch
    ok(acl, ops.axpy[1, s2](branch, one, branch, 1.0, n))        # branch += 1, when switched
    for s in (s1, s2):
        ok(acl, acl.mdl.ri_end_task(model, s))
    ok(acl, acl.mdl.ri_build_end(model, None))
    for value, expected in ((4, (1, 0)), (5, (1, 1)), (6, (1, 2))):     # 4 >= 5 no; 5 >= 5, 6 >= 5 yes
        ok(acl, acl.rt.memcpy(left, 8, acl.util.numpy_to_ptr(np.array([value, 0], np.int32)), 8, H2D))
        ok(acl, acl.mdl.ri_execute(model, -1))
        assert (read_floats(acl, after, n)[0], read_floats(acl, branch, n)[0]) == expected
    ok(acl, acl.mdl.ri_destroy(model))
    for s in (s1, s2, plain):
        ok(acl, acl.rt.destroy_stream(s))


def test_conditional_tasks_if_while_switch(dev):
    """aclmdlRIAddCondTask in a capture: child models captured on another stream run when the
    condition (device memory, read at each execution) picks them; ASSIGN_DEFAULT resets it at
    each execution's start; the children and the condition go with the parent."""
    acl, n = dev, 16
    IF, WHILE, SWITCH = acl.ACL_MODEL_RI_COND_TYPE_IF, acl.ACL_MODEL_RI_COND_TYPE_WHILE, acl.ACL_MODEL_RI_COND_TYPE_SWITCH
    acc, one = dev_floats(acl, n), dev_floats(acl, n, 1.0)
    zero = dev_floats(acl, 2)                  # 8 zero bytes: a WHILE body clears its condition with them
    s, sub = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())

    def capture(kind, count, default, flag, bodies):
        ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
        _, parent = info(acl, s)
        cond = out(acl, acl.mdl.ri_cond_handle_create(parent, default, flag))
        ptr = out(acl, acl.mdl.ri_cond_handle_get_cond_ptr(cond))
        children = out(acl, acl.mdl.ri_add_cond_task(cond, kind, count, s, 0))
        assert len(children) == count
        for child, scale in zip(children, bodies):
            ok(acl, acl.mdl.ri_capture_to_model_ri_begin(sub, child, GLOBAL))
            ok(acl, ops.axpy[1, sub](acc, one, acc, scale, n))           # acc += scale
            if kind == WHILE:
                ok(acl, acl.rt.memcpy_async(ptr, 8, zero, 8, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, sub))
            out(acl, acl.mdl.ri_capture_end(sub))
        return out(acl, acl.mdl.ri_capture_end(s)), ptr

    def run(model, ptr, value) -> float:
        ok(acl, acl.rt.memset(acc, n * 4, 0, n * 4))
        ok(acl, acl.rt.memcpy(ptr, 8, acl.util.numpy_to_ptr(np.array([value], np.uint64)), 8, H2D))
        ok(acl, acl.mdl.ri_execute(model, -1))
        return float(read_floats(acl, acc, n)[0])

    model, ptr = capture(IF, 2, 0, 0, (1.0, 10.0))
    assert [run(model, ptr, v) for v in (1, 0, 7)] == [1.0, 10.0, 1.0]
    assert acl.rt.free(ptr) == acl.ACL_ERROR_RT_PARAM_INVALID            # the model's, not the user's
    ok(acl, acl.mdl.ri_destroy(model))
    model, ptr = capture(SWITCH, 3, 0, 0, (1.0, 2.0, 3.0))
    assert [run(model, ptr, v) for v in (0, 1, 2, 3)] == [1.0, 2.0, 3.0, 0.0]
    ok(acl, acl.mdl.ri_destroy(model))
    model, ptr = capture(WHILE, 1, 0, 0, (5.0,))
    assert [run(model, ptr, v) for v in (1, 0)] == [5.0, 0.0]           # the body clears the condition
    ok(acl, acl.mdl.ri_destroy(model))
    # ASSIGN_DEFAULT: the launch value wins over what the host wrote before the execution
    model, ptr = capture(SWITCH, 2, 1, acl.ACL_MODEL_RI_COND_HANDLE_ASSIGN_DEFAULT, (1.0, 2.0))
    assert [run(model, ptr, v) for v in (0, 1)] == [2.0, 2.0]
    ok(acl, acl.mdl.ri_destroy(model))
    # misuse: outside a capture, a wrong type or size
    ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
    _, parent = info(acl, s)
    cond = out(acl, acl.mdl.ri_cond_handle_create(parent, 0, 0))
    assert acl.mdl.ri_add_cond_task(cond, 7, 1, s, 0)[1] == acl.ACL_ERROR_INVALID_PARAM
    assert acl.mdl.ri_add_cond_task(cond, IF, 3, s, 0)[1] == acl.ACL_ERROR_INVALID_PARAM
    assert acl.mdl.ri_add_cond_task(cond, IF, 1, sub, 0)[1] == acl.ACL_ERROR_RT_STREAM_NOT_CAPTURED
    # a child never captured: the parent's capture fails, and its condition is freed with it
    ptr = out(acl, acl.mdl.ri_cond_handle_get_cond_ptr(cond))
    out(acl, acl.mdl.ri_add_cond_task(cond, IF, 1, s, 0))
    assert acl.mdl.ri_capture_end(s)[1] == acl.ACL_ERROR_RT_MODEL_EXECUTE
    assert rt.memory.get(ptr) is None
    for x in (s, sub):
        ok(acl, acl.rt.destroy_stream(x))


def _blocking_model(acl, flag_dev):
    """A captured model whose only task waits until the word at ``flag_dev`` is >= 1."""
    s = out(acl, acl.rt.create_stream())
    ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
    ok(acl, acl.rt.value_wait(flag_dev, 1, acl.ACL_STREAM_WAIT_VALUE_GEQ, s))
    return s, out(acl, acl.mdl.ri_capture_end(s))


def test_execute_timeout_and_destroy_while_running(dev):
    acl = dev
    flag = out(acl, acl.rt.malloc(64, 0))
    ok(acl, acl.rt.memset(flag, 64, 0, 64))
    s, model = _blocking_model(acl, flag)
    t0 = time.monotonic()
    assert acl.mdl.ri_execute(model, 200) == acl.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT      # 507046
    assert 0.15 < time.monotonic() - t0 < 5
    assert acl.mdl.ri_destroy(model) == acl.ACL_ERROR_RT_MODEL_RUNNING                   # 107037
    ok(acl, acl.rt.memset(flag, 8, 1, 1))                 # releases the wait
    ok(acl, acl.rt.synchronize_device())
    ok(acl, acl.mdl.ri_destroy(model))
    assert acl.mdl.ri_destroy(model) == acl.ACL_ERROR_RT_PARAM_INVALID
    ok(acl, acl.rt.destroy_stream(s))


# ---------------------------------------------------------------------------- single-stream capture
def test_capture_single_stream_guide_add(dev, tmp_path):
    """Guide 04-01: capture H2D, (sync memcpy in RELAXED mode), add, D2H; replay 8 times."""
    acl, n = dev, 8
    self_d, other_d, out_d = (out(acl, acl.rt.malloc(n * 4, 0)) for _ in range(3))
    self_h, self_v = pinned_floats(acl, n, 0.0)
    other_h, _ = pinned_floats(acl, n, 1.0)
    stream = out(acl, acl.rt.create_stream())
    assert info(acl, stream) == (NONE, 0)
    ok(acl, acl.mdl.ri_capture_begin(stream, GLOBAL))
    status, model_in_progress = info(acl, stream)
    assert status == ACTIVE and model_in_progress != 0
    ok(acl, acl.rt.memcpy_async(self_d, n * 4, self_h, n * 4, H2D, stream))
    mode = out(acl, acl.mdl.ri_capture_thread_exchange_mode(RELAXED))
    assert mode == GLOBAL
    ok(acl, acl.rt.memcpy(other_d, n * 4, other_h, n * 4, H2D))        # runs now, once
    assert out(acl, acl.mdl.ri_capture_thread_exchange_mode(mode)) == RELAXED
    ok(acl, ops.axpy[1, stream](self_d, other_d, out_d, 1.1, n))
    ok(acl, acl.rt.memcpy_async(self_h, n * 4, out_d, n * 4, D2H, stream))
    model = out(acl, acl.mdl.ri_capture_end(stream))
    assert model == model_in_progress and info(acl, stream) == (NONE, 0)
    assert (self_v == 0).all()                          # nothing ran during the capture
    path = tmp_path / "modelRI.json"
    ok(acl, acl.mdl.ri_debug_json_print(model, str(path), 0))
    assert [t["type"] for t in json.loads(path.read_text())["model"]["tasks"]] == \
        ["MEMCPY_ASYNC", "KERNEL", "MEMCPY_ASYNC"]
    lines = []
    for _ in range(8):
        ok(acl, acl.mdl.ri_execute_async(model, stream))
        ok(acl, acl.rt.synchronize_stream(stream))
        lines.append(" ".join(f"{x:f}" for x in self_v))
    for i, line in enumerate(lines):
        assert line == " ".join([f"{np.float32(1.1) * (i + 1):f}"] * 8), line
    assert lines[0] == " ".join(["1.100000"] * 8) and lines[7] == " ".join(["8.800000"] * 8)
    ok(acl, acl.mdl.ri_destroy(model))
    ok(acl, acl.rt.destroy_stream(stream))


def test_capture_replays_run_each_time_and_work_before_begin_runs(dev):
    acl, n = dev, 4
    acc, one = dev_floats(acl, n), dev_floats(acl, n, 1.0)
    s = out(acl, acl.rt.create_stream())
    ok(acl, ops.axpy[1, s](acc, one, acc, 1.0, n))                  # before begin: runs
    ok(acl, acl.rt.synchronize_stream(s))
    ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
    for _ in range(3):
        ok(acl, ops.axpy[1, s](acc, one, acc, 1.0, n))              # captured: acc += 3 per replay
    model = out(acl, acl.mdl.ri_capture_end(s))
    assert (read_floats(acl, acc, n) == 1).all()
    ok(acl, acl.mdl.ri_execute_async(model, s))
    ok(acl, acl.mdl.ri_execute_async(model, s))
    ok(acl, acl.rt.synchronize_stream(s))
    assert (read_floats(acl, acc, n) == 7).all()
    ok(acl, ops.axpy[1, s](acc, one, acc, 1.0, n))                  # after end: runs again
    ok(acl, acl.rt.synchronize_stream(s))
    assert (read_floats(acl, acc, n) == 8).all()
    ok(acl, acl.mdl.ri_destroy(model))
    ok(acl, acl.rt.destroy_stream(s))


def test_replay_failure_reports_the_inner_task_code(dev):
    acl, n = dev, 4
    buf = dev_floats(acl, n)
    s = out(acl, acl.rt.create_stream())
    ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
    ok(acl, acl.rt.memset_async(buf, n * 4, 1, n * 4, s))
    model = out(acl, acl.mdl.ri_capture_end(s))
    ok(acl, acl.rt.free(buf))                          # resources must outlive the model ...
    ok(acl, acl.mdl.ri_execute_async(model, s))
    assert acl.rt.synchronize_stream(s) == acl.ACL_ERROR_RT_SYS_DMA        # ... or the replay fails
    ok(acl, acl.rt.synchronize_stream(s))
    ok(acl, acl.mdl.ri_destroy(model))
    ok(acl, acl.rt.destroy_stream(s))


def test_begin_end_errors(dev):
    acl = dev
    s, s2 = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    assert acl.mdl.ri_capture_begin(0, GLOBAL) == acl.ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT      # 107031
    assert acl.mdl.ri_capture_begin(s, 3) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.mdl.ri_capture_end(s) == (0, acl.ACL_ERROR_RT_STREAM_NOT_CAPTURED)              # 107029
    ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
    assert acl.mdl.ri_capture_begin(s, GLOBAL) == acl.ACL_ERROR_RT_STREAM_CAPTURED             # 107027
    # End from another thread: GLOBAL and THREAD_LOCAL captures refuse it (107038)
    result = []
    t = threading.Thread(target=lambda: (acl.rt.set_device(0), result.append(acl.mdl.ri_capture_end(s))))
    t.start(), t.join()
    assert result == [(0, acl.ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD)]
    assert info(acl, s)[0] == ACTIVE                   # not invalidated
    ev = out(acl, acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC))
    ok(acl, acl.rt.record_event(ev, s))
    ok(acl, acl.rt.stream_wait_event(s2, ev))          # s2 joins
    assert info(acl, s2) == info(acl, s)
    assert acl.mdl.ri_capture_end(s2) == (0, acl.ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED)        # 107036
    ok(acl, acl.rt.record_event(ev, s2))
    ok(acl, acl.rt.stream_wait_event(s, ev))
    model = out(acl, acl.mdl.ri_capture_end(s))
    assert acl.mdl.ri_debug_print(model) == 0
    ok(acl, acl.mdl.ri_destroy(model))
    # RELAXED captures may be ended by any thread
    ok(acl, acl.mdl.ri_capture_begin(s, RELAXED))
    ok(acl, acl.rt.memset_async(out(acl, acl.rt.malloc(64, 0)), 64, 0, 64, s))
    result = []
    t = threading.Thread(target=lambda: (acl.rt.set_device(0), result.append(acl.mdl.ri_capture_end(s))))
    t.start(), t.join()
    assert result[0][1] == 0 and result[0][0] != 0
    ok(acl, acl.mdl.ri_destroy(result[0][0]))
    for x in (s, s2):
        ok(acl, acl.rt.destroy_stream(x))
    ok(acl, acl.rt.destroy_event(ev))


def test_exchange_mode_is_per_thread(dev):
    acl = dev
    assert out(acl, acl.mdl.ri_capture_thread_exchange_mode(RELAXED)) == GLOBAL
    assert out(acl, acl.mdl.ri_capture_thread_exchange_mode(THREAD_LOCAL)) == RELAXED
    seen = []
    t = threading.Thread(target=lambda: seen.append(acl.mdl.ri_capture_thread_exchange_mode(RELAXED)))
    t.start(), t.join()
    assert seen == [(GLOBAL, 0)]
    assert out(acl, acl.mdl.ri_capture_thread_exchange_mode(GLOBAL)) == THREAD_LOCAL
    assert acl.mdl.ri_capture_thread_exchange_mode(7) == (0, acl.ACL_ERROR_INVALID_PARAM)


# ---------------------------------------------------------------------------- restrictions
def _invalidated(acl, s) -> None:
    """The capture of ``s`` is invalidated: its status says so, further work and End fail
    with 507903, and afterwards the stream is an ordinary stream again."""
    assert info(acl, s)[0] == INVALIDATED
    buf = out(acl, acl.rt.malloc(64, 0))
    assert acl.rt.memset_async(buf, 64, 0, 64, s) == acl.ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED
    assert acl.mdl.ri_capture_end(s) == (0, acl.ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED)
    assert info(acl, s) == (NONE, 0)
    ok(acl, acl.rt.memset_async(buf, 64, 0, 64, s))
    ok(acl, acl.rt.synchronize_stream(s))
    ok(acl, acl.rt.free(buf))


@pytest.mark.parametrize("call", ["synchronize_stream", "synchronize_stream_with_timeout", "stream_query",
                                  "synchronize_device"])
def test_sync_or_query_of_capturing_stream(dev, call):
    acl = dev
    s = out(acl, acl.rt.create_stream())
    ok(acl, acl.mdl.ri_capture_begin(s, RELAXED))           # illegal in every mode
    ret = {"synchronize_stream": lambda: acl.rt.synchronize_stream(s),
           "synchronize_stream_with_timeout": lambda: acl.rt.synchronize_stream_with_timeout(s, 100),
           "stream_query": lambda: acl.rt.stream_query(s)[1],
           "synchronize_device": lambda: acl.rt.synchronize_device()}[call]()
    assert ret == acl.ACL_ERROR_RT_STREAM_CAPTURED                                        # 107027
    _invalidated(acl, s)
    ok(acl, acl.rt.destroy_stream(s))


@pytest.mark.parametrize("call", ["synchronize_event", "synchronize_event_with_timeout", "query_event_status",
                                  "event_elapsed_time"])
def test_sync_or_query_of_captured_event(dev, call):
    acl = dev
    s = out(acl, acl.rt.create_stream())
    ev = out(acl, acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC | acl.ACL_EVENT_TIME_LINE))
    ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
    ok(acl, acl.rt.record_event(ev, s))
    ret = {"synchronize_event": lambda: acl.rt.synchronize_event(ev),
           "synchronize_event_with_timeout": lambda: acl.rt.synchronize_event_with_timeout(ev, 100),
           "query_event_status": lambda: acl.rt.query_event_status(ev)[1],
           "event_elapsed_time": lambda: acl.rt.event_elapsed_time(ev, ev)[1]}[call]()
    assert ret == acl.ACL_ERROR_RT_EVENT_CAPTURED                                          # 107028
    _invalidated(acl, s)
    assert out(acl, acl.rt.query_event_status(ev)) == acl.ACL_EVENT_RECORDED_STATUS_COMPLETE   # after: fine
    ok(acl, acl.rt.destroy_stream(s))
    ok(acl, acl.rt.destroy_event(ev))


def test_destroying_a_capturing_stream_is_refused(dev):
    acl = dev
    s = out(acl, acl.rt.create_stream())
    ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
    assert acl.rt.destroy_stream(s) == acl.ACL_ERROR_RT_STREAM_CAPTURED
    assert info(acl, s)[0] == ACTIVE
    model = out(acl, acl.mdl.ri_capture_end(s))
    ok(acl, acl.mdl.ri_destroy(model))
    ok(acl, acl.rt.destroy_stream(s))


def _unsafe_calls(acl, dev_ptr, host):
    return {
        "memcpy": lambda: acl.rt.memcpy(dev_ptr, 64, acl.util.numpy_to_ptr(host), 64, H2D),
        "memset": lambda: acl.rt.memset(dev_ptr, 64, 0, 64),
        "memcpy2d": lambda: acl.rt.memcpy2d(dev_ptr, 16, acl.util.numpy_to_ptr(host), 16, 16, 4, H2D),
    }


@pytest.mark.parametrize("call", ["memcpy", "memset", "memcpy2d"])
def test_sync_memory_ops_in_global_mode(dev, call):
    acl = dev
    dev_ptr = out(acl, acl.rt.malloc(64, 0))
    host = np.zeros(64, np.uint8)
    fn = _unsafe_calls(acl, dev_ptr, host)[call]
    s = out(acl, acl.rt.create_stream())
    # allowed after switching this thread to RELAXED
    ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
    out(acl, acl.mdl.ri_capture_thread_exchange_mode(RELAXED))
    ok(acl, fn())
    out(acl, acl.mdl.ri_capture_thread_exchange_mode(GLOBAL))
    assert info(acl, s)[0] == ACTIVE
    # forbidden in GLOBAL mode: 107030, and the capture is invalidated
    assert fn() == acl.ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT
    _invalidated(acl, s)
    ok(acl, fn())                                      # no capture: allowed again
    ok(acl, acl.rt.destroy_stream(s))


def test_capture_modes_across_threads(dev):
    acl = dev
    dev_ptr = out(acl, acl.rt.malloc(64, 0))
    s = out(acl, acl.rt.create_stream())

    def memset_from_thread(mode):
        result = []

        def body():
            acl.rt.set_device(0)
            acl.mdl.ri_capture_thread_exchange_mode(mode)
            result.append(acl.rt.memset(dev_ptr, 64, 0, 64))
        t = threading.Thread(target=body)
        t.start(), t.join()
        return result[0]

    # GLOBAL capture: other GLOBAL threads are restricted too; THREAD_LOCAL / RELAXED ones are not
    ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
    ok(acl, memset_from_thread(THREAD_LOCAL))
    ok(acl, memset_from_thread(RELAXED))
    assert info(acl, s)[0] == ACTIVE
    assert memset_from_thread(GLOBAL) == acl.ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT
    _invalidated(acl, s)
    # THREAD_LOCAL capture: only the capturing thread is restricted
    ok(acl, acl.mdl.ri_capture_begin(s, THREAD_LOCAL))
    ok(acl, memset_from_thread(GLOBAL))
    assert acl.rt.memset(dev_ptr, 64, 0, 64) == acl.ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT
    _invalidated(acl, s)
    # RELAXED capture: nobody is restricted
    ok(acl, acl.mdl.ri_capture_begin(s, RELAXED))
    ok(acl, acl.rt.memset(dev_ptr, 64, 0, 64))
    ok(acl, memset_from_thread(GLOBAL))
    model = out(acl, acl.mdl.ri_capture_end(s))
    ok(acl, acl.mdl.ri_destroy(model))
    ok(acl, acl.rt.destroy_stream(s))


def test_async_copies_with_pageable_memory(dev):
    acl = dev
    dev_ptr = out(acl, acl.rt.malloc(64, 0))
    host = np.zeros(16, np.float32)
    hp = acl.util.numpy_to_ptr(host)
    s, other = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    # on the capturing stream: cannot be captured (107000)
    ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
    assert acl.rt.memcpy_async(dev_ptr, 64, hp, 64, H2D, s) == acl.ACL_ERROR_RT_PARAM_INVALID
    _invalidated(acl, s)
    # on another stream it degrades to a synchronous copy: forbidden in GLOBAL mode (107041) ...
    ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
    assert acl.rt.memcpy_async(dev_ptr, 64, hp, 64, H2D, other) == acl.ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC
    _invalidated(acl, s)
    # ... allowed after switching to RELAXED; pinned memory is captured normally
    ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
    out(acl, acl.mdl.ri_capture_thread_exchange_mode(RELAXED))
    ok(acl, acl.rt.memcpy_async(dev_ptr, 64, hp, 64, H2D, other))
    out(acl, acl.mdl.ri_capture_thread_exchange_mode(GLOBAL))
    pinned, _ = pinned_floats(acl, 16)
    ok(acl, acl.rt.memcpy_async(dev_ptr, 64, pinned, 64, H2D, s))
    model = out(acl, acl.mdl.ri_capture_end(s))
    ok(acl, acl.mdl.ri_destroy(model))
    for x in (s, other):
        ok(acl, acl.rt.destroy_stream(x))


def test_built_model_stores_a_copy_from_pageable_memory(dev):
    """A built model (persistent streams) stores an H2D copy from pageable memory with the
    bytes of the call (the model_ri samples upload their inputs so); a copy into pageable
    memory cannot be stored (107000)."""
    acl, n = dev, 16
    dst = dev_floats(acl, n)
    host = np.full(n, 3.0, np.float32)
    s = out(acl, acl.rt.create_stream_with_config(0, acl.ACL_STREAM_PERSISTENT))
    model = out(acl, acl.mdl.ri_build_begin(0))
    ok(acl, acl.mdl.ri_bind_stream(model, s, acl.ACL_MODEL_STREAM_FLAG_HEAD))
    ok(acl, acl.rt.memcpy_async(dst, n * 4, acl.util.numpy_to_ptr(host), n * 4, H2D, s))
    assert acl.rt.memcpy_async(acl.util.numpy_to_ptr(host), n * 4, dst, n * 4, D2H, s) == \
        acl.ACL_ERROR_RT_PARAM_INVALID
    assert (read_floats(acl, dst, n) == 0).all()        # stored, not run
    host[:] = 7.0                                       # later changes are not the copy's
    ok(acl, acl.mdl.ri_end_task(model, s))
    ok(acl, acl.mdl.ri_build_end(model, None))
    ok(acl, acl.mdl.ri_execute(model, -1))
    assert (read_floats(acl, dst, n) == 3).all()
    ok(acl, acl.rt.memset(dst, n * 4, 0, n * 4))
    ok(acl, acl.mdl.ri_execute(model, -1))              # each execution copies again
    assert (read_floats(acl, dst, n) == 3).all()
    ok(acl, acl.mdl.ri_destroy(model))                  # frees the staged bytes (the suite checks /dev/shm)
    ok(acl, acl.rt.destroy_stream(s))


def test_default_stream_during_capture(dev):
    acl = dev
    buf = out(acl, acl.rt.malloc(64, 0))
    s = out(acl, acl.rt.create_stream())
    ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
    assert acl.rt.memset_async(buf, 64, 0, 64, 0) == acl.ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT    # 107031
    _invalidated(acl, s)
    # a default stream may not join a capture either
    ev = out(acl, acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC))
    ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
    ok(acl, acl.rt.record_event(ev, s))
    assert acl.rt.stream_wait_event(0, ev) == acl.ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT
    _invalidated(acl, s)
    ok(acl, acl.rt.memset_async(buf, 64, 0, 64, 0))         # no capture: fine
    ok(acl, acl.rt.synchronize_stream(0))
    ok(acl, acl.rt.destroy_stream(s))
    ok(acl, acl.rt.destroy_event(ev))


def test_event_kinds_in_capture(dev):
    acl = dev
    s, s2 = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    legacy = out(acl, acl.rt.create_event())
    with_flag = out(acl, acl.rt.create_event_with_flag(acl.ACL_EVENT_SYNC))
    ex = out(acl, acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC))
    never = out(acl, acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC))
    for ev in (legacy, with_flag):                 # not capturable: 207000
        ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
        assert acl.rt.record_event(ev, s) == acl.ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        _invalidated(acl, s)
    # a wait on a record made outside the capture: uncaptured dependency (107024)
    ok(acl, acl.rt.record_event(ex, s2))
    ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
    assert acl.rt.stream_wait_event(s, ex) == acl.ACL_ERROR_RT_CAPTURE_DEPENDENCY
    _invalidated(acl, s)
    # a wait on a never-recorded Ex event is a no-op, captured or not
    ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
    ok(acl, acl.rt.stream_wait_event(s, never))
    model = out(acl, acl.mdl.ri_capture_end(s))
    ok(acl, acl.mdl.ri_execute_async(model, s))
    ok(acl, acl.rt.synchronize_stream(s))
    ok(acl, acl.mdl.ri_destroy(model))
    for x in (s, s2):
        ok(acl, acl.rt.destroy_stream(x))
    for ev in (legacy, with_flag, ex, never):
        ok(acl, acl.rt.destroy_event(ev))


def test_reset_device_during_a_capture_ends_it(dev):
    acl = dev
    buf = out(acl, acl.rt.malloc(64, 0))
    s = out(acl, acl.rt.create_stream())
    ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
    assert acl.rt.memset(buf, 64, 0, 64) == acl.ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT
    ok(acl, acl.rt.reset_device(0))
    ok(acl, acl.rt.set_device(0))
    buf = out(acl, acl.rt.malloc(64, 0))
    ok(acl, acl.rt.memset(buf, 64, 0, 64))              # the capture went with its stream
    ok(acl, acl.rt.memset_async(buf, 64, 0, 64, 0))
    ok(acl, acl.rt.synchronize_device())


def test_host_callbacks_cannot_be_captured(dev):
    acl = dev
    s = out(acl, acl.rt.create_stream())
    ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
    assert acl.rt.launch_host_func(s, lambda _: None, None) == acl.ACL_ERROR_RT_FEATURE_NOT_SUPPORT
    _invalidated(acl, s)
    ok(acl, acl.rt.destroy_stream(s))


def test_execute_on_capturing_stream_and_of_capturing_model(dev):
    acl = dev
    s, s2 = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    ok(acl, acl.mdl.ri_capture_begin(s2, GLOBAL))
    model = out(acl, acl.mdl.ri_capture_end(s2))
    ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
    assert acl.mdl.ri_execute_async(model, s) == acl.ACL_ERROR_RT_STREAM_CAPTURED
    _, in_progress = info(acl, s)
    assert acl.mdl.ri_execute_async(in_progress, s2) == acl.ACL_ERROR_RT_MODEL_CAPTURED         # 107026
    assert acl.mdl.ri_destroy(in_progress) == acl.ACL_ERROR_RT_MODEL_CAPTURED
    assert acl.mdl.ri_debug_print(in_progress) == acl.ACL_ERROR_RT_MODEL_CAPTURED
    model2 = out(acl, acl.mdl.ri_capture_end(s))
    for m in (model, model2):
        ok(acl, acl.mdl.ri_destroy(m))
    for x in (s, s2):
        ok(acl, acl.rt.destroy_stream(x))


# ---------------------------------------------------------------------------- cross-stream capture
def test_cross_stream_guide_add(dev):
    """Guide 04-02: stream1 forks stream2 through event1; the add runs on stream2, which
    returns to stream1 through event2."""
    acl, n = dev, 8
    self_d, other_d, out_d = (out(acl, acl.rt.malloc(n * 4, 0)) for _ in range(3))
    self_h, self_v = pinned_floats(acl, n, 0.0)
    other_h, _ = pinned_floats(acl, n, 1.0)
    s1, s2 = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    e1, e2 = (out(acl, acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC)) for _ in range(2))
    ok(acl, acl.mdl.ri_capture_begin(s1, GLOBAL))
    ok(acl, acl.rt.memcpy_async(self_d, n * 4, self_h, n * 4, H2D, s1))
    mode = out(acl, acl.mdl.ri_capture_thread_exchange_mode(RELAXED))
    ok(acl, acl.rt.memcpy(other_d, n * 4, other_h, n * 4, H2D))
    out(acl, acl.mdl.ri_capture_thread_exchange_mode(mode))
    ok(acl, acl.rt.record_event(e1, s1))
    assert info(acl, s2) == (NONE, 0)
    ok(acl, acl.rt.stream_wait_event(s2, e1))
    assert info(acl, s2) == info(acl, s1)
    ok(acl, ops.axpy[1, s2](self_d, other_d, out_d, 1.1, n))
    ok(acl, acl.rt.record_event(e2, s2))
    ok(acl, acl.rt.stream_wait_event(s1, e2))
    ok(acl, acl.rt.memcpy_async(self_h, n * 4, out_d, n * 4, D2H, s1))
    model = out(acl, acl.mdl.ri_capture_end(s1))
    assert info(acl, s2) == (NONE, 0)
    for i in range(8):
        ok(acl, acl.mdl.ri_execute_async(model, s1))
        ok(acl, acl.rt.synchronize_stream(s1))
        assert np.allclose(self_v, np.float32(1.1) * (i + 1)), self_v
    ok(acl, acl.mdl.ri_destroy(model))
    for x in (s1, s2):
        ok(acl, acl.rt.destroy_stream(x))
    for ev in (e1, e2):
        ok(acl, acl.rt.destroy_event(ev))


def test_transitive_join_and_indirect_return(dev):
    """s2 waits on the origin, s3 waits on s2; s3 returns to s2 and s2 to the origin."""
    acl, n = dev, 4
    x, one = dev_floats(acl, n), dev_floats(acl, n, 1.0)
    s1, s2, s3 = (out(acl, acl.rt.create_stream()) for _ in range(3))
    e = [out(acl, acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC)) for _ in range(4)]
    ok(acl, acl.mdl.ri_capture_begin(s1, GLOBAL))
    ok(acl, acl.rt.record_event(e[0], s1))
    ok(acl, acl.rt.stream_wait_event(s2, e[0]))
    ok(acl, ops.axpy[1, s2](x, one, x, 1.0, n))             # x += 1
    ok(acl, acl.rt.record_event(e[1], s2))
    ok(acl, acl.rt.stream_wait_event(s3, e[1]))             # s3 joins through s2
    assert info(acl, s3)[0] == ACTIVE
    ok(acl, ops.axpy[1, s3](x, x, x, 1.0, n))               # x *= 2
    ok(acl, acl.rt.record_event(e[2], s3))
    ok(acl, acl.rt.stream_wait_event(s2, e[2]))             # s3 -> s2
    ok(acl, acl.rt.record_event(e[3], s2))
    ok(acl, acl.rt.stream_wait_event(s1, e[3]))             # s2 -> origin
    ok(acl, ops.axpy[1, s1](x, one, x, 10.0, n))            # x += 10
    model = out(acl, acl.mdl.ri_capture_end(s1))
    ok(acl, acl.mdl.ri_execute_async(model, s1))
    ok(acl, acl.rt.synchronize_stream(s1))
    assert (read_floats(acl, x, n) == 12).all()            # (0 + 1) * 2 + 10
    ok(acl, acl.mdl.ri_execute_async(model, s1))
    ok(acl, acl.rt.synchronize_stream(s1))
    assert (read_floats(acl, x, n) == 36).all()            # (12 + 1) * 2 + 10
    ok(acl, acl.mdl.ri_destroy(model))
    for s in (s1, s2, s3):
        ok(acl, acl.rt.destroy_stream(s))
    for ev in e:
        ok(acl, acl.rt.destroy_event(ev))


@pytest.mark.parametrize("case", ["never_returns", "work_after_join", "last_task_is_a_wait"])
def test_unjoined_streams_fail_capture_end(dev, case):
    acl = dev
    buf = out(acl, acl.rt.malloc(64, 0))
    s1, s2 = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    e1, e2 = (out(acl, acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC)) for _ in range(2))
    ok(acl, acl.mdl.ri_capture_begin(s1, GLOBAL))
    ok(acl, acl.rt.record_event(e1, s1))
    ok(acl, acl.rt.stream_wait_event(s2, e1))
    ok(acl, acl.rt.memset_async(buf, 64, 1, 64, s2))
    if case != "never_returns":
        ok(acl, acl.rt.record_event(e2, s2))
        ok(acl, acl.rt.stream_wait_event(s1, e2))
    if case == "work_after_join":
        ok(acl, acl.rt.memset_async(buf, 64, 2, 64, s2))     # after the join: unjoined work
    if case == "last_task_is_a_wait":
        ok(acl, acl.rt.record_event(e1, s1))
        ok(acl, acl.rt.stream_wait_event(s2, e1))
    assert acl.mdl.ri_capture_end(s1) == (0, acl.ACL_ERROR_RT_STREAM_UNJOINED)            # 107025
    # the capture is over: both streams run work again, and nothing captured ever ran
    assert info(acl, s1) == (NONE, 0) and info(acl, s2) == (NONE, 0)
    ok(acl, acl.rt.synchronize_device())
    assert (read_floats(acl, buf, 16) == 0).all()
    for s in (s1, s2):
        ok(acl, acl.rt.destroy_stream(s))
    for ev in (e1, e2):
        ok(acl, acl.rt.destroy_event(ev))


def test_forked_streams_run_in_parallel_on_replay(dev):
    """Two sub-streams each write a flag and wait for the other's: serialised they would
    deadlock (the waits time out after 5 s), in parallel both finish at once."""
    acl = dev
    flags = out(acl, acl.rt.malloc(64, 0))
    a, b = flags, flags + 8
    s1, s2, s3 = (out(acl, acl.rt.create_stream()) for _ in range(3))
    fork, j2, j3 = (out(acl, acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC)) for _ in range(3))
    ok(acl, acl.rt.set_op_wait_timeout(5))
    ok(acl, acl.mdl.ri_capture_begin(s1, GLOBAL))
    ok(acl, acl.rt.memset_async(flags, 64, 0, 64, s1))
    ok(acl, acl.rt.record_event(fork, s1))
    ok(acl, acl.rt.stream_wait_event(s2, fork))
    ok(acl, acl.rt.stream_wait_event(s3, fork))
    ok(acl, acl.rt.value_write(a, 1, 0, s2))
    ok(acl, acl.rt.value_wait(b, 1, acl.ACL_STREAM_WAIT_VALUE_GEQ, s2))
    ok(acl, acl.rt.value_write(b, 1, 0, s3))
    ok(acl, acl.rt.value_wait(a, 1, acl.ACL_STREAM_WAIT_VALUE_GEQ, s3))
    ok(acl, acl.rt.record_event(j2, s2))
    ok(acl, acl.rt.record_event(j3, s3))
    ok(acl, acl.rt.stream_wait_event(s1, j2))
    ok(acl, acl.rt.stream_wait_event(s1, j3))
    ok(acl, acl.rt.value_write(flags + 16, 7, 0, s1))
    model = out(acl, acl.mdl.ri_capture_end(s1))
    for _ in range(2):
        t0 = time.monotonic()
        ok(acl, acl.mdl.ri_execute_async(model, s1))
        ok(acl, acl.rt.synchronize_stream(s1))
        assert time.monotonic() - t0 < 3
        words = np.frombuffer(read_floats(acl, flags, 16).tobytes(), np.uint64)
        assert list(words[:3]) == [1, 1, 7]
    ok(acl, acl.rt.set_op_wait_timeout(0))
    ok(acl, acl.mdl.ri_destroy(model))
    for s in (s1, s2, s3):
        ok(acl, acl.rt.destroy_stream(s))
    for ev in (fork, j2, j3):
        ok(acl, acl.rt.destroy_event(ev))


def test_join_order_is_kept_on_replay(dev):
    """The origin's copy after the join sees the sub-stream's (slow) result."""
    from mdev.kernel import float32, int64, kernel, ptr

    @kernel
    def slow_fill(ctx, out: ptr, value: float32, n: int64):
        time.sleep(0.2)
        ctx.gm(out, np.float32, n)[:] = value

    acl, n = dev, 8
    x = dev_floats(acl, n)
    host, view = pinned_floats(acl, n)
    s1, s2 = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    e1, e2 = (out(acl, acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC)) for _ in range(2))
    ok(acl, acl.mdl.ri_capture_begin(s1, GLOBAL))
    ok(acl, acl.rt.record_event(e1, s1))
    ok(acl, acl.rt.stream_wait_event(s2, e1))
    ok(acl, slow_fill[1, s2](x, 3.5, n))
    ok(acl, acl.rt.record_event(e2, s2))
    ok(acl, acl.rt.stream_wait_event(s1, e2))
    ok(acl, acl.rt.memcpy_async(host, n * 4, x, n * 4, D2H, s1))
    model = out(acl, acl.mdl.ri_capture_end(s1))
    ok(acl, acl.mdl.ri_execute_async(model, s1))
    ok(acl, acl.rt.synchronize_stream(s1))
    assert (view == 3.5).all()
    ok(acl, acl.mdl.ri_destroy(model))
    for s in (s1, s2):
        ok(acl, acl.rt.destroy_stream(s))
    for ev in (e1, e2):
        ok(acl, acl.rt.destroy_event(ev))


# ---------------------------------------------------------------------------- debug dumps
def _two_stream_model(acl):
    n = 8
    x, y = dev_floats(acl, n), dev_floats(acl, n, 1.0)
    host, _ = pinned_floats(acl, n)
    s1, s2 = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    e1, e2 = (out(acl, acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC)) for _ in range(2))
    ok(acl, acl.mdl.ri_capture_begin(s1, GLOBAL))
    ok(acl, acl.rt.memcpy_async(x, n * 4, host, n * 4, H2D, s1))
    ok(acl, acl.rt.record_event(e1, s1))
    ok(acl, acl.rt.stream_wait_event(s2, e1))
    ok(acl, acl.mdl.ri_capture_task_grp_begin(s2))
    ok(acl, ops.axpy[2, s2](x, y, x, 2.0, n))
    group = out(acl, acl.mdl.ri_capture_task_grp_end(s2))
    ok(acl, acl.rt.record_event(e2, s2))
    ok(acl, acl.rt.stream_wait_event(s1, e2))
    ok(acl, acl.rt.memset_async(y, n * 4, 0, n * 4, s1))
    model = out(acl, acl.mdl.ri_capture_end(s1))
    sid1, sid2 = out(acl, acl.rt.stream_get_id(s1)), out(acl, acl.rt.stream_get_id(s2))
    return model, group, sid1, sid2, (s1, s2), (e1, e2)


def test_debug_print(dev, capsys):
    acl = dev
    model, group, sid1, sid2, streams, events = _two_stream_model(acl)
    capsys.readouterr()
    ok(acl, acl.mdl.ri_debug_print(model))
    text = capsys.readouterr().out
    assert f"aclmdlRI {model:#x}: captured on device 0, 2 stream(s), 7 task(s), 1 task group(s)" in text
    assert f"stream {sid1} (origin stream):" in text and f"stream {sid2} (joined through an event):" in text
    lines = [line.split() for line in text.splitlines() if line.strip().startswith("task")]
    assert [ln[2] for ln in lines] == ["MEMCPY_ASYNC", "EVENT_RECORD", "EVENT_WAIT", "MEMSET_ASYNC",
                                       "EVENT_WAIT", "KERNEL", "EVENT_RECORD"]
    assert f"EVENT_RECORD    -> stream {sid2} task 0" in text
    assert f"EVENT_WAIT      <- stream {sid2} task 2" in text
    assert f"KERNEL          axpy <<<2>>>  [task group {group:#x}]" in text
    ok(acl, acl.mdl.ri_destroy(model))
    for s in streams:
        ok(acl, acl.rt.destroy_stream(s))
    for ev in events:
        ok(acl, acl.rt.destroy_event(ev))


def test_debug_json_print(dev, tmp_path):
    acl = dev
    model, group, sid1, sid2, streams, events = _two_stream_model(acl)
    path = tmp_path / "model.json"
    ok(acl, acl.mdl.ri_debug_json_print(model, str(path), acl.ACL_MDLRI_DEBUG_JSON_PRINT_SUMMARY))
    doc = json.loads(path.read_text())
    m = doc["model"]
    assert m["modelRI"] == model and m["device"] == 0 and m["kind"] == "capture"
    assert m["streams"] == [{"streamId": sid1, "head": True, "origin": True},
                            {"streamId": sid2, "head": True, "origin": False}]
    tasks = m["tasks"]
    assert [(t["streamId"], t["type"]) for t in tasks] == [
        (sid1, "MEMCPY_ASYNC"), (sid1, "EVENT_RECORD"), (sid1, "EVENT_WAIT"), (sid1, "MEMSET_ASYNC"),
        (sid2, "EVENT_WAIT"), (sid2, "KERNEL"), (sid2, "EVENT_RECORD")]
    assert tasks[4]["dependsOn"] == [1]                  # sub-stream's wait <- origin's record
    assert sorted(tasks[2]["dependsOn"]) == [1, 6]       # origin's wait <- sub-stream's record
    assert tasks[5]["typeId"] == acl.ACL_MODEL_RI_TASK_KERNEL and tasks[5]["taskGroup"] == group
    assert "args" not in tasks[5]
    assert m["taskGroups"] == [{"handle": group, "streamId": sid2, "tasks": [5]}]
    phases = {e["ph"] for e in doc["traceEvents"]}
    assert {"M", "X", "s", "f"} <= phases               # chrome://tracing: slices and flow arrows
    ok(acl, acl.mdl.ri_debug_json_print(model, str(path), acl.ACL_MDLRI_DEBUG_JSON_PRINT_VERBOSE))
    assert json.loads(path.read_text())["model"]["tasks"][5]["args"][1] == 2       # <<<2>>>
    assert acl.mdl.ri_debug_json_print(model, str(tmp_path / "no" / "x.json"), 0) == acl.ACL_ERROR_RT_FILE_OPEN
    assert acl.mdl.ri_debug_json_print(model, str(path), 7) == acl.ACL_ERROR_INVALID_PARAM
    ok(acl, acl.mdl.ri_destroy(model))
    for s in streams:
        ok(acl, acl.rt.destroy_stream(s))
    for ev in events:
        ok(acl, acl.rt.destroy_event(ev))


# ---------------------------------------------------------------------------- task groups and update
def _guide_update_setup(acl, n=8):
    """Guide 04-03: outtmp = self + alpha * other; out = outtmp + alpha * other (a group)."""
    self_d, other_d, out_d, tmp_d = (out(acl, acl.rt.malloc(n * 4, 0)) for _ in range(4))
    self_h, _ = pinned_floats(acl, n, 0.0)
    other_h, _ = pinned_floats(acl, n, 1.0)
    out_h, out_v = pinned_floats(acl, n, 0.0)
    s1 = out(acl, acl.rt.create_stream())
    event = out(acl, acl.rt.create_event_with_flag(acl.ACL_EVENT_EXTERNAL))
    ok(acl, acl.mdl.ri_capture_begin(s1, GLOBAL))
    ok(acl, acl.rt.memcpy_async(self_d, n * 4, self_h, n * 4, H2D, s1))
    ok(acl, acl.rt.memcpy_async(other_d, n * 4, other_h, n * 4, H2D, s1))
    ok(acl, ops.axpy[1, s1](self_d, other_d, tmp_d, 1.1, n))
    ok(acl, acl.rt.stream_wait_event(s1, event))
    ok(acl, acl.rt.reset_event(event, s1))
    ok(acl, acl.mdl.ri_capture_task_grp_begin(s1))
    ok(acl, ops.axpy[1, s1](tmp_d, other_d, out_d, 1.1, n))
    handle = out(acl, acl.mdl.ri_capture_task_grp_end(s1))
    ok(acl, acl.rt.memcpy_async(out_h, n * 4, out_d, n * 4, D2H, s1))
    model = out(acl, acl.mdl.ri_capture_end(s1))
    return model, handle, s1, event, (tmp_d, other_d, out_d), out_v


def test_task_update_concurrent_guide_flow(dev):
    """Replay 0 uses alpha 1.1, replay 1 the updated 5.5; the replay waits on the EXTERNAL
    event until the update stream has applied the update."""
    acl, n = dev, 8
    model, handle, s1, event, (tmp_d, other_d, out_d), out_v = _guide_update_setup(acl, n)
    update = out(acl, acl.rt.create_stream())
    results = []
    for i in range(2):
        ok(acl, acl.mdl.ri_execute_async(model, s1))
        ok(acl, acl.mdl.ri_capture_task_update_begin(update, handle))
        if i == 1:
            ok(acl, ops.axpy[1, update](tmp_d, other_d, out_d, 5.5, n))
        ok(acl, acl.mdl.ri_capture_task_update_end(update))
        ok(acl, acl.rt.record_event(event, update))
        ok(acl, acl.rt.synchronize_stream(update))
        ok(acl, acl.rt.synchronize_stream(s1))
        results.append(" ".join(f"{x:f}" for x in out_v))
    assert results == [" ".join(["2.200000"] * 8), " ".join(["6.600000"] * 8)]
    ok(acl, acl.mdl.ri_destroy(model))
    for s in (s1, update):
        ok(acl, acl.rt.destroy_stream(s))
    ok(acl, acl.rt.destroy_event(event))


def test_task_update_then_execute(dev):
    """The other way: update first (synchronised), then execute -- no event needed."""
    acl, n = dev, 4
    x, one, y = dev_floats(acl, n, 1.0), dev_floats(acl, n, 1.0), dev_floats(acl, n)
    s, update = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
    ok(acl, acl.mdl.ri_capture_task_grp_begin(s))
    ok(acl, ops.axpy[1, s](x, one, y, 2.0, n))             # y = x + 2
    ok(acl, ops.scale[1, s](y, y, 3.0, n))                  # y *= 3
    handle = out(acl, acl.mdl.ri_capture_task_grp_end(s))
    model = out(acl, acl.mdl.ri_capture_end(s))
    ok(acl, acl.mdl.ri_execute_async(model, s))
    ok(acl, acl.rt.synchronize_stream(s))
    assert (read_floats(acl, y, n) == 9).all()
    ok(acl, acl.mdl.ri_capture_task_update_begin(update, handle))
    ok(acl, ops.axpy[1, update](x, one, y, 4.0, n))        # y = x + 4
    ok(acl, ops.scale[1, update](y, y, 10.0, n))            # y *= 10
    ok(acl, acl.mdl.ri_capture_task_update_end(update))
    ok(acl, acl.rt.synchronize_stream(update))
    assert (read_floats(acl, y, n) == 9).all()              # the update itself runs nothing
    ok(acl, acl.mdl.ri_execute_async(model, s))
    ok(acl, acl.rt.synchronize_stream(s))
    assert (read_floats(acl, y, n) == 50).all()
    # an empty update leaves the group as it is
    ok(acl, acl.mdl.ri_capture_task_update_begin(update, handle))
    ok(acl, acl.mdl.ri_capture_task_update_end(update))
    ok(acl, acl.mdl.ri_execute_async(model, s))
    ok(acl, acl.rt.synchronize_stream(s))
    assert (read_floats(acl, y, n) == 50).all()
    ok(acl, acl.mdl.ri_destroy(model))
    for st in (s, update):
        ok(acl, acl.rt.destroy_stream(st))


def test_task_group_errors(dev):
    acl, n = dev, 4
    x = dev_floats(acl, n)
    s, s2, update = (out(acl, acl.rt.create_stream()) for _ in range(3))
    assert acl.mdl.ri_capture_task_grp_begin(s) == acl.ACL_ERROR_RT_STREAM_NOT_CAPTURED        # 107029
    ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
    assert acl.mdl.ri_capture_task_grp_end(s) == (0, acl.ACL_ERROR_STREAM_TASK_GROUP_STATUS)   # 107033
    ok(acl, acl.mdl.ri_capture_task_grp_begin(s))
    assert acl.mdl.ri_capture_task_grp_begin(s) == acl.ACL_ERROR_STREAM_TASK_GROUP_STATUS
    assert acl.rt.memset_async(x, n * 4, 0, n * 4, s) == acl.ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT  # 507009
    ok(acl, ops.fill[1, s](x, 2.0, n))
    assert acl.mdl.ri_capture_end(s) == (0, acl.ACL_ERROR_STREAM_TASK_GROUP_STATUS)   # a group is open
    # that failed the capture; a new one: a task on another captured stream interrupts the group
    ev = out(acl, acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC))
    ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
    ok(acl, acl.rt.record_event(ev, s))
    ok(acl, acl.rt.stream_wait_event(s2, ev))
    ok(acl, acl.mdl.ri_capture_task_grp_begin(s))
    ok(acl, ops.fill[1, s](x, 2.0, n))
    assert ops.fill[1, s2](x, 3.0, n) == acl.ACL_ERROR_STREAM_TASK_GROUP_INTR                  # 107034
    assert acl.mdl.ri_capture_task_grp_end(s) == (0, acl.ACL_ERROR_STREAM_TASK_GROUP_INTR)
    ok(acl, acl.mdl.ri_capture_task_grp_begin(s))
    ok(acl, ops.fill[1, s](x, 4.0, n))
    ok(acl, ops.fill[1, s](x, 5.0, n))
    handle = out(acl, acl.mdl.ri_capture_task_grp_end(s))
    assert acl.mdl.ri_capture_task_update_begin(update, handle) == acl.ACL_ERROR_STREAM_TASK_GROUP_STATUS
    ok(acl, acl.rt.record_event(ev, s2))
    ok(acl, acl.rt.stream_wait_event(s, ev))
    assert acl.mdl.ri_capture_task_update_begin(s, handle) == acl.ACL_ERROR_STREAM_TASK_GROUP_STATUS
    model = out(acl, acl.mdl.ri_capture_end(s))
    # updates: a capturing stream may not update; count and types must match
    ok(acl, acl.mdl.ri_capture_begin(s, GLOBAL))
    assert acl.mdl.ri_capture_task_update_begin(s, handle) == acl.ACL_ERROR_RT_STREAM_CAPTURED
    out(acl, acl.mdl.ri_capture_end(s))
    assert acl.mdl.ri_capture_task_update_end(update) == acl.ACL_ERROR_STREAM_TASK_GROUP_STATUS
    ok(acl, acl.mdl.ri_capture_task_update_begin(update, handle))
    assert acl.mdl.ri_capture_task_update_begin(update, handle) == acl.ACL_ERROR_STREAM_TASK_GROUP_STATUS
    assert acl.rt.memset_async(x, n * 4, 0, n * 4, update) == acl.ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT
    ok(acl, ops.fill[1, update](x, 6.0, n))
    assert acl.mdl.ri_capture_task_update_end(update) == acl.ACL_ERROR_RT_INTERNAL_ERROR     # 1 of 2
    ok(acl, acl.mdl.ri_capture_task_update_begin(update, handle))
    for v in (6.0, 7.0):
        ok(acl, ops.fill[1, update](x, v, n))
    assert ops.fill[1, update](x, 8.0, n) == acl.ACL_ERROR_RT_INTERNAL_ERROR                 # 3 of 2
    ok(acl, acl.mdl.ri_capture_task_update_end(update))
    ok(acl, acl.mdl.ri_execute_async(model, s))
    ok(acl, acl.rt.synchronize_stream(s))
    assert (read_floats(acl, x, n) == 7).all()
    ok(acl, acl.mdl.ri_destroy(model))
    assert acl.mdl.ri_capture_task_update_begin(update, handle) == acl.ACL_ERROR_RT_PARAM_INVALID
    for st in (s, s2, update):
        ok(acl, acl.rt.destroy_stream(st))
    ok(acl, acl.rt.destroy_event(ev))
