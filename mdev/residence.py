"""Who holds a board name, and clearing everything of a board once nobody does.

    starter --take()--> the board's lock (flock of BoardPaths.lock) --passed to--> supervisor,
                        which holds it for the rest of its life
    anyone  --held()--> does a supervisor live (or is a start or a clear-up under way)?
    holder  --clear()-> every segment and file of the board's recorded start (going on past
                        what it cannot remove, and saying so)
    device whose supervisor died --abandon()--> its own segments, then clear() if it can take the lock

The lock alone decides whether a board lives: a stalled supervisor still holds it, a dead
one (whatever killed it) holds nothing, and no answer to a handshake proves either.  Only
a holder of the lock removes anything, so no start ever unlinks what a live board uses.
A holder may unlink the lock file itself (the board's last file); whoever takes a lock
checks that the file it locked is still the one at the path, since a lock on an unlinked
file excludes nobody.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sys

from mdev.naming import BoardPaths
from mdev.memory import segment


def take(paths: BoardPaths) -> int | None:
    """The board's lock, as a descriptor that holds it; None if another process holds it."""
    while True:
        fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            current = os.stat(paths.lock, follow_symlinks=False).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(fd).st_ino:
            return fd
        os.close(fd)        # its last holder removed it: lock the file that is there now


def release(paths: BoardPaths, fd: int, remove: bool) -> None:
    """Let go of the lock; with ``remove`` its file goes first (nothing of the board is left)."""
    if remove:
        _unlink(paths.lock)
    os.close(fd)


def held(paths: BoardPaths) -> bool:
    """A supervisor of the board lives (perhaps stalled), or a start or a clear-up is under way."""
    fd = take(paths)
    if fd is None:
        return True
    release(paths, fd, remove=not leftovers(paths))
    return False


def holder(paths: BoardPaths) -> str:
    """The pid the supervisor wrote into the lock file, for messages ('?' if none)."""
    try:
        return paths.lock.read_text().strip() or "?"
    except OSError:
        return "?"


def leftovers(paths: BoardPaths) -> list[str]:
    """Segments and files of the board other than its lock file (of a dead board, when
    nobody holds the lock)."""
    return paths.segments() + [str(p) for p in paths.files() if p != paths.lock]


def clear(paths: BoardPaths) -> None:
    """Remove every segment and file of the board's recorded start except the lock file.
    Only for a holder of the lock.  The record of the segment names goes last: a clear-up
    cut short is finished by the next one.  It goes on past whatever it cannot remove and
    names each on stderr with the reason.  Segments another user made under the board's
    names are none of the board's (BoardPaths.foreign_segments): never touched."""
    left = []
    for name in paths.segments():
        try:
            segment.unlink(name)
        except OSError as exc:
            left.append(f"/dev/shm{name}: {exc}")
    for path in [*paths.sockets(), *paths.device_records(), paths.key, paths.topology, paths.log, paths.names]:
        try:
            _unlink(path)
        except OSError as exc:
            left.append(f"{path}: {exc}")
    shutil.rmtree(paths.rendezvous, ignore_errors=True)      # cards of communicators never made
    for line in left:
        print(f"mdev: board {paths.name!r}: could not remove {line}", file=sys.stderr)


def abandon(paths: BoardPaths, own: list[str]) -> None:
    """A device process whose supervisor died: remove its own segments (``own``), then the
    rest of the board if nobody holds its lock (a new start holding it made its own names)."""
    for name in own:
        segment.unlink(name)        # made by this process: nothing stops their removal
    fd = take(paths)
    if fd is not None:
        clear(paths)
        release(paths, fd, remove=True)


def _unlink(path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
