"""What a device reports about itself: status, utilisation, features, UUID, id mapping,
error details, and the process-wide device limits.

    query_device_status, get_error_verbose    the device's control page (alive / faulted)
    get_device_utilization_rate               the device process's engines, right now
    get_device_capability, device_get_uuid    the board's topology
    check_arch_compatibility                  the SoC's NPU architecture (mdev.runtime.devices.sysinfo)
    get_*_dev_id_by_*_dev_id                  user = logic = physical ids (mdev has no
                                              ASCEND_RT_VISIBLE_DEVICES and no containers)
    device_set_limit / device_get_limit       this process's values, used by the next
                                              set_device that creates a device's resources
"""

from __future__ import annotations

import uuid

from mdev import constants as C
from mdev import errors as E
from mdev.errors import AclError
from mdev import status as S
from mdev.runtime.devices import sysinfo
from mdev.runtime.boundary import api
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.validate import as_int, as_list, size


# this module's part of the runtime's state, made afresh with it (finalize, fork)
held = rt.family(
    device_limit_values=dict,  # aclrtDeviceSetLimit / aclInit values
)


def _alive(device: int) -> bool:
    try:
        link = rt.link(device)
    except AclError:
        return False           # its control page is gone: the device is being restarted
    return link.control.state == S.STATE_ALIVE and not link.dead()


@api(1)
def query_device_status(device_id: int) -> int:
    return C.ACL_RT_DEVICE_STATUS_NORMAL if _alive(rt.check_device(device_id)) else C.ACL_RT_DEVICE_STATUS_ABNORMAL


@api(1, failed=None)
def get_device_utilization_rate(device_id: int) -> dict:
    """Cube / vector occupancy in percent at the moment of the call: the share of the device's
    cores running kernel blocks (of every process).  No AI CPU tasks run on an mdev device
    (0); memory utilisation is not supported by the real runtime either (-1)."""
    device = rt.check_device(device_id)
    spec = rt.attach().topology.device(device)
    busy = rt.link(device).request("stats")["engines"]

    def percent(engine: str, cores: int) -> int:
        return round(100 * busy.get(engine, 0) / cores) if cores else -1

    return {"cube_utilization": percent("aic", spec.cube), "vector_utilization": percent("aiv", spec.vector),
            "aicpu_utilization": 0, "memory_utilization": -1, "utilization_extend": 0}


# aclrtDevFeatureType -> supported on an mdev device: task groups of captured kernels can be
# updated (aclmdlRICaptureTaskUpdate*); there are no shared memory queues
_FEATURES = {C.ACL_FEATURE_TSCPU_TASK_UPDATE_SUPPORT_AIC_AIV: True, C.ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV: False}


@api(1)
def get_device_capability(device_id: int, dev_feature_type: int) -> int:
    rt.check_device(device_id)
    feature = as_int(dev_feature_type, "devFeatureType")
    if feature not in _FEATURES:
        raise AclError(E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, f"feature type {feature} is not an aclrtDevFeatureType "
                       f"this device reports")
    return C.ACL_DEV_FEATURE_SUPPORT if _FEATURES[feature] else C.ACL_DEV_FEATURE_NOT_SUPPORT


@api(1)
def check_arch_compatibility(soc_version: str) -> int:
    """aclrtCheckArchCompatibility: 1 if code built for ``soc_version`` runs on this board's
    SoC (the same NPU architecture), else 0; an unknown SoC name is 107000."""
    if not isinstance(soc_version, str) or not soc_version:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "socVersion must be a non-empty str")
    if soc_version not in sysinfo.NPU_ARCH:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"SoC version {soc_version} is invalid")
    return int(sysinfo.NPU_ARCH[soc_version] == sysinfo.NPU_ARCH.get(sysinfo.soc()))


@api(1, failed=None)
def device_get_uuid(device_id: int) -> dict:
    """16 bytes, stable for a device of a board (the same across restarts of its process)."""
    device = rt.check_device(device_id)
    value = uuid.uuid5(uuid.NAMESPACE_URL, f"mdev://{rt.attach().paths.name}/{device}")
    return {"bytes": list(value.bytes)}


