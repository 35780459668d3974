"""Where the ranks of a communicator meet: the root info blob and the exchange of rank cards.

    root rank:  get_root_info --> blob (HCCL_ROOT_INFO_BYTES): magic, board, rendezvous id
    any way the job likes (a file, a pipe, mp.spawn arguments) --> every rank process
    rank r:     comm_init_root_info(n, blob, r) --> card "join-r": pid, device, scratch, ...
                                                 <-- waits for n "join" cards
                                                --> card "keys-r": IPC keys made for the peers' pids
                                                 <-- waits for n "keys" cards --> connects
    files:      <runtime dir>/<board>.hccl/<rendezvous id>/<phase>-<rank>.json
                (board stop removes what a rendezvous never finished leaves there)

The cards are files in the user's runtime directory (0700, like the board's sockets; each
file 0600, written whole and renamed into place).  Why files and not a request to the
board's supervisor: ranks of one job only need a place they can all read that nobody else
can -- the runtime directory is exactly that, and it needs no new message kind in the
supervisor's protocol (kept small and validated, and hardened separately).  The
supervisor's one advantage, knowing when a process dies, is kept: a card names its
process, and a rank waiting for cards gives up as soon as a rank that joined is gone
instead of waiting out HCCL_CONNECT_TIMEOUT.  The directory goes once every rank is
connected.  comm_init_all (every rank in this thread) exchanges its cards in memory.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import time
from pathlib import Path

from mdev.naming import BoardPaths
from mdev.hccl_types import HCCL_E_PARA, HCCL_E_PTR, HCCL_E_REMOTE, HCCL_E_TIMEOUT, HCCL_ROOT_INFO_BYTES, HcclError
from mdev.procfs import process_gone

MAGIC = b"MDEVHCCL\x01"
RENDEZVOUS_ID = re.compile(r"[0-9a-f]{32}")       # secrets.token_hex(16), or a rank table's digest
POLL_S = (0.001, 0.02)             # first and longest pause between looks at the directory


def root_info(board: str) -> bytes:
    """A fresh blob naming ``board`` and a new rendezvous."""
    body = json.dumps({"board": board, "id": secrets.token_hex(16), "root_pid": os.getpid()}).encode()
    return (MAGIC + body).ljust(HCCL_ROOT_INFO_BYTES, b"\0")


def parse_root_info(blob, board: str) -> str:
    """The rendezvous id of a blob from ``root_info`` for this board (HcclError otherwise)."""
    if blob is None:
        raise HcclError(HCCL_E_PTR, "rootInfo is NULL")
    if isinstance(blob, (bytearray, memoryview)):
        blob = bytes(blob)
    if not isinstance(blob, bytes) or len(blob) != HCCL_ROOT_INFO_BYTES or not blob.startswith(MAGIC):
        raise HcclError(HCCL_E_PARA, f"rootInfo must be the {HCCL_ROOT_INFO_BYTES}-byte blob of get_root_info")
    try:
        info = json.loads(blob[len(MAGIC):].rstrip(b"\0"))
    except (ValueError, RecursionError) as exc:         # not JSON, or nested past the parser's depth
        raise HcclError(HCCL_E_PARA, f"rootInfo is damaged: {type(exc).__name__}") from None
    rid, owner = (info.get("id"), info.get("board")) if isinstance(info, dict) else (None, None)
    if not isinstance(owner, str) or not isinstance(rid, str):
        raise HcclError(HCCL_E_PARA, "rootInfo is damaged: no board or rendezvous id")
    if owner != board:
        raise HcclError(HCCL_E_PARA, f"rootInfo belongs to board {owner[:80]!r}; this process is on board {board!r}")
    if not RENDEZVOUS_ID.fullmatch(rid):
        raise HcclError(HCCL_E_PARA, "rootInfo is damaged: bad rendezvous id")
    return rid


class FileRendezvous:
    """Cards of the ranks of one rendezvous, as files (see the module docstring)."""

    def __init__(self, board: str, rid: str, nranks: int, timeout_s: float) -> None:
        self.dir = BoardPaths(board).rendezvous / rid
        self.nranks, self.deadline = nranks, time.monotonic() + timeout_s
        self.timeout_s = timeout_s

    def open(self) -> None:
        """Make the directory (inside the caller's clean-up: abandon removes it again)."""
        self.dir.parent.mkdir(mode=0o700, exist_ok=True)
        self.dir.mkdir(mode=0o700, exist_ok=True)

    def publish(self, phase: str, rank: int, card: dict) -> None:
        path = self.dir / f"{phase}-{rank}.json"
        tmp = self.dir / f".{phase}-{rank}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(card, f)
        os.replace(tmp, path)

    def gather(self, phase: str, joined: list[dict] | None = None) -> list[dict]:
        """Every rank's card of ``phase``; ``joined``: the join cards (their processes are watched)."""
        cards: list[dict | None] = [None] * self.nranks
        pause = POLL_S[0]
        while True:
            for r in range(self.nranks):
                if cards[r] is None:
                    cards[r] = _read(self.dir / f"{phase}-{r}.json")
            missing = [r for r, c in enumerate(cards) if c is None]
            if not missing:
                return cards
            for r in missing:
                if joined is not None and process_gone(joined[r]["pid"]):
                    raise HcclError(HCCL_E_REMOTE, f"rank {r} (process {joined[r]['pid']}) died while the "
                                    f"communicator was being made")
            if time.monotonic() >= self.deadline:
                raise HcclError(HCCL_E_TIMEOUT, f"rank(s) {missing[:8]} of {self.nranks} did not join within "
                                f"{self.timeout_s:g} s (HCCL_CONNECT_TIMEOUT)")
            time.sleep(pause)
            pause = min(pause * 2, POLL_S[1])

    def done(self, rank: int) -> None:
        """This rank is connected; the last one to get here removes the directory."""
        (self.dir / f"done-{rank}").touch(mode=0o600)
        if all((self.dir / f"done-{r}").exists() for r in range(self.nranks)):
            shutil.rmtree(self.dir, ignore_errors=True)
            self._tidy()

    def abandon(self, rank: int) -> None:
        """This rank gave up: its cards go (and the directory, once nobody else's is left)."""
        for path in self.dir.glob(f"*-{rank}.json"):
            path.unlink(missing_ok=True)
        try:
            self.dir.rmdir()
        except OSError:
            return                    # other ranks' cards are still there
        self._tidy()

    def _tidy(self) -> None:
        try:
            self.dir.parent.rmdir()   # the board's rendezvous directory, if no other is in it
        except OSError:
            pass


class LocalRendezvous:
    """comm_init_all: every rank is made by this thread, phase by phase."""

    def __init__(self, nranks: int) -> None:
        self.nranks = nranks
        self.cards: dict[tuple[str, int], dict] = {}

    def publish(self, phase: str, rank: int, card: dict) -> None:
        self.cards[phase, rank] = card

    def gather(self, phase: str, joined: list[dict] | None = None) -> list[dict]:
        return [self.cards[phase, r] for r in range(self.nranks)]

    def done(self, rank: int) -> None:
        pass

    def abandon(self, rank: int) -> None:
        pass


def _read(path: Path) -> dict | None:
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return None             # not there yet (a rename makes it appear whole)
