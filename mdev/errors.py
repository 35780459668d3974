"""ACL / runtime error codes (``aclError`` values) and the emulator's exception type.

Names and numbers are copied from the public CANN headers of ``hicann/runtime``:

* ``include/external/acl/acl_base_rt.h`` -- ACL base codes (``static const int``);
* ``include/external/acl/error_codes/rt_error_codes.h`` -- runtime codes (``#define``),
  at the revision described by ``docs/zh/api_ref/25-01_aclError.md`` (107042-107045,
  207021, 507915/507916 are the newest additions);
* ``ge_error_codes.h`` (pulled in by ``acl_base.h``) -- GE codes, for name look-up only;
  no runtime API of the emulator returns them.

Descriptions are short English paraphrases of the header comments and the doc table.

Each code is defined exactly once, in ``_CODES``; the module globals, ``ERROR_NAMES`` and
``ERROR_TEXT`` are all derived from that table so they cannot drift apart.  Every name
still appears literally in the table, so ``grep ACL_ERROR_RT_STREAM_NO_CB_REG`` finds it.

Inside the emulator, failures are raised as :class:`AclError`; the API boundary converts
them back to the integer return code that pyACL / the C API would return.
"""

from __future__ import annotations

# (name, value, short description).  Order matters only for readability; which name is
# canonical for a shared value is decided by _ALIASES below, not by position.
_CODES: tuple[tuple[str, int, str], ...] = (
    # ---- acl_base_rt.h: success and special values ------------------------------------
    ("ACL_SUCCESS", 0, "success"),
    ("ACL_ERROR_NONE", 0, "success (deprecated alias of ACL_SUCCESS)"),
    ("ACL_ERROR_INVALID_EXCEPTION_INFO", -1, "invalid exception info (NULL pointer)"),
    # ---- acl_base_rt.h: 1xxxxx caller / environment mistakes --------------------------
    ("ACL_ERROR_INVALID_PARAM", 100000, "parameter check failed"),
    ("ACL_ERROR_UNINITIALIZE", 100001, "aclInit (or feature init) not called"),
    ("ACL_ERROR_REPEAT_INITIALIZE", 100002, "repeated initialization or load"),
    ("ACL_ERROR_INVALID_FILE", 100003, "invalid file (missing or inaccessible)"),
    ("ACL_ERROR_WRITE_FILE", 100004, "failed to write file"),
    ("ACL_ERROR_INVALID_FILE_SIZE", 100005, "invalid file size"),
    ("ACL_ERROR_PARSE_FILE", 100006, "failed to parse file"),
    ("ACL_ERROR_FILE_MISSING_ATTR", 100007, "file is missing a parameter"),
    ("ACL_ERROR_FILE_ATTR_INVALID", 100008, "file parameter invalid"),
    ("ACL_ERROR_INVALID_DUMP_CONFIG", 100009, "invalid dump configuration"),
    ("ACL_ERROR_INVALID_PROFILING_CONFIG", 100010, "invalid profiling configuration"),
    ("ACL_ERROR_INVALID_MODEL_ID", 100011, "invalid model id"),
    ("ACL_ERROR_DESERIALIZE_MODEL", 100012, "failed to deserialize model"),
    ("ACL_ERROR_PARSE_MODEL", 100013, "failed to parse model"),
    ("ACL_ERROR_READ_MODEL_FAILURE", 100014, "failed to read model"),
    ("ACL_ERROR_MODEL_SIZE_INVALID", 100015, "invalid model size"),
    ("ACL_ERROR_MODEL_MISSING_ATTR", 100016, "model is missing a parameter"),
    ("ACL_ERROR_MODEL_INPUT_NOT_MATCH", 100017, "model input mismatch"),
    ("ACL_ERROR_MODEL_OUTPUT_NOT_MATCH", 100018, "model output mismatch"),
    ("ACL_ERROR_MODEL_NOT_DYNAMIC", 100019, "model is not dynamic"),
    ("ACL_ERROR_OP_TYPE_NOT_MATCH", 100020, "single-op type mismatch"),
    ("ACL_ERROR_OP_INPUT_NOT_MATCH", 100021, "single-op input mismatch"),
    ("ACL_ERROR_OP_OUTPUT_NOT_MATCH", 100022, "single-op output mismatch"),
    ("ACL_ERROR_OP_ATTR_NOT_MATCH", 100023, "single-op attribute mismatch"),
    ("ACL_ERROR_OP_NOT_FOUND", 100024, "single op not found"),
    ("ACL_ERROR_OP_LOAD_FAILED", 100025, "failed to load single op"),
    ("ACL_ERROR_UNSUPPORTED_DATA_TYPE", 100026, "unsupported data type"),
    ("ACL_ERROR_FORMAT_NOT_MATCH", 100027, "format mismatch"),
    ("ACL_ERROR_BIN_SELECTOR_NOT_REGISTERED", 100028, "op binary selector not registered"),
    ("ACL_ERROR_KERNEL_NOT_FOUND", 100029, "op kernel not registered"),
    ("ACL_ERROR_BIN_SELECTOR_ALREADY_REGISTERED", 100030, "op binary selector registered twice"),
    ("ACL_ERROR_KERNEL_ALREADY_REGISTERED", 100031, "op kernel registered twice"),
    ("ACL_ERROR_INVALID_QUEUE_ID", 100032, "invalid queue id"),
    ("ACL_ERROR_REPEAT_SUBSCRIBE", 100033, "stream subscribed twice"),
    ("ACL_ERROR_STREAM_NOT_SUBSCRIBE", 100034, "stream not subscribed (deprecated, use 107015)"),
    ("ACL_ERROR_THREAD_NOT_SUBSCRIBE", 100035, "thread not subscribed (deprecated, use 107012)"),
    ("ACL_ERROR_WAIT_CALLBACK_TIMEOUT", 100036, "wait for callback timed out (deprecated, use 507012)"),
    ("ACL_ERROR_REPEAT_FINALIZE", 100037, "repeated finalization"),
    ("ACL_ERROR_NOT_STATIC_AIPP", 100038, "static AIPP config does not exist (deprecated)"),
    ("ACL_ERROR_COMPILING_STUB_MODE", 100039, "application linked against stub libraries"),
    ("ACL_ERROR_GROUP_NOT_SET", 100040, "group not set (deprecated, use 107013)"),
    ("ACL_ERROR_GROUP_NOT_CREATE", 100041, "group not created (deprecated, use 107014)"),
    ("ACL_ERROR_PROF_ALREADY_RUN", 100042, "profiling already running"),
    ("ACL_ERROR_PROF_NOT_RUN", 100043, "profiling not initialized"),
    ("ACL_ERROR_DUMP_ALREADY_RUN", 100044, "dump already configured"),
    ("ACL_ERROR_DUMP_NOT_RUN", 100045, "dump not initialized"),
    ("ACL_ERROR_PROF_REPEAT_SUBSCRIBE", 148046, "model subscribed twice for profiling"),
    ("ACL_ERROR_PROF_API_CONFLICT", 148047, "conflicting profiling API styles"),
    ("ACL_ERROR_INVALID_MAX_OPQUEUE_NUM_CONFIG", 148048, "invalid max_opqueue_num configuration"),
    ("ACL_ERROR_INVALID_OPP_PATH", 148049, "ASCEND_OPP_PATH missing or wrong"),
    ("ACL_ERROR_OP_UNSUPPORTED_DYNAMIC", 148050, "op does not support dynamic shape"),
    ("ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED", 148051, "dependent resource not released"),
    ("ACL_ERROR_UNSUPPORTED_JPEG", 148052, "unsupported JPEG encoding"),
    ("ACL_ERROR_INVALID_BUNDLE_MODEL_ID", 148053, "invalid bundle model id"),
    # ---- acl_base_rt.h: 2xxxxx resources / product capability -------------------------
    ("ACL_ERROR_BAD_ALLOC", 200000, "memory allocation failed"),
    ("ACL_ERROR_API_NOT_SUPPORT", 200001, "API not supported"),
    ("ACL_ERROR_INVALID_DEVICE", 200002, "invalid device (deprecated, use 107001)"),
    ("ACL_ERROR_MEMORY_ADDRESS_UNALIGNED", 200003, "memory address not aligned"),
    ("ACL_ERROR_RESOURCE_NOT_MATCH", 200004, "resource mismatch (wrong stream/context)"),
    ("ACL_ERROR_INVALID_RESOURCE_HANDLE", 200005, "invalid resource handle (destroyed or in use)"),
    ("ACL_ERROR_FEATURE_UNSUPPORTED", 200006, "feature not supported"),
    ("ACL_ERROR_PROF_MODULES_UNSUPPORTED", 200007, "unsupported profiling module"),
    # ---- acl_base_rt.h: 3xxxxx business state ------------------------------------------
    ("ACL_ERROR_STORAGE_OVER_LIMIT", 300000, "storage over limit"),
    # ---- acl_base_rt.h: 5xxxxx internal errors -----------------------------------------
    ("ACL_ERROR_INTERNAL_ERROR", 500000, "unknown internal error"),
    ("ACL_ERROR_FAILURE", 500001, "internal error"),
    ("ACL_ERROR_GE_FAILURE", 500002, "graph engine (GE) error"),
    ("ACL_ERROR_RT_FAILURE", 500003, "runtime module error"),
    ("ACL_ERROR_DRV_FAILURE", 500004, "driver error"),
    ("ACL_ERROR_PROFILING_FAILURE", 500005, "profiling error"),
    # ---- rt_error_codes.h: success -------------------------------------------------------
    ("ACL_RT_SUCCESS", 0, "success"),
    # ---- rt_error_codes.h: 107xxx invalid use -------------------------------------------
    ("ACL_ERROR_RT_PARAM_INVALID", 107000, "invalid argument"),
    ("ACL_ERROR_RT_INVALID_DEVICEID", 107001, "invalid device id"),
    ("ACL_ERROR_RT_CONTEXT_NULL", 107002, "current context is null"),
    ("ACL_ERROR_RT_STREAM_CONTEXT", 107003, "stream not in current context"),
    ("ACL_ERROR_RT_MODEL_CONTEXT", 107004, "model not in current context"),
    ("ACL_ERROR_RT_STREAM_MODEL", 107005, "stream not in model"),
    ("ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID", 107006, "event timestamp invalid"),
    ("ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL", 107007, "event timestamp reversal"),
    ("ACL_ERROR_RT_ADDR_UNALIGNED", 107008, "memory address unaligned"),
    ("ACL_ERROR_RT_FILE_OPEN", 107009, "open file failed"),
    ("ACL_ERROR_RT_FILE_WRITE", 107010, "write file failed"),
    ("ACL_ERROR_RT_STREAM_SUBSCRIBE", 107011, "stream not subscribed or subscribed twice"),
    ("ACL_ERROR_RT_THREAD_SUBSCRIBE", 107012, "thread not subscribed or subscribed twice"),
    ("ACL_ERROR_RT_GROUP_NOT_SET", 107013, "group not set"),
    ("ACL_ERROR_RT_GROUP_NOT_CREATE", 107014, "group not created"),
    ("ACL_ERROR_RT_STREAM_NO_CB_REG", 107015, "callback stream not registered to a thread"),
    ("ACL_ERROR_RT_INVALID_MEMORY_TYPE", 107016, "invalid memory type"),
    ("ACL_ERROR_RT_INVALID_HANDLE", 107017, "invalid handle"),
    ("ACL_ERROR_RT_INVALID_MALLOC_TYPE", 107018, "invalid malloc type"),
    ("ACL_ERROR_RT_WAIT_TIMEOUT", 107019, "wait timeout"),
    ("ACL_ERROR_RT_TASK_TIMEOUT", 107020, "task timeout"),
    ("ACL_ERROR_RT_SYSPARAMOPT_NOT_SET", 107021, "system parameter option not set"),
    ("ACL_ERROR_RT_DEVICE_TASK_ABORT", 107022, "device task abort in progress"),
    ("ACL_ERROR_RT_STREAM_ABORT", 107023, "stream abort in progress"),
    ("ACL_ERROR_RT_CAPTURE_DEPENDENCY", 107024, "capture dependency failure"),
    ("ACL_ERROR_RT_STREAM_UNJOINED", 107025, "captured stream not joined back to origin stream"),
    ("ACL_ERROR_RT_MODEL_CAPTURED", 107026, "model is being captured"),
    ("ACL_ERROR_RT_STREAM_CAPTURED", 107027, "stream is being captured"),
    ("ACL_ERROR_RT_EVENT_CAPTURED", 107028, "event is being captured"),
    ("ACL_ERROR_RT_STREAM_NOT_CAPTURED", 107029, "stream is not capturing"),
    ("ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT", 107030, "operation not allowed in current capture mode"),
    ("ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT", 107031, "implicit dependency on default stream during capture"),
    ("ACL_ERROR_STREAM_CAPTURE_CONFLICT", 107032, "interdependent streams cannot begin capture together"),
    ("ACL_ERROR_STREAM_TASK_GROUP_STATUS", 107033, "task group status error"),
    ("ACL_ERROR_STREAM_TASK_GROUP_INTR", 107034, "task group recording interrupted"),
    ("ACL_ERROR_RT_TASK_ABORT_STOP", 107035, "device task abort stopped before post-processing"),
    ("ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED", 107036, "capture was not begun on this stream"),
    ("ACL_ERROR_RT_MODEL_RUNNING", 107037, "model is still running"),
    ("ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD", 107038, "capture ended on a different thread"),
    ("ACL_ERROR_RT_INSUFFICIENT_INPUT_ARRAY", 107039, "input array capacity insufficient"),
    ("ACL_ERROR_RT_MODEL_UPDATE_FAILED", 107040, "model update failed"),
    ("ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC", 107041, "async op degraded to sync, not allowed in capture mode"),
    ("ACL_ERROR_RT_SYMBOL_NOT_FOUND", 107042, "symbol not found"),
    ("ACL_ERROR_RT_INVALID_SYMBOL", 107043, "invalid device symbol"),
    ("ACL_ERROR_RT_INVALID_DEVICE_FUNCTION", 107044, "invalid device function"),
    ("ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING", 107045, "sub-graph is still capturing"),
    # ---- rt_error_codes.h: 207xxx resources / capability ---------------------------------
    ("ACL_ERROR_RT_FEATURE_NOT_SUPPORT", 207000, "feature not supported"),
    ("ACL_ERROR_RT_MEMORY_ALLOCATION", 207001, "memory allocation error (out of memory)"),
    ("ACL_ERROR_RT_MEMORY_FREE", 207002, "memory free error"),
    ("ACL_ERROR_RT_AICORE_OVER_FLOW", 207003, "AI Core overflow"),
    ("ACL_ERROR_RT_NO_DEVICE", 207004, "no device"),
    ("ACL_ERROR_RT_RESOURCE_ALLOC_FAIL", 207005, "resource allocation failed"),
    ("ACL_ERROR_RT_NO_PERMISSION", 207006, "no permission"),
    ("ACL_ERROR_RT_NO_EVENT_RESOURCE", 207007, "no event resource"),
    ("ACL_ERROR_RT_NO_STREAM_RESOURCE", 207008, "no stream resource"),
    ("ACL_ERROR_RT_NO_NOTIFY_RESOURCE", 207009, "no notify resource"),
    ("ACL_ERROR_RT_NO_MODEL_RESOURCE", 207010, "no model resource"),
    ("ACL_ERROR_RT_NO_CDQ_RESOURCE", 207011, "no CDQ resource"),
    ("ACL_ERROR_RT_OVER_LIMIT", 207012, "over limit"),
    ("ACL_ERROR_RT_QUEUE_EMPTY", 207013, "queue is empty"),
    ("ACL_ERROR_RT_QUEUE_FULL", 207014, "queue is full"),
    ("ACL_ERROR_RT_REPEATED_INIT", 207015, "repeated init"),
    ("ACL_ERROR_RT_AIVEC_OVER_FLOW", 207016, "AI Vector overflow"),
    ("ACL_ERROR_RT_OVER_FLOW", 207017, "common overflow"),
    ("ACL_ERROR_RT_DEVICE_OOM", 207018, "device out of memory"),
    ("ACL_ERROR_RT_FEATURE_NOT_SUPPORT_UPDATE_OP", 207019, "driver does not support updating this op"),
    ("ACL_ERROR_RT_TIMEOUT", 207020, "driver timeout"),
    ("ACL_ERROR_RT_LINK_TYPE_NOT_SUPPORTED", 207021, "link type not supported"),
    # ---- rt_error_codes.h: 507xxx internal / device execution failures -------------------
    ("ACL_ERROR_RT_INTERNAL_ERROR", 507000, "runtime internal error"),
    ("ACL_ERROR_RT_TS_ERROR", 507001, "task scheduler internal error"),
    ("ACL_ERROR_RT_STREAM_TASK_FULL", 507002, "task full in stream"),
    ("ACL_ERROR_RT_STREAM_TASK_EMPTY", 507003, "task empty in stream"),
    ("ACL_ERROR_RT_STREAM_NOT_COMPLETE", 507004, "stream not complete"),
    ("ACL_ERROR_RT_END_OF_SEQUENCE", 507005, "end of sequence"),
    ("ACL_ERROR_RT_EVENT_NOT_COMPLETE", 507006, "event not complete"),
    ("ACL_ERROR_RT_CONTEXT_RELEASE_ERROR", 507007, "context release error"),
    ("ACL_ERROR_RT_SOC_VERSION", 507008, "SoC version error"),
    ("ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT", 507009, "task type not supported"),
    ("ACL_ERROR_RT_LOST_HEARTBEAT", 507010, "task scheduler lost heartbeat"),
    ("ACL_ERROR_RT_MODEL_EXECUTE", 507011, "model execution failed"),
    ("ACL_ERROR_RT_REPORT_TIMEOUT", 507012, "report timeout"),
    ("ACL_ERROR_RT_SYS_DMA", 507013, "system DMA error"),
    ("ACL_ERROR_RT_AICORE_TIMEOUT", 507014, "AI Core timeout"),
    ("ACL_ERROR_RT_AICORE_EXCEPTION", 507015, "AI Core exception"),
    ("ACL_ERROR_RT_AICORE_TRAP_EXCEPTION", 507016, "AI Core trap exception"),
    ("ACL_ERROR_RT_AICPU_TIMEOUT", 507017, "AI CPU timeout"),
    ("ACL_ERROR_RT_AICPU_EXCEPTION", 507018, "AI CPU exception"),
    ("ACL_ERROR_RT_AICPU_DATADUMP_RSP_ERR", 507019, "AI CPU data dump response error"),
    ("ACL_ERROR_RT_AICPU_MODEL_RSP_ERR", 507020, "AI CPU model operation response error"),
    ("ACL_ERROR_RT_PROFILING_ERROR", 507021, "profiling error"),
    ("ACL_ERROR_RT_IPC_ERROR", 507022, "IPC error"),
    ("ACL_ERROR_RT_MODEL_ABORT_NORMAL", 507023, "model aborted normally"),
    ("ACL_ERROR_RT_KERNEL_UNREGISTERING", 507024, "kernel unregistering"),
    ("ACL_ERROR_RT_RINGBUFFER_NOT_INIT", 507025, "ring buffer not initialized"),
    ("ACL_ERROR_RT_RINGBUFFER_NO_DATA", 507026, "ring buffer has no data"),
    ("ACL_ERROR_RT_KERNEL_LOOKUP", 507027, "kernel lookup error"),
    ("ACL_ERROR_RT_KERNEL_DUPLICATE", 507028, "kernel registered twice"),
    ("ACL_ERROR_RT_DEBUG_REGISTER_FAIL", 507029, "debug register failed"),
    ("ACL_ERROR_RT_DEBUG_UNREGISTER_FAIL", 507030, "debug unregister failed"),
    ("ACL_ERROR_RT_LABEL_CONTEXT", 507031, "label not in current context"),
    ("ACL_ERROR_RT_PROGRAM_USE_OUT", 507032, "program register count exhausted"),
    ("ACL_ERROR_RT_DEV_SETUP_ERROR", 507033, "device setup error"),
    ("ACL_ERROR_RT_VECTOR_CORE_TIMEOUT", 507034, "vector core timeout"),
    ("ACL_ERROR_RT_VECTOR_CORE_EXCEPTION", 507035, "vector core exception"),
    ("ACL_ERROR_RT_VECTOR_CORE_TRAP_EXCEPTION", 507036, "vector core trap exception"),
    ("ACL_ERROR_RT_CDQ_BATCH_ABNORMAL", 507037, "CDQ batch allocation abnormal"),
    ("ACL_ERROR_RT_DIE_MODE_CHANGE_ERROR", 507038, "cannot change die mode"),
    ("ACL_ERROR_RT_DIE_SET_ERROR", 507039, "cannot set die in single-die mode"),
    ("ACL_ERROR_RT_INVALID_DIEID", 507040, "invalid die id"),
    ("ACL_ERROR_RT_DIE_MODE_NOT_SET", 507041, "die mode not set"),
    ("ACL_ERROR_RT_AICORE_TRAP_READ_OVERFLOW", 507042, "AI Core trap: out-of-bounds read"),
    ("ACL_ERROR_RT_AICORE_TRAP_WRITE_OVERFLOW", 507043, "AI Core trap: out-of-bounds write"),
    ("ACL_ERROR_RT_VECTOR_CORE_TRAP_READ_OVERFLOW", 507044, "vector core trap: out-of-bounds read"),
    ("ACL_ERROR_RT_VECTOR_CORE_TRAP_WRITE_OVERFLOW", 507045, "vector core trap: out-of-bounds write"),
    ("ACL_ERROR_RT_STREAM_SYNC_TIMEOUT", 507046, "stream synchronize timed out"),
    ("ACL_ERROR_RT_EVENT_SYNC_TIMEOUT", 507047, "event synchronize timed out"),
    ("ACL_ERROR_RT_FFTS_PLUS_TIMEOUT", 507048, "internal (FFTS+) task timeout"),
    ("ACL_ERROR_RT_FFTS_PLUS_EXCEPTION", 507049, "internal (FFTS+) task exception"),
    ("ACL_ERROR_RT_FFTS_PLUS_TRAP_EXCEPTION", 507050, "internal (FFTS+) task trap exception"),
    ("ACL_ERROR_RT_SEND_MSG", 507051, "HDC message send failed"),
    ("ACL_ERROR_RT_COPY_DATA", 507052, "data copy failed"),
    ("ACL_ERROR_RT_DEVICE_MEM_ERROR", 507053, "device memory uncorrectable error"),
    ("ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR", 507054, "HBM multi-bit ECC error"),
    ("ACL_ERROR_RT_SUSPECT_DEVICE_MEM_ERROR", 507055, "suspected peer device memory error"),
    ("ACL_ERROR_RT_LINK_ERROR", 507056, "inter-device link error"),
    ("ACL_ERROR_RT_SUSPECT_REMOTE_ERROR", 507057, "suspected remote fault or out-of-bounds access"),
    ("ACL_ERROR_RT_DRV_INTERNAL_ERROR", 507899, "driver internal error"),
    ("ACL_ERROR_RT_AICPU_INTERNAL_ERROR", 507900, "AI CPU internal error"),
    ("ACL_ERROR_RT_SOCKET_CLOSE", 507901, "host-device (HDC) session closed"),
    ("ACL_ERROR_RT_AICPU_INFO_LOAD_RSP_ERR", 507902, "AI CPU info load response error"),
    ("ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED", 507903, "capture status is invalidated"),
    ("ACL_ERROR_RT_COMM_OP_RETRY_FAIL", 507904, "HCCL operation retry failed"),
    ("ACL_ERROR_SNAPSHOT_LOCK_TIMEOUT", 507905, "snapshot lock timeout"),
    ("ACL_ERROR_SNAPSHOT_LOCK_FAILED", 507906, "snapshot lock failed"),
    ("ACL_ERROR_SNAPSHOT_UNLOCK_FAILED", 507907, "snapshot unlock failed"),
    ("ACL_ERROR_SNAPSHOT_BACKUP_FAILED", 507908, "snapshot backup failed"),
    ("ACL_ERROR_SNAPSHOT_RESTORE_FAILED", 507909, "snapshot restore failed"),
    ("ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED", 507910, "host memory range already registered"),
    ("ACL_ERROR_HOST_MEMORY_NOT_REGISTERED", 507911, "host memory not registered"),
    ("ACL_ERROR_SNAPSHOT_CALLBACK_FAILED", 507912, "snapshot callback failed"),
    ("ACL_ERROR_SNAPSHOT_REGISTER_CALLBACK_FAILED", 507913, "snapshot callback registration failed"),
    ("ACL_ERROR_RT_L3_PORT_ERROR", 507914, "L3 port error"),
    ("ACL_ERROR_RT_CCU_TIMEOUT", 507915, "CCU timeout"),
    ("ACL_ERROR_RT_CCU_EXCEPTION", 507916, "CCU exception"),
    # ---- ge_error_codes.h (static const uint32_t): for name look-up only -----------------
    ("ACL_ERROR_GE_PARAM_INVALID", 145000, "GE: parameter check failed"),
    ("ACL_ERROR_GE_EXEC_NOT_INIT", 145001, "GE: not initialized"),
    ("ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID", 145002, "GE: invalid model path"),
    ("ACL_ERROR_GE_EXEC_MODEL_ID_INVALID", 145003, "GE: invalid model id"),
    ("ACL_ERROR_GE_EXEC_MODEL_DATA_SIZE_INVALID", 145006, "GE: invalid model data size"),
    ("ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID", 145007, "GE: invalid model address"),
    ("ACL_ERROR_GE_EXEC_MODEL_QUEUE_ID_INVALID", 145008, "GE: invalid model queue id"),
    ("ACL_ERROR_GE_EXEC_LOAD_MODEL_REPEATED", 145009, "GE: model loaded twice"),
    ("ACL_ERROR_GE_DYNAMIC_INPUT_ADDR_INVALID", 145011, "GE: invalid dynamic input address"),
    ("ACL_ERROR_GE_DYNAMIC_INPUT_LENGTH_INVALID", 145012, "GE: invalid dynamic input length"),
    ("ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID", 145013, "GE: invalid dynamic batch size"),
    ("ACL_ERROR_GE_AIPP_BATCH_EMPTY", 145014, "GE: invalid AIPP batch size"),
    ("ACL_ERROR_GE_AIPP_NOT_EXIST", 145015, "GE: AIPP config does not exist"),
    ("ACL_ERROR_GE_AIPP_MODE_INVALID", 145016, "GE: invalid AIPP mode"),
    ("ACL_ERROR_GE_OP_TASK_TYPE_INVALID", 145017, "GE: invalid task type"),
    ("ACL_ERROR_GE_OP_KERNEL_TYPE_INVALID", 145018, "GE: invalid kernel type"),
    ("ACL_ERROR_GE_PLGMGR_PATH_INVALID", 145019, "GE: invalid plugin (.so) path"),
    ("ACL_ERROR_GE_FORMAT_INVALID", 145020, "GE: invalid format"),
    ("ACL_ERROR_GE_SHAPE_INVALID", 145021, "GE: invalid shape"),
    ("ACL_ERROR_GE_DATATYPE_INVALID", 145022, "GE: invalid data type"),
    ("ACL_ERROR_GE_MEMORY_ALLOCATION", 245000, "GE: memory allocation failed"),
    ("ACL_ERROR_GE_MEMORY_OPERATE_FAILED", 245001, "GE: memory operation failed"),
    ("ACL_ERROR_GE_DEVICE_MEMORY_OPERATE_FAILED", 245002, "GE: device memory allocation failed"),
    ("ACL_ERROR_GE_DEVICE_MEMORY_ALLOCATION_FAILED", 245002, "GE: device memory allocation failed"),
    ("ACL_ERROR_GE_SUBHEALTHY", 345102, "GE: sub-healthy state"),
    ("ACL_ERROR_GE_USER_RAISE_EXCEPTION", 345103, "GE: user function raised an exception"),
    ("ACL_ERROR_GE_DATA_NOT_ALIGNED", 345104, "GE: data not aligned"),
    ("ACL_ERROR_GE_INTERNAL_ERROR", 545000, "GE: unknown internal error"),
    ("ACL_ERROR_GE_LOAD_MODEL", 545001, "GE: failed to load model"),
    ("ACL_ERROR_GE_EXEC_LOAD_MODEL_PARTITION_FAILED", 545002, "GE: failed to load model partition"),
    ("ACL_ERROR_GE_EXEC_LOAD_WEIGHT_PARTITION_FAILED", 545003, "GE: failed to load weight partition"),
    ("ACL_ERROR_GE_EXEC_LOAD_TASK_PARTITION_FAILED", 545004, "GE: failed to load task partition"),
    ("ACL_ERROR_GE_EXEC_LOAD_KERNEL_PARTITION_FAILED", 545005, "GE: failed to load kernel partition"),
    ("ACL_ERROR_GE_EXEC_RELEASE_MODEL_DATA", 545006, "GE: failed to release model data"),
    ("ACL_ERROR_GE_COMMAND_HANDLE", 545007, "GE: command handling failed"),
    ("ACL_ERROR_GE_GET_TENSOR_INFO", 545008, "GE: failed to get tensor info"),
    ("ACL_ERROR_GE_UNLOAD_MODEL", 545009, "GE: failed to unload model"),
    ("ACL_ERROR_GE_MODEL_EXECUTE_TIMEOUT", 545601, "GE: model execution timeout"),
    ("ACL_ERROR_GE_REDEPLOYING", 545602, "GE: redeploying"),
    # ---- aclnn (the operator library's aclnnStatus; ops-math docs, aclnn return codes) --
    ("ACLNN_ERR_PARAM_NULLPTR", 161001, "aclnn: a required parameter is a null pointer"),
    ("ACLNN_ERR_PARAM_INVALID", 161002, "aclnn: a parameter is invalid (dtype, shape, broadcasting, ...)"),
    ("ACLNN_ERR_RUNTIME_ERROR", 361001, "aclnn: a call into the NPU runtime failed"),
    ("ACLNN_ERR_INNER", 561000, "aclnn: internal error"),
    ("ACLNN_ERR_INNER_INFERSHAPE_ERROR", 561001, "aclnn: output shape inference failed"),
    ("ACLNN_ERR_INNER_FIND_KERNEL_ERROR", 561003, "aclnn: no kernel for the operator (binary package not installed)"),
    ("ACLNN_ERR_INNER_CREATE_EXECUTOR", 561101, "aclnn: creating the aclOpExecutor failed"),
)

