/*
 * mdev_rts.c -- libruntime.so: the internal runtime (rt*) functions frameworks link.
 *
 * torch_npu imports four of them (binary and function registration, a kernel launch, the
 * chip-to-chip control address) for its own kernels, which mdev does not run: mdev's kernels
 * come through aclrtBinaryLoad* and Ascend C (libascendcl.so).  Each answers
 * ACL_ERROR_RT_FEATURE_NOT_SUPPORT, the runtime's code for a feature the device lacks, and
 * clears its outputs.
 */

#include <stddef.h>
#include <stdint.h>

#define MDEV_EXPORT __attribute__((visibility("default")))
#define MDEV_RT_FEATURE_NOT_SUPPORT 207000

MDEV_EXPORT int32_t rtGetC2cCtrlAddr(uint64_t* addr, uint32_t* len)
{
    if (addr != NULL) {
        *addr = 0;
    }
    if (len != NULL) {
        *len = 0;
    }
    return MDEV_RT_FEATURE_NOT_SUPPORT;
}

MDEV_EXPORT int32_t rtDevBinaryRegister(const void* bin, void** handle)
{
    (void)bin;
    if (handle != NULL) {
        *handle = NULL;
    }
    return MDEV_RT_FEATURE_NOT_SUPPORT;
}

MDEV_EXPORT int32_t rtFunctionRegister(void* binHandle, const void* stubFunc, const char* stubName,
                                       const void* devFunc, uint32_t funcMode)
{
    (void)binHandle;
    (void)stubFunc;
    (void)stubName;
    (void)devFunc;
    (void)funcMode;
    return MDEV_RT_FEATURE_NOT_SUPPORT;
}

MDEV_EXPORT int32_t rtKernelLaunch(const void* stubFunc, uint32_t blockDim, void* args, uint32_t argsSize,
                                   void* smDesc, void* stream)
{
    (void)stubFunc;
    (void)blockDim;
    (void)args;
    (void)argsSize;
    (void)smDesc;
    (void)stream;
    return MDEV_RT_FEATURE_NOT_SUPPORT;
}
