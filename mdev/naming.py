"""Where a board lives: its socket files, secret, lock and shared-memory names.

Every file of board ``B`` is ``B.*`` in the user's private runtime directory.  Its
/dev/shm segments, which every user can see and name, are ``mdev.<uid>.B.<tag>.*``: the
tag is a random part chosen at each start and recorded only in the runtime directory
(``B.names``), so another user can neither guess a board's segment names nor take them
first.  Hosts read the tag there; a dead board's remains are found through it.

Once a segment exists its name is public (``ls /dev/shm``), so no name is ever made twice:
each device process draws a random part of its own for its HBM and control page
(``hbm<i>.<r>``, ``ctl<i>.<r>``, recorded in ``B.dev<i>.names``; a restarted device has
new ones), and each pinned buffer is ``pin.<pid>.<r>`` with a random part of its own.  A
name someone else took first is passed over for another draw (``create_fresh``), never
adopted.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

DEFAULT_BOARD = "default"
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,48}$")
_TAG = re.compile(r"^[0-9a-f]{16}$")          # fresh_tag()
FRESH_TRIES = 16         # draws of a segment name before giving up (each taken one is another user's)


def fresh_tag() -> str:
    """A random part for a new name: 64 bits, so nobody can guess one before it exists."""
    return secrets.token_hex(8)


def create_fresh(make: Callable[[str], T], what: str) -> T:
    """``make(tag)`` with a fresh tag, drawn again while the name it makes exists already
    (FileExistsError: someone took it first; it is never opened or removed)."""
    for _ in range(FRESH_TRIES):
        try:
            return make(fresh_tag())
        except FileExistsError:
            continue
    raise FileExistsError(f"{what}: {FRESH_TRIES} fresh random names were all taken")


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
    private directory), else ``/tmp/mdev-<uid>``, else -- that one taken by another user --
    ``~/.cache/mdev/run-<host>`` (``fallback_dir``).  mdev creates it with mode 0700;
    whether it made it or found it, the directory must be a real directory (not a symlink),
    owned by this user, with mode 0700 -- a directory someone else made first in a shared
    /tmp is refused (UnsafeRuntimeDir), never adopted."""
    override = os.environ.get("MDEV_RUNTIME_DIR")
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if override:
        return _private_dir(Path(override))
    if xdg and _is_private(Path(xdg), exact_mode=False):
        return _private_dir(Path(xdg) / "mdev")
    shared = Path(f"/tmp/mdev-{os.getuid()}")
    try:
        return _private_dir(shared)
    except UnsafeRuntimeDir:
        # another user made it first: the user still needs a way on, in a place only they own
        refused = f"{shared} is not private to uid {os.getuid()} ({_describe(shared)})"
    try:
        fallback = fallback_dir()
        path = _private_dir(fallback)
    except (UnsafeRuntimeDir, OSError, KeyError, RuntimeError) as exc:     # no usable home either
        raise UnsafeRuntimeDir(f"runtime directory {refused}, and the fallback under the home directory cannot "
                               f"be used ({exc}); set MDEV_RUNTIME_DIR to a directory of yours with mode 0700") from exc
    _say_once(f"mdev: runtime directory {refused}: not used; board files go to {path} instead\n")
    return path


def fallback_dir() -> Path:
    """Where board files go when /tmp/mdev-<uid> is another user's: under the user's home
    (named for the host: a home shared between machines must not mix their boards)."""
    return Path.home() / ".cache" / "mdev" / f"run-{socket.gethostname()}"


_said: set[str] = set()


def _say_once(text: str) -> None:
    if text not in _said:
        _said.add(text)
        sys.stderr.write(text)


