"""One emulated device: what its hosts' messages act on -- streams, events, notifies,
kernels, the tasks they run and their completion.

    mdev.board.serving (the reading thread): one message at a time
        | "t"                  | "sc" "sd" "ec" "ed"          | "r": rpc_* (also its memory's)
        v                      v                              v
    stream.push ------+    open_/close_stream, open_/close_event, lease (mdev.board.slots),
        |  inline     |    notifies, kernels, wait (parked as a SyncWaiter), abort, stop, ...
        |  or worker  v
        +--> run_task --> tasktable.OPS[op] --operands--> device.memory (mdev.board.hbm):
                 |                                        HBM, allocations, grants, peers
                 v
             complete(stream, seq) --> control page (shm): stream_done, errors, tasks done
                 |                         (hosts read it, and sleep on its futex words)
                 +--> parked synchronisations answered on their host's connection

A stream's tasks run in order: a quick one on an idle stream by the reading thread itself
(``run_task`` inline, holding its engine's slot across a batch in ``held_engines``), the
others by the stream's worker.  A task's memory operands are checked against what its
process may touch by the device's memory (mdev.board.hbm), which holds the HBM, its
allocations and grants, and the pinned buffers and peers' HBM it maps.  Stream and event
slots of the control page are lent to hosts in blocks (mdev.board.slots): a host makes
and destroys streams and events in them without waiting for an answer.  A blocking request
(a host synchronising a stream) is parked as a waiter and answered by the thread that
completes the awaited task.  The control page lets hosts answer queries without asking.

The device knows its hosts' connections only as ``Connection``s: the Server
(mdev.board.serving) that reads them stands above it, and so do the modules that fill
the tables of mdev.board.tasktable it runs ops and answers requests from (they use the
device).  The device process's entry point (mdev.board.device_process) imports them all
before it builds the Device and serves it.
"""

from __future__ import annotations

import itertools
import os
import pickle
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Protocol

from mdev import errors as E
from mdev.errors import AclError
from mdev import status as S
from mdev.board.engines import Engine
from mdev.board.hbm import DeviceMemory
from mdev.naming import BoardPaths, create_fresh, tag_of
from mdev.board.slots import Lender, SlotPool
from mdev.board.stream import ContextState, DeviceStream
from mdev.board.tasktable import OPS, TaskFault
from mdev.kernel.api import Kernel, kernels_of
from mdev.memory import futex
from mdev.memory.segment import Segment

DMA_ENGINES = 2
DEFERRED = object()      # a request's answer that its handler sends later itself (rpc_wait)


class Connection(Protocol):
    """What the device asks of a host's connection (mdev.board.serving.ClientConn, which
    stands above this module): who sent on it, how many messages it was sent, and to send."""

    client: int
    pid: int
    command: str
    sent: int

    def send(self, message: tuple) -> None: ...


class Progress(threading.Condition):
    """What the device's blocked tasks wait on (Device.wait_until).  A task waiting for a
    notify waits on a condition of its notify's slot, which a record of that notify wakes
    (``notify_slot``); the others wait on this one, which every change wakes
    (``notify_others``: memory written, an event recorded).  Where each record woke every
    blocked task (a rank of 8 waits on 8 streams), it now wakes the one it releases.
    ``notify_all`` wakes every task, of either kind (a stream aborted, an object destroyed,
    a context stopped)."""

    def __init__(self, lock) -> None:
        super().__init__(lock)
        self.slots: dict[int, list] = {}       # notify slot -> [its condition, tasks waiting on it]

    def notify_all(self) -> None:
        super().notify_all()
        for cond, _ in self.slots.values():
            cond.notify_all()

    def notify_others(self) -> None:
        super().notify_all()

    def notify_slot(self, slot: int) -> None:
        entry = self.slots.get(slot)
        if entry is not None:
            entry[0].notify_all()

    @contextmanager
    def slot_condition(self, slot: int | None) -> Iterator[threading.Condition]:
        """The condition a task waiting for notify ``slot`` (None: for anything else) waits on."""
        if slot is None:
            yield self
            return
        entry = self.slots.get(slot)
        if entry is None:
            entry = self.slots[slot] = [threading.Condition(self._lock), 0]
        entry[1] += 1
        try:
            yield entry[0]
        finally:
            entry[1] -= 1
            if not entry[1]:
                del self.slots[slot]


@dataclass
class SyncWaiter:
    """A host's synchronisation parked until its targets are done (answered by ``_settle``)."""
    conn: Connection
    req: int
    targets: list            # [(slot, seq)]
    consume: bool = True


