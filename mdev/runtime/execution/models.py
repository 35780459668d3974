"""Model run instances (``aclmdlRI``): build, capture, execute, task groups, destroy.

    build    ri_build_begin -> ri_bind_stream(persistent streams) -> tasks are stored
             -> ri_end_task -> ri_build_end                      (graph shipped to the device)
    capture  ri_capture_begin(stream) -> tasks are stored (streams joined through events)
             -> ri_capture_end(stream)                           (graph shipped to the device)
    run      ri_execute_async(ri, stream): ONE ``run_graph`` task on the stream, however many
             tasks the graph holds; ri_execute(ri, timeout): on the default stream, waited for
    cond     during a capture: ri_cond_handle_create (a uint64 in device memory the model owns),
             ri_add_cond_task(IF / WHILE / SWITCH on it) -> empty child models, each filled by
             ri_capture_to_model_ri_begin(other stream, child) .. ri_capture_end; a replay runs
             the child(ren) the value picks, inline on the lane
    update   ri_capture_task_grp_begin/end during capture marks kernel launches as a group;
             ri_capture_task_update_begin/end on another stream replaces them (an async
             ``update_graph`` task on that stream, ordered with its other work)

The graph sent to the device is one task list per stream ("lane") with graph-local
record/wait markers between lanes (see ``mdev.runtime.capture``); the device keeps it under
an id until ri_destroy (or until this process detaches).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from mdev import constants as C
from mdev import errors as E
from mdev.errors import AclError
from mdev.runtime.boundary import api
from mdev.runtime import capture as R
from mdev.runtime import hooks, streams, trace
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.memory import memops
from mdev.runtime.memtable import DEVICE
from mdev.runtime.validate import as_int, file_path, timeout_ms
from mdev.taskspec import KERNEL_OPS, SPECS


# this module's part of the runtime's state, made afresh with it (finalize, fork)
held = rt.family(models=dict)

MODEL_HANDLES = 0x3D_0000_0000
GROUP_HANDLES = 0x36_0000_0000
BUILDING, CAPTURING, READY = "building", "capturing", "ready"
PENDING = "pending"              # a conditional task's child model, not captured yet
COND_HANDLES = 0x3C_0000_0000
# aclmdlRICondTaskType -> the child models it takes (at least, at most)
_COND_SIZES = {C.ACL_MODEL_RI_COND_TYPE_IF: (1, 2), C.ACL_MODEL_RI_COND_TYPE_WHILE: (1, 1),
               C.ACL_MODEL_RI_COND_TYPE_SWITCH: (1, 1 << 16)}
_STREAM_FLAGS = {C.ACL_MODEL_STREAM_FLAG_HEAD: True, C.ACL_MODEL_STREAM_FLAG_DEFAULT: False}


@dataclass(eq=False)
class Model:
    handle: int
    device: int
    context: object
    kind: str                                   # "build" or "capture"
    state: str
    recorder: R.Recorder | None = None          # while building / capturing
    lanes: list = field(default_factory=list)   # R.Lane of the stored graph, origin first
    gid: int | None = None                      # the graph's id on the device
    groups: list = field(default_factory=list)
    runs: list = field(default_factory=list)    # (stream, seq) of recent executions
    bound: dict = field(default_factory=dict)   # persistent Stream -> head flag
    external_records: list = field(default_factory=list)   # events each replay records for real
    collectives: list = field(default_factory=list)        # (operation, bytes, ranks, algorithm, number) captured
    replays: int = 0                                        # ri_execute_async / ri_execute calls so far
    destroyed: bool = False
    conds: list = field(default_factory=list, repr=False)      # its CondHandles
    children: list = field(default_factory=list, repr=False)   # the child Models of its conditional tasks
    parent: "Model | None" = field(default=None, repr=False)


@dataclass(eq=False)
class CondHandle:
    handle: int
    model: Model
    value: object            # the uint64's device Allocation (freed with the model)
    default: int | None      # assigned at the start of each execution (ASSIGN_DEFAULT), else None

    def location(self) -> tuple:
        return rt.memory.operand(self.value.ptr, 8, write=True, what="condition").location()


@dataclass(eq=False)
class TaskGroup:
    handle: int
    model: Model
    lane: int            # index of its stream's lane in the model
    indices: list        # positions of its tasks in that lane
    ops: list            # their task types


def _model(handle) -> Model:
    if handle is None or handle == 0:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "modelRI is NULL")
    model = held.models.get(handle) if isinstance(handle, int) else None
    if not isinstance(model, Model) or model.destroyed:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{handle!r} is not a live model run instance")
    return model


def _ready(handle) -> Model:
    model = _model(handle)
    if model.state == CAPTURING:
        raise AclError(E.ACL_ERROR_RT_MODEL_CAPTURED, "the model run instance is still being captured")
    if model.state != READY:
        raise AclError(E.ACL_ERROR_RT_MODEL_EXECUTE, "end graph must be called before execution: "
                       "call ri_build_end first")
    return model


def _explicit_stream(stream, what: str):
    if stream is None or stream == 0:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{what}: stream is NULL")
    return rt.stream_in_context(stream)


def _store(model: Model) -> None:
    """Ship the graph to the device: one task list per lane, activations as lane indices."""
    index = {lane.stream: i for i, lane in enumerate(model.lanes)}
    lanes = []
    for lane in model.lanes:
        tasks = lane.frozen()
        for i, (op, args) in enumerate(tasks):
            if op in (R.ACTIVATE, R.STREAM_SWITCH):
                if args[0] not in index:
                    raise AclError(E.ACL_ERROR_RT_STREAM_MODEL, f"stream {args[0].stream_id} activated by the "
                                   "model is not bound to it")
                tasks[i] = (op, (index[args[0]], *args[1:]))
            elif op == R.COND:
                where, kind, children = args
                pending = [k for k, child in enumerate(children) if child.gid is None]
                if pending:
                    raise AclError(E.ACL_ERROR_RT_MODEL_EXECUTE, f"child model(s) {pending} of a conditional task "
                                   "were not captured (ri_capture_to_model_ri_begin .. ri_capture_end)")
                tasks[i] = (op, (where, kind, [child.gid for child in children]))
        lanes.append((lane.stream.stream_id, lane.head, tasks))
    defaults = [(c.location(), c.default) for c in model.conds if c.default is not None]
    model.gid = rt.link(model.device).request("store_graph", lanes, defaults)


def _forget(model: Model) -> None:
    model.destroyed = True
    with rt.lock:
        held.models.pop(model.handle, None)
        for group in model.groups:
            held.models.pop(group.handle, None)


def _new_model(ctx, kind: str, state: str) -> Model:
    model = Model(rt.new_handle(MODEL_HANDLES), ctx.device, ctx, kind, state)
    with rt.lock:
        held.models[model.handle] = model
    return model


# ---------------------------------------------------------------------------- build
@api(1)
def build_begin(flag: int = 0) -> int:
    if as_int(flag, "flag") != 0:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"flag must be 0, got {flag}")
    model = _new_model(rt.current_context(), "build", BUILDING)
    model.recorder = R.Build(model)
    return model.handle


@api()
def bind_stream(model_ri, stream, flag: int) -> None:
    model = _model(model_ri)
    st = _explicit_stream(stream, "ri_bind_stream")
    flag = as_int(flag, "flag")
    if flag not in _STREAM_FLAGS:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "flag must be ACL_MODEL_STREAM_FLAG_HEAD or "
                       f"ACL_MODEL_STREAM_FLAG_DEFAULT, got {flag:#x}")
    if R.capturing(st) is not None:
        raise AclError(E.ACL_ERROR_RT_STREAM_CAPTURED, f"stream {st.stream_id} is capturing")
    if model.state != BUILDING:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "streams can be bound only while the model is being built "
                       "(between ri_build_begin and ri_build_end)")
    if st.device != model.device:
        raise AclError(E.ACL_ERROR_RT_MODEL_CONTEXT, f"the model belongs to device {model.device}, the stream "
                       f"to device {st.device}")
    if not st.flags & C.ACL_STREAM_PERSISTENT:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "only streams created with ACL_STREAM_PERSISTENT "
                       "(create_stream_with_config) can be bound to a model")
    if st.flags & (C.ACL_STREAM_FAST_LAUNCH | C.ACL_STREAM_DEVICE_USE_ONLY) \
            or st.failure_mode == C.ACL_STOP_ON_FAILURE:
        raise AclError(E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "FAST_LAUNCH, DEVICE_USE_ONLY and stop-on-failure "
                       "streams cannot be bound to a model")
    rec = st.recorder
    if not isinstance(rec, R.Build) or rec.model is not None:
        raise AclError(E.ACL_ERROR_RT_STREAM_MODEL, f"stream {st.stream_id} is already bound to a model")
    model.recorder.absorb(rec)
    model.recorder.lanes[st].head = _STREAM_FLAGS[flag]
    st.recorder = model.recorder
    model.bound[st] = _STREAM_FLAGS[flag]


def _bound(model: Model, stream):
    st = _explicit_stream(stream, "stream")
    if st not in model.bound:
        raise AclError(E.ACL_ERROR_RT_STREAM_MODEL, f"stream {st.stream_id} is not bound to this model")
    return st


@api()
def end_task(model_ri, stream) -> None:
    model = _model(model_ri)
    st = _bound(model, stream)
    lane = model.recorder.lanes[st] if model.recorder is not None else None
    if lane is None:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "the model was already built")
    lane.end = len(lane.tasks)


@api()
def build_end(model_ri, reserve=None) -> None:
    model = _model(model_ri)
    if reserve not in (None, 0):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "reserve must be None")
    if model.state != BUILDING:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "the model is not being built (ri_build_end twice, or a "
                       "captured model)")
    model.lanes = [lane for lane in model.recorder.lanes.values() if lane.stream in model.bound]
    model.external_records = list(model.recorder.external_records)
    _store(model)
    model.state = READY


@api()
def unbind_stream(model_ri, stream) -> None:
    model = _model(model_ri)
    st = _bound(model, stream)
    del model.bound[st]
    if model.state == BUILDING:
        model.recorder.lanes.pop(st, None)
    R.persist(st)         # back to a lone persistent stream; the model keeps what it stored


def active_stream(active, stream) -> None:
    """aclrtActiveStream: a task on ``stream`` that starts ``active`` (a non-head stream of
    the same model)."""
    st = _explicit_stream(stream, "stream")
    target = _explicit_stream(active, "activeStream")
    rec = st.recorder
    if not isinstance(rec, R.Build) or rec.model is None or target.recorder is not rec:
        raise AclError(E.ACL_ERROR_RT_STREAM_MODEL, "both streams must be bound to the same model")
    rec.record(st, R.ACTIVATE, (target,))


_CONDITIONS = (C.ACL_RT_EQUAL, C.ACL_RT_NOT_EQUAL, C.ACL_RT_GREATER, C.ACL_RT_GREATER_OR_EQUAL, C.ACL_RT_LESS,
               C.ACL_RT_LESS_OR_EQUAL)
_COMPARED_BYTES = {C.ACL_RT_SWITCH_INT32: 4, C.ACL_RT_SWITCH_INT64: 8}


def switch_stream(left, cond: int, right, data_type: int, true_stream, false_stream, stream) -> None:
    """aclrtSwitchStream: a task on ``stream`` that compares the integers at ``left`` and
    ``right`` (device memory, read when it runs) and, when ``cond`` holds, starts
    ``true_stream`` (a non-head stream of the same model) while ``stream`` stops there."""
    cond, data_type = as_int(cond, "cond"), as_int(data_type, "dataType")
    if cond not in _CONDITIONS:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"cond must be an aclrtCondition (0..5), got {cond}")
    if data_type not in _COMPARED_BYTES:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "dataType must be ACL_RT_SWITCH_INT32 or ACL_RT_SWITCH_INT64, "
                       f"got {data_type}")
    if false_stream not in (None, 0):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "falseStream is reserved: pass NULL")
    st = _explicit_stream(stream, "stream")
    target = _explicit_stream(true_stream, "trueStream")
    rec = st.recorder
    if not isinstance(rec, R.Build) or rec.model is None or target.recorder is not rec:
        raise AclError(E.ACL_ERROR_RT_STREAM_MODEL, "stream and trueStream must be bound to the same model")
    nbytes = _COMPARED_BYTES[data_type]
    where = []
    for ptr, what in ((left, "leftValue"), (right, "rightValue")):
        if ptr is None or ptr == 0:
            raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{what} is NULL")
        operand = rt.memory.operand(ptr, nbytes, write=False, what=what)
        if operand.kind != DEVICE or operand.device != st.device:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{what} must be device memory of the stream's device")
        where.append(operand.location())
    rec.record(st, R.STREAM_SWITCH, (target, *where, cond, nbytes))


# ---------------------------------------------------------------------------- execution
@api()
def execute_async(model_ri, stream) -> None:
    model = _ready(model_ri)
    st = rt.stream_in_context(stream)
    if R.capturing(st) is not None:
        raise AclError(E.ACL_ERROR_RT_STREAM_CAPTURED, f"stream {st.stream_id} is capturing: a model cannot be "
                       "executed on it")
    if st.device != model.device:
        raise AclError(E.ACL_ERROR_RT_MODEL_CONTEXT, f"the model belongs to device {model.device}, the stream "
                       f"to device {st.device}")
    seq = streams.submit(st, "run_graph", model.gid)
    if st.recorder is None:
        _ran(model, st, seq)


def _ran(model: Model, stream, seq: int) -> None:
    """A replay was submitted: its real event records count as records of this process, and
    the trace lists its collectives, each timed by the replay's task (the k-th replay of
    every rank's model makes one instance of each)."""
    model.runs.append((stream, seq))
    for op, nbytes, nranks, algorithm, number in model.collectives:
        trace.collective(stream, seq, seq, op, nbytes, nranks, algorithm, f"{number} replay {model.replays}")
    model.replays += 1
    del model.runs[:-16]
    for ev in model.external_records:
        ev.issued += 1
        ev.last_record = (stream, seq)
        rt.link(ev.device).control.event_issued[ev.slot] = ev.issued


