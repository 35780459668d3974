"""One process's sanitizer: the runtime's hooks in, the checkers' reports out.

    streams.submit ----------> submit --> order.Model (runs tasks in happens-before order)
    memops (sync copies) ----> host_access          |  each task / host access, as it runs:
    memory (alloc, free) ----> allocated / freed     v
    wait_targets, queries ---> syncing / synced   _touch --> racecheck, initcheck (per Region)
    device (kernel task) ----> kernel_report --queue--> (drained under the lock)
    run_graph task ----------> _replay: the graph's lanes as streams of their own
    bad pointers, frees -----> memcheck reports
    finalize / reset_device -> teardown: leaks, waits that never ended

Everything runs under one lock, in the calling thread; submission holds it across the
send so that the model sees a stream's tasks in their real order.  The device-reader
thread only queues kernel reports (it must never wait for a user thread).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import sys
import threading
import traceback

import mdev
from mdev import errors as E
from mdev.memory import address
from mdev.runtime import boundary
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.memtable import DEVICE, PINNED
from mdev.runtime import capture as R
from mdev.runtime.execution import models
from mdev.runtime.sync import events, notify
from mdev.sanitizer import initcheck, order, racecheck
from mdev.sanitizer.order import HOST, Model, Task
from mdev.sanitizer.regions import Regions
from mdev.sanitizer.report import Reports
from mdev.taskspec import KERNEL_OPS, SPECS

_MDEV = os.path.dirname(mdev.__file__) + os.sep
_BINDING = boundary.__file__


def caller() -> tuple[str, str, int | None]:
    """(API function, user program site, stream argument) of the API call in progress."""
    f = sys._getframe(2)
    api, stream, inner = "", None, None
    while f is not None and f.f_code.co_filename.startswith(_MDEV):
        if f.f_code.co_name == "api" and f.f_code.co_filename == _BINDING:
            fn = f.f_locals["fn"]
            api = boundary.PUBLIC_NAMES.get(fn, fn.__name__)
            if inner is not None:
                stream = inner.f_locals.get("stream")
        elif f.f_code.co_name == "launch_decorated":       # kernel[blocks, stream](...)
            api = f"kernel {getattr(f.f_locals.get('kernel'), 'name', '?')}"
        inner, f = f, f.f_back
    site = f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else "?"
    return api, site, stream if isinstance(stream, int) else None


def guarded(method):
    """A checker's own failure is printed and the check goes on: it must never change
    what the API call returns, nor leave it half done."""
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except Exception:
            self.internal_error()
    return call


class Sanitizer:
    def __init__(self, checks) -> None:
        self.checks = frozenset(checks)
        self.reports = Reports()
        self.lock = threading.RLock()
        self.grace_s = float(os.environ.get("MDEV_SANITIZE_GRACE", "1.0"))
        # who touched what, and when: racecheck's history, and memcheck's for frees
        self._history = bool(self.checks & {"racecheck", "memcheck"})
        self._kernel_reports: collections.deque = collections.deque()
        self._watched: set[int] = set()
        self._suspects: list = []          # (stream, seq) a timed-out synchronisation was stuck on
        self._submitters: set[int] = set()   # threads that submitted work
        self._failed = False
        self._reset()

    def _reset(self) -> None:
        self.model = Model(self._first_look, self._external_notify, self._run)
        self.regions = Regions(rt)
        self._kernels: dict[tuple, Task] = {}      # (device, slot, seq) -> launch awaiting its report
        self._unreported: set[Task] = set()        # launches run in the model, report not in yet
        self._events: dict[tuple, object] = {}     # (device, slot, uid) -> the runtime's Event
        self._lane_comps: dict[tuple, list] = {}   # (graph id, stream) -> clock component of each lane
        self._deferred_reads: list = []            # initcheck reads waiting for kernel reports
        self._flag_writes: dict = {}               # location of a value-written word -> writer's clock

    def internal_error(self) -> None:
        if not self._failed:
            self._failed = True
            print("mdev sanitizer: internal error (checking goes on, reports may be incomplete):",
                  file=sys.stderr)
            traceback.print_exc()

    def report(self, checker: str, kind: str, lines: list[str], dedupe=None) -> None:
        if checker in self.checks:
            self.reports.add(checker, kind, lines, dedupe)

    # ------------------------------------------------------------------ stream tasks
    def submit(self, stream, op: str, args: tuple, send) -> int:
        api, site, _ = caller()
        with self.lock:
            self._submitters.add(threading.get_ident())
            if op == "run_graph":
                self.watch_kernels(stream.device)      # the graph's kernels report too
            seq = send(stream, op, *args)
            self._model_task(stream, op, args, seq, api, site)
        return seq

    @guarded
    def _model_task(self, stream, op: str, args: tuple, seq: int, api: str, site: str) -> None:
        task = Task(self.model.stream(stream), seq, op, args, api, site, next(self.model.serials))
        if op == "record_event":
            task.number = self._event(stream.device, *args).issued + 1   # events.py counts it next
        if op in (*KERNEL_OPS, "run_graph"):   # before draining: a quick launch may have reported already
            self._kernels[(stream.device, stream.slot, seq)] = task
        self.model.submit(task)
        # after the model has this task: a kernel it released (a flag it set) may have reported
        # already, and must find it among the flag writers
        self._drain_kernel_reports()

    def _run(self, task: Task) -> None:
        """The model ran ``task``: check and record the bytes it touches."""
        who, key = task.describe(), (task.api or task.op, task.site)
        if task.op in KERNEL_OPS:
            if task.accesses is None:
                self._unreported.add(task)
            else:
                self._kernel_accesses(task)
            return
        if task.op == "run_graph":
            self._replay(task)
            return
        # a value write / wait is itself a synchronisation: its word is a flag, not data
        spec = SPECS[task.op]
        racing, flag = not spec.flag, spec.target()
        if spec.flag and flag is not None:    # a kernel spinning on the word acquires this clock
            self._flag_writes[task.args[flag.at]] = task.clock
            if len(self._flag_writes) > 4096:
                del self._flag_writes[next(iter(self._flag_writes))]
        for location, nbytes, write, fill in _accesses(task.op, task.args):
            self._touch(location, nbytes, write, task.stream.comp, task.epoch, task.clock, who, key, task, fill,
                        serial=task.serial, race=racing)

    def _touch(self, location, nbytes, write, comp, epoch, clock, who, key, task=None, fill=None,
               init=True, serial=0, race=True) -> None:
        prune = not self._unreported
        for region, lo, hi in self.regions.pieces(location, nbytes):
            if init and "initcheck" in self.checks:
                if write:
                    initcheck.mark(region, lo, hi)
                else:
                    gaps = initcheck.holes(region, lo, hi)
                    if gaps and self._unreported:      # a kernel in flight may have written them
                        self._deferred_reads.append((region, lo, hi, gaps, who, key))
                    elif gaps:
                        initcheck.report_read(region, lo, hi, gaps, who, key, self.report)
            if race and self._history:
                racecheck.check(region, racecheck.Access(lo, hi, write, comp, epoch, clock, who, key, serial,
                                                 fill if write else None),
                                self.report, prune)
        if write and self.model.words and (task is None or not SPECS[task.op].flag):
            self.model.wrote(location, nbytes, clock, fill)    # (a value write sets its word itself)

    # ------------------------------------------------------------------ kernels
    @guarded
    def watch_kernels(self, device: int) -> None:
        """Before the first launch on a device: have it report what its kernels touch."""
        if device not in self._watched:
            rt.link(device).request("sanitize_start", rt.attach().client_id)
            self._watched.add(device)

    def finish(self) -> None:
        """The checking ends (disable, exit): waits a timed-out synchronisation was stuck on
        and nothing released since are reported; then the summary of an exiting process."""
        suspects, self._suspects = self._suspects, []
        self._report_stuck([(s, seq) for s, seq in suspects if not self._really_done(s, seq)])

    def stop(self) -> None:
        """disable(): devices stop watching this process's kernels."""
        self.finish()
        for device in self._watched:
            try:
                rt.link(device).request("sanitize_stop", rt.attach().client_id)
            except Exception:
                pass            # a device that is gone watches nothing
        self._watched.clear()

    @guarded
    def kernel_report(self, device: int, payload: dict) -> None:
        """From a device-reader thread: queue only (the lock may be held by a thread that
        waits for this very reader)."""
        self._kernel_reports.append((device, payload))

    def _drain_kernel_reports(self) -> None:
        while self._kernel_reports:
            device, payload = self._kernel_reports.popleft()
            key = (device, payload["slot"], payload["seq"])
            task = self._kernels.get(key)
            if task is None:
                continue
            if task.op == "run_graph":          # a kernel of a graph replay: (lane, position)
                task.inner.setdefault(tuple(payload["inner"]), []).append(payload)
                if task.clock is not None:
                    self._graph_kernels(task)
                continue
            del self._kernels[key]
            task.accesses = payload["accesses"]
            if payload.get("fault"):
                self._kernel_fault(task, *payload["fault"])
            if task.clock is not None:
                self._unreported.discard(task)
                self._kernel_accesses(task)
        if self._deferred_reads:
            self._settle_reads()

    def _settle_reads(self) -> None:
        """Every kernel has reported: reads of bytes still unwritten are uninitialised."""
        if self._unreported:
            return
        reads, self._deferred_reads = self._deferred_reads, []
        for region, lo, hi, gaps, who, key in reads:
            gaps = initcheck.still_missing(region, gaps)
            if gaps:
                initcheck.report_read(region, lo, hi, gaps, who, key, self.report)

    def _kernel_accesses(self, task: Task) -> None:
        s = task.stream
        self._apply_kernel(task.accesses, s.comp, task.epoch, task.clock, task.describe(),
                           (task.api or task.op, task.site), task)

    def _apply_kernel(self, accesses, comp: int, epoch: int, clock: dict, who: str, key: tuple, task) -> None:
        clock = self._acquired(accesses, comp, clock)
        for (kind, space_key, offset), reads, written, flag in accesses:
            # a flag word it spins on or updates atomically is synchronisation, not data;
            # bytes it wrote itself may be read back uninitialised-free (order inside unknown)
            for lo, hi in reads:
                for a, b in _without((lo, hi), written):
                    self._touch((kind, space_key, offset + a), b - a, False, comp, epoch, clock, who, key,
                                serial=task.serial, race=False)
                self._touch((kind, space_key, offset + lo), hi - lo, False, comp, epoch, clock, who, key,
                            init=False, serial=task.serial, race=not flag)
            for lo, hi in written:
                self._touch((kind, space_key, offset + lo), hi - lo, True, comp, epoch, clock,
                            who, key, task, serial=task.serial, race=not flag)

    # ------------------------------------------------------------------ graphs
    def _replay(self, task: Task) -> None:
        """A model run instance runs: its lanes as streams of their own, starting after the
        ``run_graph`` task, ordered among themselves by the graph's record/wait markers and
        activations, and joined back into the executing stream (it ends when they all have)."""
        model = next((m for m in list(models.held.models.values()) if getattr(m, "gid", None) == task.args[0]
                      and getattr(m, "device", None) == task.stream.device and hasattr(m, "lanes")), None)
        if model is None:
            return
        lanes = model.lanes
        place = (model.gid, task.stream.handle)
        comps = self._lane_comps.get(place)
        if comps is None:      # per lane and executing stream: replays on one stream are ordered
            comps = self._lane_comps[place] = [self.model.component() for _ in lanes]
        index = {lane.stream: i for i, lane in enumerate(lanes)}
        clocks = {i: dict(task.clock) for i, lane in enumerate(lanes) if lane.head}
        pos = dict.fromkeys(clocks, 0)
        # a lane past a wait for an event recorded outside the graph is ordered by a record
        # the model has not seen yet (it is made after the replay is submitted): its tasks,
        # and those of lanes that wait for it, are not race-checked
        outside = dict.fromkeys(clocks, False)
        marks: dict = {}
        moved = True
        while moved:           # run each lane until a marker it waits for is not recorded yet
            moved = False
            for i in list(pos):
                tasks, clock, comp = lanes[i].frozen(), clocks[i], comps[i]
                while pos[i] < len(tasks):
                    op, args = tasks[pos[i]]
                    if op == R.WAIT:
                        if args[0] not in marks:
                            break
                        order.join(clock, marks[args[0]][0])
                        outside[i] = outside[i] or marks[args[0]][1]
                    elif op == R.RECORD:
                        marks[args[0]] = (dict(clock), outside[i])
                    elif op in (R.ACTIVATE, R.STREAM_SWITCH):     # a switch may start its stream
                        j = index.get(args[0])
                        if j is not None and j not in pos:
                            clocks[j], pos[j], outside[j] = dict(clock), 0, outside[i]
                    elif op in ("wait_event", "wait_event_flag", "wait_event_latest", "wait_notify", "value_wait"):
                        outside[i] = True
                    else:
                        clock[comp] = clock.get(comp, 0) + 1
                        who = (f"{op} (task {pos[i]} of lane {i}, stream {lanes[i].stream.stream_id}) of model "
                               f"{model.handle:#x}, replayed by {task.describe()}")
                        if op in KERNEL_OPS:     # its device report names (lane, position)
                            task.places[(i, pos[i])] = (comp, clock[comp], dict(clock), who,
                                                        (task.api, task.site, i, pos[i]))
                            self._unreported.add(task)
                        for location, nbytes, write, fill in _accesses(op, args):
                            self._touch(location, nbytes, write, comp, clock[comp], dict(clock), who,
                                        (task.api, task.site, i, pos[i]), None, fill, serial=task.serial,
                                        race=not outside[i] and not SPECS[op].flag)
                    pos[i] += 1
                    moved = True
        for clock in clocks.values():
            order.join(task.stream.clock, clock)
        self._graph_kernels(task)

    def _graph_kernels(self, task: Task) -> None:
        """Check the reports of a replay's kernels that have come in, at their lane places."""
        for place in [p for p in task.inner if p in task.places]:
            for payload in task.inner.pop(place):
                comp, epoch, clock, who, key = task.places[place]
                if payload.get("fault"):
                    self._bad_address(*payload["fault"], [f"in: {who}"])
                self._apply_kernel(payload["accesses"], comp, epoch, clock, who, key, task)

    def _acquired(self, accesses, comp: int, clock: dict) -> dict:
        """A kernel that spun on a flag until another task set it runs on after that task
        (memory-semantic synchronisation): its clock takes the flag writers' clocks."""
        flags = [(kind, key, offset + lo, hi - lo) for (kind, key, offset), reads, _, flag in accesses
                 if flag for lo, hi in reads]
        if not flags:
            return clock
        clock = dict(clock)
        for kind, key, lo, n in flags:
            for (fkind, fkey, foff), fclock in self._flag_writes.items():
                if (fkind, fkey) == (kind, key) and lo < foff + 8 and foff < lo + n:
                    order.join(clock, fclock)
            for region, a, b in self.regions.pieces((kind, key, lo), n):
                for access in region.accesses:
                    if access.write and access.comp != comp and access.lo < b and a < access.hi:
                        order.join(clock, access.clock)
        return clock

    def _kernel_fault(self, task: Task, ptr: int, nbytes: int, reason: str) -> None:
        self._bad_address(ptr, nbytes, f"{reason}", [f"in: {task.describe()}"])

    # ------------------------------------------------------------------ host accesses
    @guarded
    def host_access(self, reads=(), writes=(), fill: int | None = None) -> None:
        """A synchronous copy or memset ran in this process on these operands."""
        api, site, _ = caller()
        with self.lock:
            epoch, clock = self.model.host_tick()
            clock, serial = dict(clock), next(self.model.serials)
            who = f"{api or 'host access'} (in the host process), at {site}"
            for write, operands in ((False, reads), (True, writes)):
                for operand in operands:
                    for part in operand.parts():
                        if part.kind in (DEVICE, PINNED):
                            self._touch(part.location(), part.nbytes, write, HOST, epoch, clock, who,
                                        (api, site), None, fill, serial=serial)

    # ------------------------------------------------------------------ synchronisation
    @contextlib.contextmanager
    def syncing(self, targets: list):
        """Around a host synchronisation on (stream, seq) targets."""
        with self.lock:
            self._drain_kernel_reports()
            stuck = [(s, seq) for s, seq in targets if self.model.stuck(s, seq)]
        timer = None
        if stuck and "synccheck" in self.checks:
            timer = threading.Timer(self.grace_s, self._blocked_too_long, [stuck, threading.current_thread()])
            timer.daemon = True
            timer.start()
        ok, code = False, 0
        try:
            yield
            ok = True
        except E.AclError as error:
            code = error.code
            raise
        finally:
            if timer is not None:
                timer.cancel()
            # a sync that failed (a task failure, a stopped context) still saw its streams get
            # there; one that timed out or lost its device did not
            done = [(s, seq) for s, seq in targets if ok or self._really_done(s, seq)]
            if code == E.ACL_ERROR_RT_TASK_TIMEOUT and "synccheck" in self.checks:
                # the device gave up on a wait nothing submitted releases: a finding now,
                # whichever came first, the grace period or the device's wait timeout
                self._report_stuck([target for target in stuck if target in done])
            self.synced(done)
            if not ok and stuck:       # a later submission may still release it: judged at the end
                with self.lock:
                    self._suspects.extend(stuck)

    @guarded
    def _blocked_too_long(self, stuck: list, blocked: threading.Thread) -> None:
        """The grace period passed with the host still blocked: with no other thread that
        could submit the release, a finding now; else judged when the checking ends."""
        others = any(t is not blocked and not t.daemon and t.is_alive() for t in threading.enumerate())
        if others or len(self._submitters) > 1:
            with self.lock:
                self._suspects.extend(stuck)
        else:
            self._report_stuck(stuck)

    @guarded
    def synced(self, targets: list) -> None:
        with self.lock:
            self._drain_kernel_reports()      # the sync waited for the devices' messages
            for stream, seq in targets:
                self.model.synced(stream, seq)
                for t in [t for t in self._unreported if t.stream.handle == stream.handle and t.seq <= seq]:
                    self._unreported.discard(t)       # ran without a report: dropped by an abort
                for key in [k for k, t in self._kernels.items()
                            if t.op == "run_graph" and t.stream.handle == stream.handle and t.seq <= seq]:
                    del self._kernels[key]            # a finished replay: all its kernels reported
            self._settle_reads()
            if not self._unreported and not self.model.blocked and "racecheck" in self.checks:
                racecheck.forget_before(self.regions.all(), self.model.host)

    @guarded
    def stream_dropped(self, stream) -> None:
        """Destroyed or aborted: its queued tasks are dropped, its launches never report, and
        a wait a timed-out synchronisation was stuck on is a finding now (the program gave up)."""
        with self.lock:
            self._drain_kernel_reports()
            mine = [(s, seq) for s, seq in self._suspects if s.handle == stream.handle]
            self._suspects = [t for t in self._suspects if t not in mine]
            self._report_stuck(mine)
            self.model.dropped(stream)
            for t in [t for t in self._unreported if t.stream.handle == stream.handle]:
                self._unreported.discard(t)
            for key in [k for k, t in self._kernels.items() if t.stream.handle == stream.handle]:
                del self._kernels[key]
            self._settle_reads()

    @guarded
    def notify_destroyed(self, device: int, slot: int) -> None:
        with self.lock:
            self.model.notify_destroyed((device, slot))

    @guarded
    def event_complete(self, device: int, slot: int, uid: int) -> None:
        with self.lock:
            self.model.event_complete((device, slot, uid))

    @guarded
    def _report_stuck(self, stuck: list, who: str = "the host waits for") -> None:
        """Streams (stream, seq) held by a wait that nothing submitted releases."""
        with self.lock:
            for stream, seq in stuck:
                s = self.model.stuck(stream, seq)
                if s is None:
                    continue
                lines = self.model.blocked_on(s)
                deadlock = lines[-1].endswith("(deadlock)")
                self.report("synccheck", "deadlock" if deadlock else "wait that can never end",
                            [f"{who} stream {stream.handle:#x} of device {stream.device}, held by a wait "
                             f"nothing submitted releases:", *lines], dedupe=(s.handle, s.queue[0].seq))

    # ------------------------------------------------------------------ memcheck
    @guarded
    def allocated(self, alloc) -> None:
        with self.lock:
            self.regions.allocated(alloc, caller()[1])

    @guarded
    def freed(self, alloc) -> None:
        api, site, _ = caller()
        with self.lock:
            region = self.regions.live.get(alloc.ptr)
            busy = [(a.who, a.key) for a in region.accesses if not order.before(a.comp, a.epoch, self.model.host)] \
                if region is not None else []
            # a launch still to report its bytes touches what its arguments point into
            busy += [(t.describe(), (t.api or t.op, t.site)) for t in self._kernels.values()
                     if t.op in KERNEL_OPS and not (t.clock is not None and order.before(t.stream.comp, t.epoch,
                                                                                         self.model.host))
                     and any(alloc.ptr <= p < alloc.ptr + alloc.size for p in _kernel_pointers(t.args))]
            if busy:
                region, (who, key) = self.regions.of(alloc), busy[-1]
                self.report("memcheck", "free of memory in use", [
                    f"{api or 'free'} of {region.name()} at {site} while a task that touches it may not have "
                    f"run yet (no synchronisation orders it before the free)",
                    f"task: {who}",
                    "synchronise the task's stream (or an event recorded after it) before freeing"],
                    dedupe=(site, key))
            self.regions.freed(alloc, site)

    @guarded
    def bad_pointer(self, ptr: int, nbytes: int, what: str) -> None:
        """The runtime refused a pointer: say which allocation it missed, and how."""
        api, site, stream = caller()
        where = f"{api or 'call'} at {site}" + (f", stream {stream:#x}" if stream else "")
        with self.lock:
            self._bad_address(ptr, nbytes, f"{what} of {api or 'the call'}", [f"in: {where}"])

    def _bad_address(self, ptr: int, nbytes: int, what: str, context: list[str]) -> None:
        live = rt.memory.containing(ptr)
        split = address.split(ptr)
        device = f"device {split[0]}" if split else "host memory"
        if live is not None:
            name = self.regions.of(live).name()
            self.report("memcheck", "out of bounds", [
                f"{what}: {nbytes} bytes at offset {ptr - live.ptr} of {name} overrun it by "
                f"{ptr + nbytes - live.end} bytes ({device})", *context], dedupe=(context[0], live.ptr))
            return
        freed = self.regions.freed_containing(ptr)
        if freed is not None:
            a = freed.alloc
            self.report("memcheck", "use after free", [
                f"{what}: {ptr:#x} is offset {ptr - a.ptr} of allocation {a.ptr:#x} ({a.size} bytes, {device}"
                f"{', allocated at ' + freed.site if freed.site else ''}), freed at {freed.freed_at}", *context],
                dedupe=(context[0], a.ptr))
            return
        near = self.regions.nearest(ptr) if split else None
        hint = ""
        if near is not None:
            a = near.alloc
            hint = (f"; {ptr - a.end} bytes after" if ptr >= a.end else f"; {a.ptr - ptr} bytes before") + \
                f" {near.name()}"
        self.report("memcheck", "invalid address", [f"{what}: {ptr:#x} (+{nbytes} bytes) is in no allocation "
                                                    f"({device}){hint}", *context], dedupe=(context[0], ptr))

    @guarded
    def bad_free(self, ptr: int) -> None:
        api, site, _ = caller()
        with self.lock:
            freed = self.regions.freed_containing(ptr)
            live = rt.memory.containing(ptr)
            if freed is not None and freed.alloc.ptr == ptr and live is None:
                self.report("memcheck", "double free", [
                    f"{api} of {ptr:#x} ({freed.alloc.size} bytes) at {site}: it was already freed at "
                    f"{freed.freed_at}" + (f" (allocated at {freed.site})" if freed.site else "")])
            elif live is not None:
                self.report("memcheck", "invalid free", [
                    f"{api} of {ptr:#x} at {site}: offset {ptr - live.ptr} inside "
                    f"{self.regions.of(live).name()}, not its start"])
            else:
                self.report("memcheck", "invalid free", [f"{api} of {ptr:#x} at {site}: no allocation starts there"])

    # ------------------------------------------------------------------ teardown
    @guarded
    def teardown(self, allocations, why: str) -> None:
        """finalize / reset_device releases what the program left: report leaks and waits
        that never ended, then forget the released state."""
        with self.lock:
            self._drain_kernel_reports()
            for alloc in allocations:
                if alloc.ipc_key is not None:
                    continue
                region = self.regions.live.get(alloc.ptr)
                kind = f"device {alloc.device} memory" if alloc.kind == DEVICE else "pinned host memory"
                known = region is not None and region.site
                self.report("memcheck", "leak", [f"{alloc.size} bytes of {kind} at {alloc.ptr:#x}, allocated at "
                                                 f"{region.site if known else 'an unknown site'}, were never "
                                                 f"freed ({why} released them)"],
                            dedupe=(region.site,) if known else (alloc.ptr,))
            self._suspects.clear()
            self._report_stuck([(s, s.queue[0].seq) for s in self.model.blocked.values()
                                if not self._really_done(s, s.queue[0].seq)], f"{why} found")
            if why == "finalize":
                self._watched.clear()
                self._reset()

    def _really_done(self, s, seq: int) -> bool:
        try:
            return int(rt.link(s.device).control.stream_done[s.slot]) >= seq
        except Exception:       # the device is gone: nothing of it will run
            return False

    def _event(self, device: int, slot: int, uid: int):
        key = (device, slot, uid)
        ev = self._events.get(key)
        if ev is None:
            ev = self._events[key] = next(e for e in list(events.held.events.values())
                                          if (e.device, e.slot, e.uid) == key)
        return ev

    # ------------------------------------------------------------------ model callbacks
    def _first_look(self, location: tuple) -> order.Word:
        """A value-wait word the model has not followed yet: the writes to it so far (the
        access history, newest last), laid over what memory holds now."""
        kind, key, offset = location
        try:
            value = int(rt.link(key).hbm().array[offset:offset + 8].view("<u8")[0])
        except Exception:
            value = 0
        word = order.Word(value, {})
        for region, lo, hi in self.regions.pieces(location, 8):
            for a in region.accesses:
                if a.write and a.lo < hi and lo < a.hi:
                    word.value = order.overlay(word.value, offset, a.lo, a.hi, a.fill)
                    order.join(word.clock, a.clock)
        return word

    def _external_notify(self, key: tuple) -> bool:
        return any(n.device == key[0] and n.slot == key[1] and n.ipc_key is not None
                   for n in list(notify.held.notifies.values()))


def _without(span: tuple[int, int], holes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of ``span`` outside the sorted, disjoint ``holes``."""
    out, pos = [], span[0]
    for lo, hi in holes:
        if hi <= pos or lo >= span[1]:
            continue
        if lo > pos:
            out.append((pos, lo))
        pos = max(pos, hi)
    if pos < span[1]:
        out.append((pos, span[1]))
    return out


def _kernel_pointers(args: tuple) -> list[int]:
    """The addresses a kernel launch was given: its argument values, or the 8-byte words of
    its argument block (an argument block in device memory is not looked into)."""
    kind, values = args[2], args[3]
    if kind in ("values", "objects"):
        return [v for v in (values if kind == "values" else values[0]) if type(v) is int]
    if kind == "bytes":
        return [int.from_bytes(values[i:i + 8], "little") for i in range(0, len(values) - 7, 8)]
    return []


def _accesses(op: str, args: tuple):
    """(location, bytes, is write, memset fill) of the memory a stream task touches, by its
    op's operands (mdev.taskspec); a graph's markers (labels, switches) touch none."""
    spec = SPECS.get(op)
    return spec.accesses(args) if spec is not None else ()
