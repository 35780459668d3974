"""Where a board lives: its socket files, secret, lock and shared-memory names.

Everything of board ``B`` of user ``U`` is named from (U, B), so a board can be found,
attached to and cleaned up by name alone, including the stale remains of a dead one.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

DEFAULT_BOARD = "default"
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,48}$")


def board_name(name: str | None = None) -> str:
    name = name or os.environ.get("MDEV_BOARD") or DEFAULT_BOARD
    if not _NAME.match(name):
        raise ValueError(f"bad board name {name!r}: use 1-48 of A-Z a-z 0-9 _ . -")
    return name


class UnsafeRuntimeDir(Exception):
    """The runtime directory is not this user's own: another user could plant a secret and
    a socket there (and so answer this user's attach), so mdev refuses to use it.  Not an
    OSError: callers that read "no such file" as "board not running" must not swallow it."""


def runtime_dir() -> Path:
    """This user's private directory of board files, verified on every call.

    ``$MDEV_RUNTIME_DIR`` if set, else ``$XDG_RUNTIME_DIR/mdev`` (the login session's
    private directory), else ``/tmp/mdev-<uid>``.  mdev creates it with mode 0700; whether
    it made it or found it, the directory must be a real directory (not a symlink), owned
    by this user, with mode 0700 -- a directory someone else made first in a shared /tmp
    is refused (UnsafeRuntimeDir), never adopted."""
    override = os.environ.get("MDEV_RUNTIME_DIR")
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if override:
        path = Path(override)
    elif xdg and _is_private(Path(xdg), exact_mode=False):
        path = Path(xdg) / "mdev"
    else:
        path = Path(f"/tmp/mdev-{os.getuid()}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except FileNotFoundError:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.mkdir(path, 0o700)
    if not _is_private(path, exact_mode=True):
        raise UnsafeRuntimeDir(f"runtime directory {path} is not private to uid {os.getuid()} "
                               f"({_describe(path)}); remove it or set MDEV_RUNTIME_DIR to a directory "
                               "of yours with mode 0700")
    return path


def _is_private(path: Path, exact_mode: bool) -> bool:
    """A directory (lstat: a symlink is not one) of this user, closed to group and others."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    mode = stat.S_IMODE(st.st_mode)
    return (stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
            and (mode == 0o700 if exact_mode else not mode & 0o077))


def _describe(path: Path) -> str:
    try:
        st = os.lstat(path)
    except OSError as exc:
        return exc.strerror or str(exc)
    kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "a directory" if stat.S_ISDIR(st.st_mode) else "not a directory"
    return f"{kind}, {_owner_and_mode(st)}"


def _owner_and_mode(st: os.stat_result) -> str:
    return f"owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o}"


def read_private(path: Path) -> str:
    """The text of a file only this user can have written: opened without following a
    symlink, a regular file owned by this user with mode 0600 (a secret planted by
    someone else is never trusted)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "r") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) != 0o600:
            raise UnsafeRuntimeDir(f"{path} is not this user's private file ({_owner_and_mode(st)}; "
                                   f"needs uid {os.getuid()}, 0600)")
        return f.read()


class BoardPaths:
    """File and segment names of one board."""

    def __init__(self, name: str | None = None) -> None:
        self.name = board_name(name)
        self.dir = runtime_dir()                # verified once per BoardPaths
        base = self.dir / self.name
        self.socket = f"{base}.sock"
        self.key = Path(f"{base}.key")
        self.lock = Path(f"{base}.lock")
        self.log = Path(f"{base}.log")
        # the board description the supervisor runs (launcher writes it, hosts read it)
        self.topology = Path(f"{base}.topology.json")
        self.shm_prefix = f"mdev.{os.getuid()}.{self.name}."

    def device_socket(self, device: int) -> str:
        return f"{self.dir / self.name}.dev{device}.sock"

    def hbm(self, device: int) -> str:
        return f"/{self.shm_prefix}hbm{device}"

    def control(self, device: int) -> str:
        return f"/{self.shm_prefix}ctl{device}"

    def pinned(self, pid: int, serial: int | str) -> str:
        return f"/{self.shm_prefix}pin.{pid}.{serial}"

    def pinned_owner(self, name) -> int | None:
        """The pid whose pinned buffer ``name`` is, None if it names no pinned buffer of this
        board (a task naming another segment -- an HBM, a control page -- names nothing)."""
        head = f"/{self.shm_prefix}pin."
        if not isinstance(name, str) or not name.startswith(head) or "/" in name[1:]:
            return None
        pid, dot, _ = name[len(head):].partition(".")
        return int(pid) if dot and pid.isdigit() else None

    def segments(self) -> list[str]:
        """Names of every shm segment of this board that exists now."""
        try:
            entries = os.listdir("/dev/shm")
        except FileNotFoundError:
            return []
        return ["/" + e for e in entries if e.startswith(self.shm_prefix)]

    def sockets(self) -> list[str]:
        return [str(p) for p in self.dir.glob(f"{self.name}.*sock")]
