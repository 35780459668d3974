/*
 * mdev_nnopbase.c -- libnnopbase.so's argument descriptors, kept in the caller's memory.
 *
 * A framework makes several descriptors per operator (torch_npu: a tensor per argument, a
 * scalar for alpha, ...) and destroys them after: each is a small C structure here, so making
 * one costs no call into mdev.  aclnnXGetWorkspaceSize (libopapi.so) passes their addresses;
 * mdev.capi.nnopbase reads them (the layouts below are mirrored there) and the runtime checks
 * them as it checks the Python face's (mdev.runtime.operators): a bad dtype, a view beyond its
 * storage, ... are refused there, naming the op and the parameter.  Here only what cannot be
 * kept is refused (more than 8 dimensions, a NULL array with items, no memory): NULL, with a
 * line on stderr.  A list owns its items: destroying it destroys them.  A destroy of NULL
 * does nothing.  aclDestroyAclOpExecutor and aclSetAclOpExecutorRepeatable are the runtime's
 * (the executor lives there) and are generated with the other entry points.
 */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aclnn/acl_meta.h"

#define MDEV_NN_MAX_DIMS 8
#define MDEV_NN_MAX_ITEMS (1u << 20)

/* magics: what a descriptor is (mdev.capi.nnopbase checks them) */
enum {
    MDEV_NN_TENSOR = 0x544e444d,        /* "MDNT" */
    MDEV_NN_SCALAR = 0x534e444d,        /* "MDNS" */
    MDEV_NN_INTS = 0x494e444d,          /* "MDNI" */
    MDEV_NN_FLOATS = 0x464e444d,        /* "MDNF" */
    MDEV_NN_BOOLS = 0x424e444d,         /* "MDNB" */
    MDEV_NN_TENSORS = 0x4c4e444d,       /* "MDNL" */
    MDEV_NN_SCALARS = 0x514e444d,       /* "MDNQ" */
    MDEV_NN_GONE = 0
};

struct aclTensor {                      /* 232 bytes */
    uint32_t magic;
    int32_t dtype;
    int32_t format;
    uint32_t ndim;
    uint32_t nstorage;
    uint32_t strided;                   /* the caller gave strides (else contiguous) */
    int64_t offset;
    uint64_t data;
    int64_t shape[MDEV_NN_MAX_DIMS];
    int64_t strides[MDEV_NN_MAX_DIMS];
    int64_t storage[MDEV_NN_MAX_DIMS];
};

struct aclScalar {                      /* 16 bytes: the value's bytes as the caller's type has them */
    uint32_t magic;
    int32_t dtype;
    unsigned char value[8];
};

typedef struct mdev_nn_array {          /* 24 bytes */
    uint32_t magic;
    uint32_t reserved;
    uint64_t count;
    void* items;
} mdev_nn_array;

struct aclIntArray { mdev_nn_array a; };
struct aclFloatArray { mdev_nn_array a; };
struct aclBoolArray { mdev_nn_array a; };
struct aclTensorList { mdev_nn_array a; };
struct aclScalarList { mdev_nn_array a; };

static void* refuse(const char* function, const char* why)
{
    fprintf(stderr, "mdev: %s: %s\n", function, why);
    return NULL;
}

static int copy_dims(int64_t* into, const int64_t* dims, uint64_t count)
{
    if (count > MDEV_NN_MAX_DIMS || (count && dims == NULL)) {
        return 0;
    }
    if (count) {
        memcpy(into, dims, count * sizeof *dims);
    }
    return 1;
}

ACL_FUNC_VISIBILITY aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum, aclDataType dataType,
                                               const int64_t* stride, int64_t offset, aclFormat format,
                                               const int64_t* storageDims, uint64_t storageDimsNum,
                                               void* tensorData)
{
    aclTensor* t = calloc(1, sizeof *t);
    if (t == NULL) {
        return refuse("aclCreateTensor", "out of memory");
    }
    if (!copy_dims(t->shape, viewDims, viewDimsNum) || !copy_dims(t->storage, storageDims, storageDimsNum)
        || !copy_dims(t->strides, stride, stride != NULL ? viewDimsNum : 0)) {
        free(t);
        return refuse("aclCreateTensor", "more than 8 dimensions, or a NULL array of dimensions");
    }
    t->magic = MDEV_NN_TENSOR;
    t->dtype = (int32_t)dataType;
    t->format = (int32_t)format;
    t->ndim = (uint32_t)viewDimsNum;
    t->nstorage = (uint32_t)storageDimsNum;
    t->strided = stride != NULL;
    t->offset = offset;
    t->data = (uint64_t)(uintptr_t)tensorData;
    return t;
}

