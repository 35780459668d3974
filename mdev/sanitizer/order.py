"""Happens-before: which task is ordered before which, as the program wrote it.

The sanitizer replays, at submission, what the program asked the devices to do -- not
what the devices happened to do -- so a missing synchronisation is found even when the
run it was seen in was lucky.  Each stream and the host are components of vector clocks:

    submit(task on S)     S.clock := S.clock ⊔ host ; S.clock[S] += 1 ; task.clock := S.clock
    record event / notify / value write    the signal keeps the recording task's clock
    wait event / notify / value            S.clock ⊔= clock of the signal that releases it
    host sync (stream, device, event)      host ⊔= clock of what it waited for

A wait no signal submitted so far releases blocks its stream *in the model*: the stream's
later tasks queue behind it and run (in the model) when a later submission releases it.
If the real device got past the wait anyway (a signal from another process, or host
memory written behind mdev's back), the host's synchronisation says so and the model
lets the wait go without ordering anything.  A host that synchronises on a stream the
model holds blocked may be waiting for something that can never come: see ``blocked_on``.

Host threads of one process count as one component: mdev cannot see the Python locks
and queues that order them, and assuming them unordered would report races that are not.
"""

from __future__ import annotations

import collections
import itertools
from dataclasses import dataclass, field

HOST = 0
# value_wait flags (ACL_STREAM_WAIT_VALUE_GEQ / EQ / AND / NOR), as the device tests them
VALUE_TESTS = {
    0: lambda cur, v: ((cur - v) & 0xFFFFFFFFFFFFFFFF) < (1 << 63),
    1: lambda cur, v: cur == v,
    2: lambda cur, v: (cur & v) != 0,
    3: lambda cur, v: (~(cur | v)) & 0xFFFFFFFFFFFFFFFF != 0,
}
WAIT_OPS = {"wait_event", "wait_event_flag", "wait_notify", "value_wait"}
KEEP_RECORDS = 64          # records of one event a wait may still name (events.py keeps 64 waits)
RECENT = 256               # tasks per stream a host synchronisation can name exactly


def where(location: tuple) -> str:
    """A task's memory location as the user knows it."""
    kind, key, offset = location
    if kind == "d":
        from mdev.memory import address
        return f"{address.device_base(key) + offset:#x} (device {key})"
    return f"offset {offset} of a pinned buffer"


def overlay(value: int | None, word: int, lo: int, hi: int, fill: int | None) -> int | None:
    """The 8-byte word at offset ``word`` after bytes [lo, hi) were set to ``fill`` (None:
    written with unknown bytes); None when the result is unknown."""
    if fill is None or (value is None and (lo > word or hi < word + 8)):
        return None
    data = bytearray((value or 0).to_bytes(8, "little"))
    for i in range(max(lo, word), min(hi, word + 8)):
        data[i - word] = fill
    return int.from_bytes(data, "little")


def join(into: dict, other: dict) -> None:
    for comp, t in other.items():
        if into.get(comp, 0) < t:
            into[comp] = t


def before(comp: int, epoch: int, clock: dict) -> bool:
    """Is the access (comp, epoch) ordered before anything holding ``clock``?"""
    return clock.get(comp, 0) >= epoch


@dataclass(eq=False)
class Task:
    """A stream task as the sanitizer sees it."""
    stream: "StreamModel"
    seq: int
    op: str
    args: tuple
    api: str
    site: str
    serial: int                        # submission order, over every stream and the host
    number: int = 0                    # an event record: which record of the event it is
    clock: dict | None = None          # set when the task runs in the model
    epoch: int = 0
    accesses: list | None = None       # kernels: (location, nbytes, written ranges) from the device
    places: dict = field(default_factory=dict)    # a graph replay: (lane, k) -> its kernel's clock
    inner: dict = field(default_factory=dict)     # a graph replay: (lane, k) -> kernel reports

    def describe(self) -> str:
        s = self.stream
        return (f"{self.api or self.op} ({self.op} task #{self.seq}) on stream {s.handle:#x} of device "
                f"{s.device}, at {self.site}")


@dataclass(eq=False)
class StreamModel:
    handle: int
    device: int
    slot: int
    comp: int
    clock: dict = field(default_factory=dict)
    queue: collections.deque = field(default_factory=collections.deque)   # tasks behind a wait
    ran: int = 0                        # seq of the last task run in the model
    host_seen: int = -1                 # host clock version last joined
    recent: dict = field(default_factory=dict)     # seq -> clock of its last RECENT tasks


@dataclass(eq=False)
class Signal:
    """An event record or a notify record: who recorded it, and (once run) with what clock."""
    task: Task
    clock: dict | None = None


@dataclass(eq=False)
class NotifyModel:
    pending: collections.deque = field(default_factory=collections.deque)   # records not yet taken
    recorded: int = 0
    waited: int = 0


