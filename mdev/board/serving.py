"""Serving a device's hosts: their connections, the epoll loop that reads them, and the
dispatch of each message to the device it acts on.

    host process --connect--> listener --Admission (board key)--> ClientConn (pid: the kernel's)
                                                                       |
    epoll (Server.serve) --readable--> _read: receive + decode a batch of messages
                                          |
                                          v
                                      _dispatch, one message at a time, to the Device:
                                        "hello"  seal checked --> device.attach (task socket)
                                        "t"      stream.push: run at once, or the worker's
                                        "sc" "sd" "ec" "ed"  --> device.open_/close_stream/event
                                        "r"      catch up the task socket, then _request:
                                                 rpc_* of the device and its memory, REQUESTS
                                        "cbdone" "cancel"    --> device.callback_done/cancel_waiters
                                          |
                                          v  the batch ends
                                      device.release_held(); device.complete(stream, ...) once per
                                      stream for the tasks it ran at once
    EOF, a frame of the wrong shape (SHAPES, checked as it is decoded: mdev.frameshape), or
    any exception a message raises --> _refuse (logged) / _disconnect --> device.cancel_waiters /
    release_client

One thread reads every connection.  A host's task socket (role "main") carries its tasks
and its stream and event creations without answers; its other sockets carry requests.  A
request first reads what its process sent on the task socket before it (``_catch_up``), so
it finds that work done whatever order epoll reports the two sockets in.

Two things tie this reading thread to task execution, and they are split on purpose:

- The engine slots the reader keeps for the small tasks it runs itself stay on the device
  (``Device.held_engines`` / ``Device.release_held``): ``Device.run_task`` takes them
  beside the engines, and gives one up there when a worker waits for it.  Only the reader
  knows where a batch of messages ends, so the giving back is called from here: after the
  batch, and before any message that is not a task (a request may wait for a worker, which
  may need the engine).
- A task run at once that succeeded is counted on its stream (``DeviceStream.push`` with
  ``defer``), and completed here after the batch: one update of the stream's progress for
  a burst of small tasks instead of one per task.  The completion itself is the device's.

The hot path is a burst of small tasks: ``_read`` and ``_dispatch`` reach the device's
streams, completion and held engines through attributes bound once in ``Server.__init__``,
so a message costs the same Python calls as when this code was the device's own.

The device process's entry point (mdev.board.device_process) builds the Device, then a
Server over it, and serves until SIGTERM (``Server.stop``) or the supervisor is gone.  The
device (mdev.board.device) does not know this module.
"""

from __future__ import annotations

import os
import select
import socket
import sys
import threading
import time
import traceback

from mdev import protocol
from mdev import errors as E
from mdev.errors import AclError
from mdev import status as S
from mdev.board.device import DEFERRED, Device
from mdev.board.stream import DeviceStream
from mdev.board.tasktable import REQUESTS


# What a device serves (see Server._dispatch; mdev.frameshape for the field kinds):
# tasks, stream and event creations and destructions, requests, callback completions,
# hellos and cancellations.
SHAPES = protocol.Shapes({"t": "iisT", "sc": "iinn", "sd": "i", "ec": "i", "ed": "ii", "r": "isT",
                          "cbdone": "iiS", "hello": "issS", "cancel": "i"})


class ClientConn:
    """One socket from a host process (``client`` is -1 until its hello proved it)."""

    def __init__(self, sock: socket.socket, buffers: protocol.PeerBuffers) -> None:
        self.sock = sock
        self.client = -1
        try:
            self.pid = protocol.peer_credentials(sock)[0]
        except OSError:
            self.pid = 0
        self.decoder = protocol.Decoder(SHAPES, buffers=buffers, pid=self.pid)
        self.role = ""
        self.command = ""
        self.lock = threading.Lock()
        self.sent = 0
        self.gone = False            # disconnected: what was read of it before is not handled

    def send(self, message: tuple) -> None:
        data = protocol.encode(message)
        with self.lock:
            try:
                self.sock.sendall(data)
            except OSError:
                pass  # the host is gone; its cleanup runs when the dispatcher sees EOF
            self.sent += 1


