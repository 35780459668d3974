"""The operator library on the host (aclnn): argument descriptors, the two phases of an op.

    create_tensor / create_scalar / create_int_array / ... -> a handle (aclTensor*, ...)
    operator_get_workspace_size(name, *params)   aclnnXGetWorkspaceSize: checks the
        parameters against the op's entry (mdev.operators) -- nulls, kinds, dtypes -- and
        runs its reference on meta tensors, so shapes, broadcasting and type promotion are
        refused as torch refuses them; -> (workspace size, executor)
    operator_run(workspace, size, executor, stream)   aclnnX: ONE "operator" task on the
        stream (mdev.taskspec), which the stream's device computes (mdev.board.operators);
        the executor is used up unless set_acl_op_executor_repeatable marked it

Compile options (aclSetCompileopt, aclGetCompileopt): mdev compiles no operator, but
frameworks set and read them (torch_npu reads ACL_OP_JIT_COMPILE at start-up); they are
kept and answered as CANN's op compiler does.

A descriptor is a snapshot: the executor keeps what the parameters said when it was made,
so the caller may destroy them before the op runs (as torch_npu does).  Failures are
aclnnStatus values (161001 a null where a value is needed, 161002 a bad parameter, 561003
an op mdev does not have) with a message naming the op and the parameter.
"""

from __future__ import annotations

import itertools
import math
import os
import sys
import threading
from dataclasses import dataclass

from mdev import constants as C
from mdev import dtypes
from mdev import errors as E
from mdev.errors import AclError
from mdev.operators import (BOOL, BOOLS, DTYPE, FLOAT, FLOATS, INT, INTS, LISTS, OPERATORS, OPT_INTS, OPT_SCALAR,
                            OPTIONAL, READS, SCALAR, SCALARS, STR, TENSORS, TORCH_DTYPES, WRITES, Operator)
from mdev.runtime import streams
from mdev.runtime.boundary import api
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.memtable import DEVICE, Operand
from mdev.taskspec import tensor_extent

NULLPTR, INVALID, NOT_FOUND = E.ACLNN_ERR_PARAM_NULLPTR, E.ACLNN_ERR_PARAM_INVALID, E.ACLNN_ERR_INNER_FIND_KERNEL_ERROR
MAX_DIMS = 8             # aclnn ops take tensors of up to 8 dimensions


@dataclass(frozen=True)
class TensorDesc:
    """aclTensor: a view (shape, strides in elements, offset in elements) of the storage at ``data``."""
    shape: tuple
    dtype: int
    strides: tuple
    offset: int
    format: int
    storage: tuple
    data: int

    def __str__(self) -> str:
        return f"{TORCH_DTYPES[self.dtype]}{list(self.shape)}"


@dataclass(frozen=True)
class ScalarDesc:
    """aclScalar: a number of an aclDataType."""
    value: object
    dtype: int


@dataclass(frozen=True)
class ArrayDesc:
    """aclIntArray / aclFloatArray / aclBoolArray / aclTensorList / aclScalarList."""
    kind: str
    items: tuple


@dataclass
class Executor:
    """aclOpExecutor: an op and its checked parameters, until aclnnX runs it."""
    op: Operator
    values: dict
    repeatable: bool = False


_objects: dict[int, object] = {}
_lock = threading.Lock()
_handles = itertools.count(0x5A_0000_0010, 16)        # opaque, never 0, never a device address
_torch = None
_AUTOLOAD = "TORCH_DEVICE_BACKEND_AUTOLOAD"


def _keep(obj: object) -> int:
    handle = next(_handles)
    with _lock:
        _objects[handle] = obj
    return handle


def _get(handle, kind, what: str, code: int = INVALID):
    return _of_kind(_objects.get(handle) if type(handle) is int else None, handle, kind, what, code)


def _of_kind(obj, handle, kind, what: str, code: int = INVALID):
    if obj is None or not isinstance(obj, kind[0] if isinstance(kind, tuple) else kind) or \
            isinstance(kind, tuple) and obj.kind != kind[1]:
        name = kind[1] if isinstance(kind, tuple) else kind.__doc__.split(":")[0]
        raise AclError(code, f"{what} {handle!r:.40} is not a live {name}")
    return obj


