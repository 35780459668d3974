"""Events: record, wait, reset, query, synchronise, timestamps.

An event lives in a slot of its device's control page.  Each record is a stream task that
stamps the time and bumps ``event_done``; the host counts the records it issued.  So:

    query        records executed >= issued                           (a read, no round trip)
    wait         stream task: until records executed >= issued-at-wait (snapshot semantics)
    synchronise  park on the device until the record's stream position is reached

Re-recording replaces the snapshot for later waits; waits already queued keep theirs.

An IPC event (``ipc_get_event_handle`` / ``ipc_open_event_handle``) may be recorded and
waited on by every process that holds it, on any device:

    process A (owner, device 0)            process B (opened it, device 0 or 1)
    record: number from device 0 ----+---- record: number from device 0 (request "event_issue")
    task record_event (event_done)   |     task record_event, or record_remote_event on
                                     |     device 1 (its cell of event_remote on 0's page)
    query / wait / sync: records executed (event_done + event_remote) >= event_issued
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from mdev import constants as C
from mdev import errors as E
from mdev.errors import AclError
from mdev import status as S
from mdev.runtime.boundary import api
from mdev.runtime import hooks
from mdev.runtime import capture as _graph
from mdev.runtime import streams
from mdev.runtime import trace as _trace
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.core import lookup
from mdev.runtime.core import Stream
from mdev.runtime.validate import as_int, timeout_ms


# this module's part of the runtime's state, made afresh with it (finalize, fork)
held = rt.family(
    events=dict,
    dying_events=list,  # destroyed, their slot freed once queued work on them ran
)

EVENT_HANDLES = 0xE_0000_0000
LEGACY, WITH_FLAG, EX = "aclrtCreateEvent", "aclrtCreateEventWithFlag", "aclrtCreateEventExWithFlag"
_FLAGS = (C.ACL_EVENT_SYNC | C.ACL_EVENT_CAPTURE_STREAM_PROGRESS | C.ACL_EVENT_TIME_LINE
          | C.ACL_EVENT_DEVICE_USE_ONLY)
_EX_FLAGS = C.ACL_EVENT_SYNC | C.ACL_EVENT_CAPTURE_STREAM_PROGRESS | C.ACL_EVENT_TIME_LINE


@dataclass(eq=False)
class Event:
    handle: int
    device: int
    slot: int
    uid: int
    flags: int
    api: str
    issued: int = 0                              # records submitted by this process
    last_record: tuple[Stream, int] | None = None  # stream and seq of the latest record
    waits: list = field(default_factory=list)    # (stream, seq) of waits issued on it
    ipc_key: str | None = None                   # set once shared with ipc_get_event_handle
    opened: str | None = None                    # the key, for an event opened from another process
    flag_modes: dict = field(default_factory=dict)   # "record" / "wait" -> the first *_with_flag flag
    destroyed: bool = False
    gen: int = 0                                 # its slot's generation when it was made (event_gen)

    @property
    def timed(self) -> bool:
        return self.api == LEGACY or bool(self.flags & C.ACL_EVENT_TIME_LINE)

    @property
    def can_wait(self) -> bool:
        return self.api == LEGACY or bool(self.flags & (C.ACL_EVENT_SYNC | C.ACL_EVENT_IPC | C.ACL_EVENT_EXTERNAL))


def _create(flags: int, api: str) -> int:
    device = rt.current_context().device
    reap()
    link = rt.link(device)
    slot, gen = link.event_slots.take(link)      # this process's lease: no round trip (see SlotLease)
    link.post(("ec", slot))
    event = Event(rt.new_handle(EVENT_HANDLES), device, slot, S.event_uid(slot, gen), flags, api, gen=gen)
    with rt.lock:
        held.events[event.handle] = event
    return event.handle


def get(handle) -> Event:
    return lookup(held.events, handle, "event handle")


def _same_device(event: Event, stream: Stream, what: str) -> None:
    if event.device != stream.device:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"cannot {what}: the event belongs to device "
                       f"{event.device}, the stream to device {stream.device}")


def shared(event: Event) -> bool:
    """Shared over IPC: other processes may record it too, its device numbers the records."""
    return event.opened is not None or event.ipc_key is not None


def issued(event: Event) -> int:
    """Records issued so far: this process's own count, or the device's count of every
    process's records once the event is shared over IPC."""
    if not shared(event):
        return event.issued
    return int(rt.link(event.device).control.event_issued[event.slot])