@api()
def execute(model_ri, timeout: int) -> None:
    """Run on the current context's default stream and wait (``timeout`` ms, -1 = forever)."""
    timeout = timeout_ms(timeout)
    model = _ready(model_ri)
    ctx = rt.current_context()
    if ctx.device != model.device:
        raise AclError(E.ACL_ERROR_RT_MODEL_CONTEXT, f"the model belongs to device {model.device}, the "
                       f"current context to device {ctx.device}")
    st = ctx.default_stream
    seq = streams.submit(st, "run_graph", model.gid)
    _ran(model, st, seq)
    streams.wait_targets([(st, seq)], timeout)


@api()
def destroy(model_ri) -> None:
    model = _model(model_ri)
    if model.state == CAPTURING:
        raise AclError(E.ACL_ERROR_RT_MODEL_CAPTURED, "the model is still being captured: end the capture first")
    if any(not s.destroyed and not streams.is_done(s, seq) for s, seq in model.runs):
        raise AclError(E.ACL_ERROR_RT_MODEL_RUNNING, "the model run instance is still executing")
    _forget(model)
    for st in list(model.bound):
        if st.recorder is model.recorder:
            R.persist(st)
    if model.gid is not None:
        try:
            rt.link(model.device).request("drop_graph", model.gid)
        except AclError:
            pass   # the device is gone, and the graph with it
    if isinstance(model.recorder, R.Build):
        model.recorder.release_staged()
    _release_conditionals(model)