def _drop(handle, kind, what: str) -> object:
    if not handle:
        return ArrayDesc("", ())
    obj = _get(handle, kind, what)
    with _lock:
        _objects.pop(handle, None)
    return obj


def _ints(values, what: str, low: int = -(1 << 63)) -> tuple:
    if values is None:
        return ()
    try:
        out = tuple(values)
    except TypeError:
        raise AclError(INVALID, f"{what} must be a sequence of integers, got {type(values).__name__}") from None
    if not all(type(v) is int and low <= v < (1 << 63) for v in out):
        raise AclError(INVALID, f"{what} must hold integers >= {low}, got {out!r:.80}")
    return out


# ---------------------------------------------------------------------------- descriptors
@api(1, failed=None)
def create_tensor(view_dims, data_type: int, stride, offset: int, format: int, storage_dims, tensor_data) -> int:
    """aclCreateTensor; ``stride`` None means contiguous."""
    return _keep(tensor_desc(view_dims, data_type, stride, offset, format, storage_dims, tensor_data))


def tensor_desc(view_dims, data_type: int, stride, offset: int, format: int, storage_dims,
                tensor_data) -> TensorDesc:
    """A tensor descriptor, checked (what aclCreateTensor refuses, AclError)."""
    shape = _ints(view_dims, "viewDims", 0)
    if len(shape) > MAX_DIMS:
        raise AclError(INVALID, f"aclCreateTensor: {len(shape)} dimensions; at most {MAX_DIMS}")
    if data_type not in TORCH_DTYPES:
        raise AclError(INVALID, f"aclCreateTensor: dataType {data_type!r:.20} is not one mdev's operators compute in "
                       f"({', '.join(sorted(TORCH_DTYPES.values()))})")
    strides = _ints(stride, "stride", 0) if stride is not None else \
        tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))
    if len(strides) != len(shape):
        raise AclError(INVALID, f"aclCreateTensor: {len(strides)} strides for {len(shape)} dimensions")
    if type(offset) is not int or offset < 0:
        raise AclError(INVALID, f"aclCreateTensor: offset {offset!r:.20} must be an integer >= 0")
    storage = _ints(storage_dims, "storageDims", 0)
    need = offset + tensor_extent(shape, strides, data_type) // dtypes.itemsize(data_type)
    if 0 not in shape and math.prod(storage) < need:
        raise AclError(INVALID, f"aclCreateTensor: the view (offset {offset}, shape {list(shape)}, strides "
                       f"{list(strides)}) reaches element {need - 1}, beyond storage {list(storage)}")
    if type(tensor_data) is not int or tensor_data < 0:
        raise AclError(INVALID, f"aclCreateTensor: tensorData must be an address, got {tensor_data!r:.40}")
    return TensorDesc(shape, data_type, strides, offset, int(format), storage, tensor_data)


@api(1, failed=None)
def create_scalar(value, data_type: int) -> int:
    """aclCreateScalar: ``value`` as a Python number (the C face reads it from its pointer)."""
    return _keep(scalar_desc(value, data_type))


def scalar_desc(value, data_type: int) -> ScalarDesc:
    """A scalar descriptor, checked (what aclCreateScalar refuses, AclError)."""
    if data_type not in TORCH_DTYPES:
        raise AclError(INVALID, f"aclCreateScalar: dataType {data_type!r:.20} is not supported")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if not (isinstance(value, bool) and data_type == C.ACL_BOOL):
            raise AclError(INVALID, f"aclCreateScalar: value must be a number, got {value!r:.40}")
    kind = bool if data_type == C.ACL_BOOL else float if data_type in (C.ACL_FLOAT, C.ACL_FLOAT16, C.ACL_BF16,
                                                                        C.ACL_DOUBLE) else int
    return ScalarDesc(kind(value), data_type)


def _array(kind: str, convert, values, what: str) -> int:
    try:
        items = tuple(convert(v) for v in values)
    except (TypeError, ValueError):
        raise AclError(INVALID, f"{what}: values must be a sequence of numbers, got {values!r:.60}") from None
    return _keep(ArrayDesc(kind, items))