static size_t scalar_bytes(aclDataType dataType)
{
    switch (dataType) {
    case ACL_INT8: case ACL_UINT8: case ACL_BOOL:
        return 1;
    case ACL_FLOAT16: case ACL_BF16: case ACL_INT16: case ACL_UINT16:
        return 2;
    case ACL_FLOAT: case ACL_INT32: case ACL_UINT32:
        return 4;
    case ACL_DOUBLE: case ACL_INT64: case ACL_UINT64:
        return 8;
    default:
        return 0;                       /* kept without a value: the runtime refuses the dtype */
    }
}

ACL_FUNC_VISIBILITY aclScalar* aclCreateScalar(void* value, aclDataType dataType)
{
    if (value == NULL) {
        return refuse("aclCreateScalar", "value is a null pointer");
    }
    aclScalar* s = calloc(1, sizeof *s);
    if (s == NULL) {
        return refuse("aclCreateScalar", "out of memory");
    }
    s->magic = MDEV_NN_SCALAR;
    s->dtype = (int32_t)dataType;
    memcpy(s->value, value, scalar_bytes(dataType));
    return s;
}

static void* make_array(const char* function, uint32_t magic, const void* value, uint64_t size, size_t item)
{
    if (size > MDEV_NN_MAX_ITEMS || (size && value == NULL)) {
        return refuse(function, "more than 2^20 items, or a NULL array of items");
    }
    mdev_nn_array* a = calloc(1, sizeof *a);
    void* items = size ? malloc(size * item) : NULL;
    if (a == NULL || (size && items == NULL)) {
        free(a);
        free(items);
        return refuse(function, "out of memory");
    }
    if (size) {
        memcpy(items, value, size * item);
    }
    a->magic = magic;
    a->count = size;
    a->items = items;
    return a;
}

ACL_FUNC_VISIBILITY aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size)
{
    return make_array("aclCreateIntArray", MDEV_NN_INTS, value, size, sizeof *value);
}

ACL_FUNC_VISIBILITY aclFloatArray* aclCreateFloatArray(const float* value, uint64_t size)
{
    return make_array("aclCreateFloatArray", MDEV_NN_FLOATS, value, size, sizeof *value);
}

ACL_FUNC_VISIBILITY aclBoolArray* aclCreateBoolArray(const bool* value, uint64_t size)
{
    return make_array("aclCreateBoolArray", MDEV_NN_BOOLS, value, size, sizeof *value);
}

ACL_FUNC_VISIBILITY aclTensorList* aclCreateTensorList(const aclTensor* const* value, uint64_t size)
{
    return make_array("aclCreateTensorList", MDEV_NN_TENSORS, value, size, sizeof *value);
}

ACL_FUNC_VISIBILITY aclScalarList* aclCreateScalarList(const aclScalar* const* value, uint64_t size)
{
    return make_array("aclCreateScalarList", MDEV_NN_SCALARS, value, size, sizeof *value);
}

/* a destroy clears the magic first, so a descriptor used after it is refused, not read */
static aclnnStatus destroy(const void* descriptor, uint32_t magic)
{
    if (descriptor == NULL) {
        return ACLNN_SUCCESS;
    }
    uint32_t* seen = (uint32_t*)descriptor;
    if (*seen != magic) {
        return ACLNN_ERR_PARAM_INVALID;
    }
    *seen = MDEV_NN_GONE;
    if (magic != MDEV_NN_TENSOR && magic != MDEV_NN_SCALAR) {
        mdev_nn_array* a = (mdev_nn_array*)descriptor;
        for (uint64_t i = 0; (magic == MDEV_NN_TENSORS || magic == MDEV_NN_SCALARS) && i < a->count; i++) {
            void* item = ((void**)a->items)[i];
            destroy(item, magic == MDEV_NN_TENSORS ? MDEV_NN_TENSOR : MDEV_NN_SCALAR);
        }
        free(a->items);
    }
    free((void*)descriptor);
    return ACLNN_SUCCESS;
}

