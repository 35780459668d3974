"""Work recorded instead of run, and the rules of stream capture.

A stream with a recorder (``Stream.recorder``) does not send its tasks to the device:
``streams.submit`` hands each one to the recorder, which appends it to the stream's
*lane* -- the ordered task list the stream contributes to a graph.

    Capture   aclmdlRICaptureBegin(origin) .. CaptureEnd: the origin stream and every
              stream pulled in through an event recorded inside the capture
    Build     an ACL_STREAM_PERSISTENT stream (alone, or bound to a model being built)
    Update    aclmdlRICaptureTaskUpdateBegin .. End: replacement tasks for a task group

Event records and waits between streams of one graph become graph-local markers
(``graph_record`` / ``graph_wait``): on replay they order the lanes exactly as the events
ordered the streams, and nothing outside the graph sees them.  An ``ACL_EVENT_EXTERNAL``
event stays a real event inside a graph (a flag wait: released by a record made after
the last reset), which is how a replay waits for work outside the graph.

The checks the runtime modules call (one line each) live here too: synchronising or
querying a capturing stream (107027), a captured event (107028), synchronous memory
operations under the capture modes (107030 / 107041), the default stream (107031).
"""

from __future__ import annotations

import itertools
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mdev import constants as C
from mdev import errors as E
from mdev import protocol
from mdev.errors import AclError
from mdev.runtime import hooks
from mdev.taskspec import KERNEL_OPS
from mdev.runtime.core import RUNTIME as rt


# this module's part of the runtime's state, made afresh with it (finalize, fork)
held = rt.family(
    captures=list,  # captures in progress (Capture)
)

if TYPE_CHECKING:
    from mdev.runtime.core import Stream

RECORD, WAIT, ACTIVATE = protocol.GRAPH_RECORD, protocol.GRAPH_WAIT, protocol.GRAPH_ACTIVATE
LABEL, SWITCH = protocol.GRAPH_LABEL, protocol.GRAPH_SWITCH        # mdev.runtime.execution.labels
STREAM_SWITCH = protocol.GRAPH_STREAM_SWITCH                        # aclrtSwitchStream (mdev.runtime.execution.models)
COND = protocol.GRAPH_COND                                          # aclmdlRIAddCondTask (likewise)
GROUP_OPS = KERNEL_OPS      # a task group holds launches on the AI Core / Vector Core only
ACTIVE, INVALIDATED = C.ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE, C.ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED
GLOBAL, THREAD_LOCAL, RELAXED = (C.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL, C.ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL,
                                 C.ACL_MODEL_RI_CAPTURE_MODE_RELAXED)
MODE_NAMES = {GLOBAL: "GLOBAL", THREAD_LOCAL: "THREAD_LOCAL", RELAXED: "RELAXED"}

_markers = itertools.count(1)     # graph-local record/wait markers, unique in this process
_order = itertools.count(1)       # recording order of tasks, for the debug dumps


@dataclass(eq=False)
class Lane:
    """The tasks one stream contributes to a graph."""
    stream: "Stream"
    tasks: list = field(default_factory=list)      # (op, args), in stream order
    order: list = field(default_factory=list)      # recording order of each task
    head: bool = True                              # starts with the model (else: ACTIVATE)
    end: int | None = None                         # task count at aclmdlRIEndTask
    role: str = ""                                 # how the stream came in, if not by an event
    notes: dict = field(default_factory=dict)      # task index -> what it begins (a collective), for dumps
    group: "OpenGroup | None" = None               # a task group being recorded

    def frozen(self) -> list:
        return list(self.tasks if self.end is None else self.tasks[:self.end])


@dataclass(eq=False)
class OpenGroup:
    lane: Lane
    indices: list = field(default_factory=list)    # positions of its tasks in the lane
    error: AclError | None = None                  # set when the group was interrupted


def _external(ev) -> bool:
    return bool(ev.flags & C.ACL_EVENT_EXTERNAL)


def _ipc(ev) -> bool:
    return ev.opened is not None or ev.flags == C.ACL_EVENT_IPC


def _name(stream) -> str:
    return f"stream {stream.stream_id}"


