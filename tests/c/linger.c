/* A program whose exit goes on after the C library's own exit function, as a C++ program's
 * static destructors do (torch_npu's): its atexit function, registered before the first API
 * call, runs after the library's has let the host agent go, and lingers 1.5 s.  The library's
 * threads see the agent gone meanwhile: they stay quiet (the program ended it). */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "acl/acl.h"

static void linger(void)
{
    struct timespec pause = {1, 500000000};
    nanosleep(&pause, NULL);
}

int main(void)
{
    atexit(linger);
    uint32_t count = 0;
    aclError ret = aclrtGetDeviceCount(&count);
    printf("%d %u\n", (int)ret, count);
    return ret == ACL_SUCCESS ? 0 : 1;
}
