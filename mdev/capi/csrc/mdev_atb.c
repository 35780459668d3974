/*
 * mdev_atb.c -- libatb.so: the transformer-kernel library's (ATB's) C++ entry points that
 * torch_npu's libop_plugin_atb.so links, under their C++ (Itanium ABI) names.
 *
 * mdev has none of ATB's fused kernels: creating a context or an operation answers
 * ERROR_OPERATION_NULL_RUNNER (10, "no runner for the operation") and leaves the output
 * NULL, so torch_npu's ATB ops fail loudly at set-up; destroying NULL succeeds.
 * atb::Utils::GetTensorSize is computed as ATB does, from the tensor's description
 * (aclDataType at 0, the dimensions at 8, their count at 72): the element count times the
 * element size.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define MDEV_EXPORT __attribute__((visibility("default")))
#define MDEV_ATB_NO_ERROR 0
#define MDEV_ATB_NULL_RUNNER 10
#define MDEV_ATB_MAX_DIM 8

typedef struct mdev_atb_tensor_desc {
    int32_t dtype;
    int32_t format;
    int64_t dims[MDEV_ATB_MAX_DIM];
    uint64_t dim_num;
} mdev_atb_tensor_desc;

static int32_t no_runner(void** out, const char* what)
{
    if (out != NULL) {
        *out = NULL;
    }
    fprintf(stderr, "mdev: atb::%s: mdev has no ATB kernels (ERROR_OPERATION_NULL_RUNNER)\n", what);
    return MDEV_ATB_NULL_RUNNER;
}

MDEV_EXPORT int32_t mdev_atb_create_context(void** context) __asm__("_ZN3atb13CreateContextEPPNS_7ContextE");
int32_t mdev_atb_create_context(void** context)
{
    return no_runner(context, "CreateContext");
}

MDEV_EXPORT int32_t mdev_atb_destroy_context(void* context) __asm__("_ZN3atb14DestroyContextEPNS_7ContextE");
int32_t mdev_atb_destroy_context(void* context)
{
    return context == NULL ? MDEV_ATB_NO_ERROR : MDEV_ATB_NULL_RUNNER;   /* none was ever made */
}

MDEV_EXPORT int32_t mdev_atb_destroy_operation(void* operation) __asm__("_ZN3atb16DestroyOperationEPNS_9OperationE");
int32_t mdev_atb_destroy_operation(void* operation)
{
    return operation == NULL ? MDEV_ATB_NO_ERROR : MDEV_ATB_NULL_RUNNER;
}

/* atb::CreateOperation<atb::infer::XParam>(const XParam&, atb::Operation**) for each X torch_npu uses */
#define MDEV_ATB_CREATE(param, mangled)                                                              \
    MDEV_EXPORT int32_t mdev_atb_create_##param(const void* p, void** operation) __asm__(mangled);  \
    int32_t mdev_atb_create_##param(const void* p, void** operation)                                \
    {                                                                                                \
        (void)p;                                                                                     \
        return no_runner(operation, "CreateOperation<" #param ">");                                 \
    }

MDEV_ATB_CREATE(LinearParam, "_ZN3atb15CreateOperationINS_5infer11LinearParamEEEiRKT_PPNS_9OperationE")
MDEV_ATB_CREATE(ElewiseParam, "_ZN3atb15CreateOperationINS_5infer12ElewiseParamEEEiRKT_PPNS_9OperationE")
MDEV_ATB_CREATE(RmsNormParam, "_ZN3atb15CreateOperationINS_5infer12RmsNormParamEEEiRKT_PPNS_9OperationE")
MDEV_ATB_CREATE(GroupTopkParam, "_ZN3atb15CreateOperationINS_5infer14GroupTopkParamEEEiRKT_PPNS_9OperationE")
MDEV_ATB_CREATE(SelfAttentionParam, "_ZN3atb15CreateOperationINS_5infer18SelfAttentionParamEEEiRKT_PPNS_9OperationE")
MDEV_ATB_CREATE(PagedAttentionParam,
                "_ZN3atb15CreateOperationINS_5infer19PagedAttentionParamEEEiRKT_PPNS_9OperationE")
MDEV_ATB_CREATE(ReshapeAndCacheParam,
                "_ZN3atb15CreateOperationINS_5infer20ReshapeAndCacheParamEEEiRKT_PPNS_9OperationE")
MDEV_ATB_CREATE(RopeParam, "_ZN3atb15CreateOperationINS_5infer9RopeParamEEEiRKT_PPNS_9OperationE")

static uint64_t element_bytes(int32_t dtype)
{
    switch (dtype) {
    case 2: case 4: case 12:                       /* int8, uint8, bool */
        return 1;
    case 1: case 6: case 7: case 27:               /* float16, int16, uint16, bf16 */
        return 2;
    case 0: case 3: case 8:                        /* float, int32, uint32 */
        return 4;
    case 9: case 10: case 11: case 16:             /* int64, uint64, double, complex64 */
        return 8;
    case 17:                                       /* complex128 */
        return 16;
    default:
        return 0;
    }
}

MDEV_EXPORT uint64_t mdev_atb_tensor_size(const mdev_atb_tensor_desc* tensor) __asm__("_ZN3atb5Utils13GetTensorSizeERKNS_6TensorE");
uint64_t mdev_atb_tensor_size(const mdev_atb_tensor_desc* tensor)
{
    if (tensor == NULL || tensor->dim_num > MDEV_ATB_MAX_DIM) {
        return 0;
    }
    uint64_t size = element_bytes(tensor->dtype);
    for (uint64_t i = 0; i < tensor->dim_num; i++) {
        size *= tensor->dims[i] > 0 ? (uint64_t)tensor->dims[i] : 0;
    }
    return size;
}
