"""The Python side of libmdev_embed.so (MDEV_CAPI=embedded, or a Python program running mdev
that loads the C libraries): set-up when the library starts Python, and its exit.

    C program's first API call --> libmdev_embed.so starts (or joins) the interpreter
                               --> prepare(root, owned)
    C program's exit()         --> at_exit(): Python's atexit functions (traces, sanitizer
                                   reports), then stdout/stderr flushed

``owned`` says the library started the interpreter (a C program) rather than joining a
running one (a Python program that loaded the library with ctypes): only then is the
process's Python ours to set up.
"""

from __future__ import annotations

import atexit
import importlib.machinery
import os
import sys
from pathlib import Path


def prepare(root: str, owned: bool) -> None:
    """Make the processes mdev starts on demand (a board's supervisor) run the same mdev.

    The library puts ``root`` (the checkout it was built from) first on sys.path; a board
    started from this process runs ``python -m mdev.board.supervisor``, which would import
    whatever mdev the interpreter finds by itself, so PYTHONPATH names ``root`` too when
    that is another one (or none).
    """
    if owned and _found_without(root) != Path(root, "mdev", "__init__.py").resolve():
        current = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = root + (os.pathsep + current if current else "")


def _found_without(root: str) -> Path | None:
    """Where ``import mdev`` leads when ``root`` is not on sys.path."""
    path = [p for p in sys.path if Path(p or ".").resolve() != Path(root).resolve()]
    for finder in sys.meta_path:
        if finder is importlib.machinery.PathFinder:
            spec = finder.find_spec("mdev", path)
        else:
            spec = getattr(finder, "find_spec", lambda *a: None)("mdev", None)
        if spec is not None and spec.origin:
            return Path(spec.origin).resolve()
    return None


def at_exit() -> None:
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass    # closed or replaced by the program: nothing left to flush
