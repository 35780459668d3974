"""The ``mdev`` command: board control, device table, topology tools.

    mdev board start|status|stop     run a named board explicitly
    mdev smi                         device table of a running board (like npu-smi info)
    mdev topo show|check|path|list   inspect topology files and presets
    mdev run prog.py [args]          run a pyACL program (import acl) against a board
    mdev trace summary|plot FILE     read a timeline trace (MDEV_TRACE / mdev run --trace)
    mdev whatif prog.py --topology A --topology B   compare a program on several topologies
    mdev bench [group ...]           the benchmark suite (python -m bench)
    mdev cann-home [DIR]             a CANN toolkit tree for C/C++ programs (prints its path)
    mdev env                         the variables a program of another Python environment needs
    mdev --version                   mdev's version (mdev.__version__)
"""

from __future__ import annotations

import argparse
import sys

from mdev.topology import TopologyError

from mdev import __version__
from mdev.naming import BadBoardName, UnsafeRuntimeDir
from mdev.cli import bench, board, cann_home, env, run, topo, trace, whatif


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mdev", description="Emulated Ascend NPU boards behind the CANN Runtime API.")
    parser.add_argument("--version", action="version", version=f"mdev {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    board.add_parser(sub)
    topo.add_parser(sub)
    run.add_parser(sub)
    trace.add_parser(sub)
    whatif.add_parser(sub)
    bench.add_parser(sub)
    cann_home.add_parser(sub)
    env.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args) or 0
    except (UnsafeRuntimeDir, BadBoardName, TopologyError) as exc:
        # bad input (a board name, a topology file or preset) or a refusal to act: one line,
        # status 2 as argparse gives a bad option, never a traceback
        command = " ".join(filter(None, (args.command, getattr(args, "action", None))))
        print(f"mdev {command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
