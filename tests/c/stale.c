/* stale.c -- host memory unmapped, or made read-only, after the runtime first copied into
 * it: the next copy into it is ACL_ERROR_RT_PARAM_INVALID (107000), never a SIGSEGV. */
#define _DEFAULT_SOURCE
#include <sys/mman.h>
#include "check.h"

#define SIZE 8192

int main(void)
{
    void* dev = NULL;
    OK(aclInit(NULL));
    OK(aclrtSetDevice(0));
    OK(aclrtMalloc(&dev, SIZE, ACL_MEM_MALLOC_HUGE_FIRST));
    OK(aclrtMemset(dev, SIZE, 0x7E, SIZE));
    unsigned char* host = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT(host != MAP_FAILED);
    OK(aclrtMemcpy(host, SIZE, dev, SIZE, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(host[SIZE - 1] == 0x7E);
    EXPECT(munmap(host, SIZE) == 0);
    EXPECT_RET(aclrtMemcpy(host, SIZE, dev, SIZE, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RET(aclrtMemcpy(dev, SIZE, host, SIZE, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID);

    host = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT(host != MAP_FAILED);
    OK(aclrtMemcpy(host, SIZE, dev, SIZE, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(mprotect(host, SIZE, PROT_READ) == 0);
    EXPECT_RET(aclrtMemcpy(host, SIZE, dev, SIZE, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_RT_PARAM_INVALID);
    OK(aclrtMemcpy(dev, SIZE, host, SIZE, ACL_MEMCPY_HOST_TO_DEVICE));      /* reading it still works */
    EXPECT_RET(aclrtMemset(host, SIZE, 0, SIZE), ACL_ERROR_RT_PARAM_INVALID);
    munmap(host, SIZE);
    OK(aclrtFree(dev));
    OK(aclrtResetDevice(0));
    OK(aclFinalize());
    printf("stale: %d failures\n", failures);
    return failures;
}
