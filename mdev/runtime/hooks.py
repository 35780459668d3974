"""Where tools plug into the host runtime, so that the runtime never imports a tool.

    tool (mdev.sanitizer) --sets--> hooks.checker          runtime modules call its
                          --adds--> hooks.on_start           methods when it is set
    tracing (runtime.trace) --adds--> hooks.on_attach
    runtime: attach --> attached(board) --> each on_attach, then each on_start function
             aclInit --> started() --------------------------> each on_start function

``checker`` is the active checking tool (the sanitizer's ``Sanitizer``) or None; the
runtime's cost while none is active is one attribute test per hook.  ``on_attach``
functions get the new board attachment (tracing starts there); ``on_start`` functions run
when a process first attaches to a board or calls aclInit (the sanitizer turns itself on
there from ``MDEV_SANITIZE``).

``thread_id()`` is the calling thread's identity as the program knows it (the thread ids
aclrtSubscribeReport and capture take): Python's, unless a host agent thread acts for a
C thread of another process (``act_for``).
"""

from __future__ import annotations

import threading
from typing import Callable

checker = None
on_attach: list[Callable[[object], None]] = []
on_start: list[Callable[[], None]] = []
_acting = threading.local()


def thread_id() -> int:
    return getattr(_acting, "thread", None) or threading.get_ident()


def act_for(thread: int) -> None:
    """From now on this thread is the program's thread ``thread`` (a pthread_t)."""
    _acting.thread = thread


def attached(board) -> None:
    for hook in list(on_attach):
        hook(board)
    started()


def started() -> None:
    for hook in list(on_start):
        hook()
