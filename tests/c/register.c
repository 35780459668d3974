/* register.c -- host memory of the program's own, registered (aclrtHostRegister): a copy
 * from the device lands in it, the program's writes reach the device, and after
 * aclrtHostUnregister the pages are the program's again, contents kept. */
#define _DEFAULT_SOURCE
#include <stdint.h>
#include <sys/mman.h>
#include "check.h"

#define SIZE (2 * 4096)

int main(void)
{
    void* dev = NULL;
    void* mapped = NULL;
    aclrtStream stream = NULL;
    OK(aclInit(NULL));
    OK(aclrtSetDevice(0));
    OK(aclrtCreateStream(&stream));
    OK(aclrtMalloc(&dev, SIZE, ACL_MEM_MALLOC_HUGE_FIRST));
    unsigned char* host = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT(host != MAP_FAILED);
    host[0] = 0x31;                                  /* kept by the registration */
    OK(aclrtHostRegister(host, SIZE, ACL_HOST_REGISTER_MAPPED, &mapped));
    EXPECT(host[0] == 0x31);
    OK(aclrtMemset(dev, SIZE, 0x5C, SIZE));
    OK(aclrtMemcpyAsync(host, SIZE, dev, SIZE, ACL_MEMCPY_DEVICE_TO_HOST, stream));
    OK(aclrtSynchronizeStream(stream));
    EXPECT(host[0] == 0x5C && host[SIZE - 1] == 0x5C);
    host[1] = 0x77;                                  /* the program writes; the device reads it */
    OK(aclrtMemcpyAsync(dev, SIZE, host, SIZE, ACL_MEMCPY_HOST_TO_DEVICE, stream));
    OK(aclrtSynchronizeStream(stream));
    unsigned char back[2] = {0, 0};
    OK(aclrtMemcpy(back, 2, dev, 2, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(back[0] == 0x5C && back[1] == 0x77);
    OK(aclrtHostUnregister(host));
    EXPECT(host[1] == 0x77 && host[SIZE - 1] == 0x5C);
    host[2] = 1;                                     /* private again, writable */
    munmap(host, SIZE);
    OK(aclrtFree(dev));
    OK(aclrtDestroyStream(stream));
    OK(aclrtResetDevice(0));
    OK(aclFinalize());
    printf("register: %d failures\n", failures);
    return failures;
}
