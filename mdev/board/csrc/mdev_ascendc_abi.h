/* mdev: the interface between an Ascend C device image (a shared object built by mdev's
 * ascendc.cmake) and the kernel runner of an emulated device (mdev/board/csrc/kernel_runner.c).
 *
 *   runner --dlopen--> image: mdev_ascendc_image() -> the kernels it holds
 *   runner --invoke(block, slots)--> one block of a kernel, on the runner's block thread
 *   image  --hooks--> runner: printf text, a fault or a trap (they do not return), the bytes
 *                      of kernel-reachable memory from a pointer on (0: none), a barrier of
 *                      all the launch's blocks
 *
 * Written for mdev; plain C so that both the C++ kernel headers and the C runner include it. */
#ifndef MDEV_ASCENDC_ABI_H
#define MDEV_ASCENDC_ABI_H

#include <stddef.h>
#include <stdint.h>

#define MDEV_ASCENDC_ABI 1
/* bytes of Unified Buffer per vector core of the Atlas A2 / A3 (Ascend 910B / 910C) parts */
#define MDEV_ASCENDC_UB_SIZE (192u * 1024u)

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mdev_hooks {
    void (*print)(const char* text, size_t len);
    void (*fault)(const char* message);                   /* does not return */
    void (*trap)(const char* file, int line);             /* does not return */
    size_t (*gm_extent)(const void* address);             /* reachable bytes from address, 0: none */
    void (*sync_all)(void);                               /* every block of the launch reaches it */
    /* an access of nbytes at address outside the memory the launch reaches (does not return) */
    void (*gm_fault)(const void* address, uint64_t nbytes, const char* message);
} mdev_hooks;

typedef struct mdev_block {
    int64_t idx;
    int64_t num;
    unsigned char* ub;          /* this block's Unified Buffer, MDEV_ASCENDC_UB_SIZE bytes, 32-byte aligned */
    const mdev_hooks* hooks;
} mdev_block;

typedef struct mdev_kernel_info {
    const char* name;
    uint32_t nparams;           /* each parameter takes one 8-byte slot of the argument block */
    uint64_t pointers;          /* bit i: parameter i is a pointer (translated at launch) */
    void (*invoke)(const mdev_block* block, const uint64_t* slots);
} mdev_kernel_info;

typedef struct mdev_image_info {
    uint32_t abi;
    uint32_t count;
    const mdev_kernel_info* const* kernels;
} mdev_image_info;

typedef const mdev_image_info* (*mdev_image_entry)(void);
#define MDEV_ASCENDC_IMAGE_SYMBOL "mdev_ascendc_image"

#ifdef __cplusplus
}
#endif
#endif
