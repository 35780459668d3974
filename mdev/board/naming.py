"""Where a board lives: its socket files, secret, lock and shared-memory names.

Everything of board ``B`` of user ``U`` is named from (U, B), so a board can be found,
attached to and cleaned up by name alone, including the stale remains of a dead one.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

DEFAULT_BOARD = "default"
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,48}$")


def board_name(name: str | None = None) -> str:
    name = name or os.environ.get("MDEV_BOARD") or DEFAULT_BOARD
    if not _NAME.match(name):
        raise ValueError(f"bad board name {name!r}: use 1-48 of A-Z a-z 0-9 _ . -")
    return name


def runtime_dir() -> Path:
    path = Path(os.environ.get("MDEV_RUNTIME_DIR") or f"/tmp/mdev-{os.getuid()}")
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


class BoardPaths:
    """File and segment names of one board."""

    def __init__(self, name: str | None = None) -> None:
        self.name = board_name(name)
        base = runtime_dir() / self.name
        self.socket = f"{base}.sock"
        self.key = Path(f"{base}.key")
        self.lock = Path(f"{base}.lock")
        self.log = Path(f"{base}.log")
        # the board description the supervisor runs (launcher writes it, hosts read it)
        self.topology = Path(f"{base}.topology.json")
        self.shm_prefix = f"mdev.{os.getuid()}.{self.name}."

    def device_socket(self, device: int) -> str:
        return f"{runtime_dir() / self.name}.dev{device}.sock"

    def hbm(self, device: int) -> str:
        return f"/{self.shm_prefix}hbm{device}"

    def control(self, device: int) -> str:
        return f"/{self.shm_prefix}ctl{device}"

    def board_page(self) -> str:
        """Board-wide state, one row per device (mdev.board.status.BoardPage)."""
        return f"/{self.shm_prefix}board"

    def pinned(self, pid: int, serial: int | str) -> str:
        return f"/{self.shm_prefix}pin.{pid}.{serial}"

    def segments(self) -> list[str]:
        """Names of every shm segment of this board that exists now."""
        try:
            entries = os.listdir("/dev/shm")
        except FileNotFoundError:
            return []
        return ["/" + e for e in entries if e.startswith(self.shm_prefix)]

    def sockets(self) -> list[str]:
        base = runtime_dir()
        return [str(p) for p in base.glob(f"{self.name}.*sock")]
