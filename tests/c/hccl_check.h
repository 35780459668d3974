/* hccl_check.h -- check.h's assertions for HCCL calls (an HcclResult instead of an aclError). */
#ifndef MDEV_TEST_HCCL_CHECK_H
#define MDEV_TEST_HCCL_CHECK_H

#include "check.h"
#include "hccl/hccl.h"

#define EXPECT_HCCL(call, code)                                                        \
    do {                                                                               \
        HcclResult r_ = (call);                                                        \
        if (r_ != (code)) {                                                            \
            const char* msg_ = aclGetRecentErrMsg();                                   \
            printf("FAILED %s:%d: %s returned %d, expected %d (%s)\n", __FILE__, __LINE__, \
                   #call, (int)r_, (int)(code), msg_ ? msg_ : "no message");           \
            failures++;                                                                \
        }                                                                              \
    } while (0)

#endif
