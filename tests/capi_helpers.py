"""Helpers of the C ABI tests (not a test module): where the CANN samples are, compiling and
running C programs against a ``mdev cann-home`` tree.

The samples are looked for in ``$MDEV_CANN_SAMPLES``, then in ``shared/cann-samples`` beside
the checkout (where CI puts its copy of shared/), then in /work/shared/cann-samples.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
C_DIR = Path(__file__).resolve().parent / "c"
STRICT = ["-std=c11", "-Wall", "-Wextra", "-Werror"]


def samples_dir() -> Path | None:
    candidates = [os.environ.get("MDEV_CANN_SAMPLES"), ROOT.parent / "shared" / "cann-samples",
                  "/work/shared/cann-samples"]
    for candidate in candidates:
        if candidate and (Path(candidate) / "example").is_dir():
            return Path(candidate)
    return None


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
