"""libnnopbase.so's descriptors, read from the caller's memory when an operator is asked for.

    aclCreateTensor & co (csrc/mdev_nnopbase.c) keep each descriptor as a C structure in
    the caller's memory: no call into mdev.  aclnnXGetWorkspaceSize (mdev.capi.opapi)
    passes their addresses, and :func:`read` turns one into the runtime's descriptor
    (mdev.runtime.execution.operators: TensorDesc, ScalarDesc, ArrayDesc), checked as the Python
    face's aclCreateTensor checks its arguments.

The layouts are csrc/mdev_nnopbase.c's (LP64):

    aclTensor   u32 magic, i32 dtype, i32 format, u32 ndim, u32 nstorage, u32 strided,
                i64 offset, u64 data, i64 shape[8], i64 strides[8], i64 storage[8]
    aclScalar   u32 magic, i32 dtype, the value's 8 bytes (as the dtype stores it)
    arrays      u32 magic, u32 reserved, u64 count, void* items (int64_t, float, bool,
                aclTensor*, aclScalar*)

Usually the call brings a copy of its descriptors (:func:`unpack`: libopapi.so's entry point
packs them with mdev_nnopbase_pack); when they do not fit the call, :func:`read` reads them.
A pointer that is not a live descriptor of the kind the parameter needs (its magic) is
ACLNN_ERR_PARAM_INVALID naming the parameter; an unreadable one too.  An operator's
descriptors are read in one system call a level (process_vm_readv of many ranges: each
call costs tens of microseconds on a loaded machine).
"""

from __future__ import annotations

import struct

from mdev import constants as C
from mdev import dtypes
from mdev.capi import cmemory, local
from mdev.capi.special import CONVERSIONS
from mdev.errors import ACLNN_ERR_PARAM_INVALID, AclError
from mdev.operators import (BOOLS, FLOATS, INTS, LISTS, OPT_INTS, OPT_SCALAR, READS, SCALAR, SCALARS, TORCH_DTYPES,
                            WRITES)
from mdev.runtime.execution import operators as rt_operators
from mdev.runtime.execution.operators import ArrayDesc, ScalarDesc

_TENSOR = struct.Struct("<IiiIIIqQ8q8q8q")
_SCALAR = struct.Struct("<Ii8s")
_ARRAY = struct.Struct("<I4xQQ")
TENSOR_BYTES, SCALAR_BYTES = _TENSOR.size, _SCALAR.size
TENSOR_DATA_AT = struct.calcsize("<IiiIIIq")      # a tensor's data address in its structure


def c_defines() -> str:
    """The layouts libmdev_client.so reads a copy of descriptors with (mdev.capi.local), as
    C #defines (MDEV_NN_<NAME>), and each aclDataType's element size (0: none of mdev's)."""
    fields = {"TENSOR_MAGIC": MAGICS["tensor"], "SCALAR_MAGIC": MAGICS["scalar"], "TENSOR_BYTES": TENSOR_BYTES,
              "SCALAR_BYTES": SCALAR_BYTES, "T_DTYPE": 4, "T_NDIM": 12, "T_STRIDED": 20, "T_OFFSET": 24,
              "T_DATA": TENSOR_DATA_AT, "T_SHAPE": TENSOR_DATA_AT + 8, "T_STRIDES": TENSOR_DATA_AT + 8 + 64,
              "MAX_DIMS": 8}
    sizes = [dtypes.itemsize(d) if d in TORCH_DTYPES else 0 for d in range(max(TORCH_DTYPES) + 1)]
    return ("".join(f"#define MDEV_NN_{name} {value}u\n" for name, value in fields.items())
            + f"#define MDEV_NN_ITEMSIZES {{{', '.join(map(str, sizes))}}}\n")
MAGICS = {"tensor": 0x544E444D, "scalar": 0x534E444D, INTS: 0x494E444D, FLOATS: 0x464E444D, BOOLS: 0x424E444D,
          "tensors": 0x4C4E444D, SCALARS: 0x514E444D}
_ITEMS = {INTS: "q", FLOATS: "f", BOOLS: "?", "tensors": "Q", SCALARS: "Q"}

# aclDataType -> how its value is laid out in the scalar's bytes; bf16 is float32's top half
_SCALAR_FORMATS = {C.ACL_FLOAT: "<f", C.ACL_FLOAT16: "<e", C.ACL_DOUBLE: "<d", C.ACL_INT8: "<b",
                   C.ACL_INT16: "<h", C.ACL_INT32: "<i", C.ACL_INT64: "<q", C.ACL_UINT8: "<B", C.ACL_BOOL: "<?"}


def _gather(ranges: list[tuple[int, int]], what: str) -> list[bytes]:
    try:
        return cmemory.gather(ranges)
    except AclError:            # an address the caller cannot read (107000 from the kernel's copy)
        raise AclError(ACLNN_ERR_PARAM_INVALID, f"{what}: a descriptor is not readable") from None


def _fields(layout: struct.Struct, raw: bytes, address: int, kind: str, what: str) -> tuple:
    fields = layout.unpack(raw)
    if fields[0] != MAGICS[kind]:
        raise AclError(ACLNN_ERR_PARAM_INVALID, f"{what}: {address:#x} is not a live {kind} descriptor")
    return fields


