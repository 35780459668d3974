/* aclnn_async.c -- aclnn operator runs the host agent lets return before it runs them
 * (mdev.capi.asynchronous: an executor is granted when aclnnXGetWorkspaceSize makes it, and
 * queueing its run takes the grant).  Every answer must still be the runtime's own: the
 * program passes through the embedded library too, which runs every call synchronously.
 *   early   RUNS executors made first (one on another thread, as torch_npu makes them), then
 *           launched, then RUNS more made and launched one by one (a signature the agent
 *           checked before: GetWorkspaceSize is answered by the C side, mdev.capi.local);
 *           with the argument "stopped" the test stops the agent (SIGSTOP) between "ready"
 *           and the next input line, so the calls can only return if they did not wait for
 *           it; the sum is right after the synchronisation
 *   codes   a used-up executor run again, a destroyed one, NULL: the runtime's codes;
 *           a repeatable one runs each time; GetWorkspaceSize with a dtype mdev lacks: 161002
 *   stop    with the argument "stop" (after "stopped" or "-"), the streams stop on failure
 *           (ACL_STOP_ON_FAILURE, as torch_npu's): the runs still return early; then a copy
 *           whose source is freed while it waits fails on one stream, and a run on the other
 *           stream, granted before the failure, is refused with the failure code; before
 *           that, runs on a stream made after 600 others (its failure word lies pages past
 *           the first granted stream's in the device's control segment) return early too */
#include <pthread.h>
#include <stdlib.h>

#include "aclnn/acl_meta.h"
#include "aclnnop/aclnn_add.h"
#include "check.h"

#define N 4
#define RUNS 32

static aclTensor* z;
static aclScalar* one;
static aclOpExecutor* made;

static aclOpExecutor* add_one(void)
{
    uint64_t size = 1;
    aclOpExecutor* executor = NULL;
    OK(aclnnInplaceAddsGetWorkspaceSize(z, one, one, &size, &executor));
    EXPECT(size == 0 && executor != NULL);
    return executor;
}

static void* maker(void* unused)
{
    (void)unused;
    OK(aclrtSetDevice(0));
    made = add_one();
    return NULL;
}

static void wait_line(int stopped)
{
    char line[16];
    if (stopped && fgets(line, sizeof line, stdin) == NULL) {
        failures++;
    }
}

static float first(void* dev)
{
    float host[N];
    OK(aclrtMemcpy(host, sizeof host, dev, sizeof host, ACL_MEMCPY_DEVICE_TO_HOST));
    return host[0];
}

/* A D2D copy on its own stream of the context, held by a wait until its source is freed,
 * fails and stops the context; ``granted`` (the stream of the runs, granted again by a run
 * after the free, which voided every grant) then refuses a run with the failure code. */
