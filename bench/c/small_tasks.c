/* small_tasks.c -- the C side of bench/capi.py: the same small-task loops as its Python side.
 *
 *   ./small_tasks ROUNDS TASKS REPEATS
 *     round trip   ROUNDS x (aclrtMemsetAsync of 4 bytes + aclrtSynchronizeStream)
 *     submission   TASKS x aclrtMemsetAsync of 4 bytes, then one aclrtSynchronizeStream
 *     trivial      ROUNDS x aclrtGetDevice (the C layer's cost with no device work)
 *     native       ROUNDS x native_get_device: the same answer from a C thread-local, as a
 *                  native host runtime core (design 2 of the C-face issue) would give it
 * Prints "name seconds-per-operation" for each, the best of REPEATS passes.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "acl/acl.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define CHECK(call)                                                                    \
    do {                                                                               \
        if ((call) != ACL_SUCCESS) {                                                   \
            fprintf(stderr, "%s failed: %s\n", #call, aclGetRecentErrMsg());           \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

static _Thread_local int32_t current_device = -1;

/* design 2's floor: a native core keeps the thread's current device in C */
__attribute__((noinline)) static aclError native_get_device(int32_t* device)
{
    if (device == NULL) {
        return ACL_ERROR_INVALID_PARAM;
    }
    if (current_device < 0) {
        return ACL_ERROR_RT_CONTEXT_NULL;
    }
    *device = current_device;
    return ACL_SUCCESS;
}

int main(int argc, char** argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s ROUNDS TASKS REPEATS\n", argv[0]);
        return 2;
    }
    long rounds = atol(argv[1]), tasks = atol(argv[2]), repeats = atol(argv[3]);
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    current_device = 0;
    aclrtStream stream = NULL;
    CHECK(aclrtCreateStream(&stream));
    void* dev = NULL;
    CHECK(aclrtMalloc(&dev, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    int32_t device = -1;
    double best_trip = 1e9, best_submit = 1e9, best_trivial = 1e9, best_native = 1e9;
    for (long r = 0; r <= repeats; r++) {       /* pass 0 warms up */
        double t0 = now();
        for (long i = 0; i < rounds; i++) {
            CHECK(aclrtMemsetAsync(dev, 4, (int32_t)(i & 0xFF), 4, stream));
            CHECK(aclrtSynchronizeStream(stream));
        }
        double t1 = now();
        for (long i = 0; i < tasks; i++) {
            CHECK(aclrtMemsetAsync(dev, 4, (int32_t)(i & 0xFF), 4, stream));
        }
        CHECK(aclrtSynchronizeStream(stream));
        double t2 = now();
        for (long i = 0; i < rounds; i++) {
            CHECK(aclrtGetDevice(&device));
        }
        double t3 = now();
        for (long i = 0; i < rounds * 100; i++) {
            CHECK(native_get_device(&device));
        }
        double t4 = now();
        if (r > 0) {
            best_native = (t4 - t3) / (rounds * 100) < best_native ? (t4 - t3) / (rounds * 100) : best_native;
            best_trip = (t1 - t0) / rounds < best_trip ? (t1 - t0) / rounds : best_trip;
            best_submit = (t2 - t1) / tasks < best_submit ? (t2 - t1) / tasks : best_submit;
            best_trivial = (t3 - t2) / rounds < best_trivial ? (t3 - t2) / rounds : best_trivial;
        }
    }
    printf("round_trip %.9f\nsubmission %.9f\ntrivial %.9f\nnative %.12f\n", best_trip, best_submit, best_trivial,
           best_native);
    CHECK(aclrtFree(dev));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    return 0;
}
