"""What ps and top show for a board's processes, so a user can find device 3 of board
``default``:

    command line (ps aux, top -c, pgrep -f)   mdev: board default supervisor
                                              mdev: board default device 3
    name, 15 characters (top, ps -e, pgrep)   mdev sup defaul / mdev d3 default

Both processes start as ``python -m mdev.board.supervisor ...`` (a device is forked from
its supervisor).  The command line is rewritten by setproctitle (it moves the environment
out of the way when a title is longer than the original arguments); the kernel's name
(comm) is set with prctl(PR_SET_NAME), role first, since the board's name may not fit.
"""

from __future__ import annotations

import ctypes
import sys

import setproctitle

PR_SET_NAME = 15            # <linux/prctl.h>
COMM_LEN = 15               # TASK_COMM_LEN less the NUL


def title(board: str, role: str) -> str:
    """The command line ps shows for board ``board``'s ``role`` ("supervisor", "device 3")."""
    return f"mdev: board {board} {role}"


def shown_title(cmdline: list[str]) -> str:
    """A titled process's command line as psutil gives it (split at the title's padding)."""
    return " ".join(cmdline).strip()


def name_process(board: str, role: str, short_role: str) -> None:
    """Title this process ``mdev: board <board> <role>``, named ``mdev <short_role> <board>``."""
    setproctitle.setproctitle(title(board, role))
    if sys.platform.startswith("linux"):
        comm = f"mdev {short_role} {board}".encode()[:COMM_LEN]
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, ctypes.c_char_p(comm), 0, 0, 0)
