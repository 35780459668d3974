"""A host process's attachment to a board and its links to device processes.

    user thread --request()--> per-thread socket --> device process --reply--> user thread
    user thread --submit()---> process-wide socket (ordered per stream) --> device process
    user thread --reads------> device control page (shm): stream progress, errors, usage

A host process runs on one cluster node of the board (``MDEV_NODE``, default 0) and sees
only that node's devices: the runtime numbers them 0..n-1 for the user, and everything
below the API (links, pointers, control pages, tasks) uses their board indices
(``BoardClient.devices``; see mdev.topology.model for the mapping).

The per-thread sockets let several threads block in synchronisation calls at once
without a dispatcher thread in between; the single task socket keeps every stream's
tasks in submission order.  A link is bound to one device process: once that process is
found dead, the link drops its HBM mapping and only reports 507901 (tasks naming the
dead device's memory included) until the runtime replaces it at a device reset.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import itertools
import os
import select
import socket
import sys
import threading
import time
import traceback
import weakref
from typing import Callable


from mdev import protocol
from mdev.procfs import process_gone
from mdev import errors as E
from mdev.errors import AclError
from mdev.board import launcher
from mdev import status as S
from mdev.naming import BoardPaths
from mdev.memory.segment import Segment, unlink


# handlers of device-initiated messages, by kind; runtime modules register theirs
MESSAGE_HANDLERS: dict[str, Callable[["DeviceLink", tuple], None]] = {}


def _command_line() -> str:
    return " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))[:200]



class ExitWatch:
    """Calling it says whether process ``pid`` has exited: a poll of its pidfd (well under a
    microsecond), or a look at /proc where pidfds are missing (ten times that).

    A pidfd reads only once the process's last thread has exited.  A SIGKILLed device
    process's main thread is a zombie at once, but its other threads (the doorbell's, the
    streams' workers) may take a while to finish dying on a loaded host: ``zombie=True``
    counts that zombie as exited too (a look at /proc), for the calls that decide what to do
    about a dead device (reset, restart), which must agree with the supervisor's view."""

    def __init__(self, pid: int) -> None:
        self.pid, self.fd, self._poller = pid, -1, None
        self._lock = threading.Lock()      # a poll object is not for two threads at once
        self._exited = False
        try:
            self.fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            return
        self._poller = select.poll()
        self._poller.register(self.fd, select.POLLIN)

    def __call__(self, zombie: bool = False) -> bool:
        if not self._exited:
            if self._poller is None:
                self._exited = process_gone(self.pid)
            else:
                with self._lock:
                    self._exited = bool(self._poller.poll(0))
                if zombie and not self._exited:
                    self._exited = process_gone(self.pid)
        return self._exited

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


# tasks gathered before they are written whatever else happens: a device starts on a burst
# before its end, and one write stays well inside a device's read
BATCH_FRAMES = 256
# ... or this many after a stream or event made or destroyed: the device frees slots in
# time for their reuse (SlotLease) without a write per message
POST_FRAMES = 16
class _Gathering(threading.local):
    links: set | None = None       # where this thread's gathered tasks wait for its own flush


# a class default, not getattr(..., None): a missing attribute costs an exception per task
_gathering = _Gathering()
_flushing: "weakref.WeakSet[DeviceLink]" = weakref.WeakSet()    # links whose flusher thread runs


@atexit.register
def _stop_flushers() -> None:
    """At exit, before the interpreter finalises: end every link's flusher thread.  A daemon
    thread stops dead where it next wants the interpreter once it finalises; a flusher stopped
    in the middle of a write would hold its link's lock for ever, and a program's ``__del__``
    that then queues or synchronises (acllite's resources) would wait on it for ever.  What is
    gathered afterwards goes out with the next flush (every synchronisation and request)."""
    for link in list(_flushing):
        link.stop_flusher()


