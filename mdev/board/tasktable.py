"""The tables a device serves from: task ops and requests by name, the decorators that fill
them, and the fault a task raises.

    task module --@op(quick)--> OPS[name]        Device.run_task(stream, op, args)
                                 ^ its OpSpec (mdev.taskspec): engine, locations
                --@request----> REQUESTS[name]   Server._request(conn, req, op, args)

An op is a function ``op(device, stream, *args)``; it raises ``TaskFault`` to fail the task
(the failure surfaces at the next synchronisation).  A request handler is
``fn(device, conn, *args)``; its return value is the reply.  A module that defines ops or
requests registers them when it is imported, and the device process imports every such
module before it serves (mdev.board.device_process).  This module knows no device: the
device (mdev.board.device) runs its ops, the device's server (mdev.board.serving) answers its
requests with the device, and every task module above the device imports it too.
"""

from __future__ import annotations

from typing import Callable

from mdev import errors as E
from mdev.errors import AclError
from mdev.taskspec import SPECS


class TaskFault(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def dma_fault(message: str) -> TaskFault:
    return TaskFault(E.ACL_ERROR_RT_SYS_DMA, message)


OPS: dict[str, Callable] = {}
REQUESTS: dict[str, Callable] = {}


def op(quick: Callable[[tuple], bool] | None = None):
    """Register a task op by its name, which mdev.taskspec describes: the engine it occupies
    while running, the arguments that are locations (pinned while it runs).  ``quick`` says
    (from its arguments) whether it is short enough for the dispatcher to run it itself
    when its stream is idle, saving the hand-over to the stream's worker."""
    def register(fn: Callable) -> Callable:
        described = SPECS[fn.__name__]
        fn.engine = described.engine
        fn.locations = described.locations
        fn.quick = quick or (lambda args: False)
        OPS[fn.__name__] = fn
        return fn
    return register


def request(fn: Callable) -> Callable:
    """Register a device request handler ``fn(device, conn, *args)`` by its name, for features
    that live outside device.py (graphs, ...); its return value is the reply."""
    REQUESTS[fn.__name__] = fn
    return fn


def own_client(conn, client) -> None:
    """A request naming a client must come from that client's own connection."""
    if client != conn.client:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"client {client!r:.20} is not this connection's")
