/* ipc_consumer.c -- imports what ipc_producer shares (its memory by key, its event by handle,
 * its notify by key): waits on the event, reads the memory, writes it back, records the notify. */
#include "ipc.h"
#include "check.h"

int main(void)
{
    OK(aclInit(NULL));
    OK(aclrtSetDevice(0));
    aclrtStream stream = NULL;
    OK(aclrtCreateStream(&stream));
    if (!await_file("handles.bin")) {
        return 1;
    }
    handles h;
    FILE* f = fopen("handles.bin", "rb");
    EXPECT(f != NULL && fread(&h, sizeof h, 1, f) == 1);
    fclose(f);

    void* dev = NULL;
    OK(aclrtIpcMemImportByKey(&dev, h.mem_key, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT));
    aclrtEvent event = NULL;
    OK(aclrtIpcOpenEventHandle(h.event, &event));
    aclrtNotify notify = NULL;
    OK(aclrtNotifyImportByKey(&notify, h.notify_key, ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT));

    static unsigned char host[BYTES];
    OK(aclrtStreamWaitEvent(stream, event));
    OK(aclrtSynchronizeStream(stream));
    OK(aclrtMemcpy(host, BYTES, dev, BYTES, ACL_MEMCPY_DEVICE_TO_HOST));
    int first = 1;
    for (int i = 0; i < BYTES; i++) {
        first &= host[i] == FIRST;
    }
    EXPECT(first);

    OK(aclrtMemsetAsync(dev, BYTES, SECOND, BYTES, stream));
    OK(aclrtRecordNotify(notify, stream));
    OK(aclrtSynchronizeStream(stream));

    OK(aclrtDestroyNotify(notify));
    OK(aclrtDestroyEvent(event));
    OK(aclrtIpcMemClose(h.mem_key));
    OK(aclrtDestroyStream(stream));
    OK(aclrtResetDevice(0));
    OK(aclFinalize());
    printf("consumer: %d failures\n", failures);
    return failures;
}
