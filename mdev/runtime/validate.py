"""Argument checks shared by the API implementations (each failure is an AclError), and the
reading of a file a caller names."""

from __future__ import annotations

import errno
import os
import stat

from mdev import errors as E
from mdev.errors import AclError


def as_int(value, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{name} must be an int, got {type(value).__name__}")
    return int(value)   # an IntEnum or other subclass becomes plain data (frames carry no classes)


def as_list(value, name: str) -> list:
    """The items of an array argument (None, a NULL array, has none)."""
    if value is None:
        return []
    if not isinstance(value, (str, bytes, bytearray, dict)):
        try:
            return list(value)
        except TypeError:
            pass
    raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{name} must be a list, got {type(value).__name__}")


def file_path(value, name: str) -> str:
    """A path the caller names a file by: a non-empty str the system can take (no NUL)."""
    if not isinstance(value, str) or not value or "\0" in value:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{name} must be a non-empty str without NUL characters")
    return value


def read_regular(path: str, limit: int) -> bytes:
    """The bytes of the regular file ``path`` (OSError if it is not one, or holds more than
    ``limit`` bytes): a FIFO, /dev/zero or a huge file named for a small one must neither
    block nor fill memory.  O_NONBLOCK: opening a FIFO does not wait for a writer."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        chunks, total = [], 0
        while chunk := os.read(fd, min(1 << 20, limit + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise OSError(errno.EFBIG, f"larger than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def size(value, name: str = "size", positive: bool = False) -> int:
    value = as_int(value, name)
    if value < 0 or value >= 1 << 64:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{name} {value} is out of range for size_t")
    if positive and value == 0:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{name} must be > 0")
    return value


def timeout_ms(value) -> int:
    """-1 waits forever, > 0 is milliseconds; 0 and < -1 are invalid (507046 applies on expiry)."""
    value = as_int(value, "timeout")
    if value == 0 or value < -1:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"timeout must be -1 or > 0 ms, got {value}")
    return value
