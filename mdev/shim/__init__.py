"""The directory that ``mdev run`` puts first on ``PYTHONPATH`` of the program it runs.

It holds ``acl.py``, which makes ``import acl`` return :mod:`mdev.acl`.  Nothing here is on
``sys.path`` unless you ask for it (``mdev run``, ``mdev shim-path``, ``mdev install-shim``),
so a real pyACL installation is never shadowed behind your back.
"""

from __future__ import annotations

from pathlib import Path

SHIM_DIR = Path(__file__).resolve().parent
PTH_NAME = "mdev-pyacl-shim.pth"


def pth_line() -> str:
    """The ``.pth`` line ``mdev install-shim`` writes: on unless ``MDEV_PYACL_SHIM=0``."""
    return (f"import os, sys; os.environ.get('MDEV_PYACL_SHIM', '1') != '0' "
            f"and sys.path.insert(0, {str(SHIM_DIR)!r})\n")
