/* check.h -- the assertions of mdev's C tests: each failure is printed, main returns their count. */
#ifndef MDEV_TEST_CHECK_H
#define MDEV_TEST_CHECK_H

#include <stdio.h>
#include <string.h>
#include "acl/acl.h"

static int failures;

#define EXPECT(cond)                                                                   \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            printf("FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond);                   \
            failures++;                                                                \
        }                                                                              \
    } while (0)

/* the call returns `code`, a value of `type` (aclError, HcclResult, ...) */
#define EXPECT_CODE(type, call, code)                                                  \
    do {                                                                               \
        type ret_ = (call);                                                            \
        if (ret_ != (type)(code)) {                                                    \
            const char* msg_ = aclGetRecentErrMsg();                                   \
            printf("FAILED %s:%d: %s returned %d, expected %d (%s)\n", __FILE__, __LINE__, \
                   #call, (int)ret_, (int)(code), msg_ ? msg_ : "no message");         \
            failures++;                                                                \
        }                                                                              \
    } while (0)

/* the call returns `code` (an aclError) */
#define EXPECT_RET(call, code) EXPECT_CODE(aclError, call, code)

#define OK(call) EXPECT_RET(call, ACL_SUCCESS)

/* the thread's recent error message contains `text` */
#define EXPECT_MESSAGE(text)                                                           \
    do {                                                                               \
        const char* msg_ = aclGetRecentErrMsg();                                       \
        if (msg_ == NULL || strstr(msg_, (text)) == NULL) {                            \
            printf("FAILED %s:%d: message %s lacks \"%s\"\n", __FILE__, __LINE__,      \
                   msg_ ? msg_ : "(null)", (text));                                    \
            failures++;                                                                \
        }                                                                              \
    } while (0)

#endif
