/* hccl_allreduce.c -- HCCL's thread-per-rank AllReduce, as HCCL's own examples run it: one
 * process, one thread per device, each thread on its own device and stream.
 *
 *   hccl_allreduce all  N   the communicators made at once by HcclCommInitAll in main
 *   hccl_allreduce root N   HcclGetRootInfo in main, HcclCommInitRootInfo in each thread
 *
 * Rank r's input is element i = i + r (i < COUNT); every rank prints its first eight sums
 * ("rankId: r, output: [ ... ]") and checks all COUNT of them, which are exact in fp32.
 * Then the ranks' sizes and ids, a barrier, a broadcast from the last rank and the
 * unsupported and bad-argument answers.  Prints its failed checks; exits with their count. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include "hccl_check.h"

#define MAX_RANKS 8
#define COUNT 65536

static int nranks;
static int by_root;
static HcclComm comms[MAX_RANKS];
static HcclRootInfo root_info;
static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;

static void* rank_main(void* arg)
{
    int rank = (int)(intptr_t)arg;
    size_t bytes = COUNT * sizeof(float);
    float* host = malloc(bytes);
    void *send = NULL, *recv = NULL;
    aclrtStream stream = NULL;
    OK(aclrtSetDevice(rank));
    if (by_root) {
        EXPECT_HCCL(HcclCommInitRootInfo((uint32_t)nranks, &root_info, (uint32_t)rank, &comms[rank]), HCCL_SUCCESS);
    }
    OK(aclrtCreateStream(&stream));
    OK(aclrtMalloc(&send, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    OK(aclrtMalloc(&recv, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    for (int i = 0; i < COUNT; i++) {
        host[i] = (float)(i + rank);
    }
    OK(aclrtMemcpy(send, bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE));

    EXPECT_HCCL(HcclAllReduce(send, recv, COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comms[rank], stream),
                HCCL_SUCCESS);
    OK(aclrtSynchronizeStream(stream));
    OK(aclrtMemcpy(host, bytes, recv, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    int wrong = 0;
    for (int i = 0; i < COUNT; i++) {
        /* sum over r of (i + r) */
        wrong += host[i] != (float)(nranks * i + nranks * (nranks - 1) / 2);
    }
    EXPECT(wrong == 0);
    pthread_mutex_lock(&print_lock);
    printf("rankId: %d, output: [", rank);
    for (int i = 0; i < 8; i++) {
        printf(" %.0f", host[i]);
    }
    printf(" ]\n");
    pthread_mutex_unlock(&print_lock);

    uint32_t size = 0, id = 99;
    EXPECT_HCCL(HcclGetRankSize(comms[rank], &size), HCCL_SUCCESS);
    EXPECT_HCCL(HcclGetRankId(comms[rank], &id), HCCL_SUCCESS);
    EXPECT(size == (uint32_t)nranks && id == (uint32_t)rank);

    /* a barrier, then the last rank's input (its elements i + nranks - 1) to everyone */
    EXPECT_HCCL(HcclBarrier(comms[rank], stream), HCCL_SUCCESS);
    EXPECT_HCCL(HcclBroadcast(send, COUNT, HCCL_DATA_TYPE_FP32, (uint32_t)(nranks - 1), comms[rank], stream),
                HCCL_SUCCESS);
    OK(aclrtSynchronizeStream(stream));
    OK(aclrtMemcpy(host, bytes, send, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(host[0] == (float)(nranks - 1) && host[COUNT - 1] == (float)(COUNT - 1 + nranks - 1));

    /* bad arguments: an HcclResult, a message, and the communicator still works */
    EXPECT_HCCL(HcclAllReduce(send, recv, COUNT, (HcclDataType)99, HCCL_REDUCE_SUM, comms[rank], stream),
                HCCL_E_PARA);
    EXPECT_MESSAGE("dataType 99");
    EXPECT_HCCL(HcclGetRankSize(comms[rank], NULL), HCCL_E_PTR);
    EXPECT_HCCL(HcclCommSuspend(comms[rank]), HCCL_E_NOT_SUPPORT);
    EXPECT_MESSAGE("HcclCommSuspend is not supported");

    OK(aclrtFree(send));
    OK(aclrtFree(recv));
    OK(aclrtDestroyStream(stream));
    EXPECT_HCCL(HcclCommDestroy(comms[rank]), HCCL_SUCCESS);
    OK(aclrtResetDevice(rank));
    free(host);
    return NULL;
}

int main(int argc, char** argv)
{
    if (argc != 3 || (strcmp(argv[1], "all") && strcmp(argv[1], "root")) || atoi(argv[2]) < 2 ||
        atoi(argv[2]) > MAX_RANKS) {
        printf("usage: %s all|root RANKS (2..%d)\n", argv[0], MAX_RANKS);
        return 1;
    }
    by_root = strcmp(argv[1], "root") == 0;
    nranks = atoi(argv[2]);
    OK(aclInit(NULL));
    uint32_t count = 0;
    OK(aclrtGetDeviceCount(&count));
    printf("Found %u NPU device(s) available\n", count);
    EXPECT(count >= (uint32_t)nranks);
    EXPECT(strcmp(HcclGetErrorString(HCCL_E_PARA), "parameter error") == 0);
    if (by_root) {
        OK(aclrtSetDevice(0));
        EXPECT_HCCL(HcclGetRootInfo(&root_info), HCCL_SUCCESS);
        EXPECT_HCCL(HcclGetRootInfo(NULL), HCCL_E_PTR);
    } else {
        int32_t devices[MAX_RANKS];
        for (int r = 0; r < nranks; r++) {
            devices[r] = r;
        }
        EXPECT_HCCL(HcclCommInitAll((uint32_t)nranks, devices, comms), HCCL_SUCCESS);
        EXPECT_HCCL(HcclCommInitAll((uint32_t)nranks, NULL, comms), HCCL_E_PTR);
    }
    pthread_t threads[MAX_RANKS];
    for (int r = 0; r < nranks; r++) {
        pthread_create(&threads[r], NULL, rank_main, (void*)(intptr_t)r);
    }
    for (int r = 0; r < nranks; r++) {
        pthread_join(threads[r], NULL);
    }
    EXPECT_HCCL(HcclAllReduce(NULL, NULL, 1, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, NULL, NULL), HCCL_E_PTR);
    EXPECT_HCCL(HcclCommDestroy(comms[0]), HCCL_E_PARA);      /* already destroyed */
    if (by_root) {
        OK(aclrtResetDevice(0));
    }
    OK(aclFinalize());
    printf("%d failures\n", failures);
    return failures;
}
