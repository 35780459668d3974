"""``mdev cann-home [DIR]``: a CANN toolkit tree over mdev, for C and C++ programs.

Creates or refreshes the tree (headers, libascendcl.so / libacl_rt.so / libacl_rt_impl.so,
bin/setenv.bash, set_env.sh, the ascendc.cmake stand-in) and prints its absolute path as
the last line, so that ``export ASCEND_HOME_PATH=$(mdev cann-home)`` works.
"""

from __future__ import annotations

import argparse
import sys


def add_parser(sub) -> None:
    p = sub.add_parser("cann-home", help="create/refresh a CANN toolkit tree for C/C++ programs, print its path",
                       description="Create or refresh a CANN-package-shaped tree whose libraries run on mdev "
                                   "boards; the last line printed is its absolute path.")
    p.add_argument("dir", nargs="?", help="where (default: <sys.prefix>/share/mdev/cann)")
    p.set_defaults(handler=cmd_cann_home)


def cmd_cann_home(args: argparse.Namespace) -> int:
    from mdev.capi import build, cann_home

    try:
        home = cann_home.make(args.dir, log=lambda line: print(line, file=sys.stderr))
    except build.BuildError as exc:
        print(f"mdev cann-home: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:         # a directory that cannot be made or written: a bad argument
        print(f"mdev cann-home: {exc.filename or args.dir}: {exc.strerror}", file=sys.stderr)
        return 2
    print(home)
    return 0
