/*
 * mdev -- emulated Ascend NPU boards behind the CANN Runtime API.
 *
 * hccl/hccl_types.h: HCCL's result codes, handles, reduce operations, data types, the root
 * info blob, the batched send/recv item, the communicator configuration (HcclCommConfig,
 * filled by HcclCommConfigInit of hccl_comm.h) and the process-wide HcclConfig settings.
 *
 * Written by the mdev project from the published HCCL API (the hccl_types.h facts of the
 * HCCL data-type reference): every name, enumerator value, constant and structure layout
 * follows it, so that HCCL programs build against this tree and link mdev's libhccl.so.
 * Unlike the published header it is valid C as well as C++ (constants are macros).
 */

#ifndef MDEV_HCCL_TYPES_H
#define MDEV_HCCL_TYPES_H

#include <stddef.h>
#include <stdint.h>

/* Exported-symbol marker on every HCCL declaration (a program may define its own first). */
#ifndef HCCL_FUNC_VISIBILITY
#if defined(__GNUC__) || defined(__clang__)
#define HCCL_FUNC_VISIBILITY __attribute__((visibility("default")))
#else
#define HCCL_FUNC_VISIBILITY
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* What every HCCL function returns */
typedef enum {
    HCCL_SUCCESS = 0,
    HCCL_E_PARA = 1,
    HCCL_E_PTR = 2,
    HCCL_E_MEMORY = 3,
    HCCL_E_INTERNAL = 4,
    HCCL_E_NOT_SUPPORT = 5,
    HCCL_E_NOT_FOUND = 6,
    HCCL_E_UNAVAIL = 7,
    HCCL_E_SYSCALL = 8,
    HCCL_E_TIMEOUT = 9,
    HCCL_E_OPEN_FILE_FAILURE = 10,
    HCCL_E_TCP_CONNECT = 11,
    HCCL_E_ROCE_CONNECT = 12,
    HCCL_E_TCP_TRANSFER = 13,
    HCCL_E_ROCE_TRANSFER = 14,
    HCCL_E_RUNTIME = 15,
    HCCL_E_DRV = 16,
    HCCL_E_PROFILING = 17,
    HCCL_E_CCE = 18,
    HCCL_E_NETWORK = 19,
    HCCL_E_AGAIN = 20,
    HCCL_E_REMOTE = 21,
    HCCL_E_SUSPENDING = 22,
    HCCL_E_OPRETRY_FAIL = 23,
    HCCL_E_OOM = 24,
    HCCL_E_IN_STATUS = 1041,
    HCCL_E_RESERVED
} HcclResult;

/* Opaque handles */
typedef void* HcclComm;
typedef void* HcclConn;
typedef void* HcclCommSymWindow;    /* a registered symmetric memory window */

typedef enum {
    HCCL_REDUCE_SUM = 0,
    HCCL_REDUCE_PROD = 1,
    HCCL_REDUCE_MAX = 2,
    HCCL_REDUCE_MIN = 3,
    HCCL_REDUCE_RESERVED = 255
} HcclReduceOp;

/* MXFP8 is listed by the data-type reference, not by every release's header */
typedef enum {
    HCCL_DATA_TYPE_INT8 = 0,
    HCCL_DATA_TYPE_INT16 = 1,
    HCCL_DATA_TYPE_INT32 = 2,
    HCCL_DATA_TYPE_FP16 = 3,
    HCCL_DATA_TYPE_FP32 = 4,
    HCCL_DATA_TYPE_INT64 = 5,
    HCCL_DATA_TYPE_UINT64 = 6,
    HCCL_DATA_TYPE_UINT8 = 7,
    HCCL_DATA_TYPE_UINT16 = 8,
    HCCL_DATA_TYPE_UINT32 = 9,
    HCCL_DATA_TYPE_FP64 = 10,
    HCCL_DATA_TYPE_BFP16 = 11,
    HCCL_DATA_TYPE_INT128 = 12,
    HCCL_DATA_TYPE_HIF8 = 14,
    HCCL_DATA_TYPE_FP8E4M3 = 15,
    HCCL_DATA_TYPE_FP8E5M2 = 16,
    HCCL_DATA_TYPE_FP8E8M0 = 17,
    HCCL_DATA_TYPE_MXFP8 = 18,
    HCCL_DATA_TYPE_RESERVED = 255
} HcclDataType;

/* Sizes and defaults */
#define HCCL_ROOT_INFO_BYTES 4108U
#define HCCL_COMM_DEFAULT_BUFFSIZE 200U

/* The blob rank 0 makes (HcclGetRootInfo) and every rank passes to HcclCommInitRootInfo */
typedef struct HcclRootInfoDef {
    char internal[HCCL_ROOT_INFO_BYTES];
} HcclRootInfo;

