/* hccl_config.c -- what torch_npu's ProcessGroupHCCL asks of libhccl.so, from C, one thread per rank:
 *
 *   HcclGetCommConfigCapability, HcclSetConfig / HcclGetConfig (deterministic), HcclCommConfigInit
 *   + HcclCommInitRootInfoConfig (buffer size, name), HcclGetCommName, HcclCreateSubCommConfig of
 *   ranks {0, 2} (what new_group makes) and an AllReduce in it, HcclAllGatherV of uneven blocks,
 *   HcclGroupStart / HcclGroupEnd found by dlsym through libhcomm.so's handle (as torch_npu looks
 *   them up), aclprofInit through libascendcl.so's.  Prints its failed checks; exits with their count.
 *
 *   hccl_config N      N ranks (N >= 3), devices 0 .. N-1 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include "hccl_check.h"

#define MAX_RANKS 8
#define COUNT 1000

typedef HcclResult (*group_fn)(void);

static int nranks;
static HcclRootInfo root_info;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void* rank_main(void* arg)
{
    int rank = (int)(intptr_t)arg;
    HcclComm comm = NULL, sub = NULL;
    HcclCommConfig config;
    aclrtStream stream = NULL;
    char name[COMM_NAME_MAX_LENGTH];
    OK(aclrtSetDevice(rank));
    OK(aclrtCreateStream(&stream));

    HcclCommConfigInit(&config);
    EXPECT(config.hcclBufferSize == HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET && config.hcclExecTimeOut == -1);
    config.hcclBufferSize = 2;
    snprintf(config.hcclCommName, sizeof(config.hcclCommName), "world");
    EXPECT_HCCL(HcclCommInitRootInfoConfig((uint32_t)nranks, &root_info, (uint32_t)rank, &config, &comm),
                HCCL_SUCCESS);
    EXPECT_HCCL(HcclGetCommName(comm, name), HCCL_SUCCESS);
    EXPECT(strcmp(name, "world") == 0);

    /* uneven AllGatherV: rank q gives q + 1 elements of value q, packed */
    uint64_t counts[MAX_RANKS], displs[MAX_RANKS];
    uint64_t total = 0;
    for (int q = 0; q < nranks; q++) {
        counts[q] = (uint64_t)q + 1;
        displs[q] = total;
        total += counts[q];
    }
    float mine[MAX_RANKS], all[MAX_RANKS * MAX_RANKS];
    void *send = NULL, *recv = NULL;
    for (int i = 0; i <= rank; i++) {
        mine[i] = (float)rank;
    }
    OK(aclrtMalloc(&send, sizeof(mine), ACL_MEM_MALLOC_HUGE_FIRST));
    OK(aclrtMalloc(&recv, sizeof(all), ACL_MEM_MALLOC_HUGE_FIRST));
    OK(aclrtMemcpy(send, sizeof(mine), mine, sizeof(mine), ACL_MEMCPY_HOST_TO_DEVICE));
    EXPECT_HCCL(HcclAllGatherV(send, counts[rank], recv, counts, displs, HCCL_DATA_TYPE_FP32, comm, stream),
                HCCL_SUCCESS);
    OK(aclrtSynchronizeStream(stream));
    OK(aclrtMemcpy(all, total * sizeof(float), recv, total * sizeof(float), ACL_MEMCPY_DEVICE_TO_HOST));
    for (int q = 0; q < nranks; q++) {
        for (uint64_t i = 0; i < counts[q]; i++) {
            EXPECT(all[displs[q] + i] == (float)q);
        }
    }

    /* the sub-communicator of ranks 0 and 2; the others pass no ranks and get none */
    uint32_t members[2] = {0, 2};
    int in_sub = rank == 0 || rank == 2;
    HcclCommConfigInit(&config);
    EXPECT_HCCL(HcclCreateSubCommConfig(&comm, 2, in_sub ? members : NULL, in_sub ? 5 : 0xFFFFFFFF,
                                        (uint32_t)(rank / 2), &config, &sub), HCCL_SUCCESS);
    EXPECT((sub != NULL) == in_sub);
    if (in_sub) {
        uint32_t size = 0;
        EXPECT_HCCL(HcclGetRankSize(sub, &size), HCCL_SUCCESS);
        EXPECT(size == 2);
        float x[COUNT], y[COUNT];
        void* buf = NULL;
        for (int i = 0; i < COUNT; i++) {
            x[i] = (float)(i * (rank + 1));
        }
        OK(aclrtMalloc(&buf, sizeof(x), ACL_MEM_MALLOC_HUGE_FIRST));
        OK(aclrtMemcpy(buf, sizeof(x), x, sizeof(x), ACL_MEMCPY_HOST_TO_DEVICE));
        EXPECT_HCCL(HcclAllReduce(buf, buf, COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, sub, stream), HCCL_SUCCESS);
        OK(aclrtSynchronizeStream(stream));
        OK(aclrtMemcpy(y, sizeof(y), buf, sizeof(y), ACL_MEMCPY_DEVICE_TO_HOST));
        for (int i = 0; i < COUNT; i++) {
            EXPECT(y[i] == (float)(4 * i));              /* ranks 0 and 2: i + 3i */
        }
        OK(aclrtFree(buf));
        EXPECT_HCCL(HcclCommDestroy(sub), HCCL_SUCCESS);
    }
    pthread_mutex_lock(&lock);
    printf("rankId: %d, gathered %d, sub %s\n", rank, (int)total, in_sub ? "yes" : "no");
    pthread_mutex_unlock(&lock);
    OK(aclrtFree(send));
    OK(aclrtFree(recv));
    EXPECT_HCCL(HcclCommDestroy(comm), HCCL_SUCCESS);
    OK(aclrtDestroyStream(stream));
    OK(aclrtResetDevice(rank));
    return NULL;
}

