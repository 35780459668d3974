"""The C caller's memory and functions, seen from Python (ctypes).

    input value / array   --> load(type, address), read_array(type, address, n)
    structure or string out <-- write(address, data), write_text(address, capacity, value)
    C function pointer    --> c_function(address, signature): a Python callable calling it

An address is the caller's pointer as an int: the adapter receives every pointer that way
and only dereferences it here.  (Plain output values are stored by the C entry point.)
"""

from __future__ import annotations

import ctypes
import functools
import os


def load(kind, address: int):
    return kind.from_address(address).value


def write(address: int, data: bytes) -> None:
    ctypes.memmove(address, data, len(data))


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
