"""The operator library (aclnn): each op against torch's CPU result on random inputs (several
dtypes, non-contiguous views, broadcasting, 0-size and 1-element tensors), the checks of
GetWorkspaceSize with their aclnnStatus codes, and an op as one task on its stream (ordered
with the stream's copies, seen by the trace's descriptor).

torch is the reference on both sides: without it these tests skip with one reason line,
except under CI (``CI=true``), which installs it (``pip install -e '.[torch]'``).
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

from async_util import ok, out
from mdev import constants as C
from mdev import errors as E
from mdev.operators import OPERATORS, TORCH_DTYPES

os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")     # torch_npu, if installed, is not for here
try:
    import torch
except ImportError:          # pragma: no cover - CI installs torch
    torch = None
    if os.environ.get("CI") != "true":
        pytest.skip("torch is not installed (pip install -e '.[torch]'): the operator library computes with it",
                    allow_module_level=True)

ACL = {getattr(torch, name): code for code, name in TORCH_DTYPES.items()} if torch else {}
# tolerance (rtol, atol) per result dtype: the device computes with torch's CPU kernels, so
# differences come from views and reduction orders only
TOL = {"float32": (1e-5, 1e-6), "float64": (1e-12, 1e-12), "float16": (1e-3, 1e-3), "bfloat16": (1e-2, 1e-2)}


class Board:
    """Device memory for torch tensors: each argument tensor is copied into its own device
    allocation with the same strides and storage offset, so the op sees the same view."""

    def __init__(self, acl):
        self.acl = acl
        self.aclnn = __import__("mdev.aclnn").aclnn
        ok(acl, acl.rt.set_device(0))
        self.stream = out(acl, acl.rt.create_stream())
        self.buffers: list[int] = []
        self.handles: list[tuple] = []

    def tensor(self, t: "torch.Tensor") -> int:
        storage = t.untyped_storage()
        nbytes = max(storage.nbytes(), 1)
        ptr = out(self.acl, self.acl.rt.malloc(nbytes, 0))
        self.buffers.append(ptr)
        host = np.frombuffer(bytes(storage), np.uint8) if storage.nbytes() else np.zeros(1, np.uint8)
        ok(self.acl, self.acl.rt.memcpy(ptr, nbytes, host.ctypes.data, host.nbytes, 1))
        item = t.element_size()
        handle = out(self.acl, self.aclnn.create_tensor(list(t.shape), ACL[t.dtype], list(t.stride()),
                                                        t.storage_offset(), C.ACL_FORMAT_ND,
                                                        [storage.nbytes() // item], ptr))
        self.handles.append((self.aclnn.destroy_tensor, handle))
        return handle

    def read(self, handle_tensor: "torch.Tensor", ptr: int) -> "torch.Tensor":
        """The device's bytes of ``handle_tensor``'s storage, viewed as it is."""
        storage = handle_tensor.untyped_storage()
        host = np.zeros(max(storage.nbytes(), 1), np.uint8)
        ok(self.acl, self.acl.rt.memcpy(host.ctypes.data, host.nbytes, ptr, host.nbytes, 2))
        flat = torch.frombuffer(bytearray(host.tobytes()), dtype=torch.uint8)[:storage.nbytes()]
        return flat.view(handle_tensor.dtype).as_strided(handle_tensor.shape, handle_tensor.stride(),
                                                         handle_tensor.storage_offset())

    def close(self) -> None:
        for destroy, handle in self.handles:
            destroy(handle)
        for ptr in self.buffers:
            self.acl.rt.free(ptr)
        ok(self.acl, self.acl.rt.destroy_stream(self.stream))


@pytest.fixture
def nn(acl):
    b = Board(acl)
    yield b
    b.close()


def _scalar_type(value) -> int:
    return C.ACL_BOOL if isinstance(value, bool) else C.ACL_INT64 if isinstance(value, int) else C.ACL_DOUBLE


def run_op(nn: Board, name: str, **params) -> tuple[int, str]:
    """aclnn{name} on the board with ``params`` (torch tensors, lists of them, numbers, lists of
    numbers, torch dtypes), then the same reference on the CPU: every written parameter must
    agree.  Returns the GetWorkspaceSize status and the recent error message (status != 0)."""
    aclnn, acl = nn.aclnn, nn.acl
    op = OPERATORS[name]
    args, placed = [], {}
    for param, kind in op.params:
        value = params[param]
        if value is None:
            args.append(None)
        elif kind in ("tensor", "tensor?", "out", "out?", "ref"):
            args.append(nn.tensor(value))
            placed[param] = nn.buffers[-1]
        elif kind.startswith("tensors"):
            handles = [nn.tensor(v) for v in value]
            placed[param] = nn.buffers[-len(value):] if value else []
            nn.handles = [h for h in nn.handles if h[1] not in handles]     # the list owns them
            args.append(out(acl, aclnn.create_tensor_list(handles)))
            nn.handles.append((aclnn.destroy_tensor_list, args[-1]))
        elif kind in ("scalar", "scalar?"):
            args.append(out(acl, aclnn.create_scalar(value, _scalar_type(value))))
            nn.handles.append((aclnn.destroy_scalar, args[-1]))
        elif kind == "scalars":
            handles = [out(acl, aclnn.create_scalar(v, _scalar_type(v))) for v in value]
            args.append(out(acl, aclnn.create_scalar_list(handles)))
            nn.handles.append((aclnn.destroy_scalar_list, args[-1]))
        elif kind in ("ints", "floats", "bools"):
            args.append(out(acl, getattr(aclnn, f"create_{kind[:-1]}_array")(value)))
            nn.handles.append((getattr(aclnn, f"destroy_{kind[:-1]}_array"), args[-1]))
        elif kind == "dtype":
            args.append(ACL[value] if value is not None else None)
        else:
            args.append(value)
    ws, executor, ret = getattr(aclnn, f"{_snake(name)}_get_workspace_size")(*args)
    if ret:
        return ret, acl.get_recent_err_msg()
    ok(acl, getattr(aclnn, _snake(name))(0, ws, executor, nn.stream))
    ok(acl, acl.rt.synchronize_stream(nn.stream))
    # the reference on the CPU, written into copies of the outputs as the device writes them
    kwargs = {p: (v.clone() if isinstance(v, torch.Tensor) else [x.clone() for x in v]
                  if isinstance(v, list) and v and isinstance(v[0], torch.Tensor) else v)
              for p, v in params.items() if p not in op.written or dict(op.params)[p] in ("ref", "tensors_ref")}
    with torch.inference_mode():
        results = op.reference(torch, **{p: kwargs[p] for p, k in op.params if p in kwargs})
    results = results if isinstance(results, (tuple, list)) and len(op.written) > 1 else (results,)
    for param, result in zip(op.written, results):
        target = params[param]
        if target is None or result is None:
            continue
        targets = target if isinstance(target, list) else [target]
        results_ = result if isinstance(target, list) else [result]
        ptrs = placed[param] if isinstance(target, list) else [placed[param]]
        for t, r, ptr in zip(targets, results_, ptrs):
            expected = t.clone()
            expected.copy_(r)
            got = nn.read(t, ptr)
            if t.dtype.is_floating_point:
                rtol, atol = TOL[str(t.dtype)[6:]]
                torch.testing.assert_close(got, expected, rtol=rtol, atol=atol, equal_nan=True,
                                           msg=lambda m: f"aclnn{name} {param}: {m}")
            else:
                assert torch.equal(got, expected), f"aclnn{name} {param}: {got} != {expected}"
    return 0, ""


def _snake(name: str) -> str:
    from mdev.aclnn import OP_NAMES
    return next(s for s, n in OP_NAMES.items() if n == name)


def test_add_broadcasts_over_a_transposed_view(nn):
    a = torch.randn(4, 3).t()                 # (3, 4), strides (1, 3)
    b = torch.randn(4)
    assert run_op(nn, "Add", self=a, other=b, alpha=2.0, out=torch.empty(3, 4)) == (0, "")
