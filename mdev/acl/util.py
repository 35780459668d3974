"""``acl.util``: host buffers as pointers and back, as pyACL's util module does it.

Pointers handed out are real addresses of this process, so the usual pyACL idioms work:
``bytes_to_ptr(b)`` exposes the internal buffer of ``b`` (a later ``memcpy`` into it shows
in ``np.frombuffer(b)``), and ``ptr_to_numpy`` on a ``malloc_host`` pointer is a live view
of the pinned buffer the devices copy from and to.  Like pyACL, these helpers raise on bad
arguments (they return no aclError); they refuse device pointers instead of crashing.
"""

from __future__ import annotations

import numpy as np

from mdev import constants as C
from mdev.runtime import boundary as _boundary
from mdev.errors import AclError
from mdev.memory import address
from mdev.runtime import registry as _registry
from mdev.runtime.core import RUNTIME as _rt


def _host_view(ptr: int, nbytes: int, write: bool) -> np.ndarray:
    try:
        operand = _rt.memory.operand(ptr, nbytes, write=write, what="ptr")
    except AclError as exc:
        raise ValueError(exc.message) from None
    if operand.kind == "device":
        raise ValueError(f"{ptr:#x} is device memory: copy it to the host with acl.rt.memcpy first")
    return _rt.memory.view(operand)


def ptr_to_numpy(ptr: int, shape, npy_type: int) -> np.ndarray:
    """A numpy array over host memory at ``ptr`` (no copy); ``npy_type`` is a NumPy type number."""
    dtype = C.NPY_TYPE_TO_NUMPY.get(npy_type)
    if dtype is None:
        raise ValueError(f"unsupported NumPy type number {npy_type}")
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (int(shape),)
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    return _host_view(ptr, nbytes, write=False).view(dtype).reshape(shape)


def numpy_to_ptr(array: np.ndarray) -> int:
    """Address of the array's data (the array must stay alive while the pointer is used)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected a numpy.ndarray, got {type(array).__name__}")
    return array.ctypes.data


def numpy_contiguous_to_ptr(array: np.ndarray) -> int:
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected a numpy.ndarray, got {type(array).__name__}")
    if not array.flags["C_CONTIGUOUS"]:
        raise ValueError("array is not C-contiguous; use np.ascontiguousarray first")
    return array.ctypes.data


def bytes_to_ptr(data) -> int:
    """Address of the internal buffer of a bytes (or bytearray) object, as pyACL gives it."""
    return address.buffer_address(data)


def ptr_to_bytes(ptr: int, size: int) -> bytes:
    """A copy of ``size`` bytes of host memory at ``ptr``."""
    return _host_view(ptr, size, write=False).tobytes()


globals().update(_registry.bound("acl.util"))
_boundary.publish(globals())
