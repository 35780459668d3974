/*
 * mdev -- emulated Ascend NPU boards behind the CANN Runtime API.
 *
 * acl/acl_prof.h: the profiling API (libmsprofiler.so): a configuration of the devices and
 * data to collect, and a collection started and stopped around the work to profile.
 *
 * Written by the mdev project from the published CANN profiling API: names, values and
 * prototypes follow it.  mdev collects its timeline trace: aclprofStop writes
 * <path of aclprofInit>/mdev_trace_<pid>.json (Chrome trace / Perfetto JSON, read by
 * `mdev trace summary`), the tasks of the configuration's devices since aclprofStart.
 */

#ifndef MDEV_ACL_PROF_H
#define MDEV_ACL_PROF_H

#include <stddef.h>
#include <stdint.h>

#include "acl/acl_base.h"

#ifndef MSVP_PROF_API
#if defined(__GNUC__) || defined(__clang__)
#define MSVP_PROF_API __attribute__((visibility("default")))
#else
#define MSVP_PROF_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* What to collect (aclprofCreateConfig's dataTypeConfig, a mask) */
#define ACL_PROF_ACL_API 0x0001ULL
#define ACL_PROF_TASK_TIME 0x0002ULL
#define ACL_PROF_AICORE_METRICS 0x0004ULL
#define ACL_PROF_AICPU 0x0008ULL
#define ACL_PROF_L2CACHE 0x0010ULL
#define ACL_PROF_HCCL_TRACE 0x0020ULL
#define ACL_PROF_TRAINING_TRACE 0x0040ULL
#define ACL_PROF_MSPROFTX 0x0080ULL
#define ACL_PROF_RUNTIME_API 0x0100ULL
#define ACL_PROF_GE_API_L0 0x0200ULL
#define ACL_PROF_TASK_TIME_L0 0x0800ULL
#define ACL_PROF_TASK_MEMORY 0x1000ULL
#define ACL_PROF_TASK_TIME_L2 0x2000ULL
#define ACL_PROF_OP_ATTR 0x4000ULL
#define ACL_PROF_TASK_TIME_L3 0x8000ULL
#define ACL_PROF_GE_API_L1 0x01000000ULL
#define ACL_PROF_API_STATS 0x400000000ULL

typedef enum {
    ACL_AICORE_ARITHMETIC_UTILIZATION = 0,
    ACL_AICORE_PIPE_UTILIZATION = 1,
    ACL_AICORE_MEMORY_BANDWIDTH = 2,
    ACL_AICORE_L0B_AND_WIDTH = 3,
    ACL_AICORE_RESOURCE_CONFLICT_RATIO = 4,
    ACL_AICORE_MEMORY_UB = 5,
    ACL_AICORE_L2_CACHE = 6,
    ACL_AICORE_PIPE_EXECUTE_UTILIZATION = 7,
    ACL_AICORE_MEMORY_ACCESS = 8,
    ACL_AICORE_NONE = 0xFF
} aclprofAicoreMetrics;

typedef struct aclprofConfig aclprofConfig;
typedef struct aclprofAicoreEvents aclprofAicoreEvents;

MSVP_PROF_API aclError aclprofInit(const char* profilerResultPath, size_t length);
MSVP_PROF_API aclError aclprofFinalize(void);
MSVP_PROF_API aclprofConfig* aclprofCreateConfig(uint32_t* deviceIdList, uint32_t deviceNums,
                                                 aclprofAicoreMetrics aicoreMetrics,
                                                 const aclprofAicoreEvents* aicoreEvents, uint64_t dataTypeConfig);
MSVP_PROF_API aclError aclprofDestroyConfig(const aclprofConfig* profilerConfig);
MSVP_PROF_API aclError aclprofStart(const aclprofConfig* profilerConfig);
MSVP_PROF_API aclError aclprofStop(const aclprofConfig* profilerConfig);

#ifdef __cplusplus
}
#endif

#endif /* MDEV_ACL_PROF_H */
