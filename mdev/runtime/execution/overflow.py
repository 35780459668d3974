"""Floating-point overflow detection: the saturation mode and the overflow status.

    set_device_sat_mode(mode)        the current device's float overflow mode for streams
                                     created afterwards (INF_NAN by default on A2/A3 parts;
                                     parts without INF_NAN support have SATURATION only)
    set_stream_overflow_switch       (mdev.runtime.streams) kernels of the stream report
                                     overflows: the device sets this process's status
    get_overflow_status(p, 64, s)    a stream task copying the status (a uint32 flag in a
                                     64-byte record) to device memory; reset_overflow_status
                                     a stream task clearing it -- per process, as on A2/A3

A kernel "overflows" when its numpy arithmetic on the device raises a floating-point
overflow, invalid-operation or divide-by-zero condition.  mdev computes with IEEE inf/nan
in either mode: the mode is kept and reported, results are not saturated.
"""

from __future__ import annotations


from mdev import constants as C
from mdev import errors as E
from mdev.errors import AclError
from mdev.runtime import streams
from mdev.runtime.boundary import api
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.memtable import DEVICE
from mdev.runtime.devices.sysinfo import NPU_ARCH
from mdev.runtime.validate import as_int, size


# this module's part of the runtime's state, made afresh with it (finalize, fork)
held = rt.family(
    sat_modes=dict,  # device -> aclrtSetDeviceSatMode
)

STATUS_BYTES = 64
_MODES = (C.ACL_RT_OVERFLOW_MODE_SATURATION, C.ACL_RT_OVERFLOW_MODE_INFNAN)


def _inf_nan_capable(device: int) -> bool:
    return NPU_ARCH.get(rt.attach().topology.device(device).soc_name) == 2201


def _default_mode(device: int) -> int:
    return C.ACL_RT_OVERFLOW_MODE_INFNAN if _inf_nan_capable(device) else C.ACL_RT_OVERFLOW_MODE_SATURATION


@api()
def set_device_sat_mode(mode: int) -> None:
    mode = as_int(mode, "mode")
    if mode not in _MODES:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"mode must be ACL_RT_OVERFLOW_MODE_SATURATION (0) or "
                       f"_INFNAN (1), got {mode}")
    device = rt.current_context().device
    if mode == C.ACL_RT_OVERFLOW_MODE_INFNAN and not _inf_nan_capable(device):
        raise AclError(E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, f"device {device} "
                       f"({rt.attach().topology.device(device).soc_name}) has no INF_NAN mode")
    with rt.lock:
        held.sat_modes[device] = mode


@api(1)
def get_device_sat_mode() -> int:
    device = rt.current_context().device
    return held.sat_modes.get(device, _default_mode(device))


@api()
def get_overflow_status(output_addr, output_size: int, stream) -> None:
    st = rt.stream_in_context(stream)
    nbytes = size(output_size, "outputSize")
    if nbytes < STATUS_BYTES:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"outputSize must be {STATUS_BYTES} bytes, got {nbytes}")
    if not output_addr:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "outputAddr is NULL")
    operand = rt.memory.operand(output_addr, STATUS_BYTES, write=True, what="outputAddr")
    if operand.kind != DEVICE or operand.device != st.device:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "outputAddr must be device memory of the stream's device")
    streams.submit(st, "overflow_status", operand.location())


@api()
def reset_overflow_status(stream) -> None:
    streams.submit(rt.stream_in_context(stream), "overflow_reset")
