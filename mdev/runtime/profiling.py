"""The profiling API (``aclprof*``, libmsprofiler.so) over mdev's timeline trace.

    init(path)            where the data goes: a folder, made if missing
    create_config(...)    devices and what to collect  --> a config handle
    start(config)         mdev.runtime.trace records this process's tasks on those devices
    stop(config)          ... collects them and writes <path>/mdev_trace_<pid>.json
    finalize()            (a collection still running is stopped first)

The file is mdev's trace (Chrome trace / Perfetto JSON; ``mdev trace summary FILE``), not
msprof's PROF_* folder: mdev collects task times, copies and collectives whatever the
configuration's mask asks (its unknown bits are refused as the real API refuses them).
The process has one profiling session; a configuration's devices are the user's device
ids of this process.
"""

from __future__ import annotations

import os
import threading

from mdev import errors as E
from mdev.errors import AclError
from mdev.runtime import trace
from mdev.runtime.boundary import api
from mdev.runtime.core import RUNTIME as rt

MAX_PATH = 4096                       # bytes of aclprofInit's path, as documented
CONFIG_HANDLES = 0xC0F0_0000_0000
AICORE_METRICS = set(range(9)) | {0xFF}     # aclprofAicoreMetrics
DATA_TYPES = (0x0001 | 0x0002 | 0x0004 | 0x0008 | 0x0010 | 0x0020 | 0x0040 | 0x0080 | 0x0100 | 0x0200 | 0x0800
              | 0x1000 | 0x2000 | 0x4000 | 0x8000 | 0x01000000 | 0x400000000)     # the ACL_PROF_* bits

_lock = threading.Lock()
_session: dict = {"path": None, "running": None}     # aclprofInit's folder; the started config
_configs: dict[int, tuple[list[int], int, int]] = {}  # handle -> (devices, aicore metrics, data types)


def _int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{what} must be an integer, got {value!r}")
    return value


@api()
def init(profiler_result_path, length=None) -> None:
    """aclprofInit: the folder the collections are written to (made if missing); ``length``
    its length in bytes (C; pyACL passes the path alone)."""
    if not isinstance(profiler_result_path, str) or not profiler_result_path:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "profilerResultPath must be a path")
    encoded = len(os.fsencode(profiler_result_path))
    length = encoded if length is None else _int(length, "length")
    if length != encoded or length > MAX_PATH:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"length {length}: the path is {encoded} bytes long "
                       f"(at most {MAX_PATH})")
    with _lock:
        if _session["path"] is not None:
            raise AclError(E.ACL_ERROR_REPEAT_INITIALIZE, f"aclprofInit was called already ({_session['path']}); "
                           "aclprofFinalize first")
        try:
            os.makedirs(profiler_result_path, exist_ok=True)
        except OSError as exc:
            raise AclError(E.ACL_ERROR_INVALID_PARAM, f"cannot make {profiler_result_path}: {exc.strerror}") from None
        if not os.access(profiler_result_path, os.W_OK):
            raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{profiler_result_path} is not writable")
        _session["path"] = os.path.abspath(profiler_result_path)


@api()
def finalize() -> None:
    """aclprofFinalize: ends the session (a collection still running is written first)."""
    with _lock:
        if _session["path"] is None:
            raise AclError(E.ACL_ERROR_PROF_NOT_RUN, "aclprofFinalize without aclprofInit")
        if _session["running"] is not None:
            _session["running"] = None
            trace.stop_recording(rt.board)
        _session["path"] = None


@api(1, failed=0)
def create_config(device_ids, aicore_metrics, aicore_events, data_type_config) -> int:
    """aclprofCreateConfig: a configuration of ``device_ids`` (a list of the user's device
    ids); ``aicore_events`` must be None (as the real API requires)."""
    if not isinstance(device_ids, (list, tuple)):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"deviceIdList must be a list of device ids, got {device_ids!r}")
    if not device_ids:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "deviceIdList is empty")
    devices = [rt.check_device(_int(d, "device id")) for d in device_ids]
    if len(set(devices)) != len(devices):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"deviceIdList {list(device_ids)} repeats a device")
    if _int(aicore_metrics, "aicoreMetrics") not in AICORE_METRICS:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"aicoreMetrics {aicore_metrics} is not an aclprofAicoreMetrics")
    if aicore_events:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "aicoreEvents must be NULL")
    types = _int(data_type_config, "dataTypeConfig")
    if types < 0 or types & ~DATA_TYPES:
        raise AclError(E.ACL_ERROR_PROF_MODULES_UNSUPPORTED, f"dataTypeConfig {types:#x} has bits that are no "
                       "ACL_PROF_* switch")
    with _lock:
        handle = rt.new_handle(CONFIG_HANDLES)
        _configs[handle] = (devices, aicore_metrics, types)
    return handle


def _config(handle) -> tuple[list[int], int, int]:
    if not handle:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "profilerConfig is NULL")
    config = _configs.get(handle) if isinstance(handle, int) else None
    if config is None:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{handle!r} is not a profiling configuration "
                       "(aclprofCreateConfig; destroyed?)")
    return config


@api()
def destroy_config(profiler_config) -> None:
    with _lock:
        _config(profiler_config)
        if _session["running"] == profiler_config:
            raise AclError(E.ACL_ERROR_INVALID_PARAM, "the configuration is collecting: aclprofStop it first")
        del _configs[profiler_config]


@api()
def start(profiler_config) -> None:
    """aclprofStart: record this process's tasks on the configuration's devices from now on."""
    with _lock:
        devices, _, _ = _config(profiler_config)
        if _session["path"] is None:
            raise AclError(E.ACL_ERROR_PROF_NOT_RUN, "aclprofStart before aclprofInit")
        if _session["running"] is not None:
            raise AclError(E.ACL_ERROR_PROF_ALREADY_RUN, "a collection is running already (aclprofStop it first)")
        path = os.path.join(_session["path"], f"mdev_trace_{os.getpid()}.json")
        trace.record_into(path, rt.attach(), devices)
        _session["running"] = profiler_config


@api()
def stop(profiler_config) -> None:
    """aclprofStop: collect what ``start`` recorded and write the trace file."""
    with _lock:
        _config(profiler_config)
        if _session["running"] != profiler_config:
            raise AclError(E.ACL_ERROR_PROF_NOT_RUN, "this configuration is not collecting (aclprofStart)")
        _session["running"] = None
        trace.stop_recording(rt.board)
