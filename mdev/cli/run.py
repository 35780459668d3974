"""``mdev run``: run an unmodified pyACL program against an emulated board.

    mdev run [--board NAME] [--topology FILE|PRESET] [--devices K] [--hbm SIZE] [--node K] [--trace FILE]
             [--model-time] [--sanitize [CHECKS]] [--error-exitcode N] prog.py [args...]
    mdev run [...] -m package.module [args...]
    mdev shim-path                      the directory that makes ``import acl`` mean mdev.acl
    mdev install-shim [--site DIR]      opt in for good: a .pth file in this environment

The program runs in a child interpreter, mdev's own (``sys.executable``: not the program's
environment; ``mdev env`` serves a program that needs its own), whose ``PYTHONPATH`` starts with
the shim directory, so its ``import acl`` yields :mod:`mdev.acl`.  Nothing is installed: outside
``mdev run`` a real pyACL (or none) is what ``import acl`` finds.  The exit status is the
program's (128 + N when a signal N ends it); with ``--sanitize``, a program that exits 0 but
drew sanitizer reports exits with ``--error-exitcode`` (1 unless given).

``--node K`` runs the program on cluster node K of the board (sets ``MDEV_NODE``): it sees
that node's devices, numbered from 0.

Board choice: ``--board`` (else ``$MDEV_BOARD``, else ``default``).  With ``--topology``,
``--devices`` or ``--hbm`` and no ``--board``, the board is named after that topology
(``run-laptop2``, ``run-hccs8-d4``, ...) so it never collides with a default board running
another topology; ``mdev run`` starts it if needed (stopping by itself once idle, like a board
started on demand) and sets ``MDEV_TOPOLOGY`` for the child.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

from mdev.topology import TopologyError

from mdev.naming import BadBoardName, board_name
from mdev.shim import PTH_NAME, SHIM_DIR, pth_line


def _size(text: str) -> int:
    from mdev import topology
    return topology.parse_size(text)


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="run a pyACL program (import acl) against an emulated board",
                       description="Run an unmodified pyACL program: its `import acl` is mdev.acl.  The "
                                   f"program runs with mdev's interpreter ({sys.executable}), not the "
                                   "`python` of your shell or of another virtual environment; a program that "
                                   "must run with its own Python: see `mdev env`.")
    p.add_argument("--board", help="board name (default: $MDEV_BOARD, or one named after --topology)")
    p.add_argument("--topology", help="topology file or preset name of the board")
    p.add_argument("--devices", type=int, help="number of devices (overrides the topology)")
    p.add_argument("--hbm", type=_size, help="HBM per device, e.g. 1GiB (overrides the topology)")
    p.add_argument("--node", type=int, metavar="K", help="run on cluster node K of the board: the program "
                   "sees that node's devices as 0..n-1 (sets MDEV_NODE; default 0)")
    p.add_argument("--trace", metavar="FILE", help="write a timeline trace of the program's tasks "
                   "(Chrome trace / Perfetto JSON; sets MDEV_TRACE)")
    p.add_argument("--model-time", action="store_true", help="modelled time: task durations from the "
                   "topology's links, event timestamps in modelled time (sets MDEV_MODEL_TIME=1)")
    p.add_argument("--sanitize", nargs="?", const="all", metavar="CHECKS",
                   help="check the program: memcheck,racecheck,initcheck,synccheck (default: all; "
                        "sets MDEV_SANITIZE)")
    p.add_argument("--error-exitcode", type=int, default=1, metavar="N",
                   help="with --sanitize: exit status when the program exits 0 but drew reports (default 1)")
    p.add_argument("-m", dest="module", help="run a module (like python -m) instead of a file")
    p.add_argument("prog", nargs="?", help="the program (a .py file)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments of the program")
    p.set_defaults(handler=cmd_run)

    q = sub.add_parser("shim-path", help="print the directory that makes `import acl` mean mdev.acl",
                       description="Print the shim directory, e.g. "
                                   "export PYTHONPATH=$(mdev shim-path):$PYTHONPATH")
    q.set_defaults(handler=cmd_shim_path)

    i = sub.add_parser("install-shim", help="make `import acl` mean mdev.acl in this environment (.pth)",
                       description=f"Write {PTH_NAME} into site-packages of this (virtual) environment: "
                                   "every interpreter of it then imports mdev.acl as acl, unless "
                                   "MDEV_PYACL_SHIM=0.")
    i.add_argument("--site", help="directory to write the .pth file into (default: this environment's "
                                  "site-packages)")
    i.add_argument("--remove", action="store_true", help="remove the .pth file instead")
    i.add_argument("--force", action="store_true", help="allow an environment that is not a venv")
    i.set_defaults(handler=cmd_install_shim)


# ----------------------------------------------------------------------------- run
def board_name_for(spec: str | None, devices: int | None, hbm: int | None) -> str:
    """A board name derived from the topology options (``run-<topology>[-d<K>][-h<MiB>m]``)."""
    base = Path(spec).stem if spec else "default"
    name = "run-" + re.sub(r"[^A-Za-z0-9_.-]", "_", base)
    if devices is not None:
        name += f"-d{devices}"
    if hbm is not None:
        name += f"-h{hbm >> 20}m"
    return name[:48]


def _installed() -> bool:
    """Is mdev installed (pip install, -e included), so any interpreter of ours imports it?"""
    from importlib import metadata
    try:
        metadata.distribution("mdev")
    except metadata.PackageNotFoundError:
        return False
    return True


def child_environment(board: str | None, topology_spec: str | None) -> dict[str, str]:
    env = dict(os.environ)
    path = [str(SHIM_DIR)]
    if not _installed():
        # a source checkout run as `python -m mdev`: the child must still find mdev and topology
        path.append(str(Path(__file__).resolve().parents[2]))
    if env.get("PYTHONPATH"):
        path.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(path)
    env["MDEV_PYACL_SHIM"] = "1"
    if board:
        env["MDEV_BOARD"] = board
    if topology_spec:
        env["MDEV_TOPOLOGY"] = topology_spec
    return env


def _prepare_board(args):
    """Resolve the board name; with topology options, start the board and hold it open.

    Returns (board name or None, channel or None).  The channel keeps a board started here
    from idling out before the program attaches; it is closed when the program ends.
    """
    from mdev.board import launcher

    wants_topology = args.topology is not None or args.devices is not None or args.hbm is not None
    if not wants_topology:
        return args.board, None           # the program's first call starts it on demand
    board = args.board or board_name_for(args.topology, args.devices, args.hbm)
    topo = launcher.resolve_topology(args.topology, args.devices, args.hbm)
    paths, started = launcher.start(board, topo, on_demand=True)
    channel = launcher.connect(paths, "mdev run")
    if not started:
        try:
            running = launcher.request(channel, "status").get("topology")
        except Exception:
            running = None
        if running is not None and running != topo.name:
            print(f"mdev run: board {board!r} is already running topology {running!r}, "
                  f"not {topo.name!r}; using it as it is", file=sys.stderr)
    return paths.name, channel


def _sanitize_spec(args: argparse.Namespace) -> str | None:
    """Validate --sanitize; in ``--sanitize prog.py`` the program is not a list of checks."""
    from mdev import sanitizer
    try:
        sanitizer.checks_of(args.sanitize)
    except ValueError as exc:
        if not (args.sanitize.endswith(".py") or os.path.isfile(args.sanitize)):
            return str(exc)
        args.args = ([args.prog] if args.prog else []) + args.args
        args.prog, args.sanitize = args.sanitize, "all"
    return None


def cmd_run(args: argparse.Namespace) -> int:
    if args.sanitize:
        problem = _sanitize_spec(args)
        if problem:
            print(f"mdev run: --sanitize: {problem}", file=sys.stderr)
            return 2
    if args.module is None and not args.prog:
        print("mdev run: give a program (prog.py) or -m module", file=sys.stderr)
        return 2
    if args.module is not None:
        argv = ["-m", args.module] + ([args.prog] if args.prog else []) + args.args
    else:
        if not os.path.exists(args.prog):
            print(f"mdev run: {args.prog}: no such file", file=sys.stderr)
            return 2
        argv = [args.prog] + args.args
    try:
        if args.board:
            board_name(args.board)
        board, channel = _prepare_board(args)
    except (TopologyError, BadBoardName) as exc:      # a bad argument: one line, no traceback
        print(f"mdev run: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:   # a board that cannot start: say so, no traceback
        print(f"mdev run: {exc}", file=sys.stderr)
        return 1
    try:
        env = child_environment(board, args.topology)
        if getattr(args, "node", None) is not None:
            env["MDEV_NODE"] = str(args.node)
        if getattr(args, "trace", None):
            env["MDEV_TRACE"] = os.path.abspath(args.trace)
            env.pop("MDEV_TRACE_OWNER", None)       # the program is the trace's owner
        if getattr(args, "model_time", False):
            env["MDEV_MODEL_TIME"] = "1"
        log = _sanitize(args, env)
        proc = subprocess.Popen([sys.executable, *argv], env=env)
        while True:
            try:
                code = proc.wait()
                break
            except KeyboardInterrupt:      # the child got the SIGINT too; let it end its way
                continue
    finally:
        if channel is not None:
            channel.close()
    code = 128 - code if code < 0 else code
    if log is not None and code == 0 and _sanitizer_errors(log):
        code = args.error_exitcode
    return code


def _sanitize(args, env: dict) -> str | None:
    """Set MDEV_SANITIZE for the child; returns the report log the error count is read from."""
    if not getattr(args, "sanitize", None):
        return None
    env["MDEV_SANITIZE"] = args.sanitize
    if not env.get("MDEV_SANITIZE_LOG"):
        import tempfile
        fd, env["MDEV_SANITIZE_LOG"] = tempfile.mkstemp(prefix="mdev-sanitize-", suffix=".log")
        os.close(fd)
    return env["MDEV_SANITIZE_LOG"]


def _sanitizer_errors(log: str) -> int:
    """Errors in the summaries every sanitized process of the run wrote at exit."""
    try:
        text = Path(log).read_text()
    except OSError:
        return 0
    return sum(int(n) for n in re.findall(r"ERROR SUMMARY: (\d+)", text))


# ----------------------------------------------------------------------------- shim helpers
def cmd_shim_path(args: argparse.Namespace) -> int:
    print(SHIM_DIR)
    return 0


def cmd_install_shim(args: argparse.Namespace) -> int:
    if args.site:
        target = Path(args.site)
    else:
        if sys.prefix == sys.base_prefix and not args.force:
            print("mdev install-shim: this is not a virtual environment; a .pth here would make "
                  "`import acl` mean mdev for every program of this Python.  Use a venv, "
                  "--site DIR, or --force.", file=sys.stderr)
            return 1
        import sysconfig
        target = Path(sysconfig.get_paths()["purelib"])
    pth = target / PTH_NAME
    if args.remove:
        if pth.exists():
            pth.unlink()
            print(f"removed {pth}")
        else:
            print(f"{pth} does not exist")
        return 0
    target.mkdir(parents=True, exist_ok=True)
    pth.write_text(pth_line())
    print(f"wrote {pth}: `import acl` is mdev.acl in this environment (MDEV_PYACL_SHIM=0 turns it off)")
    return 0

