/* errors.c -- error paths of the C API: the real codes and messages, pointers as the runtime
 * treats them, and the per-thread last error. */
#include "check.h"

int main(void)
{
    /* before aclInit: queries work, device work needs a current context */
    uint32_t count = 0;
    OK(aclrtGetDeviceCount(&count));
    EXPECT(count >= 1);
    void* dev = NULL;
    EXPECT_RET(aclrtMalloc(&dev, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_CONTEXT_NULL);
    EXPECT_MESSAGE("no current context");
    EXPECT(dev == NULL);
    const char* soc = aclrtGetSocName();
    EXPECT(soc != NULL && strncmp(soc, "Ascend", 6) == 0);

    OK(aclInit(NULL));
    EXPECT_RET(aclInit(NULL), ACL_ERROR_REPEAT_INITIALIZE);
    EXPECT_RET(aclrtSetDevice((int32_t)count + 7), ACL_ERROR_RT_INVALID_DEVICEID);
    EXPECT_MESSAGE("does not exist");
    OK(aclrtSetDevice(0));

    /* NULL outputs: nothing is done, 100000 and a message naming the parameter */
    EXPECT_RET(aclrtMalloc(NULL, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    EXPECT_MESSAGE("devPtr is NULL");
    EXPECT_RET(aclrtCreateStream(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtGetDeviceCount(NULL), ACL_ERROR_INVALID_PARAM);

    /* the last error: peek keeps it, get clears it; messages are read once */
    EXPECT_RET(aclrtGetRunMode(NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS);
    EXPECT_MESSAGE("runMode is NULL");
    EXPECT(aclGetRecentErrMsg() == NULL);

    /* wrong sizes and bad device pointers */
    OK(aclrtMalloc(&dev, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    char host[64] = {0};
    EXPECT_RET(aclrtMemcpy(dev, 16, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_MESSAGE("count 64 exceeds destMax 16");
    EXPECT_RET(aclrtMemcpy(host, sizeof host, (char*)dev + 32, 64, ACL_MEMCPY_DEVICE_TO_HOST),
               ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RET(aclrtFree((char*)dev + 8), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_MESSAGE("not the start of a live device allocation");
    EXPECT_RET(aclrtMemset(NULL, 8, 0, 8), ACL_ERROR_INVALID_PARAM);

    /* a host pointer is ordinary process memory: copies reach it */
    OK(aclrtMemset(dev, 64, 0x5A, 64));
    OK(aclrtMemcpy(host, sizeof host, dev, 64, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(host[0] == 0x5A && host[63] == 0x5A);

    /* a stream handle that names nothing */
    EXPECT_RET(aclrtSynchronizeStream((aclrtStream)(uintptr_t)0x1234), ACL_ERROR_INVALID_PARAM);

    /* a function mdev does not emulate (profiling) says so, by name */
    EXPECT_RET(aclrtProfTrace(NULL, 0, NULL), ACL_ERROR_API_NOT_SUPPORT);
    EXPECT_MESSAGE("aclrtProfTrace is not supported by mdev");

    OK(aclrtFree(dev));
    EXPECT_RET(aclrtFree(dev), ACL_ERROR_RT_PARAM_INVALID);
    OK(aclrtResetDevice(0));
    OK(aclFinalize());
    EXPECT_RET(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
    printf("errors: %d failures\n", failures);
    return failures;
}