@contextlib.contextmanager
def gathering():
    """Tasks this thread submits meanwhile stay gathered for the thread itself to send at the
    end, in one write per link, instead of waking each link's flusher thread (which would
    take the interpreter from this thread): for a thread submitting a known run of tasks
    (the C face's host agent running a ring of calls).  A lost device is then reported by
    the next call that reaches it, as for a flusher's failed write."""
    links: set = set()
    _gathering.links = links
    try:
        yield
    finally:
        _gathering.links = None
        for link in links:
            try:
                link.flush()
            except AclError:
                pass


LEASE_BLOCK = 16           # slots asked for at once
LEASE_KEEP = 4 * LEASE_BLOCK   # unused slots a process keeps; past that it gives a block back
LEASE_SPIN_S = 0.0002      # how long a reuse watches for the device to free its slot before asking


class SlotLease:
    """The slots of one device table (streams or events) this process holds: a stream or
    event is made in one of them and destroyed without waiting for the device, which learns
    of both in order with the tasks (DeviceLink.post).  A destroyed one's slot is reused only
    once the device has freed it (its generation on the control page, ``field``, moved on
    past it), so nothing reads the old occupant's progress words as the new one's.  It names
    no link (its link holds it: a cycle would keep a dead device's page mapped)."""

    def __init__(self, kind: str, field: str) -> None:
        self.kind, self.field = kind, field
        self.idle: collections.deque[tuple[int, int]] = collections.deque()   # (slot, its free generation)
        self.lock = threading.Lock()

    def take(self, link: "DeviceLink") -> tuple[int, int]:
        """A slot of this process's lease and the generation its new occupant gets."""
        gens = getattr(link.control, self.field)
        with self.lock:
            idle = self.idle
            if idle and int(gens[idle[0][0]]) == idle[0][1]:     # _head_free's first look, inline
                return idle.popleft()
            while not self._head_free(link, gens):
                # the device lags behind this process's destroys: a bigger lease lets the
                # next ones wait longer (the request also has the device catch up)
                self._ask(link, gens, LEASE_BLOCK if len(self.idle) < LEASE_KEEP - LEASE_BLOCK else 0)
            return self.idle.popleft()

    def give(self, link: "DeviceLink", slot: int, gen: int) -> None:
        """The occupant of ``slot`` (made at ``gen``) was destroyed: the slot is free once the
        device has seen that.  A process that destroyed many keeps only LEASE_KEEP of them."""
        with self.lock:
            self.idle.append((slot, gen + 2))
            if len(self.idle) > LEASE_KEEP:
                back = [self.idle.pop()[0] for _ in range(LEASE_BLOCK)]
                try:
                    link.request("lease", self.kind, 0, back)
                except AclError:
                    pass        # the device is gone, its slots with it

    def unused(self) -> int:
        return len(self.idle)

    def _head_free(self, link: "DeviceLink", gens) -> bool:
        if not self.idle:
            return False
        slot, gen = self.idle[0]
        if int(gens[slot]) == gen:
            return True
        link.flush()
        deadline = time.perf_counter() + LEASE_SPIN_S
        while time.perf_counter() < deadline:
            os.sched_yield()
            if int(gens[slot]) == gen:
                return True
        return False

    def _ask(self, link: "DeviceLink", gens, want: int) -> None:
        """Lend more slots (want > 0), or just wait until the device has handled every
        destroy sent so far (it answers a request only after that)."""
        try:
            slots = link.request("lease", self.kind, want, [])
        except AclError as exc:
            if not self.idle or exc.code == E.ACL_ERROR_RT_SOCKET_CLOSE:
                raise
            slots = link.request("lease", self.kind, 0, [])     # the device is full: use ours
        self.idle.extendleft((slot, int(gens[slot])) for slot in slots)
        if slots:
            return
        slot, gen = self.idle[0]
        now = int(gens[slot])
        if now != gen:
            # every destroy is handled now, so the device never made this one (a lost
            # message): the slot is free at the generation it shows, or not ours to use
            self.idle.popleft()
            if now % 2 == 0:
                self.idle.appendleft((slot, now))


