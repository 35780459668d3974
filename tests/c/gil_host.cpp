/* gil_host.cpp -- a C++ program that embeds Python (as a framework's C++ host does) and holds
 * the GIL while a std::thread of its own calls the API (set a device, make a stream, memset,
 * record an event, synchronise) and is joined.  The library must not wait for this GIL. */
#include <Python.h>

#include <cstdio>
#include <thread>

#include "acl/acl.h"

static int failures = 0;

static void ok(aclError ret, const char* what)
{
    if (ret != ACL_SUCCESS) {
        std::printf("FAILED %s returned %d\n", what, static_cast<int>(ret));
        failures++;
    }
}

static void work()
{
    aclrtStream stream = nullptr;
    aclrtEvent event = nullptr;
    void* dev = nullptr;
    unsigned char host[64] = {};
    ok(aclrtSetDevice(0), "aclrtSetDevice");
    ok(aclrtCreateStream(&stream), "aclrtCreateStream");
    ok(aclrtMalloc(&dev, sizeof host, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc");
    ok(aclrtMemsetAsync(dev, sizeof host, 0x5A, sizeof host, stream), "aclrtMemsetAsync");
    ok(aclrtCreateEvent(&event), "aclrtCreateEvent");
    ok(aclrtRecordEvent(event, stream), "aclrtRecordEvent");
    ok(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream");
    ok(aclrtMemcpy(host, sizeof host, dev, sizeof host, ACL_MEMCPY_DEVICE_TO_HOST), "aclrtMemcpy");
    if (host[0] != 0x5A || host[63] != 0x5A) {
        std::printf("FAILED the memset did not reach the host copy\n");
        failures++;
    }
    ok(aclrtDestroyEvent(event), "aclrtDestroyEvent");
    ok(aclrtFree(dev), "aclrtFree");
    ok(aclrtDestroyStream(stream), "aclrtDestroyStream");
    ok(aclrtResetDevice(0), "aclrtResetDevice");
}

int main()
{
    Py_Initialize();                       // this thread now holds the GIL, and keeps it
    PyRun_SimpleString("import sys");
    std::thread worker(work);
    worker.join();
    std::printf("gil_host: %d failures\n", failures);
    Py_Finalize();
    return failures;
}