def _private_dir(path: Path) -> Path:
    """``path``, made 0700 if missing; UnsafeRuntimeDir unless it is this user's private directory."""
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
        self._own_sockets = re.compile(rf"^{re.escape(self.name)}\.(dev\d+\.)?sock$")
        self._own_records = re.compile(rf"^{re.escape(self.name)}\.dev\d+\.names(\.\d+\.tmp)?$")

    def record_tag(self) -> str:
        """Choose the random part of this start's segment names and record it (the
        supervisor, holding the board's lock, before it makes any segment)."""
        tag = fresh_tag()
        write_private(self.names, tag)
        self._tag = tag
        return tag

    @property
    def tag(self) -> str:
        """The recorded random part of the segment names (read once; OSError if the board
        has none, i.e. it is not running)."""
        if self._tag is None:
            self._tag = _read_tag(self.names)
        return self._tag

    @property
    def shm_prefix(self) -> str:
        return f"{self.board_prefix}{self.tag}."

    def device_socket(self, device: int) -> str:
        return f"{self.dir / self.name}.dev{device}.sock"

    def device_record(self, device: int) -> Path:
        """Where device ``device``'s process records the random part of its segment names."""
        return Path(f"{self.dir / self.name}.dev{device}.names")

    def record_device(self, device: int, tag: str) -> None:
        """Record the random part of the names of device ``device``'s current segments
        (its process, once it made them); replaced whole, so a reader sees one or the other."""
        record = self.device_record(device)
        tmp = record.with_name(f"{record.name}.{os.getpid()}.tmp")
        _unlink_quietly(tmp)            # left by a process of this pid that died mid-write
        write_private(tmp, tag)
        os.replace(tmp, record)

    def device_tag(self, device: int) -> str:
        """The random part of device ``device``'s current segment names (OSError if it has
        none: not started, or the board is gone)."""
        return _read_tag(self.device_record(device))

    def hbm(self, device: int, tag: str | None = None) -> str:
        """The HBM segment of device ``device``'s process named by ``tag`` (default: its current one)."""
        return f"/{self.shm_prefix}hbm{device}.{tag or self.device_tag(device)}"

    def control(self, device: int, tag: str | None = None) -> str:
        """The control page of device ``device``'s process named by ``tag`` (default: its current one)."""
        return f"/{self.shm_prefix}ctl{device}.{tag or self.device_tag(device)}"

    def pinned(self, pid: int, tag: str) -> str:
        """The name of a pinned buffer of host process ``pid``; ``tag`` is fresh for each
        (fresh_tag), so nobody can tell a name from those already seen."""
        return f"{self.pinned_prefix(pid)}{tag}"

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
        """Names of every shm segment of this user of this board's recorded start that
        exists now (none if no start is recorded).  Another user's segment under these names
        is none of the board's (see ``foreign_segments``)."""
        try:
            prefix = self.shm_prefix
            entries = os.listdir("/dev/shm")
        except OSError:
            return []
        return ["/" + e for e in entries if e.startswith(prefix) and _owner(e) == os.geteuid()]

    def foreign_segments(self) -> list[tuple[str, int]]:
        """(name, owner uid) of the /dev/shm entries named for this board (any start) that
        another user made: squatted names, which mdev never opens nor can remove."""
        me = os.geteuid()
        found = []
        for e in os.listdir("/dev/shm"):
            if e.startswith(self.board_prefix):
                owner = _owner(e)
                if owner not in (None, me):
                    found.append(("/" + e, owner))
        return found

    def sockets(self) -> list[str]:
        """The supervisor's and the devices' socket files (not those of a board whose name
        merely starts with this one's)."""
        return [str(self.dir / e) for e in os.listdir(self.dir) if self._own_sockets.match(e)]

    def device_records(self) -> list[Path]:
        """The devices' name records (and any half-written one)."""
        return [self.dir / e for e in os.listdir(self.dir) if self._own_records.match(e)]

    def files(self) -> list[Path]:
        """Every file of this board in the runtime directory that exists now."""
        return [p for p in (self.key, self.topology, self.log, self.names, self.rendezvous, self.lock) if os.path.lexists(p)] + \
            [Path(s) for s in self.sockets()] + self.device_records()


def tag_of(segment_name: str) -> str:
    """The random part of a device segment's name (what ``hbm`` and ``control`` take)."""
    return segment_name.rsplit(".", 1)[1]


def _owner(entry: str) -> int | None:
    """The uid owning /dev/shm/``entry`` (None: gone)."""
    try:
        return os.lstat(f"/dev/shm/{entry}").st_uid
    except OSError:
        return None


def _read_tag(path: Path) -> str:
    tag = read_private(path).strip()
    if not _TAG.match(tag):
        raise UnsafeRuntimeDir(f"{path} does not hold a segment tag")
    return tag


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
