/* ipc_producer.c -- shares device memory (export key), an IPC event and a notify with
 * ipc_consumer, a separate executable: the event says the memory is ready to read, the
 * notify (recorded by the consumer) that the consumer has written it back. */
#include "ipc.h"
#include "check.h"

int main(void)
{
    OK(aclInit(NULL));
    OK(aclrtSetDevice(0));
    aclrtStream stream = NULL;
    OK(aclrtCreateStream(&stream));
    void* dev = NULL;
    OK(aclrtMalloc(&dev, BYTES, ACL_MEM_MALLOC_HUGE_FIRST));

    handles h;
    memset(&h, 0, sizeof h);
    EXPECT_RET(aclrtIpcMemGetExportKey(dev, BYTES, h.mem_key, 4, 0), ACL_ERROR_INVALID_PARAM);
    OK(aclrtIpcMemGetExportKey(dev, BYTES, h.mem_key, sizeof h.mem_key,
                               ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION));
    aclrtEvent event = NULL;
    OK(aclrtCreateEventExWithFlag(&event, ACL_EVENT_IPC));
    OK(aclrtIpcGetEventHandle(event, &h.event));
    aclrtNotify notify = NULL;
    OK(aclrtCreateNotify(&notify, ACL_NOTIFY_DEFAULT));
    OK(aclrtNotifyGetExportKey(notify, h.notify_key, sizeof h.notify_key,
                               ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION));

    OK(aclrtMemsetAsync(dev, BYTES, FIRST, BYTES, stream));
    OK(aclrtRecordEvent(event, stream));
    FILE* f = fopen("handles.tmp", "wb");
    EXPECT(f != NULL && fwrite(&h, sizeof h, 1, f) == 1);
    fclose(f);
    rename("handles.tmp", "handles.bin");

    /* the consumer records the notify once it has written SECOND into the shared memory */
    OK(aclrtWaitAndResetNotify(notify, stream, 0));
    OK(aclrtSynchronizeStream(stream));
    static unsigned char host[BYTES];
    OK(aclrtMemcpy(host, BYTES, dev, BYTES, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(host[0] == SECOND && host[BYTES - 1] == SECOND);

    OK(aclrtDestroyNotify(notify));
    OK(aclrtDestroyEvent(event));
    OK(aclrtFree(dev));
    OK(aclrtDestroyStream(stream));
    OK(aclrtResetDevice(0));
    OK(aclFinalize());
    printf("producer: %d failures\n", failures);
    return failures;
}
