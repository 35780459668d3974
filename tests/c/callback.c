/* callback.c -- C callbacks launched on a stream run, in order with the stream's tasks, and
 * may call the API: a host function (aclrtLaunchHostFunc) and a reported callback
 * (aclrtLaunchCallback, run by the thread subscribed with aclrtSubscribeReport). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include "check.h"

#define SIZE 256

typedef struct {
    void* dev;            /* device memory the stream has set before the callback */
    unsigned char seen;   /* what the callback read from it, through the API */
    uint32_t devices;
    int calls;
} state;

static atomic_int subscribed, stop;

static void host_func(void* arg)
{
    state* s = arg;
    unsigned char host[SIZE];
    /* the runtime's callback thread has no current device until it sets one */
    if (aclrtSetDevice(0) == ACL_SUCCESS &&
        aclrtMemcpy(host, SIZE, s->dev, SIZE, ACL_MEMCPY_DEVICE_TO_HOST) == ACL_SUCCESS) {
        s->seen = host[SIZE - 1];
    }
    aclrtResetDevice(0);
    s->calls++;
}

static void reported(void* arg)
{
    state* s = arg;
    aclrtGetDeviceCount(&s->devices);
    s->calls++;
}

static void* report_thread(void* unused)
{
    (void)unused;
    OK(aclrtSetDevice(0));
    while (!atomic_load(&subscribed)) {       /* processing before the subscription is an error */
        struct timespec tick = {0, 1000 * 1000};
        nanosleep(&tick, NULL);
    }
    while (!atomic_load(&stop)) {
        aclError ret = aclrtProcessReport(100);
        EXPECT(ret == ACL_SUCCESS || ret == ACL_ERROR_RT_REPORT_TIMEOUT);
    }
    return NULL;
}

int main(void)
{
    OK(aclInit(NULL));
    OK(aclrtSetDevice(0));
    aclrtStream stream = NULL;
    OK(aclrtCreateStream(&stream));
    state s = {NULL, 0, 0, 0};
    OK(aclrtMalloc(&s.dev, SIZE, ACL_MEM_MALLOC_HUGE_FIRST));

    OK(aclrtMemsetAsync(s.dev, SIZE, 0x42, SIZE, stream));
    OK(aclrtLaunchHostFunc(stream, host_func, &s));
    OK(aclrtSynchronizeStream(stream));
    EXPECT(s.calls == 1 && s.seen == 0x42);

    /* without a subscribed thread a reported callback has nowhere to run */
    EXPECT_RET(aclrtLaunchCallback(reported, &s, ACL_CALLBACK_BLOCK, stream), ACL_ERROR_RT_STREAM_NO_CB_REG);
    pthread_t thread;
    EXPECT(pthread_create(&thread, NULL, report_thread, NULL) == 0);
    OK(aclrtSubscribeReport((uint64_t)thread, stream));
    atomic_store(&subscribed, 1);
    OK(aclrtLaunchCallback(reported, &s, ACL_CALLBACK_BLOCK, stream));
    OK(aclrtSynchronizeStream(stream));
    EXPECT(s.calls == 2 && s.devices >= 1);
    /* the thread stops processing before it is unsubscribed: a report processed after the
     * unsubscription is rightly refused (ACL_ERROR_RT_THREAD_SUBSCRIBE) */
    atomic_store(&stop, 1);
    pthread_join(thread, NULL);
    OK(aclrtUnSubscribeReport((uint64_t)thread, stream));

    OK(aclrtFree(s.dev));
    OK(aclrtDestroyStream(stream));
    OK(aclrtResetDevice(0));
    OK(aclFinalize());
    printf("callback: %d failures\n", failures);
    return failures;
}
