/* drill.c -- the C-ABI drill: every output pointer NULL (ACL_ERROR_INVALID_PARAM, nothing
 * done), destroyed and garbage handles, and two threads synchronising a stream a third
 * thread destroys (each answer a code: success, or the stream gone; nobody hangs). */
#include <pthread.h>

#include "check.h"

static aclrtStream shared;
static aclrtContext context;

static void* synchronise(void* unused)
{
    (void)unused;
    OK(aclrtSetCurrentContext(context));
    for (int i = 0; i < 50; i++) {
        aclError ret = aclrtSynchronizeStream(shared);
        EXPECT(ret == ACL_SUCCESS || ret == ACL_ERROR_INVALID_PARAM);
    }
    return NULL;
}

int main(void)
{
    OK(aclInit(NULL));
    OK(aclrtSetDevice(0));
    OK(aclrtGetCurrentContext(&context));
    aclrtStream stream = NULL;
    aclrtEvent event = NULL, other = NULL;
    OK(aclrtCreateStream(&stream));
    OK(aclrtCreateEvent(&event));
    OK(aclrtCreateEvent(&other));
    size_t total = 0, free_ = 0;
    float ms = 0;

    /* NULL outputs */
    EXPECT_RET(aclrtGetDevice(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtGetDeviceCount(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtCreateStream(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtCreateStreamWithConfig(NULL, 0, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtCreateEvent(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtCreateEventWithFlag(NULL, ACL_EVENT_SYNC), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtMalloc(NULL, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtMallocHost(NULL, 64), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtGetCurrentContext(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtCreateContext(NULL, 0), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtGetRunMode(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtGetMemInfo(ACL_HBM_MEM, NULL, &total), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtGetMemInfo(ACL_HBM_MEM, &free_, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtQueryEventStatus(event, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtEventElapsedTime(NULL, event, other), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtStreamGetId(stream, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_AICORE_CORE_NUM, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtDeviceCanAccessPeer(NULL, 0, 0), ACL_ERROR_INVALID_PARAM);

    /* destroyed and garbage handles */
    OK(aclrtDestroyEvent(other));
    EXPECT_RET(aclrtRecordEvent(other, stream), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RET(aclrtEventElapsedTime(&ms, other, event), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RET(aclrtDestroyEvent(other), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RET(aclrtSynchronizeEvent((aclrtEvent)(uintptr_t)0xdead), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RET(aclrtDestroyStream((aclrtStream)(uintptr_t)0xdead), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtSetCurrentContext((aclrtContext)(uintptr_t)0xdead), ACL_ERROR_RT_PARAM_INVALID);

    /* two threads synchronise a stream while this one destroys it */
    OK(aclrtCreateStream(&shared));
    pthread_t threads[2];
    for (int k = 0; k < 2; k++) {
        EXPECT(pthread_create(&threads[k], NULL, synchronise, NULL) == 0);
    }
    OK(aclrtDestroyStream(shared));
    for (int k = 0; k < 2; k++) {
        pthread_join(threads[k], NULL);
    }

    OK(aclrtDestroyEvent(event));
    OK(aclrtDestroyStream(stream));
    OK(aclrtResetDevice(0));
    OK(aclFinalize());
    printf("drill: %d failures\n", failures);
    return failures;
}
