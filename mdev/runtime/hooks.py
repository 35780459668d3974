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
"""

from __future__ import annotations

from typing import Callable

checker = None
on_attach: list[Callable[[object], None]] = []
on_start: list[Callable[[], None]] = []


def attached(board) -> None:
    for hook in list(on_attach):
        hook(board)
    started()


def started() -> None:
    for hook in list(on_start):
        hook()