int main(int argc, char** argv)
{
    nranks = argc > 1 ? atoi(argv[1]) : 3;
    if (nranks < 3 || nranks > MAX_RANKS) {
        return 100;
    }
    OK(aclInit(NULL));
    EXPECT(HcclGetCommConfigCapability() > HCCL_COMM_CONFIG_EXEC_TIMEOUT);
    union HcclConfigValue value;
    value.value = 1;
    EXPECT_HCCL(HcclSetConfig(HCCL_DETERMINISTIC, value), HCCL_SUCCESS);
    value.value = 0;
    EXPECT_HCCL(HcclGetConfig(HCCL_DETERMINISTIC, &value), HCCL_SUCCESS);
    EXPECT(value.value == 1);
    value.value = 7;
    EXPECT_HCCL(HcclSetConfig(HCCL_DETERMINISTIC, value), HCCL_E_PARA);

    /* torch_npu: dlopen("libhcomm.so") and dlsym HcclGroupStart / HcclGroupEnd through it */
    void* hcomm = dlopen("libhcomm.so", RTLD_NOW | RTLD_LOCAL);
    EXPECT(hcomm != NULL);
    if (hcomm != NULL) {
        group_fn start = (group_fn)(uintptr_t)dlsym(hcomm, "HcclGroupStart");
        group_fn end = (group_fn)(uintptr_t)dlsym(hcomm, "HcclGroupEnd");
        EXPECT(start != NULL && end != NULL);
        if (start != NULL && end != NULL) {
            bool grouped = false;
            EXPECT_HCCL(start(), HCCL_SUCCESS);
            EXPECT_HCCL(HcclGroupStatusGet(&grouped), HCCL_SUCCESS);
            EXPECT(grouped);
            EXPECT_HCCL(end(), HCCL_SUCCESS);
            EXPECT_HCCL(end(), HCCL_E_PARA);             /* no group open */
        }
        dlclose(hcomm);
    }
    void* ascendcl = dlopen("libascendcl.so", RTLD_NOW | RTLD_LOCAL);
    EXPECT(ascendcl != NULL && dlsym(ascendcl, "aclprofInit") != NULL);   /* through libmsprofiler.so */
    if (ascendcl != NULL) {
        dlclose(ascendcl);
    }

    EXPECT_HCCL(HcclGetRootInfo(&root_info), HCCL_SUCCESS);
    pthread_t threads[MAX_RANKS];
    for (int r = 0; r < nranks; r++) {
        pthread_create(&threads[r], NULL, rank_main, (void*)(intptr_t)r);
    }
    for (int r = 0; r < nranks; r++) {
        pthread_join(threads[r], NULL);
    }
    OK(aclFinalize());
    printf("%d failures\n", failures);
    return failures;
}
