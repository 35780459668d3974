"""Streams: creation, submission, synchronisation, query, attributes.

Submission goes through ``submit`` (the device runs the task in stream order);
synchronisation first looks at the device's control page, watches it briefly, then sleeps
on the stream's stream_done word there (a futex the device wakes when it advances it); it
asks the device (parking this thread on its socket) only for a failure to report, or where
no futex is available.
"""

from __future__ import annotations

import os
import threading
import time
import traceback

from mdev import constants as C
from mdev import errors as E
from mdev.errors import AclError
from mdev import status as S
from mdev.memory import futex
from mdev.runtime.boundary import api
from mdev.runtime import hooks
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.core import STREAM_HANDLES, Context, Stream
from mdev.runtime import capture as _graph
from mdev.runtime import trace as _trace
from mdev.runtime.validate import as_int, timeout_ms


# this module's part of the runtime's state, made afresh with it (finalize, fork)
held = rt.family(
    stream_state_callbacks=dict,  # aclrtRegStreamStateCallback: name -> (fn, args)
    aborting_devices=set,         # aclrtDeviceTaskAbort in progress
    launched=dict,                # stream -> seq of its last kernel launch no synchronous copy waited for
)

PRIORITY_GREATEST, PRIORITY_LEAST = 0, 7
# streams whose tasks never run directly: sync and query treat them as drained
NON_EXECUTING = C.ACL_STREAM_PERSISTENT | C.ACL_STREAM_DEVICE_USE_ONLY | C.ACL_STREAM_CPU_SCHEDULE


def new_stream(ctx: Context, priority: int = 0, flags: int = 0, default: bool = False) -> Stream:
    """Made in a slot of this process's lease without a round trip: the device learns of it
    from the message ahead of its first task (a lease runs out: one request for more)."""
    link = rt.link(ctx.device)
    slot, gen = link.stream_slots.take(link)
    link.post(("sc", slot, ctx.handle, priority, flags))
    if ctx.stop_on_failure:
        # a stopped context's new stream refuses work at once: have the device mark it now
        link.request("lease", "stream", 0, [])
    stream = Stream(rt.new_handle(STREAM_HANDLES), ctx.device, slot, S.stream_id(slot, gen), ctx, priority, flags,
                    gen=gen)
    with rt.lock:
        rt.streams[stream.handle] = stream
        if not default:
            ctx.streams.add(stream)
    if held.stream_state_callbacks:
        notify_state(stream, C.ACL_RT_STREAM_STATE_CREATE_POST)
    return stream


def notify_state(stream: Stream, state: int) -> None:
    """aclrtRegStreamStateCallback: every registered callback learns of a stream created
    (after) or destroyed (before) -- default streams included; one that raises does not
    keep the others from running."""
    for callback, args in list(held.stream_state_callbacks.values()):
        try:
            callback(stream.handle, state, args)
        except Exception:
            traceback.print_exc()


def submit(stream: Stream, op: str, *args) -> int:
    """Queue a task; a stopped stop-on-failure context refuses it with its failure code."""
    if stream.recorder is not None:     # persistent or capturing stream: stored, not run
        return stream.recorder.record(stream, op, args)
    if _graph.held.captures and stream.is_default:
        _graph.check_default(stream)
    link = rt.link(stream.device)
    if stream.context.stop_on_failure:
        code = int(link.control.stream_err[stream.slot])
        if code:
            raise AclError(code, f"the context of stream {stream.handle:#x} stopped after a task failed")
    if _trace.host_on:
        _trace.before_submit(stream)
    if hooks.checker is not None:
        seq = hooks.checker.submit(stream, op, args, link.submit)
    else:
        seq = link.submit(stream, op, *args)
    if not stream.is_default:
        rt.thread.last_task = seq
    return seq