def _release_conditionals(model: Model) -> None:
    """A model's child models and condition values go with it."""
    for child in model.children:
        if not child.destroyed:
            _forget(child)
            if child.gid is not None:
                try:
                    rt.link(child.device).request("drop_graph", child.gid)
                except AclError:
                    pass
            _release_conditionals(child)
    for cond in model.conds:
        with rt.lock:
            held.models.pop(cond.handle, None)
        try:
            memops.release(cond.value)
        except AclError:
            pass    # the device is gone, and the memory with it


# ---------------------------------------------------------------------------- capture
@api()
def capture_begin(stream, mode: int) -> None:
    mode = as_int(mode, "mode")
    if mode not in R.MODE_NAMES:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"capture mode must be GLOBAL, THREAD_LOCAL or RELAXED, got {mode}")
    st = rt.stream_in_context(stream)
    if st.is_default:
        raise AclError(E.ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT, "the default stream cannot be captured")
    rec = st.recorder
    if isinstance(rec, R.Capture):
        raise AclError(E.ACL_ERROR_RT_STREAM_CAPTURED, f"stream {st.stream_id} is already capturing")
    if isinstance(rec, R.Update):
        raise AclError(E.ACL_ERROR_STREAM_TASK_GROUP_STATUS, f"stream {st.stream_id} is updating a task group")
    if rec is not None:
        raise AclError(E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "a persistent stream cannot be captured")
    _capture_into(_new_model(st.context, "capture", CAPTURING), st, mode)


