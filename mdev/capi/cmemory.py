"""The C caller's memory and functions, seen from Python (ctypes).

    input value / array   --> load(type, address), read(address, n), read_array(type, address, n)
    structure or string out <-- write(address, data), write_text(address, capacity, value),
                                store_struct(address, kind, values): a runtime dict into a
                                ctypes structure (C field names or their snake_case);
                                load_struct(address, kind): the other way
    C function pointer    --> c_function(address, signature): a Python callable calling it

An address is the caller's pointer as an int: the adapter receives every pointer that way
and only dereferences it here.  (Plain output values are stored by the C entry point.)
"""

from __future__ import annotations

import ctypes
import functools
import os
import re


def load(kind, address: int):
    return kind.from_address(address).value


def read(address: int, size: int) -> bytes:
    return ctypes.string_at(address, size)


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
    return ctypes.CFUNCTYPE(restype, *argtypes)(address)


def text(address: int) -> str:
    """The NUL-terminated string at ``address``, decoded as file names are."""
    return os.fsdecode(ctypes.string_at(address))


def _snake(field: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", field).lower()


def _fill(target, values: dict) -> None:
    for name, kind in target._fields_:
        value = values.get(name, values.get(_snake(name)))
        if isinstance(value, dict):
            _fill(getattr(target, name), value)
        elif isinstance(value, (str, bytes, list)) and issubclass(kind, ctypes.Array):
            if isinstance(value, list) and kind._type_ is not ctypes.c_char:
                array = getattr(target, name)
                for i, item in enumerate(value[:len(array)]):
                    array[i] = item
                continue
            data = os.fsencode(value) if isinstance(value, str) else bytes(value)
            room = ctypes.sizeof(kind) - (1 if isinstance(value, str) else 0)      # a string keeps its NUL
            ctypes.memmove(ctypes.addressof(target) + getattr(type(target), name).offset, data, min(len(data), room))
        elif isinstance(value, (int, float)) and not issubclass(kind, (ctypes.Array, ctypes.Structure, ctypes.Union)):
            setattr(target, name, value)


def store_struct(address: int, kind, values: dict) -> None:
    """The ``kind`` structure at ``address``, zeroed, then filled from ``values`` (nested dicts
    for nested structures; strings NUL-terminated; fields without a value stay zero)."""
    ctypes.memset(address, 0, ctypes.sizeof(kind))
    _fill(kind.from_address(address), values)


def load_struct(address: int, kind) -> dict | None:
    """The ``kind`` structure at ``address`` as a dict of its C field names (None for NULL)."""
    return _fields(kind.from_address(address)) if address else None


def _fields(value):
    if isinstance(value, (ctypes.Structure, ctypes.Union)):
        return {name: _fields(getattr(value, name)) for name, _ in value._fields_}
    if isinstance(value, ctypes.Array):
        return [_fields(item) for item in value]
    return value
