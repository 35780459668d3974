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

import os
import threading
from typing import TYPE_CHECKING

from mdev import errors as E
from mdev.board.tasks import tensor_bytes
from mdev.board.tasktable import TaskFault, op
from mdev.operators import DTYPE, LISTS, OPERATORS, TORCH_DTYPES
from mdev.taskspec import each_tensor, is_tensor

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
        kwargs = {param: _torch_value(torch, device, stream, entry, False)
                  for (param, _), entry in zip(spec.reads, inputs)}
        for (param, kind), value in zip(spec.attributes, attrs):
            kwargs[param] = getattr(torch, TORCH_DTYPES[value]) if kind == DTYPE and value is not None else value
        with torch.inference_mode():
            results = spec.results(spec.reference(torch, **kwargs))
            for (_, kind), where, result in zip(spec.writes, outputs, results):
                if where is None or result is None:
                    continue
                targets = _torch_value(torch, device, stream, where, True)
                for target, value in zip(targets, result) if kind in LISTS else ((targets, result),):
                    target.copy_(value)
    except TaskFault:
        raise
    except Exception as exc:      # torch refused what the host's check let through
        raise TaskFault(E.ACL_ERROR_RT_AICORE_EXCEPTION, f"aclnn{name}: {type(exc).__name__}: {exc}") from None
    finally:
        memory.unpin(pinned)
    device.wake()


def _check_form(spec, inputs, outputs, attrs) -> None:
    """The task's arguments have the form the op's signature gives them (a host is trusted
    with its own memory, not with the shape of what it sends)."""
    entries = [*zip(spec.reads, inputs if type(inputs) is tuple else ()),
               *zip(spec.writes, outputs if type(outputs) is tuple else ())]
    if not (type(inputs) is tuple and type(outputs) is tuple and type(attrs) is tuple
            and len(inputs) == len(spec.reads) and len(outputs) == len(spec.writes)
            and len(attrs) == len(spec.attributes)
            and all(e is None or (type(e) is tuple and all(map(is_tensor, e)) if k in LISTS else is_tensor(e))
                    for (_, k), e in entries)):
        raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"operator task aclnn{spec.name}: its tensors and attributes "
                        f"are not the form of its signature ({spec.signature})")


def _torch_value(torch, device: "Device", stream: "DeviceStream", entry, write: bool):
    """A tensor (or a list of them) of the task as torch views of the bytes it spans."""
    if entry is None:
        return None
    if is_tensor(entry):
        return _view(torch, device, stream, *entry, write)
    return [_view(torch, device, stream, *t, write) for t in entry]


def _view(torch, device: "Device", stream: "DeviceStream", where: tuple, shape: tuple, strides: tuple,
          data_type: int, write: bool):
    if data_type not in TORCH_DTYPES:
        raise TaskFault(E.ACL_ERROR_RT_PARAM_INVALID, f"tensor operand: data type {data_type!r:.20} is not one "
                        "mdev's operators compute in")
    raw = tensor_bytes(device, stream, where, shape, strides, data_type, write)
    dtype = getattr(torch, TORCH_DTYPES[data_type])
    flat = torch.from_numpy(raw).view(dtype) if raw.size else torch.empty(0, dtype=dtype)
    return flat.as_strided(shape, strides)