def _capture_into(model: Model, st, mode: int) -> None:
    model.state = CAPTURING
    capture = model.recorder = R.Capture(st, mode, model)
    with rt.lock:
        R.held.captures.append(capture)
    st.recorder = capture


@api()
def capture_to_model_ri_begin(stream, model_ri, mode: int) -> None:
    """Capture ``stream`` into an existing, empty model: a conditional task's child."""
    mode = as_int(mode, "mode")
    if mode not in R.MODE_NAMES:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"capture mode must be GLOBAL, THREAD_LOCAL or RELAXED, got {mode}")
    model = _model(model_ri)
    if model.state != PENDING:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "the model must be a conditional task's child model not "
                       "captured yet (ri_add_cond_task makes them)")
    st = rt.stream_in_context(stream)
    if st.is_default:
        raise AclError(E.ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT, "the default stream cannot be captured")
    if st.recorder is not None:
        raise AclError(E.ACL_ERROR_RT_STREAM_CAPTURED, f"stream {st.stream_id} is capturing or persistent")
    if st.device != model.device:
        raise AclError(E.ACL_ERROR_RT_MODEL_CONTEXT, f"the model belongs to device {model.device}, the stream "
                       f"to device {st.device}")
    _capture_into(model, st, mode)


# ---------------------------------------------------------------------------- conditional tasks
def _capturing_model(model_ri) -> Model:
    model = _model(model_ri)
    if model.state != CAPTURING:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "the model must be being captured (ri_capture_begin)")
    return model