class Recorder:
    """Lanes of recorded tasks and the events recorded into them."""

    where = "a model"          # what the recorded work becomes, for messages

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.lanes: dict = {}            # Stream -> Lane, in the order the streams joined
        self.events: dict = {}           # event handle -> (marker, ev.issued at the record)
        self.external_records: list = []     # events each replay records for real
        self.collectives: list = []          # (operation, bytes, ranks, algorithm, number) recorded, in order

    def add_lane(self, stream, head: bool = True) -> Lane:
        lane = self.lanes.get(stream)
        if lane is None:
            lane = self.lanes[stream] = Lane(stream, head=head)
        return lane

    def admit(self, lane: Lane, op: str) -> None:
        """Refuse a task this recorder cannot hold (raise AclError)."""

    def record(self, stream, op: str, args: tuple) -> int:
        """``streams.submit`` of a stream with this recorder: store the task."""
        with self.lock:
            lane = self.lanes[stream]
            self.admit(lane, op)
            lane.tasks.append((op, args))
            lane.order.append(next(_order))
        return stream.seq          # nothing was sent: the stream's device sequence is unchanged

    def note(self, stream, text: str) -> None:
        """``text`` says what the next task recorded on ``stream`` begins (model dumps)."""
        with self.lock:
            lane = self.lanes[stream]
            lane.notes[len(lane.tasks)] = text

    def marker_of(self, ev) -> int | None:
        """The marker of the event's record in this graph, if that is still its latest record."""
        entry = self.events.get(ev.handle)
        return entry[0] if entry is not None and entry[1] == ev.issued else None

    def record_event(self, stream, ev) -> None:
        if _external(ev):        # visible outside the graph: a real record on each replay
            self.record_outside(stream, ev)
            return
        marker = next(_markers)
        with self.lock:
            self.record(stream, RECORD, (marker,))
            self.events[ev.handle] = (marker, ev.issued)

    def record_outside(self, stream, ev) -> None:
        """A record each replay makes for real (the host counts it when it executes the model)."""
        self.record(stream, "record_event", (ev.slot, ev.uid))
        self.external_records.append(ev)

    def wait_event(self, stream, ev, owner) -> None:
        """A wait in a built (persistent-stream) graph; ``owner`` is the capture that recorded
        the event, if any."""
        if owner is not None:
            raise AclError(E.ACL_ERROR_STREAM_CAPTURE_CONFLICT, "the event was recorded in a capture; a "
                           "persistent stream cannot wait on it")
        if not self.wait_in_graph(stream, ev) and ev.issued:
            # recorded outside: an ordinary snapshot wait on each replay
            self.record(stream, "wait_event", (ev.slot, ev.uid, ev.issued, rt.op_wait_timeout))

    def wait_in_graph(self, stream, ev) -> bool:
        """Record a wait the graph expresses itself, on one of its markers or on an external
        event (a flag wait); False if ``ev`` is neither.  IPC events cannot be waited on."""
        marker = self.marker_of(ev)
        if marker is not None:
            self.record(stream, WAIT, (marker,))
        elif _external(ev):
            self.record(stream, "wait_event_flag", (ev.slot, ev.uid, rt.op_wait_timeout))
        elif _ipc(ev):
            raise self.fail(E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, f"IPC events cannot be waited on in {self.where}")
        else:
            return False
        return True

    def fail(self, code: int, message: str) -> AclError:
        return AclError(code, message)


class Build(Recorder):
    """The stored tasks of a persistent stream; once bound, of all streams of a model."""

    kind = "build"

    def __init__(self, model=None) -> None:
        super().__init__()
        self.model = model
        self.staged: list = []      # pinned Allocations its copies from pageable memory read

    def absorb(self, other: "Build") -> None:
        """Bind: a persistent stream's tasks so far (and its events) join the model's."""
        with self.lock:
            self.lanes.update(other.lanes)
            self.events.update(other.events)
            self.external_records.extend(other.external_records)
            self.staged.extend(other.staged)
            other.staged.clear()

    def stage(self, nbytes: int):
        """Pinned memory for a stored copy from pageable host memory: the bytes are taken at
        the call (the program's buffer may be gone when the model runs), as the CANN runtime
        does for an asynchronous copy from pageable memory; freed with the model."""
        buffer = rt.memory.new_pinned(nbytes)
        buffer.held_by = "a model's stored copy"
        with self.lock:
            self.staged.append(buffer)
        return buffer

    def release_staged(self) -> None:
        with self.lock:
            staged, self.staged = self.staged, []
        for buffer in staged:
            rt.memory.release_pinned(buffer)