static void stop_after_failure(aclrtStream granted, void* dev)
{
    float before = first(dev);
    aclrtStream failing = NULL;
    OK(aclrtCreateStream(&failing));
    void *hold = NULL, *src = NULL, *dst = NULL;
    OK(aclrtMalloc(&hold, 8, ACL_MEM_MALLOC_HUGE_FIRST));
    OK(aclrtMalloc(&src, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    OK(aclrtMalloc(&dst, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    OK(aclrtMemset(hold, 8, 0, 8));
    OK(aclrtValueWait(hold, 1, ACL_STREAM_WAIT_VALUE_EQ, failing));
    OK(aclrtMemcpyAsync(dst, 4096, src, 4096, ACL_MEMCPY_DEVICE_TO_DEVICE, failing));
    OK(aclrtFree(src));
    OK(aclnnInplaceAdds(NULL, 0, add_one(), granted));
    OK(aclrtSynchronizeStream(granted));
    EXPECT(first(dev) == before + 1.0f);
    uint64_t go = 1;
    OK(aclrtMemcpy(hold, 8, &go, 8, ACL_MEMCPY_HOST_TO_DEVICE));
    aclError code = aclrtSynchronizeStream(failing);
    EXPECT(code != ACL_SUCCESS);
    EXPECT_RET(aclnnInplaceAdds(NULL, 0, add_one(), granted), code);
    EXPECT_RET(aclrtSynchronizeStream(granted), code);
    EXPECT(first(dev) == before + 1.0f);
    OK(aclrtFree(hold));
    OK(aclrtFree(dst));
    OK(aclrtDestroyStream(failing));
}

/* A stop-on-failure stream made after MANY others: the C side reads its failure word, pages
 * past the first granted stream's, before it queues each run (it used to see only the pages
 * the first grant needed: a read outside the mapping). */
static void far_stream(void* dev)
{
    enum { MANY = 600 };
    static aclrtStream others[MANY];
    float before = first(dev);
    for (int i = 0; i < MANY; i++) {
        OK(aclrtCreateStream(&others[i]));
    }
    aclrtStream far = others[MANY - 1];
    OK(aclrtSetStreamFailureMode(far, ACL_STOP_ON_FAILURE));
    for (int i = 0; i < 3; i++) {              /* the first granted, the others queued at once */
        OK(aclnnInplaceAdds(NULL, 0, add_one(), far));
    }
    OK(aclrtSynchronizeStream(far));
    EXPECT(first(dev) == before + 3.0f);
    for (int i = 0; i < MANY; i++) {
        OK(aclrtDestroyStream(others[i]));
    }
}

int main(int argc, char** argv)
{
    int stopped = argc > 1 && strcmp(argv[1], "stopped") == 0;
    int stop = argc > 2 && strcmp(argv[2], "stop") == 0;
    OK(aclInit(NULL));
    OK(aclrtSetDevice(0));
    aclrtStream stream = NULL;
    OK(aclrtCreateStream(&stream));
    if (stop) {
        OK(aclrtSetStreamFailureMode(stream, ACL_STOP_ON_FAILURE));
    }
    void* dev = NULL;
    OK(aclrtMalloc(&dev, N * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    OK(aclrtMemset(dev, N * sizeof(float), 0, N * sizeof(float)));
    int64_t dims[1] = {N}, strides[1] = {1};
    z = aclCreateTensor(dims, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 1, dev);
    float value = 1.0f;
    one = aclCreateScalar(&value, ACL_FLOAT);
    EXPECT(z != NULL && one != NULL);

    /* the first run of the op is synchronous: the agent learns the function, grants the stream */
    OK(aclnnInplaceAdds(NULL, 0, add_one(), stream));
    OK(aclrtSynchronizeStream(stream));
    aclOpExecutor* executors[RUNS];
    pthread_t thread;
    EXPECT(pthread_create(&thread, NULL, maker, NULL) == 0);     /* the C side learns the signature */
    EXPECT(pthread_join(thread, NULL) == 0);
    OK(aclnnInplaceAdds(NULL, 0, made, stream));
    void* spare = NULL;
    OK(aclrtMalloc(&spare, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    OK(aclrtFree(spare));                      /* every grant void: the next run is synchronous, and */
    OK(aclnnInplaceAdds(NULL, 0, add_one(), stream));      /* its executor's tensors granted again */
    EXPECT(pthread_create(&thread, NULL, maker, NULL) == 0);
    EXPECT(pthread_join(thread, NULL) == 0);
    executors[0] = made;
    for (int i = 1; i < RUNS; i++) {
        executors[i] = add_one();
    }
    printf("ready\n");
    fflush(stdout);
    wait_line(stopped);
    for (int i = 0; i < RUNS; i++) {
        OK(aclnnInplaceAdds(NULL, 0, executors[i], stream));
    }
    for (int i = 0; i < RUNS; i++) {           /* a signature already checked: answered by the C side */
        OK(aclnnInplaceAdds(NULL, 0, add_one(), stream));
    }
    printf("launched\n");
    fflush(stdout);
    wait_line(stopped);
    OK(aclrtSynchronizeStream(stream));
    EXPECT(first(dev) == 3.0f + 2 * RUNS);

    /* codes: what the synchronous runtime answers */
    EXPECT_RET(aclnnInplaceAdds(NULL, 0, executors[0], stream), ACLNN_ERR_PARAM_INVALID);      /* used up */
    aclOpExecutor* destroyed = add_one();
    OK(aclDestroyAclOpExecutor(destroyed));
    EXPECT_RET(aclnnInplaceAdds(NULL, 0, destroyed, stream), ACLNN_ERR_PARAM_INVALID);
    EXPECT_RET(aclnnInplaceAdds(NULL, 0, NULL, stream), ACLNN_ERR_PARAM_NULLPTR);
    aclOpExecutor* again = add_one();
    OK(aclSetAclOpExecutorRepeatable(again));
    for (int i = 0; i < 3; i++) {
        OK(aclnnInplaceAdds(NULL, 0, again, stream));
    }
    OK(aclDestroyAclOpExecutor(again));
    EXPECT_RET(aclnnInplaceAdds(NULL, 0, again, stream), ACLNN_ERR_PARAM_INVALID);
    /* the known signature but a dtype mdev does not compute in: checked, refused */
    aclTensor* odd = aclCreateTensor(dims, 1, ACL_UINT16, strides, 0, ACL_FORMAT_ND, dims, 1, dev);
    uint64_t size = 1;
    aclOpExecutor* none = NULL;
    EXPECT_RET(aclnnInplaceAddsGetWorkspaceSize(odd, one, one, &size, &none), ACLNN_ERR_PARAM_INVALID);
    EXPECT_MESSAGE("dataType 7");
    EXPECT(none == NULL);
    OK(aclDestroyTensor(odd));
    OK(aclrtSynchronizeStream(stream));
    EXPECT(first(dev) == 6.0f + 2 * RUNS);
    if (stop) {
        far_stream(dev);
        stop_after_failure(stream, dev);
    }

    OK(aclDestroyTensor(z));
    OK(aclDestroyScalar(one));
    OK(aclrtFree(dev));
    OK(aclrtDestroyStream(stream));
    OK(aclrtResetDevice(0));
    OK(aclFinalize());
    printf("aclnn_async: %d failures\n", failures);
    return failures;
}
