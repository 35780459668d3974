"""The operator task: one op of the operator library (aclnn), computed by the device on
views of its HBM.

    host --("operator", name, inputs, outputs, attrs)--> operator() here
        inputs / outputs   per read / written parameter of the op's signature (mdev.operators):
                           a tensor (location, shape, strides, aclDataType), a tuple of them
                           (a tensor list), or None (an optional one left out)
        attrs              per attribute parameter: a number, a tuple of numbers, or None

The reference math is torch's CPU kernels (mdev.operators), imported in the device process
when its first operator task arrives: a device that runs none never loads torch.  Each
tensor is a torch view of the HBM bytes it spans (strides and storage offset as the host
gave them, zero strides for broadcast views); the reference's results are fresh tensors,
copied into the outputs after it ran, so an output may alias an input (the in-place ops).
"""

from __future__ import annotations

import math
import os
import threading
from typing import TYPE_CHECKING

from mdev import errors as E
from mdev.board.tasktable import TaskFault, op
from mdev.operators import DTYPE, LISTS, OPERATORS, READS, TENSORS_OUT, TENSORS_REF, TORCH_DTYPES, WRITES
from mdev.taskspec import each_tensor, tensor_extent

if TYPE_CHECKING:
    from mdev.board.device import Device
    from mdev.board.stream import DeviceStream

_torch = None
_loading = threading.Lock()


def _load_torch():
    """torch, imported on first use (the device's streams run tasks on several threads)."""
    global _torch
    with _loading:
        if _torch is None:
            # torch would load its device backends (torch_npu, which would load the CANN
            # libraries, mdev's own among them) into the device: a device needs none
            os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
            try:
                import torch
            except Exception as exc:
                raise TaskFault(E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, f"operators compute with torch's CPU kernels, "
                                f"and torch is not importable in the device process: {exc}") from None
            torch.set_num_threads(1)      # a device is one process among many on the host's cores
            _torch = torch
    return _torch


@op()
def operator(device: "Device", stream: "DeviceStream", name: str, inputs: tuple, outputs: tuple,
             attrs: tuple) -> None:
    spec = OPERATORS.get(name)
    if spec is None:
        raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"operator {name!r:.60} is not in mdev's operator library")
    _check_form(spec, inputs, outputs, attrs)
    torch = _load_torch()
    memory = device.memory
    pinned = memory.pin([t[0][2] for t in (*each_tensor(inputs), *each_tensor(outputs))
                         if t[0][0] == "d" and t[0][1] == device.index])
    try:
        kwargs, ins, ats = {}, iter(inputs), iter(attrs)
        for param, kind in spec.params:
            if kind in READS:
                kwargs[param] = _torch_value(torch, device, stream, next(ins), False)
            elif kind == DTYPE:
                code = next(ats)
                kwargs[param] = None if code is None else getattr(torch, TORCH_DTYPES[code])
            elif kind not in WRITES:
                kwargs[param] = next(ats)
        with torch.inference_mode():
            results = spec.reference(torch, **kwargs)
            results = results if isinstance(results, (tuple, list)) and len(spec.written) > 1 else (results,)
            for (param, kind), where, result in zip([p for p in spec.params if p[1] in WRITES], outputs, results):
                if where is None or result is None:
                    continue
                if kind in (TENSORS_OUT, TENSORS_REF):
                    for target, value in zip(_torch_value(torch, device, stream, where, True), result):
                        target.copy_(value)
                else:
                    _torch_value(torch, device, stream, where, True).copy_(result)
    except TaskFault:
        raise
    except Exception as exc:      # torch refused what the host's check let through
        raise TaskFault(E.ACL_ERROR_RT_AICORE_EXCEPTION, f"aclnn{name}: {type(exc).__name__}: {exc}") from None
    finally:
        memory.unpin(pinned)
    device.wake()


def _is_tensor(entry) -> bool:
    return type(entry) is tuple and len(entry) == 4 and type(entry[0]) is tuple and len(entry[0]) == 3 \
        and entry[0][0] in ("d", "p") and type(entry[1]) is tuple and type(entry[2]) is tuple


def _check_form(spec, inputs, outputs, attrs) -> None:
    """The task's arguments have the form the op's signature gives them (a host is trusted
    with its own memory, not with the shape of what it sends)."""
    reads = [k for _, k in spec.params if k in READS]
    writes = [k for _, k in spec.params if k in WRITES]
    entries = [*zip(reads, inputs if type(inputs) is tuple else ()),
               *zip(writes, outputs if type(outputs) is tuple else ())]
    if not (type(inputs) is tuple and type(outputs) is tuple and type(attrs) is tuple and len(inputs) == len(reads)
            and len(outputs) == len(writes)
            and len(attrs) == sum(k not in READS and k not in WRITES for _, k in spec.params)
            and all(e is None or (all(map(_is_tensor, e)) if k in LISTS and type(e) is tuple else _is_tensor(e))
                    for k, e in entries)):
        raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"operator task aclnn{spec.name}: its tensors and attributes "
                        f"are not the form of its signature ({spec.signature})")


def _torch_value(torch, device: "Device", stream: "DeviceStream", entry, write: bool):
    """A tensor (or a list of them) of the task as torch views of the bytes it spans."""
    if entry is None:
        return None
    if entry and isinstance(entry[0], tuple) and isinstance(entry[0][0], str):
        return _view(torch, device, stream, *entry, write)
    return [_view(torch, device, stream, *t, write) for t in entry]


def _view(torch, device: "Device", stream: "DeviceStream", where: tuple, shape: tuple, strides: tuple,
          data_type: int, write: bool):
    if not (len(shape) == len(strides) and all(type(n) is int and n >= 0 for n in (*shape, *strides))
            and data_type in TORCH_DTYPES):
        raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"tensor operand: shape {shape!r:.60}, strides "
                        f"{strides!r:.60}, data type {data_type!r:.20} are not a tensor's")
    if math.prod(shape) > device.memory.hbm.size:
        # a broadcast view (stride 0) may have more elements than bytes, never more than
        # a whole HBM could hold: the bound keeps a hostile shape from holding the device
        raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"tensor operand of shape {shape!r:.60} has more elements "
                        f"than device {device.index}'s HBM has bytes")
    dtype = getattr(torch, TORCH_DTYPES[data_type])
    raw = device.memory.view(where, tensor_extent(shape, strides, data_type), stream, write=write)
    flat = torch.from_numpy(raw).view(dtype) if raw.size else torch.empty(0, dtype=dtype)
    return flat.as_strided(shape, strides)
