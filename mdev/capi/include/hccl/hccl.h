/*
 * mdev -- emulated Ascend NPU boards behind the CANN Runtime API.
 *
 * hccl/hccl.h: the umbrella header of HCCL programs: the collective and point-to-point
 * operations (asynchronous tasks on the caller's aclrtStream), and hccl_comm.h.
 *
 * Written by the mdev project from the published HCCL API: names and prototypes follow it.
 * The V variants take per-rank counts and displacements in elements (uint64_t arrays of
 * one entry per rank; AlltoAllVC a rank x rank matrix of counts).
 */

#ifndef MDEV_HCCL_H
#define MDEV_HCCL_H

#include "hccl/hccl_types.h"
#include "hccl/hccl_comm.h"
#include "acl/acl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Collectives */
HCCL_FUNC_VISIBILITY HcclResult HcclAllReduce(void* sendBuf, void* recvBuf, uint64_t count, HcclDataType dataType,
                                              HcclReduceOp op, HcclComm comm, aclrtStream stream);
HCCL_FUNC_VISIBILITY HcclResult HcclBroadcast(void* buf, uint64_t count, HcclDataType dataType, uint32_t root,
                                              HcclComm comm, aclrtStream stream);
HCCL_FUNC_VISIBILITY HcclResult HcclReduceScatter(void* sendBuf, void* recvBuf, uint64_t recvCount,
                                                  HcclDataType dataType, HcclReduceOp op, HcclComm comm,
                                                  aclrtStream stream);
HCCL_FUNC_VISIBILITY HcclResult HcclReduceScatterV(void* sendBuf, const void* sendCounts, const void* sendDispls,
                                                   void* recvBuf, uint64_t recvCount, HcclDataType dataType,
                                                   HcclReduceOp op, HcclComm comm, aclrtStream stream);
HCCL_FUNC_VISIBILITY HcclResult HcclScatter(void* sendBuf, void* recvBuf, uint64_t recvCount, HcclDataType dataType,
                                            uint32_t root, HcclComm comm, aclrtStream stream);
HCCL_FUNC_VISIBILITY HcclResult HcclAllGather(void* sendBuf, void* recvBuf, uint64_t sendCount, HcclDataType dataType,
                                              HcclComm comm, aclrtStream stream);
HCCL_FUNC_VISIBILITY HcclResult HcclAllGatherV(void* sendBuf, uint64_t sendCount, void* recvBuf,
                                               const void* recvCounts, const void* recvDispls, HcclDataType dataType,
                                               HcclComm comm, aclrtStream stream);
HCCL_FUNC_VISIBILITY HcclResult HcclReduce(void* sendBuf, void* recvBuf, uint64_t count, HcclDataType dataType,
                                           HcclReduceOp op, uint32_t root, HcclComm comm, aclrtStream stream);
HCCL_FUNC_VISIBILITY HcclResult HcclAlltoAll(const void* sendBuf, uint64_t sendCount, HcclDataType sendType,
                                             const void* recvBuf, uint64_t recvCount, HcclDataType recvType,
                                             HcclComm comm, aclrtStream stream);
HCCL_FUNC_VISIBILITY HcclResult HcclAlltoAllV(const void* sendBuf, const void* sendCounts, const void* sdispls,
                                              HcclDataType sendType, const void* recvBuf, const void* recvCounts,
                                              const void* rdispls, HcclDataType recvType, HcclComm comm,
                                              aclrtStream stream);
HCCL_FUNC_VISIBILITY HcclResult HcclAlltoAllVC(const void* sendBuf, const void* sendCountMatrix,
                                               HcclDataType sendType, const void* recvBuf, HcclDataType recvType,
                                               HcclComm comm, aclrtStream stream);

/* Point to point */
HCCL_FUNC_VISIBILITY HcclResult HcclSend(void* sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank,
                                         HcclComm comm, aclrtStream stream);
HCCL_FUNC_VISIBILITY HcclResult HcclRecv(void* recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank,
                                         HcclComm comm, aclrtStream stream);
HCCL_FUNC_VISIBILITY HcclResult HcclBatchSendRecv(HcclSendRecvItem* sendRecvInfo, uint32_t itemNum, HcclComm comm,
                                                  aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* MDEV_HCCL_H */
