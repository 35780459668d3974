/* async.c -- asynchronous calls that the host agent lets return before it runs them
 * (mdev.capi.asynchronous): once a first call of each kind succeeded, later ones are checked
 * in the C library and queued.  Every answer must still be the runtime's own: the same
 * program passes through the embedded library, which validates every call synchronously.
 *   order       a later synchronous call sees every earlier asynchronous one applied, the
 *               calls of another thread that returned before it too
 *   codes       wrong sizes, overruns, NULL, wild and guard-page pointers, freed memory,
 *               destroyed and garbage streams and events, a kind out of range, an event
 *               that cannot be waited on, another context
 *   pageable    an asynchronous copy to pageable memory is done when the call returns */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <sys/mman.h>

#include "check.h"

#define N 4096
#define ROUNDS 400
#define FILLERS 4
#define PART (N / FILLERS)
#define TIMES 6

static void* dev;
static aclrtStream stream;
static aclrtContext context;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t posted = PTHREAD_COND_INITIALIZER;
static int done;

/* other threads queue many fills, each of its part, and say so: the main thread's
 * synchronisation must wait for all of them, each part's last fill (0x70 + part) included */
static void* filler(void* part)
{
    int k = (int)(intptr_t)part;
    OK(aclrtSetCurrentContext(context));
    for (int i = 0; i < ROUNDS; i++) {
        OK(aclrtMemsetAsync((char*)dev + k * PART, PART, i == ROUNDS - 1 ? 0x70 + k : i & 0x3F, PART, stream));
    }
    pthread_mutex_lock(&lock);
    done++;
    pthread_cond_broadcast(&posted);
    while (done < 2 * FILLERS) {       /* alive until checked: an ending thread's calls are run first */
        pthread_cond_wait(&posted, &lock);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

int main(void)
{
    unsigned char host[N];
    OK(aclInit(NULL));
    OK(aclrtSetDevice(0));
    OK(aclrtGetCurrentContext(&context));
    OK(aclrtCreateStream(&stream));
    OK(aclrtMalloc(&dev, N, ACL_MEM_MALLOC_HUGE_FIRST));
    void* other = NULL;
    OK(aclrtMalloc(&other, N, ACL_MEM_MALLOC_HUGE_FIRST));
    aclrtEvent event = NULL, untimed = NULL;
    OK(aclrtCreateEvent(&event));
    OK(aclrtCreateEventWithFlag(&untimed, ACL_EVENT_TIME_LINE));

    /* order: the first calls of each kind are made synchronously, the later ones queued */
    for (int i = 0; i < 3; i++) {
        OK(aclrtMemsetAsync(dev, N, 0x11 + i, N, stream));
        OK(aclrtMemsetAsync(dev, N, 0x22 + i, 16, stream));
        OK(aclrtMemcpyAsync(other, N, dev, N, ACL_MEMCPY_DEVICE_TO_DEVICE, stream));
        OK(aclrtRecordEvent(event, stream));
        OK(aclrtStreamWaitEvent(stream, event));
        OK(aclrtRecordEvent(untimed, stream));
    }
    OK(aclrtSynchronizeStream(stream));
    OK(aclrtMemcpy(host, N, other, N, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(host[0] == 0x24 && host[15] == 0x24 && host[16] == 0x13 && host[N - 1] == 0x13);
    OK(aclrtQueryEventStatus(event, &(aclrtEventRecordedStatus){0}));

    /* other threads' queued calls returned before this thread synchronises: they count
     * (a race the agent must always win: tried several times) */
    for (int t = 0; t < TIMES; t++) {
        pthread_t threads[FILLERS];
        done = 0;
        for (int k = 0; k < FILLERS; k++) {
            EXPECT(pthread_create(&threads[k], NULL, filler, (void*)(intptr_t)k) == 0);
        }
        pthread_mutex_lock(&lock);
        while (done < FILLERS) {
            pthread_cond_wait(&posted, &lock);
        }
        pthread_mutex_unlock(&lock);
        OK(aclrtSynchronizeStream(stream));
        OK(aclrtMemcpy(host, N, dev, N, ACL_MEMCPY_DEVICE_TO_HOST));
        for (int k = 0; k < FILLERS; k++) {
            EXPECT(host[k * PART] == 0x70 + k && host[k * PART + PART - 1] == 0x70 + k);
        }
        pthread_mutex_lock(&lock);
        done = 2 * FILLERS;
        pthread_cond_broadcast(&posted);
        pthread_mutex_unlock(&lock);
        for (int k = 0; k < FILLERS; k++) {
            pthread_join(threads[k], NULL);
        }
    }

    /* codes: each as the synchronous runtime gives it */
    EXPECT_RET(aclrtMemsetAsync(dev, 8, 0, 16, stream), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_MESSAGE("exceeds maxCount");
    EXPECT_RET(aclrtMemsetAsync((char*)dev + N - 8, 16, 0, 16, stream), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_MESSAGE("overruns its allocation");
    EXPECT_RET(aclrtMemsetAsync(NULL, 16, 0, 16, stream), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtMemcpyAsync(other, 8, dev, 16, ACL_MEMCPY_DEVICE_TO_DEVICE, stream), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RET(aclrtMemcpyAsync(other, N, dev, 16, (aclrtMemcpyKind)9, stream), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtStreamWaitEvent(stream, untimed), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_MESSAGE("ACL_EVENT_SYNC");
    EXPECT_RET(aclrtMemsetAsync(dev, N, 0, N, (aclrtStream)(uintptr_t)0x1234), ACL_ERROR_INVALID_PARAM);
    EXPECT_RET(aclrtRecordEvent((aclrtEvent)(uintptr_t)0x1234, stream), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_RET(aclrtMemsetAsync((void*)(uintptr_t)0x10, 16, 0, 16, stream), ACL_ERROR_RT_PARAM_INVALID);
    void* guard = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT(guard != MAP_FAILED);
    EXPECT_RET(aclrtMemcpyAsync(guard, 16, dev, 16, ACL_MEMCPY_DEVICE_TO_HOST, stream), ACL_ERROR_RT_PARAM_INVALID);
    munmap(guard, 4096);

    /* pageable memory: the copy is done when the call returns */
    memset(host, 0, sizeof host);
    OK(aclrtMemcpyAsync(host, N, dev, N, ACL_MEMCPY_DEVICE_TO_HOST, stream));
    EXPECT(host[0] == 0x70 && host[N - 1] == 0x70 + FILLERS - 1);

    /* another context current: the stream is not its own */
    aclrtContext second = NULL;
    OK(aclrtCreateContext(&second, 0));
    EXPECT_RET(aclrtMemsetAsync(dev, N, 0, N, stream), ACL_ERROR_RT_STREAM_CONTEXT);
    EXPECT_RET(aclrtRecordEvent(event, stream), ACL_ERROR_RT_STREAM_CONTEXT);
    OK(aclrtSetCurrentContext(context));
    OK(aclrtDestroyContext(second));
    OK(aclrtSetCurrentContext(context));
    OK(aclrtMemsetAsync(dev, N, 1, N, stream));
    OK(aclrtMemsetAsync(dev, N, 2, N, stream));

    /* freed memory, a destroyed event and stream */
    OK(aclrtSynchronizeStream(stream));
    OK(aclrtFree(other));
    EXPECT_RET(aclrtMemcpyAsync(other, N, dev, N, ACL_MEMCPY_DEVICE_TO_DEVICE, stream), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_MESSAGE("not inside a live device allocation");
    OK(aclrtDestroyEvent(event));
    EXPECT_RET(aclrtRecordEvent(event, stream), ACL_ERROR_RT_PARAM_INVALID);
    OK(aclrtDestroyStream(stream));
    EXPECT_RET(aclrtMemsetAsync(dev, N, 0, N, stream), ACL_ERROR_INVALID_PARAM);

    OK(aclrtDestroyEvent(untimed));
    OK(aclrtFree(dev));
    OK(aclrtResetDevice(0));
    OK(aclFinalize());
    printf("async: %d failures\n", failures);
    return failures;
}
