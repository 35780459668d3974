"""A stream inside a device process: an ordered queue and the worker thread that drains it.

    dispatcher --push(seq, op, args)--> queue --worker--> device.run_task(op) --> device.complete(seq)

Tasks of one stream run strictly one after another; each stream has its own worker, so a
stream blocked on an event or a long kernel never holds up another stream.  Workers are
started on the first task and leave when the stream is destroyed.

Stopping a stream's running work (abort, stop, destroy, the owner's detach) cuts the
memory mappings of its running kernel launches (mdev.board.windows): from then on they
write nowhere.  Destroying also waits for its running copies, memsets and other
non-kernel tasks, which end within a chunk of work or notice the stream is gone.

Native kernel launches may be handed to their kernel runner ahead of their ends
(mdev.board.native.Ahead, the stream's ``ahead``): the worker sends the next launch while one
runs and completes them as their replies come; any other task waits until they are all done,
so the stream's order holds, and the stream counts as busy while one is out.

A forced destroy (``end``) first drops what is queued behind the stream's head task and
lets that one end: on an NPU it is on its core by the time the destroy takes effect, and a
short kernel is done (the CANN samples print what a kernel launched just before
aclrtDestroyStreamForce read).  A kernel launch there is stopped END_GRACE_S after it
started; a wait gives up at once.

The device (mdev.board.device) makes its streams and imports this module; a stream knows
its device only as the ``TaskRunner`` it runs tasks and completes them with.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field
from typing import Protocol

from mdev import constants as C
from mdev.taskspec import KERNEL_OPS

_UNCOUNTED = frozenset((*KERNEL_OPS, "run_graph"))    # stopped through their launches

END_GRACE_S = 0.5       # how long a forced destroy lets the kernel at the stream's head run


class TaskRunner(Protocol):
    """What a stream asks of its device (mdev.board.device.Device, which imports this module):
    to run a task, and to count tasks done."""

    def run_task(self, stream: "DeviceStream", op: str, args: tuple,
                 inline: bool = False) -> tuple[int, str] | None: ...

    def complete(self, stream: "DeviceStream", seq: int, code: int, message: str, count: int = 1) -> None: ...


@dataclass
class ContextState:
    """A host process's context on the device, as its streams know it."""
    client: int
    ctx: int
    streams: set = field(default_factory=set)
    stopped: int = 0          # failure code once a stop-on-failure context has stopped

    @property
    def stop_on_failure(self) -> bool:
        return any(s.failure_mode == C.ACL_STOP_ON_FAILURE for s in self.streams)


class _LockCondition(threading.Condition):
    """A Condition over a plain Lock, made without Condition.__init__'s three probes for
    RLock methods (each a caught AttributeError: 2.3 us of a stream's 3 us to make); a
    Lock has none of them, so the class's own fallbacks are the ones it would use anyway."""

    def __init__(self, lock: threading.Lock) -> None:   # noqa: super().__init__ deliberately not called
        self._lock = lock
        self.acquire = lock.acquire
        self.release = lock.release
        self._waiters = collections.deque()


