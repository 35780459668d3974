"""The API boundary: implementations raise, users get pyACL return shapes.

``bind(fn, outputs=n)`` wraps an implementation so that it returns ``ret`` alone (n == 0)
or ``(out_1, ..., out_n, ret)``; on failure the outputs are zero/None, ``ret`` is the
aclError code, and the calling thread's last error and error message are set.  No
exception ever leaves an API call.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from typing import Callable

from mdev.acl import errors as E
from mdev.acl.errors import AclError

_DEBUG = os.environ.get("MDEV_DEBUG") == "1"
MAX_MESSAGES = 64


def record_error(code: int, message: str) -> None:
    from mdev.runtime.core import RUNTIME
    state = RUNTIME.thread
    state.last_error = code
    state.messages.insert(0, f"{E.error_name(code)}({code}): {message}" if message else E.describe(code))
    del state.messages[MAX_MESSAGES:]


def bind(fn: Callable, outputs: int = 0, failed=0) -> Callable:
    """Wrap ``fn``; ``failed`` is the value of each output when the call fails."""
    failure = (failed,) * outputs

    @functools.wraps(fn)
    def api(*args, **kwargs):
        try:
            value = fn(*args, **kwargs)
        except AclError as exc:
            code, message = exc.code, exc.message
        except (TypeError, ValueError, OverflowError) as exc:
            # wrong number or kind of arguments: pyACL's own parser would refuse them
            code, message = E.ACL_ERROR_INVALID_PARAM, f"{fn.__name__}: {exc}"
            if _DEBUG:
                traceback.print_exc()
        except Exception as exc:  # an emulator bug must not escape into the user's program
            code, message = E.ACL_ERROR_RT_INTERNAL_ERROR, f"{fn.__name__}: internal error {exc!r}"
            traceback.print_exc(file=sys.stderr)
        else:
            if outputs == 0:
                return E.ACL_SUCCESS
            if outputs == 1:
                return value, E.ACL_SUCCESS
            return (*value, E.ACL_SUCCESS)
        record_error(code, message)
        if outputs == 0:
            return code
        return (*failure, code)

    api.__wrapped__ = fn
    return api
