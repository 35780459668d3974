"""``python -m bench [group ...]``: run the benchmark groups and print their tables.

Exit status 1 when a figure misses its target.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import sys
import time

from bench import GROUPS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description="run the mdev benchmarks")
    parser.add_argument("groups", nargs="*", metavar="group",
                        help=f"groups to run: {', '.join(GROUPS)} (default: all)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.groups) - set(GROUPS))
    if unknown:
        parser.error(f"unknown group(s) {', '.join(unknown)}; choose from {', '.join(GROUPS)}")
    groups = args.groups or list(GROUPS)
    import numpy
    print(f"mdev benchmarks: {platform.python_implementation()} {platform.python_version()}, "
          f"numpy {numpy.__version__}, {os.cpu_count()} CPUs, {platform.machine()}, "
          f"load average {os.getloadavg()[0]:.2f}")
    if os.getloadavg()[0] > 0.5 * (os.cpu_count() or 1):
        print("note: other work is running on this machine; throughput and latency figures will be "
              "lower and noisier than on an idle one")
    t0 = time.perf_counter()
    results = []
    for group in groups:
        results += importlib.import_module(f"bench.{group}").main()
    failed = [r for r in results if r.passed is False]
    checked = [r for r in results if r.passed is not None]
    print(f"\n{len(checked) - len(failed)}/{len(checked)} targets met "
          f"({time.perf_counter() - t0:.1f} s)" + ("" if not failed else
          ": missed " + ", ".join(r.figure for r in failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
