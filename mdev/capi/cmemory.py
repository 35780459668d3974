"""The C caller's memory and functions, seen from Python (ctypes).

    output pointer (int)  <-- store(type, address, value)     aclrtStream*, size_t*, float*, ...
    input string / buffer --> text(address), read(address, n), read_array(type, address, n)
    C function pointer    --> c_function(address, signature): a Python callable calling it

An address is the caller's pointer as an int: the adapter receives every pointer that way
and only dereferences it here.
"""

from __future__ import annotations

import ctypes
import functools
import os

from mdev.capi.prototypes import CType

_SIGNED = {1: ctypes.c_int8, 2: ctypes.c_int16, 4: ctypes.c_int32, 8: ctypes.c_int64}
_UNSIGNED = {1: ctypes.c_uint8, 2: ctypes.c_uint16, 4: ctypes.c_uint32, 8: ctypes.c_uint64}


def ctype_of(t: CType):
    """The ctypes type of a value of C type ``t`` (a number or a pointer)."""
    passing, size = t.scalar or (None, 0)
    if passing == "i":
        return _SIGNED[size]
    if passing == "u":
        return _UNSIGNED[size]
    if passing == "f":
        return ctypes.c_float if size == 4 else ctypes.c_double
    if passing == "p":
        return ctypes.c_uint64
    raise TypeError(f"{t.spelling} is not a number or a pointer")


def store(kind, address: int, value) -> None:
    """``*(kind*)address = value`` (a handle or pointer given as None stores NULL)."""
    kind.from_address(address).value = value if kind in (ctypes.c_float, ctypes.c_double) else int(value or 0)


def load(kind, address: int):
    return kind.from_address(address).value


def read(address: int, size: int) -> bytes:
    return ctypes.string_at(address, size)


def write(address: int, data: bytes) -> None:
    ctypes.memmove(address, data, len(data))


def text(address: int) -> str:
    """The NUL-terminated string at ``address``, decoded as file names are."""
    return os.fsdecode(ctypes.string_at(address))


def write_text(address: int, capacity: int, value: str) -> bool:
    """Copy ``value`` and its NUL into a buffer of ``capacity`` bytes; False if it does not fit."""
    data = os.fsencode(value) + b"\0"
    if len(data) > capacity:
        return False
    ctypes.memmove(address, data, len(data))
    return True


def read_array(kind, address: int, count: int) -> list:
    return list((kind * count).from_address(address)) if count else []


@functools.cache
def c_function(address: int, restype, *argtypes):
    """A Python callable for the C function at ``address`` (the same object for the same
    function, so that registering and unregistering it agree).  ctypes releases the GIL
    while the C function runs, and the function may call the API again."""
    fn = ctypes.CFUNCTYPE(restype, *argtypes)(address)
    fn.c_address = address
    return fn