class Capture(Recorder):
    """aclmdlRICaptureBegin .. End."""

    kind = "capture"
    where = "a capture"

    def __init__(self, origin, mode: int, model) -> None:
        super().__init__()
        self.origin = origin
        self.context = origin.context
        self.mode = mode
        self.thread = hooks.thread_id()
        self.model = model
        self.status = ACTIVE
        self.reason = ""
        self.external_used: set = set()     # events of an EXTERNAL record or wait (one each)
        self.add_lane(origin)

    # -- state
    def invalidate(self, why: str) -> None:
        with self.lock:
            if self.status == ACTIVE:
                self.status, self.reason = INVALIDATED, why

    def fail(self, code: int, message: str) -> AclError:
        """An error that invalidates the capture, as the real runtime's TerminateCapture does."""
        self.invalidate(f"{E.error_name(code)}({code}): {message}")
        return AclError(code, message)

    def check_active(self) -> None:
        if self.status != ACTIVE:
            raise AclError(E.ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED,
                           f"the capture begun on {_name(self.origin)} was invalidated by an earlier error: "
                           f"{self.reason}")

    def terminate(self) -> None:
        """The capture is over (ended or failed): its streams run their work again."""
        with self.lock:
            for lane in self.lanes.values():
                if lane.stream.recorder is self:
                    lane.stream.recorder = None
                lane.group = None
            with rt.lock:
                if self in held.captures:
                    held.captures.remove(self)

    # -- recording
    def admit(self, lane: Lane, op: str) -> None:
        self.check_active()
        if op == "host_callback":
            raise self.fail(E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "host callbacks (launch_host_func, "
                            "launch_callback) cannot be captured in mdev")
        if op == "run_graph":
            raise self.fail(E.ACL_ERROR_RT_STREAM_CAPTURED, "a model cannot be executed on a capturing stream")
        if lane.group is not None:
            if op not in GROUP_OPS:
                raise AclError(E.ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT, f"a task group holds kernel launches only "
                               f"(tasks running on the AI Core / Vector Core), not {op!r}")
            lane.group.indices.append(len(lane.tasks))
            return
        open_groups = [other.group for other in self.lanes.values() if other.group is not None]
        if open_groups:
            error = AclError(E.ACL_ERROR_STREAM_TASK_GROUP_INTR, f"{_name(lane.stream)} received a task while a "
                             f"task group is being recorded on another captured stream")
            for group in open_groups:
                group.error = group.error or error
            raise error

    def record_event(self, stream, ev) -> None:
        self.check_active()
        if _ipc(ev):
            raise self.fail(E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "IPC events cannot be recorded into a capturing stream")
        if not _external(ev) and ev.api != "aclrtCreateEventExWithFlag":
            raise self.fail(E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, f"events from {ev.api} cannot be recorded into a "
                            "capturing stream: create them with create_event_ex_with_flag(ACL_EVENT_SYNC)")
        super().record_event(stream, ev)

    def wait_event(self, stream, ev, owner) -> None:
        self.check_active()
        if owner is not None and owner is not self:
            raise self.fail(E.ACL_ERROR_STREAM_CAPTURE_CONFLICT, "the event was recorded in another capture")
        if not self.wait_in_graph(stream, ev) and (ev.issued or ev.opened is not None):
            raise self.fail(E.ACL_ERROR_RT_CAPTURE_DEPENDENCY, f"{_name(stream)} waits for an event whose latest "
                            "record is not part of the capture (record it on a captured stream)")
        # never recorded: a wait on it is a no-op, captured or not

    def external_record(self, stream, ev) -> None:
        """aclrtRecordEventWithFlag(EXTERNAL): once per event and graph."""
        self._once(ev)
        self.record_outside(stream, ev)

    def external_wait(self, stream, ev) -> None:
        """aclrtStreamWaitEventWithFlag(EXTERNAL): each replay waits, at this point, for the
        event's latest record made outside the graph (once per event and graph)."""
        self._once(ev)
        self.record(stream, "wait_event_latest", (ev.slot, ev.uid, rt.op_wait_timeout))

    def _once(self, ev) -> None:
        with self.lock:
            if ev.handle in self.external_used:
                raise self.fail(E.ACL_ERROR_RT_PARAM_INVALID, "an event takes one EXTERNAL record or wait per graph")
            self.external_used.add(ev.handle)

    def join(self, stream, ev) -> None:
        """A stream outside the capture waits for an event recorded inside it: it joins."""
        with self.lock:
            self.check_active()
            if stream.is_default:
                raise self.fail(E.ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT,
                                "the default stream cannot take part in a capture")
            marker = self.marker_of(ev)
            self.add_lane(stream)
            try:
                self.record(stream, WAIT, (marker,))
            except AclError:
                del self.lanes[stream]
                raise
            stream.recorder = self

    # -- helper streams of a library (a communicator's side streams)
    def fork(self, origin, stream, role: str) -> None:
        """``stream`` joins the capture after what ``origin`` recorded so far: its tasks are
        recorded into its lane (as a wait on an event recorded inside the capture would do)
        until ``leave``; ``role`` says what it is in dumps."""
        with self.lock:
            self.add_lane(stream).role = role
            stream.recorder = self
            self.order(origin, stream)

    def order(self, src, dst) -> None:
        """``dst``'s next recorded task runs after ``src``'s recorded so far (both captured)."""
        self.await_mark(dst, self.mark(src))

    def mark(self, stream) -> int:
        """A place in ``stream``'s lane that another lane may wait for (``await_mark``)."""
        marker = next(_markers)
        self.record(stream, RECORD, (marker,))
        return marker

    def await_mark(self, stream, marker: int) -> None:
        self.record(stream, WAIT, (marker,))

    def leave(self, stream, origin) -> None:
        """``stream``'s recorded work joins back into ``origin``; from now on it runs its tasks
        again (its lane stays in the capture, and a later ``fork`` extends it)."""
        with self.lock:
            self.order(stream, origin)
            stream.recorder = None

    # -- end
    def unjoined(self) -> list[Lane]:
        """Lanes whose last task does not lead back to the origin stream through markers."""
        lanes = list(self.lanes.values())
        waits = defaultdict(list)                   # marker -> [(lane, index) of its waits]
        for li, lane in enumerate(lanes):
            for ti, (op, args) in enumerate(lane.tasks):
                if op == WAIT:
                    waits[args[0]].append((li, ti))
        # reach[l]: the last task of lane l from which the origin's end is reachable
        reach = [-1] * len(lanes)
        reach[0] = len(lanes[0].tasks) - 1
        changed = True
        while changed:
            changed = False
            for li, lane in enumerate(lanes):
                for ti in range(len(lane.tasks) - 1, reach[li], -1):
                    op, args = lane.tasks[ti]
                    if op == RECORD and any(tj <= reach[lj] for lj, tj in waits.get(args[0], ())):
                        reach[li], changed = ti, True
                        break
        return [lane for li, lane in enumerate(lanes) if reach[li] < len(lane.tasks) - 1]


