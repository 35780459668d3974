"""pyACL-shaped API of the mdev emulator: ``import mdev.acl as acl``.

    acl.init / acl.finalize             process initialisation (aclInit / aclFinalize)
    acl.rt.*                            runtime: devices, contexts, streams, memory, ...
    acl.util.*                          host buffers <-> pointers, numpy views
    acl.mdl, acl.media, acl.op, ...      pyACL's other submodules (see unsupported)
    acl.get_recent_err_msg()            what went wrong, in words

Every function returns what pyACL returns: outputs first, the aclError ``ret`` last.
The constants (``ACL_MEMCPY_HOST_TO_DEVICE``, ...) and error codes (``ACL_SUCCESS``,
``ACL_ERROR_RT_PARAM_INVALID``, ...) are importable from here too, with their real values.
"""

from __future__ import annotations

import sys

import numpy as np

from mdev import sanitizer as _sanitizer  # noqa: F401  (MDEV_SANITIZE turns it on at attach / init)
from mdev.acl import constants, errors, mdl, media, prof, rt, unsupported, util
from mdev.runtime import boundary, registry
from mdev.constants import *  # noqa: F401,F403  (pyACL programs use these names)
from mdev.errors import *  # noqa: F401,F403
from mdev.runtime import applog as _applog
from mdev.runtime.devices import devices as _devices
from mdev.runtime.devices import sysinfo as _sysinfo

# init, finalize, finalize_reference; versions, CANN attributes, get_device_capability
globals().update(registry.bound("acl"))
data_type_size = _sysinfo.data_type_size          # a value, no ret (as in pyACL)


get_recent_err_msg = boundary.recent_messages


def get_soc_name() -> str | None:
    """SoC name of device 0 (None when no board can be reached)."""
    name, ret = boundary.bind(_devices.get_soc_name, 1, None)()
    return name if ret == 0 else None


def get_version() -> tuple[int, int, int, int]:
    return constants.ACL_MAJOR_VERSION, constants.ACL_MINOR_VERSION, constants.ACL_PATCH_VERSION, 0


def float16_to_float(value: int) -> float:
    """aclFloat16ToFloat: the float of an IEEE half given by its 16-bit pattern.  Returns a
    value, not an aclError: a non-int is a TypeError, as pyACL's argument parser raises."""
    if not isinstance(value, int):
        raise TypeError(f"float16_to_float takes an int (a 16-bit pattern), got {type(value).__name__}")
    return float(np.array(value & 0xFFFF, dtype=np.uint16).view(np.float16))


def float_to_float16(value: float) -> int:
    """aclFloatToFloat16: the 16-bit pattern of ``value`` as an IEEE half (a non-number is a
    TypeError, as above)."""
    if not isinstance(value, (int, float)):
        raise TypeError(f"float_to_float16 takes a float, got {type(value).__name__}")
    if isinstance(value, int) and not -2**1023 < value < 2**1023:
        value = float("inf") if value > 0 else float("-inf")     # no double holds it: +-inf, as in C
    with np.errstate(over="ignore"):      # out of range is +-inf, as in C
        return int(np.array(value, dtype=np.float16).view(np.uint16))


def app_log(level: int, message: str) -> None:
    """aclAppLog (ACL_APP_LOG): ``message`` at ``level`` (ACL_DEBUG .. ACL_ERROR) in this
    process's CANN log (see mdev.runtime.applog for where), tagged with the caller's file,
    line and function."""
    if not isinstance(level, int) or not isinstance(message, str):
        raise TypeError("acl.app_log takes (int level, str message)")
    caller = sys._getframe(1)
    _applog.record(level, message, caller.f_code.co_name, caller.f_code.co_filename, caller.f_lineno)


def __getattr__(name: str):
    """pyACL names mdev does not emulate resolve to stubs (and acl.media, acl.op, ... to stub
    modules); anything else is an AttributeError, so a typo fails where it is made."""
    return unsupported.resolve("", name)
