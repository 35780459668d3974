"""aclDataType values as numbers: the numpy type of each type the system tasks compute in,
its size in bytes, and bfloat16's bit patterns.

Both sides read these: the host sizes and decodes a task's operands by them
(mdev.runtime.execution.systasks), the device computes in them (mdev.board.systasks), the sanitizer
sizes what a task touches (mdev.taskspec).
"""

from __future__ import annotations

import numpy as np

from mdev import constants as C

BF16 = "bf16"      # stored as uint16 bit patterns; arithmetic in float32

# aclDataType -> numpy dtype (or BF16) for the types system tasks understand
DTYPES = {
    C.ACL_INT8: np.dtype(np.int8), C.ACL_INT16: np.dtype(np.int16), C.ACL_INT32: np.dtype(np.int32),
    C.ACL_INT64: np.dtype(np.int64), C.ACL_UINT8: np.dtype(np.uint8), C.ACL_UINT16: np.dtype(np.uint16),
    C.ACL_UINT32: np.dtype(np.uint32), C.ACL_UINT64: np.dtype(np.uint64),
    C.ACL_FLOAT16: np.dtype(np.float16), C.ACL_FLOAT: np.dtype(np.float32), C.ACL_DOUBLE: np.dtype(np.float64),
    C.ACL_BF16: BF16, C.ACL_BOOL: np.dtype(np.bool_),
}


def itemsize(data_type: int) -> int:
    dt = DTYPES[data_type]
    return 2 if dt is BF16 else dt.itemsize


def storage(data_type: int) -> np.dtype:
    """The numpy type an element is stored as (bfloat16: its 16-bit pattern)."""
    dt = DTYPES[data_type]
    return np.dtype(np.uint16) if dt is BF16 else dt


def bf16_to_float32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def float32_to_bf16(values: np.ndarray) -> np.ndarray:
    """Round to nearest, ties to even; NaN stays a (quiet) NaN."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((bits + (0x7FFF + ((bits >> 16) & 1))) >> 16).astype(np.uint16)
    nan = np.isnan(values)
    if nan.any():
        rounded[nan] = ((bits[nan] >> 16) | 0x0040).astype(np.uint16)
    return rounded