def is_complete(event: Event) -> bool:
    target = issued(event)
    if target == 0:
        return True    # never recorded: complete, and waits on it are no-ops
    link = rt.link(event.device)
    link.flush()        # its record may still be gathered in this process
    done = link.control.event_count(event.slot) >= target
    if done and hooks.checker is not None:
        hooks.checker.event_complete(event.device, event.slot, event.uid)
    return done


# ---------------------------------------------------------------------------- API
@api(1)
def create_event() -> int:
    return _create(0, LEGACY)


@api(1)
def create_event_with_flag(flag: int) -> int:
    flag = as_int(flag, "flag")
    if flag == C.ACL_EVENT_EXTERNAL or (flag and not flag & ~_FLAGS):
        return _create(flag, WITH_FLAG)
    raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"invalid event flags {flag:#x}: an OR of TIME_LINE, SYNC, "
                   "CAPTURE_STREAM_PROGRESS, DEVICE_USE_ONLY, or ACL_EVENT_EXTERNAL alone")


@api(1)
def create_event_ex_with_flag(flag: int) -> int:
    flag = as_int(flag, "flag")
    if flag == C.ACL_EVENT_IPC or not flag & ~_EX_FLAGS:
        return _create(flag, EX)
    raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"invalid event flags {flag:#x}: an OR of TIME_LINE, SYNC, "
                   "CAPTURE_STREAM_PROGRESS, or ACL_EVENT_IPC alone")


def _queried(event) -> Event:
    """The event a query or synchronisation names (a captured event cannot be asked)."""
    ev = get(event)
    if _graph.held.captures:
        _graph.check_event(ev)
    return ev


@api()
def destroy_event(event) -> None:
    ev = get(event)
    rt.forget(held.events, ev)
    if ev.ipc_key or ev.opened:
        rt.attach().request("ipc_close", ev.ipc_key or ev.opened)
    if ev.opened is None:
        # documented: destroying does not block, and the event's resources are reclaimed when
        # its queued record and waits have run -- they still record and wait meanwhile
        held.dying_events.append((ev, [*ev.waits, *([ev.last_record] if ev.last_record else [])]))
        reap()


def reap() -> None:
    """Free on the device the slots of destroyed events whose queued records and waits ran."""
    for item in list(held.dying_events):
        ev, pending = item
        try:
            ran = all(s.destroyed or streams.is_done(s, seq) for s, seq in pending)
        except AclError:
            ran = True        # the device is gone (a flush of its gathered tasks failed): nothing will run
        if ran:
            try:
                held.dying_events.remove(item)
            except ValueError:
                continue      # another thread reaping at the same time took it
            try:
                link = rt.link(ev.device)
                link.post(("ed", ev.slot, ev.uid))
            except AclError:
                continue      # the device is gone, and its slots with it
            link.event_slots.give(link, ev.slot, ev.gen)


@api()
def record_event(event, stream) -> None:
    ev = get(event)
    st = rt.stream_in_context(stream)
    if ev.opened is None:
        _same_device(ev, st, "record the event")
    if st.recorder is not None:         # capturing / persistent: a record inside the graph
        return _graph.record_event(st, ev)
    if shared(ev):
        _record_shared(ev, st)
        return
    seq = streams.submit(st, "record_event", ev.slot, ev.uid)
    ev.issued += 1
    ev.last_record = (st, seq)
    rt.link(ev.device).control.event_issued[ev.slot] = ev.issued


def _record_shared(ev: Event, st: Stream) -> None:
    """A record of an IPC event: numbered by its device first, so that a waiter in any
    process that comes after this call waits for it; a stream of another device counts it
    in its own cell of the owner's page."""
    ev.issued = rt.link(ev.device).request("event_issue", ev.slot, ev.uid)
    if st.device == ev.device:
        seq = streams.submit(st, "record_event", ev.slot, ev.uid)
    else:
        seq = streams.submit(st, "record_remote_event", ev.device, ev.slot)
    ev.last_record = (st, seq)


@api()
def reset_event(event, stream) -> None:
    ev = get(event)
    if ev.api == EX:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "events from create_event_ex_with_flag cannot be reset")
    if ev.api == WITH_FLAG and not ev.flags & (C.ACL_EVENT_SYNC | C.ACL_EVENT_EXTERNAL):
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "only events created with ACL_EVENT_SYNC (or "
                       "ACL_EVENT_EXTERNAL) can be reset")
    st = rt.stream_in_context(stream)
    _same_device(ev, st, "reset the event")
    streams.submit(st, "reset_event", ev.slot, ev.uid)


@api()
def stream_wait_event(stream, event) -> None:
    _wait(stream, event, rt.op_wait_timeout)


