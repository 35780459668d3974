"""HCCL's types as numbers: ``HcclResult``, ``HcclDataType``, ``HcclReduceOp``, ``HcclSendRecvType``.

Values are HCCL's own: the enums of ``hccl_types.h`` as published in the HCCL data-type
reference (``hicann/hcomm`` docs, ``comm_mgr_c/data_type_definition``; ``hicann/hccl``'s
``include/hccl.h`` includes that header).  Descriptions are short English paraphrases of
the header comments.  Like mdev.errors for aclError, this is the ground floor: collectives
in mdev.runtime raise :class:`HcclError` with these codes, and the API boundary turns it
(and an AclError from the runtime, through ``from_acl``) into the HcclResult a face returns.
"""

from __future__ import annotations

from mdev import errors as E

# (name, value, description) of HcclResult
_RESULTS: tuple[tuple[str, int, str], ...] = (
    ("HCCL_SUCCESS", 0, "success"),
    ("HCCL_E_PARA", 1, "parameter error"),
    ("HCCL_E_PTR", 2, "empty pointer"),
    ("HCCL_E_MEMORY", 3, "memory error"),
    ("HCCL_E_INTERNAL", 4, "internal error"),
    ("HCCL_E_NOT_SUPPORT", 5, "feature not supported"),
    ("HCCL_E_NOT_FOUND", 6, "resource not found"),
    ("HCCL_E_UNAVAIL", 7, "resource unavailable"),
    ("HCCL_E_SYSCALL", 8, "system call failed"),
    ("HCCL_E_TIMEOUT", 9, "timeout"),
    ("HCCL_E_OPEN_FILE_FAILURE", 10, "cannot open file"),
    ("HCCL_E_TCP_CONNECT", 11, "TCP connect failed"),
    ("HCCL_E_ROCE_CONNECT", 12, "RoCE connect failed"),
    ("HCCL_E_TCP_TRANSFER", 13, "TCP transfer failed"),
    ("HCCL_E_ROCE_TRANSFER", 14, "RoCE transfer failed"),
    ("HCCL_E_RUNTIME", 15, "runtime API call failed"),
    ("HCCL_E_DRV", 16, "driver API call failed"),
    ("HCCL_E_PROFILING", 17, "profiling API call failed"),
    ("HCCL_E_CCE", 18, "CCE API call failed"),
    ("HCCL_E_NETWORK", 19, "network API call failed"),
    ("HCCL_E_AGAIN", 20, "try again"),
    ("HCCL_E_REMOTE", 21, "remote error (error CQE)"),
    ("HCCL_E_SUSPENDING", 22, "communicator suspending"),
    ("HCCL_E_OPRETRY_FAIL", 23, "operation retry failed"),
    ("HCCL_E_OOM", 24, "out of memory"),
    ("HCCL_E_IN_STATUS", 1041, "the error information is in the status"),
)
RESULT_NAMES: dict[int, str] = {value: name for name, value, _ in _RESULTS}
RESULT_TEXT: dict[int, str] = {value: text for _, value, text in _RESULTS}

# HcclDataType: (name, value, numpy dtype name or None when no reduce task can add it)
_DATA_TYPES: tuple[tuple[str, int, str | None], ...] = (
    ("HCCL_DATA_TYPE_INT8", 0, "int8"),
    ("HCCL_DATA_TYPE_INT16", 1, "int16"),
    ("HCCL_DATA_TYPE_INT32", 2, "int32"),
    ("HCCL_DATA_TYPE_FP16", 3, "float16"),
    ("HCCL_DATA_TYPE_FP32", 4, "float32"),
    ("HCCL_DATA_TYPE_INT64", 5, "int64"),
    ("HCCL_DATA_TYPE_UINT64", 6, "uint64"),
    ("HCCL_DATA_TYPE_UINT8", 7, "uint8"),
    ("HCCL_DATA_TYPE_UINT16", 8, "uint16"),
    ("HCCL_DATA_TYPE_UINT32", 9, "uint32"),
    ("HCCL_DATA_TYPE_FP64", 10, "float64"),
    ("HCCL_DATA_TYPE_BFP16", 11, "bfloat16"),       # stored as 16-bit patterns
    ("HCCL_DATA_TYPE_INT128", 12, None),
    ("HCCL_DATA_TYPE_HIF8", 14, None),
    ("HCCL_DATA_TYPE_FP8E4M3", 15, None),
    ("HCCL_DATA_TYPE_FP8E5M2", 16, None),
    ("HCCL_DATA_TYPE_FP8E8M0", 17, None),
    ("HCCL_DATA_TYPE_MXFP8", 18, None),              # the data-type reference's; not in hcomm's header
)
DATA_TYPE_NAMES: dict[int, str] = {value: name for name, value, _ in _DATA_TYPES}
DATA_TYPE_NUMPY: dict[int, str | None] = {value: np_name for _, value, np_name in _DATA_TYPES}
DATA_TYPE_SIZE: dict[int, int] = {0: 1, 1: 2, 2: 4, 3: 2, 4: 4, 5: 8, 6: 8, 7: 1, 8: 2, 9: 4, 10: 8, 11: 2,
                                  12: 16, 14: 1, 15: 1, 16: 1, 17: 1, 18: 1}

