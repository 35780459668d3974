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
import zlib

import numpy as np
import pytest

from async_util import ok, out
from corpora import under_ci
from mdev import constants as C
from mdev import errors as E
from mdev.operators import _UNARY_FLOAT, _UNARY_NUMERIC, OPERATORS, TORCH_DTYPES

os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")     # torch_npu, if installed, is not for here
try:
    import torch
except ImportError:          # CI installs torch (.[torch])
    _REASON = "torch is not installed (pip install -e '.[torch]'): the operator library computes with it"
    if under_ci():
        pytest.fail(f"{_REASON}; under CI a missing torch is a failure", pytrace=False)
    pytest.skip(_REASON, allow_module_level=True)

ACL = {getattr(torch, name): code for code, name in TORCH_DTYPES.items()}
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
        elif kind in ("tensor", "tensor?", "out", "out?", "ref", "ref?"):
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
        elif kind in ("ints", "ints?", "floats", "bools"):
            element = kind.rstrip("?")[:-1]
            args.append(out(acl, getattr(aclnn, f"create_{element}_array")(value)))
            nn.handles.append((getattr(aclnn, f"destroy_{element}_array"), args[-1]))
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
              for p, v in params.items() if p not in op.written or dict(op.params)[p] in ("ref", "ref?", "tensors_ref")}
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
                if t.dtype in (torch.float16, torch.bfloat16) and expected.numel():
                    # half precision rounds at the tensor's scale: an element near zero after a
                    # normalisation carries the rounding of the large ones (torch's own op tests
                    # widen these per op); two units in the last place of the largest element
                    atol = max(atol, 2 * torch.finfo(t.dtype).eps * float(expected.float().abs().nan_to_num().max()))
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


# ---------------------------------------------------------------------------- every op against torch
F32, F16, BF16 = ("float32",), ("float16",), ("bfloat16",)
FLOATS_ = ("float32", "float16", "bfloat16")
NUMS = FLOATS_ + ("int32", "int64")
LAYOUTS = ("strided", "empty", "one")      # a non-contiguous view with a storage offset; 0 rows; 1 element


def R(shape, dt, layout="strided", low=-5, high=6):
    """A random tensor; "strided": every other element of a wider tensor, from its second
    element (strides and a storage offset the op must honour)."""
    dtype = getattr(torch, dt) if isinstance(dt, str) else dt
    wide = tuple(shape[:-1]) + (2 * shape[-1] + 1,) if layout == "strided" and shape else tuple(shape)
    if dtype == torch.bool:
        t = torch.rand(wide) > 0.5
    elif dtype.is_floating_point:
        t = torch.randn(wide).to(dtype)
    else:
        t = torch.randint(max(low, 0) if dtype == torch.uint8 else low, high, wide, dtype=dtype)
    return t[..., 1::2] if layout == "strided" and shape else t


def S(layout):
    return {"strided": (3, 4), "empty": (0, 4), "one": (1, 1)}[layout]


def _binary(dt, layout):
    return {"self": R(S(layout), dt, layout), "other": R(S(layout)[-1:], dt, layout)}


def _unary(dt, layout):
    return {"self": R(S(layout), dt, layout)}


def _scalar(dt):
    return 2 if dt.startswith(("int", "uint")) else True if dt == "bool" else 1.5


def _lists(dt, layout, n=1, prefix="x"):
    return {f"{prefix}{i + 1}" if n > 1 else prefix: [R(S(layout), dt, layout), R((5,), dt, layout)]
            for i in range(n)}


def _log_probs(dt):
    return torch.log_softmax(torch.randn(4, 5), -1).to(getattr(torch, dt))


def _layer_norm_inputs(dt):
    return {"input": R((2, 3, 4), dt), "normalizedShape": [4], "weight": R((4,), dt), "bias": R((4,), dt)}


