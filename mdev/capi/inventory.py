"""Inventory of the C functions declared by mdev's CANN headers.

Scans every header under ``mdev/capi/include/`` for ``ACL_FUNC_VISIBILITY`` (acl/),
``MSVP_PROF_API`` (acl/acl_prof.h) and ``HCCL_FUNC_VISIBILITY`` (hccl/) declarations and writes ``functions.tsv`` next to this
file, one line per function, in header order::

    name <TAB> return type <TAB> parameter list as declared <TAB> header (e.g. acl/acl_rt.h)

The shared libraries behind the headers are written from this list, each from the functions
of its headers (libascendcl.so: acl/ but acl_prof.h, libmsprofiler.so: acl/acl_prof.h,
libhccl.so: hccl/).  Usage::

    python -m mdev.capi.inventory           # rewrite functions.tsv
    python -m mdev.capi.inventory --check   # exit status 1 if functions.tsv is out of date
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from mdev.capi import functions_tsv, include_dir

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
# ACL_FUNC_VISIBILITY (or HCCL_, MSVP_PROF_API) <return type> <name>(<parameters>);  -- possibly over several lines
_DECL = re.compile(r"\b(?:(?:ACL|HCCL)_FUNC_VISIBILITY|MSVP_PROF_API)\s+([^;{}()]*?)\s*\b(\w+)\s*\(([^;{}]*)\)\s*;")


def _squash(text: str) -> str:
    return " ".join(text.split())


def declared_functions(root: Path | None = None) -> list[tuple[str, str, str, str]]:
    """(name, return type, parameters, header) for every function, headers in path order."""
    root = root or include_dir()
    rows = []
    for header in sorted(root.rglob("*.h")):
        source = _COMMENT.sub(" ", header.read_text())
        source = re.sub(r"^\s*#define[^\n]*", " ", source, flags=re.M)  # the macro's own definition
        for ret, name, params in _DECL.findall(source):
            rows.append((name, _squash(ret), _squash(params), header.relative_to(root).as_posix()))
    return rows


def render(rows: list[tuple[str, str, str, str]]) -> str:
    return "".join("\t".join(row) + "\n" for row in rows)


def main(argv: list[str]) -> int:
    text = render(declared_functions())
    if "--check" in argv:
        current = functions_tsv().read_text() if functions_tsv().exists() else ""
        if current != text:
            print(f"{functions_tsv()} is out of date: run python -m mdev.capi.inventory", file=sys.stderr)
            return 1
        return 0
    functions_tsv().write_text(text)
    print(f"{len(text.splitlines())} functions -> {functions_tsv()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
