"""The device processes of a board: forked from the supervisor, a cluster node at a time.

    supervisor --start_node(k)--> fork node k's devices --> each writes "+" when it serves
                                                            (or "!" and why it cannot)
               --respawn(d)-----> fork a dead device's successor
               --stop()---------> SIGTERM every started device, SIGKILL what is left after 5 s

A one-node board starts all its devices with the board.  A cluster board starts a node's
devices when the first host process attaches to that node (``Supervisor.rpc_attach``): a
host sees only its own node's devices, and a device only ever works for hosts of its
node or for devices of nodes that have hosts (a collective's ranks join before they
talk), so a node nobody attached to has nothing to run.  ``eager`` starts every node at
once instead.  Children are forked from a process whose objects were frozen out of the
garbage collector (gc.freeze), so they share its pages copy-on-write.
"""

from __future__ import annotations

import multiprocessing
import os
import selectors
import time

from mdev import errors as E
from mdev.board import device_process
from mdev.naming import BoardPaths
from mdev.errors import AclError

READY_TIMEOUT = 60.0


class Fleet:
    """Every device process of a board, by board index (None: its node is not started)."""

    def __init__(self, paths: BoardPaths, topo, authkey: bytes, seal_key: bytes) -> None:
        self.paths, self.topo, self.authkey, self.seal_key = paths, topo, authkey, seal_key
        self.procs: list[multiprocessing.Process | None] = [None] * topo.device_count

    def started(self, index: int) -> bool:
        return self.procs[index] is not None

    def node_started(self, node: int) -> bool:
        return all(self.procs[d] is not None for d in self.topo.node(node).devices)

    def running(self) -> list[tuple[int, multiprocessing.Process]]:
        """(index, process) of every started device, alive or not."""
        return [(i, p) for i, p in enumerate(self.procs) if p is not None]

    def start_node(self, node: int, close_fds: tuple = ()) -> None:
        """Fork the node's devices that are not started yet and wait until they all serve."""
        todo = [d for d in self.topo.node(node).devices if self.procs[d] is None]
        self._spawn(todo, close_fds)

    def respawn(self, index: int, close_fds: tuple = ()) -> multiprocessing.Process:
        """A fresh process for device ``index`` (its predecessor is dead and reaped)."""
        self.procs[index] = None
        self._spawn([index], close_fds)
        return self.procs[index]

    def _spawn(self, indices: list[int], close_fds: tuple) -> None:
        # fork them all, then wait for them all: their start-up runs in parallel
        ctx = multiprocessing.get_context("fork")
        readers = []
        for index in indices:
            r, w = os.pipe()
            proc = ctx.Process(target=_device_child, name=f"mdev-{self.paths.name}-dev{index}",
                               args=(close_fds, self.paths, index, self.topo, self.authkey, self.seal_key, w,
                                     os.getpid()),
                               daemon=False)
            proc.start()
            os.close(w)
            self.procs[index] = proc
            readers.append((index, r))
        deadline = time.monotonic() + READY_TIMEOUT
        failed, reasons = [], set()
        with selectors.DefaultSelector() as sel:      # a big board's pipes are past select()'s 1024
            for index, r in readers:
                sel.register(r, selectors.EVENT_READ, index)
            waiting = len(readers)
            while waiting and time.monotonic() < deadline:
                for key, _ in sel.select(max(0.0, deadline - time.monotonic())):
                    answer = os.read(key.fd, 1024)
                    if answer != b"+":
                        failed.append(key.data)       # it died before it served
                        reasons.add(answer[1:].decode(errors="replace") or "it died")
                    sel.unregister(key.fd)
                    waiting -= 1
            late = [key.data for key in sel.get_map().values()]
            failed += late
            if late:
                reasons.add(f"not serving after {READY_TIMEOUT:.0f} s")
        for _, r in readers:
            os.close(r)
        if failed:
            for index in failed:
                self.procs[index].kill()
                self.procs[index].join(5)
            raise AclError(E.ACL_ERROR_RT_DRV_INTERNAL_ERROR,
                           f"device(s) {sorted(failed)[:8]} failed to start: {'; '.join(sorted(reasons))}")

    def stop(self) -> None:
        started = [p for _, p in self.running()]
        for proc in started:
            if proc.is_alive():
                proc.terminate()
        deadline = time.monotonic() + 5
        for proc in started:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join()


def _device_child(close_fds: tuple, *args) -> None:
    """A forked device: let go of the supervisor's sockets first (a device would never see
    a client's or the listener's connection close while it holds a copy) and of its board
    lock (a device holding it would keep a dead supervisor's board looking alive)."""
    for fd in close_fds:
        try:
            os.close(fd)
        except OSError:
            pass
    device_process.main(*args)