@api(1)
def cond_handle_create(model_ri, default_launch_value: int, flag: int) -> int:
    model = _capturing_model(model_ri)
    default = as_int(default_launch_value, "defaultLaunchValue")
    flag = as_int(flag, "flag")
    if flag not in (0, C.ACL_MODEL_RI_COND_HANDLE_ASSIGN_DEFAULT):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"flag must be 0 or ACL_MODEL_RI_COND_HANDLE_ASSIGN_DEFAULT, got {flag}")
    if not 0 <= default < 1 << 32:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"defaultLaunchValue must be a uint32, got {default}")
    if rt.current_context().device != model.device:
        raise AclError(E.ACL_ERROR_RT_MODEL_CONTEXT, f"the model belongs to device {model.device}, the current "
                       f"context to device {rt.current_context().device}")
    value = memops.allocate(8, C.ACL_MEM_MALLOC_HUGE_FIRST, held_by=f"model {model.handle:#x}'s condition")
    cond = CondHandle(rt.new_handle(COND_HANDLES), model, value, default if flag else None)
    model.conds.append(cond)
    with rt.lock:
        held.models[cond.handle] = cond
    return cond.handle


def _cond(handle) -> CondHandle:
    return _of_live_model(handle, CondHandle, "a live condition handle")


def _of_live_model(handle, kind: type, what: str):
    """The object of ``kind`` (a condition, a task group) ``handle`` names, if its model lives."""
    if handle is None or handle == 0:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "handle is NULL")
    found = held.models.get(handle) if isinstance(handle, int) else None
    if not isinstance(found, kind) or found.model.destroyed:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{handle!r} is not {what}")
    return found


@api(1)
def cond_handle_get_cond_ptr(handle) -> int:
    return _cond(handle).value.ptr


@api(1)
def add_cond_task(handle, kind: int, size_: int, stream, flags: int = 0) -> list:
    """A conditional task on a capturing stream: IF runs child 0 when the value is not 0, else
    child 1 (if any); WHILE runs child 0 while it is not 0; SWITCH runs child [value] (none
    past the last).  Returns the children's handles (empty models to capture)."""
    cond = _cond(handle)
    kind, count = as_int(kind, "type"), as_int(size_, "size")
    if as_int(flags, "flags") != 0:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"flags must be 0, got {flags}")
    if kind not in _COND_SIZES:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"type must be an aclmdlRICondTaskType (IF, WHILE, SWITCH), got {kind}")
    low, high = _COND_SIZES[kind]
    if not low <= count <= high:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"a condition of type {kind} takes {low} to {high} models, got {count}")
    st = rt.stream_in_context(stream)
    capture = R.capturing(st)
    if capture is None:
        raise AclError(E.ACL_ERROR_RT_STREAM_NOT_CAPTURED, f"stream {st.stream_id} is not capturing")
    if capture.model is not cond.model:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "the condition handle belongs to another model than the "
                       "stream's capture")
    children = [_new_model(st.context, "capture", PENDING) for _ in range(count)]
    for child in children:
        child.parent = cond.model
    cond.model.children.extend(children)
    streams.submit(st, R.COND, cond.location(), kind, children)
    return [child.handle for child in children]


@api(1)
def capture_end(stream) -> int:
    st = rt.stream_in_context(stream)
    capture = R.capturing(st)
    if capture is None:
        raise AclError(E.ACL_ERROR_RT_STREAM_NOT_CAPTURED, f"stream {st.stream_id} is not capturing")
    if st is not capture.origin:
        raise AclError(E.ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED, f"the capture was begun on stream "
                       f"{capture.origin.stream_id}; end it there, not on stream {st.stream_id}")
    if capture.mode != R.RELAXED and hooks.thread_id() != capture.thread:
        raise AclError(E.ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD, f"a {R.MODE_NAMES[capture.mode]} capture "
                       "must be ended by the thread that began it")
    model = capture.model
    with capture.lock:
        try:
            capture.check_active()
            open_groups = [lane for lane in capture.lanes.values() if lane.group is not None]
            if open_groups:
                raise AclError(E.ACL_ERROR_STREAM_TASK_GROUP_STATUS, "a task group is still open on stream "
                               f"{open_groups[0].stream.stream_id} (ri_capture_task_grp_end)")
            unjoined = capture.unjoined()
            if unjoined:
                raise AclError(E.ACL_ERROR_RT_STREAM_UNJOINED, "stream(s) "
                               + ", ".join(str(lane.stream.stream_id) for lane in unjoined)
                               + " did not join back to the origin stream (record an event there as their last "
                                 "task and wait for it on the origin stream)")
        except AclError:
            capture.terminate()
            _forget(model)
            _release_conditionals(model)
            raise
        capture.terminate()
    model.lanes = list(capture.lanes.values())
    model.external_records = list(capture.external_records)
    model.collectives = list(capture.collectives)
    model.recorder = None
    try:
        _store(model)
    except AclError:
        _forget(model)
        _release_conditionals(model)
        raise
    model.state = READY
    return model.handle


