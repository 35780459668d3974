"""``mdev bench [group ...]``: the benchmark suite (``python -m bench``) from the mdev command.

The suite lives in ``bench/`` of a source checkout (it is not installed with the package):
this command runs it with the same interpreter, prints its table (each figure, its
baseline measured in the same run, the ratio) and returns its exit status (1 when a
figure misses its target).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="run the benchmark suite (python -m bench) and print its table",
                       description="Run the mdev benchmarks of this source checkout (bench/).")
    p.add_argument("groups", nargs="*", metavar="group", help="groups to run (default: all; --list shows them)")
    p.add_argument("--list", action="store_true", help="list the groups and exit")
    p.set_defaults(handler=cmd_bench)


def cmd_bench(args: argparse.Namespace) -> int:
    if not (ROOT / "bench" / "__main__.py").exists():
        print(f"mdev bench: no bench/ next to {ROOT / 'mdev'}; the suite comes with a source checkout "
              "(git clone, pip install -e .)", file=sys.stderr)
        return 2
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    if args.list:
        code = "import bench; print('\\n'.join(bench.GROUPS))"
        return subprocess.run([sys.executable, "-c", code], env=env).returncode
    proc = subprocess.Popen([sys.executable, "-m", "bench", *args.groups], env=env)
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:          # the suite got the SIGINT too and stops its boards
            continue
