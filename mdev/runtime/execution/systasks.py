"""System tasks (guide 03-04): ``aclrtReduceAsync`` and ``aclrtRandomNumAsync``.

Both are asynchronous stream tasks over device memory of the stream's device.  The
arguments are validated here (like the copies in ``memops``); the device runs the task
(``mdev.board.systasks``; the aclDataType tables: ``mdev.dtypes``).

``random_num_async`` takes aclrtRandomNumTaskInfo as a dict with the C field names:

    {"dataType": ACL_FLOAT,
     "randomNumFuncParaInfo": {"funcType": ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS,
                               "paramInfo": {"uniformDisInfo": {"min": para, "max": para}}},
     "randomParaAddr": 0,                      # optional device memory for the parameters
     "randomResultAddr": dev_ptr,              # n values (dropout: ceil(n / 8) bytes of bits)
     "randomCounterAddr": dev_ptr,             # 16-byte counter, advanced by n
     "randomSeed": para, "randomNum": para}

where each ``para`` is aclrtRandomParaInfo ``{"isAddr": 0, "valueOrAddr": 1.5}`` (an
immediate number, or raw bytes in ``dataType``) or ``{"isAddr": 1, "valueOrAddr": dev_ptr,
"size": nbytes}`` (read from device memory when the task runs); a bare number is an
immediate.  ``paramInfo`` may also name the fields directly (``{"min": .., "max": ..}``).
The dropout ratio field is ``dropoutRation`` in the header (``dropoutRatio`` works too).
"""

from __future__ import annotations

import numpy as np

from mdev import constants as C
from mdev import errors as E
from mdev.errors import AclError
from mdev import dtypes
from mdev.runtime.boundary import api
from mdev.runtime import streams
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.memtable import DEVICE, Operand
from mdev.runtime.validate import as_int, size

REDUCE_KINDS = {
    C.ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM: "SUM", C.ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX: "MAX",
    C.ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN: "MIN", C.ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL: "EQUAL",
}
# A2/A3 parts (every SoC mdev emulates takes the A2/A3 rules)
REDUCE_TYPES = (C.ACL_INT8, C.ACL_INT16, C.ACL_INT32, C.ACL_FLOAT16, C.ACL_FLOAT, C.ACL_BF16)
RANDOM_TYPES = (C.ACL_INT32, C.ACL_INT64, C.ACL_UINT32, C.ACL_UINT64, C.ACL_BF16, C.ACL_FLOAT16, C.ACL_FLOAT)
FLOAT_TYPES = (C.ACL_BF16, C.ACL_FLOAT16, C.ACL_FLOAT)
MAX_U64 = (1 << 64) - 1

# funcType -> (union member of paramInfo, {parameter: accepted field names})
_FUNCS = {
    C.ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK: ("dropoutBitmaskInfo", {"ratio": ("dropoutRation", "dropoutRatio")}),
    C.ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS: ("uniformDisInfo", {"min": ("min",), "max": ("max",)}),
    C.ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS: ("normalDisInfo", {"mean": ("mean",), "stddev": ("stddev",)}),
    C.ACL_RT_RANDOM_NUM_FUNC_TYPE_TRUNCATED_NORMAL_DIS: ("normalDisInfo", {"mean": ("mean",), "stddev": ("stddev",)}),
}


def _device_operand(ptr, nbytes: int, device: int, write: bool, what: str) -> Operand:
    if not ptr:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{what} is NULL")
    operand = rt.memory.operand(ptr, nbytes, write=write, what=what)
    if operand.kind != DEVICE or operand.device != device:
        where = f"device {operand.device}" if operand.kind == DEVICE else f"{operand.kind} host"
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID,
                       f"{what} must be device memory of the stream's device {device}, not {where} memory")
    return operand


def _reserve(reserve) -> None:
    if reserve not in (None, 0):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "reserve must be NULL (None or 0)")


# ---------------------------------------------------------------------------- reduce
@api()
def reduce_async(dst, src, count, kind, data_type, stream, reserve=None) -> None:
    """dst[i] = op(dst[i], src[i]) over ``count`` bytes of ``data_type`` elements."""
    if not dst or not src:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{'dst' if not dst else 'src'} is NULL")
    count = size(count, "count")
    kind, data_type = as_int(kind, "kind"), as_int(data_type, "type")
    _reserve(reserve)
    st = rt.stream_in_context(stream)
    if kind not in REDUCE_KINDS:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"reduce kind {kind} is not one of "
                       f"ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM/MAX/MIN/EQUAL (10..13)")
    if data_type not in REDUCE_TYPES:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"data type {data_type} cannot be reduced; supported: "
                       f"ACL_INT8, ACL_INT16, ACL_INT32, ACL_FLOAT16, ACL_FLOAT, ACL_BF16")
    item = dtypes.itemsize(data_type)
    if count % item:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"count {count} is not a multiple of the "
                       f"{item}-byte element size")
    if count == 0:
        return
    d = _device_operand(dst, count, st.device, True, "dst")
    s = _device_operand(src, count, st.device, False, "src")
    streams.submit(st, "reduce", d.location(), s.location(), count, kind, data_type)


# ---------------------------------------------------------------------------- random numbers
def _field(info: dict, *names, required: bool = True):
    for name in names:
        if name in info:
            return info[name]
    if required:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"taskInfo lacks {names[0]}")
    return None