class DeviceLink:
    """This process's connection to one device process."""

    def __init__(self, board: "BoardClient", index: int) -> None:
        self.board = board
        self.index = index
        try:
            # the names of the device's current process, read once: its successor's are others
            self.segment_tag = board.paths.device_tag(index)
            self.control = S.ControlPage(Segment(board.paths.control(index, self.segment_tag)))
        except Exception as exc:   # the device is being restarted, or the board is gone
            raise self.lost(exc) from exc
        self.pid = int(self.control.header[S.H_PID])     # the device process this link talks to
        self._exit = ExitWatch(self.pid)
        self.lock = threading.Lock()
        self._task_sock: socket.socket | None = None
        self._out: list[bytes] = []          # task frames gathered for one write
        self._burst = False                  # a task went out since the last flush
        self._kick = threading.Lock()        # released: the flusher has work
        self._kick.acquire()
        self._kicked = False
        self._flusher: threading.Thread | None = None     # (stopped at exit: _stop_flushers)
        self._local = threading.local()
        self._requests = itertools.count(1)
        self._hbm: Segment | None = None
        self.received = 0                    # device messages handled by the reader
        self._received_cond = threading.Condition()
        self._reader_done = False
        self._gone = False
        self._sockets: list[socket.socket] = []    # every socket opened, for close_after_fork
        self.stream_slots = SlotLease("stream", "stream_gen")
        self.event_slots = SlotLease("event", "event_gen")

    # -- sockets
    def _open(self, role: str) -> protocol.Channel:
        # never reach a restarted device through the link of a dead one: its handles
        # (stream slots, offsets) would name the successor's objects
        self.check_alive()
        try:
            channel = protocol.connect(self.board.paths.device_socket(self.index), self.board.authkey,
                                       ("hello", self.board.client_id, self.board.seal, role, _command_line()))
        except (OSError, EOFError, protocol.ChannelClosed) as exc:     # ChannelClosed: the hello's write
            raise self.lost(exc) from exc
        self._sockets.append(channel.sock)
        return channel

    def lost(self, why) -> AclError:
        return AclError(E.ACL_ERROR_RT_SOCKET_CLOSE, f"device {self.index} is not reachable: {why}")

    def check_alive(self, exact: bool = False) -> None:
        """507901 once the device process is gone.  Queries call it before they answer from
        the control page, whose counters a dead device left where they were.  Its death is
        seen at once, before the supervisor marks the page FAULTED: by the reader of the task
        socket (the kernel closes a dead process's sockets before anything else of its exit
        shows), or, while this process has no task socket to it, by a poll of its pidfd.
        ``exact``: the pidfd is polled even with a task socket open, whose reader may not
        have run yet on a busy host -- for queries, which answer from the page, and for the
        host's own reads and writes of the HBM.  Synchronisations leave it to the reader and
        to their sleep's slices (the poll would add 1.3 us to every idle sync).  A death seen
        so is remembered for every later check."""
        if self.control.state != S.STATE_ALIVE:
            self._drop_hbm()
            raise self.lost(S.STATE_NAMES.get(self.control.state, "unknown state"))
        if exact and not self._gone and self._exit():
            self._gone = True
        if self._reader_done or self._gone or (self._task_sock is None and self._exit()):
            self._drop_hbm()
            raise self.lost("the device process is gone")

    def dead(self) -> bool:
        """The device process of this link is gone (killed, crashed, or its board stopped),
        even before the supervisor marked its control page FAULTED, or dying (its main
        thread a zombie, see ExitWatch)."""
        gone = self.control.state != S.STATE_ALIVE or self._reader_done or self._gone or self._exit(zombie=True)
        if gone:
            self._drop_hbm()
        return gone

    def _check_peers(self, args: tuple) -> None:
        """A task naming another device's memory must not reach a restarted one: the old
        offsets would land in the successor's allocations (the device re-maps its peers)."""
        index = self.index
        for arg in args:
            if type(arg) is tuple and len(arg) == 3 and arg[1] != index and arg[0] == "d":
                peer = self.board.links.get(arg[1])
                if peer is not None:
                    peer.check_alive()

    def submit(self, stream, op: str, *args) -> int:
        """Queue a task on ``stream``; returns its sequence number.

        The first task of a burst is sent at once (a lone task, or one a synchronisation
        follows, costs no more than before); the ones after it are gathered and sent in one
        write by whichever comes first: BATCH_FRAMES of them, a flush (every request,
        synchronisation and query flushes), or the link's flusher thread, woken by the
        first gathered task, which gets the interpreter as soon as the submitting thread
        blocks and at the latest after one switch interval (5 ms).
        """
        if self._reader_done or self._gone:      # the device died (a send may still get through)
            raise self.lost("the device process is gone")
        self._check_peers(args)
        if self._task_sock is None:
            self.ensure_main()
        with self.lock:
            # counted before it is sent: a thread that reads how many tasks a stream was given
            # (trace host records) must never see fewer than have run
            seq = stream.seq = stream.seq + 1
            self._queue(protocol.encode_task(stream.slot, seq, op, args))
            return seq

    def post(self, message: tuple) -> None:
        """Send a message the device handles in order with this process's tasks and does not
        answer (a stream or event made or destroyed).  Always gathered: nothing waits for it
        but later tasks and requests, which send it along."""
        if self._reader_done or self._gone:
            raise self.lost("the device process is gone")
        if self._task_sock is None:
            self.ensure_main()
        with self.lock:
            self._queue(protocol.encode_message(message), start=False)

    def _queue(self, frame: bytes, start: bool = True) -> None:
        """Send ``frame`` (with whatever was gathered before it) now if it starts a burst,
        else gather it (call with the lock held)."""
        out = self._out
        if self._burst or not start:
            out.append(frame)
            if len(out) >= (BATCH_FRAMES if start else POST_FRAMES):
                self._send_gathered()
            elif not self._kicked:
                # a thread's gathering is looked up only here: once the flusher is kicked, it
                # sends this frame anyway (a thread-local lookup per task cost 2% of a small task)
                if (links := _gathering.links) is not None:
                    links.add(self)
                else:
                    self._wake_flusher()
        else:
            self._burst = True
            if out:
                out.append(frame)
                self._send_gathered()
            else:
                self._send(frame)

    def flush(self) -> None:
        """Send the gathered tasks now (before anything that must see them on the device)."""
        if self._out or self._burst:
            with self.lock:
                self._send_gathered()
                self._burst = False

    def end_burst(self) -> None:
        """The program waited for the device and found its work done: its next task starts a
        burst (written at once) instead of being gathered.  The frames gathered so far (a
        stream made, say) stay gathered: nothing waits for them yet.  A plain store, not
        under the lock: racing another thread's submit, it only decides whether that task
        is gathered or written with what was gathered before it."""
        self._burst = False

    def _send_gathered(self) -> None:
        """Send the gathered frames in one write (call with the lock held).  They leave
        ``_out`` only once sent: flush() looks at it without the lock, and must not find it
        empty while the flusher thread is still writing what it held (a request would then
        overtake the stream creation it names)."""
        out = self._out
        if out:
            self._send(b"".join(out))
            out.clear()

    def _send(self, data: bytes) -> None:
        try:
            self._task_sock.sendall(data)
        except (OSError, AttributeError) as exc:     # AttributeError: closed meanwhile
            self._gone = True
            raise self.lost(exc) from exc

    def _flush_later(self) -> None:
        """The flusher thread: sends what submitters gathered once nobody else did."""
        while True:
            self._kick.acquire()
            with self.lock:
                self._kicked = False
                if self._task_sock is None:
                    return
                try:
                    self._send_gathered()
                except AclError:
                    pass     # the device is gone: the next call of a user thread reports it
                self._burst = False
                if self._flusher is None:       # stopped (stop_flusher)
                    return

    def stop_flusher(self) -> None:
        """End the flusher thread once it sent what it holds (from then on, gathered tasks
        wait for a flush)."""
        flusher = self._flusher
        if flusher is None or not flusher.is_alive():     # (a forked child's copy: its parent's)
            return
        with self.lock:
            self._flusher = None
            self._wake_flusher()
        flusher.join(1.0)

    def _wake_flusher(self) -> None:
        """Wake the flusher thread, unless it is woken already (call with the lock held)."""
        if not self._kicked:
            self._kicked = True
            self._kick.release()

    def ensure_main(self) -> socket.socket:
        """Open the task socket: the device ties this process's resources to it.

        The device also talks back on it (callbacks to run, kernel prints, exception
        info), so a reader thread serves it for as long as it is open.
        """
        with self.lock:
            if self._task_sock is None:
                self._task_sock = self._open("main").sock
                threading.Thread(target=self._read_main, args=(self._task_sock,), daemon=True,
                                 name=f"mdev-dev{self.index}-reader").start()
                self._flusher = threading.Thread(target=self._flush_later, daemon=True,
                                                 name=f"mdev-dev{self.index}-flusher")
                self._flusher.start()
                _flushing.add(self)
            return self._task_sock

    def _read_main(self, sock: socket.socket) -> None:
        decoder = protocol.Decoder()
        while True:
            messages = protocol.receive(sock, decoder)
            if messages is None:
                with self._received_cond:
                    self._reader_done = True
                    self._received_cond.notify_all()
                self._drop_hbm()
                return
            for message in messages:
                handler = MESSAGE_HANDLERS.get(message[0])
                try:
                    if handler is not None:
                        handler(self, message)
                except Exception:
                    traceback.print_exc()
                with self._received_cond:
                    self.received += 1
                    self._received_cond.notify_all()

    def wait_received(self, count: int, timeout: float = 10.0) -> None:
        """Wait until the reader has handled the device's first ``count`` messages, so that a
        kernel's prints and exception callbacks are done when a synchronisation returns.
        Once the interpreter finalises (after the atexit functions: ``__del__`` methods of a
        program's globals), the reader, a daemon thread, runs no more -- it ends where it
        next wants the interpreter, with what it read -- and there is nothing to wait for
        (each synchronisation of an exiting program waited out the timeout instead)."""
        if self.received >= count or sys.is_finalizing():
            return
        with self._received_cond:
            self._received_cond.wait_for(lambda: self.received >= count or self._reader_done, timeout)

    def send_on_main(self, message: tuple) -> None:
        """Send a non-task message (e.g. a callback's completion) on the task socket."""
        self.ensure_main()
        with self.lock:
            self._send_gathered()
            self._send(protocol.encode(message))

    def request(self, op: str, *args, timeout: float | None = None):
        """Ask the device and wait for its answer; AclError on failure, TimeoutError on expiry."""
        channel = getattr(self._local, "channel", None)
        if channel is None:
            self.ensure_main()
            channel = self._local.channel = self._open("rpc")
        req = next(self._requests)
        self.flush()       # the device sees this process's tasks before its request
        try:
            channel.send(("r", req, op, args))
            while True:
                try:
                    message = channel.recv(timeout)
                except TimeoutError:
                    channel.send(("cancel", req))
                    raise
                if message[1] == req:
                    break   # older replies belong to requests that timed out
        except protocol.ChannelClosed as exc:
            self._local.channel = None
            self._gone = True       # the device closed a socket: only its death does that
            self._drop_hbm()
            raise self.lost(exc) from exc
        _, _, code, value = message
        if code:
            raise AclError(code, value)
        return value

    def hbm(self) -> Segment:
        """The device's HBM, mapped on first use; never the HBM of a restarted successor."""
        seg = self._hbm
        if seg is None:
            with self.lock:
                seg = self._hbm
                if seg is None:
                    self.check_alive()
                    try:
                        seg = Segment(self.board.paths.hbm(self.index, self.segment_tag))
                    except Exception as exc:   # unlinked: the device is gone
                        raise self.lost(exc) from exc
                    if self.control.state != S.STATE_ALIVE:
                        # it died while we mapped: its memory is lost
                        raise self.lost("the device process is gone")
                    self._hbm = seg
        return seg

    def _drop_hbm(self) -> None:
        """The device died: let go of its HBM, whose memory lives as long as a mapping does.
        Dropped, not closed: another thread may be copying through it right now."""
        self._hbm = None

    def close(self) -> None:
        try:
            self.flush()
        except AclError:
            pass          # the device is gone: nothing gathered can reach it
        with self.lock:
            if self._task_sock is not None:
                try:
                    self._task_sock.shutdown(socket.SHUT_RDWR)   # wakes a callback reader
                except OSError:
                    pass
                self._task_sock.close()
                self._task_sock = None
                self._wake_flusher()        # it sees no socket and ends
        channel = getattr(self._local, "channel", None)
        if channel is not None:
            channel.close()
            self._local.channel = None
        for seg in (self._hbm, self.control.segment):
            if seg is not None:
                seg.close()
        self._exit.close()


