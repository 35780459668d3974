"""The emulated CANN installation: package versions, CANN attributes, SoC facts, type sizes.

    aclsysGetVersionStr / Num, aclsysGetCANNVersion   PACKAGES (what share/info/*/version.info
                                                      would hold on a real install)
    aclGetCannAttributeList / aclGetCannAttribute     CANN_ATTRIBUTES x the board's SoC
    aclrtCheckArchCompatibility                       NPU_ARCH (the runtime's platform files;
                                                      the call itself is in device_state)
    aclGetDeviceCapability                            the board's topology
    aclDataTypeSize                                   element sizes of aclDataType

Nothing here needs a device process: a program may ask these before any set_device (the
SoC facts need the board, which they attach to).
"""

from __future__ import annotations

import re

from mdev import constants as C
from mdev import errors as E
from mdev.errors import AclError
from mdev.runtime.boundary import api
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.validate import as_int

# The packages an mdev "install" holds and their versions: the runtime of hicann/runtime at
# the commit mdev follows reports 9.1.0 (its runtime_compatibility sample prints it).
PACKAGES = {"cann": "9.1.0", "runtime": "9.1.0", "driver": "25.5.0"}
_PACKAGE_NAMES = {C.ACL_PKG_NAME_CANN: "cann", C.ACL_PKG_NAME_RUNTIME: "runtime", C.ACL_PKG_NAME_COMPILER: "compiler",
                  C.ACL_PKG_NAME_HCCL: "hccl", C.ACL_PKG_NAME_TOOLKIT: "toolkit", C.ACL_PKG_NAME_OPP: "opp",
                  C.ACL_PKG_NAME_OPP_KERNEL: "opp_kernel", C.ACL_PKG_NAME_DRIVER: "driver"}

# NpuArch of every SoC the runtime's platform files describe (src/platform/platform_config)
NPU_ARCH = {
    **dict.fromkeys(("Ascend910A", "Ascend910B", "Ascend910PremiumA", "Ascend910ProA", "Ascend910ProB"), 1001),
    **dict.fromkeys(("Ascend910B1", "Ascend910B2", "Ascend910B2C", "Ascend910B3", "Ascend910B4", "Ascend910B4-1",
                     "Ascend910_9362", "Ascend910_9363", "Ascend910_9372", "Ascend910_9381", "Ascend910_9382",
                     "Ascend910_9391", "Ascend910_9392"), 2201),
    **dict.fromkeys(("Ascend310P1", "Ascend310P3", "Ascend310P5", "Ascend310P7"), 2002),
    **dict.fromkeys(("Ascend310B1", "Ascend310B2", "Ascend310B3", "Ascend310B4"), 3002),
    "Ascend031": 3004,
    **dict.fromkeys(("Ascend035", "Ascend035A", "Ascend035B"), 3505),
}

# aclCannAttr -> whether the installation has it on a SoC.  INF_NAN and BF16 follow the
# SoC's platform file (support_inf_nan / support_bf16: the A2/A3 parts); JIT_COMPILE needs
# an operator compiler, which mdev does not emulate.
CANN_ATTRIBUTES = {
    C.ACL_CANN_ATTR_INF_NAN: lambda soc: NPU_ARCH.get(soc) == 2201,
    C.ACL_CANN_ATTR_BF16: lambda soc: NPU_ARCH.get(soc) == 2201,
    C.ACL_CANN_ATTR_JIT_COMPILE: lambda soc: False,
}

_SIZES = {
    **dict.fromkeys((C.ACL_STRING, C.ACL_DT_UNDEFINED), 0),
    **dict.fromkeys((C.ACL_UINT1, C.ACL_INT4, C.ACL_BOOL, C.ACL_INT8, C.ACL_UINT8, C.ACL_HIFLOAT8,
                     C.ACL_FLOAT8_E5M2, C.ACL_FLOAT8_E4M3FN, C.ACL_FLOAT8_E8M0), 1),
    **dict.fromkeys((C.ACL_FLOAT16, C.ACL_INT16, C.ACL_UINT16, C.ACL_BF16), 2),
    **dict.fromkeys((C.ACL_FLOAT, C.ACL_INT32, C.ACL_UINT32, C.ACL_COMPLEX32), 4),
    C.ACL_COMPLEX128: 16,
}
WEIGHT_MAJOR, WEIGHT_MINOR, WEIGHT_PATCH = 10_000_000, 100_000, 1_000
_PRERELEASE = (("alpha", 300), ("beta", 200), ("rc", 100))


