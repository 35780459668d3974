/* kernel.c -- kernels from C: mdev's "binaries" are Python source (here mdev/ops.py, given as
 * argv[1]), loaded, looked up and launched through the C API, with a launch configuration;
 * a kernel that faults reaches an exception callback registered from C. */
#include "check.h"

#define N 1000

/* the packed argument blocks: one 8-byte slot per kernel parameter */
typedef struct {
    void* out;
    double value;
    int64_t n;
    int64_t dtype;
} fill_args;

static uint32_t faulted_device = 0xFFFFFFFF;
static uint32_t fault_code;

static void on_exception(aclrtExceptionInfo* info)
{
    faulted_device = aclrtGetDeviceIdFromExceptionInfo(info);
    fault_code = aclrtGetErrorCodeFromExceptionInfo(info);
}

static int all_equal(const float* data, int n, float value)
{
    for (int i = 0; i < n; i++) {
        if (data[i] != value) {
            return 0;
        }
    }
    return 1;
}

int main(int argc, char** argv)
{
    if (argc != 2) {
        return 2;
    }
    OK(aclInit(NULL));
    OK(aclrtSetDevice(0));
    aclrtStream stream = NULL;
    OK(aclrtCreateStream(&stream));
    aclrtBinHandle binary = NULL;
    OK(aclrtBinaryLoadFromFile(argv[1], NULL, &binary));
    aclrtFuncHandle fill = NULL, scale = NULL;
    OK(aclrtBinaryGetFunction(binary, "fill", &fill));
    OK(aclrtBinaryGetFunction(binary, "scale", &scale));
    EXPECT_RET(aclrtBinaryGetFunction(binary, "nothing", &scale), ACL_ERROR_RT_KERNEL_LOOKUP);
    char name[16];
    OK(aclrtGetFunctionName(fill, sizeof name, name));
    EXPECT(strcmp(name, "fill") == 0);
    EXPECT_RET(aclrtGetFunctionName(fill, 2, name), ACL_ERROR_INVALID_PARAM);
    size_t params = 0;
    OK(aclrtFunctionGetParamCount(fill, &params));
    EXPECT(params == 4);

    void *x = NULL, *y = NULL;
    OK(aclrtMalloc(&x, N * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    OK(aclrtMalloc(&y, N * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    static float host[N];

    /* fill x with 2.5: host arguments, a launch configuration with a timeout */
    aclrtLaunchKernelAttr attr;
    memset(&attr, 0, sizeof attr);
    attr.id = ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT;
    attr.value.timeout = 30;
    aclrtLaunchKernelCfg cfg = {&attr, 1};
    fill_args args = {x, 2.5, N, ACL_FLOAT};
    OK(aclrtLaunchKernelWithHostArgs(fill, 4, stream, &cfg, &args, sizeof args, NULL, 0));
    /* y = 4 * x: one pointer per parameter */
    void* out_ptr = y;
    float alpha = 4.0f;
    int64_t n = N, dtype = ACL_FLOAT;
    void* array[5] = {&x, &out_ptr, &alpha, &n, &dtype};
    OK(aclrtLaunchKernelWithArgsArray(scale, 2, stream, NULL, array));
    OK(aclrtSynchronizeStream(stream));
    OK(aclrtMemcpy(host, sizeof host, y, N * sizeof(float), ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(all_equal(host, N, 10.0f));

    /* a kernel writing past its buffer faults: the next sync fails, the callback hears of it */
    OK(aclrtExceptionInfoCallbackRegister(on_exception));
    fill_args wild = {x, 1.0, 1 << 20, ACL_FLOAT};
    OK(aclrtLaunchKernelWithHostArgs(fill, 1, stream, NULL, &wild, sizeof wild, NULL, 0));
    aclError fault = aclrtSynchronizeStream(stream);
    EXPECT(fault != ACL_SUCCESS);
    EXPECT(faulted_device == 0 && fault_code == (uint32_t)fault);
    OK(aclrtExceptionInfoCallbackUnregister(on_exception));

    OK(aclrtBinaryUnLoad(binary));
    aclrtFree(x);
    aclrtFree(y);
    aclrtDestroyStreamForce(stream);
    OK(aclrtResetDeviceForce(0));
    OK(aclFinalize());
    printf("kernel: %d failures\n", failures);
    return failures;
}
