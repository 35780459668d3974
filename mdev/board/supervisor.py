"""The board supervisor: starts the device processes and keeps the board's books.

    host processes --(attach / status / segments / stop)--> supervisor
                                                              |  fork (mdev.board.fleet): at
                                                              |  start, or a cluster node's
                                                              v  at its first attach
                                              device 0 ... device N-1 processes

Hosts talk to devices directly; the supervisor only hands out client ids (sealed to the pid
the kernel reports for the client's socket, so a device can tell a host naming another's
id; and knows each client's cluster node: IPC does not cross nodes), seals the IPC imports
it grants (the exporting device checks the seal before an importer touches the memory), remembers each client's pinned
segments (unlinked when the client dies), watches client liveness, restarts a dead
device on request (telling its peers to drop their mappings of the dead one's memory),
and stops the board on request or, for a board started on demand, once it has been idle
for a while.  It holds the board's lock (mdev.residence) from its launcher's start
to its exit: one supervisor per board name.  On stop it removes every segment and file
of the board, the lock file last; if it dies instead, its devices do (device_process.main).
"""

from __future__ import annotations

import argparse
import fcntl
import gc
import json
import os
import secrets
import selectors
import signal
import socket
import sys
import threading
import time
import traceback

import psutil

from mdev import __version__, protocol
from mdev import errors as E
from mdev.errors import AclError
from mdev import residence
from mdev import status as S
from mdev.board.fleet import Fleet
from mdev.procfs import process_gone
from mdev.board.ipc_registry import SHAREABLE, IpcRegistry
from mdev import naming
from mdev.naming import BoardPaths
from mdev.board.proctitle import name_process
from mdev.memory import segment


# What the supervisor serves: a host's hello (its pid, its command line) and requests.
SHAPES = protocol.Shapes({"hello": "iS", "r": "isT"})
# Its messages are small: a frame past this is no host's, and a host process has at most
# PEER_BUFFERED bytes of partial frames buffered here across its connections.
MAX_FRAME = 1 << 20
PEER_BUFFERED = 4 * MAX_FRAME


class Client:
    def __init__(self, sock: socket.socket, peer_pid: int, buffers: protocol.PeerBuffers) -> None:
        self.sock = sock
        self.decoder = protocol.Decoder(SHAPES, MAX_FRAME, buffers, peer_pid)
        self.id = 0
        self.pid = 0
        self.command = ""
        self.segments: set[str] = set()
        self.peer_pid = peer_pid
        self.node = 0           # the cluster node the host process runs on