_REDUCE_OPS = (("HCCL_REDUCE_SUM", 0), ("HCCL_REDUCE_PROD", 1), ("HCCL_REDUCE_MAX", 2), ("HCCL_REDUCE_MIN", 3))
REDUCE_OP_NAMES: dict[int, str] = {value: name for name, value in _REDUCE_OPS}

# the enums' end markers (hccl_types.h): no operation, data type or result has these values
_RESERVED = (("HCCL_E_RESERVED", 1042), ("HCCL_REDUCE_RESERVED", 255), ("HCCL_DATA_TYPE_RESERVED", 255),
             ("HCCL_SEND_RECV_RESERVED", 2))

_SEND_RECV = (("HCCL_SEND", 0), ("HCCL_RECV", 1))

# HcclConfig (HcclSetConfig / HcclGetConfig), HcclCommConfigCapability (fields of HcclCommConfig)
_CONFIGS = (("HCCL_DETERMINISTIC", 0), ("HCCL_CONFIG_RESERVED", 1))
_CAPABILITIES = (("HCCL_COMM_CONFIG_BUFFER_SIZE", 0), ("HCCL_COMM_CONFIG_DETERMINISTIC", 1),
                 ("HCCL_COMM_CONFIG_COMM_NAME", 2), ("HCCL_COMM_CONFIG_OP_EXPANSION_MODE", 3),
                 ("HCCL_COMM_CONFIG_SUPPORT_INIT_BY_ENV", 4), ("HCCL_COMM_CONFIG_WORLD_RANKID", 5),
                 ("HCCL_COMM_CONFIG_JOBID", 6), ("HCCL_COMM_CONFIG_ACLGRAPH_ZEROCOPY_ENABLE", 7),
                 ("HCCL_COMM_CONFIG_EXEC_TIMEOUT", 8), ("HCCL_COMM_CONFIG_ALGO", 9), ("HCCL_COMM_CONFIG_RETRY", 10),
                 ("HCCL_COMM_CONFIG_BUFFER_NAME", 11), ("HCCL_COMM_CONFIG_RESERVED", 12))
# HcclCommConfig: sizes of its text fields, its header, the "not set" values HcclCommConfigInit writes
_COMM_CONFIG = (("COMM_NAME_MAX_LENGTH", 128), ("BUFFER_NAME_MAX_LENGTH", 128), ("UDI_MAX_LENGTH", 128),
                ("HCCL_COMM_ALGO_MAX_LENGTH", 1600), ("HCCL_COMM_RETRY_ENABLE_MAX_LENGTH", 50),
                ("HCCL_COMM_RETRY_PARAMS_MAX_LENGTH", 128), ("HCCL_COMM_CONFIG_INFO_BYTES", 24),
                ("HCCL_COMM_CONFIG_MAGIC_WORD", 0xF0F0F0F0), ("HCCL_COMM_CONFIG_VERSION", 10),
                ("HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET", 0xFFFFFFFF), ("HCCL_COMM_DEFAULT_DETERMINISTIC", 0),
                ("HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET", 0xFFFFFFFF), ("HCCL_COMM_DEFAULT_OP_EXPANSION_MODE", 0),
                ("HCCL_COMM_TRAFFIC_CLASS_CONFIG_NOT_SET", 0xFFFFFFFF),
                ("HCCL_COMM_SERVICE_LEVEL_CONFIG_NOT_SET", 0xFFFFFFFF), ("HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET", -1),
                ("HCCL_COMM_QOS_CONFIG_NOT_SET", 0xFFFFFFFF), ("HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE", 16))

