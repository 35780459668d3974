"""Kernel parameter types and the packed argument block of the launch APIs.

A kernel's parameters (after the block context) may be annotated with these types; the
argument block of ``launch_kernel`` & co. is decoded with them: parameter i sits at the
next 8-byte-aligned offset and takes the size of its type.  Unannotated parameters are
8-byte unsigned integers, which is what a device pointer is.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ParamType:
    name: str
    dtype: np.dtype

    @property
    def size(self) -> int:
        return self.dtype.itemsize

    def decode(self, raw: bytes) -> int | float | bool:
        return np.frombuffer(raw[:self.size], dtype=self.dtype)[0].item()

    def encode(self, value) -> bytes:
        return np.asarray(value, dtype=self.dtype).tobytes()


def _t(name: str, dtype) -> ParamType:
    return ParamType(name, np.dtype(dtype).newbyteorder("<"))


ptr = _t("ptr", np.uint64)
int8, int16, int32, int64 = (_t(n, n) for n in ("int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = (_t(n, n) for n in ("uint8", "uint16", "uint32", "uint64"))
float16, float32, float64 = (_t(n, n) for n in ("float16", "float32", "float64"))
bool_ = _t("bool", np.bool_)
SLOT = 8


def param_types(fn) -> list[ParamType]:
    """Types of the kernel parameters after the block context (default: ``ptr``)."""
    params = list(inspect.signature(fn).parameters.values())[1:]
    return [_resolve(fn, p.annotation) for p in params]


def _resolve(fn, annotation) -> ParamType:
    if isinstance(annotation, str):   # the kernel's module uses `from __future__ import annotations`
        try:
            annotation = eval(annotation, fn.__globals__)
        except Exception:
            return ptr
    return annotation if isinstance(annotation, ParamType) else ptr


def slot_size(size: int) -> int:
    return -(-size // SLOT) * SLOT


def decode(types: list[ParamType], block: bytes) -> list:
    """Values of the parameters packed in an argument block."""
    values, offset = [], 0
    for t in types:
        if offset + t.size > len(block):
            raise ValueError(f"argument block of {len(block)} bytes is too short for {len(types)} parameters")
        values.append(t.decode(block[offset:offset + t.size]))
        offset += slot_size(t.size)
    return values


def encode(types: list[ParamType], values: list) -> bytes:
    return b"".join(t.encode(v).ljust(slot_size(t.size), b"\0") for t, v in zip(types, values))
