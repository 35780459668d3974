"""aclnnXGetWorkspaceSize of libopapi.so for a signature that passed before (mdev.capi.signatures):
the executor is made from the earlier one's checked parameters with this call's data
addresses, without unpacking or checking the descriptors again; a signature that differs in
anything but the data addresses (a dtype, a shape, a NULL, a value) is checked, and refused
with the runtime's code."""

from __future__ import annotations

import importlib.util
import os
import struct

import pytest

from mdev import constants as C
from mdev import errors as E
from mdev.capi import nnopbase, opapi, signatures
from mdev.runtime.execution import operators

GWS = "aclnnAddGetWorkspaceSize"


def _tensor(shape, dtype=C.ACL_FLOAT, data=0x1000) -> bytes:
    dims = list(shape) + [0] * (8 - len(shape))
    strides = [1] + [0] * 7 if len(shape) == 1 else [0] * 8
    return nnopbase._TENSOR.pack(nnopbase.MAGICS["tensor"], dtype, C.ACL_FORMAT_ND, len(shape), len(shape), 1, 0,
                                 data, *dims, *strides, *dims)


def _scalar(value: float) -> bytes:
    return nnopbase._SCALAR.pack(nnopbase.MAGICS["scalar"], C.ACL_FLOAT, struct.pack("<f", value) + bytes(4))


def _add(self_shape=(4,), other_shape=(4,), out_dtype=C.ACL_FLOAT, data=0x1000, alpha=1.0, null_alpha=False):
    """The call libopapi.so's entry point makes: descriptor addresses, outputs, the packed copy."""
    packed = _tensor(self_shape, data=data) + _tensor(other_shape, data=data + 64)
    packed += b"" if null_alpha else _scalar(alpha)
    packed += _tensor((4,), out_dtype, data + 128)
    return opapi.adapter(GWS)(0x10, 0x20, 0 if null_alpha else 0x30, 0x40, 0x50, 0x60, packed)


@pytest.fixture
def counted_unpacks(acl, monkeypatch):
    if importlib.util.find_spec("torch") is None and os.environ.get("CI") != "true":
        pytest.skip("torch is not installed (pip install '.[torch]'): the operator library checks with it")
    unpack, calls = nnopbase.unpack, []
    monkeypatch.setattr(signatures, "_seen", {})
    monkeypatch.setattr(nnopbase, "unpack", lambda *a: calls.append(1) or unpack(*a))
    return calls


def test_a_repeated_signature_is_not_checked_again(counted_unpacks):
    size, first, ret = _add(data=0x1000)
    assert (size, ret) == (0, 0) and len(counted_unpacks) == 1
    size, again, ret = _add(data=0x9000)
    assert (size, ret) == (0, 0) and len(counted_unpacks) == 1, "the repeat was unpacked and checked again"
    assert again != first
    op, values = operators.executor_values(again)
    assert op.name == "Add" and (values["self"].data, values["other"].data, values["out"].data) == \
        (0x9000, 0x9040, 0x9080)
    assert operators.executor_values(first)[1]["self"].data == 0x1000
    for handle in (first, again):
        operators.destroy_acl_op_executor(handle)


def test_a_changed_signature_is_checked(counted_unpacks):
    assert _add()[-1] == 0
    # a shape that does not broadcast, an output dtype the result cannot be cast to: refused each time
    for _ in range(2):
        assert _add(other_shape=(3,))[-1] == E.ACLNN_ERR_PARAM_INVALID
        assert _add(out_dtype=C.ACL_BOOL)[-1] == E.ACLNN_ERR_PARAM_INVALID
        assert _add(null_alpha=True)[-1] == E.ACLNN_ERR_PARAM_NULLPTR
    assert len(counted_unpacks) == 1 + 2 * 3
    for _ in range(2):
        assert _add(alpha=2.0)[-1] == 0 and len(counted_unpacks) == 8      # a new value: checked once
