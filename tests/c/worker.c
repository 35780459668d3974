/* worker.c -- a shared library a Python program loads with ctypes: run_worker() starts a
 * pthread that sets a device, makes a stream, memsets, records an event and synchronises,
 * and joins it.  Loaded through ctypes.PyDLL the calling thread keeps the GIL while it
 * joins: the library must never need that GIL (torch_npu's task queue does the same). */
#include <pthread.h>
#include "check.h"

static void* work(void* unused)
{
    (void)unused;
    aclrtStream stream = NULL;
    aclrtEvent event = NULL;
    void* dev = NULL;
    unsigned char host[64];
    OK(aclrtSetDevice(0));
    OK(aclrtCreateStream(&stream));
    OK(aclrtMalloc(&dev, sizeof host, ACL_MEM_MALLOC_HUGE_FIRST));
    OK(aclrtMemsetAsync(dev, sizeof host, 0x5A, sizeof host, stream));
    OK(aclrtCreateEvent(&event));
    OK(aclrtRecordEvent(event, stream));
    OK(aclrtSynchronizeStream(stream));
    OK(aclrtMemcpy(host, sizeof host, dev, sizeof host, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(host[0] == 0x5A && host[63] == 0x5A);
    OK(aclrtDestroyEvent(event));
    OK(aclrtFree(dev));
    OK(aclrtDestroyStream(stream));
    OK(aclrtResetDevice(0));
    return NULL;
}

__attribute__((visibility("default"))) int run_worker(void)
{
    pthread_t thread;
    if (pthread_create(&thread, NULL, work, NULL) != 0) {
        return -1;
    }
    pthread_join(thread, NULL);
    return failures;
}
