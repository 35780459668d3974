/*
 * mdev -- emulated Ascend NPU boards behind the CANN Runtime API.
 *
 * hccl/hccl_types.h: HCCL's result codes, handles, reduce operations, data types, the root
 * info blob and the batched send/recv item.
 *
 * Written by the mdev project from the published HCCL API (the hccl_types.h facts of the
 * HCCL data-type reference): every name, enumerator value, constant and structure layout
 * follows it, so that HCCL programs build against this tree and link mdev's libhccl.so.
 * Unlike the published header it is valid C as well as C++ (constants are macros).
 */

#ifndef MDEV_HCCL_TYPES_H
#define MDEV_HCCL_TYPES_H

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