def data_type_size(data_type: int) -> int:
    """aclDataTypeSize: bytes per element (0 for ACL_STRING / undefined; like the runtime's
    switch, any other value counts as an 8-byte type).  Returns a value, not an aclError, so
    a non-int is a TypeError, as pyACL's argument parser raises."""
    if not isinstance(data_type, int) or isinstance(data_type, bool):
        raise TypeError(f"dataType must be an int, got {type(data_type).__name__}")
    return _SIZES.get(data_type, 8)


def _package(pkg_name) -> str:
    if not isinstance(pkg_name, str) or not pkg_name:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "pkgName must be a non-empty str")
    for name in (pkg_name, pkg_name.replace("-", "_"), pkg_name.replace("_", "-")):
        if name in PACKAGES:
            return PACKAGES[name]
    raise AclError(E.ACL_ERROR_INVALID_FILE, f"package {pkg_name!r} is not installed (mdev's emulated CANN "
                   f"install has {', '.join(sorted(PACKAGES))})")


def version_number(version: str) -> int:
    """The runtime's CalculateVersionNum: X.Y.Z -> X*10^7 + Y*10^5 + Z*10^3, minus 300 / 200
    / 100 for alpha / beta / rc pre-releases, plus their number (``8.5.0-rc2`` -> 80499902...)."""
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    if m is None:
        raise AclError(E.ACL_ERROR_INTERNAL_ERROR, f"version {version!r} is not MAJOR.MINOR.PATCH")
    base = int(m[1]) * WEIGHT_MAJOR + int(m[2]) * WEIGHT_MINOR + int(m[3]) * WEIGHT_PATCH
    suffix = version[m.end():]
    if not suffix:
        return base
    lowered = suffix.lower()
    for keyword, weight in _PRERELEASE:
        at = lowered.find(keyword)
        if at in (0, 1):          # at most one separator before the keyword
            number = suffix[at + len(keyword):]
            if number and not re.fullmatch(r"[.-]?\d+", number):
                break
            return base - weight + (int(number.lstrip(".-")) if number else 0)
    raise AclError(E.ACL_ERROR_INTERNAL_ERROR, f"version {version!r} has an unknown suffix {suffix!r}")


@api(1, failed="")
def get_version_str(pkg_name: str) -> str:
    """aclsysGetVersionStr (``acl.get_version_str``)."""
    return _package(pkg_name)


@api(1)
def get_version_num(pkg_name: str) -> int:
    """aclsysGetVersionNum (an mdev extension in pyACL terms)."""
    return version_number(_package(pkg_name))


@api(1, failed=None)
def get_cann_version(name: int) -> dict:
    """aclsysGetCANNVersion: the aclCANNPackageVersion struct as a dict (pyACL's keys)."""
    name = as_int(name, "name")
    if name not in _PACKAGE_NAMES:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{name} is not an aclCANNPackageName")
    version = PACKAGES.get(_PACKAGE_NAMES[name])
    if version is None:
        raise AclError(E.ACL_ERROR_INVALID_FILE, f"package {_PACKAGE_NAMES[name]!r} is not installed")
    parts = (version.split(".") + ["0"] * 4)[:4]
    return {"version": version, "major_version": parts[0], "minor_version": parts[1],
            "release_version": parts[2], "patch_version": parts[3], "reserved": ""}


def soc() -> str:
    """The SoC of the calling thread's device (device 0 before any is set)."""
    ctx = rt.thread.context
    device = ctx.device if ctx is not None and not ctx.destroyed else rt.check_device(0)
    return rt.attach().topology.device(device).soc_name


@api(2)
def get_cann_attribute_list() -> tuple[list[int], int]:
    attrs = list(CANN_ATTRIBUTES)
    return attrs, len(attrs)


@api(1)
def get_cann_attribute(cann_attr: int) -> int:
    available = CANN_ATTRIBUTES.get(as_int(cann_attr, "cannAttr"))
    if available is None:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{cann_attr} is not an aclCannAttr")
    return int(available(soc()))


_DEVICE_INFO = {C.ACL_DEVICE_INFO_AI_CORE_NUM: "aicore", C.ACL_DEVICE_INFO_VECTOR_CORE_NUM: "vector",
                C.ACL_DEVICE_INFO_L2_SIZE: "l2_bytes"}


@api(1)
def get_device_capability(device_id: int, device_info: int) -> int:
    """aclGetDeviceCapability (``acl.get_device_capability``): AI Core / Vector Core count or
    L2 size of a device.  The ACL layer checks the id itself: out of range is 100000."""
    device, info = as_int(device_id, "deviceId"), as_int(device_info, "deviceInfo")
    if not 0 <= device < rt.device_count():
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"deviceId {device} greater than deviceNum {rt.device_count()}")
    if info not in _DEVICE_INFO:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{info} is not an aclDeviceInfo")
    return int(getattr(rt.attach().topology.device(rt.check_device(device)), _DEVICE_INFO[info]))
