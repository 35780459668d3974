"""Stream configuration handles (aclrtCreateStreamConfigHandle .. aclrtCreateStreamV2).

    handle = create_stream_config_handle()
    set_stream_config_opt(handle, ACL_RT_STREAM_FLAG, flags, 8)        size_t
    set_stream_config_opt(handle, ACL_RT_STREAM_PRIORITY, 3, 4)        uint32, [0, 7]
    set_stream_config_opt(handle, ACL_RT_STREAM_WORK_ADDR_PTR, p, 8)   device memory for the
    set_stream_config_opt(handle, ACL_RT_STREAM_WORK_SIZE, n, 8)       stream's task buffer
    stream = create_stream_v2(handle)    as create_stream_with_config(priority, flags)

The work buffer is the user's memory the real runtime keeps the stream's tasks in; an mdev
device queues tasks in its own process, so the buffer is checked and kept, not written.
"""

from __future__ import annotations

from dataclasses import dataclass

from mdev import constants as C
from mdev import errors as E
from mdev.errors import AclError
from mdev.runtime import streams
from mdev.runtime.boundary import api
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.core import lookup
from mdev.runtime.memtable import DEVICE
from mdev.runtime.validate import as_int, size


# this module's part of the runtime's state, made afresh with it (finalize, fork)
held = rt.family(
    stream_configs=dict,  # aclrtStreamConfigHandle
)

HANDLES = 0x5C_0000_0000
# aclrtStreamConfigAttr -> (field, valueSize of its C type)
_ATTRS = {C.ACL_RT_STREAM_WORK_ADDR_PTR: ("work_ptr", 8), C.ACL_RT_STREAM_WORK_SIZE: ("work_size", 8),
          C.ACL_RT_STREAM_FLAG: ("flag", 8), C.ACL_RT_STREAM_PRIORITY: ("priority", 4)}


@dataclass(eq=False)
class StreamConfig:
    handle: int
    work_ptr: int = 0
    work_size: int = 0
    flag: int = 0
    priority: int = 0
    destroyed: bool = False


def create_stream_config_handle() -> int:
    """A handle with the defaults (priority 0, no flags); a value, no ret."""
    return rt.keep(held.stream_configs, StreamConfig(rt.new_handle(HANDLES)))


def _config(handle) -> StreamConfig:
    return lookup(held.stream_configs, handle, "stream config handle", code=E.ACL_ERROR_INVALID_PARAM)


@api()
def destroy_stream_config_handle(handle) -> None:
    rt.forget(held.stream_configs, _config(handle))


@api()
def set_stream_config_opt(handle, attr: int, attr_value: int, value_size: int) -> None:
    config = _config(handle)
    attr = as_int(attr, "attr")
    if attr not in _ATTRS:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"unknown aclrtStreamConfigAttr {attr}")
    field, expected = _ATTRS[attr]
    if size(value_size, "valueSize") != expected:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"valueSize of attribute {attr} is {expected}, got {value_size}")
    value = size(attr_value, "attrValue")
    if attr == C.ACL_RT_STREAM_PRIORITY and value > streams.PRIORITY_LEAST:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"priority must be in [0, {streams.PRIORITY_LEAST}], got {value}")
    setattr(config, field, value)


@api(1)
def create_stream_v2(handle) -> int:
    """aclrtCreateStreamV2: a stream of the current context as the handle configures it."""
    config = _config(handle)
    if config.work_ptr or config.work_size:
        if not config.work_ptr or not config.work_size:
            raise AclError(E.ACL_ERROR_INVALID_PARAM, "a work buffer needs both WORK_ADDR_PTR and WORK_SIZE")
        buffer = rt.memory.operand(config.work_ptr, config.work_size, write=True, what="workPtr")
        if buffer.kind != DEVICE or buffer.device != rt.current_context().device:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "the work buffer must be device memory of the current device")
    return streams.create_stream_with_config(config.priority, config.flag)
