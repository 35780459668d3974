"""The SoC name of the board a C program will run on (``SOC_VERSION`` of ``bin/setenv.bash``).

    python -m mdev.capi.soc      # prints e.g. Ascend910B1

The board named by ``MDEV_BOARD`` (default "default") if it runs, else the topology it would
be started with (``MDEV_TOPOLOGY`` or the default preset): sourcing the environment script
never starts a board.
"""

from __future__ import annotations

from mdev.board import launcher


def soc_version(board: str | None = None) -> str:
    try:
        return launcher.status(board)["devices"][0]["soc"]
    except (launcher.BoardError, KeyError, IndexError):
        return launcher.resolve_topology().device(0).soc_name


if __name__ == "__main__":
    print(soc_version())