@api(2)
def capture_get_info(stream) -> tuple[int, int]:
    st = rt.stream(stream)
    capture = R.capturing(st)
    if capture is None:
        return C.ACL_MODEL_RI_CAPTURE_STATUS_NONE, 0
    return capture.status, capture.model.handle


@api(1)
def capture_thread_exchange_mode(mode: int) -> int:
    mode = as_int(mode, "mode")
    if mode not in R.MODE_NAMES:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"capture mode must be GLOBAL, THREAD_LOCAL or RELAXED, got {mode}")
    previous, rt.thread.capture_mode = rt.thread.capture_mode, mode
    return previous


# ---------------------------------------------------------------------------- task groups
def _capture_of(st) -> R.Capture:
    capture = R.capturing(st)
    if capture is None:
        raise AclError(E.ACL_ERROR_RT_STREAM_NOT_CAPTURED, f"stream {st.stream_id} is not capturing")
    return capture


@api()
def capture_task_grp_begin(stream) -> None:
    st = rt.stream_in_context(stream)
    capture = _capture_of(st)
    with capture.lock:
        capture.check_active()
        lane = capture.lanes[st]
        if lane.group is not None:
            raise AclError(E.ACL_ERROR_STREAM_TASK_GROUP_STATUS, f"a task group is already open on stream "
                           f"{st.stream_id}")
        lane.group = R.OpenGroup(lane)


@api(1)
def capture_task_grp_end(stream) -> int:
    st = rt.stream_in_context(stream)
    capture = _capture_of(st)
    with capture.lock:
        lane = capture.lanes[st]
        group, lane.group = lane.group, None
        if group is None:
            raise AclError(E.ACL_ERROR_STREAM_TASK_GROUP_STATUS, f"no task group is open on stream {st.stream_id}")
        if group.error is not None:
            raise AclError(group.error.code, group.error.message)
        capture.check_active()
        handle = TaskGroup(rt.new_handle(GROUP_HANDLES), capture.model, list(capture.lanes).index(st),
                           group.indices, [lane.tasks[i][0] for i in group.indices])
    capture.model.groups.append(handle)
    with rt.lock:
        held.models[handle.handle] = handle
    return handle.handle


def _group(handle) -> TaskGroup:
    return _of_live_model(handle, TaskGroup, "a task group of a live model")


@api()
def capture_task_update_begin(stream, handle) -> None:
    st = rt.stream_in_context(stream)
    group = _group(handle)
    if group.model.state != READY:
        raise AclError(E.ACL_ERROR_STREAM_TASK_GROUP_STATUS, "the task group's capture has not ended yet")
    rec = st.recorder
    if isinstance(rec, R.Capture):
        raise AclError(E.ACL_ERROR_RT_STREAM_CAPTURED, f"stream {st.stream_id} is capturing: update a task group "
                       "from a stream that is not")
    if isinstance(rec, R.Update):
        raise AclError(E.ACL_ERROR_STREAM_TASK_GROUP_STATUS, f"stream {st.stream_id} is already updating a task group")
    if rec is not None:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "a persistent stream cannot update a task group")
    if st.device != group.model.device:
        raise AclError(E.ACL_ERROR_RT_MODEL_CONTEXT, f"the model belongs to device {group.model.device}")
    st.recorder = R.Update(group, st)


@api()
def capture_task_update_end(stream) -> None:
    st = rt.stream_in_context(stream)
    rec = st.recorder
    if not isinstance(rec, R.Update):
        raise AclError(E.ACL_ERROR_STREAM_TASK_GROUP_STATUS, f"no task update was begun on stream {st.stream_id}")
    st.recorder = None
    group, tasks = rec.group, list(rec.lane.tasks)
    if not tasks:
        return        # nothing launched: the group keeps its tasks
    if len(tasks) != len(group.ops):
        raise AclError(E.ACL_ERROR_RT_INTERNAL_ERROR, f"task group update error: the group holds "
                       f"{len(group.ops)} task(s), {len(tasks)} were launched between update begin and end")
    model = group.model
    if model.destroyed:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "the task group's model was destroyed")
    lane = model.lanes[group.lane]
    for i, task in zip(group.indices, tasks):
        lane.tasks[i] = task
    streams.submit(st, "update_graph", model.gid, group.lane, group.indices, tasks)


