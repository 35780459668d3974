/* fork.c -- after fork() the child has a session of its own: it makes and frees its own
 * memory, cannot reach the parent's, and its aclFinalize leaves the parent working. */
#define _POSIX_C_SOURCE 200809L
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"

#define SIZE 4096

int main(void)
{
    unsigned char host[SIZE];
    void* dev = NULL;
    aclrtStream stream = NULL;
    OK(aclInit(NULL));
    OK(aclrtSetDevice(0));
    OK(aclrtCreateStream(&stream));
    OK(aclrtMalloc(&dev, SIZE, ACL_MEM_MALLOC_HUGE_FIRST));
    OK(aclrtMemset(dev, SIZE, 0x11, SIZE));
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        void* mine = NULL;
        OK(aclInit(NULL));
        OK(aclrtSetDevice(0));
        /* the parent's memory is not the child's: its address is no allocation here */
        EXPECT_RET(aclrtMemcpy(host, SIZE, dev, SIZE, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_RT_PARAM_INVALID);
        EXPECT_RET(aclrtMemset(dev, SIZE, 0x22, SIZE), ACL_ERROR_RT_PARAM_INVALID);
        OK(aclrtMalloc(&mine, SIZE, ACL_MEM_MALLOC_HUGE_FIRST));
        OK(aclrtMemset(mine, SIZE, 0x33, SIZE));
        OK(aclrtMemcpy(host, SIZE, mine, SIZE, ACL_MEMCPY_DEVICE_TO_HOST));
        EXPECT(host[0] == 0x33);
        OK(aclrtFree(mine));
        OK(aclrtResetDevice(0));
        OK(aclFinalize());
        printf("child: %d failures\n", failures);
        fflush(stdout);
        _exit(failures);
    }
    int status = -1;
    EXPECT(child > 0 && waitpid(child, &status, 0) == child);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    OK(aclrtMemsetAsync(dev, SIZE / 2, 0x44, SIZE / 2, stream));
    OK(aclrtSynchronizeStream(stream));
    OK(aclrtMemcpy(host, SIZE, dev, SIZE, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(host[0] == 0x44 && host[SIZE - 1] == 0x11);
    OK(aclrtFree(dev));
    OK(aclrtDestroyStream(stream));
    OK(aclrtResetDevice(0));
    OK(aclFinalize());
    printf("parent: %d failures\n", failures);
    return failures;
}
