"""aclnnXGetWorkspaceSize for a signature already checked: the executor made without the check.

    libopapi.so's aclnnXGetWorkspaceSize(descriptors..., values..., &size, &executor)
      --> its arguments and the copy of its descriptors (mdev.capi.nnopbase's layouts)
      --> signature: the function, the values, which descriptors are NULL, and the copy with
          every tensor's data address zeroed
      seen succeed before --> its executor's checked parameters with this call's data
                              addresses (operators.repeat_executor): (0, executor)
      otherwise           --> the runtime's check (mdev.capi.opapi), remembered when it passes

What phase 1 checks (descriptor kinds, NULLs, dtypes, shapes, strides, formats, storage,
scalar and attribute values, the meta check of the op's reference) is a function of the
signature alone: the tensors' data addresses are looked at by the run only, which locates
them.  A framework repeats a handful of signatures (torch_npu: each op of a training step
at every step), so the descriptors are neither unpacked nor checked again (~25 us a call).
Only successes are remembered: a refused signature is checked, and refused, each time.  Ops
with a text parameter (its address, not its text, is in the arguments) and descriptors
other than tensors and scalars (arrays, lists) always take the runtime's way.
"""

from __future__ import annotations

import struct
import threading

from mdev.capi import nnopbase
from mdev.operators import STR, Operator
from mdev.runtime.execution import operators
from mdev.runtime.execution.operators import TensorDesc

_MAGIC = struct.Struct("<I")
_TENSOR, _SCALAR = nnopbase.MAGICS["tensor"], nnopbase.MAGICS["scalar"]
_TENSOR_BYTES, _SCALAR_BYTES = nnopbase.TENSOR_BYTES, nnopbase.SCALAR_BYTES
_DATA = nnopbase.TENSOR_DATA_AT
_ADDRESS = struct.Struct("<Q")
MAX_SIGNATURES = 4096

# signature -> (op, its checked parameters, [(tensor parameter, where its data address is in the copy)])
_seen: dict[tuple, tuple[Operator, dict, list[tuple[str, int]]]] = {}
_last = threading.local()      # .executor: the last one this thread made by a known signature


def signed(executor: int) -> bool:
    """Whether this thread's last GetWorkspaceSize made ``executor`` from a signature that
    passes from now on (the C side may then answer it: mdev.capi.local)."""
    return getattr(_last, "executor", None) == executor


def _data_fields(packed: bytes) -> list[int] | None:
    """Where each tensor's data address lies in ``packed``; None when it holds other
    descriptors than tensors and scalars."""
    at, fields = 0, []
    while at < len(packed):
        magic = _MAGIC.unpack_from(packed, at)[0]
        if magic == _TENSOR:
            fields.append(at + _DATA)
            at += _TENSOR_BYTES
        elif magic == _SCALAR:
            at += _SCALAR_BYTES
        else:
            return None
    return fields


def _signature(op: Operator, name: str, params: tuple, described: frozenset,
               packed: bytes) -> tuple[tuple, list[int]] | None:
    """The call's signature and where its tensors' data addresses lie in ``packed``; None for
    a call that always takes the runtime's way."""
    if not packed or any(kind == STR for _, kind in op.params):
        return None
    fields = _data_fields(packed)
    if fields is None:
        return None
    blank = bytearray(packed)
    for at in fields:
        blank[at:at + 8] = bytes(8)
    shape = tuple(bool(p) if k in described else p for k, p in enumerate(params))
    return (name, shape, bytes(blank)), fields


def repeat(op: Operator, name: str, params: tuple, described: frozenset, packed: bytes) -> tuple | None:
    """(0, executor, 0) for a call of function ``name`` whose signature passed before; None
    when the runtime must check it (then :func:`remember` its success)."""
    found = _signature(op, name, params, described, packed)
    if found is None:
        return None
    seen = _seen.get(found[0])
    if seen is None:
        return None
    op, checked, tensors = seen
    values = dict(checked)
    for param, at in tensors:
        t = values[param]
        values[param] = TensorDesc(t.shape, t.dtype, t.strides, t.offset, t.format, t.storage,
                                   _ADDRESS.unpack_from(packed, at)[0])
    _last.executor = made = operators.repeat_executor(op, values)
    return 0, made, 0


def remember(op: Operator, name: str, params: tuple, described: frozenset, packed: bytes, executor: int) -> None:
    """The call made ``executor``: its signature passes from now on."""
    found = _signature(op, name, params, described, packed)
    made = operators.executor_values(executor) if found is not None else None
    if found is None or made is None:
        return
    key, fields = found
    tensors = [(param, at) for (param, value), at in zip(
        ((p, v) for p, v in made[1].items() if isinstance(v, TensorDesc)), fields)]
    if len(tensors) != len(fields):
        return
    if len(_seen) >= MAX_SIGNATURES:
        _seen.clear()
    _seen[key] = (made[0], made[1], tensors)
    _last.executor = executor
