/* ipc.h -- what the IPC producer hands the consumer (a file in the working directory), and
 * wait for it.  Include it first: it asks for POSIX. */
#ifndef MDEV_TEST_IPC_H
#define MDEV_TEST_IPC_H

#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include "acl/acl.h"

#define BYTES 8192
#define FIRST 0xAB    /* written by the producer, announced by the event */
#define SECOND 0xCD   /* written by the consumer, announced by the notify */

typedef struct {
    char mem_key[128];
    char notify_key[128];
    aclrtIpcEventHandle event;
} handles;

/* wait up to 30 s for `path` to exist */
static inline int await_file(const char* path)
{
    for (int i = 0; i < 3000; i++) {
        if (access(path, F_OK) == 0) {
            return 1;
        }
        struct timespec tick = {0, 10 * 1000 * 1000};
        nanosleep(&tick, NULL);
    }
    printf("timed out waiting for %s\n", path);
    return 0;
}

#endif
