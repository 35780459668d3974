"""The operator library's ops (aclnn), one entry each: what both sides of an operator task
read.

    host  aclnnXGetWorkspaceSize (mdev.runtime.execution.operators) -- checks the arguments against
          the entry's signature and dtypes, runs its reference on meta tensors (shapes,
          broadcasting, type promotion, as torch decides them), makes an executor
    host  aclnnX -> one "operator" task (mdev.taskspec) on the stream
    device (mdev.board.operators) -- runs the reference on views of its HBM and writes each
          result into its output

An entry is ``Operator(name, signature, dtypes, reference)``:

    name       the aclnn name without its prefix: "Add" is aclnnAdd / aclnnAddGetWorkspaceSize
    signature  the parameters of aclnnXGetWorkspaceSize before (workspaceSize, executor), in
               order, as "name:kind" ("name" alone is an input tensor; see KINDS), or
               "name:kind:ctype" where the C type of a number is not the kind's usual one
               (C_TYPES: an int is int64_t, a float double), e.g. "cubeMathType:int:int8_t"
    dtypes     the aclDataTypes its input tensors may have
    reference  ``reference(torch, **inputs and attributes) -> result or tuple of results``,
               one result per written parameter (out, ref, ...) in signature order; it
               computes with torch's CPU kernels, so the results are what torch computes

The reference's module argument is torch: this module imports nothing of it, so a host or a
device that never runs an operator never loads it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from mdev import constants as C

# parameter kinds: tensors (read, written or both), tensor lists, and attributes
TENSOR, OPT_TENSOR, OUT, OPT_OUT, REF, OPT_REF = "tensor", "tensor?", "out", "out?", "ref", "ref?"
TENSORS, TENSORS_OUT, TENSORS_REF = "tensors", "tensors_out", "tensors_ref"
SCALAR, OPT_SCALAR, SCALARS = "scalar", "scalar?", "scalars"
INTS, OPT_INTS, FLOATS, BOOLS = "ints", "ints?", "floats", "bools"
INT, FLOAT, BOOL, DTYPE, STR = "int", "float", "bool", "dtype", "str"
KINDS = (TENSOR, OPT_TENSOR, OUT, OPT_OUT, REF, OPT_REF, TENSORS, TENSORS_OUT, TENSORS_REF, SCALAR, OPT_SCALAR,
         SCALARS, INTS, OPT_INTS, FLOATS, BOOLS, INT, FLOAT, BOOL, DTYPE, STR)
READS = (TENSOR, OPT_TENSOR, REF, OPT_REF, TENSORS, TENSORS_REF)          # the reference reads them
WRITES = (OUT, OPT_OUT, REF, OPT_REF, TENSORS_OUT, TENSORS_REF)           # it writes a result into them
OPTIONAL = (OPT_TENSOR, OPT_OUT, OPT_REF, OPT_SCALAR, OPT_INTS)           # may be NULL
LISTS = (TENSORS, TENSORS_OUT, TENSORS_REF)

# aclDataType -> torch's name of it (torch.float32, ...)
TORCH_DTYPES = {
    C.ACL_FLOAT: "float32", C.ACL_FLOAT16: "float16", C.ACL_BF16: "bfloat16", C.ACL_DOUBLE: "float64",
    C.ACL_INT8: "int8", C.ACL_INT16: "int16", C.ACL_INT32: "int32", C.ACL_INT64: "int64",
    C.ACL_UINT8: "uint8", C.ACL_BOOL: "bool",
}
ACL_DTYPES = {name: code for code, name in TORCH_DTYPES.items()}

FLOATING = frozenset({C.ACL_FLOAT, C.ACL_FLOAT16, C.ACL_BF16, C.ACL_DOUBLE})
INTEGRAL = frozenset({C.ACL_INT8, C.ACL_INT16, C.ACL_INT32, C.ACL_INT64, C.ACL_UINT8})
NUMERIC = FLOATING | INTEGRAL
ALL = NUMERIC | {C.ACL_BOOL}
INDICES = frozenset({C.ACL_INT32, C.ACL_INT64})


# the C type of each kind in aclnnXGetWorkspaceSize's prototype (libopapi.so)
C_TYPES = {TENSOR: "const aclTensor*", OPT_TENSOR: "const aclTensor*", OUT: "aclTensor*", OPT_OUT: "aclTensor*",
           REF: "aclTensor*", OPT_REF: "aclTensor*", TENSORS: "const aclTensorList*", TENSORS_OUT: "aclTensorList*",
           TENSORS_REF: "aclTensorList*", SCALAR: "const aclScalar*", OPT_SCALAR: "const aclScalar*",
           SCALARS: "const aclScalarList*", INTS: "const aclIntArray*", OPT_INTS: "const aclIntArray*",
           FLOATS: "const aclFloatArray*", BOOLS: "const aclBoolArray*", INT: "int64_t", FLOAT: "double",
           BOOL: "bool", DTYPE: "aclDataType", STR: "const char*"}
# a 64-bit integer passes the same either way (torch_npu passes int64_t where aclnn declares uint64_t):
# only narrower types need saying
_NUMBER_C_TYPES = {INT: ("int8_t", "int32_t", "int"), FLOAT: ("float",)}


@dataclass(frozen=True)
class Operator:
    name: str
    signature: str
    dtypes: frozenset
    reference: Callable
    params: tuple[tuple[str, str], ...] = field(init=False)      # (name, kind) in order
    c_types: tuple[str, ...] = field(init=False)                 # each parameter's C type
    # the parameters by role, in order (a task's inputs, outputs and attributes)
    reads: tuple[tuple[str, str], ...] = field(init=False)
    writes: tuple[tuple[str, str], ...] = field(init=False)
    attributes: tuple[tuple[str, str], ...] = field(init=False)

    def __post_init__(self) -> None:
        params, c_types = [], []
        for item in self.signature.split(","):
            name, kind, c_type = (item.strip().split(":") + ["", ""])[:3]
            kind = kind or TENSOR
            if kind not in KINDS:
                raise ValueError(f"aclnn{self.name}: {name} has no kind {kind!r}")
            if c_type and c_type not in _NUMBER_C_TYPES.get(kind, ()):
                raise ValueError(f"aclnn{self.name}: {name} of kind {kind} cannot be a C {c_type}")
            params.append((name, kind))
            c_types.append(c_type or C_TYPES[kind])
        object.__setattr__(self, "params", tuple(params))
        object.__setattr__(self, "c_types", tuple(c_types))
        object.__setattr__(self, "reads", tuple(p for p in params if p[1] in READS))
        object.__setattr__(self, "writes", tuple(p for p in params if p[1] in WRITES))
        object.__setattr__(self, "attributes", tuple(p for p in params if p[1] not in READS and p[1] not in WRITES))

    @property
    def written(self) -> tuple[str, ...]:
        """The parameters it writes a result into, in order (the reference's results)."""
        return tuple(name for name, _ in self.writes)

    def results(self, value) -> tuple:
        """What the reference returned, one entry per written parameter."""
        return tuple(value) if isinstance(value, (tuple, list)) and len(self.writes) > 1 else (value,)


def _each(fn: Callable, *lists) -> list:
    return [fn(*items) for items in zip(*lists)]


_REDUCTION = {0: "none", 1: "mean", 2: "sum"}


def _sum(t, self, dim, keepDim, dtype):
    return t.sum(self, dim=list(dim) or None, keepdim=keepDim, dtype=dtype)


def _mean(t, self, dim, keepDim, dtype):
    return t.mean(self, dim=list(dim) or None, keepdim=keepDim, dtype=dtype)


def _batch_norm(t, input, weight, bias, runningMean, runningVar, training, momentum, eps):
    """aclnnBatchNorm updates the running statistics it is given, and saves the batch's
    statistics when training."""
    mean = runningMean.clone() if runningMean is not None else None
    var = runningVar.clone() if runningVar is not None else None
    out, saved_mean, saved_invstd = t.ops.aten.native_batch_norm(input, weight, bias, mean, var, training, momentum,
                                                                 eps)
    return mean, var, out, saved_mean if training else None, saved_invstd if training else None


def _pool_window(kernelSize, stride, padding, dilation) -> tuple:
    """aclnn's 1-or-2-long windows (an empty stride: the kernel's) as torch's pairs."""
    pair = lambda v: (list(v) * 2)[:2]       # noqa: E731
    return pair(kernelSize), pair(stride or kernelSize), pair(padding), pair(dilation)


def _mask_shape(self, out, kernel) -> tuple:
    """The indices container of aclnnMaxPool2dWithMask: [N,] C, kh*kw, (ceil(Ho*Wo/16)+1)*32 int8."""
    ho, wo = out.shape[-2:]
    return (*self.shape[:-2], kernel[0] * kernel[1], (-(-ho * wo // 16) + 1) * 32)


def _max_pool_mask(t, self, kernelSize, stride, padding, dilation, ceilMode):
    """The argmax of each output (ih * W + iw) as little-endian int32, from the start of the
    int8 container, the rest 0: what the A2 path writes (and its backward reads)."""
    window = _pool_window(kernelSize, stride, padding, dilation)
    out, argmax = t.ops.aten.max_pool2d_with_indices(self, *window, ceilMode)
    mask = t.zeros(_mask_shape(self, out, window[0]), dtype=t.int8, device=self.device)
    flat = argmax.to(t.int32).reshape(-1).view(t.int8)
    if flat.numel() > mask.numel():
        raise ValueError(f"a {window[0][0]}x{window[0][1]} window's indices do not fit the mask")
    mask.view(-1)[:flat.numel()] = flat
    return out, mask


def _max_pool_mask_backward(t, gradOutput, self, indices, kernelSize, stride, padding, dilation, ceilMode):
    window = _pool_window(kernelSize, stride, padding, dilation)
    argmax = indices.contiguous().view(-1)[:4 * gradOutput.numel()].view(t.int32).reshape(gradOutput.shape)
    return t.ops.aten.max_pool2d_with_indices_backward(gradOutput, self, *window, ceilMode, argmax.to(t.int64))


def _generator(t, seed: int, offset: int):
    """A generator keyed by (seed, offset): the same key gives the same numbers (not the
    NPU's Philox stream: its bits are not public)."""
    return t.Generator().manual_seed((seed * 0x9E3779B97F4A7C15 + offset) & 0x7FFFFFFFFFFFFFFF)


def _random(t, like, seed: int, offset: int, fill: Callable):
    """A fresh tensor like ``like`` filled from the generator of (seed, offset)."""
    out = t.empty_like(like)
    if out.is_meta:
        return out
    return fill(out, _generator(t, seed, offset))


def _dropout_mask(t, shape, prob: float, seed: int, offset: int):
    """DropoutGenMask's bit mask: one bit an element (1 keeps it, with probability 1 - prob),
    little-endian in each byte, the elements rounded up to 128 (16 bytes)."""
    nbytes = -(-math.prod(shape) // 128) * 16
    keep = t.rand(nbytes * 8, generator=_generator(t, seed, offset)) >= prob
    return (keep.view(-1, 8).to(t.int32) << t.arange(8, dtype=t.int32)).sum(1).to(t.uint8)


def _dropout_apply(t, self, mask, prob: float):
    """DropoutDoMask: the elements the mask keeps, scaled by 1 / (1 - prob)."""
    if prob >= 1:
        return t.zeros_like(self)
    bits = (mask.reshape(-1).to(t.int32)[:, None] >> t.arange(8, dtype=t.int32, device=mask.device)) & 1
    keep = bits.reshape(-1)[:self.numel()].reshape(self.shape)
    return (self * keep / (1 - prob)).to(self.dtype)


def _unscale(t, scaledGrads, foundInf, invScale):
    grads, found = [g.clone() for g in scaledGrads], foundInf.clone()
    t._amp_foreach_non_finite_check_and_unscale_(grads, found, invScale)
    return grads, found


def _update_scale(t, currentScale, growthTracker, foundInf, growthFactor, backoffFactor, growthInterval):
    scale, tracker = currentScale.clone(), growthTracker.clone()
    return t._amp_update_scale_(scale, tracker, foundInf, growthFactor, backoffFactor, growthInterval), tracker


_UNARY_FLOAT = {"Exp": "exp", "Log": "log", "Sqrt": "sqrt", "Rsqrt": "rsqrt", "Sigmoid": "sigmoid", "Tanh": "tanh",
                "Sin": "sin", "Cos": "cos", "Reciprocal": "reciprocal", "Erf": "erf", "Log2": "log2", "Log10": "log10",
                "Log1p": "log1p", "Expm1": "expm1", "Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan",
                "Sinh": "sinh", "Cosh": "cosh", "Floor": "floor", "Ceil": "ceil", "Round": "round", "Trunc": "trunc"}
_UNARY_NUMERIC = {"Neg": "neg", "Abs": "abs", "Relu": "relu", "Sign": "sign"}
# torch's functions of the foreach families' binary ops (XList, XScalarV2, XScalarList)
_FOREACH_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Maximum": "maximum",
                   "Minimum": "minimum", "Pow": "pow"}


class _Attention:
    """FlashAttentionScore's math on (B, N, S, D) views: scale * (QK^T + pse), masked, softmax,
    dropout by the mask's bits (1 keeps, little-endian in each byte), times V; key and value
    may have fewer heads (grouped-query).  Computed in float32, as the NPU accumulates."""
    LAYOUTS = ("BSH", "SBH", "BSND", "BNSD")

    def __init__(self, t, query, key, value, pse, dropMask, attenMask, scaleValue, keepProb, preTokens, nextTokens,
                 headNum, inputLayout, sparseMode) -> None:
        if inputLayout not in self.LAYOUTS:
            raise ValueError(f"inputLayout {inputLayout!r}: mdev has {', '.join(self.LAYOUTS)}")
        self.t, self.layout, self.heads = t, inputLayout, headNum
        self.d = query.shape[-1] // headNum if inputLayout in ("BSH", "SBH") else query.shape[-1]
        self.q, self.k, self.v = (self.bnsd(x).float() for x in (query, key, value))
        self.group = self.q.shape[1] // self.k.shape[1]
        k, v = (x.repeat_interleave(self.group, 1) for x in (self.k, self.v))
        self.pse, self.scale, self.keep = pse, scaleValue, keepProb
        scores = t.matmul(self.q, k.transpose(-1, -2))
        if pse is not None:
            scores = scores + pse.float()
        scores = scores * scaleValue
        masked = self.mask(scores, attenMask, preTokens, nextTokens, sparseMode)
        scores = scores.masked_fill(masked, float("-inf"))
        top = scores.amax(-1, keepdim=True)
        top = t.where(t.isinf(top), t.zeros_like(top), top)          # a row with nothing to attend to
        exp = t.exp(scores - top)
        total = exp.sum(-1, keepdim=True)
        self.probs = exp / t.where(total == 0, t.ones_like(total), total)
        self.max, self.sum = top, total
        self.drop = None
        if keepProb < 1:
            if dropMask is None:
                raise ValueError(f"keepProb {keepProb} needs dropMaskOptional")
            n = self.probs.numel()
            bits = (dropMask.reshape(-1).to(t.int32)[:, None] >> t.arange(8, device=dropMask.device)) & 1
            self.drop = bits.reshape(-1)[:n].reshape(self.probs.shape).float() / keepProb
        self.kept = self.probs * self.drop if self.drop is not None else self.probs
        self.kv = (k, v)

    def mask(self, scores, attenMask, preTokens, nextTokens, sparseMode):
        t = self.t
        sq, skv = scores.shape[-2:]
        i = t.arange(sq, device=scores.device)[:, None]
        j = t.arange(skv, device=scores.device)[None, :]
        given = attenMask.bool() if attenMask is not None else t.zeros((), dtype=t.bool, device=scores.device)
        if sparseMode == 0:
            return (j > i + nextTokens) | (j < i - preTokens) | given
        if sparseMode == 1:
            return given.expand(scores.shape)
        if sparseMode in (2, 3):      # causal from the top left / the bottom right; the mask given is a template
            return (j > i + (skv - sq if sparseMode == 3 else 0)).expand(scores.shape)
        raise ValueError(f"sparseMode {sparseMode}: mdev has 0 (band), 1 (all mask), 2 and 3 (causal)")

    def bnsd(self, x):
        if self.layout == "BNSD":
            return x
        if self.layout == "BSND":
            return x.transpose(1, 2)
        if self.layout == "BSH":
            return x.reshape(x.shape[0], x.shape[1], -1, self.d).transpose(1, 2)
        return x.reshape(x.shape[0], x.shape[1], -1, self.d).permute(1, 2, 0, 3)        # SBH

    def laid_out(self, x):
        """(B, N, S, D) back to the input layout."""
        if self.layout == "BNSD":
            return x
        if self.layout == "BSND":
            return x.transpose(1, 2)
        if self.layout == "BSH":
            return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1)
        return x.permute(2, 0, 1, 3).reshape(x.shape[2], x.shape[0], -1)

    def forward(self):
        out = self.t.matmul(self.kept, self.kv[1])
        stats = tuple(x.expand(*x.shape[:-1], 8).contiguous() for x in (self.max, self.sum))
        return (*stats, None, self.laid_out(out))

    def backward(self, dy):
        t = self.t
        k, v = self.kv
        dy = self.bnsd(dy).float()
        dv = t.matmul(self.kept.transpose(-1, -2), dy)
        dp = t.matmul(dy, v.transpose(-1, -2))
        if self.drop is not None:
            dp = dp * self.drop
        ds = self.probs * (dp - (dp * self.probs).sum(-1, keepdim=True))
        dq = t.matmul(ds, k) * self.scale
        dk = t.matmul(ds.transpose(-1, -2), self.q) * self.scale
        grouped = [x.reshape(x.shape[0], -1, self.group, *x.shape[2:]).sum(2) for x in (dk, dv)]
        dpse = None
        if self.pse is not None:
            dpse = (ds * self.scale).sum_to_size(self.pse.shape)
        return (self.laid_out(dq), *(self.laid_out(x) for x in grouped), dpse)


def _flash_attention(t, query, key, value, realShiftOptional, dropMaskOptional, paddingMaskOptional,
                     attenMaskOptional, prefixOptional, scaleValue, keepProb, preTokens, nextTokens, headNum,
                     inputLayout, innerPrecise, sparseMode):
    return _Attention(t, query, key, value, realShiftOptional, dropMaskOptional, attenMaskOptional, scaleValue,
                      keepProb, preTokens, nextTokens, headNum, inputLayout, sparseMode).forward()


def _flash_attention_grad(t, query, keyIn, value, dy, pseShiftOptional, dropMaskOptional, paddingMaskOptional,
                          attenMaskOptional, softmaxMaxOptional, softmaxSumOptional, softmaxInOptional,
                          attentionInOptional, prefixOptional, scaleValue, keepProb, preTokens, nextTokens, headNum,
                          inputLayout, innerPrecise, sparseMode):
    """Recomputes the forward from query, key and value (the saved statistics agree with it)."""
    return _Attention(t, query, keyIn, value, pseShiftOptional, dropMaskOptional, attenMaskOptional, scaleValue,
                      keepProb, preTokens, nextTokens, headNum, inputLayout, sparseMode).backward(dy)


def _index_put(t, selfRef, indices, values, accumulate, unsafe):
    """selfRef[indices] = values (or += with accumulate); a 0-size index tensor stands for a
    dimension left whole (torch_npu passes one where torch has None)."""
    index = [None if i.numel() == 0 else i for i in indices]
    return t.ops.aten._index_put_impl_(selfRef.clone(), index, values, accumulate, unsafe)


def _with_scalar(t, fn: str, tensor, scalar):
    """torch's binary ``fn`` with a number for its other operand (maximum and minimum take
    tensors only: a number bounds from below or above)."""
    if fn in ("maximum", "minimum"):
        return t.clamp(tensor, min=scalar) if fn == "maximum" else t.clamp(tensor, max=scalar)
    return getattr(t, fn)(tensor, scalar)


# the ops mdev has, by aclnn name
_OPS = [
    # ------------------------------------------------------------------ arithmetic
    # X (tensor other), Xs (scalar other), InplaceX, InplaceXs: the first parameter is self or selfRef
    *[Operator(prefix + name + suffix, f"{first}, other{kind}{alpha}{out}", dtypes,
               lambda t, other, fn=fn, **given: getattr(t, fn)(given.pop("self", None) if "self" in given
                                                                else given.pop("selfRef"), other, **given))
      for name, fn, alpha, dtypes in (("Add", "add", ", alpha:scalar", ALL), ("Sub", "sub", ", alpha:scalar", NUMERIC),
                                      ("Mul", "mul", "", ALL), ("Div", "div", "", ALL))
      for prefix, first, out in (("", "self", ", out:out"), ("Inplace", "selfRef:ref", ""))
      for suffix, kind in (("", ""), ("s", ":scalar"))],
    Operator("Maximum", "self, other, out:out", ALL, lambda t, self, other: t.maximum(self, other)),
    Operator("Minimum", "self, other, out:out", ALL, lambda t, self, other: t.minimum(self, other)),
    Operator("PowTensorScalar", "self, exponent:scalar, out:out", NUMERIC,
             lambda t, self, exponent: t.pow(self, exponent)),
    Operator("InplaceAddcdiv", "selfRef:ref, tensor1, tensor2, value:scalar", FLOATING,
             lambda t, selfRef, tensor1, tensor2, value: t.addcdiv(selfRef, tensor1, tensor2, value=value)),
    Operator("Addcmul", "self, tensor1, tensor2, value:scalar, out:out", NUMERIC,
             lambda t, self, tensor1, tensor2, value: t.addcmul(self, tensor1, tensor2, value=value)),
    Operator("InplaceAddcmul", "selfRef:ref, tensor1, tensor2, value:scalar", NUMERIC,
             lambda t, selfRef, tensor1, tensor2, value: t.addcmul(selfRef, tensor1, tensor2, value=value)),
    # ------------------------------------------------------------------ unary
    *[Operator(name, "self, out:out", dtypes, lambda t, self, fn=fn: getattr(t, fn)(self))
      for table, dtypes in ((_UNARY_FLOAT, FLOATING), (_UNARY_NUMERIC, NUMERIC)) for name, fn in table.items()],
    *[Operator("Inplace" + name, "selfRef:ref", dtypes, lambda t, selfRef, fn=fn: getattr(t, fn)(selfRef))
      for table, dtypes in ((_UNARY_FLOAT, FLOATING), (_UNARY_NUMERIC, NUMERIC)) for name, fn in table.items()],
    Operator("LogicalNot", "self, out:out", ALL, lambda t, self: t.logical_not(self)),
    Operator("BitwiseNot", "self, out:out", INTEGRAL | {C.ACL_BOOL}, lambda t, self: t.bitwise_not(self)),
    *[Operator(name, "self, other, out:out", dtypes, lambda t, self, other, fn=fn: getattr(t, fn)(self, other))
      for name, fn, dtypes in (("Atan2", "atan2", FLOATING),
                               ("RemainderTensorTensor", "remainder", NUMERIC),
                               ("FloorDivide", "floor_divide", NUMERIC),
                               ("LogicalAnd", "logical_and", ALL), ("LogicalOr", "logical_or", ALL),
                               ("LogicalXor", "logical_xor", ALL),
                               ("BitwiseAndTensor", "bitwise_and", INTEGRAL | {C.ACL_BOOL}),
                               ("BitwiseOrTensor", "bitwise_or", INTEGRAL | {C.ACL_BOOL}),
                               ("BitwiseXorTensor", "bitwise_xor", INTEGRAL | {C.ACL_BOOL}))],
    Operator("Lerp", "self, end, weight, out:out", FLOATING, lambda t, self, end, weight: t.lerp(self, end, weight)),
    Operator("Lerps", "self, end, weight:scalar, out:out", FLOATING,
             lambda t, self, end, weight: t.lerp(self, end, weight)),
    Operator("PowTensorTensor", "self, exponent, out:out", NUMERIC, lambda t, self, exponent: t.pow(self, exponent)),
    Operator("Rsub", "self, other, alpha:scalar, out:out", NUMERIC,
             lambda t, self, other, alpha: t.rsub(self, other, alpha=alpha)),
    Operator("Rsubs", "self, other:scalar, alpha:scalar, out:out", NUMERIC,
             lambda t, self, other, alpha: t.rsub(self, other, alpha=alpha)),
    Operator("Gelu", "self, out:out", FLOATING, lambda t, self: t.nn.functional.gelu(self)),
    Operator("Silu", "self, out:out", FLOATING, lambda t, self: t.nn.functional.silu(self)),
    Operator("GeluBackward", "gradOutput, self, gradInput:out", FLOATING,
             lambda t, gradOutput, self: t.ops.aten.gelu_backward(gradOutput, self)),
    Operator("SiluBackward", "gradOutput, self, gradInput:out", FLOATING,
             lambda t, gradOutput, self: t.ops.aten.silu_backward(gradOutput, self)),
    Operator("ThresholdBackward", "gradOutput, self, threshold:scalar, out:out", NUMERIC,
             lambda t, gradOutput, self, threshold: t.ops.aten.threshold_backward(gradOutput, self, threshold)),
    Operator("Cast", "self, dtype:dtype, out:out", ALL, lambda t, self, dtype: self.to(dtype)),
    # ------------------------------------------------------------------ fill and copy
    Operator("InplaceCopy", "selfRef:ref, src", ALL, lambda t, selfRef, src: src.to(selfRef.dtype).expand_as(selfRef)),
    Operator("InplaceFillScalar", "selfRef:ref, value:scalar", ALL,
             lambda t, selfRef, value: t.full_like(selfRef, value)),
    Operator("InplaceZero", "selfRef:ref", ALL, lambda t, selfRef: t.zeros_like(selfRef)),
    Operator("InplaceOne", "selfRef:ref", ALL, lambda t, selfRef: t.ones_like(selfRef)),
    Operator("InplaceUniform", "selfRef:ref, from:float, to:float, seed:int, offset:int", FLOATING,
             lambda t, selfRef, to, seed, offset, **k: _random(t, selfRef, seed, offset,
                                                               lambda o, g: o.uniform_(k["from"], to, generator=g))),
    Operator("InplaceNormal", "selfRef:ref, mean:float:float, std:float:float, seed:int, offset:int", FLOATING,
             lambda t, selfRef, mean, std, seed, offset: _random(t, selfRef, seed, offset,
                                                                 lambda o, g: o.normal_(mean, std, generator=g))),
    Operator("DropoutGenMask", "shape:ints, prob:float, seed:int, offset:int, out:out", ALL,
             lambda t, shape, prob, seed, offset: _dropout_mask(t, shape, prob, seed, offset)),
    Operator("DropoutGenMaskV2", "shape:ints, prob:float, seed:int, offset:int, probDataType:dtype, out:out", ALL,
             lambda t, shape, prob, seed, offset, probDataType: _dropout_mask(t, shape, prob, seed, offset)),
    Operator("DropoutDoMask", "self, mask, prob:float, out:out", FLOATING,
             lambda t, self, mask, prob: _dropout_apply(t, self, mask, prob)),
    # ------------------------------------------------------------------ comparison and selection
    *[Operator(name, "self, other, out:out", ALL, lambda t, self, other, fn=fn: getattr(t, fn)(self, other))
      for name, fn in (("EqTensor", "eq"), ("NeTensor", "ne"), ("GtTensor", "gt"), ("GeTensor", "ge"),
                       ("LtTensor", "lt"), ("LeTensor", "le"))],
    *[Operator(name, "self, other:scalar, out:out", ALL, lambda t, self, other, fn=fn: getattr(t, fn)(self, other))
      for name, fn in (("EqScalar", "eq"), ("NeScalar", "ne"), ("GtScalar", "gt"), ("GeScalar", "ge"),
                       ("LtScalar", "lt"), ("LeScalar", "le"))],
    Operator("SWhere", "condition, self, other, out:out", ALL,
             lambda t, condition, self, other: t.where(condition, self, other)),
    Operator("InplaceMaskedFillScalar", "selfRef:ref, mask, value:scalar", ALL,
             lambda t, selfRef, mask, value: selfRef.masked_fill(mask, value)),
    Operator("Clamp", "self, min:scalar?, max:scalar?, out:out", NUMERIC,
             lambda t, self, min, max: t.clamp(self, min, max)),
    # ------------------------------------------------------------------ indexing, joining
    Operator("Gather", "self, dim:int, index, out:out", ALL, lambda t, self, dim, index: t.gather(self, dim, index)),
    Operator("IndexSelect", "self, dim:int, index, out:out", ALL,
             lambda t, self, dim, index: t.index_select(self, dim, index)),
    Operator("Embedding", "weight, indices, out:out", ALL,
             lambda t, weight, indices: t.nn.functional.embedding(indices, weight)),
    Operator("EmbeddingDenseBackward", "grad, indices, numWeights:int, paddingIdx:int, scaleGradByFreq:bool, out:out",
             FLOATING, lambda t, grad, indices, numWeights, paddingIdx, scaleGradByFreq:
             t.ops.aten.embedding_dense_backward(grad, indices, numWeights, paddingIdx, scaleGradByFreq)),
    Operator("ScatterAdd", "self, dim:int, index, src, out:out", NUMERIC,
             lambda t, self, dim, index, src: t.scatter_add(self, dim, index, src)),
    Operator("IndexAdd", "self, dim:int, index, source, alpha:scalar, out:out", NUMERIC,
             lambda t, self, dim, index, source, alpha: t.index_add(self, dim, index, source, alpha=alpha)),
    *[Operator(name, "self, diagonal:int, out:out", ALL,
               lambda t, self, diagonal, fn=fn: getattr(t, fn)(self, diagonal))
      for name, fn in (("Triu", "triu"), ("Tril", "tril"))],
    Operator("Flip", "self, dims:ints, out:out", ALL, lambda t, self, dims: t.flip(self, list(dims))),
    Operator("Roll", "x, shifts:ints, dims:ints, out:out", ALL,
             lambda t, x, shifts, dims: t.roll(x, list(shifts), list(dims))),
    Operator("Repeat", "self, repeats:ints, out:out", ALL, lambda t, self, repeats: self.repeat(*repeats)),
    Operator("ConstantPadNd", "self, pad:ints, value:scalar, out:out", ALL,
             lambda t, self, pad, value: t.constant_pad_nd(self, list(pad), value)),
    Operator("OneHot", "self, numClasses:int:int, onValue, offValue, axis:int, out:out", INDICES,
             lambda t, self, numClasses, onValue, offValue, axis: t.where(
                 t.nn.functional.one_hot(self.long(), numClasses).movedim(-1, axis).bool(), onValue.reshape(()),
                 offValue.reshape(()))),
    Operator("Linspace", "start:scalar, end:scalar, steps:int, out:out", NUMERIC,
             lambda t, start, end, steps: t.linspace(start, end, steps)),
    Operator("Arange", "start:scalar, end:scalar, step:scalar, out:out", NUMERIC,
             lambda t, start, end, step: t.arange(start, end, step)),
    Operator("Cat", "tensors:tensors, dim:int, out:out", ALL, lambda t, tensors, dim: t.cat(tensors, dim)),
    Operator("ChunkCat", "tensors:tensors, dim:int, numChunks:int, out:out", FLOATING,
             lambda t, tensors, dim, numChunks: t._chunk_cat(tensors, dim, numChunks)),
    Operator("IndexPutImpl", "selfRef:ref, indices:tensors, values, accumulate:bool, unsafe:bool", ALL, _index_put),
    Operator("Stack", "tensors:tensors, dim:int, out:out", ALL, lambda t, tensors, dim: t.stack(tensors, dim)),
    # ------------------------------------------------------------------ reductions
    Operator("ReduceSum", "self, dim:ints, keepDim:bool, dtype:dtype, out:out", ALL, _sum),
    Operator("Mean", "self, dim:ints, keepDim:bool, dtype:dtype, out:out", FLOATING, _mean),
    Operator("ArgMax", "self, dim:int, keepdim:bool, out:out", NUMERIC,
             lambda t, self, dim, keepdim: t.argmax(self, dim, keepdim)),
    Operator("ArgMin", "self, dim:int, keepdim:bool, out:out", NUMERIC,
             lambda t, self, dim, keepdim: t.argmin(self, dim, keepdim)),
    *[Operator(name, "self, dim:ints, keepDim:bool, out:out", NUMERIC,
               lambda t, self, dim, keepDim, fn=fn: getattr(t, fn)(self, list(dim), keepDim))
      for name, fn in (("Amax", "amax"), ("Amin", "amin"))],
    *[Operator(name, "self, dim:int, keepdim:bool, out:out, indices:out", NUMERIC,
               lambda t, self, dim, keepdim, fn=fn: tuple(getattr(t, fn)(self, dim, keepdim)))
      for name, fn in (("MaxDim", "max"), ("MinDim", "min"))],
    *[Operator(name, "self, out:out", NUMERIC, lambda t, self, fn=fn: getattr(t, fn)(self))
      for name, fn in (("Max", "max"), ("Min", "min"))],
    *[Operator(name, "self, dim:ints, keepdim:bool, out:out", ALL,
               lambda t, self, dim, keepdim, fn=fn: getattr(t, fn)(self, list(dim) or None, keepdim))
      for name, fn in (("Any", "any"), ("All", "all"))],
    Operator("LogSumExp", "self, dim:ints, keepDim:bool, out:out", FLOATING,
             lambda t, self, dim, keepDim: t.logsumexp(self, list(dim), keepDim)),
    Operator("LinalgVectorNorm", "self, ord:scalar, dims:ints, keepDims:bool, dtype:dtype, out:out", FLOATING,
             lambda t, self, ord, dims, keepDims, dtype: t.linalg.vector_norm(self.to(dtype), ord, list(dims) or None,
                                                                              keepDims)),
    *[Operator(name, "self, dim:ints, correction:int, keepdim:bool, out:out", FLOATING,
               lambda t, self, dim, correction, keepdim, fn=fn: getattr(t, fn)(self, dim=list(dim) or None,
                                                                              correction=correction, keepdim=keepdim))
      for name, fn in (("VarCorrection", "var"), ("Std", "std"))],
    Operator("Cumsum", "self, dim:int, dtype:dtype, out:out", NUMERIC,
             lambda t, self, dim, dtype: t.cumsum(self, dim, dtype=dtype)),
    Operator("Topk", "self, k:int, dim:int, largest:bool, sorted:bool, valuesOut:out, indicesOut:out", NUMERIC,
             lambda t, self, k, dim, largest, sorted: tuple(t.topk(self, k, dim, largest, sorted))),
    Operator("TopkV2", "self, k:int, dim:int, largest:bool, sorted:bool, sortPolicy:int, valuesOut:out, "
             "indicesOut:out", NUMERIC,      # sortPolicy picks the NPU's sort algorithm: the results are the same
             lambda t, self, k, dim, largest, sorted, sortPolicy: tuple(t.topk(self, k, dim, largest, sorted))),
    Operator("Sort", "self, stable:bool, dim:int, descending:bool, valuesOut:out, indicesOut:out", NUMERIC,
             lambda t, self, stable, dim, descending: tuple(t.sort(self, stable=stable, dim=dim,
                                                                   descending=descending))),
    # ------------------------------------------------------------------ matrix products
    Operator("Mm", "self, mat2, out:out, cubeMathType:int:int8_t", FLOATING,
             lambda t, self, mat2, cubeMathType: t.mm(self, mat2)),
    Operator("Matmul", "self, mat2, out:out, cubeMathType:int:int8_t", FLOATING,
             lambda t, self, mat2, cubeMathType: t.matmul(self, mat2)),
    Operator("BatchMatMul", "self, mat2, out:out, cubeMathType:int:int8_t", FLOATING,
             lambda t, self, mat2, cubeMathType: t.bmm(self, mat2)),
    Operator("Baddbmm", "self, batch1, batch2, beta:scalar, alpha:scalar, out:out, cubeMathType:int:int8_t", FLOATING,
             lambda t, self, batch1, batch2, beta, alpha, cubeMathType: t.baddbmm(self, batch1, batch2, beta=beta,
                                                                                  alpha=alpha)),
    Operator("Addmm", "self, mat1, mat2, beta:scalar, alpha:scalar, out:out, cubeMathType:int:int8_t", FLOATING,
             lambda t, self, mat1, mat2, beta, alpha, cubeMathType: t.addmm(self, mat1, mat2, beta=beta, alpha=alpha)),
    # ------------------------------------------------------------------ activations, normalisation, losses
    Operator("Softmax", "self, dim:int, out:out", FLOATING, lambda t, self, dim: t.softmax(self, dim)),
    Operator("SoftmaxBackward", "gradOutput, output, dim:int, out:out", FLOATING,
             lambda t, gradOutput, output, dim: t.ops.aten._softmax_backward_data(gradOutput, output, dim,
                                                                                  output.dtype)),
    Operator("LogSoftmax", "self, dim:int, out:out", FLOATING, lambda t, self, dim: t.log_softmax(self, dim)),
    Operator("LogSoftmaxBackward", "gradOutput, output, dim:int, out:out", FLOATING,
             lambda t, gradOutput, output, dim: t.ops.aten._log_softmax_backward_data(gradOutput, output, dim,
                                                                                     output.dtype)),
    Operator("MseLoss", "self, target, reduction:int, out:out", FLOATING,
             lambda t, self, target, reduction: t.nn.functional.mse_loss(self, target,
                                                                         reduction=_REDUCTION[reduction])),
    Operator("MseLossBackward", "gradOutput, self, target, reduction:int, out:out", FLOATING,
             lambda t, gradOutput, self, target, reduction: t.ops.aten.mse_loss_backward(gradOutput, self, target,
                                                                                         reduction)),
    Operator("NLLLoss", "self, target, weight:tensor?, reduction:int, ignoreIndex:int, out:out, totalWeight:out",
             FLOATING, lambda t, self, target, weight, reduction, ignoreIndex:
             t.ops.aten.nll_loss_forward(self, target, weight, reduction, ignoreIndex)),
    Operator("NLLLossBackward", "gradOutput, self, target, weight:tensor?, reduction:int, ignoreIndex:int, "
             "totalWeight, out:out", FLOATING,
             lambda t, gradOutput, self, target, weight, reduction, ignoreIndex, totalWeight:
             t.ops.aten.nll_loss_backward(gradOutput, self, target, weight, reduction, ignoreIndex, totalWeight)),
    Operator("LayerNorm", "input, normalizedShape:ints, weight:tensor?, bias:tensor?, eps:float, out:out, "
             "meanOut:out?, rstdOut:out?", FLOATING, lambda t, input, normalizedShape, weight, bias, eps:
             t.ops.aten.native_layer_norm(input, normalizedShape, weight, bias, eps)),
    Operator("LayerNormBackward", "gradOut, input, normalizedShape:ints, mean, rstd, weight:tensor?, bias:tensor?, "
             "outputMask:bools, gradInputOut:out?, gradWeightOut:out?, gradBiasOut:out?", FLOATING,
             lambda t, gradOut, input, normalizedShape, mean, rstd, weight, bias, outputMask:
             t.ops.aten.native_layer_norm_backward(gradOut, input, normalizedShape, mean, rstd, weight, bias,
                                                   outputMask)),
    Operator("BatchNorm", "input, weight:tensor?, bias:tensor?, runningMean:ref?, runningVar:ref?, training:bool, "
             "momentum:float, eps:float, output:out, saveMean:out?, saveInvstd:out?", FLOATING, _batch_norm),
    Operator("BatchNormBackward", "gradOut, input, weight:tensor?, runningMean:tensor?, runningVar:tensor?, "
             "saveMean:tensor?, saveInvstd:tensor?, training:bool, eps:float, outputMask:bools, gradInput:out?, "
             "gradWeight:out?, gradBias:out?", FLOATING,
             lambda t, gradOut, input, weight, runningMean, runningVar, saveMean, saveInvstd, training, eps,
             outputMask: t.ops.aten.native_batch_norm_backward(gradOut, input, weight, runningMean, runningVar,
                                                               saveMean, saveInvstd, training, eps, outputMask)),
    # ------------------------------------------------------------------ convolution, pooling
    Operator("Convolution", "input, weight, bias:tensor?, stride:ints, padding:ints, dilation:ints, transposed:bool, "
             "outputPadding:ints, groups:int, output:out, cubeMathType:int:int8_t", FLOATING,
             lambda t, input, weight, bias, stride, padding, dilation, transposed, outputPadding, groups, cubeMathType:
             t.ops.aten.convolution(input, weight, bias, stride, padding, dilation, transposed, outputPadding, groups)),
    Operator("ConvolutionBackward", "gradOutput, input, weight, biasSizes:ints?, stride:ints, padding:ints, "
             "dilation:ints, transposed:bool, outputPadding:ints, groups:int:int, outputMask:bools, cubeMathType:int:int8_t, "
             "gradInput:out?, gradWeight:out?, gradBias:out?", FLOATING,
             lambda t, gradOutput, input, weight, biasSizes, stride, padding, dilation, transposed, outputPadding,
             groups, outputMask, cubeMathType: t.ops.aten.convolution_backward(
                 gradOutput, input, weight, biasSizes, stride, padding, dilation, transposed, outputPadding, groups,
                 outputMask)),
    Operator("MaxPool2dWithMask", "self, kernelSize:ints, stride:ints, padding:ints, dilation:ints, ceilMode:bool, "
             "out:out, indices:out", FLOATING, _max_pool_mask),
    Operator("MaxPool2dWithMaskBackward", "gradOutput, self, indices, kernelSize:ints, stride:ints, padding:ints, "
             "dilation:ints, ceilMode:bool, gradInput:out", FLOATING, _max_pool_mask_backward),
    Operator("FlashAttentionScore", "query, key, value, realShiftOptional:tensor?, dropMaskOptional:tensor?, "
             "paddingMaskOptional:tensor?, attenMaskOptional:tensor?, prefixOptional:ints?, scaleValue:float, "
             "keepProb:float, preTokens:int, nextTokens:int, headNum:int, inputLayout:str, innerPrecise:int, "
             "sparseMode:int, softmaxMaxOut:out, softmaxSumOut:out, softmaxOutOut:out?, attentionOutOut:out",
             FLOATING, _flash_attention),
    Operator("FlashAttentionScoreGrad", "query, keyIn, value, dy, pseShiftOptional:tensor?, dropMaskOptional:tensor?, "
             "paddingMaskOptional:tensor?, attenMaskOptional:tensor?, softmaxMaxOptional:tensor?, "
             "softmaxSumOptional:tensor?, softmaxInOptional:tensor?, attentionInOptional:tensor?, "
             "prefixOptional:ints?, scaleValue:float, keepProb:float, preTokens:int, nextTokens:int, headNum:int, "
             "inputLayout:str, innerPrecise:int, sparseMode:int, dqOut:out, dkOut:out, dvOut:out, dpseOut:out?",
             FLOATING, _flash_attention_grad),
    # ------------------------------------------------------------------ foreach (optimizers)
    *[Operator("Foreach" + name, "x:tensors, out:tensors_out", FLOATING,
               lambda t, x, fn=fn: [getattr(t, fn)(v) for v in x])
      for name, fn in {**_UNARY_FLOAT, "Erfc": "erfc", "Neg": "neg", "Abs": "abs", "Sign": "sign"}.items()
      if name not in ("Rsqrt", "Floor", "Ceil", "Round", "Trunc")],
    *[Operator(f"Foreach{name}List", "x1:tensors, x2:tensors, out:tensors_out", FLOATING,
               lambda t, x1, x2, fn=fn: [getattr(t, fn)(a, b) for a, b in zip(x1, x2)])
      for name, fn in _FOREACH_BINARY.items() if name not in ("Add", "Sub")],
    Operator("ForeachSubList", "x1:tensors, x2:tensors, alpha, out:tensors_out", FLOATING,      # alpha: a tensor
             lambda t, x1, x2, alpha: [a - alpha.reshape(()) * b for a, b in zip(x1, x2)]),
    Operator("ForeachSubListV2", "x1:tensors, x2:tensors, alpha:scalar, out:tensors_out", FLOATING,
             lambda t, x1, x2, alpha: t._foreach_sub(x1, x2, alpha=alpha)),
    *[Operator(f"Foreach{name}ScalarV2", "x:tensors, scalar:scalar, out:tensors_out", FLOATING,
               lambda t, x, scalar, fn=fn: [_with_scalar(t, fn, v, scalar) for v in x])
      for name, fn in _FOREACH_BINARY.items() if name not in ("Add", "Mul")],
    *[Operator(f"Foreach{name}Scalar", "x:tensors, scalar, out:tensors_out", FLOATING,       # scalar: a tensor
               lambda t, x, scalar, fn=fn: [_with_scalar(t, fn, v, scalar.reshape(())) for v in x])
      for name, fn in _FOREACH_BINARY.items()],
    *[Operator(f"Foreach{name}ScalarList", "x:tensors, scalars:scalars, out:tensors_out", FLOATING,
               lambda t, x, scalars, fn=fn: [_with_scalar(t, fn, v, s) for v, s in zip(x, scalars)])
      for name, fn in _FOREACH_BINARY.items() if name != "Div"],
    Operator("ForeachAddcdivScalarV2", "x1:tensors, x2:tensors, x3:tensors, scalar:scalar, out:tensors_out", FLOATING,
             lambda t, x1, x2, x3, scalar: t._foreach_addcdiv(x1, x2, x3, scalar)),
    Operator("ForeachLerpList", "x1:tensors, x2:tensors, weight:tensors, out:tensors_out", FLOATING,
             lambda t, x1, x2, weight: t._foreach_lerp(x1, x2, weight)),
    Operator("ForeachZeroInplace", "x:tensors_ref", ALL, lambda t, x: [t.zeros_like(v) for v in x]),
    Operator("ForeachCopy", "x:tensors, out:tensors_out", ALL, lambda t, x: list(x)),
    Operator("ForeachAddListV2", "x1:tensors, x2:tensors, alpha:scalar, out:tensors_out", FLOATING,
             lambda t, x1, x2, alpha: t._foreach_add(x1, x2, alpha=alpha)),
    Operator("ForeachAddScalarV2", "x:tensors, scalar:scalar, out:tensors_out", FLOATING,
             lambda t, x, scalar: t._foreach_add(x, scalar)),
    Operator("ForeachMulScalarV2", "x:tensors, scalar:scalar, out:tensors_out", FLOATING,
             lambda t, x, scalar: t._foreach_mul(x, scalar)),
    Operator("ForeachDivScalarList", "x:tensors, scalars:scalars, out:tensors_out", FLOATING,
             lambda t, x, scalars: _each(lambda a, s: a / s, x, scalars)),
    Operator("ForeachNorm", "x:tensors, scalar:scalar, out:tensors_out", FLOATING,
             lambda t, x, scalar: t._foreach_norm(x, scalar)),
    Operator("ForeachNonFiniteCheckAndUnscale", "scaledGrads:tensors_ref, foundInf:ref, invScale", FLOATING, _unscale),
    Operator("AmpUpdateScale", "currentScale, growthTracker, foundInf, growthFactor:float, backoffFactor:float, "
             "growthInterval:int, updatedScale:out, updatedGrowthTracker:out", FLOATING, _update_scale),
    Operator("ForeachAddcmulScalarV2", "x1:tensors, x2:tensors, x3:tensors, scalar:scalar, out:tensors_out", FLOATING,
             lambda t, x1, x2, x3, scalar: t._foreach_addcmul(x1, x2, x3, scalar)),
    Operator("ForeachLerpScalar", "x1:tensors, x2:tensors, weight:scalar, out:tensors_out", FLOATING,
             lambda t, x1, x2, weight: t._foreach_lerp(x1, x2, weight)),
]

OPERATORS: dict[str, Operator] = {op.name: op for op in _OPS}
assert len(OPERATORS) == len(_OPS), "an operator is listed twice"