class Update(Recorder):
    """aclmdlRICaptureTaskUpdateBegin .. End on a stream: the group's replacement tasks."""

    kind = "update"

    def __init__(self, group, stream) -> None:
        super().__init__()
        self.group = group
        self.lane = self.add_lane(stream)

    def admit(self, lane: Lane, op: str) -> None:
        if op not in GROUP_OPS:
            raise AclError(E.ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT, f"a task group is updated with kernel launches "
                           f"only, not {op!r}")
        if len(lane.tasks) >= len(self.group.ops):
            raise AclError(E.ACL_ERROR_RT_INTERNAL_ERROR, f"task group update error: the group holds "
                           f"{len(self.group.ops)} task(s); this is launch {len(lane.tasks) + 1}")

    def wait_event(self, stream, ev, owner) -> None:
        self.admit(self.lane, "wait_event")


# ---------------------------------------------------------------------------- hooks
def persist(stream) -> None:
    """A new ACL_STREAM_PERSISTENT stream: its tasks are stored until a model binds it."""
    stream.recorder = Build()
    stream.recorder.add_lane(stream)


def live() -> list[Capture]:
    """The active captures; one whose origin stream was destroyed (reset_device during a
    capture) is over."""
    captures = list(held.captures)
    for capture in captures:
        if capture.origin.destroyed:
            capture.terminate()
    return [c for c in captures if not c.origin.destroyed]


def capturing(stream) -> Capture | None:
    rec = stream.recorder
    return rec if isinstance(rec, Capture) else None