# ---------------------------------------------------------------------------- debug dumps
# the graph's markers (mdev.runtime.capture): a device op's type and detail are its OpSpec's
_MARKERS = {
    R.RECORD: (C.ACL_MODEL_RI_TASK_EVENT_RECORD, "EVENT_RECORD"),
    R.WAIT: (C.ACL_MODEL_RI_TASK_EVENT_WAIT, "EVENT_WAIT"),
    R.ACTIVATE: (C.ACL_MODEL_RI_TASK_DEFAULT, "STREAM_ACTIVE"), R.LABEL: (C.ACL_MODEL_RI_TASK_DEFAULT, "LABEL_SET"),
    R.SWITCH: (C.ACL_MODEL_RI_TASK_DEFAULT, "LABEL_SWITCH_BY_INDEX"),
    R.STREAM_SWITCH: (C.ACL_MODEL_RI_TASK_DEFAULT, "STREAM_SWITCH"),
}


def _type(op: str) -> tuple[int, str]:
    """(aclmdlRITaskType, display name) of a task of the dump."""
    spec = SPECS.get(op)
    return spec.ri if spec is not None else _MARKERS.get(op, (C.ACL_MODEL_RI_TASK_DEFAULT, op.upper()))


def _graph(model: Model) -> list[dict]:
    """Every task of the model with its id, type, detail and the tasks it waits for."""
    lanes = model.lanes if model.state == READY else list(model.recorder.lanes.values())
    fids = {args[0] for lane in lanes for op, args in lane.tasks if op in KERNEL_OPS}
    names = {}
    if fids:
        try:
            names = rt.link(model.device).request("graph_kernel_names", sorted(fids))
        except AclError:
            pass
    records, tasks = {}, []
    for li, lane in enumerate(lanes):
        for ti, (op, args) in enumerate(lane.frozen()):
            if op == R.RECORD:
                records[args[0]] = (li, ti)
    groups = {(g.lane, i): g for g in model.groups for i in g.indices}
    for li, lane in enumerate(lanes):
        for ti, (op, args) in enumerate(lane.frozen()):
            type_id, type_name = _type(op)
            deps = [(li, ti - 1)] if ti else []
            detail = SPECS[op].describe(args, names) if op in SPECS else ""
            if op == R.WAIT and args[0] in records:
                src = records[args[0]]
                deps.append(src)
                detail = f"<- stream {lanes[src[0]].stream.stream_id} task {src[1]}"
            elif op == R.RECORD:
                waits = [(lj, tj) for lj, other in enumerate(lanes) for tj, (o, a) in enumerate(other.frozen())
                         if o == R.WAIT and a[0] == args[0]]
                detail = ", ".join(f"-> stream {lanes[lj].stream.stream_id} task {tj}" for lj, tj in waits)
            elif op in (R.ACTIVATE, R.STREAM_SWITCH):
                target = args[0] if isinstance(args[0], int) else next(
                    (i for i, other in enumerate(lanes) if other.stream is args[0]), -1)
                detail = f"starts stream {lanes[target].stream.stream_id}" if target >= 0 else ""
            group = groups.get((li, ti))
            tasks.append({"stream": lane.stream.stream_id, "lane": li, "index": ti, "order": lane.order[ti],
                          "op": op, "type": type_name, "type_id": type_id, "detail": detail,
                          "deps": deps, "group": group.handle if group else None, "args": args})
    return tasks


def _lanes(model: Model) -> list:
    return model.lanes if model.state == READY else list(model.recorder.lanes.values())


@api()
def debug_print(model_ri) -> None:
    model = _model(model_ri)
    if model.state == CAPTURING:
        raise AclError(E.ACL_ERROR_RT_MODEL_CAPTURED, "the model is still being captured (debug print needs "
                       "ri_capture_end first)")
    tasks, lanes = _graph(model), _lanes(model)
    how = "captured" if model.kind == "capture" else "built" if model.state == READY else "being built"
    print(f"aclmdlRI {model.handle:#x}: {how} on device {model.device}, {len(lanes)} stream(s), "
          f"{len(tasks)} task(s), {len(model.groups)} task group(s)")
    for li, lane in enumerate(lanes):
        role = lane.role or (("origin stream" if li == 0 else "joined through an event") if model.kind == "capture"
                             else ("head" if lane.head else "started by STREAM_ACTIVE"))
        print(f"  stream {lane.stream.stream_id} ({role}):")
        for task in (t for t in tasks if t["lane"] == li):
            group = f"  [task group {task['group']:#x}]" if task["group"] else ""
            note = lane.notes.get(task["index"])
            if note:
                print(f"    -- {note}")
            print(f"    task {task['index']:<4} {task['type']:<15} {task['detail']}{group}".rstrip())