class Server:
    """The reading thread of a device process: its sockets, and what each message asks."""

    HOUSEKEEPING_S = 0.5     # how often the serving loop expires handshakes and looks for its parent
    READ_SIZE = 1 << 18
    MAIN_WAIT_S = protocol.HANDSHAKE_TIMEOUT    # how long a request waits for its task socket's handshake

    def __init__(self, device: Device, authkey: bytes, supervisor: int) -> None:
        self.device = device
        self.authkey = authkey
        self.supervisor = supervisor        # its pid
        self._running = True
        # bound once: the per-message path reads these without a hop through the device
        # (the dicts are the device's own, never replaced)
        self.streams = device.streams
        self.main_conns = device.main_conns
        self.held = device.held_engines
        self.release_held = device.release_held
        self.complete = device.complete
        self.open_stream, self.close_stream = device.open_stream, device.close_stream
        self.open_event, self.close_event = device.open_event, device.close_event
        self.attach, self.callback_done = device.attach, device.callback_done
        self.cancel_waiters = device.cancel_waiters
        self.seal_key = device.seal_key
        # requests by name: the device's own and its memory's.  dir() of the classes: an
        # instance's would make its __dict__ a real (split) dict, on which Python 3.11 does
        # not specialise attribute reads (about 15 ns more for each, on every task)
        self.handlers = {name[4:]: getattr(owner, name) for owner in (device, device.memory)
                         for name in dir(type(owner)) if name.startswith("rpc_")}
        self.buffers = protocol.PeerBuffers()      # partial frames per host process

    def serve(self, ready_fd: int | None = None) -> None:
        device = self.device
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        path = device.paths.device_socket(device.index)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        old = os.umask(0o177)
        try:
            listener.bind(path)
        finally:
            os.umask(old)
        listener.listen(128)
        inode = os.stat(path).st_ino
        # epoll itself, not selectors: its select() is Python work on every wake-up, which
        # a small task's round trip pays in full
        self._poll = select.epoll()
        self._watched: dict[int, object] = {}      # fd -> listener / admission / ClientConn
        admission = self._admission = protocol.Admission(listener, self.authkey)
        self._watch(listener, listener)
        self._watch(admission.waker, admission)
        device.control.header[S.H_STATE] = S.STATE_ALIVE
        if ready_fd is not None:
            os.write(ready_fd, b"+")          # serving (Fleet._spawn)
            os.close(ready_fd)
        poll, watched = self._poll.poll, self._watched
        housekeeping = time.monotonic() + self.HOUSEKEEPING_S
        try:
            while self._running:
                for fd, _ in poll(self.HOUSEKEEPING_S):
                    what = watched.get(fd)
                    if type(what) is ClientConn:
                        try:
                            self._read(what)
                        except Exception:    # whatever a host sent, the device serves on
                            self._refuse(what, traceback.format_exc())
                    elif what is listener:
                        admission.admit()
                    elif what is admission:
                        self._take_admitted()
                now = time.monotonic()
                if now >= housekeeping:
                    housekeeping = now + self.HOUSEKEEPING_S
                    admission.expire()
                    if self.orphaned():
                        break  # the supervisor died (and the death signal was lost): do not outlive it
        finally:
            self._poll.close()
            device.control.header[S.H_STATE] = S.STATE_STOPPED
            admission.close()
            listener.close()
            try:
                # only our own socket file: a board restarted under the same name may
                # already have a new device listening at this path
                if os.stat(path).st_ino == inode:
                    os.unlink(path)
            except FileNotFoundError:
                pass

    def stop(self, *_) -> None:
        """End the serving loop (the device process's SIGTERM handler)."""
        self._running = False

    def orphaned(self) -> bool:
        """The supervisor that forked this process is gone (it was reparented)."""
        return os.getppid() != self.supervisor

    def _watch(self, sock: socket.socket, what: object) -> None:
        self._watched[sock.fileno()] = what
        self._poll.register(sock.fileno(), select.EPOLLIN)

    def _take_admitted(self) -> None:
        for sock in self._admission.admitted():
            self._watch(sock, ClientConn(sock, self.buffers))

    def _read(self, conn: ClientConn) -> bool:
        """Handle the messages readable on ``conn`` now; False if there were none (or it closed)."""
        try:
            messages = protocol.receive(conn.sock, conn.decoder, self.READ_SIZE, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False     # a request's catch-up read it first
        if messages is None:
            if conn.decoder.refused:
                self._refuse(conn, conn.decoder.refused)
            else:
                self._disconnect(conn)
            return False
        deferred: list[DeviceStream] = []
        held = self.held
        try:
            for message in messages:
                if conn.gone:
                    return False     # its process went while a message of it was handled
                try:
                    self._dispatch(conn, message, deferred)
                except Exception:
                    # a message its handler could not take (requests' own faults are answered
                    # inside _request): a broken or hostile peer, whose connection goes
                    self._refuse(conn, traceback.format_exc(limit=8))
                    return False
        finally:
            if held:
                self.release_held()
            for stream in deferred:
                count, stream.deferred_count = stream.deferred_count, 0
                self.complete(stream, stream.deferred_seq, 0, "", count)
        return True

    def _catch_up(self, conn: ClientConn) -> None:
        """Handle what the client sent on its task socket before this request: a host sends
        its tasks (and its stream and event creations) there without waiting, flushes them
        before every request, and its request must find them done -- the two sockets are
        read in whatever order epoll reports them.  A sent frame is in our receive queue
        once the host's send returned (AF_UNIX), so reading until it is empty is enough."""
        main = self.main_conns.get(conn.client) or self._main_arriving(conn)
        for _ in range(16):          # more than a socket buffer holds
            if main is None or self._watched.get(main.sock.fileno()) is not main or not self._read(main):
                return

    def _main_arriving(self, conn: ClientConn) -> ClientConn | None:
        """The task socket of ``conn``'s process when its hello is not read yet.  A host opens
        it before any other socket, but the handshake ends with the host's last word: its
        other socket's handshake, in another thread here, may end first and its request be
        read while the task socket is still handshaking, or taken with its hello unread.
        So read that process's new sockets (waiting for their handshakes, within
        MAIN_WAIT_S) until its task socket said hello; None if it has none."""
        deadline = time.monotonic() + self.MAIN_WAIT_S
        while True:
            self._take_admitted()
            for other in [w for w in self._watched.values()
                          if type(w) is ClientConn and w.client < 0 and w.pid == conn.pid]:
                self._read(other)
            main = self.main_conns.get(conn.client)
            if main is not None or not self._admission.holds(conn.pid) or time.monotonic() > deadline:
                return main
            time.sleep(0.0005)

    def _dispatch(self, conn: ClientConn, message: tuple, deferred: list) -> None:
        """One message of a host's connection (shape errors raise).  A task run here that
        succeeded is completed with the stream's others of the batch read (``deferred``):
        one update of its progress for a burst of small tasks."""
        kind = message[0]
        if conn.client < 0 and kind != "hello":
            raise ValueError("a message before the hello")
        if kind != "t" and self.held:
            self.release_held()
        if kind == "t":
            _, slot, seq, op, args = message
            stream = self.streams.get(slot)
            if stream is None or stream.client != conn.client:
                return
            if stream.context.stopped:
                self.complete(stream, seq, stream.context.stopped, "the context stopped after a failure")
            elif stream.push(seq, op, args, True) and stream.deferred_count == 1:
                deferred.append(stream)
        elif kind == "sc":
            _, slot, ctx, priority, flags = message
            self.open_stream(conn.client, slot, ctx, priority, flags)
        elif kind == "sd":
            self.close_stream(conn.client, message[1])
        elif kind == "ec":
            self.open_event(conn.client, message[1])
        elif kind == "ed":
            self.close_event(conn.client, message[1], message[2])
        elif kind == "r":
            if conn.role != "main":
                self._catch_up(conn)
                if conn.gone:
                    return           # its task socket closed meanwhile: the process is gone
            self._request(conn, message[1], message[2], message[3])
        elif kind == "cbdone":
            self.callback_done(conn.client, message[1], message[2], message[3])
        elif kind == "hello":
            _, client, seal, role, command = message
            if conn.client >= 0 or not protocol.sealed(self.seal_key, seal, "client", client, conn.pid):
                raise ValueError("a client id without the supervisor's seal for this process")
            conn.client, conn.role, conn.command = client, role, command
            if conn.role == "main":
                self.attach(conn)
        elif kind == "cancel":
            self.cancel_waiters(conn, message[1])

    def _request(self, conn: ClientConn, req: int, op: str, args: tuple) -> None:
        handler = self.handlers.get(op)
        try:
            if handler is not None:
                result = handler(conn, req, *args)
            elif op in REQUESTS:
                result = REQUESTS[op](self.device, conn, *args)
            else:
                raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"unknown request {op!r}")
        except AclError as exc:
            conn.send(("r", req, exc.code, exc.message))
        except Exception as exc:  # a bug here must not take the device down
            traceback.print_exc()
            conn.send(("r", req, E.ACL_ERROR_RT_INTERNAL_ERROR, f"device {self.device.index}: {exc!r}"))
        else:
            if result is not DEFERRED:
                conn.send(("r", req, 0, result))

    def _refuse(self, conn: ClientConn, why: str) -> None:
        """Close a connection that sent what no host sends, saying why in the device's log
        (bounded: ``why`` may quote what the peer sent)."""
        print(f"device {self.device.index}: closed a connection of process {conn.pid}: {why[-4000:]}",
              file=sys.stderr, flush=True)
        if not conn.gone:
            self._disconnect(conn)

    def _disconnect(self, conn: ClientConn) -> None:
        conn.gone = True
        conn.decoder.close()
        fd = conn.sock.fileno()
        if self._watched.get(fd) is conn:
            del self._watched[fd]
            try:
                self._poll.unregister(fd)
            except (OSError, ValueError):
                pass
        conn.sock.close()
        self.cancel_waiters(conn)
        if conn.role == "main":
            # the client's other connections go with its task socket: a request of theirs
            # waiting on a stream that is now gone would otherwise wait for ever
            for other in list(self._watched.values()):
                if isinstance(other, ClientConn) and other.client == conn.client:
                    self._disconnect(other)
            self.device.release_client(conn.client)