@api(1, failed=None)
def create_int_array(value) -> int:
    return _keep(ArrayDesc(INTS, _ints(value, "aclCreateIntArray value")))


@api(1, failed=None)
def create_float_array(value) -> int:
    return _array(FLOATS, float, value, "aclCreateFloatArray")


@api(1, failed=None)
def create_bool_array(value) -> int:
    return _array(BOOLS, bool, value, "aclCreateBoolArray")


@api(1, failed=None)
def create_tensor_list(value) -> int:
    """aclCreateTensorList: the list owns its tensors (destroying it destroys them)."""
    return _keep(ArrayDesc(TENSORS, tuple(_get(h, TensorDesc, "aclCreateTensorList: tensor") and h for h in value)))


@api(1, failed=None)
def create_scalar_list(value) -> int:
    return _keep(ArrayDesc(SCALARS, tuple(_get(h, ScalarDesc, "aclCreateScalarList: scalar") and h for h in value)))


# destroying NULL does nothing (frameworks release an optional argument they left out)
@api()
def destroy_tensor(tensor) -> None:
    _drop(tensor, TensorDesc, "aclDestroyTensor: tensor")


@api()
def destroy_scalar(scalar) -> None:
    _drop(scalar, ScalarDesc, "aclDestroyScalar: scalar")


@api()
def destroy_int_array(array) -> None:
    _drop(array, (ArrayDesc, INTS), "aclDestroyIntArray: array")


@api()
def destroy_float_array(array) -> None:
    _drop(array, (ArrayDesc, FLOATS), "aclDestroyFloatArray: array")


@api()
def destroy_bool_array(array) -> None:
    _drop(array, (ArrayDesc, BOOLS), "aclDestroyBoolArray: array")


@api()
def destroy_tensor_list(array) -> None:
    for handle in _drop(array, (ArrayDesc, TENSORS), "aclDestroyTensorList: list").items:
        with _lock:
            _objects.pop(handle, None)


@api()
def destroy_scalar_list(array) -> None:
    for handle in _drop(array, (ArrayDesc, SCALARS), "aclDestroyScalarList: list").items:
        with _lock:
            _objects.pop(handle, None)


@api()
def destroy_acl_op_executor(executor) -> None:
    _drop(executor, Executor, "aclDestroyAclOpExecutor: executor")


@api()
def set_acl_op_executor_repeatable(executor) -> None:
    """The executor survives its runs (until aclDestroyAclOpExecutor)."""
    _get(executor, Executor, "aclSetAclOpExecutorRepeatable: executor").repeatable = True


# ---------------------------------------------------------------------------- phase 1
@api(2, failed=None)
def operator_get_workspace_size(name: str, *params) -> tuple[int, int]:
    """aclnn{name}GetWorkspaceSize(*params) -> (workspace size, executor)."""
    op = OPERATORS.get(name) if isinstance(name, str) else None
    if op is None:
        raise AclError(NOT_FOUND, f"aclnn{name!s:.60}GetWorkspaceSize: mdev's operator library has no operator "
                       f"{name!r:.60} ({len(OPERATORS)} operators: see README, Operators (aclnn))")
    where = f"aclnn{name}GetWorkspaceSize"
    if len(params) != len(op.params):
        raise AclError(INVALID, f"{where} takes {len(op.params)} parameters ({op.signature}), got {len(params)}")
    values = {param: _resolve(where, param, kind, arg) for (param, kind), arg in zip(op.params, params)}
    name, first = next(((p, values[p]) for p, _ in op.reads if values[p] is not None), ("", ()))
    for tensor in (first if isinstance(first, tuple) else (first,)):
        if tensor.dtype not in op.dtypes:
            raise AclError(INVALID, f"{where}: {name} has dtype {TORCH_DTYPES[tensor.dtype]}, not one of "
                           f"{', '.join(sorted(TORCH_DTYPES[d] for d in op.dtypes))}")
    _check_once(op, values, where)
    return 0, _keep(Executor(op, values))


def executor_values(executor) -> tuple[Operator, dict] | None:
    """The op and the checked parameters of live executor ``executor``, or None."""
    ex = _objects.get(executor)
    return (ex.op, ex.values) if type(ex) is Executor else None