class DeviceStream:
    def __init__(self, device: TaskRunner, slot: int, stream_id: int, client: int,
                 context: ContextState, priority: int, flags: int) -> None:
        self.device = device
        self.slot = slot
        self.stream_id = stream_id
        self.client = client
        self.context = context
        self.priority = priority
        self.flags = flags
        self.failure_mode = C.ACL_CONTINUE_ON_FAILURE
        self.overflow_switch = 0     # aclrtSetStreamOverflowSwitch: its kernels report overflows
        self.error_message = ""
        self.received = 0            # highest seq pushed
        self.msgs = 0                # stream_msgs as last written for it (the page's word starts at 0)
        self.deferred_count = 0      # tasks run by the reader and not completed yet (the reader
        self.deferred_seq = 0        # completes them after its batch), the last one's seq
        self.done_lock = threading.Lock()               # stream_done only ever grows
        self.drop_upto = 0           # tasks with seq <= this are discarded (abort)
        self._queue: collections.deque = collections.deque()
        self._lock = threading.Lock()               # the Condition's own: push takes it directly
        self._cond = _LockCondition(self._lock)
        self._closed = False
        self.aborting = False
        self.ending: tuple[float, int, str] | None = None     # forced destroy: stop_after's arguments
        self._thread: threading.Thread | None = None
        self.running_task = None
        self.launches: set = set()   # kernel launches running for this stream (graph lanes too)
        self.ahead = None            # its native launches out at a kernel runner (mdev.board.native.Ahead)
        # its last whole collective (mdev.board.collective_run), for the trace: the modelled
        # time its last rank entered, and the operation's key (leader's device, its run words, number)
        self.meeting: tuple[float, tuple] = (0.0, ())
        self._writers = 0            # its other running tasks (copies, memsets, waits, ...)
        self._writers_done = _LockCondition(threading.Lock())

    def push(self, seq: int, op: str, args: tuple, defer: bool = False) -> bool:
        """Queue or run a task (an idle stream runs a quick one at once).  With ``defer``, one
        run at once that succeeded is left for the caller to complete (it returns True, the
        task counted in ``deferred_count``), which it does before it reads on."""
        lock = self._lock
        with lock:
            if self._closed:
                return False
            self.received = seq
            dropped = seq <= self.drop_upto
            if not dropped:
                if self._queue or self.running_task is not None or (self.ahead is not None and self.ahead.busy):
                    self._enqueue(seq, op, args)
                    return False
                self.running_task = (seq, op, args)    # idle stream: try the fast path
        if dropped:   # complete() takes the device lock: never call it holding ours
            self.device.complete(self, seq, 0, "")
            return False
        result = self.device.run_task(self, op, args, inline=True)
        with lock:
            self.running_task = None
            if result is None:
                self._enqueue(seq, op, args)
                return False
            drop = self.drop_upto
            done = drop if drop > seq and not self._queue else seq
        if defer and not result[0]:
            self.deferred_seq = done
            self.deferred_count += 1
            return True
        self.device.complete(self, done, *result)
        return False

    def _enqueue(self, seq: int, op: str, args: tuple) -> None:
        """Hand a task to the stream's worker (call with the lock held)."""
        self._queue.append((seq, op, args))
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"stream{self.slot}", daemon=True)
            self._thread.start()
        else:
            self._cond.notify()

    def discard(self, upto: int) -> int:
        """Drop queued tasks with seq <= upto (abort / stop-on-failure); returns how many."""
        with self._cond:
            self.drop_upto = max(self.drop_upto, upto)
            kept = collections.deque(t for t in self._queue if t[0] > upto)
            dropped = len(self._queue) - len(kept)
            self._queue = kept
        return dropped

    def end(self, upto: int, code: int, why: str) -> None:
        """A forced destroy: the tasks with seq <= upto queued behind the head are dropped; the
        head (running, or first in line) runs on, a kernel launch for END_GRACE_S from its
        start, after which it is stopped with ``code``; a wait is interrupted."""
        with self._cond:
            self.drop_upto = max(self.drop_upto, upto)
            # launches out at the runner hold the head (one that ended unseen ended as the
            # destroy came: the host has not seen it end)
            running = self.running_task is not None or (self.ahead is not None and len(self.ahead) > 0)
            head = 1 if not running and self._queue else 0
            self._queue = collections.deque(t for i, t in enumerate(self._queue) if i < head or t[0] > upto)
            self.ending = (END_GRACE_S, code, why)
            self.aborting = True
        for launch in list(self.launches):
            launch.stop_after(END_GRACE_S, code, why)

    @property
    def interrupted(self) -> bool:
        """A task blocked in a wait must give up: the stream is aborted or destroyed, or its
        stop-on-failure context stopped."""
        return self._closed or self.aborting or bool(self.context.stopped)

    def running(self, op: str) -> "_Running":
        """Around a task run by a worker (or a graph lane replayed for this stream), in a ``with``."""
        return _Running(self, op not in _UNCOUNTED)

    def stop_running(self, code: int, why: str) -> None:
        """Cut the running kernel launches of the stream off memory; they fail with ``code``."""
        for launch in list(self.launches):
            launch.stop(code, why)

    def halt(self, code: int, why: str) -> None:
        """After close(): stop the running launches and wait until no other task of the
        stream runs any more (they notice the stream is gone, or end within their work).
        Call without the device lock: the tasks finish through it."""
        if self.launches:
            self.stop_running(code, why)
        # unlocked look first (most streams have nothing running): a task that starts after
        # it would have started after a locked look too
        if self._writers:
            with self._writers_done:
                self._writers_done.wait_for(lambda: not self._writers)

    def on_worker(self) -> bool:
        """Whether the caller is the stream's worker (running the task in ``running_task``)."""
        return threading.current_thread() is self._thread

    def pending(self) -> int:
        with self._cond:
            return len(self._queue) + (self.running_task is not None) + (len(self.ahead) if self.ahead else 0)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._queue.clear()
            if self._thread is not None:      # only its worker ever waits on it
                self._cond.notify()

    def _run(self) -> None:
        device = self.device
        while True:
            with self._cond:
                while not self._queue and not (self.ahead is not None and self.ahead.busy):
                    if self._closed:
                        return
                    self._cond.wait()
                task = self._queue.popleft() if self._queue else None
                self.running_task = task
            ahead = self.ahead
            if task is None:
                ahead.idle()            # nothing else to do: the next of its launches out ends
                continue
            if ahead is not None and ahead.busy and task[1] != "native_kernel":
                ahead.settle()          # a task that must come after them
            seq, op, args = task
            code, message = device.run_task(self, op, args)
            with self._cond:
                self.running_task = None
            ahead = self.ahead           # (made by the first launch handed on)
            if ahead is None or ahead.handed != seq:     # a launch handed on is completed by its Ahead
                self.finish(seq, code, message)

    def finish(self, seq: int, code: int, message: str, count: int = 1) -> None:
        """Tasks up to ``seq`` are done (``count`` of them ran), the last with ``code``; once
        nothing of the stream is left, the tasks an abort discarded count as done with it."""
        with self._cond:
            idle = not self._queue and self.running_task is None and not (self.ahead is not None and len(self.ahead))
            done = max(seq, self.drop_upto) if idle else seq
            if idle:
                self.aborting = False
        self.device.complete(self, done, code, message, count)


class _Running:
    """DeviceStream.running: counts a task among the stream's other running tasks, which a
    halt waits for (a class: it is around every task, and costs less so than as a generator)."""

    __slots__ = ("stream", "counted")

    def __init__(self, stream: DeviceStream, counted: bool) -> None:
        self.stream, self.counted = stream, counted

    def __enter__(self) -> None:
        if self.counted:
            stream = self.stream
            with stream._writers_done:
                stream._writers += 1

    def __exit__(self, *exc) -> None:
        if self.counted:
            stream = self.stream
            with stream._writers_done:
                stream._writers -= 1
                stream._writers_done.notify_all()
