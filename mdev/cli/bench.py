"""``mdev bench [group ...]``: the benchmark suite (``python -m bench``) from the mdev command.

The suite lives in ``bench/`` of a source checkout (it is not installed with the package):
this command runs it with the same interpreter, prints its table (each figure, its
baseline measured in the same run, the ratio) and returns its exit status (1 when a
figure misses its target).  ``mdev bench hccl --op ... -b ... -e ... -f ... --topology ...``
runs the collectives benchmark (bench/hccl.py) with those options, like hccl_test.
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
    p.add_argument("--list", action="store_true", help="list the groups and exit")
    p.add_argument("groups", nargs=argparse.REMAINDER, metavar="group",
                   help="groups to run (default: all; --list shows them); 'hccl --op all_reduce -b 8K -e 1G -f 2 "
                        "--topology hccs8' runs the collectives benchmark with those options")
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
    if args.groups[:1] == ["hccl"] and len(args.groups) > 1:      # one group, its own options
        command = [sys.executable, "-m", "bench.hccl", *args.groups[1:]]
    else:
        command = [sys.executable, "-m", "bench", *args.groups]
    proc = subprocess.Popen(command, env=env)
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:          # the suite got the SIGINT too and stops its boards
            continue