def repeat_executor(op: Operator, values: dict) -> int:
    """A new executor of ``op`` with ``values`` that differ from an earlier executor's only in
    their tensors' data addresses, which no check of phase 1 looks at (mdev.capi.signatures):
    checking them again would refuse nothing it passed."""
    return _keep(Executor(op, values))


def _resolve(where: str, param: str, kind: str, arg):
    """A parameter's handle as the descriptor (a tuple of them for lists), or its value."""
    if arg is None or arg == 0 and kind not in (INT, FLOAT, BOOL, DTYPE, STR):
        if kind in OPTIONAL:
            return None
        raise AclError(NULLPTR, f"{where}: {param} is a null pointer")
    if kind in LISTS:
        return tuple(_described(h, TensorDesc, f"{where}: an element of {param}")
                     for h in _described(arg, (ArrayDesc, TENSORS), f"{where}: {param}").items)
    if kind in READS or kind in WRITES:
        return _described(arg, TensorDesc, f"{where}: {param}")
    if kind in (SCALAR, OPT_SCALAR):
        return _described(arg, ScalarDesc, f"{where}: {param}").value
    if kind == SCALARS:
        return tuple(_described(h, ScalarDesc, f"{where}: an element of {param}").value
                     for h in _described(arg, (ArrayDesc, SCALARS), f"{where}: {param}").items)
    if kind in (INTS, OPT_INTS, FLOATS, BOOLS):
        return _described(arg, (ArrayDesc, kind.rstrip("?")), f"{where}: {param}").items
    if kind == DTYPE:
        if arg not in TORCH_DTYPES:
            raise AclError(INVALID, f"{where}: {param} {arg!r:.20} is not a supported aclDataType")
        return arg
    if kind == STR:
        if not isinstance(arg, str):
            raise AclError(INVALID, f"{where}: {param} must be a string, got {arg!r:.40}")
        return arg
    convert = {INT: int, FLOAT: float, BOOL: bool}[kind]
    if isinstance(arg, bool) and kind != BOOL or not isinstance(arg, (int, float)):
        raise AclError(INVALID, f"{where}: {param} must be a number, got {arg!r:.40}")
    return convert(arg)


def _described(arg, kind, what: str):
    """A descriptor given itself (the C face reads libnnopbase's from the caller's memory),
    or the handle of one made here."""
    if type(arg) in (TensorDesc, ScalarDesc, ArrayDesc):
        return _of_kind(arg, arg, kind, what)
    return _get(arg, kind, what)


def _load_torch():
    """torch, for the meta checks: the program's own if it imported it (torch_npu's), else
    imported here without its device backends (torch_npu would load the CANN libraries into
    a program that did not ask for them)."""
    global _torch
    if _torch is None:
        saved = os.environ.get(_AUTOLOAD)
        if "torch" not in sys.modules:
            os.environ[_AUTOLOAD] = "0"
        try:
            import torch
        except Exception as exc:
            raise AclError(NOT_FOUND, f"mdev's operators compute with torch's CPU kernels, and torch is not "
                           f"importable here ({exc}): pip install 'mdev[torch]'") from None
        finally:
            if saved is None:
                os.environ.pop(_AUTOLOAD, None)
            else:
                os.environ[_AUTOLOAD] = saved
        _torch = torch
    return _torch


# outcomes of the meta check by what decides them (the op, its tensors' shapes, strides and
# dtypes, its attributes): a training step asks the same questions at every step
_CHECKED: dict[tuple, tuple | None] = {}
MAX_CHECKED = 4096


def _check_once(op: Operator, values: dict, where: str) -> None:
    _load_torch()
    key = (op.name, *(_fingerprint(values[p]) for p, _ in op.params))
    if key in _CHECKED:
        failure = _CHECKED[key]
        if failure is not None:
            raise AclError(*failure)
        return
    if len(_CHECKED) >= MAX_CHECKED:
        _CHECKED.clear()
    try:
        _check_meta(op, values, where)
    except AclError as exc:
        _CHECKED[key] = (exc.code, exc.message)
        raise
    _CHECKED[key] = None


