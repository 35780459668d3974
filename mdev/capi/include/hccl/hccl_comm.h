/*
 * mdev -- emulated Ascend NPU boards behind the CANN Runtime API.
 *
 * hccl/hccl_comm.h: communicators (made from a rank table, a root info or all in one
 * process, with or without an HcclCommConfig; sub-communicators of a set of ranks), their
 * queries and destruction, process-wide settings, memory ranges and symmetric windows,
 * barrier, groups, error strings.
 *
 * Written by the mdev project from the published HCCL API: names and prototypes follow it.
 * Functions mdev does not emulate (suspend / resume, exchanging registered memory, backup
 * NICs) are declared and
 * return HCCL_E_NOT_SUPPORT with a message (aclGetRecentErrMsg).
 */

#ifndef MDEV_HCCL_COMM_H
#define MDEV_HCCL_COMM_H

#include <stdbool.h>
#include <stddef.h>

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

/* Communicators with a configuration (HcclCommConfigInit first) */
HCCL_FUNC_VISIBILITY HcclResult HcclCommInitRootInfoConfig(uint32_t nRanks, const HcclRootInfo* rootInfo,
                                                           uint32_t rank, const HcclCommConfig* config,
                                                           HcclComm* comm);
HCCL_FUNC_VISIBILITY HcclResult HcclCommInitClusterInfoConfig(const char* clusterInfo, uint32_t rank,
                                                              HcclCommConfig* config, HcclComm* comm);
/* A sub-communicator of the ranks rankIds[0..rankNum) of the global communicator *comm, made
   without a new rendezvous; a rank outside it passes rankIds NULL and gets no communicator */
HCCL_FUNC_VISIBILITY HcclResult HcclCreateSubCommConfig(HcclComm* comm, uint32_t rankNum, uint32_t* rankIds,
                                                        uint64_t subCommId, uint32_t subCommRankId,
                                                        HcclCommConfig* config, HcclComm* subComm);
/* The configuration capability: a field of HcclCommConfigCapability below it is honoured */
HCCL_FUNC_VISIBILITY uint32_t HcclGetCommConfigCapability(void);

/* Process-wide settings */
HCCL_FUNC_VISIBILITY HcclResult HcclSetConfig(HcclConfig config, HcclConfigValue configValue);
HCCL_FUNC_VISIBILITY HcclResult HcclGetConfig(HcclConfig config, HcclConfigValue* configValue);

/* Zero copy: a reserved address range whose mappings the communicator may use directly */
HCCL_FUNC_VISIBILITY HcclResult HcclCommSetMemoryRange(HcclComm comm, void* baseVirPtr, size_t size,
                                                       size_t alignment, uint64_t flags);
HCCL_FUNC_VISIBILITY HcclResult HcclCommUnsetMemoryRange(HcclComm comm, void* baseVirPtr);
HCCL_FUNC_VISIBILITY HcclResult HcclCommActivateCommMemory(HcclComm comm, void* virPtr, size_t size,
                                                           size_t offset, aclrtDrvMemHandle handle,
                                                           uint64_t flags);
HCCL_FUNC_VISIBILITY HcclResult HcclCommDeactivateCommMemory(HcclComm comm, void* virPtr);

/* Memory registered with a communicator (torch_npu's window memory), its exchange with peers */
HCCL_FUNC_VISIBILITY HcclResult HcclCommRegister(HcclComm comm, void* addr, uint64_t size, void** handle,
                                                 uint32_t flag);
HCCL_FUNC_VISIBILITY HcclResult HcclCommDeregister(HcclComm comm, void* handle);
HCCL_FUNC_VISIBILITY HcclResult HcclCommExchangeMem(HcclComm comm, void* windowHandle, uint32_t* peerRanks,
                                                    uint32_t peerRankNum);
/* Switching a rank to its backup NIC (mdev's devices have none: HCCL_E_NOT_SUPPORT) */
HCCL_FUNC_VISIBILITY HcclResult HcclCommWorkingDevNicSet(HcclComm comm, uint32_t* ranks, bool* useBackup,
                                                         uint32_t nRanks);

/* Symmetric memory windows */
HCCL_FUNC_VISIBILITY HcclResult HcclCommSymWinRegister(HcclComm comm, void* addr, uint64_t size,
                                                       HcclCommSymWindow* winHandle, uint32_t flag);
HCCL_FUNC_VISIBILITY HcclResult HcclCommSymWinDeregister(HcclCommSymWindow winHandle);

/* Fills the configuration's header (its size, magic word and version) and every field's
   "not set" value: what HcclCommInitRootInfoConfig expects of a configuration */
static inline void HcclCommConfigInit(HcclCommConfig* config)
{
    typedef struct {
        size_t size;
        uint32_t magicWord;
        uint32_t version;
        uint64_t reserved;
    } HcclCommConfigHeader;
    HcclCommConfigHeader* header;
    if (config == NULL) {
        return;
    }
    header = (HcclCommConfigHeader*)config;
    header->size = sizeof(HcclCommConfig);
    header->magicWord = HCCL_COMM_CONFIG_MAGIC_WORD;
    header->version = HCCL_COMM_CONFIG_VERSION;
    header->reserved = 0;
    config->hcclBufferSize = HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET;
    config->hcclDeterministic = HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET;
    config->hcclCommName[0] = '\0';
    config->hcclUdi[0] = '\0';
    config->hcclOpExpansionMode = HCCL_COMM_DEFAULT_OP_EXPANSION_MODE;
    config->hcclRdmaTrafficClass = HCCL_COMM_TRAFFIC_CLASS_CONFIG_NOT_SET;
    config->hcclRdmaServiceLevel = HCCL_COMM_SERVICE_LEVEL_CONFIG_NOT_SET;
    config->hcclWorldRankID = 0;
    config->hcclJobID = 0;
    config->aclGraphZeroCopyEnable = 0;
    config->hcclExecTimeOut = HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET;
    config->hcclAlgo[0] = '\0';
    config->hcclRetryEnable[0] = '\0';
    config->hcclRetryParams[0] = '\0';
    config->hcclBufferName[0] = '\0';
    config->hcclQos = HCCL_COMM_QOS_CONFIG_NOT_SET;
    config->hcclSymWinMaxMemSizePerRank = HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE;
}

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
