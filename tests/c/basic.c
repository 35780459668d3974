/* basic.c -- a plain CANN program (compiled with -Wall -Wextra -Werror): pinned and device
 * memory, asynchronous copies on a stream, events, on whatever board the environment names. */
#include "check.h"

#define COUNT 4096

int main(void)
{
    OK(aclInit(NULL));
    uint32_t devices = 0;
    OK(aclrtGetDeviceCount(&devices));
    int32_t last = (int32_t)devices - 1;
    OK(aclrtSetDevice(last));
    aclrtStream stream = NULL;
    OK(aclrtCreateStream(&stream));
    aclrtEvent start = NULL, end = NULL;
    OK(aclrtCreateEvent(&start));
    OK(aclrtCreateEvent(&end));

    float* host = NULL;
    void* dev = NULL;
    OK(aclrtMallocHost((void**)&host, COUNT * sizeof(float)));
    OK(aclrtMalloc(&dev, COUNT * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    for (int i = 0; i < COUNT; i++) {
        host[i] = (float)i * 0.5f;
    }
    OK(aclrtRecordEvent(start, stream));
    OK(aclrtMemcpyAsync(dev, COUNT * sizeof(float), host, COUNT * sizeof(float), ACL_MEMCPY_HOST_TO_DEVICE, stream));
    OK(aclrtMemsetAsync(host, COUNT * sizeof(float), 0, COUNT * sizeof(float), stream));
    OK(aclrtMemcpyAsync(host, COUNT * sizeof(float), dev, COUNT * sizeof(float), ACL_MEMCPY_DEVICE_TO_HOST, stream));
    OK(aclrtRecordEvent(end, stream));
    OK(aclrtSynchronizeEvent(end));
    int same = 1;
    for (int i = 0; i < COUNT; i++) {
        same &= host[i] == (float)i * 0.5f;
    }
    EXPECT(same);
    float ms = -1.0f;
    OK(aclrtEventElapsedTime(&ms, start, end));
    EXPECT(ms >= 0.0f);
    aclrtEventRecordedStatus status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
    OK(aclrtQueryEventStatus(end, &status));
    EXPECT(status == ACL_EVENT_RECORDED_STATUS_COMPLETE);
    size_t free_bytes = 0, total = 0;
    OK(aclrtGetMemInfo(ACL_HBM_MEM, &free_bytes, &total));
    EXPECT(total > 0 && free_bytes <= total);

    OK(aclrtFree(dev));
    OK(aclrtFreeHost(host));
    OK(aclrtDestroyEvent(start));
    OK(aclrtDestroyEvent(end));
    OK(aclrtDestroyStream(stream));
    OK(aclrtResetDevice(last));
    OK(aclFinalize());
    printf("basic: %u devices of %s, %d failures\n", devices, aclrtGetSocName(), failures);
    return failures;
}
