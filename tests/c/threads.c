/* threads.c -- two threads, one device each, submitting and synchronising at the same time:
 * each keeps its own current device and last error; neither blocks the other.  Then a thread
 * blocked in aclrtSynchronizeStream does not keep the main thread from releasing it (a
 * blocking call holds no lock the API's other callers need). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
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

typedef struct {
    aclrtStream stream;
    atomic_int syncing;
    aclError ret;
} blocked;

static void* wait_for_release(void* arg)
{
    blocked* b = arg;
    aclrtSetDevice(0);
    atomic_store(&b->syncing, 1);
    b->ret = aclrtSynchronizeStream(b->stream);    /* held by a value wait until main writes */
    aclrtResetDevice(0);
    return NULL;
}

static void release_from_main(void)
{
    OK(aclrtSetDevice(0));
    void* word = NULL;
    OK(aclrtMalloc(&word, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    OK(aclrtMemset(word, 64, 0, 64));
    blocked b = {NULL, 0, -1};
    aclrtStream releaser = NULL;
    OK(aclrtCreateStream(&b.stream));
    OK(aclrtCreateStream(&releaser));
    OK(aclrtValueWait(word, 1, ACL_STREAM_WAIT_VALUE_EQ, b.stream));
    pthread_t thread;
    EXPECT(pthread_create(&thread, NULL, wait_for_release, &b) == 0);
    while (!atomic_load(&b.syncing)) {
        struct timespec tick = {0, 1000 * 1000};
        nanosleep(&tick, NULL);
    }
    OK(aclrtValueWrite(word, 1, 0, releaser));
    pthread_join(thread, NULL);
    EXPECT(b.ret == ACL_SUCCESS);
    OK(aclrtDestroyStream(releaser));
    OK(aclrtDestroyStream(b.stream));
    OK(aclrtFree(word));
    OK(aclrtResetDevice(0));
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
    release_from_main();
    OK(aclFinalize());
    printf("threads: %d failures\n", failures);
    return failures;
}