@dataclass
class Word:
    """The 8-byte word of a value wait, as far as the model knows it: its last writer's
    value and clock.  A word first looked at is read from memory as the program left it."""
    value: int | None                   # None: unknown (a copy, a kernel) -- assume it satisfies
    clock: dict


class Model:
    """Streams, signals and the host clock of one process, and the run of its tasks."""

    def __init__(self, first_look, external_notify, on_run) -> None:
        self.first_look = first_look            # location -> Word: its last writer so far, or memory
        self.external_notify = external_notify  # (device, slot) -> True if another process may record it
        self.on_run = on_run                    # called with each task once it runs (accesses)
        self.host: dict = {HOST: 1}
        self.host_version = 0
        self.streams: dict[int, StreamModel] = {}
        self._comps = itertools.count(1)
        self.serials = itertools.count()
        self.events: dict[tuple, dict[int, Signal]] = {}     # (device, slot, uid) -> n -> record
        self.notifies: dict[tuple, NotifyModel] = {}         # (device, slot)
        self.words: dict[tuple, Word] = {}                   # location of a value-wait word
        self.blocked: dict[int, StreamModel] = {}
        self._draining = False

    # ------------------------------------------------------------------ host
    def host_tick(self) -> tuple[int, dict]:
        """A host access: its epoch and the host clock it happens under."""
        self.host[HOST] += 1
        self.host_version += 1
        return self.host[HOST], self.host

    def host_join(self, clock: dict) -> None:
        join(self.host, clock)
        self.host_version += 1

    def component(self) -> int:
        """A clock component of its own (a graph lane)."""
        return next(self._comps)

    def stream(self, stream) -> StreamModel:
        model = self.streams.get(stream.handle)
        if model is None:
            model = self.streams[stream.handle] = StreamModel(stream.handle, stream.device, stream.slot,
                                                              next(self._comps))
        return model

    # ------------------------------------------------------------------ submission
    def submit(self, task: Task) -> None:
        s = task.stream
        if s.host_seen != self.host_version:   # a submission is ordered after all the host did
            join(s.clock, self.host)
            s.host_seen = self.host_version
        if task.op == "record_event":
            key = (s.device, task.args[0], task.args[1])
            records = self.events.setdefault(key, {})
            n = task.number or max(records, default=0) + 1   # the record's issue number: waits name it
            records[n] = Signal(task)
            records.pop(n - KEEP_RECORDS, None)
        elif task.op == "record_notify":
            self.notifies.setdefault((task.args[0], task.args[1]), NotifyModel()).recorded += 1
        elif task.op == "wait_notify":
            self.notifies.setdefault((s.device, task.args[0]), NotifyModel()).waited += 1
        if s.queue:
            s.queue.append(task)
            return
        if not self._try_run(task):
            s.queue.append(task)
            self.blocked[s.handle] = s
            return
        self._drain()

    def _try_run(self, task: Task, forced: bool = False) -> bool:
        s = task.stream
        if task.op in WAIT_OPS and not forced:
            released = self._release(task)
            if released is None:
                return False
            join(s.clock, released)
        s.clock[s.comp] = s.clock.get(s.comp, 0) + 1
        task.epoch = s.clock[s.comp]
        task.clock = dict(s.clock)
        s.ran = task.seq
        s.recent[task.seq] = task.clock
        if len(s.recent) > RECENT:          # a sync on an older task joins the stream clock
            del s.recent[next(iter(s.recent))]
        if task.op == "record_event":
            records = self.events[(s.device, task.args[0], task.args[1])]
            for signal in records.values():
                if signal.task is task:
                    signal.clock = task.clock
        elif task.op == "record_notify":
            self.notifies[(task.args[0], task.args[1])].pending.append(Signal(task, task.clock))
        elif task.op == "value_write":
            self.words[task.args[0]] = Word(task.args[1], task.clock)
        self.on_run(task)
        return True

    def wrote(self, location: tuple, nbytes: int, clock: dict, fill: int | None = None) -> None:
        """Bytes a copy, memset, kernel or the host wrote (under ``clock``): value
        words in that range take the new value (a memset's, else unknown) from that writer."""
        space, lo = location[:2], location[2]
        for loc, word in self.words.items():
            if loc[:2] == space and lo < loc[2] + 8 and loc[2] < lo + nbytes:
                word.value = overlay(word.value, loc[2], lo, lo + nbytes, fill)
                word.clock = clock
        if self.blocked:
            self._drain()

    def _release(self, task: Task) -> dict | None:
        """The clock of the signal that releases the wait ``task``, or None if none can yet."""
        s, op, args = task.stream, task.op, task.args
        if op in ("wait_event", "wait_event_flag"):
            records = self.events.get((s.device, args[0], args[1]), {})
            signal = records.get(args[2] if op == "wait_event" else max(records, default=0))
            if signal is None:
                return {}          # recorded before the sanitizer started: nothing known
            if signal.clock is None:
                return None
            return signal.clock
        if op == "wait_notify":
            key = (s.device, args[0])
            notify = self.notifies[key]
            if notify.pending:
                # a notify is a flag: one wait takes every record made since the last one
                clock: dict = {}
                for signal in notify.pending:
                    join(clock, signal.clock)
                notify.pending.clear()
                return clock
            return {} if self.external_notify(key) else None
        if op == "value_wait":
            word = self.words.get(args[0])
            if word is None:
                word = self.words[args[0]] = self.first_look(args[0])
            if word.value is None or VALUE_TESTS[args[2]](word.value, args[1]):
                return word.clock
            return None
        return {}

    def _drain(self) -> None:
        """Run what newly released waits let run, until nothing moves."""
        if self._draining:
            return            # a task run by the loop below wrote a value word: the loop goes on
        self._draining = True
        try:
            moved = True
            while moved and self.blocked:
                moved = False
                for s in list(self.blocked.values()):
                    while s.queue and self._try_run(s.queue[0]):
                        s.queue.popleft()
                        moved = True
                    if not s.queue:
                        self.blocked.pop(s.handle, None)
        finally:
            self._draining = False

    # ------------------------------------------------------------------ host synchronisation
    def synced(self, stream, seq: int) -> None:
        """The real stream ran its task ``seq``: the host is ordered after it.  Waits the
        model still holds were released by something it cannot see; let them go."""
        s = self.streams.get(stream.handle)
        if s is None:
            return
        while s.ran < seq and s.queue:
            task = s.queue.popleft()
            if not self._try_run(task):       # released by something outside this process
                self._try_run(task, forced=True)
            if not s.queue:
                self.blocked.pop(s.handle, None)
        self._drain()
        self.host_join(s.recent.get(seq, s.clock) if seq < s.ran else s.clock)

    def dropped(self, stream) -> None:
        """An abort or a forced destroy: the tasks queued behind a wait never run."""
        s = self.streams.get(stream.handle)
        if s is not None:
            s.queue.clear()
            self.blocked.pop(s.handle, None)

    def notify_destroyed(self, key: tuple) -> None:
        """Its slot may come back as another notify: records of this one release none of its waits."""
        self.notifies.pop(key, None)

    def event_complete(self, key: tuple) -> None:
        """query / synchronize on an event found its latest record done."""
        records = self.events.get(key)
        if records:
            signal = records[max(records)]
            if signal.clock is not None:
                self.host_join(signal.clock)

    def stuck(self, stream, seq: int) -> StreamModel | None:
        s = self.streams.get(stream.handle)
        return s if s is not None and s.ran < seq and s.queue else None

    # ------------------------------------------------------------------ synccheck
    def blocked_on(self, s: StreamModel) -> list[str]:
        """Why the head of ``s`` can never run, following the chain of blocked streams."""
        lines, seen = [], set()
        while s is not None and s.queue and s.handle not in seen:
            seen.add(s.handle)
            task = s.queue[0]
            reason, nxt = self._why(task)
            lines.append(f"{task.describe()} {reason}")
            s = nxt
        if s is not None and s.handle in seen:
            lines.append("... which closes the cycle: these streams wait on each other (deadlock)")
        return lines

    def _why(self, task: Task) -> tuple[str, StreamModel | None]:
        s, op, args = task.stream, task.op, task.args
        if op in ("wait_event", "wait_event_flag"):
            records = self.events.get((s.device, args[0], args[1]), {})
            signal = records.get(args[2] if op == "wait_event" else max(records, default=0))
            return (f"waits for event record {signal.task.describe()}, which is queued behind a wait itself",
                    signal.task.stream)
        if op == "wait_notify":
            notify = self.notifies[(s.device, args[0])]
            queued = self._queued("record_notify", lambda t: (t.args[0], t.args[1]) == (s.device, args[0]))
            if queued is not None:
                return (f"waits on notify {args[0]} of device {s.device}, recorded only by "
                        f"{queued.describe()}, which is queued behind a wait itself", queued.stream)
            return (f"waits on notify {args[0]} of device {s.device}, and no record is left to release it: "
                    f"the notify is waited {notify.waited} time(s) and recorded {notify.recorded} time(s), "
                    f"and a wait takes every record made before it", None)
        if op == "value_wait":
            queued = self._queued("value_write", lambda t: t.args[0] == args[0])
            what = f"waits for the value at {where(args[0])} (flag {args[2]}, value {args[1]:#x})"
            if queued is not None:
                return f"{what}, written by {queued.describe()}, which is queued behind a wait itself", queued.stream
            return f"{what}; no submitted task writes a value that satisfies it", None
        return "is queued", None

    def _queued(self, op: str, match) -> Task | None:
        for s in self.blocked.values():
            for t in s.queue:
                if t.op == op and match(t):
                    return t
        return None
