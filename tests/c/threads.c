/* threads.c -- two threads, one device each, submitting and synchronising at the same time:
 * each keeps its own current device and last error; neither blocks the other. */
#include <pthread.h>
#include "check.h"

#define ROUNDS 50
#define SIZE 4096

typedef struct {
    int32_t device;
    int failures;
    int32_t current;
    aclError last;
} work;

static void* run(void* arg)
{
    work* w = arg;
    unsigned char host[SIZE];
    void* dev = NULL;
    aclrtStream stream = NULL;
    if (aclrtSetDevice(w->device) != ACL_SUCCESS || aclrtCreateStream(&stream) != ACL_SUCCESS ||
        aclrtMalloc(&dev, SIZE, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {
        w->failures++;
        return NULL;
    }
    for (int round = 0; round < ROUNDS; round++) {
        int value = (w->device * 100 + round) & 0xFF;
        if (aclrtMemsetAsync(dev, SIZE, value, SIZE, stream) != ACL_SUCCESS ||
            aclrtSynchronizeStream(stream) != ACL_SUCCESS ||
            aclrtMemcpy(host, SIZE, dev, SIZE, ACL_MEMCPY_DEVICE_TO_HOST) != ACL_SUCCESS ||
            host[0] != value || host[SIZE - 1] != value) {
            w->failures++;
        }
    }
    /* this thread's own error, not the other's */
    aclrtGetRunMode(NULL);
    w->last = aclrtGetLastError(ACL_RT_THREAD_LEVEL);
    aclrtGetDevice(&w->current);
    aclrtFree(dev);
    aclrtDestroyStream(stream);
    aclrtResetDevice(w->device);
    return NULL;
}

int main(void)
{
    OK(aclInit(NULL));
    work works[2] = {{0, 0, -1, 0}, {1, 0, -1, 0}};
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) {
        EXPECT(pthread_create(&threads[i], NULL, run, &works[i]) == 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(threads[i], NULL);
        EXPECT(works[i].failures == 0);
        EXPECT(works[i].current == works[i].device);
        EXPECT(works[i].last == ACL_ERROR_INVALID_PARAM);
    }
    /* the main thread never set a device and saw no error */
    int32_t device = -1;
    EXPECT_RET(aclrtGetDevice(&device), ACL_ERROR_RT_CONTEXT_NULL);
    aclrtGetLastError(ACL_RT_THREAD_LEVEL);
    OK(aclFinalize());
    printf("threads: %d failures\n", failures);
    return failures;
}
