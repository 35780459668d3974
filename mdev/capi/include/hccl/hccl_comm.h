/*
 * mdev -- emulated Ascend NPU boards behind the CANN Runtime API.
 *
 * hccl/hccl_comm.h: communicators (made from a rank table, a root info or all in one
 * process), their queries and destruction, barrier, groups, error strings.
 *
 * Written by the mdev project from the published HCCL API: names and prototypes follow it.
 * Functions mdev does not emulate (suspend / resume, communicator names) are declared and
 * return HCCL_E_NOT_SUPPORT with a message (aclGetRecentErrMsg).
 */

#ifndef MDEV_HCCL_COMM_H
#define MDEV_HCCL_COMM_H

#include <stdbool.h>

#include "hccl/hccl_types.h"
#include "acl/acl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Communicators */
HCCL_FUNC_VISIBILITY HcclResult HcclCommInitClusterInfo(const char* clusterInfo, uint32_t rank, HcclComm* comm);
HCCL_FUNC_VISIBILITY HcclResult HcclGetRootInfo(HcclRootInfo* rootInfo);
HCCL_FUNC_VISIBILITY HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo* rootInfo, uint32_t rank,
                                                     HcclComm* comm);
HCCL_FUNC_VISIBILITY HcclResult HcclCommInitAll(uint32_t ndev, int32_t* devices, HcclComm* comms);
HCCL_FUNC_VISIBILITY HcclResult HcclCommDestroy(HcclComm comm);

/* Queries */
HCCL_FUNC_VISIBILITY HcclResult HcclGetRankSize(HcclComm comm, uint32_t* rankSize);
HCCL_FUNC_VISIBILITY HcclResult HcclGetRankId(HcclComm comm, uint32_t* rank);
HCCL_FUNC_VISIBILITY HcclResult HcclGetCommName(HcclComm comm, char* commName);
HCCL_FUNC_VISIBILITY HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult* asyncError);
HCCL_FUNC_VISIBILITY const char* HcclGetErrorString(HcclResult code);

/* Barrier and groups */
HCCL_FUNC_VISIBILITY HcclResult HcclBarrier(HcclComm comm, aclrtStream stream);
HCCL_FUNC_VISIBILITY HcclResult HcclGroupStart(void);
HCCL_FUNC_VISIBILITY HcclResult HcclGroupEnd(void);
HCCL_FUNC_VISIBILITY HcclResult HcclGroupStatusGet(bool* isGroupEnabled);

/* Fault recovery */
HCCL_FUNC_VISIBILITY HcclResult HcclCommSuspend(HcclComm comm);
HCCL_FUNC_VISIBILITY HcclResult HcclCommResume(HcclComm comm);

#ifdef __cplusplus
}
#endif

#endif /* MDEV_HCCL_COMM_H */
