"""The caller's memory and functions, seen from Python.

    input value / array   --> load(type, address), read(address, n), read_array(type, address, n),
                              at(type, address): a copy of a structure or array;
                              gather([(address, n), ...]): many at once
    structure or string out <-- write(address, data), write_text(address, capacity, value),
                                store_struct(address, kind, values): a runtime dict into a
                                ctypes structure (C field names or their snake_case);
                                load_struct(address, kind): the other way
    text C keeps using    <-- keep(data) (for the process), thread_text(data) (until the
                              thread's next call): the address C gets
    C function pointer    --> c_function(address, signature): a Python callable calling it

An address is the caller's pointer as an int: the adapter receives every pointer that way
and only dereferences it here, through mdev.memory.program (the kernel's copy: a bad
address is 107000, never a crash).  The caller is this process (libmdev_embed.so), or a C
program the host agent serves (mdev.capi.agent calls :func:`serve`): then its strings live
in the shared area and its C functions run on its own threads.
(Plain output values are stored by the C entry point.)
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import threading

from mdev.memory.program import program

_agent = None            # the host agent's shared area, when serving a C program
_messages = threading.local()
_kept: list = []         # buffers handed to C for the process


def serve(area, functions) -> None:
    """Serve a C program through the host agent's shared area and its C-function caller."""
    global _agent, c_function
    _agent = area
    c_function = functions


def at(kind, address: int):
    """A copy of the ``kind`` (a ctypes structure or array) at ``address``."""
    return kind.from_buffer_copy(program().read(address, ctypes.sizeof(kind)))


def load(kind, address: int):
    return at(kind, address).value


def read(address: int, size: int) -> bytes:
    return program().read(address, size)


def gather(ranges: list[tuple[int, int]]) -> list[bytes]:
    """The bytes of each (address, size), read in one go."""
    return program().gather(ranges)


def write(address: int, data: bytes) -> None:
    program().write(address, bytes(data))


def write_text(address: int, capacity: int, value: str) -> bool:
    """Copy ``value`` and its NUL into a buffer of ``capacity`` bytes; False if it does not fit."""
    data = os.fsencode(value) + b"\0"
    if len(data) > capacity:
        return False
    write(address, data)
    return True


def read_array(kind, address: int, count: int) -> list:
    return list(at(kind * count, address)) if count else []


def keep(data: bytes) -> int:
    """``data`` (NUL-terminated text, an array) at an address C may use for the process's life."""
    if _agent is not None:
        return _agent.keep(data)
    _kept.append(ctypes.create_string_buffer(data, len(data)))
    return ctypes.addressof(_kept[-1])


def thread_text(data: bytes) -> int:
    """NUL-terminated ``data`` for the calling thread, valid until its next call."""
    if _agent is not None:
        return _agent.thread_text(data)
    _messages.buffer = ctypes.create_string_buffer(data)
    return ctypes.addressof(_messages.buffer)


@functools.cache
def _in_process(address: int, restype, *argtypes):
    return ctypes.CFUNCTYPE(restype, *argtypes)(address)


# A Python callable for the C function at ``address`` (the same object for the same function,
# so that registering and unregistering it agree).  In this process ctypes releases the GIL
# while the C function runs, and the function may call the API again.
c_function = _in_process


def text(address: int) -> str:
    """The NUL-terminated string at ``address``, decoded as file names are."""
    data = bytearray()
    while True:                   # a page at a time: the string may end just before unmapped memory
        chunk = program().read(address + len(data), 4096 - (address + len(data)) % 4096)
        end = chunk.find(b"\0")
        if end >= 0:
            return os.fsdecode(bytes(data + chunk[:end]))
        data += chunk


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
    local = kind()
    _fill(local, values)
    write(address, bytes(local))


def load_struct(address: int, kind) -> dict | None:
    """The ``kind`` structure at ``address`` as a dict of its C field names (None for NULL)."""
    return _fields(at(kind, address)) if address else None


def _fields(value):
    if isinstance(value, (ctypes.Structure, ctypes.Union)):
        return {name: _fields(getattr(value, name)) for name, _ in value._fields_}
    if isinstance(value, ctypes.Array):
        return [_fields(item) for item in value]
    return value