def _fingerprint(value):
    if isinstance(value, TensorDesc):
        return value.shape, value.strides, value.dtype
    if isinstance(value, tuple):
        return tuple(_fingerprint(v) for v in value)
    return type(value).__name__, value          # 1, 1.0 and True promote differently


def _check_meta(op: Operator, values: dict, where: str) -> None:
    """Run the reference on meta tensors (no data, no work): torch refuses what it would
    refuse (shapes, broadcasting, types), and each result must fit its output."""
    torch = _load_torch()

    def meta(desc: TensorDesc):
        return torch.empty_strided(desc.shape, desc.strides, dtype=getattr(torch, TORCH_DTYPES[desc.dtype]),
                                   device="meta")

    kwargs = {}
    for param, kind in op.params:
        value = values[param]
        if kind in READS:
            kwargs[param] = None if value is None else [meta(d) for d in value] if isinstance(value, tuple) \
                else meta(value)
        elif kind == DTYPE:
            kwargs[param] = getattr(torch, TORCH_DTYPES[value])
        elif kind not in WRITES:
            kwargs[param] = value
    try:
        results = op.reference(torch, **kwargs)
    except NotImplementedError:
        return          # no meta kernel: the device checks as it computes
    except Exception as exc:        # what torch refuses (RuntimeError mostly; a division by 0 of an empty mean)
        raise AclError(INVALID, f"{where}: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}") from None
    for param, result in zip(op.written, op.results(results)):
        out = values[param]
        if out is None or result is None:
            continue
        for desc, value in zip(out, result) if isinstance(out, tuple) else ((out, result),):
            if tuple(value.shape) != desc.shape and not (value.numel() == 1 and math.prod(desc.shape) == 1):
                raise AclError(INVALID, f"{where}: {param} has shape {list(desc.shape)}, the result's is "
                               f"{list(value.shape)}")
            target = getattr(torch, TORCH_DTYPES[desc.dtype])
            if not torch.can_cast(value.dtype, target):
                raise AclError(INVALID, f"{where}: the result's dtype {str(value.dtype)[6:]} cannot be cast to "
                               f"{param}'s {TORCH_DTYPES[desc.dtype]}")


# ---------------------------------------------------------------------------- phase 2
def _tensor_operand(desc: TensorDesc, write: bool, what: str = "pointer") -> Operand | None:
    """Where tensor ``desc``'s bytes lie in this process's memory (AclError if not usable);
    None for a tensor of no bytes."""
    nbytes = tensor_extent(desc.shape, desc.strides, desc.dtype)
    if nbytes == 0:
        return None
    return rt.memory.operand(desc.data + desc.offset * dtypes.itemsize(desc.dtype), nbytes, write=write, what=what)


@api()
def operator_run(workspace, workspace_size: int, executor, stream) -> None:
    """aclnn{X}(workspace, workspaceSize, executor, stream): the op as one task on ``stream``."""
    ex = _get(executor, Executor, "aclnn: executor", NULLPTR if not executor else INVALID)
    st = rt.stream_in_context(stream)
    op, values = ex.op, ex.values
    where = f"aclnn{op.name}"

    def located(value, write: bool):
        if value is None:
            return None
        if isinstance(value, tuple):
            return tuple(located(v, write) for v in value)
        try:
            operand = _tensor_operand(value, write, where)
        except AclError as exc:         # said of the tensor (formatted only then: it costs, per tensor)
            raise AclError(exc.code, exc.message.replace(where, f"{where}: tensor {value}", 1)) from None
        if operand is None:
            return (("d", st.device, 0), value.shape, value.strides, value.dtype)
        if operand.kind != DEVICE or operand.device != st.device or operand.pieces:
            raise AclError(INVALID, f"{where}: tensor {value} at {operand.ptr:#x} is not device memory of the "
                           f"stream's device {rt.local_device(st.device)}")
        return (operand.location(), value.shape, value.strides, value.dtype)

    inputs = tuple(located(values[p], False) for p, _ in op.reads)
    outputs = tuple(located(values[p], True) for p, _ in op.writes)
    attrs = tuple(values[p] for p, _ in op.attributes)
    if not ex.repeatable:
        with _lock:
            _objects.pop(executor, None)
    streams.submit(st, "operator", op.name, inputs, outputs, attrs)


