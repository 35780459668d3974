"""Host callbacks on streams: launch_host_func and the subscribe/report model.

    device stream reaches the callback task --("cb", id)--> the device link's reader thread
        host func  -> runs on the device's host-func thread, or     --+
                      is queued for the thread subscribed to its       |  (process_host_func)
                      stream with subscribe_host_func                  |
        report     -> queued for the thread subscribed to the stream  |  (process_report)
    ("cbdone", id, code) <--------------------------------------------+

A blocking callback holds its stream until "cbdone" arrives; a callback that raises
becomes a task failure of that stream, reported by its next synchronisation.
"""

from __future__ import annotations

import itertools
import queue
import threading
import traceback
from dataclasses import dataclass
from typing import Any, Callable

from mdev import constants as C
from mdev import errors as E
from mdev.errors import AclError
from mdev.runtime.boundary import api
from mdev.runtime import hooks, streams
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.board_client import MESSAGE_HANDLERS
from mdev.runtime.core import Stream
from mdev.runtime.validate import as_int


@dataclass
class Callback:
    id: int
    fn: Callable
    arg: Any
    stream: Stream
    block: bool
    report: bool               # True: run by the subscribed thread in process_report


class CallbackHub:
    """Per-process state of host callbacks (reset with the runtime on finalize)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pending: dict[int, Callback] = {}
        self.ids = itertools.count(1)
        self.host_funcs: dict[int, queue.SimpleQueue] = {}
        self.subscribers: dict[int, int] = {}          # stream handle -> thread id
        self.thread_device: dict[int, int] = {}        # thread id -> device it serves
        self.reports: dict[int, queue.SimpleQueue] = {}
        self.host_func_threads: dict[int, int] = {}     # stream handle -> thread running its host funcs
        self.host_func_queues: dict[int, queue.SimpleQueue] = {}     # thread id -> its host funcs

    def launch(self, stream: Stream, fn: Callable, arg: Any, block: bool, report: bool) -> None:
        if not callable(fn):
            raise AclError(E.ACL_ERROR_INVALID_PARAM, f"callback must be callable, got {type(fn).__name__}")
        cb = Callback(next(self.ids), fn, arg, stream, block, report)
        with self.lock:
            self.pending[cb.id] = cb
        try:
            streams.submit(stream, "host_callback", cb.id, block)
        except AclError:
            with self.lock:
                self.pending.pop(cb.id, None)
            raise

    def ensure_runner(self, link) -> queue.SimpleQueue:
        """The thread that runs this device's host funcs, one after another."""
        with self.lock:
            funcs = self.host_funcs.get(link.index)
            if funcs is None:
                funcs = self.host_funcs[link.index] = queue.SimpleQueue()
                threading.Thread(target=self._run_host_funcs, args=(link, funcs), daemon=True,
                                 name=f"mdev-hostfunc-dev{link.index}").start()
        return funcs

    def dispatch(self, link, cb_id: int) -> None:
        """A device reached a callback task ("cb" message, on the link's reader thread)."""
        with self.lock:
            cb = self.pending.pop(cb_id, None)
            thread = self.subscribers.get(cb.stream.handle) if cb and cb.report else None
            reports = self.reports.get(thread) if thread is not None else None
            runner = self.host_func_threads.get(cb.stream.handle) if cb and not cb.report else None
            own = self.host_func_queues.get(runner) if runner is not None else None
        if cb is None:
            return
        if own is not None:
            own.put(cb)
        elif not cb.report:
            self.ensure_runner(link).put(cb)
        elif reports is not None:
            reports.put(cb)
        else:
            self.finish(link, cb, E.ACL_ERROR_RT_STREAM_NO_CB_REG, "the stream's report thread unsubscribed")

    def _run_host_funcs(self, link, funcs: queue.SimpleQueue) -> None:
        while (cb := funcs.get()) is not None:
            self.run(link, cb)

    def run(self, link, cb: Callback) -> None:
        try:
            cb.fn(cb.arg)
        except Exception as exc:
            traceback.print_exc()
            self.finish(link, cb, E.ACL_ERROR_RT_INTERNAL_ERROR, f"host callback {cb.fn!r} raised {exc!r}")
        else:
            self.finish(link, cb, 0, "")

    def close(self) -> None:
        """Stop the host-func runner threads (the process is detaching)."""
        with self.lock:
            for funcs in self.host_funcs.values():
                funcs.put(None)
            self.host_funcs.clear()

    @staticmethod
    def finish(link, cb: Callback, code: int, message: str) -> None:
        if cb.block:
            try:
                link.send_on_main(("cbdone", cb.id, code, message))
            except AclError:
                pass   # the device is gone; its stream went with it


MESSAGE_HANDLERS["cb"] = lambda link, message: hub().dispatch(link, message[1])


def hub() -> CallbackHub:
    if rt.callbacks is None:
        with rt.lock:
            if rt.callbacks is None:
                rt.callbacks = CallbackHub()
    return rt.callbacks


# ---------------------------------------------------------------------------- API
@api()
def launch_host_func(stream, fn: Callable, args: Any) -> None:
    hub().launch(rt.stream_in_context(stream), fn, args, block=True, report=False)


@api()
def launch_callback(fn: Callable, user_data: Any, block_type: int, stream) -> None:
    st = rt.stream_in_context(stream)
    block_type = as_int(block_type, "blockType")
    if block_type not in (C.ACL_CALLBACK_NO_BLOCK, C.ACL_CALLBACK_BLOCK):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"blockType must be ACL_CALLBACK_NO_BLOCK or _BLOCK, got {block_type}")
    h = hub()
    if st.handle not in h.subscribers:
        raise AclError(E.ACL_ERROR_RT_STREAM_NO_CB_REG,
                       "no thread is subscribed to this stream: call subscribe_report first")
    h.launch(st, fn, user_data, block=block_type == C.ACL_CALLBACK_BLOCK, report=True)