def wait(streams: list[Stream], timeout: int = -1, consume: bool = True) -> None:
    """Block until every stream has run what was submitted to it; raise its first task failure."""
    if _graph.held.captures:
        _graph.check_sync(streams)
    wait_targets([(s, s.seq) for s in streams], timeout, consume)


def wait_for(stream: Stream, seq: int, timeout: int = -1) -> None:
    """Block until ``stream`` has run its task ``seq`` (an event's record); failures are reported,
    not consumed: the stream's own synchronisation still sees them."""
    wait_targets([(stream, seq)], timeout, consume=False)


SPIN_S = 0.0002           # a sleep's wake-up costs 20-70 us on this kind of VM: spin past it
SLEEP_SLICE_S = 0.05      # a sleeper looks at its device's health this often


def _briefly(condition) -> bool:
    """Watch the control page a little before sleeping: short tasks finish within
    microseconds, and a look costs far less than a wake-up.  Each look yields the CPU, so
    on a busy machine the spin does not take the CPU its device needs."""
    deadline = time.perf_counter() + SPIN_S
    while time.perf_counter() < deadline:
        if condition():
            return True
        os.sched_yield()   # time.sleep(0) may oversleep by the timer slack (~50 us)
    return False


def is_done(stream: Stream, seq: int) -> bool:
    link = rt.link(stream.device)
    done = link.control.stream_done
    if int(done[stream.slot]) >= seq:
        return True
    link.flush()        # a task still gathered in this process would never be done
    return int(done[stream.slot]) >= seq


def wait_targets(targets: list[tuple[Stream, int]], timeout: int = -1, consume: bool = True) -> None:
    try:
        if hooks.checker is not None:
            with hooks.checker.syncing(targets):
                _wait_targets(targets, timeout, consume)
        else:
            _wait_targets(targets, timeout, consume)
    except AclError as exc:
        if exc.code not in _NOT_REACHED:
            _trace.synced(targets)      # a task failed, but the streams got there
        raise
    _trace.synced(targets)


def _reached(stream: Stream, seq: int) -> bool:
    """One executing stream already got to ``seq`` without a failure: the general path below
    in short (a synchronisation of an idle stream, a destroy's drain)."""
    if stream.destroyed or stream.flags & NON_EXECUTING:
        return False
    link = rt.link(stream.device)
    control = link.control
    link.check_alive()         # a lost device fails every sync, even of idle streams
    if int(control.stream_done[stream.slot]) < seq or control.stream_err[stream.slot]:
        return False
    link.wait_received(int(control.stream_msgs[stream.slot]))
    link.end_burst()           # as the general path's flush does (see there)
    return True


# failures of a synchronisation that did not see its streams get there
_NOT_REACHED = (E.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, E.ACL_ERROR_RT_SOCKET_CLOSE)


def _wait_targets(targets: list[tuple[Stream, int]], timeout: int, consume: bool) -> None:
    if len(targets) == 1 and _reached(*targets[0]):
        return
    by_device: dict[int, list[tuple[Stream, int]]] = {}
    for stream, seq in targets:
        if stream.destroyed:
            continue
        if stream.flags & NON_EXECUTING:
            # nothing to wait for, but a failure (a stopped stream) is still reported
            control = rt.link(stream.device).control
            if not control.stream_err[stream.slot]:
                continue
            seq = int(control.stream_done[stream.slot])
        by_device.setdefault(stream.device, []).append((stream, seq))
    for device, group in by_device.items():
        link = rt.link(device)
        control = link.control
        done, err = control.stream_done, control.stream_err

        def finished() -> bool:
            return all(int(done[s.slot]) >= seq and not err[s.slot] for s, seq in group)

        link.check_alive()         # a lost device fails every sync, even of idle streams
        # a task still gathered in this process would never be done; and the flush ends the
        # burst: the program waited for the device, so its next task goes out at once, not
        # gathered for a flusher thread that gets the interpreter only when this one lets go
        link.flush()
        if not (finished() or _briefly(finished)) and futex.AVAILABLE:
            _sleep(link, group, None if timeout < 0 else time.monotonic() + timeout / 1000.0, timeout)
        # a stream destroyed meanwhile (by another thread) was drained first; its slot's
        # words are cleared, or already a successor's, and say nothing of it any more
        group = [(s, seq) for s, seq in group if not s.destroyed]
        if not group:
            continue
        if finished():
            link.wait_received(max(int(control.stream_msgs[s.slot]) for s, _ in group))
            continue
        # a failure to report (the device's reply carries it, and consumes it), or no futex: ask the device
        try:
            code, message, sent = link.request("wait", [(s.slot, seq, s.stream_id) for s, seq in group], consume,
                                               timeout=None if timeout < 0 else timeout / 1000.0)
        except TimeoutError:
            raise AclError(E.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, f"synchronisation timed out after {timeout} ms") from None
        link.wait_received(sent)   # prints and exception callbacks of the awaited tasks are done
        if code:
            raise AclError(code, message or E.describe(code))