def _tensor(raw: bytes, address: int, what: str):
    _, dtype, fmt, ndim, nstorage, strided, offset, data, *dims = _fields(_TENSOR, raw, address, "tensor", what)
    shape, strides, storage = dims[0:ndim], dims[8:8 + ndim], dims[16:16 + nstorage]
    try:
        return rt_operators.tensor_desc(shape, dtype, strides if strided else None, offset, fmt, storage, data)
    except AclError as exc:       # what aclCreateTensor would refuse, said of the parameter
        raise AclError(exc.code, f"{what}: {exc.message}") from None


def _scalar(raw: bytes, address: int, what: str) -> ScalarDesc:
    _, dtype, value = _fields(_SCALAR, raw, address, "scalar", what)
    if dtype == C.ACL_BF16:
        number = struct.unpack("<f", b"\0\0" + value[:2])[0]
    elif dtype in _SCALAR_FORMATS:
        number = struct.unpack_from(_SCALAR_FORMATS[dtype], value)[0]
    else:
        raise AclError(ACLNN_ERR_PARAM_INVALID, f"{what}: a scalar of dataType {dtype}, which mdev's operators do "
                       "not compute in")
    try:
        return rt_operators.scalar_desc(number, dtype)
    except AclError as exc:
        raise AclError(exc.code, f"{what}: {exc.message}") from None


_LAYOUTS = {"tensor": _TENSOR, "scalar": _SCALAR}
_MAKERS = {"tensor": _tensor, "scalar": _scalar}


def magic(kind: str) -> int:
    """The magic of the descriptor a parameter of ``kind`` (mdev.operators) points to."""
    return MAGICS[_descriptor_kind(kind)]


def _descriptor_kind(kind: str) -> str:
    """What a parameter of ``kind`` (mdev.operators) points to."""
    if kind in LISTS:
        return "tensors"
    if kind in READS or kind in WRITES:
        return "tensor"
    if kind in (SCALAR, OPT_SCALAR):
        return "scalar"
    return INTS if kind == OPT_INTS else kind


def read(pointers: list[tuple[int, str, str]]) -> list:
    """The descriptors at each (address, parameter kind, what) -- None for NULL (the runtime
    decides whether the parameter may be absent) -- read level by level, each level in one
    go: the structures, then the arrays' items, then the lists' elements."""
    wanted = [(a, _descriptor_kind(k), w) for a, k, w in pointers]
    heads = [(a, (_LAYOUTS.get(k) or _ARRAY).size) for a, k, w in wanted if a]
    raws = iter(_gather(heads, "a descriptor") if heads else ())
    out, arrays = [], []
    for address, kind, what in wanted:
        if not address:
            out.append(None)
        elif kind in _MAKERS:
            out.append(_MAKERS[kind](next(raws), address, what))
        else:
            _, count, items = _fields(_ARRAY, next(raws), address, kind, what)
            arrays.append((len(out), kind, what, count, items))
            out.append(None)
    bodies = iter(_gather([(items, count * struct.calcsize(_ITEMS[kind])) for _, kind, _, count, items in arrays],
                          "an array's items") if arrays else ())
    lists = []
    for at, kind, what, count, _ in arrays:
        values = struct.unpack(f"<{count}{_ITEMS[kind]}", next(bodies))
        if kind in (INTS, FLOATS, BOOLS):
            out[at] = ArrayDesc(kind, values)
        else:
            lists.append((at, kind, what, values))
    elements = [(a, "tensor" if kind == "tensors" else "scalar", f"{what}[{i}]")
                for _, kind, what, values in lists for i, a in enumerate(values)]
    raws = iter(_gather([(a, _LAYOUTS[k].size) for a, k, _ in elements], "a list's element") if elements else ())
    made = iter(_MAKERS[k](next(raws), a, w) for a, k, w in elements)
    for at, kind, _, values in lists:
        out[at] = ArrayDesc(kind, tuple(next(made) for _ in values))
    return out


def unpack(blob: bytes, pointers: list[tuple[int, str, str]]) -> list:
    """The descriptors of :func:`read`, from the copy aclnnXGetWorkspaceSize sent with its
    call (mdev_nnopbase_pack: each non-NULL one's structure, then its array's items or its
    list's elements' structures, each 8-byte aligned)."""
    at = 0

    def take(n: int) -> bytes:
        nonlocal at
        raw = blob[at:at + n]
        if len(raw) != n:
            raise AclError(ACLNN_ERR_PARAM_INVALID, "the descriptors sent with the call are cut short")
        at += (n + 7) & ~7
        return raw

    out = []
    try:
        for address, kind, what in pointers:
            kind = _descriptor_kind(kind)
            if not address:
                out.append(None)
            elif kind in _MAKERS:
                out.append(_MAKERS[kind](take(_LAYOUTS[kind].size), address, what))
            else:
                _, count, _ = _fields(_ARRAY, take(_ARRAY.size), address, kind, what)
                code = _ITEMS[kind]
                values = struct.unpack(f"<{count}{code}", take(count * struct.calcsize(code))) if count else ()
                if kind in (INTS, FLOATS, BOOLS):
                    out.append(ArrayDesc(kind, values))
                    continue
                element = "tensor" if kind == "tensors" else "scalar"
                out.append(ArrayDesc(kind, tuple(_MAKERS[element](take(_LAYOUTS[element].size), a, f"{what}[{i}]")
                                                 for i, a in enumerate(values))))
    except (struct.error, OverflowError, MemoryError):
        raise AclError(ACLNN_ERR_PARAM_INVALID, "the descriptors sent with the call are not descriptors") from None
    return out


# the executor functions are the runtime's: the handle passes as the C side holds it
for _name in ("aclDestroyAclOpExecutor", "aclSetAclOpExecutorRepeatable"):
    CONVERSIONS[_name, "executor"] = local.executor
