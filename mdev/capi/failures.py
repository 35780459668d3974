"""How a C entry point fails before reaching the runtime: a NULL output, an unsupported function.

Both set the calling thread's last error and message, as every failing API call does, in
the codes of the function's library: aclError for acl/ functions (libascendcl.so),
HcclResult for hccl/ ones (libhccl.so), aclnnStatus for the operator library's (aclnn/:
libnnopbase.so, aclnnop/: libopapi.so); ``codes_of`` says which.
"""

from __future__ import annotations

from typing import Callable

from mdev.capi.prototypes import CFunction
from mdev.runtime import boundary

# the C type of a library's status codes -> how that library reports failures
STATUS_TYPES = {"aclError": boundary.ACL, "HcclResult": boundary.HCCL, "aclnnStatus": boundary.ACLNN}
_BY_DIRECTORY = {"acl": boundary.ACL, "hccl": boundary.HCCL, "aclnn": boundary.ACLNN, "aclnnop": boundary.ACLNN}


def returns_status(fn: CFunction) -> bool:
    """``fn`` returns its library's status code (aclError, HcclResult), not a value."""
    return fn.ret.spelling in STATUS_TYPES


def codes_of(fn: CFunction) -> boundary.Codes:
    """The codes ``fn``'s failures are reported in (by the directory of its header)."""
    return _BY_DIRECTORY[fn.header.split("/")[0]]


def null_output(fn: CFunction, param: str) -> int:
    """``param`` (an output pointer) is NULL: nothing is done."""
    codes = codes_of(fn)
    boundary.record_error(codes.null_pointer, f"{fn.name}: {param} is NULL", codes)
    return codes.null_pointer


def unsupported(fn: CFunction, why: str) -> Callable:
    """An entry point that returns the library's "not supported" code (ACL_ERROR_API_NOT_SUPPORT,
    HCCL_E_NOT_SUPPORT), or 0/NULL for a function returning a value, with a message naming
    the function."""
    message = f"{fn.name} is not supported by mdev ({why})"
    codes = codes_of(fn)
    code = codes.not_supported if returns_status(fn) else 0

    def stub(*args):
        boundary.record_error(codes.not_supported, message, codes)
        return code

    stub.__name__ = fn.name
    stub.mdev_unsupported = message
    return stub
