"""Where a board lives: its socket files, secret, lock and shared-memory names.

Every file of board ``B`` is ``B.*`` in the user's private runtime directory.  Its
/dev/shm segments, which every user can see and name, are ``mdev.<uid>.B.<tag>.*``: the
tag is a random part chosen at each start and recorded only in the runtime directory
(``B.names``), so another user can neither guess a board's segment names nor take them
first.  Hosts read the tag there; a dead board's remains are found through it.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from pathlib import Path

DEFAULT_BOARD = "default"
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,48}$")
_TAG = re.compile(r"^[0-9a-f]{16}$")          # secrets.token_hex(8)


def board_name(name: str | None = None) -> str:
    name = name or os.environ.get("MDEV_BOARD") or DEFAULT_BOARD
    if not _NAME.match(name):
        raise BadBoardName(f"bad board name {name[:60]!r}: use 1-48 of A-Z a-z 0-9 _ . -")
    return name


class BadBoardName(ValueError):
    """A board name mdev cannot use (it names files and segments)."""


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


def write_private(path: Path, text: str) -> None:
    """A new file only this user can read (0600), made exclusively: an existing file or a
    symlink planted at ``path`` fails the call (FileExistsError) instead of being written
    through."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


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
        # the random part of this start's segment names (written by the supervisor)
        self.names = Path(f"{base}.names")
        # where ranks of a communicator meet (mdev.runtime.collectives.rendezvous)
        self.rendezvous = Path(f"{base}.hccl")
        self.board_prefix = f"mdev.{os.getuid()}.{self.name}."      # every start's segments
        self._tag: str | None = None
        self._own_files = re.compile(rf"^{re.escape(self.name)}\.(dev\d+\.)?sock$")

    def record_tag(self) -> str:
        """Choose the random part of this start's segment names and record it (the
        supervisor, holding the board's lock, before it makes any segment)."""
        tag = secrets.token_hex(8)
        write_private(self.names, tag)
        self._tag = tag
        return tag

    @property
    def tag(self) -> str:
        """The recorded random part of the segment names (read once; OSError if the board
        has none, i.e. it is not running)."""
        if self._tag is None:
            tag = read_private(self.names).strip()
            if not _TAG.match(tag):
                raise UnsafeRuntimeDir(f"{self.names} does not hold a segment tag")
            self._tag = tag
        return self._tag

    @property
    def shm_prefix(self) -> str:
        return f"{self.board_prefix}{self.tag}."

    def device_socket(self, device: int) -> str:
        return f"{self.dir / self.name}.dev{device}.sock"

    def hbm(self, device: int) -> str:
        return f"/{self.shm_prefix}hbm{device}"

    def control(self, device: int) -> str:
        return f"/{self.shm_prefix}ctl{device}"

    def pinned(self, pid: int, serial: int | str) -> str:
        return f"{self.pinned_prefix(pid)}{serial}"

    def pinned_prefix(self, pid: int) -> str:
        """The start of every pinned segment name of host process ``pid``."""
        return f"/{self.shm_prefix}pin.{pid}."

    def pinned_owner(self, name) -> int | None:
        """The pid whose pinned buffer ``name`` is, None if it names no pinned buffer of this
        board (a task naming another segment -- an HBM, a control page -- names nothing)."""
        head = f"/{self.shm_prefix}pin."
        if not isinstance(name, str) or not name.startswith(head) or "/" in name[1:]:
            return None
        pid, dot, _ = name[len(head):].partition(".")
        return int(pid) if dot and pid.isdigit() else None

    def segments(self) -> list[str]:
        """Names of every shm segment of this board's recorded start that exists now
        (none if no start is recorded)."""
        try:
            prefix = self.shm_prefix
            entries = os.listdir("/dev/shm")
        except OSError:
            return []
        return ["/" + e for e in entries if e.startswith(prefix)]

    def sockets(self) -> list[str]:
        """The supervisor's and the devices' socket files (not those of a board whose name
        merely starts with this one's)."""
        return [str(self.dir / e) for e in os.listdir(self.dir) if self._own_files.match(e)]

    def files(self) -> list[Path]:
        """Every file of this board in the runtime directory that exists now."""
        return [p for p in (self.key, self.topology, self.log, self.names, self.rendezvous, self.lock)
                if os.path.lexists(p)] + \
            [Path(s) for s in self.sockets()]