def _para(value, device: int, data_type: int | None, what: str) -> tuple:
    """aclrtRandomParaInfo -> ("v", number) or ("a", device location, size)."""
    if isinstance(value, dict):
        is_addr = value.get("isAddr", 0)
        raw = _field(value, "valueOrAddr", "value")
        nbytes = value.get("size", 0)
    else:
        is_addr, raw, nbytes = 0, value, 0
    if is_addr:
        natural = 8 if data_type is None else dtypes.itemsize(data_type)
        nbytes = as_int(nbytes, f"{what}.size") or natural
        if not 0 < nbytes <= 8:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{what}.size must be 1..8, got {nbytes}")
        return ("a", _device_operand(as_int(raw, f"{what}.valueOrAddr"), nbytes, device, False,
                                     f"{what}.valueOrAddr").location(), nbytes)
    if isinstance(raw, (bytes, bytearray)):
        raw = bytes(raw).ljust(8, b"\0")
        if data_type is None:
            return ("v", int.from_bytes(raw[:8], "little"))
        dtype = dtypes.DTYPES[data_type]
        if dtype is dtypes.BF16:
            return ("v", float(dtypes.bf16_to_float32(np.frombuffer(raw[:2], np.uint16))[0]))
        return ("v", np.frombuffer(raw[:dtype.itemsize], dtype)[0].item())
    if isinstance(raw, bool) or not isinstance(raw, (int, float, np.integer, np.floating)):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{what}.valueOrAddr must be a number or bytes, "
                       f"got {type(raw).__name__}")
    if data_type is None:
        if not isinstance(raw, (int, np.integer)):
            raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{what} must be an integer, got {raw!r}")
        if not 0 <= raw <= MAX_U64:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{what} {raw} is out of range for uint64")
        return ("v", int(raw))
    return ("v", raw.item() if isinstance(raw, np.generic) else raw)


def _check_immediates(func_type: int, params: dict) -> None:
    values = {k: p[1] for k, p in params.items() if p[0] == "v"}
    if "ratio" in values and not 0.0 <= float(values["ratio"]) <= 1.0:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"dropout ratio {values['ratio']} is outside [0, 1]")
    if "min" in values and "max" in values and not values["min"] < values["max"]:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID,
                       f"uniform distribution needs min < max, got [{values['min']}, {values['max']})")
    if "stddev" in values and not float(values["stddev"]) >= 0:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"stddev must be >= 0, got {values['stddev']}")


@api()
def random_num_async(task_info, stream, reserve=None) -> None:
    if not isinstance(task_info, dict):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "taskInfo must be a dict (aclrtRandomNumTaskInfo)")
    _reserve(reserve)
    st = rt.stream_in_context(stream)
    data_type = as_int(_field(task_info, "dataType"), "dataType")
    if data_type not in RANDOM_TYPES:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"data type {data_type} is not supported for random numbers "
                       f"(ACL_INT32, ACL_INT64, ACL_UINT32, ACL_UINT64, ACL_BF16, ACL_FLOAT16, ACL_FLOAT)")
    func = _field(task_info, "randomNumFuncParaInfo")
    if not isinstance(func, dict):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "randomNumFuncParaInfo must be a dict")
    func_type = as_int(_field(func, "funcType"), "funcType")
    if func_type not in _FUNCS:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"funcType {func_type} is not an aclrtRandomNumFuncType (0..3)")
    if func_type in (C.ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS, C.ACL_RT_RANDOM_NUM_FUNC_TYPE_TRUNCATED_NORMAL_DIS) \
            and data_type not in FLOAT_TYPES:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "normal distributions need a floating-point dataType")
    member, fields = _FUNCS[func_type]
    info = _field(func, "paramInfo")
    if not isinstance(info, dict):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "paramInfo must be a dict")
    info = info.get(member, info)
    # the dropout ratio is a probability whatever the output type
    ratio_type = data_type if data_type in FLOAT_TYPES else C.ACL_FLOAT
    params = {name: _para(_field(info, *names), st.device, ratio_type if name == "ratio" else data_type,
                          f"{member}.{names[0]}")
              for name, names in fields.items()}
    _check_immediates(func_type, params)
    seed = _para(_field(task_info, "randomSeed"), st.device, None, "randomSeed")
    num = _para(_field(task_info, "randomNum"), st.device, None, "randomNum")

    item = dtypes.itemsize(data_type)
    dropout = func_type == C.ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK
    result_ptr = _field(task_info, "randomResultAddr")
    if num[0] == "v":
        nbytes = -(-num[1] // 8) if dropout else num[1] * item
        result = _device_operand(result_ptr, max(nbytes, 1), st.device, True, "randomResultAddr")
        result_bytes = None
    else:   # the count is read when the task runs: bound it by the allocation
        result = _device_operand(result_ptr, 1, st.device, True, "randomResultAddr")
        result_bytes = result.allocation.end - result.ptr
    counter = _device_operand(_field(task_info, "randomCounterAddr"), 16, st.device, True, "randomCounterAddr")
    para_addr = _field(task_info, "randomParaAddr", required=False)
    if para_addr:
        _device_operand(para_addr, 1, st.device, False, "randomParaAddr")
    if num[0] == "v" and num[1] == 0:
        return
    streams.submit(st, "random_num", data_type, func_type, params, result.location(), result_bytes,
                   counter.location(), seed, num)
