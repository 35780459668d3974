/*
 * mdev_embed.h -- how mdev's C libraries call their Python face (libmdev_embed.so).
 *
 *   C program --> aclrtMemsetAsync(...)            (generated entry point, exact prototype)
 *             --> mdev_call(&face, index, ...)     (this library: interpreter, GIL, arguments)
 *             --> face.entry("aclrtMemsetAsync")(*args)   (Python adapter, e.g. mdev.capi.adapter)
 *             --> mdev.runtime --> board / device processes
 *
 * Each argument is passed after a letter of the format string:
 *   'i' long long   'u' unsigned long long   'f' double   'p' an address (unsigned long long)
 *   's' const char* (bytes, or None for NULL)   'b' const void*, size_t (bytes of a struct)
 * The adapter returns an int: the C return value (its bits for a float, an address for a
 * pointer).  When Python cannot run the call, the entry point returns ``fail``.
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
    void** entries;              /* the Python callables, looked up on first use */
} mdev_face;

__attribute__((visibility("default"))) uint64_t mdev_call(mdev_face* face, int index, uint64_t fail,
                                                           const char* format, ...);

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

#endif /* MDEV_EMBED_H */