def node_from_environment() -> int:
    """The cluster node this process runs on: ``MDEV_NODE`` (default 0)."""
    text = os.environ.get("MDEV_NODE", "").strip() or "0"
    try:
        return int(text)
    except ValueError:
        raise AclError(E.ACL_ERROR_RT_INVALID_DEVICEID, f"MDEV_NODE={text!r} is not a node number") from None


class BoardClient:
    """Attachment of this process to a board (started on demand when absent), as a host
    process of one of its cluster nodes."""

    def __init__(self, name: str | None = None) -> None:
        node = node_from_environment()
        self.paths = BoardPaths(name)
        try:
            channel = launcher.connect(self.paths, _command_line())
        except launcher.BoardError:
            if os.environ.get("MDEV_AUTOSTART", "1") == "0":
                raise
            launcher.start(self.paths.name, on_demand=True)
            channel = launcher.connect(self.paths, _command_line())
        self._channel = channel
        self._lock = threading.Lock()
        self.authkey = launcher.read_key(self.paths)
        info = self.request("attach", _command_line(), node)
        self.client_id: int = info["client"]
        self.seal: str = info["seal"]        # proves the client id to the devices
        self.topology = launcher.read_topology(self.paths)
        self.node = self.topology.node(node)
        self.devices: range = self.node.devices     # board indices of the devices it sees
        # device index -> its open link; the runtime's hot paths read it without a call,
        # everything else opens or drops links through link() and drop_link()
        self.links: dict[int, DeviceLink] = {}

    def request(self, op: str, *args):
        """Ask the supervisor; its refusals come back as AclError with their code."""
        with self._lock:
            try:
                self._channel.send(("r", 0, op, args))
                _, _, code, value = self._channel.recv()
            except protocol.ChannelClosed as exc:
                self._release_pinned_names()
                raise AclError(E.ACL_ERROR_RT_SOCKET_CLOSE, f"board {self.paths.name!r} supervisor is gone: {exc}")
        if code:
            raise AclError(code, value)
        return value

    def _release_pinned_names(self) -> None:
        """The supervisor is gone, so nobody would unlink this process's pinned segments when
        it exits: unlink them now (their pages stay mapped here until freed)."""
        mine = self.paths.pinned_prefix(os.getpid())
        for name in self.paths.segments():
            if name.startswith(mine):
                unlink(name)

    def link(self, device: int) -> DeviceLink:
        link = self.links.get(device)
        if link is None:
            with self._lock:
                link = self.links.get(device)
                if link is None:
                    link = self.links[device] = DeviceLink(self, device)
        return link

    def drop_link(self, device: int) -> None:
        """Forget the link to a device whose process died; the next use opens a new one."""
        with self._lock:
            link = self.links.pop(device, None)
        if link is not None:
            link.close()
            for sock in link._sockets:     # other threads' request sockets too
                try:
                    sock.close()
                except OSError:
                    pass

    def close(self) -> None:
        for link in self.links.values():
            link.close()
        self.links.clear()
        self._channel.close()

    def close_after_fork(self) -> None:
        """In a forked child: close the child's copies of the parent's sockets.

        A device frees a process's memory and streams when that process's task socket
        closes; a child keeping a copy open would keep the parent's resources alive after
        the parent exits or dies.  Closing the copies does not disturb the parent's
        connections.  No locks: a parent thread may have held one at fork time.
        """
        for link in list(self.links.values()):
            link._out = []          # the parent's tasks: the parent sends them
            link._flusher = None    # and its flusher thread is the parent's
            for sock in link._sockets:
                sock.close()
        self._channel.close()