def _attention_inputs(dt, lo):
    """BSH layout, 4 query heads over 2 key/value heads of 4, causal (sparse mode 2), with a
    dropout mask keeping about 3 in 4."""
    return {"query": R((2, 5, 16), dt, lo), "key": R((2, 5, 8), dt, lo), "value": R((2, 5, 8), dt, lo),
            "realShiftOptional": None, "dropMaskOptional": torch.randint(0, 256, (2 * 4 * 5 * 5 // 8 + 1,),
                                                                         dtype=torch.uint8),
            "paddingMaskOptional": None, "attenMaskOptional": None, "prefixOptional": None, "scaleValue": 0.5,
            "keepProb": 0.75, "preTokens": 65536, "nextTokens": 0, "headNum": 4, "inputLayout": "BSH",
            "innerPrecise": 0, "sparseMode": 2}


# name -> (dtypes, layouts, inputs(dtype, layout)): the outputs are made like the CPU's results
CASES = {
    # Add, Adds, InplaceAdd, InplaceAdds, ... Div*: in-place division only of floating types
    **{prefix + name + suffix: (
        FLOATS_ if prefix and name == "Div" else NUMS, LAYOUTS,
        lambda dt, lo, first="selfRef" if prefix else "self", tensor=not suffix, alpha=name in ("Add", "Sub"): {
            first: R(S(lo), dt, lo), "other": R(S(lo)[-1:], dt, lo) if tensor else _scalar(dt),
            **({"alpha": _scalar(dt)} if alpha else {})})
       for name in ("Add", "Sub", "Mul", "Div") for prefix in ("", "Inplace") for suffix in ("", "s")},
    **{n: (NUMS, LAYOUTS, _binary) for n in ("Maximum", "Minimum")},
    "PowTensorScalar": (NUMS, LAYOUTS, lambda dt, lo: {"self": R(S(lo), dt, lo), "exponent": 2}),
    "InplaceAddcdiv": (FLOATS_, LAYOUTS, lambda dt, lo: {"selfRef": R(S(lo), dt, lo), "tensor1": R(S(lo), dt, lo),
                                                         "tensor2": R(S(lo)[-1:], dt, lo) + 8, "value": 0.5}),
    **{n: (NUMS, LAYOUTS, lambda dt, lo, ref=n.startswith("Inplace"): {
        "selfRef" if ref else "self": R(S(lo), dt, lo), "tensor1": R(S(lo), dt, lo), "tensor2": R(S(lo)[-1:], dt, lo),
        "value": _scalar(dt)}) for n in ("Addcmul", "InplaceAddcmul")},
    **{n: (FLOATS_, LAYOUTS, _unary) for n in (*_UNARY_FLOAT, "Gelu", "Silu")},
    **{n: (NUMS, LAYOUTS, _unary) for n in _UNARY_NUMERIC},
    **{"Inplace" + n: (FLOATS_, LAYOUTS, lambda dt, lo: {"selfRef": R(S(lo), dt, lo)}) for n in _UNARY_FLOAT},
    **{"Inplace" + n: (NUMS, LAYOUTS, lambda dt, lo: {"selfRef": R(S(lo), dt, lo)}) for n in _UNARY_NUMERIC},
    "LogicalNot": (NUMS + ("bool",), LAYOUTS, _unary),
    "BitwiseNot": (("int32", "int64", "bool"), LAYOUTS, _unary),
    "PowTensorTensor": (NUMS, LAYOUTS, lambda dt, lo: {"self": R(S(lo), dt, lo),
                                                     "exponent": R(S(lo)[-1:], dt, lo).abs()}),
    **{n: (NUMS, LAYOUTS, lambda dt, lo: {"self": R(S(lo), dt, lo), "other": R(S(lo)[-1:], dt, lo, 1, 6)})
       for n in ("RemainderTensorTensor", "FloorDivide")},       # no integer division by 0
    "Atan2": (FLOATS_, LAYOUTS, _binary),
    **{n: (NUMS + ("bool",), LAYOUTS, _binary) for n in ("LogicalAnd", "LogicalOr", "LogicalXor")},
    **{n: (("int32", "int64", "bool"), LAYOUTS, _binary) for n in ("BitwiseAndTensor", "BitwiseOrTensor", "BitwiseXorTensor")},
    "Rsub": (NUMS, LAYOUTS, lambda dt, lo: {**_binary(dt, lo), "alpha": _scalar(dt)}),
    "Rsubs": (NUMS, LAYOUTS, lambda dt, lo: {"self": R(S(lo), dt, lo), "other": _scalar(dt), "alpha": _scalar(dt)}),
    "ArgMin": (NUMS, ("strided", "one"), lambda dt, lo: {"self": R(S(lo), dt, lo), "dim": 1, "keepdim": True}),
    **{n: (NUMS, LAYOUTS, lambda dt, lo: {"self": R(S(lo) + (2,), dt, lo), "dim": [1, 2], "keepDim": True})
       for n in ("Amax", "Amin")},
    **{n: (NUMS, ("strided", "one"), lambda dt, lo: {"self": R(S(lo), dt, lo), "dim": 1, "keepdim": False})
       for n in ("MaxDim", "MinDim")},
    **{n: (NUMS, ("strided", "one"), _unary) for n in ("Max", "Min")},
    **{n: (NUMS + ("bool",), LAYOUTS, lambda dt, lo: {"self": R(S(lo), dt, lo), "dim": [1], "keepdim": False})
       for n in ("Any", "All")},
    "LogSumExp": (FLOATS_, LAYOUTS, lambda dt, lo: {"self": R(S(lo), dt, lo), "dim": [1], "keepDim": False}),
    "LinalgVectorNorm": (FLOATS_, LAYOUTS, lambda dt, lo: {"self": R(S(lo), dt, lo), "ord": 2.0, "dims": [],
                                                          "keepDims": False, "dtype": torch.float32}),
    "Cumsum": (NUMS, LAYOUTS, lambda dt, lo: {"self": R(S(lo), dt, lo), "dim": 1, "dtype": getattr(torch, dt)}),
    "Topk": (NUMS, ("strided",), lambda dt, lo: {"self": R((3, 6), dt, lo), "k": 3, "dim": 1, "largest": True,
                                                 "sorted": True}),
    "TopkV2": (NUMS, ("strided",), lambda dt, lo: {"self": R((3, 6), dt, lo), "k": 2, "dim": 0, "largest": False,
                                                   "sorted": True, "sortPolicy": 0}),
    "ChunkCat": (FLOATS_, ("strided", "one"), lambda dt, lo: {      # chunks of 3 rows: 2 each, the last padded
        "tensors": [R(S(lo), dt, lo), R(S(lo)[:1] + (2, 3), dt, lo)], "dim": 0, "numChunks": 2 if lo != "one" else 1}),
    # x[rows] += v with a repeated row; x[:, mask] = v (a 0-size index: the dimension left whole, as torch_npu passes None)
    "IndexPutImpl": (NUMS + ("bool",), ("strided", "one"), lambda dt, lo: {
        "selfRef": R((5, 4), dt, lo), "indices": [torch.tensor([0, 3, 0])], "values": R((3, 4), dt),
        "accumulate": dt != "bool", "unsafe": False} if lo == "strided" else {
        "selfRef": R((3, 4), dt), "indices": [torch.empty(0, dtype=getattr(torch, dt)),
                                              torch.tensor([True, False, True, False])],
        "values": R((1,), dt), "accumulate": False, "unsafe": False}),
    "Sort": (FLOATS_ + ("int32",), ("strided",), lambda dt, lo: {"self": R((3, 6), dt, lo), "stable": True, "dim": 1,
                                                                 "descending": False}),
    "ScatterAdd": (NUMS, ("strided",), lambda dt, lo: {"self": R((3, 4), dt, lo), "dim": 1,
                                                       "index": torch.randint(0, 4, (3, 6)), "src": R((3, 6), dt, lo)}),
    "IndexAdd": (NUMS, ("strided",), lambda dt, lo: {"self": R((5, 4), dt, lo), "dim": 0,
                                                     "index": torch.tensor([0, 4, 0]), "source": R((3, 4), dt, lo),
                                                     "alpha": _scalar(dt)}),
    **{n: (NUMS + ("bool",), LAYOUTS, lambda dt, lo: {"self": R(S(lo), dt, lo), "diagonal": 1})
       for n in ("Triu", "Tril")},
    "Flip": (NUMS + ("bool",), LAYOUTS, lambda dt, lo: {"self": R(S(lo), dt, lo), "dims": [0, 1]}),
    "Roll": (NUMS, LAYOUTS, lambda dt, lo: {"x": R(S(lo), dt, lo), "shifts": [1, -2], "dims": [0, 1]}),
    "Repeat": (NUMS + ("bool",), LAYOUTS, lambda dt, lo: {"self": R(S(lo), dt, lo), "repeats": [2, 1, 3]}),
    "ConstantPadNd": (NUMS, LAYOUTS, lambda dt, lo: {"self": R(S(lo), dt, lo), "pad": [1, 2, 0, 1],
                                                     "value": _scalar(dt)}),
    "Arange": (("float32", "int64"), ("strided",), lambda dt, lo: {"start": 1, "end": 20, "step": 3}),
    "ForeachNorm": (FLOATS_, ("strided", "empty"), lambda dt, lo: {**_lists(dt, lo), "scalar": 2.0}),
    "ForeachNonFiniteCheckAndUnscale": (F32 + F16, ("strided",), lambda dt, lo: {
        "scaledGrads": [R((3, 4), dt, lo), R((5,), dt, lo).index_fill(0, torch.tensor([2]), float("inf"))],
        "foundInf": torch.zeros(1), "invScale": torch.tensor([0.25])}),
    "AmpUpdateScale": (F32, ("strided",), lambda dt, lo: {
        "currentScale": torch.tensor([1024.0]), "growthTracker": torch.tensor([1], dtype=torch.int32),
        "foundInf": torch.tensor([0.0]), "growthFactor": 2.0, "backoffFactor": 0.5, "growthInterval": 2}),
    **{n: (FLOATS_, LAYOUTS, lambda dt, lo: {"gradOutput": R(S(lo), dt, lo), "self": R(S(lo), dt, lo)})
       for n in ("GeluBackward", "SiluBackward")},
    "EmbeddingDenseBackward": (F32 + F16, ("strided",), lambda dt, lo: {
        "grad": R((2, 3, 4), dt, lo), "indices": torch.tensor([[1, 7, 1], [0, 9, 7]]), "numWeights": 10,
        "paddingIdx": 0, "scaleGradByFreq": False}),
    "InplaceUniform": (FLOATS_, LAYOUTS, lambda dt, lo: {"selfRef": R(S(lo), dt, lo), "from": -2.0, "to": 3.0,
                                                        "seed": 1234, "offset": 8}),
    "InplaceNormal": (FLOATS_, LAYOUTS, lambda dt, lo: {"selfRef": R(S(lo), dt, lo), "mean": 1.0, "std": 0.5,
                                                       "seed": 99, "offset": 0}),
    "ThresholdBackward": (NUMS, LAYOUTS, lambda dt, lo: {"gradOutput": R(S(lo), dt, lo), "self": R(S(lo), dt, lo),
                                                         "threshold": 0}),
    "Lerp": (FLOATS_, LAYOUTS, lambda dt, lo: {"self": R(S(lo), dt, lo), "end": R(S(lo), dt, lo),
                                              "weight": R(S(lo)[-1:], dt, lo)}),
    "Lerps": (FLOATS_, LAYOUTS, lambda dt, lo: {"self": R(S(lo), dt, lo), "end": R(S(lo), dt, lo), "weight": 0.3}),
    **{n: (FLOATS_, ("strided", "one"), lambda dt, lo: {"self": R(S(lo), dt, lo), "dim": [1], "correction": int(lo != "one"),
                                                        "keepdim": lo == "one"}) for n in ("VarCorrection", "Std")},
    "OneHot": (("int64", "int32"), ("strided", "one"), lambda dt, lo: {
        "self": R(S(lo), dt, lo, 0, 4), "numClasses": 4, "onValue": torch.tensor([2.0]), "offValue": torch.tensor([-1.0]),
        "axis": -1}),
    "Linspace": (F32 + ("int32",), ("strided",), lambda dt, lo: {"start": 1.0, "end": 9.0, "steps": 5}),
    "Baddbmm": (F32 + BF16, ("strided",), lambda dt, lo: {"self": R((2, 3, 4), dt, lo), "batch1": R((2, 3, 5), dt, lo),
                                                          "batch2": R((2, 5, 4), dt, lo), "beta": 0.5, "alpha": 2.0,
                                                          "cubeMathType": 0}),
    "DropoutGenMask": (F32, ("strided", "one"), lambda dt, lo: {"shape": [3, 50], "prob": 0.25, "seed": 7,
                                                                "offset": 3}),
    "DropoutGenMaskV2": (F32, ("strided", "one"), lambda dt, lo: {"shape": list(S(lo)), "prob": 0.5, "seed": 1,
                                                                  "offset": 0, "probDataType": torch.float32}),
    "DropoutDoMask": (FLOATS_, LAYOUTS, lambda dt, lo: {"self": R(S(lo), dt, lo), "prob": 0.25,
                                                       "mask": torch.randint(0, 256, (16,), dtype=torch.uint8)}),
    "Cast": (NUMS + ("bool",), LAYOUTS, lambda dt, lo: {"self": R(S(lo), dt, lo), "dtype": torch.float16}),
    "InplaceCopy": (NUMS + ("bool",), LAYOUTS, lambda dt, lo: {"selfRef": R(S(lo), dt, lo),
                                                               "src": R(S(lo)[-1:], "float32", lo)}),
    "InplaceFillScalar": (NUMS + ("bool",), LAYOUTS, lambda dt, lo: {"selfRef": R(S(lo), dt, lo),
                                                                     "value": _scalar(dt)}),
    **{n: (NUMS + ("bool",), LAYOUTS, lambda dt, lo: {"selfRef": R(S(lo), dt, lo)})
       for n in ("InplaceZero", "InplaceOne")},
    **{n: (NUMS + ("bool",), LAYOUTS, _binary) for n in ("EqTensor", "NeTensor", "GtTensor", "GeTensor",
                                                        "LtTensor", "LeTensor")},
    **{n: (NUMS, LAYOUTS, lambda dt, lo: {"self": R(S(lo), dt, lo), "other": _scalar(dt)})
       for n in ("EqScalar", "NeScalar", "GtScalar", "GeScalar", "LtScalar", "LeScalar")},
    "SWhere": (NUMS + ("bool",), LAYOUTS, lambda dt, lo: {"condition": R(S(lo), "bool", lo), **_binary(dt, lo)}),
    "InplaceMaskedFillScalar": (NUMS + ("bool",), LAYOUTS, lambda dt, lo: {
        "selfRef": R(S(lo), dt, lo), "mask": R(S(lo)[-1:], "bool", lo), "value": _scalar(dt)}),
    "Clamp": (NUMS, LAYOUTS, lambda dt, lo: {"self": R(S(lo), dt, lo), "min": -1, "max": None}),
    "Gather": (NUMS + ("bool",), ("strided",), lambda dt, lo: {
        "self": R((3, 4), dt, lo), "dim": 1, "index": torch.randint(0, 4, (3, 6))}),
    "IndexSelect": (NUMS, ("strided",), lambda dt, lo: {
        "self": R((3, 4), dt, lo), "dim": 0, "index": torch.randint(0, 3, (5,), dtype=torch.int32)}),
    "Embedding": (FLOATS_, ("strided",), lambda dt, lo: {"weight": R((10, 4), dt, lo),
                                                        "indices": torch.randint(0, 10, (2, 3))}),
    **{n: (NUMS + ("bool",), ("strided", "empty"), lambda dt, lo: {
        "tensors": [R(S(lo), dt, lo), R(S(lo), dt, lo)], "dim": 0}) for n in ("Cat", "Stack")},
    **{n: (FLOATS_ + (("int32",) if n == "ReduceSum" else ()), LAYOUTS, lambda dt, lo: {
        "self": R(S(lo) + (2,), dt, lo), "dim": [1], "keepDim": False, "dtype": getattr(torch, dt)})
       for n in ("ReduceSum", "Mean")},
    "ArgMax": (NUMS, ("strided", "one"), lambda dt, lo: {"self": R(S(lo), dt, lo), "dim": 1, "keepdim": False}),
    "Mm": (FLOATS_, ("strided",), lambda dt, lo: {"self": R((3, 5), dt), "mat2": R((4, 5), dt).t(),
                                                  "cubeMathType": 0}),
    "Matmul": (FLOATS_, ("strided",), lambda dt, lo: {"self": R((2, 3, 5), dt), "mat2": R((5, 4), dt),
                                                      "cubeMathType": 0}),
    "BatchMatMul": (FLOATS_, ("strided",), lambda dt, lo: {"self": R((2, 3, 5), dt),
                                                           "mat2": R((2, 4, 5), dt).transpose(1, 2),
                                                           "cubeMathType": 0}),
    "Addmm": (FLOATS_, ("strided",), lambda dt, lo: {"self": R((4,), dt), "mat1": R((3, 5), dt),
                                                     "mat2": R((4, 5), dt).t(), "beta": 1.0, "alpha": 0.5,
                                                     "cubeMathType": 0}),
    **{n: (FLOATS_, LAYOUTS, lambda dt, lo: {"self": R(S(lo), dt, lo), "dim": -1}) for n in ("Softmax", "LogSoftmax")},
    **{n: (FLOATS_, LAYOUTS, lambda dt, lo, fn=fn: {"gradOutput": R(S(lo), dt, lo),
                                                   "output": fn(R(S(lo), "float32", lo), -1).to(getattr(torch, dt)),
                                                   "dim": -1})
       for n, fn in (("SoftmaxBackward", lambda x, d: torch.softmax(x, d)),
                     ("LogSoftmaxBackward", lambda x, d: torch.log_softmax(x, d)))},
    "MseLoss": (FLOATS_, LAYOUTS, lambda dt, lo: {"self": R(S(lo), dt, lo), "target": R(S(lo), dt, lo),
                                                  "reduction": 1 if lo != "empty" else 2}),
    "MseLossBackward": (FLOATS_, LAYOUTS, lambda dt, lo: {"gradOutput": R((), dt), "self": R(S(lo), dt, lo),
                                                          "target": R(S(lo), dt, lo),
                                                          "reduction": 1 if lo != "empty" else 2}),
    "NLLLoss": (FLOATS_, ("strided",), lambda dt, lo: {"self": _log_probs(dt), "target": torch.randint(0, 5, (4,)),
                                                       "weight": None, "reduction": 1, "ignoreIndex": -100}),
    "NLLLossBackward": (FLOATS_, ("strided",), lambda dt, lo: {
        "gradOutput": R((), dt), "self": _log_probs(dt), "target": torch.tensor([0, 4, -100, 2]), "weight": None,
        "reduction": 1, "ignoreIndex": -100, "totalWeight": torch.tensor(3.0).to(getattr(torch, dt))}),
    "LayerNorm": (F32 + F16, ("strided",), lambda dt, lo: {**_layer_norm_inputs(dt), "eps": 1e-5}),
    "LayerNormBackward": (F32, ("strided",), lambda dt, lo: {
        "gradOut": R((2, 3, 4), dt), **(lambda i: {**i, **dict(zip(("mean", "rstd"), torch.ops.aten.native_layer_norm(
            i["input"], [4], i["weight"], i["bias"], 1e-5)[1:]))})(_layer_norm_inputs(dt)),
        "outputMask": [True, True, True]}),
    "BatchNorm": (F32 + BF16, ("strided",), lambda dt, lo: {
        "input": R((2, 3, 4, 5), dt, lo), "weight": R((3,), dt), "bias": R((3,), dt), "runningMean": R((3,), dt),
        "runningVar": R((3,), dt).abs(), "training": True, "momentum": 0.1, "eps": 1e-5}),
    "BatchNormBackward": (F32, ("strided",), lambda dt, lo: (lambda x, w: {
        "gradOut": R((2, 3, 4, 5), dt, lo), "input": x, "weight": w, "runningMean": None, "runningVar": None,
        **dict(zip(("saveMean", "saveInvstd"), torch.ops.aten.native_batch_norm(x, w, None, None, None, True, 0.1,
                                                                              1e-5)[1:])),
        "training": True, "eps": 1e-5, "outputMask": [True, True, True]})(R((2, 3, 4, 5), dt, lo), R((3,), dt))),
    "Convolution": (F32 + BF16, ("strided",), lambda dt, lo: {
        "input": R((2, 4, 7, 7), dt, lo), "weight": R((6, 2, 3, 3), dt), "bias": R((6,), dt), "stride": [2, 1],
        "padding": [1, 1], "dilation": [1, 1], "transposed": False, "outputPadding": [0, 0], "groups": 2,
        "cubeMathType": 0}),
    "ConvolutionBackward": (F32, ("strided",), lambda dt, lo: {
        "gradOutput": R((2, 6, 4, 7), dt, lo), "input": R((2, 4, 7, 7), dt, lo), "weight": R((6, 2, 3, 3), dt),
        "biasSizes": [6], "stride": [2, 1], "padding": [1, 1], "dilation": [1, 1], "transposed": False,
        "outputPadding": [0, 0], "groups": 2, "outputMask": [True, True, True], "cubeMathType": 0}),
    "MaxPool2dWithMask": (FLOATS_, ("strided",), lambda dt, lo: {
        "self": R((2, 3, 8, 9), dt, lo), "kernelSize": [3, 3], "stride": [2, 2], "padding": [1, 1],
        "dilation": [1, 1], "ceilMode": False}),
    "MaxPool2dWithMaskBackward": (F32 + BF16, ("strided",), lambda dt, lo: (lambda x: {
        "gradOutput": R((2, 3, 4, 5), dt, lo), "self": x,
        "indices": OPERATORS["MaxPool2dWithMask"].reference(torch, x, [3, 3], [2, 2], [1, 1], [1, 1], False)[1],
        "kernelSize": [3, 3], "stride": [2, 2], "padding": [1, 1], "dilation": [1, 1], "ceilMode": False})(
            R((2, 3, 8, 9), dt, lo))),
    "FlashAttentionScore": (FLOATS_, ("strided",), lambda dt, lo: {**_attention_inputs(dt, lo),
                                                                  "softmaxOutOut": None}),
    "FlashAttentionScoreGrad": (F32 + BF16, ("strided",), lambda dt, lo: {
        **_attention_inputs(dt, lo), "keyIn": R((2, 5, 8), dt, lo), "dy": R((2, 5, 16), dt, lo),
        "pseShiftOptional": None, "softmaxMaxOptional": None, "softmaxSumOptional": None, "softmaxInOptional": None,
        "attentionInOptional": None, "dpseOut": None}),
    "ForeachAddListV2": (FLOATS_, LAYOUTS, lambda dt, lo: {**_lists(dt, lo, 2), "alpha": 0.5}),
    **{n: (FLOATS_, LAYOUTS, lambda dt, lo: _lists(dt, lo)) for n in OPERATORS
       if n.startswith("Foreach") and OPERATORS[n].signature == "x:tensors, out:tensors_out"},
    **{f"Foreach{n}List": (FLOATS_, LAYOUTS, lambda dt, lo: {**_lists(dt, lo, 2)})
       for n in ("Mul", "Div", "Maximum", "Minimum", "Pow")},
    "ForeachSubList": (FLOATS_, LAYOUTS, lambda dt, lo: {**_lists(dt, lo, 2), "alpha": torch.tensor([0.5])}),
    "ForeachSubListV2": (FLOATS_, LAYOUTS, lambda dt, lo: {**_lists(dt, lo, 2), "alpha": 0.5}),
    **{f"Foreach{n}ScalarV2": (FLOATS_, LAYOUTS, lambda dt, lo: {**_lists(dt, lo), "scalar": 1.5})
       for n in ("Sub", "Div", "Maximum", "Minimum", "Pow")},
    **{f"Foreach{n}Scalar": (FLOATS_, LAYOUTS, lambda dt, lo: {**_lists(dt, lo), "scalar": torch.tensor([1.5])})
       for n in ("Add", "Sub", "Mul", "Div", "Maximum", "Minimum", "Pow")},
    **{f"Foreach{n}ScalarList": (FLOATS_, LAYOUTS, lambda dt, lo: {**_lists(dt, lo), "scalars": [1.5, -0.5]})
       for n in ("Add", "Sub", "Mul", "Maximum", "Minimum", "Pow")},
    "ForeachAddcdivScalarV2": (FLOATS_, LAYOUTS, lambda dt, lo: {**_lists(dt, lo, 3), "scalar": 0.5}),
    "ForeachLerpList": (FLOATS_, LAYOUTS, lambda dt, lo: {**_lists(dt, lo, 2), "weight": _lists(dt, lo)["x"]}),
    "ForeachZeroInplace": (NUMS + ("bool",), LAYOUTS, lambda dt, lo: _lists(dt, lo)),
    **{n: (FLOATS_, LAYOUTS, lambda dt, lo: {**_lists(dt, lo), "scalar": 0.5})
       for n in ("ForeachAddScalarV2", "ForeachMulScalarV2")},
    "ForeachDivScalarList": (FLOATS_, LAYOUTS, lambda dt, lo: {**_lists(dt, lo), "scalars": [2.0, 4.0]}),
    "ForeachAddcmulScalarV2": (FLOATS_, LAYOUTS, lambda dt, lo: {**_lists(dt, lo, 3), "scalar": 0.5}),
    "ForeachLerpScalar": (FLOATS_, LAYOUTS, lambda dt, lo: {**_lists(dt, lo, 2), "weight": 0.25}),
}


def _outputs_like(name: str, inputs: dict, layout: str) -> dict:
    """The written parameters, shaped and typed as the CPU's results (non-contiguous too)."""
    op = OPERATORS[name]
    kwargs = {p: (v.clone() if isinstance(v, torch.Tensor) else v) for p, v in inputs.items()}
    results = op.reference(torch, **{p: kwargs.get(p) for p, k in op.params if k not in ("out", "out?", "tensors_out")})
    results = results if isinstance(results, (tuple, list)) and len(op.written) > 1 else (results,)

    def like(r):
        return R(tuple(r.shape), r.dtype, layout if r.dim() else "contiguous") if layout == "strided" \
            else torch.empty_like(r)
    written = {}
    for param, result in zip(op.written, results):
        if param in inputs:
            continue
        written[param] = [like(r) for r in result] if isinstance(result, (tuple, list)) else like(result)
    return written


@pytest.mark.parametrize("name,dtype,layout", [(n, d, lo) for n, (dts, los, _) in CASES.items()
                                               for d in dts for lo in los])
def test_op_matches_torch(nn, name, dtype, layout):
    torch.manual_seed(zlib.crc32(f"{name}/{dtype}/{layout}".encode()) & 0xFFFF)   # hash() differs per process
    inputs = CASES[name][2](dtype, layout)
    assert run_op(nn, name, **inputs, **_outputs_like(name, inputs, layout)) == (0, "")


def test_every_op_has_cases():
    assert sorted(set(OPERATORS) - set(CASES)) == []


# ---------------------------------------------------------------------------- GetWorkspaceSize's checks
def test_get_workspace_size_refuses_like_the_real_op(nn):
    a, b = torch.randn(3, 4), torch.randn(5)
    code, message = run_op(nn, "Add", self=a, other=b, alpha=1.0, out=torch.empty(3, 4))
    assert code == E.ACLNN_ERR_PARAM_INVALID and "aclnnAddGetWorkspaceSize" in message and "broadcast" in message
    code, message = run_op(nn, "Add", self=a, other=a, alpha=1.0, out=torch.empty(4, 3))
    assert code == E.ACLNN_ERR_PARAM_INVALID and "out has shape [4, 3], the result's is [3, 4]" in message
    code, message = run_op(nn, "Add", self=a, other=a, alpha=1.0, out=torch.empty(3, 4, dtype=torch.int32))
    assert code == E.ACLNN_ERR_PARAM_INVALID and "cannot be cast to out's int32" in message
    code, message = run_op(nn, "Mm", self=torch.ones(3, 4, dtype=torch.int32), mat2=torch.ones(4, 2, dtype=torch.int32),
                           out=torch.empty(3, 2, dtype=torch.int32), cubeMathType=0)
    assert code == E.ACLNN_ERR_PARAM_INVALID and "self has dtype int32, not one of" in message
    code, message = run_op(nn, "Relu", self=None, out=torch.empty(3))
    assert code == E.ACLNN_ERR_PARAM_NULLPTR and "aclnnReluGetWorkspaceSize: self is a null pointer" in message


def test_an_op_mdev_lacks_fails_at_get_workspace_size_naming_it(nn):
    ws, executor, ret = nn.aclnn.operator_get_workspace_size("MoeGatingTopK", 1, 2, 3)
    assert (ws, executor, ret) == (None, None, E.ACLNN_ERR_INNER_FIND_KERNEL_ERROR)
    assert "aclnnMoeGatingTopKGetWorkspaceSize: mdev's operator library has no operator" in \
        nn.acl.get_recent_err_msg()


def test_an_executor_runs_once_unless_repeatable(nn):
    acl, aclnn = nn.acl, nn.aclnn
    x = torch.zeros(4)
    handle = nn.tensor(x)
    one = out(acl, aclnn.create_scalar(1.0, C.ACL_FLOAT))
    ws, executor, ret = aclnn.inplace_adds_get_workspace_size(handle, one, one)
    ok(acl, ret)
    ok(acl, aclnn.inplace_adds(0, ws, executor, nn.stream))
    assert aclnn.inplace_adds(0, ws, executor, nn.stream) == E.ACLNN_ERR_PARAM_INVALID     # used up
    ws, executor, ret = aclnn.inplace_adds_get_workspace_size(handle, one, one)
    ok(acl, aclnn.set_acl_op_executor_repeatable(executor))
    ok(acl, aclnn.destroy_scalar(one))           # the executor keeps what the descriptors said
    for _ in range(3):
        ok(acl, aclnn.inplace_adds(0, ws, executor, nn.stream))
    ok(acl, aclnn.destroy_acl_op_executor(executor))
    ok(acl, acl.rt.synchronize_stream(nn.stream))
    assert nn.read(x, nn.buffers[-1]).tolist() == [4.0] * 4


def test_an_op_is_one_task_ordered_with_the_streams_copies(nn):
    """H2D copy, op, D2H copy queued back to back on one stream, no synchronisation between:
    the op sees the copy's bytes and the copy back sees the op's."""
    acl, aclnn = nn.acl, nn.aclnn
    x = torch.zeros(1024)
    handle = nn.tensor(x)
    ptr = nn.buffers[-1]
    src = np.arange(1024, dtype=np.float32)
    dst = np.zeros(1024, np.float32)
    two = out(acl, aclnn.create_scalar(2.0, C.ACL_FLOAT))
    nn.handles.append((aclnn.destroy_scalar, two))
    ws, executor, ret = aclnn.inplace_muls_get_workspace_size(handle, two)
    ok(acl, ret)
    ok(acl, acl.rt.memcpy_async(ptr, 4096, src.ctypes.data, 4096, 1, nn.stream))
    ok(acl, aclnn.inplace_muls(0, ws, executor, nn.stream))
    ok(acl, acl.rt.memcpy_async(dst.ctypes.data, 4096, ptr, 4096, 2, nn.stream))
    ok(acl, acl.rt.synchronize_stream(nn.stream))
    assert (dst == 2 * src).all()


def test_the_descriptor_tells_the_sanitizer_and_trace_what_an_op_touches():
    from mdev import taskspec as T
    a, b, o = ("d", 0, 0), ("d", 0, 4096), ("d", 0, 8192)
    args = ("Add", ((a, (3, 4), (1, 3), C.ACL_FLOAT), (b, (4,), (1,), C.ACL_FLOAT)),
            ((o, (3, 4), (4, 1), C.ACL_FLOAT),), (1.0,))
    assert T.SPECS["operator"].accesses(args) == [(a, 48, False, None), (b, 16, False, None), (o, 48, True, None)]
    assert T.SPECS["operator"].describe(args) == "aclnnAdd"
    lists = ("ForeachSqrt", (((a, (2,), (1,), C.ACL_FLOAT), None),), (((o, (0,), (1,), C.ACL_FLOAT),),), ())
    assert T.SPECS["operator"].accesses(lists) == [(a, 8, False, None)]      # an empty tensor touches nothing


@pytest.mark.parametrize("buggy", [True, False], ids=["buggy", "correct"])
def test_the_sanitizer_sees_an_ops_tensors(nn, buggy):
    """An op writes a tensor on one stream, a copy on another reads it: without the event
    between them racecheck names the hazard (it read the op's extents from its descriptor)."""
    from mdev import sanitizer
    acl, aclnn = nn.acl, nn.aclnn
    other = out(acl, acl.rt.create_stream())
    event = out(acl, acl.rt.create_event())
    x = nn.tensor(torch.ones(256))
    ptr = nn.buffers[-1]
    copy = out(acl, acl.rt.malloc(1024, 0))
    two = out(acl, aclnn.create_scalar(2.0, C.ACL_FLOAT))
    with sanitizer.checking("racecheck") as found:
        ws, executor, ret = aclnn.inplace_muls_get_workspace_size(x, two)
        ok(acl, ret)
        ok(acl, aclnn.inplace_muls(0, ws, executor, nn.stream))
        if not buggy:
            ok(acl, acl.rt.record_event(event, nn.stream))
            ok(acl, acl.rt.stream_wait_event(other, event))
        ok(acl, acl.rt.memcpy_async(copy, 1024, ptr, 1024, 3, other))
        ok(acl, acl.rt.synchronize_device())
    if buggy:
        assert [(r.checker, r.kind) for r in found] == [("racecheck", "read-after-write hazard")]
        assert f"allocation {ptr:#x}" in "\n".join("\n".join(r.lines) for r in found)
    else:
        assert found == []
    for handle, destroy in ((two, aclnn.destroy_scalar), (event, acl.rt.destroy_event)):
        ok(acl, destroy(handle))
    ok(acl, acl.rt.free(copy))
    ok(acl, acl.rt.destroy_stream(other))


def test_a_failing_op_fails_its_stream_not_the_device(nn):
    """An index out of range (no meta check can see values): the task faults as an AI Core
    exception, the stream's synchronisation reports it, and the device computes the next
    op.  Memory freed between the two phases is refused on the host."""
    acl, aclnn = nn.acl, nn.aclnn
    args = [nn.tensor(torch.ones(3, 4)), 1, nn.tensor(torch.tensor([[0, 9]])), nn.tensor(torch.empty(1, 2))]
    ws, executor, ret = aclnn.gather_get_workspace_size(*args)
    ok(acl, ret)
    ok(acl, aclnn.gather(0, ws, executor, nn.stream))
    assert acl.rt.synchronize_stream(nn.stream) == acl.ACL_ERROR_RT_AICORE_EXCEPTION
    assert "aclnnGather: RuntimeError: index 9 is out of bounds" in acl.get_recent_err_msg()
    ok(acl, acl.rt.destroy_stream_force(nn.stream))
    nn.stream = out(acl, acl.rt.create_stream())
    x = torch.ones(8)
    handle = nn.tensor(x)
    ptr = nn.buffers.pop()
    ws, executor, ret = aclnn.inplace_zero_get_workspace_size(handle)
    ok(acl, ret)
    ok(acl, acl.rt.free(ptr))
    assert aclnn.inplace_zero(0, ws, executor, nn.stream) == acl.ACL_ERROR_RT_PARAM_INVALID     # caught on the host
    assert "is not inside a live device allocation" in acl.get_recent_err_msg()
    assert run_op(nn, "InplaceOne", selfRef=torch.zeros(3)) == (0, "")


TRACED_PROGRAM = """
    import os
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    import numpy as np
    import mdev.acl as acl, mdev.aclnn as aclnn
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    stream, _ = acl.rt.create_stream()
    ptr, _ = acl.rt.malloc(4096, 0)
    x, _ = aclnn.create_tensor([32, 32], acl.ACL_FLOAT, None, 0, acl.ACL_FORMAT_ND, [32, 32], ptr)
    ws, executor, ret = aclnn.relu_get_workspace_size(x, x)
    assert ret == 0, acl.get_recent_err_msg()
    begin, _ = acl.rt.create_event_with_flag(acl.ACL_EVENT_TIME_LINE)
    end, _ = acl.rt.create_event_with_flag(acl.ACL_EVENT_TIME_LINE)
    assert acl.rt.record_event(begin, stream) == 0
    assert aclnn.relu(0, ws, executor, stream) == 0
    assert acl.rt.record_event(end, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    ms, ret = acl.rt.event_elapsed_time(begin, end)
    assert ret == 0 and ms > 0, (ms, ret)
    print("elapsed", ms)
"""


def test_an_op_is_a_task_of_the_trace_and_of_modelled_time(board, run_py, tmp_path):
    """Under MDEV_TRACE the op is a task named by its descriptor; under MDEV_MODEL_TIME the
    events around it see its (measured) time."""
    import json
    path = tmp_path / "op.json"
    proc = run_py(TRACED_PROGRAM, board, timeout=120, env={"MDEV_TRACE": str(path), "MDEV_MODEL_TIME": "1"})
    assert "elapsed" in proc.stdout
    tasks = [e for e in json.loads(path.read_text())["traceEvents"]
             if e.get("ph") == "X" and e.get("cat") == "task" and e["args"].get("kind") == "operator"]
    assert len(tasks) == 1 and tasks[0]["dur"] > 0, tasks


def test_a_device_and_a_host_load_torch_only_for_an_operator():
    """The device process imports every op's module, the host the whole runtime: neither
    loads torch until an operator needs it (a board that runs none pays nothing)."""
    import subprocess
    import sys
    code = ("import sys, mdev.board.device_process, mdev.aclnn, mdev.runtime.registry as r; r.entries(); "
            "print('torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, MDEV_AUTOSTART="0"))
    assert proc.stdout.strip() == "False", proc.stderr


def test_a_hostile_operator_task_fails_the_task_not_the_device(nn):
    """Tasks a host could send without the library's checks: an op mdev lacks, a broadcast
    view of more elements than the HBM has bytes, a malformed tensor.  Each fails its task;
    the device computes the next op."""
    from mdev.runtime import streams
    from mdev.runtime.core import RUNTIME as rt
    acl = nn.acl
    nn.tensor(torch.zeros(4))
    where = rt.memory.operand(nn.buffers[-1], 16, write=True).location()
    st = rt.stream_in_context(nn.stream)
    for task in (("Nope", (), (), ()),
                 ("Relu", ((where, (1 << 40,), (0,), C.ACL_FLOAT),), ((where, (4,), (1,), C.ACL_FLOAT),), ()),
                 ("Relu", ((where, (4,), (-1,), C.ACL_FLOAT),), ((where, (4,), (1,), C.ACL_FLOAT),), ()),
                 ("Relu", (5,), (None,), ())):
        streams.submit(st, "operator", *task)
        code = acl.rt.synchronize_stream(nn.stream)
        assert code in (acl.ACL_ERROR_RT_PARAM_INVALID, acl.ACL_ERROR_RT_AICORE_EXCEPTION), (task, code)
        ok(acl, acl.rt.destroy_stream_force(nn.stream))
        nn.stream = out(acl, acl.rt.create_stream())
        st = rt.stream_in_context(nn.stream)
    assert run_op(nn, "Relu", self=torch.randn(5), out=torch.empty(5)) == (0, "")


def test_flash_attention_is_torchs_attention():
    """The reference itself against torch's own: scaled_dot_product_attention (causal,
    grouped-query heads) and its autograd gradients, in two layouts."""
    from mdev.operators import _Attention
    q, k, v, dy = (torch.randn(2, n, 6, 8, dtype=torch.float64) for n in (4, 2, 2, 4))
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    want = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=True, scale=0.3, enable_gqa=True)
    want.backward(dy)
    for layout, to, back in (("BNSD", lambda x: x, lambda x: x),
                             ("BSH", lambda x: x.transpose(1, 2).reshape(2, 6, -1),
                              lambda x: x.reshape(2, 6, -1, 8).transpose(1, 2))):
        math = _Attention(torch, to(q), to(k), to(v), None, None, None, 0.3, 1.0, 65536, 0, 4, layout, 0)
        torch.testing.assert_close(back(math.forward()[3]).double(), want, rtol=1e-5, atol=1e-6)
        grads = math.backward(to(dy))[:3]
        for got, leaf in zip(grads, leaves):
            torch.testing.assert_close(back(got).double(), leaf.grad, rtol=1e-5, atol=1e-6)


def test_a_captured_op_replays_with_its_graph(nn):
    """aclnn ops captured into a model run instance (as torch_npu's NPU graphs capture them)
    run again at each replay, on the data there is then."""
    acl, aclnn = nn.acl, nn.aclnn
    x = torch.ones(6)
    handle = nn.tensor(x)
    three = out(acl, aclnn.create_scalar(3.0, C.ACL_FLOAT))
    nn.handles.append((aclnn.destroy_scalar, three))
    capture = out(acl, acl.rt.create_stream())
    ok(acl, acl.mdl.ri_capture_begin(capture, 0))
    ws, executor, ret = aclnn.inplace_muls_get_workspace_size(handle, three)
    ok(acl, ret)
    ok(acl, aclnn.inplace_muls(0, ws, executor, capture))
    model = out(acl, acl.mdl.ri_capture_end(capture))
    assert nn.read(x, nn.buffers[-1]).tolist() == [1.0] * 6          # captured, not run
    for _ in range(2):
        ok(acl, acl.mdl.ri_execute_async(model, nn.stream))
    ok(acl, acl.rt.synchronize_stream(nn.stream))
    assert nn.read(x, nn.buffers[-1]).tolist() == [9.0] * 6
    ok(acl, acl.mdl.ri_destroy(model))
    ok(acl, acl.rt.destroy_stream(capture))


def test_a_checked_call_is_remembered_with_its_outcome(nn):
    """GetWorkspaceSize remembers what the meta check said for the same shapes, strides,
    dtypes and attributes: a refusal stays a refusal, another shape is checked afresh."""
    from mdev.runtime.execution import operators as host
    a, b = torch.randn(3, 4), torch.randn(5)
    first = run_op(nn, "Add", self=a, other=b, alpha=1.0, out=torch.empty(3, 4))
    assert first[0] == E.ACLNN_ERR_PARAM_INVALID
    assert run_op(nn, "Add", self=a, other=b, alpha=1.0, out=torch.empty(3, 4)) == first
    assert run_op(nn, "Add", self=a, other=torch.randn(4), alpha=1.0, out=torch.empty(3, 4)) == (0, "")
    assert run_op(nn, "Add", self=a, other=torch.randn(4), alpha=1, out=torch.empty(3, 4)) == (0, "")
    assert ("Add", ((3, 4), (4, 1), C.ACL_FLOAT), ((4,), (1,), C.ACL_FLOAT), ("int", 1),
            ((3, 4), (4, 1), C.ACL_FLOAT)) in host._CHECKED


def test_the_mlp_training_step_of_torch_npu_runs_on_the_device(nn):
    """Linear + ReLU + MSELoss + SGD, three steps, as the 9 ops torch_npu calls for it
    (research: Addmm with the transposed weight, Relu, MseLoss, InplaceFillScalar,
    MseLossBackward, ThresholdBackward, Mm, ReduceSum, ForeachAddListV2), queued on one
    stream with no synchronisation between them: the parameters match torch's own training."""
    acl, aclnn = nn.acl, nn.aclnn
    torch.manual_seed(7)
    model = torch.nn.Linear(8, 4)
    x, y = torch.randn(6, 8), torch.randn(6, 4)
    lr = 0.1
    handles = {}

    def place(name, t):
        t = t.detach().clone()
        handles[name] = (nn.tensor(t), nn.buffers[-1], t)

    def view(name, shape, strides):     # another aclTensor over a placed tensor's bytes
        handle = out(acl, aclnn.create_tensor(list(shape), C.ACL_FLOAT, list(strides), 0, C.ACL_FORMAT_ND,
                                              [math.prod(shape)], handles[name][1]))
        nn.handles.append((aclnn.destroy_tensor, handle))
        return handle

    def scalar(value):
        handle = out(acl, aclnn.create_scalar(value, C.ACL_FLOAT))
        nn.handles.append((aclnn.destroy_scalar, handle))
        return handle

    def run(op, *args):
        ws, executor, ret = getattr(aclnn, f"{op}_get_workspace_size")(*args)
        ok(acl, ret)
        ok(acl, getattr(aclnn, op)(0, ws, executor, nn.stream))

    for name, t in (("W", model.weight), ("b", model.bias), ("x", x), ("y", y), ("h", torch.empty(6, 4)),
                    ("a", torch.empty(6, 4)), ("loss", torch.empty(())), ("g_loss", torch.empty(())),
                    ("g_a", torch.empty(6, 4)), ("g_h", torch.empty(6, 4)), ("g_W", torch.empty(4, 8)),
                    ("g_b", torch.empty(4))):
        place(name, t)
    h = {name: entry[0] for name, entry in handles.items()}
    w_t, g_h_t = view("W", (8, 4), (1, 8)), view("g_h", (4, 6), (1, 4))
    one, zero, minus_lr = scalar(1.0), scalar(0.0), scalar(-lr)
    def listed(*names):                # a list owns its tensors: destroying it destroys them
        tensors = [view(name, tuple(handles[name][2].shape), handles[name][2].stride()) for name in names]
        nn.handles = [e for e in nn.handles if e[1] not in tensors]
        handle = out(acl, aclnn.create_tensor_list(tensors))
        nn.handles.append((aclnn.destroy_tensor_list, handle))
        return handle

    params, grads, targets = listed("W", "b"), listed("g_W", "g_b"), listed("W", "b")
    dims = out(acl, aclnn.create_int_array([0]))
    nn.handles.append((aclnn.destroy_int_array, dims))
    for _ in range(3):
        run("addmm", h["b"], h["x"], w_t, one, one, h["h"], 0)
        run("relu", h["h"], h["a"])
        run("mse_loss", h["a"], h["y"], 1, h["loss"])
        run("inplace_fill_scalar", h["g_loss"], one)
        run("mse_loss_backward", h["g_loss"], h["a"], h["y"], 1, h["g_a"])
        run("threshold_backward", h["g_a"], h["a"], zero, h["g_h"])
        run("mm", g_h_t, h["x"], h["g_W"], 0)
        run("reduce_sum", h["g_h"], dims, False, C.ACL_FLOAT, h["g_b"])
        run("foreach_add_list_v2", params, grads, minus_lr, targets)
    ok(acl, acl.rt.synchronize_stream(nn.stream))

    sgd = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(3):
        sgd.zero_grad()
        torch.nn.functional.mse_loss(torch.relu(model(x)), y).backward()
        sgd.step()
    torch.testing.assert_close(nn.read(model.weight, handles["W"][1]), model.weight.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(nn.read(model.bias, handles["b"][1]), model.bias.detach(), rtol=1e-5, atol=1e-6)


def test_an_op_runs_on_its_streams_device_only(nn):
    """Tensors of device 0, a stream of device 1: aclnnX refuses, naming the tensor."""
    acl, aclnn = nn.acl, nn.aclnn
    x = nn.tensor(torch.ones(4))
    ws, executor, ret = aclnn.relu_get_workspace_size(x, x)
    ok(acl, ret)
    ok(acl, acl.rt.set_device(1))
    other = out(acl, acl.rt.create_stream())
    assert aclnn.relu(0, ws, executor, other) == E.ACLNN_ERR_PARAM_INVALID
    assert "is not device memory of the stream's device 1" in acl.get_recent_err_msg()
    ok(acl, acl.rt.destroy_stream(other))
    ok(acl, acl.rt.set_device(0))


def test_dropout_masks_keep_one_minus_prob_and_repeat_by_key():
    """A mask keeps about 1 - prob of the elements, the same (seed, offset) gives the same
    mask and another offset another one; DoMask scales what it keeps by 1 / (1 - prob)."""
    gen, apply = OPERATORS["DropoutGenMaskV2"].reference, OPERATORS["DropoutDoMask"].reference
    mask = gen(torch, [100, 128], 0.25, 5, 0, torch.float32)
    assert mask.dtype == torch.uint8 and mask.numel() == 100 * 128 // 8
    kept = sum(bin(int(b)).count("1") for b in mask)
    assert abs(kept / (100 * 128) - 0.75) < 0.02
    assert torch.equal(mask, gen(torch, [100, 128], 0.25, 5, 0, torch.float32))
    assert not torch.equal(mask, gen(torch, [100, 128], 0.25, 5, 1, torch.float32))
    x = torch.ones(10)
    out = apply(torch, x, torch.tensor([0b00000101, 0b10, 0, 0], dtype=torch.uint8), 0.5)
    assert out.tolist() == [2.0, 0, 2.0, 0, 0, 0, 0, 0, 0, 2.0]
