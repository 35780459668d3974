"""How a C entry point fails before reaching the runtime: a NULL output, an unsupported function.

Both set the calling thread's last error and message, as every failing API call does.
"""

from __future__ import annotations

from typing import Callable

from mdev import errors as E
from mdev.capi.prototypes import CFunction
from mdev.runtime import boundary


def null_output(fn: CFunction, param: str) -> int:
    """``param`` (an output pointer) is NULL: nothing is done."""
    boundary.record_error(E.ACL_ERROR_INVALID_PARAM, f"{fn.name}: {param} is NULL")
    return E.ACL_ERROR_INVALID_PARAM


def unsupported(fn: CFunction, why: str) -> Callable:
    """An entry point that returns ACL_ERROR_API_NOT_SUPPORT (200001), or 0/NULL for a
    function without an aclError, with a message naming the function."""
    message = f"{fn.name} is not supported by mdev ({why})"
    code = E.ACL_ERROR_API_NOT_SUPPORT if fn.ret.spelling == "aclError" else 0

    def stub(*args):
        boundary.record_error(E.ACL_ERROR_API_NOT_SUPPORT, message)
        return code

    stub.__name__ = fn.name
    stub.mdev_unsupported = message
    return stub
