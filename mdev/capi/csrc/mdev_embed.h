/*
 * mdev_embed.h -- how mdev's C libraries call their Python face (libmdev_embed.so).
 *
 *   C program --> aclrtGetDevice(&id)              (generated entry point, exact prototype)
 *             --> mdev_call(&face, index, ...)     (libmdev_client.so: to the host agent, or to
 *                                                   libmdev_embed.so's mdev_vcall: interpreter, GIL)
 *             --> face.entry("aclrtGetDevice")(*args)    (Python adapter, e.g. mdev.capi.adapter)
 *             --> mdev.runtime --> board / device processes
 *             <-- ret, or (value_1, ..., value_n, ret): the entry point stores value_k through
 *                 its k-th output parameter when ret is 0 (as pyACL returns outputs, then ret)
 *
 * Each argument is passed after a letter of the format string:
 *   'i' long long   'u' unsigned long long   'f' double   'p' an address (unsigned long long)
 *   's' const char* (bytes, or None for NULL)   'b' const void*, size_t (bytes of a struct)
 * Each output has a letter of ``outputs``: 'i' an integer or address, 'f' a floating value
 * (its double's bits).  ``ret`` is the C return value (a float's bits, a pointer's address);
 * when Python cannot run the call it is ``fail``.
 */

#ifndef MDEV_EMBED_H
#define MDEV_EMBED_H

#include <stdarg.h>
#include <stdint.h>
#include <string.h>

typedef struct mdev_face {
    const char* module;          /* the Python module whose entry(name) gives each function */
    const char* const* names;    /* C function names, by index */
    int count;
    void** entries;              /* the Python callables, looked up on first use (embedded); under the
                                    host agent non-NULL once the agent has run the function */
    const char* const* specs;    /* by index: NULL, or the checks that let a call return before the
                                    agent runs it (mdev.capi.asynchronous) */
} mdev_face;

#define MDEV_MAX_OUTPUTS 8

typedef struct mdev_result {
    uint64_t ret;
    int stored;                          /* the outputs below hold the returned values */
    uint64_t out[MDEV_MAX_OUTPUTS];
} mdev_result;

__attribute__((visibility("default"))) void mdev_call(mdev_face* face, int index, uint64_t fail,
                                                       mdev_result* result, const char* outputs,
                                                       const char* format, ...);

/* the same with the arguments as a va_list (libmdev_embed.so: the embedded interpreter) */
__attribute__((visibility("default"))) void mdev_vcall(mdev_face* face, int index, uint64_t fail,
                                                        mdev_result* result, const char* outputs,
                                                        const char* format, va_list args);

/* printf-style text of a variadic function's arguments (free() it) */
__attribute__((visibility("default"), format(printf, 1, 0))) char* mdev_format(const char* format, va_list args);

#define MDEV_I(x) ((long long)(x))
#define MDEV_U(x) ((unsigned long long)(x))
#define MDEV_F(x) ((double)(x))
#define MDEV_P(x) ((unsigned long long)(uintptr_t)(x))
#define MDEV_S(x) ((const char*)(x))
#define MDEV_B(x) ((const void*)&(x)), sizeof(x)

static inline float mdev_float(uint64_t bits)
{
    uint32_t word = (uint32_t)bits;
    float value;
    memcpy(&value, &word, sizeof value);
    return value;
}

static inline double mdev_double(uint64_t bits)
{
    double value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

#endif /* MDEV_EMBED_H */
