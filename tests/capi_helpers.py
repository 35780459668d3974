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
    """Compile tests/c/``source`` (C, or C++ for a .cpp) against ``home`` with -Wall -Wextra
    -Werror, linked to ``libs`` of its lib64/."""
    compiler = ["g++", "-std=c++17", *STRICT[1:]] if source.endswith(".cpp") else ["gcc", *STRICT]
    command = [*compiler, *flags, f"-I{home / 'include'}", str(C_DIR / source), "-o", str(out),
               f"-L{home / 'lib64'}", *(f"-l{lib}" for lib in libs), f"-Wl,-rpath,{home / 'lib64'}", "-lpthread"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0 and not result.stderr, result.stderr
    return out


def board_env(board: str, **extra: str) -> dict:
    return dict(os.environ, MDEV_BOARD=board, MDEV_AUTOSTART="0", **extra)


def basic_on_demand(home: Path, work: Path, board: str, env: dict) -> str:
    """tests/c/basic.c run with ``env`` and MDEV_BOARD=``board`` started on demand (stopped
    after); its output.  The board must not be running."""
    from mdev.board import launcher

    binary = compile_c(home, "basic.c", work / "basic")
    env = dict(env, MDEV_BOARD=board, MDEV_AUTOSTART="1")
    env.pop("MDEV_TOPOLOGY", None)
    try:
        proc = subprocess.run([str(binary)], env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout
    finally:
        launcher.stop(board)