@api()
def stream_wait_event_with_timeout(stream, event, timeout: int) -> None:
    """aclrtStreamWaitEventWithTimeout: the wait gives up after ``timeout`` seconds (0: never),
    whatever set_op_wait_timeout says; the sync then reports ACL_ERROR_RT_TASK_TIMEOUT."""
    timeout = as_int(timeout, "timeout")
    if timeout < 0:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"timeout must be >= 0 seconds, got {timeout}")
    _wait(stream, event, timeout)


def _wait(stream, event, timeout_s: int) -> None:
    st = rt.stream_in_context(stream)
    ev = get(event)
    if not ev.can_wait:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "only events created with ACL_EVENT_SYNC can be waited on")
    if (st.recorder is not None or _graph.held.captures) and _graph.wait_event(st, ev):
        return    # recorded into a graph, or the stream joined the capture that recorded the event
    target = issued(ev)
    if target == 0:
        return    # never recorded: the wait is a no-op
    if ev.device == st.device:
        seq = streams.submit(st, "wait_event", ev.slot, ev.uid, target, timeout_s)
    else:   # an event of another device (this process's, or an IPC one): the waiting device
        # watches the owner's page; the runtime accepts such waits, and torch_npu's copies
        # between devices rely on them
        seq = streams.submit(st, "wait_remote_event", ev.device, ev.slot, target, timeout_s)
    ev.waits.append((st, seq))
    del ev.waits[:-64]


def _external(ev: Event, stream, flag: str, which: str) -> Stream:
    """An EXTERNAL record / wait: on a capturing stream, of an Ex event made with exactly
    ACL_EVENT_SYNC; the first flag an event is used with (DEFAULT or EXTERNAL) stays."""
    st = rt.stream_in_context(stream)
    if ev.api != EX or ev.flags != C.ACL_EVENT_SYNC:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"an EXTERNAL {which} takes an event of "
                       "create_event_ex_with_flag(ACL_EVENT_SYNC)")
    if _graph.capturing(st) is None:
        raise AclError(E.ACL_ERROR_RT_STREAM_NOT_CAPTURED, f"an EXTERNAL {which} needs a capturing stream")
    _sticky(ev, which, flag)
    return st


def _sticky(ev: Event, which: str, flag: str) -> None:
    used = ev.flag_modes.setdefault(which, flag)
    if used != flag:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"the event's {which}s were {used}: its {which} flag "
                       "cannot change")


@api()
def record_event_with_flag(event, stream, flag: int) -> None:
    """ACL_EVENT_RECORD_DEFAULT: record_event.  ACL_EVENT_RECORD_EXTERNAL: a record inside a
    capture that is a real record on each replay, so work outside the graph can wait for it."""
    flag = as_int(flag, "flag")
    ev = get(event)
    if flag == C.ACL_EVENT_RECORD_DEFAULT:
        _sticky(ev, "record", "DEFAULT")
        return record_event(event, stream)
    if flag != C.ACL_EVENT_RECORD_EXTERNAL:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"flag must be ACL_EVENT_RECORD_DEFAULT or _EXTERNAL, got {flag}")
    st = _external(ev, stream, "EXTERNAL", "record")
    _graph.capturing(st).external_record(st, ev)


@api()
def stream_wait_event_with_flag(stream, event, timeout: int, flag: int) -> None:
    """ACL_EVENT_WAIT_DEFAULT: stream_wait_event_with_timeout.  ACL_EVENT_WAIT_EXTERNAL: a
    wait inside a capture for the event's latest record made outside the graph (timeout 0)."""
    flag, timeout = as_int(flag, "flag"), as_int(timeout, "timeout")
    ev = get(event)
    if flag == C.ACL_EVENT_WAIT_DEFAULT:
        _sticky(ev, "wait", "DEFAULT")
        return stream_wait_event_with_timeout(stream, event, timeout)
    if flag != C.ACL_EVENT_WAIT_EXTERNAL:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"flag must be ACL_EVENT_WAIT_DEFAULT or _EXTERNAL, got {flag}")
    if timeout != 0:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "an EXTERNAL wait takes timeout 0")
    st = _external(ev, stream, "EXTERNAL", "wait")
    _graph.capturing(st).external_wait(st, ev)


@api(1)
def get_event_avail_num() -> int:
    """Events this process can still create on the current device: the device's limit less
    the slots lent to processes, plus this process's own unused ones (see SlotLease)."""
    link = rt.link(rt.current_context().device)
    return S.MAX_EVENTS - int(link.control.header[S.H_EVENTS_LENT]) + link.event_slots.unused()


