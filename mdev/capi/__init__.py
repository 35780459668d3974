"""The C face: mdev's CANN headers, and the C libraries behind them.

    C/C++ program --> lib64/libascendcl.so, lib64/libhccl.so  (entry points generated from functions.tsv;
                      lib64/libopapi.so + libnnopbase.so: the operator library, from mdev/operators.py)
                  --> lib64/libmdev_client.so (a slot per C thread in memory shared with...)
                  --> mdev.capi.agent        (...the program's host agent: mdev's own Python, its own
                                              process; or, in a Python program running mdev itself,
                                              lib64/libmdev_embed.so: CPython embedded, joined)
                  --> mdev.capi.adapter      (this face: C arguments -> mdev.runtime -> C results)
                  --> mdev.runtime --> board / device processes

    include/        the headers, laid out like a CANN package's include/ (acl/acl.h, hccl/hccl.h, ...)
    functions.tsv   every declared function (written by mdev.capi.inventory)
    prototypes      functions.tsv as typed prototypes: how each argument crosses, which are outputs
    generate        the C entry points of a face;  build: compiling the libraries
    csrc/           mdev_client.c (the calls' way out), mdev_embed.c / .h (the embedded
                    interpreter);  embedding: its Python side;  agent, channel: the host agent
                    and the layout of the memory it shares with the program
    adapter         entry(name): each function marshalled onto its runtime implementation
    special         the hand-written adapters (hccl_special: libhccl.so's);  structs: ctypes mirrors
    opapi           libopapi.so's functions, from mdev/operators.py;  nnopbase: libnnopbase.so's
                    descriptors read or unpacked;  op_compiler: libacl_op_compiler.so's
    cmemory         the caller's memory and C functions from Python;  failures: NULL outputs, 200001
    cann_home       the CANN-shaped tree (``mdev cann-home``);  soc: the board's SoC for setenv.bash

Put :func:`include_dir` on the include path and a CANN program's ``#include "acl/acl.h"``
finds mdev's declarations; ``mdev cann-home`` builds the libraries next to a copy of them.
"""

from __future__ import annotations

import pathlib

_HERE = pathlib.Path(__file__).resolve().parent


def include_dir() -> pathlib.Path:
    """The directory to pass as ``-I``: it holds ``acl/acl.h`` and the other CANN headers."""
    return _HERE / "include"


def functions_tsv() -> pathlib.Path:
    """The inventory of declared functions (name, return type, parameters, header)."""
    return _HERE / "functions.tsv"