class Device:
    def __init__(self, paths: BoardPaths, index: int, topo, seal_key: bytes) -> None:
        self.paths = paths
        self.index = index
        self.topo = topo
        self.spec = topo.device(index)
        # the devices of this one's cluster node: its hosts' tasks run there and nowhere else
        self.node_devices: range = topo.node(topo.node_of(index)).devices
        self.seal_key = seal_key
        self.boot_ns = time.monotonic_ns()
        # names of this process's own (a predecessor's are public, so anyone could have
        # taken them): the HBM before the control page, and both before the record that
        # points to them: a peer that finds the page (STARTING) maps the HBM
        hbm, control = create_fresh(self._make_segments, f"device {index}'s segments")
        self.own_segments = [hbm.name, control.name]
        self.control = S.ControlPage(control)
        paths.record_device(index, tag_of(control.name))
        h = self.control.header
        h[S.H_MAGIC], h[S.H_DEVICE], h[S.H_PID] = S.MAGIC, index, os.getpid()
        h[S.H_HBM_TOTAL], h[S.H_BOOT_NS] = self.spec.hbm_bytes, self.boot_ns
        self.lock = threading.RLock()
        self.clients: dict[int, dict] = {}
        self.memory = DeviceMemory(index, paths, hbm, self.control, self.lock, self.clients, seal_key)
        self.progress = Progress(self.lock)
        self.watchers = 0
        self.streams: dict[int, DeviceStream] = {}
        self.stream_slots = Lender(S.MAX_STREAMS, S.STREAM_LIMIT)
        self.contexts: dict[tuple[int, int], ContextState] = {}
        self.sync_waiters: dict[int, list[SyncWaiter]] = {}
        self.engines = {"dma": Engine("dma", DMA_ENGINES),
                        "aic": Engine("aic", max(1, self.spec.cube)),
                        "aiv": Engine("aiv", max(1, self.spec.vector)),
                        "aicpu": Engine("aicpu", max(1, self.spec.aicpu))}
        self.kernels: dict[int, Kernel] = {}
        self.binaries: dict[int, list[int]] = {}      # binary id -> its kernels' function ids
        self._fids = itertools.count(1)
        self.events: dict[int, int] = {}        # slot -> uid of the live event in it
        self.notifies: dict[int, int] = {}
        self._uids = itertools.count(1)
        self.event_slots = Lender(S.MAX_EVENTS, S.MAX_EVENTS)
        self._free_notifies = SlotPool(S.MAX_NOTIFIES)
        self.main_conns: dict[int, Connection] = {}
        self._callbacks: dict[tuple[int, int], threading.Event] = {}
        self._callback_codes: dict[tuple[int, int], tuple[int, str]] = {}
        self._notify_owner: dict[int, int] = {}
        self.trace = None        # mdev.board.trace.Recorder while a host traces its tasks
        # Engines whose slot the reading thread holds for the small tasks it runs itself
        # (run_task inline): it keeps a slot from one task of a batch to the next instead of
        # taking and giving it back each time.  Here, beside the engines: run_task gives one
        # up as soon as a worker waits for the engine; the reader (mdev.board.serving), which
        # alone knows where a batch ends, calls release_held then and before any other message.
        self.held_engines: dict[str, Engine] = {}
        self.tasks_done = 0      # H_TASKS_DONE, counted here (a page word's += costs more)

    def _make_segments(self, tag: str) -> tuple[Segment, Segment]:
        """This process's HBM and control page, named with ``tag`` (FileExistsError, and
        nothing left, if either name is taken)."""
        hbm = Segment(self.paths.hbm(self.index, tag), self.spec.hbm_bytes, create=True)
        try:
            control = Segment(self.paths.control(self.index, tag), S.size_for(self.spec.hbm_bytes), create=True)
        except BaseException:
            hbm.close()
            hbm.unlink()
            raise
        return hbm, control

    # ------------------------------------------------------------------ clients
    def attach(self, conn: Connection) -> None:
        """A host process's task socket proved its client id (its hello): the process is
        a client of this device from now on, until release_client."""
        self.clients[conn.client] = {"pid": conn.pid, "command": conn.command}
        self.main_conns[conn.client] = conn
        self.control.header[S.H_CLIENTS] = len(self.clients)

    def release_held(self) -> None:
        """Give back the engine slots the reading thread kept for its small tasks."""
        held = self.held_engines
        while held:
            held.popitem()[1].release()

    def release_client(self, client: int) -> None:
        """Free everything a host process held here (it detached or died).  Memory its
        still-running tasks use is handed out again only once they have ended."""
        with self.lock:
            gone = [s for s in self.streams.values() if s.client == client]
            for stream in gone:
                self._destroy_stream(stream)
            self.memory.release_client(client)
            for key in [k for k in self.contexts if k[0] == client]:
                del self.contexts[key]
            for slot in self.event_slots.release(client):
                if slot in self.events:
                    self._drop_event(slot)
            self.stream_slots.release(client)
            self.control.header[S.H_STREAMS_LENT] = self.stream_slots.count
            self.control.header[S.H_EVENTS_LENT] = self.event_slots.count
            for slot in [slot for slot, owner in self._notify_owner.items() if owner == client]:
                self._release_slot(self.notifies, self._free_notifies, self._notify_owner, slot)
            self.control.header[S.H_NOTIFIES] = len(self.notifies)
            for key in [k for k in self._callbacks if k[0] == client]:
                self.callback_done(client, key[1], E.ACL_ERROR_RT_SOCKET_CLOSE, "the host process is gone")
            self.clients.pop(client, None)
            self.main_conns.pop(client, None)
            self.control.header[S.H_CLIENTS] = len(self.clients)
        for stream in gone:
            stream.halt(E.ACL_ERROR_RT_SOCKET_CLOSE, "the host process is gone")

    def rpc_release(self, conn, req) -> None:
        """The host process finalizes: everything it holds here goes now (its streams halted),
        so nothing of it runs once its aclFinalize has returned."""
        self.release_client(conn.client)

    # ------------------------------------------------------------------ streams
    def rpc_lease(self, conn, req, kind: str, want: int, back: list) -> list:
        """Lend the client up to ``want`` more slots of its ``kind`` ("stream" / "event")
        table, after taking ``back`` free ones back; also what a host asks to know the device
        has handled everything it sent before (want 0: its catch-up did that)."""
        lender, live, code, lent = {
            "stream": (self.stream_slots, self.streams, E.ACL_ERROR_RT_NO_STREAM_RESOURCE, S.H_STREAMS_LENT),
            "event": (self.event_slots, self.events, E.ACL_ERROR_RT_NO_EVENT_RESOURCE, S.H_EVENTS_LENT)}[kind]
        with self.lock:
            lender.take_back(conn.client, list(back), live)
            slots = lender.lend(conn.client, int(want))
            self.control.header[lent] = lender.count
        if want and not slots:
            raise AclError(code, f"device {self.index}: no {kind} left (all {lender.limit} are in use "
                           "or held in reserve by processes)")
        return slots

    def open_stream(self, client: int, slot: int, ctx: int, priority: int, flags: int) -> None:
        """A host made a stream in a slot of its lease (its first message about it)."""
        with self.lock:
            if not self.stream_slots.holds(client, slot) or slot in self.streams:
                return      # not its slot, or still in use: a broken or hostile host
            context = self.contexts.get((client, ctx))
            if context is None:
                context = self.contexts[(client, ctx)] = ContextState(client, ctx)
            gen = int(self.control.stream_gen[slot])
            stream_id = S.stream_id(slot, gen)
            self.control.stream_gen[slot] = gen + 1
            # the slot's words were cleared when it was freed (not now: its host may already
            # be sleeping on it); a stopped stop-on-failure context refuses the work of its
            # new streams too
            if context.stopped:
                self.control.stream_err[slot] = context.stopped
            stream = DeviceStream(self, slot, stream_id, client, context, int(priority), int(flags))
            self.streams[slot] = stream
            context.streams.add(stream)
            self.control.header[S.H_STREAMS] = len(self.streams)

    def close_stream(self, client: int, slot: int) -> None:
        """A host destroyed a drained stream (nothing of it runs any more)."""
        with self.lock:
            stream = self.streams.get(slot)
            if stream is None or stream.client != client:
                return
            self._destroy_stream(stream)
        stream.halt(E.ACL_ERROR_RT_STREAM_ABORT, f"stream {stream.stream_id} was destroyed")

    def rpc_destroy_stream(self, conn, req, slot: int) -> None:
        """aclrtDestroyStream(Force): once answered, no task of the stream touches memory."""
        with self.lock:
            stream = self.own_stream(conn, slot)
            self._destroy_stream(stream)
        stream.halt(E.ACL_ERROR_RT_STREAM_ABORT, f"stream {stream.stream_id} was destroyed")

    def own_stream(self, conn: Connection, slot: int) -> DeviceStream:
        """The stream in ``slot`` if it is the asking process's, else ACL_ERROR_RT_INVALID_HANDLE."""
        stream = self.streams.get(slot)
        if stream is None or stream.client != conn.client:
            raise AclError(E.ACL_ERROR_RT_INVALID_HANDLE, f"no stream in slot {slot}")
        return stream

    def _destroy_stream(self, stream: DeviceStream) -> None:
        """Call with the device lock held."""
        stream.close()
        c, slot = self.control, stream.slot
        # under the stream's done_lock too: a worker completing a task the destroy overtook
        # (after its last look at the running tasks, halt) looks under it whether the
        # stream still holds the slot, and must not write its progress into the cleared words
        with stream.done_lock:
            self.streams.pop(slot, None)
            sleepers = int(c.stream_sleepers[slot])
            # cleared for the slot's next stream, which its host may make as soon as it sees
            # the generation move on
            c.stream_done[slot] = c.stream_msgs[slot] = c.stream_sleepers[slot] = c.stream_wake[slot] = 0
            c.stream_err[slot] = 0
            c.stream_mt[slot] = 0
            c.stream_gen[slot] += 1
        stream.context.streams.discard(stream)
        # hosts parked on the stream must not wait forever: it is gone, nothing more will run
        # (one that counts itself after this look finds the stream destroyed before it sleeps)
        if sleepers:
            futex.wake(c.done_word(slot))
        waiters = self.sync_waiters.get(slot)
        if waiters:
            for waiter in waiters[:]:
                waiter.conn.send(("r", waiter.req, 0, (0, "", 0)))
            gone = {id(w) for w in waiters}
            self._drop_waiters(lambda w: id(w) in gone)
        self.sync_waiters.pop(slot, None)
        self.control.header[S.H_STREAMS] = len(self.streams)

    def rpc_set_failure_mode(self, conn, req, slot: int, mode: int) -> None:
        with self.lock:
            self.own_stream(conn, slot).failure_mode = mode

    def rpc_set_priority(self, conn, req, slot: int, priority: int) -> None:
        self.own_stream(conn, slot).priority = priority

    def rpc_abort(self, conn, req, slot: int, upto: int) -> None:
        """Drop the stream's queued tasks and stop the running one: a wait is interrupted, a
        kernel launch cut off memory (both fail with ACL_ERROR_RT_STREAM_ABORT)."""
        stream = self.own_stream(conn, slot)
        stream.aborting = True
        stream.discard(upto)
        stream.stop_running(E.ACL_ERROR_RT_STREAM_ABORT, f"stream {stream.stream_id} was aborted")
        with self.progress:
            self.progress.notify_all()
        if not stream.pending():
            stream.aborting = False
            self.complete(stream, max(upto, int(self.control.stream_done[slot])), 0, "")

    def rpc_end_stream(self, conn, req, slot: int, upto: int) -> None:
        """aclrtDestroyStreamForce, ahead of the destroy: the head task ends (mdev.board.stream:
        DeviceStream.end), the queue behind it is dropped; its host waits for that end."""
        stream = self.own_stream(conn, slot)
        stream.end(upto, E.ACL_ERROR_RT_STREAM_ABORT, f"stream {stream.stream_id} was destroyed")
        with self.progress:
            self.progress.notify_all()
        if not stream.pending():
            stream.aborting = False
            self.complete(stream, max(upto, int(self.control.stream_done[slot])), 0, "")

    def rpc_stop(self, conn, req, slot: int) -> None:
        """aclrtStreamStop: the running kernel is stopped (cut off memory), queued tasks stay;
        the stream reports ACL_ERROR_RT_INTERNAL_ERROR at its next synchronisation."""
        stream = self.own_stream(conn, slot)
        why = f"stream {stream.stream_id} was stopped (aclrtStreamStop)"
        stream.stop_running(0, why)       # the stopped task ends quietly: the stream reports the stop once
        with self.lock:
            # a stopped stop-on-failure context's failure is reported by its other streams;
            # this one reports its stop (1_stream_with_failure_mode: 507035, then 507000 here)
            if not self.control.stream_err[slot] or stream.context.stopped:
                self.control.stream_err[slot] = E.ACL_ERROR_RT_INTERNAL_ERROR
                stream.error_message = why
            self.progress.notify_all()

    def rpc_wait(self, conn, req, targets: list, consume: bool):
        """Answer when every (slot, seq) has completed; the reply carries the first error.
        A target whose stream (slot, stream id) is gone counts as reached: a destroy drains
        its stream first, and the slot's words were cleared or belong to a successor."""
        with self.lock:
            waiter = SyncWaiter(conn, req, [(slot, seq) for slot, seq, stream_id in targets
                                            if getattr(self.streams.get(slot), "stream_id", None) == stream_id],
                                consume)
            # count the watcher before looking: a worker completing the awaited task right
            # now either sees the count (and settles us under the lock) or finished before
            # the look below, which then sees its work done
            self.watchers += 1
            if self._settle(waiter):
                self.watchers -= 1
                return DEFERRED
            for slot, _ in waiter.targets:
                self.sync_waiters.setdefault(slot, []).append(waiter)
        return DEFERRED

    def cancel_waiters(self, conn: Connection, req: int | None = None) -> None:
        """Forget the synchronisations parked for ``conn`` (its host cancelled request
        ``req``, or every one: the connection closed)."""
        if req is None:
            self._drop_waiters(lambda w: w.conn is conn)
        else:
            self._drop_waiters(lambda w: w.conn is conn and w.req == req)

    def _drop_waiters(self, match) -> None:
        """Forget parked synchronisations (each counted once, whatever its number of slots)."""
        with self.lock:
            dropped = set()
            for waiters in self.sync_waiters.values():
                for w in [w for w in waiters if match(w)]:
                    waiters.remove(w)
                    dropped.add(id(w))
            self.watchers -= len(dropped)

    def _settle(self, waiter: SyncWaiter) -> bool:
        """Reply to ``waiter`` if all its targets are done (call with the lock held)."""
        done = self.control.stream_done
        if any(int(done[slot]) < seq for slot, seq in waiter.targets):
            return False
        code, message = 0, ""
        for slot, _ in waiter.targets:
            failure = self.stream_failure(slot, waiter.consume)
            if failure[0] and not code:
                code, message = failure
        main = self.main_conns.get(waiter.conn.client)
        waiter.conn.send(("r", waiter.req, 0, (code, message, main.sent if main else 0)))
        return True

    def stream_failure(self, slot: int, consume: bool) -> tuple[int, str]:
        """(code, message) of the failure stream ``slot`` holds, (0, "") if none; ``consume``
        clears it, as a synchronisation does -- except on a stopped context's streams, which
        keep reporting it (call with the lock held)."""
        err = self.control.stream_err
        code = int(err[slot])
        if not code:
            return 0, ""
        stream = self.streams.get(slot)
        if consume and not (stream and stream.context.stopped):
            err[slot] = 0
        return code, stream.error_message if stream else ""

    # ------------------------------------------------------------------ events and notifies
    def _take_slot(self, table: dict, free: SlotPool, owners: dict, client: int,
                   code: int, what: str) -> tuple[int, int]:
        if not free:
            raise AclError(code, f"device {self.index}: no {what} left")
        slot, uid = free.take(), next(self._uids)
        table[slot] = uid
        owners[slot] = client
        return slot, uid

    def _release_slot(self, table: dict, free: SlotPool, owners: dict, slot: int) -> None:
        table.pop(slot, None)
        owners.pop(slot, None)
        free.give(slot)

    def open_event(self, client: int, slot: int) -> None:
        """A host made an event in a slot of its lease."""
        with self.lock:
            if not self.event_slots.holds(client, slot) or slot in self.events:
                return
            c = self.control
            gen = int(c.event_gen[slot])
            # event_issued is its host's to write from now on: cleared when the slot was freed
            c.event_ts[slot] = c.event_done[slot] = c.event_reset[slot] = c.event_remote[slot] = 0
            self.events[slot] = S.event_uid(slot, gen)
            c.event_gen[slot] = gen + 1
            c.header[S.H_EVENTS] = len(self.events)

    def close_event(self, client: int, slot: int, uid: int) -> None:
        with self.lock:
            if self.events.get(slot) == uid and self.event_slots.holds(client, slot):
                self._drop_event(slot)
            self.progress.notify_all()   # waits on it are released

    def _drop_event(self, slot: int) -> None:
        del self.events[slot]
        c = self.control
        c.event_ts[slot] = c.event_done[slot] = c.event_reset[slot] = c.event_issued[slot] = 0
        c.event_remote[slot] = 0
        c.event_gen[slot] += 1
        self.control.header[S.H_EVENTS] = len(self.events)

    def rpc_create_notify(self, conn, req) -> tuple[int, int]:
        with self.lock:
            slot, uid = self._take_slot(self.notifies, self._free_notifies, self._notify_owner, conn.client,
                                        E.ACL_ERROR_RT_NO_NOTIFY_RESOURCE, "notifies")
            self.control.notify_rec[slot] = 0
            self.control.notify_taken[slot] = 0
            self.control.notify_mt[slot] = 0      # modelled ends of a former notify's records
            self.control.header[S.H_NOTIFIES] = len(self.notifies)
        return slot, uid

    def rpc_destroy_notify(self, conn, req, slot: int, uid: int) -> None:
        with self.lock:
            if self.notifies.get(slot) == uid and self._notify_owner.get(slot) == conn.client:
                self._release_slot(self.notifies, self._free_notifies, self._notify_owner, slot)
                self.control.header[S.H_NOTIFIES] = len(self.notifies)
            self.progress.notify_all()

    # ------------------------------------------------------------------ kernels
    def new_fid(self) -> int:
        """An id no function (kernel) or binary of this device had before."""
        return next(self._fids)

    def rpc_register_kernel(self, conn, req, payload: bytes) -> int:
        """A decorated kernel of a host program, shipped by value."""
        kernel = pickle.loads(payload)
        with self.lock:
            fid = self.new_fid()
            self.kernels[fid] = kernel
        return fid

    def rpc_load_binary(self, conn, req, source: str, filename: str) -> tuple[int, list]:
        """A kernel "binary": Python source whose kernels become functions of this device."""
        module = f"mdev_binary_{self.new_fid()}"
        namespace = {"__name__": module, "__file__": filename}
        try:
            exec(compile(source, filename, "exec", dont_inherit=True), namespace)
        except Exception as exc:
            raise AclError(E.ACL_ERROR_INVALID_PARAM, f"cannot load binary {filename}: {exc!r}")
        kernels = kernels_of(namespace, module)
        with self.lock:
            bin_id = self.new_fid()
            entries = []
            for kernel in kernels:
                fid = self.new_fid()
                self.kernels[fid] = kernel
                entries.append((kernel.name, fid, len(kernel.types)))
            self.binaries[bin_id] = [fid for _, fid, _ in entries]
        return bin_id, entries

    def rpc_unload_binary(self, conn, req, bin_id: int) -> None:
        with self.lock:
            gone = [self.kernels.pop(fid, None) for fid in self.binaries.pop(bin_id, [])]
        for kernel in gone:
            if kernel is not None:
                kernel.release()

    # ------------------------------------------------------------------ waiting inside tasks
    POLL_S = 0.002   # a wait on what other processes write without ringing (peer memory, their events)
    # a wait that every release wakes (a notify or event of this device: this process's
    # records wake it, other processes ring the doorbell) looks again only this often: for
    # the peers a collective's wait watches (CommGuard.PEER_CHECK_S) and a wake lost to a race
    WOKEN_S = 0.05
    BELL_S = 1.0     # the doorbell's thread looks again this often for a ring it missed

    def now_ns(self) -> int:
        return time.monotonic_ns() - self.boot_ns

    def wake(self) -> None:
        """Re-evaluate tasks blocked in wait_until other than notify waits (something they
        may wait for happened: memory written -- value waits re-check on every write --, an
        event recorded)."""
        if self.watchers:
            with self.progress:
                self.progress.notify_others()

    def wake_notify(self, slot: int) -> None:
        """Notify ``slot`` of this device was recorded: its waiting tasks look again."""
        if self.watchers:
            with self.progress:
                self.progress.notify_slot(slot)

    def answer_bell(self) -> None:
        """The doorbell's thread (started with the device where futexes exist): another
        device process recorded a notify or event of this device and rang its control page
        (ControlPage.ring): the waiting tasks look again, as after a record of our own."""
        c = self.control
        header, word = c.header, c.bell_word()
        seen, alarms = int(header[S.H_BELL]), int(header[S.H_ALARM])
        while True:
            futex.wait(word, seen, self.BELL_S)
            now = int(header[S.H_BELL])
            if now != seen:
                seen = now
                if self.watchers:
                    with self.progress:
                        if int(header[S.H_ALARM]) != alarms:     # a communicator failed: everyone looks
                            alarms = int(header[S.H_ALARM])
                            self.progress.notify_all()
                            continue
                        # the notifies recorded since: their waiting tasks
                        for slot in [s for s in self.progress.slots if c.notify_rec[s] > c.notify_taken[s]]:
                            self.progress.notify_slot(slot)
                        self.progress.notify_others()      # IPC events recorded by other devices

    def alarm(self) -> None:
        """A communicator's error word was set here: the blocked tasks of every device of the
        node look again now (a collective's waits watch their peers' error words), not at
        their next WOKEN_S, so a failure spreads along an operation at once."""
        for d in self.node_devices:
            try:
                page = self.memory.peer_control(d)
            except TaskFault:          # not running: nothing of it waits
                continue
            page.header[S.H_ALARM] += 1
            if d != self.index:
                page.ring()
        with self.progress:
            self.progress.notify_all()

    def wait_until(self, stream: DeviceStream, ready, timeout_s: float, what: str, woken: bool = False,
                   notify: int | None = None) -> None:
        """Block a stream worker until ``ready()``; no engine is held and no core is burnt.
        ``woken``: whatever makes ``ready()`` true wakes the device (see WOKEN_S); otherwise
        it is looked at every POLL_S.  ``notify``: the slot of the notify it waits for (it
        waits on that slot's condition, see Progress)."""
        deadline = time.monotonic() + timeout_s if timeout_s else None
        look = self.WOKEN_S if woken and futex.AVAILABLE else self.POLL_S
        header = self.control.header
        with self.progress, self.progress.slot_condition(notify) as cond:
            self.watchers += 1
            header[S.H_BELL_WATCHERS] = self.watchers
            try:
                while not ready():
                    if stream.interrupted:
                        raise TaskFault(E.ACL_ERROR_RT_STREAM_ABORT, f"stream {stream.stream_id} aborted "
                                        f"while waiting for {what}")
                    wait = look
                    if deadline is not None:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            raise TaskFault(E.ACL_ERROR_RT_TASK_TIMEOUT,
                                            f"wait for {what} timed out after {timeout_s} s")
                        wait = min(wait, remaining)
                    cond.wait(wait)
            finally:
                self.watchers -= 1
                header[S.H_BELL_WATCHERS] = self.watchers

    # ------------------------------------------------------------------ host callbacks
    def run_host_callback(self, stream: DeviceStream, callback: int, block: bool) -> None:
        conn = self.main_conns.get(stream.client)
        if conn is None:
            raise TaskFault(E.ACL_ERROR_RT_SOCKET_CLOSE, "the host process that owns the callback is gone")
        key = (stream.client, callback)
        done = threading.Event()
        if block:
            with self.lock:
                self._callbacks[key] = done
        conn.send(("cb", callback, stream.stream_id))
        if not block:
            return
        while not done.wait(0.1):
            if stream.interrupted:
                with self.lock:
                    self._callbacks.pop(key, None)
                raise TaskFault(E.ACL_ERROR_RT_STREAM_ABORT, "stream aborted while a host callback ran")
        code, message = self._callback_codes.pop(key, (0, ""))
        if code:
            raise TaskFault(code, message)

    def callback_done(self, client: int, callback: int, code: int, message: str) -> None:
        with self.lock:
            done = self._callbacks.pop((client, callback), None)
            if done is not None:
                self._callback_codes[(client, callback)] = (code, message)
                done.set()

    # ------------------------------------------------------------------ execution
    def run_task(self, stream: DeviceStream, op: str, args: tuple,
                 inline: bool = False) -> tuple[int, str] | None:
        """Run one task; with ``inline`` (the dispatcher's fast path) only if it is quick and
        its engine is free right now, else None and the stream's worker gets it."""
        fn = OPS.get(op)
        if fn is None:
            return E.ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT, f"unknown task {op!r}"
        if inline:
            # the dispatcher runs it: no free (or teardown) can come in until it is done
            if not fn.quick(args):
                return None
            name = fn.engine
            if name:
                held = self.held_engines
                engine = held.get(name)
                if engine is None:
                    engine = self.engines[name]
                    if not engine.try_acquire():
                        return None
                    held[name] = engine
                elif engine.waiters:     # a worker waits for it: it goes first (and this one after it)
                    del held[name]
                    engine.release()
                    return None
            return self._execute(stream, op, args, fn, None)
        engine = self.engines.get(fn.engine) if fn.engine else None
        memory = self.memory
        try:        # its location arguments on this device (mdev.taskspec); a short tuple fails in fn
            users = memory.pin([a[2] for i in fn.locations
                                if type(a := args[i]) is tuple and len(a) == 3 and a[0] == "d" and a[1] == self.index])
        except IndexError:
            users = []
        try:
            with stream.running(op):
                if engine is not None:
                    engine.acquire(stream.priority)
                    if stream.interrupted:      # aborted or torn down while it waited for the engine
                        engine.release()
                        return E.ACL_ERROR_RT_STREAM_ABORT, f"stream {stream.stream_id} stopped before {op} ran"
                return self._execute(stream, op, args, fn, engine)
        finally:
            memory.unpin(users)

    def _execute(self, stream: DeviceStream, op: str, args: tuple, fn, engine) -> tuple[int, str]:
        """Run ``fn`` and release its engine; a fault is the task's (code, message).  While
        tracing, the task is timed and recorded (mdev.board.trace)."""
        trace = self.trace
        if trace is not None:
            start = time.monotonic_ns()
            trace.begin(stream, op, args, start)    # before it writes: value waits see who wrote
        code, message = 0, ""
        try:
            fn(self, stream, *args)
        except TaskFault as fault:
            code, message = fault.code, fault.message
        except Exception as exc:
            code, message = self.internal_error(f"task {op}", exc)
        finally:
            if engine is not None:
                engine.release()
        if trace is not None and (trace := self.trace) is not None:     # (tracing may have stopped)
            trace.record(stream, op, args, start, time.monotonic_ns(), code)
        return code, message

    def internal_error(self, what: str, exc: BaseException) -> tuple[int, str]:
        """An emulator bug in a task: the stream gets 507000 and a line, the device log (this
        process's stderr, the board's log file) the whole traceback."""
        print(f"device {self.index}: {what} failed:", file=sys.stderr)
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
        return E.ACL_ERROR_RT_INTERNAL_ERROR, f"{what} failed: {exc!r}"

    def complete(self, stream: DeviceStream, seq: int, code: int, message: str, count: int = 1) -> None:
        """Tasks of ``stream`` up to ``seq`` are done (``count`` of them ran), the last with ``code``."""
        if self.streams.get(stream.slot) is not stream:
            return   # destroyed while its task ran: the slot may already be another stream's
        control = self.control
        main = self.main_conns.get(stream.client)
        if code:
            if main is not None:
                # exception info for the host's callbacks, sent before the task counts as done
                main.send(("exc", {"device": self.index, "stream": stream.stream_id, "task": seq,
                                   "code": code, "message": message}))
            with self.lock:
                # looked at again under the lock _destroy_stream clears the slot's words under
                if self.streams.get(stream.slot) is stream and not control.stream_err[stream.slot]:
                    control.stream_err[stream.slot] = code
                    stream.error_message = message
                if stream.context.stop_on_failure and not stream.context.stopped:
                    self._stop_context(stream.context, code, message)
        with stream.done_lock:      # the worker and the reading thread may both complete tasks
            if self.streams.get(stream.slot) is not stream:
                return   # destroyed since the look above: the slot's words are cleared for its next stream
            if main is not None and main.sent != stream.msgs:
                # messages to its host before this point (prints, callbacks) a sync waits for
                control.stream_msgs[stream.slot] = stream.msgs = main.sent
            # counted before they show as done: a host that synchronised reads them all
            self.tasks_done += count
            control.header[S.H_TASKS_DONE] = self.tasks_done
            if seq > int(control.stream_done[stream.slot]):
                control.stream_done[stream.slot] = seq
                if control.stream_sleepers[stream.slot] and seq >= control.stream_wake[stream.slot]:
                    futex.wake(control.done_word(stream.slot))
        if self.watchers:
            with self.progress:
                for waiter in list(self.sync_waiters.get(stream.slot, ())):
                    if self._settle(waiter):
                        for slot, _ in waiter.targets:
                            lst = self.sync_waiters.get(slot)
                            if lst and waiter in lst:
                                lst.remove(waiter)
                        self.watchers -= 1
                self.progress.notify_others()      # (a notify wait waits for its records only)

    def _stop_context(self, context: ContextState, code: int, message: str) -> None:
        """Stop-on-failure: no further task of the context runs; every stream reports ``code``."""
        context.stopped = code
        self.progress.notify_all()   # tasks of the context blocked in waits give up
        for other in context.streams:
            other.discard(other.received)
            if not self.control.stream_err[other.slot]:
                self.control.stream_err[other.slot] = code
                other.error_message = message
            if not other.pending():
                self.control.stream_done[other.slot] = max(int(self.control.stream_done[other.slot]), other.received)
                futex.wake(self.control.done_word(other.slot))

    # ------------------------------------------------------------------ introspection
    def rpc_stats(self, conn, req) -> dict:
        with self.lock:
            return {
                "device": self.index,
                "hbm_used": self.memory.allocator.used,
                "hbm_total": self.spec.hbm_bytes,
                "streams": len(self.streams),
                "clients": {c: dict(info) for c, info in self.clients.items()},
                "engines": {n: e.in_use for n, e in self.engines.items()},
                "engines_waiting": {n: e.waiting for n, e in self.engines.items()},
            }
