/*
 * mdev -- emulated Ascend NPU boards behind the CANN Runtime API.
 *
 * acl/acl_rt_allocator.h: user-provided memory allocators bound to streams.
 *
 * Written by the mdev project from the published CANN Runtime API (API version 1.17.0):
 * every name, type, structure layout, enumerator value, constant and prototype follows the
 * published API, so that CANN programs build against this tree and link mdev's libraries.
 * The API is documented in the CANN Runtime guides; the comments here only group things.
 */

#ifndef MDEV_ACL_RT_ALLOCATOR_H
#define MDEV_ACL_RT_ALLOCATOR_H

#include "acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Callbacks a user allocator provides */
typedef void* (*aclrtAllocatorAllocFunc)(aclrtAllocator allocator, size_t size);
typedef void (*aclrtAllocatorFreeFunc)(aclrtAllocator allocator, aclrtAllocatorBlock block);
typedef void* (*aclrtAllocatorAllocAdviseFunc)(aclrtAllocator allocator, size_t size, aclrtAllocatorAddr addr);
typedef void* (*aclrtAllocatorGetAddrFromBlockFunc)(aclrtAllocatorBlock block);

/* Allocator descriptors */
ACL_FUNC_VISIBILITY aclrtAllocatorDesc aclrtAllocatorCreateDesc(void);
ACL_FUNC_VISIBILITY aclError aclrtAllocatorDestroyDesc(aclrtAllocatorDesc allocatorDesc);
ACL_FUNC_VISIBILITY aclError aclrtAllocatorSetObjToDesc(aclrtAllocatorDesc allocatorDesc, aclrtAllocator allocator);
ACL_FUNC_VISIBILITY aclError aclrtAllocatorSetAllocFuncToDesc(
        aclrtAllocatorDesc allocatorDesc, aclrtAllocatorAllocFunc func);
ACL_FUNC_VISIBILITY aclError aclrtAllocatorSetFreeFuncToDesc(
        aclrtAllocatorDesc allocatorDesc, aclrtAllocatorFreeFunc func);
ACL_FUNC_VISIBILITY aclError aclrtAllocatorSetAllocAdviseFuncToDesc(
        aclrtAllocatorDesc allocatorDesc, aclrtAllocatorAllocAdviseFunc func);
ACL_FUNC_VISIBILITY aclError aclrtAllocatorSetGetAddrFromBlockFuncToDesc(
        aclrtAllocatorDesc allocatorDesc, aclrtAllocatorGetAddrFromBlockFunc func);

/* Binding an allocator to a stream */
ACL_FUNC_VISIBILITY aclError aclrtAllocatorRegister(aclrtStream stream, aclrtAllocatorDesc allocatorDesc);
ACL_FUNC_VISIBILITY aclError aclrtAllocatorGetByStream(aclrtStream stream, aclrtAllocatorDesc* allocatorDesc,
                                                       aclrtAllocator* allocator, aclrtAllocatorAllocFunc* allocFunc,
                                                       aclrtAllocatorFreeFunc* freeFunc,
                                                       aclrtAllocatorAllocAdviseFunc* allocAdviseFunc,
                                                       aclrtAllocatorGetAddrFromBlockFunc* getAddrFromBlockFunc);
ACL_FUNC_VISIBILITY aclError aclrtAllocatorUnregister(aclrtStream stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MDEV_ACL_RT_ALLOCATOR_H */