class Supervisor:
    def __init__(self, paths: BoardPaths, topo, lock_fd: int, on_demand: bool, idle_timeout: float,
                 owner_pid: int | None = None, eager: bool = False) -> None:
        self.paths = paths
        self.lock_fd = lock_fd          # the board's lock, taken by the launcher (residence)
        self.owner_pid = owner_pid      # stop when this process is gone (test suites)
        self.topo = topo
        self.on_demand = on_demand
        self.idle_timeout = idle_timeout
        self.authkey = secrets.token_bytes(32)
        # seals of client ids and IPC grants: known to this process and the devices it forks,
        # never written anywhere (every process of the user can read the authkey's file)
        self.seal_key = secrets.token_bytes(32)
        self.clients: dict[socket.socket, Client] = {}
        self.buffers = protocol.PeerBuffers(PEER_BUFFERED)     # partial frames per host process
        self.fleet = Fleet(paths, topo, self.authkey, self.seal_key)
        self.listener: socket.socket | None = None
        self.admission: protocol.Admission | None = None
        self.eager = eager or topo.node_count == 1     # else a node starts at its first attach
        self._next_client = 1
        self.ipc = IpcRegistry()
        self._peers_told: set[int] = set()     # dead devices whose peers dropped their mappings
        self._tellers: list[threading.Thread] = []
        self._running = True
        self._idle_since = time.monotonic()
        self.started = time.time()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Make the board's segments and files, all new (exclusive creation: the launcher
        cleared a dead predecessor's under the lock, and the segment names are new)."""
        os.ftruncate(self.lock_fd, 0)
        os.write(self.lock_fd, f"{os.getpid()}\n".encode())      # for messages (residence.holder)
        self.paths.record_tag()
        naming.write_private(self.paths.key, self.authkey.hex())
        # device processes are forked from here: frozen objects are never traversed by a
        # child's garbage collector, so their pages stay shared copy-on-write
        gc.freeze()
        if self.eager:
            for node in range(self.topo.node_count):
                self.fleet.start_node(node, (self.lock_fd,))
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            self.listener.bind(self.paths.socket)
        finally:
            os.umask(old)
        self.listener.listen(128)

    def serve(self) -> None:
        """The serving loop, until stopped or idle; whatever ends it, the board is shut down."""
        try:
            self._serve()
        finally:
            self.shutdown()

    def _serve(self) -> None:
        sel = self.selector = selectors.DefaultSelector()
        admission = self.admission = protocol.Admission(self.listener, self.authkey)
        sel.register(self.listener, selectors.EVENT_READ, None)
        sel.register(admission.waker, selectors.EVENT_READ, admission)
        last_check = time.monotonic()
        while self._running:
            for key, _ in sel.select(timeout=0.5):
                if key.data is None:
                    admission.admit()
                elif key.data is admission:
                    for sock in admission.admitted():
                        self._accept(sock)
                else:
                    try:
                        self._read(key.data)
                    except Exception:    # whatever a host sent, the board serves on
                        self._refuse(key.data, traceback.format_exc(limit=8))
            admission.expire()
            now = time.monotonic()
            if now - last_check >= 1.0:
                last_check = now
                self._check_clients()
                self._check_devices()
            if self.on_demand and not self.clients and now - self._idle_since > self.idle_timeout \
                    and admission.quiet():
                break
            if self.owner_pid and not psutil.pid_exists(self.owner_pid):
                break

    def shutdown(self, keep_lock: bool = False) -> None:
        """Stop the devices and remove everything of the board that start() made; then let
        go of the lock, removing its file, unless ``keep_lock`` (a failed start: its launcher
        holds the lock too, and the file must stay until it lets go)."""
        # the listener first: a host connecting while the devices stop is refused (and
        # starts the board anew once the lock is free) rather than admitted and cut off
        if self.listener is not None:      # None: the board failed before it listened
            self.listener.close()
        if self.admission is not None:
            self.admission.close()
        for client in list(self.clients.values()):
            self._drop(client)
        self.fleet.stop()
        residence.clear(self.paths)
        if not keep_lock:
            residence.release(self.paths, self.lock_fd, remove=True)

    def stop(self, *_) -> None:
        self._running = False

    # ------------------------------------------------------------------ clients
    def _accept(self, sock: socket.socket) -> None:
        """An authenticated connection (protocol.Admission) becomes a client."""
        # the kernel's word on who is at the other end: IPC pid checks and the client's
        # seal rely on it
        try:
            client = Client(sock, protocol.peer_credentials(sock)[0], self.buffers)
        except OSError:
            sock.close()
            return
        self.clients[sock] = client
        self.selector.register(sock, selectors.EVENT_READ, client)

    def _read(self, client: Client) -> None:
        messages = protocol.receive(client.sock, client.decoder)
        if messages is None:
            if client.decoder.refused:
                self._refuse(client, client.decoder.refused)
            else:
                self._drop(client)
            return
        for message in messages:
            if message[0] == "hello":
                continue
            _, req, op, args = message          # a request (SHAPES)
            try:
                result = getattr(self, "rpc_" + op)(client, *args)
                reply = ("r", req, 0, result)
            except AclError as exc:
                reply = ("r", req, exc.code, exc.message)
            except Exception as exc:
                traceback.print_exc()
                reply = ("r", req, E.ACL_ERROR_RT_INTERNAL_ERROR, repr(exc))
            try:
                client.sock.sendall(protocol.encode(reply))
            except OSError:
                self._drop(client)
                return

    def _refuse(self, client: Client, why: str) -> None:
        """Drop a client that sent what no host sends, saying why in the board's log
        (bounded: ``why`` may quote what it sent)."""
        print(f"supervisor: closed a connection of process {client.peer_pid}: {why[-4000:]}",
              file=sys.stderr, flush=True)
        self._drop(client)

    def _drop(self, client: Client) -> None:
        client.decoder.close()
        if self.clients.pop(client.sock, None) is None:
            return
        try:
            self.selector.unregister(client.sock)
        except (KeyError, ValueError, AttributeError):
            pass
        client.sock.close()
        for name in client.segments:
            segment.unlink(name)
        if client.segments:
            # devices keep the pinned buffers they copied with mapped, and a mapping keeps
            # the pages in RAM after the unlink: have them let go (only the client's node
            # ran its tasks)
            self._tell_devices("forget_segment", [(name,) for name in sorted(client.segments)],
                               self.topo.node(client.node).devices)
        self.ipc.drop_client(client.id)
        # idle time counts from the last attached process's leaving: a connection that never
        # attached (board status, smi) keeps the board up while it is open, but a board polled
        # by status queries still stops once idle
        if client.pid and not any(c.pid for c in self.clients.values()):
            self._idle_since = time.monotonic()

    def _tell_devices(self, op: str, calls: list[tuple], devices: range | None = None) -> None:
        """Send every started device (of ``devices``) the request ``op`` once per argument
        tuple of ``calls``, from a thread of its own: a busy device must not hold up this loop."""
        targets = [i for i, _ in self.fleet.running() if devices is None or i in devices]
        thread = threading.Thread(target=self._send_devices, args=(op, calls, targets), name=f"tell-{op}",
                                  daemon=True)
        thread.start()
        self._tellers = [t for t in self._tellers if t.is_alive()] + [thread]

    def _send_devices(self, op: str, calls: list[tuple], targets: list[int]) -> None:
        for index in targets:
            try:
                channel = protocol.connect(self.paths.device_socket(index), self.authkey,
                                           ("hello", 0, protocol.seal(self.seal_key, "client", 0, os.getpid()),
                                            "rpc", "supervisor"))
            except Exception:
                continue     # a device that is gone maps nothing
            try:
                for req, args in enumerate(calls, start=1):
                    channel.send(("r", req, op, args))
                for _ in calls:
                    channel.recv(timeout=5.0)
            except Exception:
                pass
            finally:
                channel.close()

    def _check_clients(self) -> None:
        """A client whose process is gone (even if a forked child kept its socket) is dropped."""
        for client in list(self.clients.values()):
            if client.pid and not psutil.pid_exists(client.pid):
                self._drop(client)

    def _inherited_fds(self) -> tuple:
        """What a device forked now must close: the board's listener, the clients' sockets.
        Tellers finish first: a child must not keep one's connection open either."""
        for thread in self._tellers:
            thread.join(10.0)
        return tuple([self.lock_fd, self.listener.fileno(), self.selector.fileno()] + self.admission.fds()
                     + [c.sock.fileno() for c in self.clients.values()])

    def _check_devices(self) -> None:
        for index, proc in self.fleet.running():
            if not proc.is_alive():
                self._mark_faulted(index)

    def _mark_faulted(self, index: int) -> None:
        """Tell hosts and devices reading the device's control page that its process is gone.

        Peer devices drop their mappings of its segments (once per death): a mapping keeps
        an unlinked segment's memory alive, and they re-open the successor's on next use."""
        try:
            page = S.ControlPage(segment.Segment(self.paths.control(index)))
            page.header[S.H_STATE] = S.STATE_FAULTED
            page.segment.close()
        except Exception:
            pass   # the page is gone too: hosts find the device unreachable anyway
        if index not in self._peers_told:
            self._peers_told.add(index)
            self._tell_devices("forget_peer", [(index,)])

    # ------------------------------------------------------------------ requests
    def rpc_attach(self, client: Client, command: str, node: int = 0) -> dict:
        """A host process joins, running on cluster node ``node`` (it reads the board's
        description from its file, BoardPaths.topology).  Its pid is its socket's; its
        ``seal`` proves its client id to the devices."""
        if not isinstance(node, int) or not 0 <= node < self.topo.node_count:
            raise AclError(E.ACL_ERROR_RT_INVALID_DEVICEID,
                           f"board {self.paths.name!r} has nodes 0..{self.topo.node_count - 1}, not {node!r}")
        if not self.fleet.node_started(node):
            self.fleet.start_node(node, self._inherited_fds())
        client.id, client.pid, client.command, client.node = self._next_client, client.peer_pid, command, node
        self._next_client += 1
        return {"client": client.id, "board": self.paths.name, "devices": self.topo.device_count,
                "seal": protocol.seal(self.seal_key, "client", client.id, client.pid)}

    def rpc_register_segment(self, client: Client, name: str) -> None:
        """A pinned buffer of the client, unlinked when it goes: only a name of its own pid
        (another's would be unlinked under it)."""
        if not (isinstance(name, str) and name.startswith(self.paths.pinned_prefix(client.pid))
                and "/" not in name[1:]):
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{name!r:.80} is not a pinned buffer name of "
                           f"process {client.pid}")
        client.segments.add(name)

    def rpc_unregister_segment(self, client: Client, name: str) -> None:
        client.segments.discard(name)

    def rpc_status(self, client: Client, memory: bool = False) -> dict:
        """The board's devices and attached processes; with ``memory``, each process's HBM
        in use per device too (``mdev smi``: it reads every device's page map)."""
        devices, hbm = [], {}               # hbm: client id -> {device: bytes}
        for index, proc in enumerate(self.fleet.procs):
            h, state = None, "off"          # off: its node has no host yet
            if proc is not None:
                try:
                    page = S.ControlPage(segment.Segment(self.paths.control(index)))
                    h = page.header.copy()
                    if memory is True and h[S.H_HBM_USED]:
                        for owner, nbytes in page.hbm_by_owner().items():
                            hbm.setdefault(owner, {})[index] = nbytes
                    page.segment.close()
                    state = S.STATE_NAMES.get(int(h[S.H_STATE]), "?")
                except Exception:
                    h, state = None, "lost"
                if not proc.is_alive():
                    state = "faulted"
            spec = self.topo.device(index)
            node, local = self.topo.local_device(index)
            devices.append({
                "id": index, "node": node, "local": local, "soc": spec.soc_name, "pid": proc.pid if proc else 0,
                "state": state,
                "hbm_total": spec.hbm_bytes,
                "hbm_used": int(h[S.H_HBM_USED]) if h is not None else 0,
                "streams": int(h[S.H_STREAMS]) if h is not None else 0,
                "tasks_done": int(h[S.H_TASKS_DONE]) if h is not None else 0,
            })
        clients = [{"id": c.id, "pid": c.pid, "command": c.command, "node": c.node, "hbm": hbm.get(c.id, {})}
                   for c in self.clients.values() if c.pid]
        return {"board": self.paths.name, "version": __version__, "topology": self.topo.name,
                "nodes": self.topo.node_count,
                "pid": os.getpid(), "on_demand": self.on_demand, "started": self.started, "devices": devices,
                "clients": clients}

    def rpc_ipc_export(self, client: Client, kind: str, device: int, detail: tuple, validate_pid: bool) -> str:
        return self.ipc.export(client.id, client.peer_pid, kind, device, detail, validate_pid)

    def rpc_ipc_set_pids(self, client: Client, key: str, pids: list) -> None:
        self.ipc.set_pids(client.id, key, pids)

    def rpc_ipc_import(self, client: Client, key: str, kind: str) -> dict:
        """The import's "seal" lets the importer attach the memory on its device (ipc_attach)."""
        info = self.ipc.import_(client.id, client.peer_pid, key, kind, lambda device: self._reaches(client, kind, device))
        if kind in ("mem", *SHAREABLE):
            offset, nbytes = info["detail"][0], info["detail"][1]
            info["seal"] = protocol.seal(self.seal_key, "import", client.id, info["device"], offset, nbytes)
        return info

    def _reaches(self, client: Client, kind: str, device: int) -> bool:
        """An IPC key names something on the importer's own server; a FABRIC handle names
        memory anywhere on the supernode fabric its server is on."""
        if kind == "fabric":
            return self.topo.fabric_reachable(self.topo.node(client.node).devices.start, device)
        return self.topo.node_of(device) == client.node

    def rpc_ipc_close(self, client: Client, key: str) -> str:
        return self.ipc.close(client.id, key)

    def rpc_restart_device(self, client: Client, index: int) -> int:
        """Fork a fresh process for device ``index`` if its process died; returns the pid of
        the device's (new or still running) process.  Everything of the dead process is gone:
        its HBM and control page are unlinked (hosts still mapping the old control page see
        it FAULTED; peer devices have dropped their mappings of both and map the new ones on
        next use), and IPC keys of its memory, events and notifies are closed.  The new
        process names its segments afresh: the old names are public, and another user may
        have taken them the moment they were unlinked."""
        if not isinstance(index, int) or not 0 <= index < self.topo.device_count:
            raise AclError(E.ACL_ERROR_RT_INVALID_DEVICEID, f"device {index!r} does not exist")
        proc = self.fleet.procs[index]
        if proc is None:
            self.fleet.start_node(self.topo.node_of(index), self._inherited_fds())
            return self.fleet.procs[index].pid
        if proc.is_alive() and not process_gone(proc.pid):
            return proc.pid
        # a killed process's main thread is a zombie (its sockets closed, hosts see it dead)
        # while its other threads still exit: it cannot be reaped yet, but it is dead
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join()
        self._mark_faulted(index)
        try:
            dead = self.paths.device_tag(index)
        except OSError:
            dead = None         # it died before it recorded any segment
        if dead is not None:
            segment.unlink(self.paths.control(index, dead))
            segment.unlink(self.paths.hbm(index, dead))
        try:
            os.unlink(self.paths.device_socket(index))
        except FileNotFoundError:
            pass
        self.ipc.drop_device(index)
        # peers may have re-mapped the dead segments since the fault was found: unlinked now,
        # their memory goes with these last mappings
        self._tell_devices("forget_peer", [(index,)])
        pid = self.fleet.respawn(index, self._inherited_fds()).pid
        self._peers_told.discard(index)
        return pid

    def rpc_stop(self, client: Client) -> None:
        self._running = False


