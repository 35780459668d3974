/* lost.c -- the device process is SIGKILLed while the program runs (it prints "ready" and
 * waits for a line on stdin meanwhile): every later call touching the device returns
 * ACL_ERROR_RT_SOCKET_CLOSE (507901), asynchronous ones the agent had let return at once
 * before included.  Then the supervisor is killed too ("again", another
 * line): calls fail with codes, and the program ends normally (no SIGPIPE). */
#include "check.h"

int main(void)
{
    void* dev = NULL;
    aclrtStream stream = NULL;
    unsigned char host[64];
    char line[16];
    OK(aclInit(NULL));
    OK(aclrtSetDevice(0));
    OK(aclrtCreateStream(&stream));
    OK(aclrtMalloc(&dev, sizeof host, ACL_MEM_MALLOC_HUGE_FIRST));
    aclrtEvent event = NULL;
    OK(aclrtCreateEvent(&event));
    for (int i = 0; i < 2; i++) {      /* the second round returns before the agent runs it */
        OK(aclrtMemsetAsync(dev, sizeof host, 1, sizeof host, stream));
        OK(aclrtRecordEvent(event, stream));
        OK(aclrtSynchronizeStream(stream));
    }
    printf("ready\n");
    fflush(stdout);
    if (fgets(line, sizeof line, stdin) == NULL) {
        return 99;
    }
    for (int i = 0; i < 3; i++) {
        EXPECT_RET(aclrtMemsetAsync(dev, sizeof host, 1, sizeof host, stream), ACL_ERROR_RT_SOCKET_CLOSE);
        EXPECT_RET(aclrtRecordEvent(event, stream), ACL_ERROR_RT_SOCKET_CLOSE);
        EXPECT_RET(aclrtSynchronizeStream(stream), ACL_ERROR_RT_SOCKET_CLOSE);
        EXPECT_RET(aclrtMemcpy(host, sizeof host, dev, sizeof host, ACL_MEMCPY_DEVICE_TO_HOST),
                   ACL_ERROR_RT_SOCKET_CLOSE);
    }
    printf("again\n");
    fflush(stdout);
    if (fgets(line, sizeof line, stdin) == NULL) {
        return 99;
    }
    void* other = NULL;
    for (int i = 0; i < 3; i++) {
        EXPECT(aclrtSetDevice(1) != ACL_SUCCESS || aclrtMalloc(&other, 64, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS);
        EXPECT(aclrtMemcpy(host, sizeof host, dev, sizeof host, ACL_MEMCPY_DEVICE_TO_HOST) != ACL_SUCCESS);
    }
    aclrtResetDevice(0);
    aclFinalize();
    printf("lost: %d failures\n", failures);
    return failures;
}
