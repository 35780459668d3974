/*
 * mdev_profapi.c -- libprofapi.so: the profiling hooks CANN frameworks report through.
 *
 * torch_npu links these (through libascendcl.so, as CANN's libprofapi.so is reached) and
 * calls them when its profiler runs: registering a command callback, reporting API spans,
 * compact and additional records.  mdev keeps no msprof data (its own trace records the
 * device side: `mdev trace`), so a report is accepted and dropped, as msprof does while no
 * profiling session collects.  MsprofSysCycleTime is the monotonic clock in nanoseconds
 * (the cycle counter's unit on the host) and MsprofGetHashId a stable 64-bit hash of the
 * text, as the real ones are.
 */

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define MDEV_EXPORT __attribute__((visibility("default")))

typedef int32_t (*mdev_prof_command_handle)(uint32_t type, void* data, uint32_t len);

MDEV_EXPORT int32_t MsprofRegisterCallback(uint32_t moduleId, mdev_prof_command_handle handle)
{
    (void)moduleId;
    (void)handle;       /* no profiling session ever starts, so the callback is never called */
    return 0;
}

MDEV_EXPORT int32_t MsprofRegTypeInfo(uint16_t level, uint32_t typeId, const char* typeName)
{
    (void)level;
    (void)typeId;
    (void)typeName;
    return 0;
}

MDEV_EXPORT int32_t MsprofReportApi(uint32_t agingFlag, const void* api)
{
    (void)agingFlag;
    (void)api;
    return 0;
}

MDEV_EXPORT int32_t MsprofReportCompactInfo(uint32_t agingFlag, const void* data, uint32_t length)
{
    (void)agingFlag;
    (void)data;
    (void)length;
    return 0;
}

MDEV_EXPORT int32_t MsprofReportAdditionalInfo(uint32_t agingFlag, const void* data, uint32_t length)
{
    (void)agingFlag;
    (void)data;
    (void)length;
    return 0;
}

MDEV_EXPORT uint64_t MsprofGetHashId(const char* hashInfo, size_t length)
{
    uint64_t hash = 1469598103934665603ULL;           /* FNV-1a */
    for (size_t i = 0; hashInfo != NULL && i < length; i++) {
        hash = (hash ^ (unsigned char)hashInfo[i]) * 1099511628211ULL;
    }
    return hash;
}

MDEV_EXPORT uint64_t MsprofSysCycleTime(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
}
