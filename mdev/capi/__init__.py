"""The C adapter face (headers now; the library behind them next).

``include/`` is laid out like the ``include/`` directory of a CANN package (``acl/acl.h``,
``acl/acl_rt.h``, ``acl/error_codes/...``): put :func:`include_dir` on the include path and
a CANN program's ``#include "acl/acl.h"`` finds mdev's declarations.  ``functions.tsv``
lists every declared function (written by :mod:`mdev.capi.inventory`).
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