# A synchronous copy or memset waits for no stream (as documented), nor does a free, an IPC
# close or an unmap, yet on an NPU each comes after a kernel launched just before it: the
# launch is on its cores within microseconds and a short kernel done before the call's own way
# through the driver is (5_d2d_sync_memory_copy copies what its WriteDo wrote without a
# synchronisation between; 10_ipc_memory_withpid's importer closes the memory its ReadDo
# reads right after launching it).  mdev's launch is a process hop away and could lose that
# race, so the call lets such launches end first -- but waits at most LAUNCH_GRACE_MS for a
# stream's launches, and only once: a longer kernel is overtaken (and a task still queued on
# freed memory fails, spec rule 15).
LAUNCH_GRACE_MS = 500


def launched(stream: Stream, seq: int) -> None:
    """A kernel launch was submitted to ``stream`` as its task ``seq``."""
    held.launched[stream] = seq


def after_launches(devices: set[int]) -> None:
    """Let the kernel launches this process submitted to ``devices`` end before a synchronous
    copy or memset there, or memory there leaves this process, for LAUNCH_GRACE_MS at most
    (see above)."""
    launched = held.launched
    if not launched:
        return
    deadline = time.monotonic() + LAUNCH_GRACE_MS / 1000.0
    for stream, seq in list(launched.items()):
        if stream.device not in devices:
            continue
        left = int((deadline - time.monotonic()) * 1000)
        if not stream.destroyed and left > 0 and not _reached(stream, seq):
            try:
                _wait_targets([(stream, seq)], left, consume=False)
            except AclError:
                pass        # a failure stays for its stream's synchronisation; a timeout overtakes it
        if launched.get(stream) == seq:
            launched.pop(stream, None)


_sleepers_lock = threading.Lock()
_sleepers: dict[tuple[int, int], list[int]] = {}    # (device, slot) -> the seqs this process's threads asleep on it wait for


def _count_sleeper(device: int, slot: int, control, seq: int, joins: bool) -> None:
    """Publish this process's count of threads asleep on the slot and the lowest seq they wait
    for (the device wakes them when the stream gets there, not at every task before).
    Stored, not added to the page's words: the device clears them when it frees the slot,
    and a sleeper of the old stream leaving after that must not drive them below the new ones."""
    with _sleepers_lock:
        seqs = _sleepers.setdefault((device, slot), [])
        if joins:
            seqs.append(seq)
        else:
            seqs.remove(seq)
        if seqs:
            control.stream_wake[slot] = min(seqs)       # before the count: a device seeing the count sees it
        else:
            del _sleepers[(device, slot)]
        control.stream_sleepers[slot] = len(seqs)


