#include <cstdio>
#include "acl/acl.h"
#include "aclrtlaunch_scale.h"

void Scale(uint32_t blocks, void* stream, float* x, float factor);

#define CHECK(call) do { aclError r = (call); if (r != ACL_SUCCESS) { std::printf("FAIL %s = %d\n", #call, r); return 1; } } while (0)

int main()
{
    CHECK(aclInit(nullptr));
    CHECK(aclrtSetDevice(0));
    aclrtStream stream;
    CHECK(aclrtCreateStream(&stream));
    float host[4] = {1, 2, 3, 4};
    float* dev = nullptr;
    CHECK(aclrtMalloc((void**)&dev, sizeof host, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpy(dev, sizeof host, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE));
    Scale(4, stream, dev, 2.0f);
    CHECK(aclrtGetLastError(ACL_RT_THREAD_LEVEL));
    CHECK(aclrtSynchronizeStream(stream));
    CHECK((aclError)ACLRT_LAUNCH_KERNEL(scale)(4, stream, dev, 10.0f));
    CHECK(aclrtSynchronizeStream(stream));
    CHECK(aclrtMemcpy(host, sizeof host, dev, sizeof host, ACL_MEMCPY_DEVICE_TO_HOST));
    std::printf("result %g %g %g %g\n", host[0], host[1], host[2], host[3]);
    Scale(1, nullptr, nullptr, 1.0f);      // no such memory: the launch fails at the synchronisation
    std::printf("bad launch sync %d\n", (int)aclrtSynchronizeDevice());
    CHECK(aclrtFree(dev));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    return 0;
}
