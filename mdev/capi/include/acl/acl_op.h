/*
 * mdev -- emulated Ascend NPU boards behind the CANN Runtime API.
 *
 * acl/acl_op.h: the single-operator (aclop) attributes.  Declared so that frameworks built
 * against CANN (torch_npu) load; mdev computes operators through aclnn (aclnn/acl_meta.h),
 * and these answer ACL_ERROR_API_NOT_SUPPORT.
 *
 * Written by the mdev project from the published CANN API: every name, type, enumerator
 * value and prototype follows the published API, so that CANN programs build against this
 * tree and link mdev's libraries.
 */

#ifndef MDEV_ACL_OP_H
#define MDEV_ACL_OP_H

#include "acl/acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aclopAttr aclopAttr;

typedef enum aclEngineType {
    ACL_ENGINE_SYS,
    ACL_ENGINE_AICORE,
    ACL_ENGINE_VECTOR
} aclopEngineType;

ACL_FUNC_VISIBILITY aclopAttr* aclopCreateAttr(void);
ACL_FUNC_VISIBILITY void aclopDestroyAttr(const aclopAttr* attr);
ACL_FUNC_VISIBILITY aclError aclopSetAttrBool(aclopAttr* attr, const char* attrName, uint8_t attrValue);
ACL_FUNC_VISIBILITY aclError aclopSetAttrInt(aclopAttr* attr, const char* attrName, int64_t attrValue);
ACL_FUNC_VISIBILITY aclError aclopSetAttrFloat(aclopAttr* attr, const char* attrName, float attrValue);
ACL_FUNC_VISIBILITY aclError aclopSetAttrString(aclopAttr* attr, const char* attrName, const char* attrValue);
ACL_FUNC_VISIBILITY aclError aclopSetAttrDataType(aclopAttr* attr, const char* attrName, aclDataType attrValue);
ACL_FUNC_VISIBILITY aclError aclopSetAttrListBool(aclopAttr* attr, const char* attrName, int numValues,
                                                  const uint8_t* values);
ACL_FUNC_VISIBILITY aclError aclopSetAttrListInt(aclopAttr* attr, const char* attrName, int numValues,
                                                 const int64_t* values);
ACL_FUNC_VISIBILITY aclError aclopSetAttrListFloat(aclopAttr* attr, const char* attrName, int numValues,
                                                   const float* values);
ACL_FUNC_VISIBILITY aclError aclopSetAttrListListInt(aclopAttr* attr, const char* attrName, int numLists,
                                                     const int* numValues, const int64_t* const* values);

#ifdef __cplusplus
}
#endif

#endif /* MDEV_ACL_OP_H */