def _sleep(link, group: list[tuple[Stream, int]], deadline: float | None, timeout: int) -> None:
    """Sleep on each stream's stream_done word (a futex the device wakes when it advances it)
    until the stream has run its task ``seq`` -- or is destroyed; a lost device raises."""
    control = link.control
    done = control.stream_done
    for stream, seq in group:
        slot = stream.slot
        _count_sleeper(stream.device, slot, control, seq, True)   # before looking: the device sees it, or we see its work
        try:
            word = control.done_word(slot)
            while not stream.destroyed:
                seen = int(done[slot])
                if seen >= seq:
                    break
                wait = SLEEP_SLICE_S
                if deadline is not None:
                    wait = min(wait, deadline - time.monotonic())
                    if wait <= 0:
                        raise AclError(E.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
                                       f"synchronisation timed out after {timeout} ms")
                futex.wait(word, seen, wait)
                link.check_alive()
                if link.dead():
                    raise link.lost("the device process is gone")
        finally:
            _count_sleeper(stream.device, slot, control, seq, False)


def is_idle(stream: Stream) -> bool:
    return bool(stream.flags & NON_EXECUTING) or is_done(stream, stream.seq)


def context_streams(ctx: Context) -> list[Stream]:
    return [s for s in [ctx.default_stream, *ctx.streams] if s is not None]


def release(stream: Stream, drain: bool) -> None:
    """Destroy the stream on its device.  Drained, it has nothing left to run and the device
    learns of it in order with this process's tasks, unanswered; otherwise (a forced
    destroy, or a drain that failed) the device stops its work before answering."""
    if held.stream_state_callbacks:
        notify_state(stream, C.ACL_RT_STREAM_STATE_DESTROY_PRE)
    drained = drain
    if drain:
        try:
            if hooks.checker is not None or _graph.held.captures or not _reached(stream, stream.seq):
                wait([stream], consume=False)
            elif _trace.host_on:
                # wait()'s own short path, without its layers (about a tenth of a
                # create_stream + destroy_stream pair's host time in its profile)
                _trace.synced([(stream, stream.seq)])
        except AclError:
            # destroying a stream does not report its task failures (it got there all the same)
            try:
                drained = is_done(stream, stream.seq)
            except AclError:
                drained = False
    stream.destroyed = True
    held.launched.pop(stream, None)
    if isinstance(stream.recorder, _graph.Build) and stream.recorder.model is None:
        stream.recorder.release_staged()     # a lone persistent stream's copies from pageable memory
    if hooks.checker is not None:
        hooks.checker.stream_dropped(stream)
    with rt.lock:
        rt.streams.pop(stream.handle, None)
        stream.context.streams.discard(stream)
    try:
        link = rt.link(stream.device)
        if drained:
            link.post(("sd", stream.slot))
        else:
            link.request("destroy_stream", stream.slot)
    except AclError:
        return  # the device is gone; nothing left to destroy there, its slots with it
    link.stream_slots.give(link, stream.slot, stream.gen)


# ---------------------------------------------------------------------------- API
@api(1)
def create_stream() -> int:
    return new_stream(rt.current_context()).handle


@api(1)
def create_stream_with_config(priority: int, flag: int) -> int:
    priority = min(max(as_int(priority, "priority"), PRIORITY_GREATEST), PRIORITY_LEAST)
    flag = as_int(flag, "flag")
    if flag & C.ACL_STREAM_PERSISTENT and flag & (C.ACL_STREAM_DEVICE_USE_ONLY | C.ACL_STREAM_CPU_SCHEDULE):
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "ACL_STREAM_PERSISTENT cannot be combined with "
                       "ACL_STREAM_DEVICE_USE_ONLY or ACL_STREAM_CPU_SCHEDULE")
    stream = new_stream(rt.current_context(), priority, flag)
    if flag & C.ACL_STREAM_PERSISTENT:
        _graph.persist(stream)          # its tasks are stored for a model run instance
    return stream.handle


