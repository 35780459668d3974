"""Helpers of the C ABI tests (not a test module): compiling and running C programs against a
``mdev cann-home`` tree.  (Where the CANN samples are: tests/corpora.py.)"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
C_DIR = Path(__file__).resolve().parent / "c"
STRICT = ["-std=c11", "-Wall", "-Wextra", "-Werror"]


def compile_c(home: Path, source: str, out: Path, *flags: str, libs: tuple[str, ...] = ("ascendcl",)) -> Path:
    """Compile tests/c/``source`` against ``home`` with -Wall -Wextra -Werror, linked to ``libs``
    of its lib64/."""
    command = ["gcc", *STRICT, *flags, f"-I{home / 'include'}", str(C_DIR / source), "-o", str(out),
               f"-L{home / 'lib64'}", *(f"-l{lib}" for lib in libs), f"-Wl,-rpath,{home / 'lib64'}", "-lpthread"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0 and not result.stderr, result.stderr
    return out


def board_env(board: str, **extra: str) -> dict:
    return dict(os.environ, MDEV_BOARD=board, MDEV_AUTOSTART="0", **extra)