HCCL_ROOT_INFO_BYTES = 4108               # the HcclRootInfo blob
HCCL_COMM_DEFAULT_BUFFSIZE = 200          # MB, the HCCL_BUFFSIZE default
HCCL_CONNECT_TIMEOUT_DEFAULT = 120        # s (hccl_env/HCCL_CONNECT_TIMEOUT.md)
HCCL_EXEC_TIMEOUT_DEFAULT = 1836          # s (hccl_env/HCCL_EXEC_TIMEOUT.md)

globals().update({name: value for name, value, _ in _RESULTS})
globals().update({name: value for name, value, _ in _DATA_TYPES})
globals().update(dict(_REDUCE_OPS))
globals().update(dict(_SEND_RECV))
globals().update(dict(_RESERVED))
globals().update(dict(_CONFIGS))
globals().update(dict(_CAPABILITIES))
globals().update(dict(_COMM_CONFIG))


def comm_config() -> dict:
    """HcclCommConfigInit's configuration as a dict of HcclCommConfig's field names: every
    field "not set" (the communicator takes the environment's or mdev's default)."""
    return {"hcclBufferSize": 0xFFFFFFFF, "hcclDeterministic": 0xFFFFFFFF, "hcclCommName": "", "hcclUdi": "",
            "hcclOpExpansionMode": 0, "hcclRdmaTrafficClass": 0xFFFFFFFF, "hcclRdmaServiceLevel": 0xFFFFFFFF,
            "hcclWorldRankID": 0, "hcclJobID": 0, "aclGraphZeroCopyEnable": 0, "hcclExecTimeOut": -1,
            "hcclAlgo": "", "hcclRetryEnable": "", "hcclRetryParams": "", "hcclBufferName": "",
            "hcclQos": 0xFFFFFFFF, "hcclSymWinMaxMemSizePerRank": 16}


def result_name(code: int) -> str:
    return RESULT_NAMES.get(code, f"UNKNOWN({code})")


def error_string(code: int) -> str:
    """What HcclGetErrorString says about ``code``."""
    return RESULT_TEXT.get(code, "unknown error")


class HcclError(Exception):
    """A failure of a collective; the HCCL face returns ``code``."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(code, message)       # picklable, like AclError
        self.code = int(code)
        self.message = message

    def __str__(self) -> str:
        return f"{result_name(self.code)} ({self.code}): {self.message or error_string(self.code)}"


# aclError codes of the runtime -> the HcclResult a collective reports for them
_FROM_ACL = {
    E.ACL_SUCCESS: 0,
    E.ACL_ERROR_INVALID_PARAM: 1, E.ACL_ERROR_RT_PARAM_INVALID: 1, E.ACL_ERROR_RT_STREAM_CONTEXT: 1,
    E.ACL_ERROR_RT_INVALID_HANDLE: 1, E.ACL_ERROR_RT_INVALID_DEVICEID: 1, E.ACL_ERROR_RT_CONTEXT_NULL: 1,
    E.ACL_ERROR_RT_MEMORY_ALLOCATION: 3, E.ACL_ERROR_RT_NO_NOTIFY_RESOURCE: 7,
    E.ACL_ERROR_RT_NO_STREAM_RESOURCE: 7, E.ACL_ERROR_RT_NO_EVENT_RESOURCE: 7,
    E.ACL_ERROR_API_NOT_SUPPORT: 5, E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT: 5,
    E.ACL_ERROR_RT_TASK_TIMEOUT: 9, E.ACL_ERROR_RT_STREAM_SYNC_TIMEOUT: 9, E.ACL_ERROR_RT_WAIT_TIMEOUT: 9,
    E.ACL_ERROR_RT_SUSPECT_REMOTE_ERROR: 21, E.ACL_ERROR_RT_SOCKET_CLOSE: 16,
}


def from_acl(code: int) -> int:
    """The HcclResult of a runtime failure (aclError ``code``): HCCL_E_RUNTIME unless known."""
    return _FROM_ACL.get(code, HCCL_E_RUNTIME)       # noqa: F821  (defined from _RESULTS above)


__all__ = ([name for name, _, _ in _RESULTS] + [name for name, _, _ in _DATA_TYPES]
           + [name for name, _ in _REDUCE_OPS] + [name for name, _ in _SEND_RECV] + [name for name, _ in _RESERVED]
           + [name for group in (_CONFIGS, _CAPABILITIES, _COMM_CONFIG) for name, _ in group]
           + ["HCCL_ROOT_INFO_BYTES", "HCCL_COMM_DEFAULT_BUFFSIZE", "HcclError"])
