"""``mdev env``: the environment a program of another Python environment needs to use mdev.

``mdev run`` runs a program with mdev's own interpreter; a program that must run with its
own (a venv with torch_npu, a C program that embeds mdev's Python through libascendcl.so
while joining another interpreter) gets mdev from these variables instead, printed as shell
lines to ``eval``:

    MDEV_PYTHON   mdev's interpreter: a board the program starts on demand runs its
                  supervisor with it, not with the program's Python (which may lack mdev)
    PYTHONPATH    the shim (``import acl`` is mdev.acl) and the folder mdev is imported from
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

import mdev
from mdev.shim import SHIM_DIR


def add_parser(sub) -> None:
    p = sub.add_parser("env", help="print the variables a program of another Python environment needs",
                       description="Print shell lines (eval \"$(mdev env)\") that let a program running with "
                                   "another Python (another venv) import mdev and start boards with mdev's "
                                   "interpreter.  mdev run needs none of this: it uses mdev's interpreter.")
    p.set_defaults(handler=cmd_env)


def variables() -> dict[str, str]:
    """The variables ``mdev env`` prints, PYTHONPATH keeping what the caller has."""
    source = str(Path(mdev.__file__).resolve().parents[1])      # holds mdev/
    path = [str(SHIM_DIR), source] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {"MDEV_PYTHON": sys.executable, "PYTHONPATH": os.pathsep.join(dict.fromkeys(path))}


def cmd_env(args: argparse.Namespace) -> int:
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    print(f"# mdev {mdev.__version__} for a program of another Python environment: eval \"$(mdev env)\"")
    print(f"# that Python must be {version} and have mdev's dependencies (numpy, posix_ipc, psutil, "
          "cloudpickle, setproctitle); C programs: source \"$(mdev cann-home)/set_env.sh\" too")
    for name, value in variables().items():
        print(f"export {name}={shlex.quote(value)}")
    return 0