/* Process-wide settings (HcclSetConfig / HcclGetConfig) */
typedef enum {
    HCCL_DETERMINISTIC = 0,         /* 0 not deterministic, 1 deterministic, 2 strict (order-preserving) */
    HCCL_CONFIG_RESERVED
} HcclConfig;

typedef union HcclConfigValue {
    int32_t value;
} HcclConfigValue;

/* Communicator configuration (HcclCommInitRootInfoConfig, HcclCreateSubCommConfig) */
#define COMM_NAME_MAX_LENGTH 128U
#define BUFFER_NAME_MAX_LENGTH 128U
#define UDI_MAX_LENGTH 128U
#define HCCL_COMM_ALGO_MAX_LENGTH 1600U
#define HCCL_COMM_RETRY_ENABLE_MAX_LENGTH 50U
#define HCCL_COMM_RETRY_PARAMS_MAX_LENGTH 128U
#define HCCL_COMM_CONFIG_INFO_BYTES 24U
#define HCCL_COMM_CONFIG_MAGIC_WORD 0xf0f0f0f0U
#define HCCL_COMM_CONFIG_VERSION 10U
#define HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET 0xffffffffU
#define HCCL_COMM_DEFAULT_DETERMINISTIC 0U
#define HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET 0xffffffffU
#define HCCL_COMM_DEFAULT_OP_EXPANSION_MODE 0U
#define HCCL_COMM_TRAFFIC_CLASS_CONFIG_NOT_SET 0xffffffffU
#define HCCL_COMM_SERVICE_LEVEL_CONFIG_NOT_SET 0xffffffffU
#define HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET (-1)
#define HCCL_COMM_QOS_CONFIG_NOT_SET 0xffffffffU
#define HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE 16ULL

/* The first HCCL_COMM_CONFIG_INFO_BYTES bytes: size, magic word, version (HcclCommConfigInit) */
typedef struct HcclCommConfigDef {
    char reserved[HCCL_COMM_CONFIG_INFO_BYTES];
    uint32_t hcclBufferSize;                /* MB */
    uint32_t hcclDeterministic;
    char hcclCommName[COMM_NAME_MAX_LENGTH];
    char hcclUdi[UDI_MAX_LENGTH];
    uint32_t hcclOpExpansionMode;
    uint32_t hcclRdmaTrafficClass;
    uint32_t hcclRdmaServiceLevel;
    uint32_t hcclWorldRankID;
    uint64_t hcclJobID;
    uint8_t aclGraphZeroCopyEnable;
    int32_t hcclExecTimeOut;                /* s */
    char hcclAlgo[HCCL_COMM_ALGO_MAX_LENGTH];
    char hcclRetryEnable[HCCL_COMM_RETRY_ENABLE_MAX_LENGTH];
    char hcclRetryParams[HCCL_COMM_RETRY_PARAMS_MAX_LENGTH];
    char hcclBufferName[BUFFER_NAME_MAX_LENGTH];
    uint32_t hcclQos;
    uint64_t hcclSymWinMaxMemSizePerRank;   /* GB of address space reserved for symmetric windows */
} HcclCommConfig;

/* What HcclGetCommConfigCapability's answer is compared with: a field is configurable when
   the answer is greater than its value */
typedef enum {
    HCCL_COMM_CONFIG_BUFFER_SIZE = 0,
    HCCL_COMM_CONFIG_DETERMINISTIC = 1,
    HCCL_COMM_CONFIG_COMM_NAME = 2,
    HCCL_COMM_CONFIG_OP_EXPANSION_MODE = 3,
    HCCL_COMM_CONFIG_SUPPORT_INIT_BY_ENV = 4,
    HCCL_COMM_CONFIG_WORLD_RANKID = 5,
    HCCL_COMM_CONFIG_JOBID = 6,
    HCCL_COMM_CONFIG_ACLGRAPH_ZEROCOPY_ENABLE = 7,
    HCCL_COMM_CONFIG_EXEC_TIMEOUT = 8,
    HCCL_COMM_CONFIG_ALGO = 9,
    HCCL_COMM_CONFIG_RETRY = 10,
    HCCL_COMM_CONFIG_BUFFER_NAME = 11,
    HCCL_COMM_CONFIG_RESERVED
} HcclCommConfigCapability;

/* Batched point-to-point transfers (HcclBatchSendRecv) */
typedef enum {
    HCCL_SEND = 0,
    HCCL_RECV = 1,
    HCCL_SEND_RECV_RESERVED
} HcclSendRecvType;

typedef struct HcclSendRecvItemDef {
    HcclSendRecvType sendRecvType;
    void* buf;
    uint64_t count;
    HcclDataType dataType;
    uint32_t remoteRank;
} HcclSendRecvItem;

#ifdef __cplusplus
}
#endif

#endif /* MDEV_HCCL_TYPES_H */