def owner_of(ev) -> Capture | None:
    """The active capture holding the event's latest record."""
    for capture in live():
        if capture.marker_of(ev) is not None:
            return capture
    return None


def record_event(stream, ev) -> None:
    """record_event on a stream with a recorder."""
    stream.recorder.record_event(stream, ev)


def wait_event(stream, ev) -> bool:
    """stream_wait_event that involves a graph; False when it is an ordinary wait."""
    owner = owner_of(ev) if held.captures else None
    rec = stream.recorder
    if rec is None:
        if owner is None:
            return False
        owner.join(stream, ev)
    else:
        rec.wait_event(stream, ev, owner)
    return True


def check_default(stream) -> None:
    """Work on a default stream while a stream of its context captures: 107031."""
    captures = [c for c in live() if c.context is stream.context]
    for capture in captures:
        capture.invalidate("the default stream was used during the capture")
    if captures:
        raise AclError(E.ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT, "the default stream cannot be used while a stream "
                       "of its context is capturing (use an explicit stream)")


def check_sync(streams: list) -> None:
    """Synchronising (or querying) a capturing stream, or a device with one: 107027."""
    for stream in streams:
        capture = capturing(stream)
        if capture is not None:
            raise capture.fail(E.ACL_ERROR_RT_STREAM_CAPTURED, f"{_name(stream)} is capturing: it cannot be "
                               "synchronised or queried until aclmdlRICaptureEnd")


def check_destroy(stream) -> None:
    if capturing(stream) is not None:
        raise AclError(E.ACL_ERROR_RT_STREAM_CAPTURED, f"{_name(stream)} is capturing and cannot be destroyed")


def check_event(ev) -> None:
    """Synchronising, querying or timing an event recorded in an active capture: 107028."""
    if held.captures:
        capture = owner_of(ev)
        if capture is not None:
            raise capture.fail(E.ACL_ERROR_RT_EVENT_CAPTURED, "the event is part of an active capture: it cannot "
                               "be synchronised, queried or timed until aclmdlRICaptureEnd")


def _forbidding() -> list[Capture]:
    """Captures that forbid this thread's unsafe calls (CUDA's capture-mode rules):
    its own non-RELAXED captures, and -- unless the thread itself is THREAD_LOCAL or
    RELAXED -- GLOBAL captures of other threads."""
    if not held.captures:
        return []
    mode = rt.thread.capture_mode
    if mode == RELAXED:
        return []
    me = hooks.thread_id()
    return [c for c in live() if c.mode != RELAXED
            and (c.thread == me or (c.mode == GLOBAL and mode == GLOBAL))]


def _mode_text(captures: list[Capture]) -> str:
    c = captures[0]
    return (f"a {MODE_NAMES[c.mode]} capture on {_name(c.origin)} is active and this thread's capture mode is "
            f"{MODE_NAMES[rt.thread.capture_mode]}; switch the thread to ACL_MODEL_RI_CAPTURE_MODE_RELAXED "
            f"with ri_capture_thread_exchange_mode if the call cannot disturb the capture")


def check_unsafe(what: str) -> None:
    """memcpy / memset / memcpy2d (synchronous) under the capture modes: 107030."""
    captures = _forbidding()
    if captures:
        for capture in captures:
            capture.invalidate(f"{what} was called in a forbidden capture mode")
        raise AclError(E.ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT, f"{what}: {_mode_text(captures)}")


def check_pageable(stream, what: str) -> None:
    """An async copy with pageable host memory (it runs synchronously): on a recording
    stream it cannot be stored (107000; memcpy_async stages an H2D one of a built model
    first: Build.stage); elsewhere the capture modes apply (107041)."""
    rec = stream.recorder
    if isinstance(rec, Capture):
        raise rec.fail(E.ACL_ERROR_RT_PARAM_INVALID, f"{what} on a capturing stream needs pinned host memory "
                       "(malloc_host), not pageable memory")
    if rec is not None:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{what}: a stored task needs pinned host memory "
                       "(malloc_host), not pageable memory")
    captures = _forbidding()
    if captures:
        for capture in captures:
            capture.invalidate(f"{what} with pageable memory ran synchronously in a forbidden capture mode")
        raise AclError(E.ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC, f"{what} with pageable host memory would run "
                       f"synchronously: {_mode_text(captures)}")