def main(argv: list[str] | None = None) -> None:
    from mdev import topology

    parser = argparse.ArgumentParser(prog="mdev-supervisor")
    parser.add_argument("--name", required=True)
    parser.add_argument("--topology-file", required=True, help="board description (JSON, Topology.to_dict)")
    parser.add_argument("--on-demand", action="store_true")
    parser.add_argument("--idle-timeout", type=float, default=5.0)
    parser.add_argument("--ready-fd", type=int)
    parser.add_argument("--lock-fd", type=int, required=True,
                        help="the board's lock (mdev.residence), taken by the launcher")
    parser.add_argument("--owner-pid", type=int, help="stop when this process exits")
    parser.add_argument("--eager", action="store_true", help="start every node's devices now, not at "
                                                             "the node's first attach")
    args = parser.parse_args(argv)
    paths = BoardPaths(args.name)
    name_process(paths.name, "supervisor", "sup")
    try:
        # the launcher's lock is this process's too (one open file); a lock another process
        # holds fails here, before anything is made or removed: no second supervisor of a name
        fcntl.flock(args.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        sys.exit(f"board {paths.name!r}: --lock-fd {args.lock_fd} does not hold the board's lock ({exc})")
    with open(args.topology_file, encoding="utf-8") as f:
        topo = topology.from_dict(json.load(f), "<board>")
    sup = Supervisor(paths, topo, args.lock_fd, args.on_demand, args.idle_timeout, args.owner_pid, args.eager)
    signal.signal(signal.SIGTERM, sup.stop)
    signal.signal(signal.SIGINT, sup.stop)
    try:
        sup.start()
    except Exception as exc:
        traceback.print_exc()
        # the launcher still holds the lock and removes its file; the log is gone, so it
        # is sent the reason
        sup.shutdown(keep_lock=True)
        if args.ready_fd is not None:
            os.write(args.ready_fd, b"0" + str(exc).encode()[:4000])
        sys.exit(1)
    if args.ready_fd is not None:
        os.write(args.ready_fd, b"1")
        os.close(args.ready_fd)
    sup.serve()


if __name__ == "__main__":
    main()
