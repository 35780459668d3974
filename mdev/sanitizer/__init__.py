"""mdev's sanitizer: memcheck, racecheck, initcheck and synccheck over the CANN runtime API.

    MDEV_SANITIZE=memcheck,racecheck,initcheck,synccheck python prog.py   (or "all")
    mdev run --sanitize all prog.py

or, inside a program or test::

    with mdev.sanitizer.checking("racecheck") as reports:
        ...                      # the calls to check
    assert not reports           # filled when the block ends

(``enable`` / ``disable`` do the same without a block).  Under ``MDEV_SANITIZE`` the
checking is the process's, from its start to its exit: a block (or enable / disable)
inside it gives the reports made in it and leaves the checking on, so the summary at exit
-- and ``mdev run --sanitize``'s exit status -- counts every report.  Reports go to stderr
as they are found (and to ``MDEV_SANITIZE_LOG`` if set); an error summary is printed when
the process exits.  See ``session`` for how the runtime feeds it, ``order`` for the
happens-before model the race and sync checks stand on.
"""

from __future__ import annotations

import atexit
import contextlib
import os

from mdev.runtime import hooks
from mdev.sanitizer.report import Report

CHECKS = ("memcheck", "racecheck", "initcheck", "synccheck")


def __getattr__(name: str):
    if name == "active":     # the process's Sanitizer while one runs (the runtime's hook)
        return hooks.checker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def checks_of(spec: str) -> set[str]:
    """The checks a MDEV_SANITIZE value names; ValueError for an unknown one."""
    names = {n.strip().lower() for n in spec.replace("+", ",").split(",") if n.strip()}
    if "all" in names or "1" in names:
        return set(CHECKS)
    unknown = names - set(CHECKS)
    if unknown:
        raise ValueError(f"unknown sanitizer check(s) {sorted(unknown)}; choose from {', '.join(CHECKS)} or all")
    return names


_process_checker = None        # MDEV_SANITIZE's Sanitizer: it checks until the process exits
_block_starts: list[int] = []  # per enable() inside it: how many reports there were then


def enable(checks: str = "all"):
    """Start checking this process's API calls; returns the Sanitizer."""
    from mdev.sanitizer.session import Sanitizer
    if hooks.checker is None:
        hooks.checker = Sanitizer(checks_of(checks))
    elif hooks.checker is _process_checker:
        _block_starts.append(len(hooks.checker.reports.items))
    return hooks.checker


def disable() -> list[Report]:
    """Stop checking; returns every report made (under MDEV_SANITIZE: the reports made
    since the matching enable, and the process's checking goes on)."""
    san = hooks.checker
    if san is None:
        return []
    if san is _process_checker:
        san.finish()
        return san.reports.items[_block_starts.pop() if _block_starts else 0:]
    hooks.checker = None
    san.stop()
    return san.reports.items


@contextlib.contextmanager
def checking(checks: str = "all"):
    """Check the calls made inside the block; the list it gives is filled when the block ends."""
    found: list[Report] = []
    enable(checks)
    try:
        yield found
    finally:
        found.extend(disable())


def reports() -> list[Report]:
    return hooks.checker.reports.items if hooks.checker is not None else []


def from_env() -> None:
    """Attach or aclInit: MDEV_SANITIZE turns the sanitizer on for the life of the process."""
    global _process_checker
    spec = os.environ.get("MDEV_SANITIZE", "")
    if hooks.checker is None and spec not in ("", "0"):
        _process_checker = enable(spec)
        atexit.register(_finish)


def _finish() -> None:
    if hooks.checker is not None:
        hooks.checker.finish()
        hooks.checker.reports.finish()


def _forked() -> None:
    """A forked child checks its own calls: none of its parent's streams, memory or reports."""
    global _process_checker
    if hooks.checker is not None:
        from mdev.sanitizer.session import Sanitizer
        inherited = hooks.checker is _process_checker
        hooks.checker = Sanitizer(hooks.checker.checks)
        if inherited:
            _process_checker = hooks.checker
            _block_starts.clear()


os.register_at_fork(after_in_child=_forked)
hooks.on_start.append(from_env)
