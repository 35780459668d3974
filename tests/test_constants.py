"""Spot checks of mdev.errors / mdev.constants (re-exported as acl.errors / acl.constants) against the API catalogue (§12.5, §13)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import mdev.constants as C
import mdev.errors as E
from mdev.errors import AclError, describe, error_name

# --------------------------------------------------------------------------------------
# error codes
# --------------------------------------------------------------------------------------
ERROR_SPOT_CHECKS = [
    ("ACL_SUCCESS", 0),
    ("ACL_ERROR_NONE", 0),
    ("ACL_RT_SUCCESS", 0),
    ("ACL_ERROR_INVALID_PARAM", 100000),
    ("ACL_ERROR_UNINITIALIZE", 100001),
    ("ACL_ERROR_REPEAT_INITIALIZE", 100002),
    ("ACL_ERROR_STREAM_NOT_SUBSCRIBE", 100034),
    ("ACL_ERROR_REPEAT_FINALIZE", 100037),
    ("ACL_ERROR_PROF_REPEAT_SUBSCRIBE", 148046),
    ("ACL_ERROR_INVALID_BUNDLE_MODEL_ID", 148053),
    ("ACL_ERROR_BAD_ALLOC", 200000),
    ("ACL_ERROR_FEATURE_UNSUPPORTED", 200006),
    ("ACL_ERROR_STORAGE_OVER_LIMIT", 300000),
    ("ACL_ERROR_INTERNAL_ERROR", 500000),
    ("ACL_ERROR_PROFILING_FAILURE", 500005),
    ("ACL_ERROR_RT_PARAM_INVALID", 107000),
    ("ACL_ERROR_RT_INVALID_DEVICEID", 107001),
    ("ACL_ERROR_RT_CONTEXT_NULL", 107002),
    ("ACL_ERROR_RT_STREAM_CONTEXT", 107003),
    ("ACL_ERROR_RT_STREAM_NO_CB_REG", 107015),
    ("ACL_ERROR_RT_DEVICE_TASK_ABORT", 107022),
    ("ACL_ERROR_STREAM_CAPTURE_CONFLICT", 107032),
    ("ACL_ERROR_RT_SYMBOL_NOT_FOUND", 107042),
    ("ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING", 107045),
    ("ACL_ERROR_RT_FEATURE_NOT_SUPPORT", 207000),
    ("ACL_ERROR_RT_MEMORY_ALLOCATION", 207001),
    ("ACL_ERROR_RT_DEVICE_OOM", 207018),
    ("ACL_ERROR_RT_LINK_TYPE_NOT_SUPPORTED", 207021),
    ("ACL_ERROR_RT_INTERNAL_ERROR", 507000),
    ("ACL_ERROR_RT_REPORT_TIMEOUT", 507012),
    ("ACL_ERROR_RT_AICORE_EXCEPTION", 507015),
    ("ACL_ERROR_RT_STREAM_SYNC_TIMEOUT", 507046),
    ("ACL_ERROR_RT_EVENT_SYNC_TIMEOUT", 507047),
    ("ACL_ERROR_RT_DRV_INTERNAL_ERROR", 507899),
    ("ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED", 507903),
    ("ACL_ERROR_RT_L3_PORT_ERROR", 507914),
    ("ACL_ERROR_RT_CCU_TIMEOUT", 507915),
    ("ACL_ERROR_RT_CCU_EXCEPTION", 507916),
]


@pytest.mark.parametrize(("name", "value"), ERROR_SPOT_CHECKS)
def test_error_code_values(name: str, value: int) -> None:
    assert getattr(E, name) == value
    assert name in E.__all__


def test_every_error_name_maps_back_to_global() -> None:
    for code, name in E.ERROR_NAMES.items():
        assert getattr(E, name) == code, name
        assert code in E.ERROR_TEXT
        assert E.ERROR_TEXT[code] and "\n" not in E.ERROR_TEXT[code]


def test_every_table_name_is_exported_and_has_canonical_name() -> None:
    for name, value, _text in E._CODES:
        assert getattr(E, name) == value
        assert value in E.ERROR_NAMES


def test_canonical_names_prefer_non_deprecated() -> None:
    assert error_name(0) == "ACL_SUCCESS"
    assert E.ERROR_NAMES[245002] == "ACL_ERROR_GE_DEVICE_MEMORY_OPERATE_FAILED"


def test_error_code_ranges() -> None:
    # Every runtime code sits in one of the documented bands.  ACL_ERROR_RT_FAILURE
    # (500003) only looks like one: it is an acl_base_rt.h code.
    rt = [
        c
        for c, n in E.ERROR_NAMES.items()
        if n.startswith("ACL_ERROR_RT_") and n != "ACL_ERROR_RT_FAILURE"
    ]
    assert len(rt) > 100
    assert all(107000 <= c < 108000 or 207000 <= c < 208000 or 507000 <= c < 508000 for c in rt)


def test_error_name_and_describe() -> None:
    assert error_name(107015) == "ACL_ERROR_RT_STREAM_NO_CB_REG"
    assert error_name(424242) == "UNKNOWN(424242)"
    assert describe(107000) == "ACL_ERROR_RT_PARAM_INVALID (107000): invalid argument"
    assert describe(424242).startswith("UNKNOWN(424242) (424242): ")


def test_acl_error_formatting() -> None:
    err = AclError(E.ACL_ERROR_RT_STREAM_NO_CB_REG, "no thread subscribed to stream 0x10")
    assert err.code == 107015
    assert err.message == "no thread subscribed to stream 0x10"
    assert str(err) == "ACL_ERROR_RT_STREAM_NO_CB_REG (107015): no thread subscribed to stream 0x10"
    # Without a message the table text is used.
    assert str(AclError(100000)) == "ACL_ERROR_INVALID_PARAM (100000): parameter check failed"
    assert str(AclError(424242)).startswith("UNKNOWN(424242) (424242): ")
    assert isinstance(err, Exception)


def test_acl_error_raises_and_pickles() -> None:
    with pytest.raises(AclError) as info:
        raise AclError(E.ACL_ERROR_RT_CONTEXT_NULL)
    assert info.value.code == 107002
    clone = pickle.loads(pickle.dumps(AclError(207001, "oom")))
    assert (clone.code, clone.message) == (207001, "oom")


# --------------------------------------------------------------------------------------
# constants
# --------------------------------------------------------------------------------------
CONSTANT_SPOT_CHECKS = [
    ("ACL_MAJOR_VERSION", 1),
    ("ACL_MINOR_VERSION", 17),
    ("ACL_PATCH_VERSION", 0),
    # event / stream flags
    ("ACL_EVENT_SYNC", 0x1),
    ("ACL_EVENT_CAPTURE_STREAM_PROGRESS", 0x2),
    ("ACL_EVENT_TIME_LINE", 0x8),
    ("ACL_EVENT_DEVICE_USE_ONLY", 0x10),
    ("ACL_EVENT_EXTERNAL", 0x20),
    ("ACL_EVENT_IPC", 0x40),
    ("ACL_EVENT_RECORD_EXTERNAL", 0x1),
    ("ACL_STREAM_FAST_LAUNCH", 0x1),
    ("ACL_STREAM_PERSISTENT", 0x4),
    ("ACL_STREAM_DEVICE_USE_ONLY", 0x20),
    ("ACL_STREAM_WAIT_VALUE_NOR", 0x3),
    ("ACL_CONTINUE_ON_FAILURE", 0x0),
    ("ACL_STOP_ON_FAILURE", 0x1),
    ("ACL_NOTIFY_DEVICE_USE_ONLY", 0x1),
    # IPC flags (notify uses 0x02, memory uses 0x1)
    ("ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION", 0x02),
    ("ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS", 0x02),
    ("ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION", 0x1),
    ("ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS", 0x1),
    ("ACL_RT_IPC_MEM_ATTR_ACCESS_LINK_UB_MULTI_PORT_PATH", 3),
    ("ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION", 0x1),
    ("ACL_HOST_REG_PINNED", 0x10000000),
    ("ACL_MODEL_STREAM_FLAG_HEAD", 0x0),
    ("ACL_MODEL_STREAM_FLAG_DEFAULT", 0x7FFFFFFF),
    ("ACL_IPC_EVENT_HANDLE_SIZE", 64),
    ("ACL_RT_DEVS_TOPOLOGY_HCCS", 0x01),
    ("ACL_RT_DEVS_TOPOLOGY_SIO", 0x20),
    ("ACL_RT_DEVS_TOPOLOGY_HCCS_SW", 0x40),
    ("ACL_RT_BINARY_MAGIC_ELF_AICORE", 0x43554245),
    ("ACL_RT_BINARY_MAGIC_ELF_VECTOR_CORE", 0x41415246),
    ("ACL_RT_BINARY_MAGIC_ELF_CUBE_CORE", 0x41494343),
    # status enums (recorded status is reversed)
    ("ACL_EVENT_STATUS_COMPLETE", 0),
    ("ACL_EVENT_STATUS_NOT_READY", 1),
    ("ACL_EVENT_RECORDED_STATUS_NOT_READY", 0),
    ("ACL_EVENT_RECORDED_STATUS_COMPLETE", 1),
    ("ACL_EVENT_WAIT_STATUS_RESERVED", 0xFFFF),
    ("ACL_STREAM_STATUS_COMPLETE", 0),
    ("ACL_STREAM_STATUS_NOT_READY", 1),
    ("ACL_STREAM_STATUS_RESERVED", 0xFFFF),
    ("ACL_DEVICE", 0),
    ("ACL_HOST", 1),
    ("ACL_CALLBACK_BLOCK", 1),
    # memcpy kinds 0..7
    ("ACL_MEMCPY_HOST_TO_HOST", 0),
    ("ACL_MEMCPY_HOST_TO_DEVICE", 1),
    ("ACL_MEMCPY_DEVICE_TO_HOST", 2),
    ("ACL_MEMCPY_DEVICE_TO_DEVICE", 3),
    ("ACL_MEMCPY_DEFAULT", 4),
    ("ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE", 5),
    ("ACL_MEMCPY_INNER_DEVICE_TO_DEVICE", 6),
    ("ACL_MEMCPY_INTER_DEVICE_TO_DEVICE", 7),
    # malloc policies
    ("ACL_MEM_MALLOC_HUGE_FIRST", 0),
    ("ACL_MEM_MALLOC_HUGE_ONLY", 1),
    ("ACL_MEM_MALLOC_NORMAL_ONLY", 2),
    ("ACL_MEM_MALLOC_HUGE_FIRST_P2P", 3),
    ("ACL_MEM_MALLOC_HUGE_ONLY_P2P", 4),
    ("ACL_MEM_MALLOC_NORMAL_ONLY_P2P", 5),
    ("ACL_MEM_MALLOC_HUGE1G_ONLY", 6),
    ("ACL_MEM_MALLOC_HUGE1G_ONLY_P2P", 7),
    ("ACL_MEM_TYPE_LOW_BAND_WIDTH", 0x0100),
    ("ACL_MEM_TYPE_HIGH_BAND_WIDTH", 0x1000),
    ("ACL_MEM_ACCESS_USER_SPACE_READONLY", 0x100000),
    # memory attributes / locations / VMM
    ("ACL_DDR_MEM", 0),
    ("ACL_HBM_MEM", 1),
    ("ACL_HBM_MEM_NORMAL", 5),
    ("ACL_MEM_P2P_HUGE1G", 17),
    ("ACL_MEM_LOCATION_TYPE_DEVICE", 1),
    ("ACL_MEM_LOCATION_TYPE_HOST_NUMA", 4),
    ("ACL_MEM_HANDLE_TYPE_POSIX", 2),
    ("ACL_MEM_SHARE_HANDLE_TYPE_FABRIC", 0x2),
    ("ACL_RT_MEM_ALLOC_GRANULARITY_UNDEF", 0xFFFF),
    ("ACL_RT_MEM_ACCESS_FLAGS_READWRITE", 0x3),
    ("ACL_HOST_REGISTER_IOMEMORY", 0x04),
    # device attributes
    ("ACL_DEV_ATTR_AICPU_CORE_NUM", 1),
    ("ACL_DEV_ATTR_AICORE_CORE_NUM", 101),
    ("ACL_DEV_ATTR_CUBE_CORE_NUM", 102),
    ("ACL_DEV_ATTR_VECTOR_CORE_NUM", 201),
    ("ACL_DEV_ATTR_UBUF_PER_VECTOR_CORE", 204),
    ("ACL_DEV_ATTR_LOCAL_MEM_PER_VECTOR_CORE", 204),
    ("ACL_DEV_ATTR_MAX_BLOCK_DIM_Z", 212),
    ("ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE", 301),
    ("ACL_DEV_ATTR_L2_CACHE_SIZE", 302),
    ("ACL_DEV_ATTR_SUPER_POD_DEVICE_ID", 403),
    ("ACL_DEV_ATTR_SUPER_POD_DEVIDE_ID", 403),
    ("ACL_DEV_ATTR_DEVICE_FORM_FACTOR", 409),
    ("ACL_DEV_ATTR_IS_VIRTUAL", 501),
    ("ACL_DEV_ATTR_NPU_ARCH", 601),
    ("ACL_DEVICE_FORM_FACTOR_PCIE_CARD", 3),
    ("ACL_HOST_DEVICE_CONNECT_TYPE_UB", 2),
    ("ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV", 21),
    # streams, kernels, capture, misc enums
    ("ACL_STREAM_ATTR_FAILURE_MODE", 1),
    ("ACL_STREAM_ATTR_PRIORITY", 5),
    ("ACL_RT_STREAM_PRIORITY", 3),
    ("ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE", 2),
    ("ACL_RT_LAUNCH_KERNEL_ATTR_ENABLE_PROFILING", 9),
    ("ACL_RT_BINARY_LOAD_OPT_MAGIC", 2),
    ("ACL_KERNEL_TYPE_AICPU", 100),
    ("ACL_MODEL_RI_CAPTURE_MODE_RELAXED", 2),
    ("ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED", 2),
    ("ACL_MODEL_RI_TASK_VALUE_WAIT", 6),
    ("ACL_MODEL_RI_COND_HANDLE_ASSIGN_DEFAULT", 1),
    ("ACL_RT_CNT_NOTIFY_RECORD_BIT_AND_MODE", 4),
    ("ACL_RT_CNT_NOTIFY_WAIT_EQUAL_WITH_BITMASK_MODE", 4),
    ("ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM", 10),
    ("ACL_RT_DEV_LIMIT_SIMT_PRINTF_FIFO_SIZE", 4),
    ("ACL_RT_ERROR_OTHERS", 0xFFFF),
    ("ACL_RT_DEVICE_STATUS_END", 0xFFFF),
    ("ACL_RT_THREAD_LEVEL", 0),
    ("ACL_OPT_ENABLE_KERNEL_EARLY_START", 3),
    ("ACL_REG_TYPE_OTHER", 0xFFFF),
    ("ACL_PKG_NAME_DRIVER", 7),
    # aclDataType
    ("ACL_DT_UNDEFINED", -1),
    ("ACL_FLOAT", 0),
    ("ACL_FLOAT16", 1),
    ("ACL_INT8", 2),
    ("ACL_INT32", 3),
    ("ACL_UINT8", 4),
    ("ACL_INT16", 6),
    ("ACL_UINT16", 7),
    ("ACL_UINT32", 8),
    ("ACL_INT64", 9),
    ("ACL_UINT64", 10),
    ("ACL_DOUBLE", 11),
    ("ACL_BOOL", 12),
    ("ACL_STRING", 13),
    ("ACL_BF16", 27),
]


@pytest.mark.parametrize(("name", "value"), CONSTANT_SPOT_CHECKS)
def test_constant_values(name: str, value: int) -> None:
    assert getattr(C, name) == value
    assert name in C.__all__


def test_constants_are_plain_ints() -> None:
    for name in C.__all__:
        value = getattr(C, name)
        if name.endswith("_TO_NUMPY"):
            assert isinstance(value, dict)
        else:
            assert type(value) is int, name


def test_acl_dtype_to_numpy() -> None:
    expected = {
        C.ACL_FLOAT16: np.float16,
        C.ACL_FLOAT: np.float32,
        C.ACL_DOUBLE: np.float64,
        C.ACL_INT8: np.int8,
        C.ACL_INT16: np.int16,
        C.ACL_INT32: np.int32,
        C.ACL_INT64: np.int64,
        C.ACL_UINT8: np.uint8,
        C.ACL_UINT16: np.uint16,
        C.ACL_UINT32: np.uint32,
        C.ACL_UINT64: np.uint64,
        C.ACL_BOOL: np.bool_,
    }
    for acl_type, np_type in expected.items():
        assert np.dtype(C.ACL_DTYPE_TO_NUMPY[acl_type]) == np.dtype(np_type)
    assert C.ACL_DTYPE_TO_NUMPY[C.ACL_BF16] is None
    # every mapped name is a real numpy dtype
    for name in C.ACL_DTYPE_TO_NUMPY.values():
        if name is not None:
            np.dtype(name)


def test_npy_type_numbers_match_numpy() -> None:
    # Map every numpy scalar type to its C type number, then compare dtypes: NPY_LONG (7)
    # and NPY_LONGLONG (9) are distinct numbers but both int64 on Linux.
    by_num = {np.dtype(t).num: np.dtype(t) for t in set(np.sctypeDict.values())}
    for num, name in C.NPY_TYPE_TO_NUMPY.items():
        assert by_num[num] == np.dtype(name), (num, name)
    # and the directly named ones (pyACL docs: 5 = int32, 11 = float32, 23 = float16)
    assert np.dtype("int32").num == 5
    assert np.dtype("float32").num == 11
    assert np.dtype("float16").num == 23
    assert np.dtype(np.longlong).num == 9
    assert np.dtype(np.ulonglong).num == 10


def test_pyacl_modules_re_export_the_ground_floor() -> None:
    """Programs find the codes where pyACL has them: acl.errors, acl.constants and acl itself."""
    import mdev.acl as acl
    import mdev.acl.constants as acl_constants
    import mdev.acl.errors as acl_errors
    for name in E.__all__:
        assert getattr(acl_errors, name) is getattr(E, name)
    for name in C.__all__:
        assert getattr(acl_constants, name) == getattr(C, name)
        assert getattr(acl, name) == getattr(C, name)