def _subscription(thread_id, stream, names: tuple[str, str]) -> tuple[Stream, int, CallbackHub]:
    """(the stream, the thread id, the hub) of a (un)subscription; ``names``: the parameters'."""
    st = rt.stream(as_int(stream, names[1]) if stream is not None else None)
    return st, as_int(thread_id, names[0]), hub()


@api()
def subscribe_report(thread_id: int, stream) -> None:
    st, thread_id, h = _subscription(thread_id, stream, ("threadId", "stream"))
    with h.lock:
        if st.handle in h.subscribers:
            raise AclError(E.ACL_ERROR_RT_STREAM_SUBSCRIBE, "the stream already has a subscribed thread")
        if h.thread_device.get(thread_id, st.device) != st.device:
            raise AclError(E.ACL_ERROR_RT_THREAD_SUBSCRIBE, "a report thread can serve streams of one device only")
        h.subscribers[st.handle] = thread_id
        h.thread_device[thread_id] = st.device
        h.reports.setdefault(thread_id, queue.SimpleQueue())


@api()
def unsubscribe_report(thread_id: int, stream) -> None:
    st, thread_id, h = _subscription(thread_id, stream, ("threadId", "stream"))
    with h.lock:
        stranded = _end_subscription(h.subscribers, h.reports, st, thread_id)
        if thread_id not in h.subscribers.values():
            h.thread_device.pop(thread_id, None)
    # they fail as a callback reaching an unsubscribed stream does: a blocking one would hold
    # its stream for ever, waiting for a process_report that no longer serves it
    for cb in stranded:
        h.finish(rt.link(st.device), cb, E.ACL_ERROR_RT_STREAM_NO_CB_REG, "the stream's report thread unsubscribed")


@api()
def process_report(timeout: int) -> None:
    """Run one callback for the calling (subscribed) thread; ``timeout`` ms, -1 = forever."""
    h = hub()
    thread = hooks.thread_id()
    _run_next(h, h.reports.get(thread) if thread in h.thread_device else None, timeout, "callback")


def _run_next(h: CallbackHub, callbacks: queue.SimpleQueue | None, timeout: int, what: str) -> None:
    """Run the next of the calling thread's callbacks, waiting ``timeout`` ms (-1: forever)."""
    timeout = as_int(timeout, "timeout")
    if timeout == 0 or timeout < -1:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"timeout must be -1 or > 0 ms, got {timeout}")
    if callbacks is None:
        raise AclError(E.ACL_ERROR_RT_THREAD_SUBSCRIBE, "the calling thread is not subscribed to any stream")
    try:
        cb = callbacks.get(timeout=None if timeout < 0 else timeout / 1000.0)
    except queue.Empty:
        raise AclError(E.ACL_ERROR_RT_REPORT_TIMEOUT, f"no {what} arrived within {timeout} ms") from None
    h.run(rt.link(cb.stream.device), cb)


@api()
def subscribe_host_func(host_func_thread_id: int, exe_stream) -> None:
    """The host funcs of ``exe_stream`` run on thread ``host_func_thread_id`` (in its
    process_host_func calls) instead of the device's host-func thread."""
    st, thread_id, h = _subscription(host_func_thread_id, exe_stream, ("hostFuncThreadId", "exeStream"))
    with h.lock:
        if st.handle in h.host_func_threads:
            raise AclError(E.ACL_ERROR_RT_STREAM_SUBSCRIBE, "the stream already has a host-func thread")
        h.host_func_threads[st.handle] = thread_id
        h.host_func_queues.setdefault(thread_id, queue.SimpleQueue())


@api()
def unsubscribe_host_func(host_func_thread_id: int, exe_stream) -> None:
    st, thread_id, h = _subscription(host_func_thread_id, exe_stream, ("hostFuncThreadId", "exeStream"))
    with h.lock:
        stranded = _end_subscription(h.host_func_threads, h.host_func_queues, st, thread_id)
    # host funcs the thread had not run yet go to the device's own host-func thread, in order,
    # as later ones of the stream will: nobody would run them any more
    if stranded:
        runner = h.ensure_runner(rt.link(st.device))
        for cb in stranded:
            runner.put(cb)


def _end_subscription(threads: dict, queues: dict, st: Stream, thread_id: int) -> list[Callback]:
    """End thread ``thread_id``'s subscription to ``st`` in ``threads`` (stream handle ->
    thread) and take ``st``'s callbacks out of the thread's queue in ``queues`` (the others
    stay, in order); returns them.  Call with the hub's lock held."""
    if threads.get(st.handle) != thread_id:
        raise AclError(E.ACL_ERROR_RT_STREAM_SUBSCRIBE, "the thread is not subscribed to this stream")
    del threads[st.handle]
    callbacks = queues.get(thread_id)
    if callbacks is None:
        return []
    mine, others = [], []
    while True:
        try:
            cb = callbacks.get_nowait()
        except queue.Empty:
            break
        (mine if cb.stream is st else others).append(cb)
    for cb in others:
        callbacks.put(cb)
    return mine


@api()
def process_host_func(timeout: int) -> None:
    """Run one host func of the streams the calling thread subscribed; ``timeout`` ms, -1 = forever."""
    h = hub()
    _run_next(h, h.host_func_queues.get(hooks.thread_id()), timeout, "host func")