def run_device(executor) -> tuple[int, set[tuple[int, int]]] | None:
    """The device an aclnnX of ``executor`` would run on now without its tensors being refused
    (each one, located as operator_run locates it, in one device allocation of this process,
    not imported, all on one device) and those allocations' [start, end), or None (gone,
    repeatable, no tensor, or refused): what the host agent grants it for
    (mdev.capi.asynchronous)."""
    ex = _objects.get(executor)
    if type(ex) is not Executor or ex.repeatable:
        return None
    found, allocations = set(), set()
    for param, write in [*((p, False) for p, _ in ex.op.reads), *((p, True) for p, _ in ex.op.writes)]:
        value = ex.values[param]
        for desc in () if value is None else value if isinstance(value, tuple) else (value,):
            try:
                operand = _tensor_operand(desc, write)
            except AclError:
                return None
            if operand is None:
                continue
            allocation = operand.allocation
            if operand.kind != DEVICE or operand.pieces or allocation.ipc_key is not None:
                return None
            found.add(operand.device)
            if rt.memory.containing(operand.ptr) is allocation:       # not a VMM mapping's
                allocations.add((allocation.ptr, allocation.end))
    return (found.pop(), allocations) if len(found) == 1 else None


def rename_executor(executor, handle: int) -> None:
    """Live ``executor`` is known as ``handle`` from now on (the host agent adopts an executor
    the C side answered GetWorkspaceSize with: mdev.capi.local)."""
    with _lock:
        ex = _objects.pop(executor, None)
        if ex is not None:
            _objects[handle] = ex


# ---------------------------------------------------------------------------- compile options
COMPILE_OPTIONS = 17            # aclCompileOpt: ACL_PRECISION_MODE (0) .. ACL_OP_DEBUG_OPTION (16)
AUTO_TUNE_MODE, JIT_COMPILE, DEBUG_OPTION = 2, 10, 16
COMPILE_OPT_SIZE = 256          # the buffer aclGetCompileoptSize asks for ACL_OP_JIT_COMPILE
JIT_DEFAULT = "disable"         # A2/A3 run prebuilt operator binaries
_compile_options: dict[int, str] = {}


def _compile_option(opt, where: str) -> int:
    if type(opt) is not int or not 0 <= opt < COMPILE_OPTIONS:
        raise AclError(E.ACL_ERROR_INTERNAL_ERROR, f"{where}: {opt!r:.20} is not an aclCompileOpt")
    return opt


@api()
def set_compileopt(opt: int, value: str) -> None:
    """aclSetCompileopt: keep the option's value (the process's, as CANN's op compiler does)."""
    _compile_option(opt, "aclSetCompileopt")
    if value is None:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "aclSetCompileopt: value is NULL")
    if opt == AUTO_TUNE_MODE:
        raise AclError(E.ACL_ERROR_FEATURE_UNSUPPORTED, "aclSetCompileopt: ACL_AUTO_TUNE_MODE is discarded (tuning "
                       "is the AOE tool's)")
    _compile_options[opt] = value


@api(1, failed=0)
def get_compileopt_size(opt: int) -> int:
    """aclGetCompileoptSize: the bytes aclGetCompileopt needs (0: nothing to read)."""
    if opt == JIT_COMPILE:
        return COMPILE_OPT_SIZE
    value = _compile_options.get(opt, "") if type(opt) is int else ""
    return len(value.encode()) + 1 if value else 0


@api(1, failed=None)
def get_compileopt(opt: int) -> str:
    """aclGetCompileopt: ACL_OP_JIT_COMPILE ("enable"/"disable") and ACL_OP_DEBUG_OPTION are
    readable, as in CANN; the others are not."""
    _compile_option(opt, "aclGetCompileopt")
    if opt == JIT_COMPILE:
        return "enable" if _compile_options.get(opt) == "enable" else JIT_DEFAULT
    if opt == DEBUG_OPTION and opt in _compile_options:
        return _compile_options[opt]
    raise AclError(E.ACL_ERROR_API_NOT_SUPPORT, f"aclGetCompileopt: option {opt} cannot be read (only "
                   "ACL_OP_JIT_COMPILE and a set ACL_OP_DEBUG_OPTION can)")
