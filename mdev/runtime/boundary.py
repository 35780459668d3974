"""The API boundary: implementations raise, users get return codes.

    face (acl.rt.malloc, aclrtMalloc, HcclAllReduce) --bind--> runtime implementation
        <-- (outputs..., ret) ---- AclError -> code, thread's last error and message set

An implementation says what it returns with ``@api(outputs=n)`` where it is defined;
``bind(fn, outputs=n)`` wraps it so that it returns ``ret`` alone (n == 0) or
``(out_1, ..., out_n, ret)``; on failure the outputs are zero/None, ``ret`` is the error
code, and the calling thread's last error and error message are set.  No exception ever
leaves an API call.  Every face binds through here (the ``@api`` functions, as
``REGISTRY`` holds them and mdev.runtime.registry places them), so the rules (which exceptions become which code, how
messages are kept) are the same for all of them; a face names its bindings with
``publish`` so that tools can say which API a user called.

Only explicit validation blames the caller: an AclError / HcclError the implementation
raised, a call with the wrong arguments (pyACL's parser refuses it), or a failed call given
an argument no C parameter holds (an int beyond 64 bits, a nesting deeper than
MAX_NESTING: the implementation could not even format it into its message).  Any other
exception is an emulator bug: the face's internal error, with the traceback in the
process's plog (and stderr with MDEV_DEBUG=1).

Which code a failure becomes is the face's ``Codes``: ``ACL`` (aclError: pyACL, the C
runtime) or ``HCCL`` (HcclResult: mdev.hccl, libhccl), where an AclError of the runtime
maps to its HcclResult (mdev.hccl_types.from_acl).
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from dataclasses import dataclass
from typing import Callable

from mdev import constants as C
from mdev import errors as E
from mdev import hccl_types as H
from mdev.errors import AclError
from mdev.runtime import applog
from mdev.runtime.core import RUNTIME

_DEBUG = os.environ.get("MDEV_DEBUG") == "1"
MAX_MESSAGES = 64

# implementation -> the shortest name a face publishes it under (for reports and traces)
PUBLIC_NAMES: dict[Callable, str] = {}
# module -> {name: implementation} of every ``@api`` function, filled as modules load
# (read through mdev.runtime.registry, which loads them all)
REGISTRY: dict[str, dict[str, Callable]] = {}


@dataclass(frozen=True)
class Codes:
    """How a face reports failures: its success code, the code (and message) of an exception
    the runtime raised on purpose, of bad arguments, of a NULL pointer where a value is
    needed, of a function it does not have and of an emulator bug, and code names."""
    success: int
    known: Callable[[BaseException], tuple[int, str] | None]
    bad_argument: int
    null_pointer: int
    not_supported: int
    internal: int
    name: Callable[[int], str]
    describe: Callable[[int], str]


def _acl_failure(exc: BaseException) -> tuple[int, str] | None:
    return (exc.code, exc.message) if isinstance(exc, AclError) else None


def _hccl_failure(exc: BaseException) -> tuple[int, str] | None:
    if isinstance(exc, H.HcclError):
        return exc.code, exc.message
    if isinstance(exc, AclError):
        return H.from_acl(exc.code), f"{E.error_name(exc.code)}: {exc.message or E.describe(exc.code)}"
    return None


ACL = Codes(E.ACL_SUCCESS, _acl_failure, E.ACL_ERROR_INVALID_PARAM, E.ACL_ERROR_INVALID_PARAM,
            E.ACL_ERROR_API_NOT_SUPPORT, E.ACL_ERROR_RT_INTERNAL_ERROR, E.error_name, E.describe)
# the operator library's (aclnnStatus): a null pointer and a bad parameter have their own codes
ACLNN = Codes(E.ACL_SUCCESS, _acl_failure, E.ACLNN_ERR_PARAM_INVALID, E.ACLNN_ERR_PARAM_NULLPTR,
              E.ACLNN_ERR_INNER_FIND_KERNEL_ERROR, E.ACLNN_ERR_INNER, E.error_name, E.describe)
HCCL = Codes(H.HCCL_SUCCESS, _hccl_failure, H.HCCL_E_PARA, H.HCCL_E_PTR, H.HCCL_E_NOT_SUPPORT, H.HCCL_E_INTERNAL,
             H.result_name, lambda code: f"{H.result_name(code)} ({code}): {H.error_string(code)}")


def _message_list() -> list[str]:
    """The calling thread's messages, or the process's with aclInit's err_msg_mode "1"."""
    return RUNTIME.process_messages if RUNTIME.messages_per_process else RUNTIME.thread.messages


def record_error(code: int, message: str, codes: Codes = ACL) -> None:
    """Set the calling thread's last error and put ``message`` first among its messages."""
    RUNTIME.thread.last_error = code
    messages = _message_list()
    messages.insert(0, f"{codes.name(code)}({code}): {message}" if message else codes.describe(code))
    del messages[MAX_MESSAGES:]