def _explicit(stream_handle) -> Stream:
    if stream_handle is None or stream_handle == 0:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "the default stream cannot be destroyed; it goes with reset_device")
    stream = rt.stream_in_context(stream_handle)
    if stream.recorder is not None:        # only a capturing stream can be refused here
        _graph.check_destroy(stream)
    return stream


@api()
def destroy_stream(stream) -> None:
    release(_explicit(stream), drain=True)


@api()
def destroy_stream_force(stream) -> None:
    end(_explicit(stream))


# how long a forced destroy waits for the stream's head task to end; the device stops a
# kernel there after mdev.board.stream.END_GRACE_S of running and interrupts a wait, so this
# only bounds a head that cannot start (its cores held by another stream's hung kernel)
END_WAIT_MS = 3000


def end(stream: Stream) -> None:
    """Destroy ``stream`` without waiting for its work: what is queued behind its head task
    is dropped and the head ends (mdev.board.stream: a kernel there is stopped after a short
    grace), as on an NPU, where the head is on its core before the destroy takes effect --
    what a kernel launched just before prints reaches stdout before this returns."""
    if not _reached(stream, stream.seq):
        link = rt.link(stream.device)
        link.request("end_stream", stream.slot, stream.seq)
        try:
            _wait_targets([(stream, stream.seq)], END_WAIT_MS, consume=True)
        except AclError:
            pass     # a failure of its work, the wait's bound, a lost device: it is destroyed all the same
    release(stream, drain=False)


@api()
def synchronize_stream(stream) -> None:
    wait([rt.stream(stream)])


@api()
def synchronize_stream_with_timeout(stream, timeout: int) -> None:
    wait([rt.stream(stream)], timeout_ms(timeout))


@api(1)
def stream_query(stream) -> int:
    s = rt.stream(stream)
    if _graph.held.captures:
        _graph.check_sync([s])
    rt.link(s.device).check_alive(exact=True)        # a dead device's page shows its last progress
    if not is_idle(s):
        return C.ACL_STREAM_STATUS_NOT_READY
    if hooks.checker is not None:
        hooks.checker.synced([(s, s.seq)])      # a stream found idle orders the host after it
    _trace.synced([(s, s.seq)])
    return C.ACL_STREAM_STATUS_COMPLETE


@api(1)
def stream_get_id(stream) -> int:
    return rt.stream(stream).stream_id


@api(1)
def stream_get_priority(stream) -> int:
    return rt.stream(stream).priority


@api(1)
def stream_get_flags(stream) -> int:
    return rt.stream(stream).flags


@api(2)
def device_get_stream_priority_range() -> tuple[int, int]:
    return PRIORITY_LEAST, PRIORITY_GREATEST


_ATTRIBUTE_NAMES = {
    C.ACL_STREAM_ATTR_FAILURE_MODE: "failureMode",
    C.ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK: "overflowSwitch",
    C.ACL_STREAM_ATTR_USER_CUSTOM_TAG: "userCustomTag",
    C.ACL_STREAM_ATTR_CACHE_OP_INFO: "cacheOpInfoSwitch",
    C.ACL_STREAM_ATTR_PRIORITY: "streamPriority",
}


def _attribute_value(attr: int, value) -> int:
    """pyACL passes the aclrtStreamAttrValue union as an int or a dict with its field name."""
    if isinstance(value, dict):
        value = value.get(_ATTRIBUTE_NAMES[attr], value.get("value"))
    return as_int(value, "value")


