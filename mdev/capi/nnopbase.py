"""libnnopbase.so's adapters: the operator library's argument descriptors from C.

    aclCreateTensor(viewDims, n, dtype, stride, offset, format, storageDims, m, data)
        the caller's int64_t arrays read, then mdev.runtime.operators.create_tensor
    aclCreateScalar(value*, dtype)        the number read in the dtype's C representation
    aclCreateIntArray / FloatArray / BoolArray / TensorList / ScalarList (value*, size)
        the caller's array read
    aclDestroy*(handle), aclDestroyAclOpExecutor, aclSetAclOpExecutorRepeatable
        the handle passes as it is (the prototype's marshalling, CONVERSIONS below)

A descriptor is the runtime's handle (an int the C side holds as ``aclTensor*``); a failed
create returns NULL with the reason in aclGetRecentErrMsg, as nnopbase does.  Failures are
aclnnStatus codes (161001 a null pointer, 161002 a bad parameter).
"""

from __future__ import annotations

import ctypes
import struct
from typing import Callable

from mdev import constants as C
from mdev import errors as E
from mdev.capi import cmemory
from mdev.capi.special import CONVERSIONS, adapts, needs
from mdev.runtime import boundary

MAX_ITEMS = 1 << 20          # an array or list longer than this is refused before it is read

# aclDataType -> how its value is laid out in memory (struct format); bf16 is read as float32's top half
_SCALAR_FORMATS = {C.ACL_FLOAT: "<f", C.ACL_FLOAT16: "<e", C.ACL_DOUBLE: "<d", C.ACL_INT8: "<b",
                   C.ACL_INT16: "<h", C.ACL_INT32: "<i", C.ACL_INT64: "<q", C.ACL_UINT8: "<B", C.ACL_BOOL: "<?"}


def _fail(code: int, message: str) -> int:
    boundary.record_error(code, message, boundary.ACLNN)
    return 0


def _array(address: int, count: int, kind, what: str) -> list | None:
    """The caller's array of ``count`` ``kind`` values; None (the error recorded) if it cannot be."""
    if count > MAX_ITEMS:
        _fail(E.ACLNN_ERR_PARAM_INVALID, f"{what}: {count} items; at most {MAX_ITEMS}")
        return None
    if count and not address:
        _fail(E.ACLNN_ERR_PARAM_NULLPTR, f"{what}: a null pointer for {count} items")
        return None
    return cmemory.read_array(kind, address, count)


def _created(get: Callable, *args) -> int:
    handle, ret = get(*args)
    return handle if ret == E.ACL_SUCCESS else 0


@adapts("aclCreateTensor")
def _create_tensor(fn, impl):
    def make(get):
        def call(view_dims, view_num, data_type, stride, offset, format, storage_dims, storage_num, data):
            shape = _array(view_dims, view_num, ctypes.c_int64, "aclCreateTensor: viewDims")
            storage = _array(storage_dims, storage_num, ctypes.c_int64, "aclCreateTensor: storageDims")
            if shape is None or storage is None:
                return 0
            strides = _array(stride, len(shape), ctypes.c_int64, "aclCreateTensor: stride") if stride else None
            if stride and strides is None:
                return 0
            return _created(get, shape, data_type, strides, offset, format, storage, data)
        return call
    return needs(impl, fn, make)


@adapts("aclCreateScalar")
def _create_scalar(fn, impl):
    def make(get):
        def call(value, data_type):
            if not value:
                return _fail(E.ACLNN_ERR_PARAM_NULLPTR, "aclCreateScalar: value is a null pointer")
            if data_type == C.ACL_BF16:        # bfloat16: the top half of a float32
                number = struct.unpack("<f", b"\0\0" + cmemory.read(value, 2))[0]
            elif data_type in _SCALAR_FORMATS:
                layout = _SCALAR_FORMATS[data_type]
                number = struct.unpack(layout, cmemory.read(value, struct.calcsize(layout)))[0]
            else:
                return _fail(E.ACLNN_ERR_PARAM_INVALID, f"aclCreateScalar: dataType {data_type} is not one mdev's "
                             "operators compute in")
            return _created(get, number, data_type)
        return call
    return needs(impl, fn, make)


# C function -> (the element's C type, how an element becomes the runtime's value)
_ARRAYS = {"aclCreateIntArray": (ctypes.c_int64, int), "aclCreateFloatArray": (ctypes.c_float, float),
           "aclCreateBoolArray": (ctypes.c_uint8, bool), "aclCreateTensorList": (ctypes.c_uint64, int),
           "aclCreateScalarList": (ctypes.c_uint64, int)}


@adapts(*_ARRAYS)
def _create_array(fn, impl):
    kind, convert = _ARRAYS[fn.name]

    def make(get):
        def call(value, size):
            items = _array(value, size, kind, f"{fn.name}: value")
            if items is None:
                return 0
            return _created(get, [convert(v) for v in items])
        return call
    return needs(impl, fn, make)


# the handle a destroy (or executor) function takes is the runtime's, as the C side holds it
for _name, _param in (("aclDestroyTensor", "tensor"), ("aclDestroyScalar", "scalar"),
                      ("aclDestroyIntArray", "array"), ("aclDestroyFloatArray", "array"),
                      ("aclDestroyBoolArray", "array"), ("aclDestroyTensorList", "array"),
                      ("aclDestroyScalarList", "array"), ("aclDestroyAclOpExecutor", "executor"),
                      ("aclSetAclOpExecutorRepeatable", "executor")):
    CONVERSIONS[_name, _param] = int
