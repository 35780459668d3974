"""The device process: its entry point, and every module whose ops and requests it serves.

    Fleet (supervisor) --fork--> main() --> Server(Device(...)).serve()   until SIGTERM or orphaned
                                 |
                                 +-- importing this module registered every op and request
                                     (mdev.board.tasktable): basic tasks, kernels, system
                                     tasks, operators (aclnn), collectives (step by step and whole),
                                     stored graphs, counting notifies,
                                     overflow status, the sanitizer, tracing

This module stands above all of them: the Device (mdev.board.device) finds ops and requests
in the tables alone, and the task modules use the Device, so none of them imports another
upwards.  The Server (mdev.board.serving) reads the hosts' connections and hands each
message to the Device.  The supervisor imports this module before it forks (mdev.board.fleet): its
devices start with everything loaded.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading

from mdev import residence
from mdev.board.proctitle import name_process
from mdev.board.device import Device
from mdev.naming import BoardPaths
from mdev.board.serving import Server
from mdev.memory import futex
# each registers its ops and requests when imported
from mdev.board import (cntnotify, collective_run, collectives, graphs, kernels, native, operators,  # noqa: F401
                        overflow, sanitize, systasks, tasks, trace)

PR_SET_PDEATHSIG = 1        # <linux/prctl.h>


def main(paths: BoardPaths, index: int, topo, authkey: bytes, seal_key: bytes, ready_fd: int,
         supervisor: int) -> None:
    """Entry point of a device process (forked by the supervisor, pid ``supervisor``).

    The supervisor's death ends it (SIGTERM by the kernel on Linux, else the serving loop's
    check), and it then removes what it made and, if nobody holds the board's lock, what
    the supervisor made and the hosts' pinned segments (residence.abandon): a SIGKILLed
    supervisor leaves nothing behind once its devices have gone."""
    name_process(paths.name, f"device {index}", f"d{index}")
    early: list[int] = []
    own: list[str] = []         # this process's segments, once made
    signal.signal(signal.SIGTERM, lambda *_: early.append(1))      # until the device can stop
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _end_with_parent()
    try:
        try:
            device = Device(paths, index, topo, seal_key)
            own[:] = device.own_segments
            server = Server(device, authkey, supervisor)
            if futex.AVAILABLE:      # other device processes ring when they record our notifies
                threading.Thread(target=device.answer_bell, name="doorbell", daemon=True).start()
        except Exception as exc:
            os.write(ready_fd, b"!" + f"{type(exc).__name__}: {exc}".encode()[:1000])    # the reason, to Fleet
            raise
        signal.signal(signal.SIGTERM, server.stop)
        if early or server.orphaned():
            server.stop()
        server.serve(ready_fd)
    finally:
        if os.getppid() != supervisor:
            residence.abandon(paths, own)


def _end_with_parent() -> None:
    """Have the kernel send SIGTERM when the supervisor dies (Linux PR_SET_PDEATHSIG; it
    follows the forking thread, and the supervisor forks from its main thread only)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