@api()
def set_stream_attribute(stream, attr: int, value) -> None:
    attr = as_int(attr, "stmAttrType")
    if attr not in _ATTRIBUTE_NAMES:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"unknown stream attribute {attr}")
    value = _attribute_value(attr, value)
    if attr == C.ACL_STREAM_ATTR_FAILURE_MODE:
        return set_stream_failure_mode(stream, value)
    if attr == C.ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK:
        return set_stream_overflow_switch(stream, value)
    s = rt.stream_in_context(stream)
    if attr == C.ACL_STREAM_ATTR_USER_CUSTOM_TAG and _graph.capturing(s) is not None:
        raise AclError(E.ACL_ERROR_RT_STREAM_CAPTURED, "the custom tag of a capturing stream cannot change")
    if attr == C.ACL_STREAM_ATTR_PRIORITY:
        if not PRIORITY_GREATEST <= value <= PRIORITY_LEAST:
            raise AclError(E.ACL_ERROR_INVALID_PARAM, f"priority must be in [0, 7], got {value}")
        rt.link(s.device).request("set_priority", s.slot, value)
        s.priority = value
    elif not 0 <= value < 1 << 32:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"attribute value {value} is not a uint32")
    s.attributes[attr] = value


@api(1)
def get_stream_attribute(stream, attr: int) -> int:
    attr = as_int(attr, "stmAttrType")
    s = rt.stream(stream)
    if attr == C.ACL_STREAM_ATTR_FAILURE_MODE:
        return s.failure_mode
    if attr == C.ACL_STREAM_ATTR_PRIORITY:
        return s.priority
    if attr not in _ATTRIBUTE_NAMES:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"unknown stream attribute {attr}")
    return s.attributes.get(attr, 0)


@api()
def set_stream_overflow_switch(stream, flag: int) -> None:
    """Floating-point overflow detection for the stream's later kernels (0 off, 1 on): a
    kernel that overflows sets its process's overflow status on the device."""
    s = rt.stream_in_context(stream)
    flag = as_int(flag, "flag")
    if flag not in (0, 1):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"the overflow switch is 0 or 1, got {flag}")
    if _graph.capturing(s) is not None:
        raise AclError(E.ACL_ERROR_RT_STREAM_CAPTURED, "the overflow switch of a capturing stream cannot change")
    rt.link(s.device).request("set_overflow_switch", s.slot, flag)
    s.attributes[C.ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK] = flag


@api(1)
def get_stream_overflow_switch(stream) -> int:
    return rt.stream(stream).attributes.get(C.ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK, 0)


@api()
def set_stream_failure_mode(stream, mode: int) -> None:
    s = rt.stream_in_context(stream)
    mode = as_int(mode, "mode")
    if mode not in (C.ACL_CONTINUE_ON_FAILURE, C.ACL_STOP_ON_FAILURE):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"failure mode must be 0 or 1, got {mode}")
    if s.attributes.get("failure_mode_set") and s.failure_mode != mode:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "the failure mode of a stream can be set only once")
    rt.link(s.device).request("set_failure_mode", s.slot, mode)
    s.failure_mode = mode
    s.attributes["failure_mode_set"] = True
    if mode == C.ACL_STOP_ON_FAILURE:
        s.context.stop_on_failure = True   # one such stream puts its whole context in stop mode


@api()
def synchronize_device() -> None:
    wait(context_streams(rt.current_context()))


@api()
def synchronize_device_with_timeout(timeout: int) -> None:
    wait(context_streams(rt.current_context()), timeout_ms(timeout))


def _unbound(stream, what: str) -> Stream:
    """A stream a stop or abort may act on: not one bound to a model run instance."""
    s = rt.stream(stream)
    if isinstance(s.recorder, _graph.Build) and s.recorder.model is not None:
        raise AclError(E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, f"{what}: stream {s.stream_id} is bound to a model")
    return s


@api()
def stream_abort(stream) -> None:
    """Queued tasks are dropped, the running one is stopped (a wait interrupted, a kernel
    cut off memory): the next synchronisation reports ACL_ERROR_RT_STREAM_ABORT for it.
    Not for a DEVICE_USE_ONLY stream: that one is stopped (stream_stop)."""
    s = _unbound(stream, "stream_abort")
    if s.flags & C.ACL_STREAM_DEVICE_USE_ONLY:
        raise AclError(E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "stream_abort: an ACL_STREAM_DEVICE_USE_ONLY stream "
                       "cannot be aborted (stop it with stream_stop)")
    rt.link(s.device).request("abort", s.slot, s.seq)
    if hooks.checker is not None:
        hooks.checker.stream_dropped(s)