# Names that share a value with a preferred name.  ERROR_NAMES never reports these, so
# describe(0) says ACL_SUCCESS, not the deprecated ACL_ERROR_NONE.
_ALIASES: frozenset[str] = frozenset(
    {
        "ACL_ERROR_NONE",  # deprecated in acl_base_rt.h, use ACL_SUCCESS
        "ACL_RT_SUCCESS",  # runtime header's spelling of 0
        "ACL_ERROR_GE_DEVICE_MEMORY_ALLOCATION_FAILED",  # other ge_error_codes.h spelling of 245002
    }
)

ERROR_NAMES: dict[int, str] = {}
ERROR_TEXT: dict[int, str] = {}


def _build() -> None:
    """Derive module globals and the look-up dicts from ``_CODES`` (single source)."""
    seen: dict[str, int] = {}
    for name, value, text in _CODES:
        if name in seen:  # a name must not be defined twice, even with the same value
            raise RuntimeError(f"duplicate error name {name}")
        seen[name] = value
        if name not in _ALIASES:
            if value in ERROR_NAMES:
                raise RuntimeError(f"two canonical names for {value}: {ERROR_NAMES[value]}, {name}")
            ERROR_NAMES[value] = name
            ERROR_TEXT[value] = text
    globals().update(seen)