def get_last_error(level: int = 0) -> int:
    """The calling thread's last error; the slot is reset to ACL_SUCCESS."""
    if level != 0:
        return E.ACL_ERROR_INVALID_PARAM
    code, RUNTIME.thread.last_error = RUNTIME.thread.last_error, E.ACL_SUCCESS
    return code


def peek_at_last_error(level: int = 0) -> int:
    """The calling thread's last error, left in place."""
    if level != 0:
        return E.ACL_ERROR_INVALID_PARAM
    return RUNTIME.thread.last_error


def recent_messages() -> str | None:
    """The calling thread's (or, with err_msg_mode "1", the process's) error messages,
    newest first; reading them clears them."""
    messages = _message_list()
    text = "\n".join(messages) if messages else None
    messages.clear()
    return text


_INT_LOW, _INT_HIGH = -(1 << 63), 1 << 64       # what a C parameter of pyACL can hold
MAX_NESTING = 32                                 # no API takes data nested deeper
_CHECKED = (int, list, tuple, dict)              # what may hold such ints and nestings


def _hostile(value, depth: int = -1) -> str | None:
    """What pyACL's argument parser refuses, in the arguments of a call that failed: an int no
    C parameter holds (a message cannot even print one of 5000 digits), a nesting no API
    takes (nor one 1000 deep, or a list holding itself).  Looked for only once a call has
    failed with an exception that is not an error code: a call that works pays nothing."""
    if isinstance(value, int):
        return None if _INT_LOW <= value < _INT_HIGH else f"an int of {value.bit_length()} bits fits no parameter"
    if depth >= MAX_NESTING:
        return f"an argument is nested more than {MAX_NESTING} deep"
    for items in ((value.keys(), value.values()) if isinstance(value, dict) else (value,)):
        for item in items:
            if isinstance(item, _CHECKED):
                found = _hostile(item, depth + 1)
                if found is not None:
                    return found
    return None


def _log_internal(fn: Callable, exc: BaseException) -> None:
    """An internal error's traceback goes to this process's log (and stderr with MDEV_DEBUG=1)."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    applog.record(C.ACL_ERROR, f"internal error in {fn.__name__}:\n{text.rstrip()}", fn.__name__, __file__)
    if _DEBUG:
        sys.stderr.write(text)


def bind(fn: Callable, outputs: int = 0, failed=0, codes: Codes = ACL) -> Callable:
    """Wrap ``fn``; ``failed`` is the value of each output when the call fails, ``codes`` the
    face's error codes."""
    failure = (failed,) * outputs
    ok = codes.success

    @functools.wraps(fn)
    def api(*args, **kwargs):
        try:
            value = fn(*args, **kwargs)
        except Exception as exc:
            known = codes.known(exc)
            if known is not None:
                code, message = known
                if outputs and getattr(exc, "outputs", None) is not None:
                    record_error(code, message, codes)
                    return (*exc.outputs, code)      # outputs the call gives even when it fails
            elif (hostile := _hostile((*args, *kwargs.values()))) is not None:
                # what pyACL's parser refuses; the implementation could not even say why
                code, message = codes.bad_argument, f"{fn.__name__}: {hostile}"
            elif isinstance(exc, TypeError) and exc.__traceback__.tb_next is None:
                # raised by the call itself, not inside ``fn``: a wrong number or name of
                # arguments, which pyACL's own parser refuses
                code, message = codes.bad_argument, f"{fn.__name__}: {exc}"
            else:
                # an emulator bug, whatever its type (only explicit validation blames the
                # caller): it must not escape into the user's program
                code, message = codes.internal, f"{fn.__name__}: internal error {exc!r}"
                _log_internal(fn, exc)
        else:
            if outputs == 0:
                return ok
            if outputs == 1:
                return value, ok
            return (*value, ok)
        record_error(code, message, codes)
        if outputs == 0:
            return code
        return (*failure, code)

    api.__wrapped__ = fn
    return api


def api(outputs: int = 0, failed=0) -> Callable[[Callable], Callable]:
    """Mark a runtime function as an API implementation returning ``outputs`` values
    (``failed`` is each one's value when the call fails)."""
    def mark(fn: Callable) -> Callable:
        fn.api_shape = (outputs, failed)
        REGISTRY.setdefault(fn.__module__, {})[fn.__name__] = fn
        return fn
    return mark


def publish(namespace: dict) -> None:
    """Record the public names of the bound functions in a face's module namespace."""
    for name, obj in namespace.items():
        fn = getattr(obj, "__wrapped__", None)
        if fn is not None and not name.startswith("_") and len(name) < len(PUBLIC_NAMES.get(fn, name + "_")):
            PUBLIC_NAMES[fn] = name       # of aliases (mdl_ri_execute_async), the short name
