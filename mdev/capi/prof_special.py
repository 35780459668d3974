"""Hand-written adapters of libmsprofiler.so (acl/acl_prof.h, over mdev.runtime.profiling).

    aclprofCreateConfig     uint32_t deviceIdList[deviceNums] read; returns the configuration
                            (a handle standing for the opaque aclprofConfig*), NULL on failure
    aclprofStart / Stop / DestroyConfig   the aclprofConfig* passes as that handle
"""

from __future__ import annotations

import ctypes

from mdev.capi import cmemory
from mdev.capi.special import CONVERSIONS, adapts, needs

for _name in ("aclprofStart", "aclprofStop", "aclprofDestroyConfig"):
    CONVERSIONS[(_name, "profilerConfig")] = int


@adapts("aclprofCreateConfig")
def _create_config(fn, impl):
    def make(create):
        def call(device_ids, device_nums, aicore_metrics, aicore_events, data_type_config):
            ids = cmemory.read_array(ctypes.c_uint32, device_ids, device_nums) if device_ids else None
            config, _ = create(ids, aicore_metrics, aicore_events or None, data_type_config)
            return config
        return call
    return needs(impl, fn, make)