@api()
def stream_stop(stream) -> None:
    """aclrtStreamStop: the running task is stopped, queued ones stay; the stream's next
    synchronisation returns ACL_ERROR_RT_INTERNAL_ERROR (507000).  Only for a stream made
    with ACL_STREAM_DEVICE_USE_ONLY, as on the A2/A3 parts mdev emulates (the runtime
    answers any other with ACL_ERROR_RT_FEATURE_NOT_SUPPORT); not for the default stream
    or a stream bound to a model."""
    if stream is None or stream == 0:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "the default stream cannot be stopped")
    s = _unbound(stream, "stream_stop")
    if not s.flags & C.ACL_STREAM_DEVICE_USE_ONLY:
        raise AclError(E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, f"stream_stop: stream {s.stream_id} was not created "
                       "with ACL_STREAM_DEVICE_USE_ONLY")
    rt.link(s.device).request("stop", s.slot)


@api()
def reg_stream_state_callback(reg_name: str, callback, args=None) -> None:
    """Register ``callback(stream, state, args)`` under a unique name; None unregisters."""
    if not isinstance(reg_name, str):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "regName must be a str")
    if not reg_name:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "regName must not be empty")
    with rt.lock:
        if callback is None:
            held.stream_state_callbacks.pop(reg_name, None)
            return
        if not callable(callback):
            raise AclError(E.ACL_ERROR_INVALID_PARAM, "callback must be callable or None")
        if reg_name in held.stream_state_callbacks:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"a stream state callback named {reg_name!r} is "
                           "already registered")
        held.stream_state_callbacks[reg_name] = (callback, args)


@api(1)
def get_stream_available_num() -> int:
    """Streams this process can still make on the current device: the device's limit less
    the slots lent to processes (each keeps up to 64 of them unused, see
    board_client.SlotLease), plus this process's own unused ones."""
    link = rt.link(rt.current_context().device)
    return S.STREAM_LIMIT - int(link.control.header[S.H_STREAMS_LENT]) + link.stream_slots.unused()


@api(1)
def get_thread_last_task_id() -> int:
    """The id of the last task the calling thread submitted to an explicit stream (the id
    exception info reports for a task: its number on its stream)."""
    return rt.thread.last_task


MAX_ABORT_MS = 36 * 60 * 1000


@api()
def device_task_abort(device_id: int, timeout: int) -> None:
    """aclrtDeviceTaskAbort: stop the running tasks of this process's streams on a device and
    drop their queued ones; wait for that (0: as long as it takes, else at most ``timeout``
    ms, up to 36 minutes).  Their synchronisations report the abort."""
    device = rt.check_device(device_id)
    timeout = as_int(timeout, "timeout")
    if not 0 <= timeout <= MAX_ABORT_MS:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"timeout must be 0 or up to {MAX_ABORT_MS} ms, got {timeout}")
    with rt.lock:
        if device in held.aborting_devices:
            raise AclError(E.ACL_ERROR_RT_DEVICE_TASK_ABORT, f"a task abort of device {device_id} is in progress")
        held.aborting_devices.add(device)
    try:
        mine = [s for s in list(rt.streams.values()) if s.device == device and not s.destroyed and s.recorder is None]
        link = rt.link(device)
        for s in mine:
            link.request("abort", s.slot, s.seq)
        deadline = None if timeout == 0 else time.monotonic() + timeout / 1000
        while not all(is_done(s, s.seq) for s in mine if not s.destroyed):
            if deadline is not None and time.monotonic() > deadline:
                raise AclError(E.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, f"the tasks of device {device_id} were not "
                               f"stopped within {timeout} ms")
            time.sleep(0.001)
    finally:
        held.aborting_devices.discard(device)