@api(1)
def query_event(event) -> int:
    ev = _queried(event)
    if ev.api == EX:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "query_event does not take events from "
                       "create_event_ex_with_flag; use query_event_status")
    return C.ACL_EVENT_STATUS_COMPLETE if _found_complete(ev) else C.ACL_EVENT_STATUS_NOT_READY


@api(1)
def query_event_status(event) -> int:
    ev = _queried(event)
    return C.ACL_EVENT_RECORDED_STATUS_COMPLETE if _found_complete(ev) else C.ACL_EVENT_RECORDED_STATUS_NOT_READY


def _found_complete(ev: Event) -> bool:
    """A query: a record found done orders the host after it (modelled time, traces)."""
    rt.link(ev.device).check_alive(exact=True)       # a dead device's page shows its last records
    done = is_complete(ev)
    if done and ev.last_record is not None:
        _trace.synced([ev.last_record])
    return done


@api(1)
def query_event_wait_status(event) -> int:
    ev = _queried(event)
    if ev.api == EX:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "query_event_wait_status does not take Ex events")
    for s, _ in ev.waits:
        if not s.destroyed:
            rt.link(s.device).check_alive(exact=True)
    done = all(s.destroyed or streams.is_done(s, seq) for s, seq in ev.waits)
    return C.ACL_EVENT_WAIT_STATUS_COMPLETE if done else C.ACL_EVENT_WAIT_STATUS_NOT_READY


def _unreported_failure(ev: Event) -> bool:
    """The stream of the event's latest record has a task failure no sync has reported yet."""
    if ev.last_record is None:
        return False
    stream, _ = ev.last_record
    return not stream.destroyed and bool(rt.link(stream.device).control.stream_err[stream.slot])


def _sync(ev: Event, timeout: int) -> None:
    # a completed record returns at once -- unless its stream holds an unreported failure:
    # the device's answer carries it, whether the record ran before this call or after
    rt.link(ev.device).check_alive()
    if is_complete(ev) and not _unreported_failure(ev):
        return
    deadline = None if timeout < 0 else time.monotonic() + timeout / 1000
    if ev.last_record is not None:     # this process's latest record: park on its stream
        stream, seq = ev.last_record
        try:
            streams.wait_for(stream, seq, timeout)
        except AclError as exc:
            if exc.code == E.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT:
                raise AclError(E.ACL_ERROR_RT_EVENT_SYNC_TIMEOUT, f"event not complete after {timeout} ms") from None
            raise
    # records issued elsewhere (another stream, or another process of an IPC event): watch
    # the device's control page until they have run too
    _poll(ev, timeout, deadline)


def _poll(ev: Event, timeout: int, deadline: float | None) -> None:
    pause = 0.0001
    link = rt.link(ev.device)
    while not is_complete(ev):
        link.check_alive()        # the device died: nothing will record it any more
        if deadline is not None and time.monotonic() > deadline:
            raise AclError(E.ACL_ERROR_RT_EVENT_SYNC_TIMEOUT, f"event not complete after {timeout} ms")
        time.sleep(pause)
        pause = min(pause * 2, 0.002)


@api()
def synchronize_event(event) -> None:
    _sync(_queried(event), -1)


@api()
def synchronize_event_with_timeout(event, timeout: int) -> None:
    _sync(_queried(event), timeout_ms(timeout))


def _timestamp_ns(ev: Event) -> int:
    if _graph.held.captures:
        _graph.check_event(ev)
    if not ev.timed or ev.api == EX and ev.flags == C.ACL_EVENT_IPC:
        raise AclError(E.ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID, "the event was not created with ACL_EVENT_TIME_LINE")
    if ev.issued == 0:
        raise AclError(E.ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID, "the event was never recorded")
    rt.link(ev.device).check_alive(exact=True)
    if not is_complete(ev):
        raise AclError(E.ACL_ERROR_RT_EVENT_NOT_COMPLETE, "the event's record has not executed yet")
    return int(rt.link(ev.device).control.event_ts[ev.slot])


@api(1, failed=0.0)
def event_elapsed_time(start, end) -> float:
    t0, t1 = _timestamp_ns(get(start)), _timestamp_ns(get(end))
    if t1 < t0:
        raise AclError(E.ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL, "the end event completed before the start event")
    return (t1 - t0) / 1e6


@api(1)
def event_get_timestamp(event) -> int:
    """Completion time of the event's record, in microseconds since the device booted."""
    return _timestamp_ns(get(event)) // 1000


@api(1)
def get_event_id(event) -> int:
    return get(event).slot


@api()
def set_op_wait_timeout(timeout: int) -> None:
    value = as_int(timeout, "timeout")
    if not 0 <= value < 1 << 32:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"timeout {value} is not a uint32 of seconds")
    rt.op_wait_timeout = value
