/* hccl_check.h -- check.h's assertions for HCCL calls (an HcclResult instead of an aclError). */
#ifndef MDEV_TEST_HCCL_CHECK_H
#define MDEV_TEST_HCCL_CHECK_H

#include "check.h"
#include "hccl/hccl.h"

#define EXPECT_HCCL(call, code) EXPECT_CODE(HcclResult, call, code)

#endif