def _json_args(value):
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, (list, tuple)):
        return [_json_args(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_args(v) for k, v in value.items()}
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    return repr(value)


@api()
def debug_json_print(model_ri, path: str, flags: int = C.ACL_MDLRI_DEBUG_JSON_PRINT_SUMMARY) -> None:
    """A chrome://tracing file: one track per stream, one slice per task (laid out by
    dependency depth), flow arrows for cross-stream dependencies; the model, its streams
    and tasks are also listed under "model" in plain form."""
    model = _model(model_ri)
    flags = as_int(flags, "flags")
    file_path(path, "path")
    if flags not in (C.ACL_MDLRI_DEBUG_JSON_PRINT_SUMMARY, C.ACL_MDLRI_DEBUG_JSON_PRINT_VERBOSE):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"flags must be ACL_MDLRI_DEBUG_JSON_PRINT_SUMMARY or _VERBOSE, "
                       f"got {flags}")
    if model.state == CAPTURING:
        raise AclError(E.ACL_ERROR_RT_MODEL_CAPTURED, "the model is still being captured")
    tasks, lanes = _graph(model), _lanes(model)
    verbose = flags == C.ACL_MDLRI_DEBUG_JSON_PRINT_VERBOSE
    ids = {(t["lane"], t["index"]): n for n, t in enumerate(tasks)}
    depth: dict = {}
    for t in sorted(tasks, key=lambda t: t["order"]):          # recording order is topological
        depth[ids[t["lane"], t["index"]]] = 1 + max((depth.get(ids[d], 0) for d in t["deps"]), default=-1)
    pid = f"aclmdlRI {model.handle:#x}"
    trace = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": f"{pid} (device {model.device})"}}]
    trace += [{"name": "thread_name", "ph": "M", "pid": pid, "tid": lane.stream.stream_id,
               "args": {"name": f"stream {lane.stream.stream_id}"}} for lane in lanes]
    listed = []
    for n, t in enumerate(tasks):
        entry = {"taskId": n, "streamId": t["stream"], "taskIndex": t["index"], "type": t["type"],
                 "typeId": t["type_id"], "detail": t["detail"],
                 "dependsOn": [ids[d] for d in t["deps"]]}
        if t["group"]:
            entry["taskGroup"] = t["group"]
        if verbose:
            entry["op"], entry["args"] = t["op"], _json_args(t["args"])
        listed.append(entry)
        trace.append({"name": t["type"], "cat": t["op"], "ph": "X", "pid": pid, "tid": t["stream"],
                      "ts": depth[n] * 10, "dur": 8, "args": {k: v for k, v in entry.items() if k != "dependsOn"}})
        for d in t["deps"]:
            if d[0] != t["lane"]:
                src = ids[d]
                trace.append({"name": "dependency", "cat": "dep", "ph": "s", "id": f"{src}-{n}", "pid": pid,
                              "tid": tasks[src]["stream"], "ts": depth[src] * 10 + 4})
                trace.append({"name": "dependency", "cat": "dep", "ph": "f", "bp": "e", "id": f"{src}-{n}",
                              "pid": pid, "tid": t["stream"], "ts": depth[n] * 10 + 1})
    document = {
        "model": {"modelRI": model.handle, "device": model.device, "kind": model.kind,
                  "streams": [{"streamId": lane.stream.stream_id, "head": lane.head,
                               "origin": model.kind == "capture" and i == 0} for i, lane in enumerate(lanes)],
                  "taskGroups": [{"handle": g.handle, "streamId": lanes[g.lane].stream.stream_id,
                                  "tasks": [ids[g.lane, i] for i in g.indices]} for g in model.groups],
                  "tasks": listed},
        "traceEvents": trace,
        "displayTimeUnit": "ns",
    }
    try:
        # O_NONBLOCK: a FIFO nobody reads is refused (ENXIO), not waited on for ever
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(document, f, indent=1)
    except OSError as exc:
        raise AclError(E.ACL_ERROR_RT_FILE_OPEN, f"cannot write {path}: {exc}") from exc