_build()


def error_name(code: int) -> str:
    """Canonical header name of ``code``, or ``"UNKNOWN(<code>)"``."""
    return ERROR_NAMES.get(code, f"UNKNOWN({code})") if type(code) is int else f"UNKNOWN({code!r})"


def describe(code: int) -> str:
    """One-line description, e.g. ``"ACL_ERROR_RT_PARAM_INVALID (107000): invalid argument"``."""
    text = ERROR_TEXT.get(code, 'unknown error') if type(code) is int else 'unknown error'
    return f"{error_name(code)} ({code!r}): {text}"


class AclError(Exception):
    """An ACL failure inside the emulator; the API boundary turns it into ``code``."""

    code: int
    message: str

    def __init__(self, code: int, message: str = "") -> None:
        # Passing both to Exception keeps .args meaningful and makes the error picklable
        # (unpickling calls AclError(*args)), which matters for multi-process emulation.
        super().__init__(code, message)
        self.code = int(code)
        self.message = message

    def __str__(self) -> str:
        text = self.message or ERROR_TEXT.get(self.code, "unknown error")
        return f"{error_name(self.code)} ({self.code}): {text}"

    def __repr__(self) -> str:
        return f"AclError({self.code}, {self.message!r})"


__all__ = [name for name, _, _ in _CODES] + [
    "ERROR_NAMES",
    "ERROR_TEXT",
    "error_name",
    "describe",
    "AclError",
]