#define MDEV_NN_DESTROY(function, type, magic) \
    ACL_FUNC_VISIBILITY aclnnStatus function(const type* descriptor) { return destroy(descriptor, magic); }

MDEV_NN_DESTROY(aclDestroyTensor, aclTensor, MDEV_NN_TENSOR)
MDEV_NN_DESTROY(aclDestroyScalar, aclScalar, MDEV_NN_SCALAR)
MDEV_NN_DESTROY(aclDestroyIntArray, aclIntArray, MDEV_NN_INTS)
MDEV_NN_DESTROY(aclDestroyFloatArray, aclFloatArray, MDEV_NN_FLOATS)
MDEV_NN_DESTROY(aclDestroyBoolArray, aclBoolArray, MDEV_NN_BOOLS)
MDEV_NN_DESTROY(aclDestroyTensorList, aclTensorList, MDEV_NN_TENSORS)
MDEV_NN_DESTROY(aclDestroyScalarList, aclScalarList, MDEV_NN_SCALARS)

/* ------------------------------------------------------------------ for libopapi.so */
static size_t item_bytes(uint32_t magic)
{
    switch (magic) {
    case MDEV_NN_INTS:
        return sizeof(int64_t);
    case MDEV_NN_FLOATS:
        return sizeof(float);
    case MDEV_NN_BOOLS:
        return sizeof(bool);
    default:
        return sizeof(void*);
    }
}

static int put(unsigned char* out, size_t room, size_t* at, const void* data, size_t size)
{
    size_t padded = (size + 7) & ~(size_t)7;
    if (*at + padded > room) {
        return 0;
    }
    memcpy(out + *at, data, size);
    memset(out + *at + size, 0, padded - size);
    *at += padded;
    return 1;
}

/*
 * An operator's descriptors copied into ``out`` (what aclnnXGetWorkspaceSize sends with its
 * call, so the runtime need not read the caller's memory): for each non-NULL descriptor in
 * order, its structure, then an array's items (8-byte aligned) or a list's elements'
 * structures.  ``kinds`` holds each one's expected magic.  0 when they do not fit ``room``
 * or one is not the descriptor expected: the runtime then reads them itself, and says why.
 */
__attribute__((visibility("default"))) size_t mdev_nnopbase_pack(const void* const* descriptors,
                                                                  const uint32_t* kinds, int count,
                                                                  unsigned char* out, size_t room)
{
    size_t at = 0;
    for (int i = 0; i < count; i++) {
        const uint32_t* magic = descriptors[i];
        if (magic == NULL) {
            continue;
        }
        if (*magic != kinds[i]) {
            return 0;
        }
        if (kinds[i] == MDEV_NN_TENSOR || kinds[i] == MDEV_NN_SCALAR) {
            if (!put(out, room, &at, magic, kinds[i] == MDEV_NN_TENSOR ? sizeof(aclTensor) : sizeof(aclScalar))) {
                return 0;
            }
            continue;
        }
        const mdev_nn_array* a = (const mdev_nn_array*)magic;
        if (!put(out, room, &at, a, sizeof *a) || (a->count && !put(out, room, &at, a->items,
                                                                      a->count * item_bytes(a->magic)))) {
            return 0;
        }
        for (uint64_t k = 0; (a->magic == MDEV_NN_TENSORS || a->magic == MDEV_NN_SCALARS) && k < a->count; k++) {
            const uint32_t* item = ((void* const*)a->items)[k];
            uint32_t want = a->magic == MDEV_NN_TENSORS ? MDEV_NN_TENSOR : MDEV_NN_SCALAR;
            if (item == NULL || *item != want
                || !put(out, room, &at, item, want == MDEV_NN_TENSOR ? sizeof(aclTensor) : sizeof(aclScalar))) {
                return 0;
            }
        }
    }
    return at;
}