def _id_mapping(name: str):
    """aclrtGet<To>DevIdBy<From>DevId: every id space is the same for an mdev process (the ids
    of its node's devices, 0 .. count-1), so each mapping checks the id and returns it."""
    def mapping(dev_id: int) -> int:
        rt.check_device(as_int(dev_id, "deviceId"))
        return dev_id
    mapping.__name__ = mapping.__qualname__ = name
    return api(1)(mapping)          # registered under its name


for _name in ("get_logic_dev_id_by_user_dev_id", "get_user_dev_id_by_logic_dev_id", "get_logic_dev_id_by_phy_dev_id",
              "get_phy_dev_id_by_logic_dev_id", "get_user_dev_id_by_phy_dev_id", "get_phy_dev_id_by_user_dev_id"):
    globals()[_name] = _id_mapping(_name)
del _name


@api(1, failed=None)
def get_error_verbose(device_id: int) -> dict:
    """aclrtGetErrorVerbose: the device's fault, as aclrtErrorInfo with snake_case keys.  An
    mdev device has no memory (UCE) or link faults to detail; a device whose process died
    reports ACL_RT_ERROR_OTHERS."""
    device = rt.check_device(device_id)
    kind = C.ACL_RT_NO_ERROR if _alive(device) else C.ACL_RT_ERROR_OTHERS
    return {"error_type": kind, "try_repair": 0, "has_detail": 0,
            "detail": {"aicore_err_type": C.ACL_RT_AICORE_ERROR_UNKNOWN, "uce_info": []}}


@api(1)
def get_mem_uce_info(device_id: int, array_size: int) -> list:
    """Uncorrectable HBM errors of a device: none on an emulated device (its HBM is RAM)."""
    rt.check_device(device_id)
    size(array_size, "arraySize")
    return []


@api()
def mem_uce_repair(device_id: int, mem_uce_info_array) -> None:
    rt.check_device(device_id)
    entries = as_list(mem_uce_info_array, "memUceInfoArray")
    if entries:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"device {device_id} reported no UCE errors: "
                       f"there is nothing to repair at {entries[0]!r}")


# ---------------------------------------------------------------------------- limits
KiB = 1 << 10
# aclrtDeviceLimit -> (default, lowest, highest, grain) on the A2/A3 parts mdev emulates;
# the SIMT limits exist only on Ascend 950
_LIMITS = {
    C.ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE: (32 * KiB, 0, 192 * KiB, 16 * KiB),
    C.ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE: (32 * KiB, 1 * KiB, 64 << 20, 8),
}
_SIMT = (C.ACL_RT_DEV_LIMIT_SIMT_STACK_SIZE, C.ACL_RT_DEV_LIMIT_SIMT_DVG_WARP_STACK_SIZE,
         C.ACL_RT_DEV_LIMIT_SIMT_PRINTF_FIFO_SIZE)


def _limit(limit) -> int:
    limit = as_int(limit, "limit")
    if limit in _SIMT:
        raise AclError(E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, f"device limit {limit} (SIMT) exists only on Ascend 950")
    if limit not in _LIMITS:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"limit {limit} is not an aclrtDeviceLimit (expected [0, 4])")
    return limit


@api()
def device_set_limit(limit: int, value: int) -> None:
    """Process-wide; a device's resources take it at the next set_device that creates them."""
    limit, value = _limit(limit), size(value, "value")
    if value > 0xFFFFFFFF:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"value {value} exceeds UINT32_MAX")
    _, low, high, _ = _LIMITS[limit]
    if not low <= value <= high:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"value {value} of device limit {limit} is outside [{low}, {high}]")
    with rt.lock:
        held.device_limit_values[limit] = value


@api(1)
def device_get_limit(limit: int) -> int:
    """The value last set (by device_set_limit or aclInit's config), even if not in force yet."""
    limit = _limit(limit)
    return held.device_limit_values.get(limit, _LIMITS[limit][0])


def effective_limit(limit: int) -> int:
    """What a device's resources take now: the set value rounded up to the limit's grain
    (a stack of 32 KiB or less counts as 32 KiB)."""
    default, _, _, grain = _LIMITS[limit]
    value = held.device_limit_values.get(limit, default)
    if limit == C.ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE:
        value = max(value, default)
    return -(-value // grain) * grain
