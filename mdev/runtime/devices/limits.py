"""Core resource limits: how many cube / vector cores a launch may spread over.

Effective limit of a launch = its stream's limit > this process's limit for the device >
the hardware count; a thread may adopt a stream's limits for ``get_res_in_current_thread``.
Limits count at submission: changing them later does not touch work already queued.
"""

from __future__ import annotations


from mdev import constants as C
from mdev import errors as E
from mdev.errors import AclError
from mdev.runtime.boundary import api
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.core import Stream
from mdev.runtime.validate import as_int


# this module's part of the runtime's state, made afresh with it (finalize, fork)
held = rt.family(
    device_limits=dict,  # (device, aclrtDevResLimitType) -> cores (aclrtSetDeviceResLimit)
)

_TYPES = (C.ACL_RT_DEV_RES_CUBE_CORE, C.ACL_RT_DEV_RES_VECTOR_CORE)


def hardware(device: int, res_type: int) -> int:
    spec = rt.attach().topology.device(device)
    return spec.cube if res_type == C.ACL_RT_DEV_RES_CUBE_CORE else spec.vector


def _checked(device: int, res_type, value=None) -> tuple[int, int | None]:
    res_type = as_int(res_type, "type")
    if res_type not in _TYPES:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"resource type must be ACL_RT_DEV_RES_CUBE_CORE (0) "
                       f"or ACL_RT_DEV_RES_VECTOR_CORE (1), got {res_type}")
    if value is not None:
        value = as_int(value, "value")
        if not 0 < value <= hardware(device, res_type):
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"limit {value} is outside 1..{hardware(device, res_type)} "
                           f"cores of device {device}")
    return res_type, value


def _device_in_use(device_id) -> int:
    device = rt.check_device(device_id)
    if rt.device_refs.get(device, 0) <= 0 and not any(c.device == device for c in rt.contexts.values()):
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"device {device} is not set in this process")
    return device


def device_limit(device: int, res_type: int) -> int:
    return held.device_limits.get((device, res_type)) or hardware(device, res_type)


def stream_limit(stream: Stream, res_type: int) -> int:
    return stream.res_limits.get(res_type) or device_limit(stream.device, res_type)


# ---------------------------------------------------------------------------- API
@api()
def set_device_res_limit(device_id: int, res_type: int, value: int) -> None:
    device = _device_in_use(device_id)
    res_type, value = _checked(device, res_type, value)
    held.device_limits[(device, res_type)] = value


@api(1)
def get_device_res_limit(device_id: int, res_type: int) -> int:
    device = rt.check_device(device_id)
    res_type, _ = _checked(device, res_type)
    return device_limit(device, res_type)


@api()
def reset_device_res_limit(device_id: int) -> None:
    device = _device_in_use(device_id)
    for res_type in _TYPES:
        held.device_limits.pop((device, res_type), None)


@api()
def set_stream_res_limit(stream, res_type: int, value: int) -> None:
    st = rt.stream(stream)
    res_type, value = _checked(st.device, res_type, value)
    st.res_limits[res_type] = value


@api(1)
def get_stream_res_limit(stream, res_type: int) -> int:
    st = rt.stream(stream)
    res_type, _ = _checked(st.device, res_type)
    return stream_limit(st, res_type)


@api()
def reset_stream_res_limit(stream) -> None:
    rt.stream(stream).res_limits.clear()


@api()
def use_stream_res_in_current_thread(stream) -> None:
    rt.thread.res_stream = rt.stream(stream)


@api()
def unuse_stream_res_in_current_thread(stream) -> None:
    rt.stream(stream)
    rt.thread.res_stream = None


@api(1)
def get_res_in_current_thread(res_type: int) -> int:
    adopted = rt.thread.res_stream
    if adopted is not None and not adopted.destroyed:
        res_type, _ = _checked(adopted.device, res_type)
        return stream_limit(adopted, res_type)
    device = rt.current_context().device
    res_type, _ = _checked(device, res_type)
    return device_limit(device, res_type)
