"""aclInit / aclFinalize, the aclInit config, device management, default context and stream,
per-thread current device (the CANN Runtime API reference on hiascend.com: initialization,
Device Management, Context Management)."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from conftest import SMALL_HBM
from helpers import MiB, from_device, hbm_free, stack_bytes, to_device
from mdev.board import launcher
from mdev.memory import address


def in_thread(fn):
    """Run ``fn`` in a new thread and return its result (exceptions re-raised here)."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            box["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    t.join(30)
    assert not t.is_alive()
    if "error" in box:
        raise box["error"]
    return box["value"]


def write_config(tmp_path, content) -> str:
    path = tmp_path / "acl.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


# ---------------------------------------------------------------------------- init / finalize
def test_init_finalize_reference_counts(acl):
    assert acl.init() == acl.ACL_SUCCESS == 0
    assert acl.init() == acl.ACL_ERROR_REPEAT_INITIALIZE == 100002
    assert acl.finalize() == 0
    assert acl.finalize() == acl.ACL_ERROR_REPEAT_FINALIZE == 100037
    # sequential re-initialisation is allowed
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    assert acl.finalize() == 0
    # finalize released the process's device state
    assert acl.rt.get_device() == (0, acl.ACL_ERROR_RT_CONTEXT_NULL)


def test_finalize_without_init_succeeds(acl):
    assert acl.finalize() == 0


def test_finalize_reference(acl):
    assert acl.init() == 0
    assert acl.init() == 100002
    assert acl.finalize_reference() == (1, 0)
    assert acl.finalize_reference() == (0, 0)
    assert acl.finalize_reference() == (0, acl.ACL_ERROR_REPEAT_FINALIZE)


def test_init_config_default_device(acl, tmp_path):
    config = {
        "defaultDevice": {"default_device": "2"},
        "dump": {"dump_path": "/tmp", "dump_list": []},     # parsed and ignored
        "no_such_key": {"deep": [1, 2, {"x": None}]},      # unknown keys are ignored
    }
    assert acl.init(write_config(tmp_path, config)) == 0
    # aclrtGetDevice answers the default device before any (implicit) set
    assert acl.rt.get_device() == (2, 0)
    # a runtime call without set_device implicitly sets the default device
    ptr, ret = acl.rt.malloc(4096, acl.ACL_MEM_MALLOC_NORMAL_ONLY)
    assert ret == 0
    assert address.split(ptr)[0] == 2
    assert acl.rt.get_mem_info(acl.ACL_HBM_MEM) == (SMALL_HBM - stack_bytes(acl, 2) - 8192, SMALL_HBM, 0)
    # every thread gets the default device, until it sets another one
    assert in_thread(acl.rt.get_device) == (2, 0)
    assert in_thread(lambda: (acl.rt.set_device(1), acl.rt.get_device())) == (0, (1, 0))
    assert acl.rt.get_device() == (2, 0)
    # an explicit set_device takes precedence
    assert acl.rt.set_device(3) == 0
    assert acl.rt.get_device() == (3, 0)
    assert acl.rt.free(ptr) == 0


@pytest.mark.parametrize("content,code", [
    ("{not json", 100006),                                             # ACL_ERROR_PARSE_FILE
    ("[1, 2]", 100006),                                                # top level not an object
    ("{" * 11 + "}" * 11, 100006),                                     # nested deeper than 10
    ({"defaultDevice": {"default_device": 1}}, 100000),                # must be a string
    ({"defaultDevice": {"default_device": "01"}}, 100000),             # regex 0|[1-9]\d*
    ({"defaultDevice": {"default_device": "x"}}, 100000),
    ({"defaultDevice": {"default_device": "9"}}, 107001),              # no such device
])
def test_init_config_errors(acl, tmp_path, content, code):
    assert acl.init(write_config(tmp_path, content)) == code
    assert acl.rt.peek_at_last_error() == code
    # the failed init left the process uninitialised: a good init is the first one
    assert acl.init() == 0


def test_init_config_missing_file(acl, tmp_path):
    assert acl.init(str(tmp_path / "nope.json")) == acl.ACL_ERROR_INVALID_FILE == 100003
    assert "nope.json" in acl.get_recent_err_msg()


@pytest.mark.parametrize("content", ["", "{}", "  \n"])
def test_init_config_empty(acl, tmp_path, content):
    assert acl.init(write_config(tmp_path, content)) == 0
    assert acl.rt.get_device() == (0, acl.ACL_ERROR_RT_CONTEXT_NULL)


def test_init_again_with_other_config(acl, tmp_path):
    a = write_config(tmp_path, {"defaultDevice": {"default_device": "1"}})
    assert acl.init(a) == 0
    assert acl.init(a) == acl.ACL_ERROR_REPEAT_INITIALIZE
    b = tmp_path / "other.json"
    b.write_text("{}")
    assert acl.init(str(b)) == acl.ACL_ERROR_INVALID_PARAM
    # only the first config counts
    assert acl.rt.get_device() == (1, 0)


# ---------------------------------------------------------------------------- device queries
def test_device_count_soc_run_mode(acl):
    assert acl.rt.get_device_count() == (4, 0)
    assert acl.get_soc_name() == "Ascend910B4"
    assert acl.rt.get_run_mode() == (acl.ACL_HOST, 0)
    assert acl.ACL_HOST == 1


def test_device_count_soc_hccs8(acl8):
    assert acl8.rt.get_device_count() == (8, 0)
    assert acl8.get_soc_name() == "Ascend910B1"


def _expected_info(topo, d):
    spec = topo.device(d)
    return {
        "ACL_DEV_ATTR_AICORE_CORE_NUM": spec.aicore,
        "ACL_DEV_ATTR_CUBE_CORE_NUM": spec.cube,
        "ACL_DEV_ATTR_VECTOR_CORE_NUM": spec.vector,
        "ACL_DEV_ATTR_AICPU_CORE_NUM": spec.aicpu,
        "ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE": spec.hbm_bytes,
        "ACL_DEV_ATTR_L2_CACHE_SIZE": spec.l2_bytes,
        "ACL_DEV_ATTR_NPU_ARCH": spec.npu_arch,
    }


def test_get_device_info_matches_topology(acl):
    topo = launcher.resolve_topology("pcie4", hbm=SMALL_HBM)
    for d in range(4):
        for name, value in _expected_info(topo, d).items():
            assert acl.rt.get_device_info(d, getattr(acl, name)) == (value, 0), name
    # the concrete Ascend910B4 profile of the pcie4 preset
    assert acl.rt.get_device_info(0, acl.ACL_DEV_ATTR_AICORE_CORE_NUM) == (20, 0)
    assert acl.rt.get_device_info(0, acl.ACL_DEV_ATTR_VECTOR_CORE_NUM) == (40, 0)
    assert acl.rt.get_device_info(3, acl.ACL_DEV_ATTR_AICPU_CORE_NUM) == (6, 0)
    assert acl.rt.get_device_info(1, acl.ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE) == (SMALL_HBM, 0)
    assert acl.rt.get_device_info(2, acl.ACL_DEV_ATTR_L2_CACHE_SIZE) == (96 * MiB, 0)


def test_get_device_info_hccs8(acl8):
    topo = launcher.resolve_topology("hccs8", hbm=SMALL_HBM)
    for d in range(8):
        for name, value in _expected_info(topo, d).items():
            assert acl8.rt.get_device_info(d, getattr(acl8, name)) == (value, 0), name
    assert acl8.rt.get_device_info(7, acl8.ACL_DEV_ATTR_CUBE_CORE_NUM) == (24, 0)


def test_get_device_info_edge_cases(acl):
    # SIMT-only attributes read 0 on A2-class parts
    assert acl.rt.get_device_info(0, acl.ACL_DEV_ATTR_WARP_SIZE) == (0, 0)
    # connect type exists only on Ascend 950
    assert acl.rt.get_device_info(0, acl.ACL_DEV_ATTR_HD_CONNECT_TYPE) == (0, acl.ACL_ERROR_RT_FEATURE_NOT_SUPPORT)
    assert acl.rt.get_device_info(4, acl.ACL_DEV_ATTR_AICORE_CORE_NUM) == (0, acl.ACL_ERROR_RT_INVALID_DEVICEID)
    assert acl.rt.get_device_info(0, 99999) == (0, acl.ACL_ERROR_INVALID_PARAM)


# ---------------------------------------------------------------------------- set / get device
def test_get_device_before_set(acl):
    assert acl.rt.get_device() == (0, acl.ACL_ERROR_RT_CONTEXT_NULL)
    assert acl.ACL_ERROR_RT_CONTEXT_NULL == 107002


@pytest.mark.parametrize("dev", [4, -1, 1000])
def test_set_device_invalid(acl, dev):
    assert acl.rt.set_device(dev) == acl.ACL_ERROR_RT_INVALID_DEVICEID == 107001
    assert acl.rt.get_device() == (0, 107002)


def test_set_device_switches(acl):
    assert acl.rt.set_device(0) == 0
    assert acl.rt.set_device(3) == 0
    assert acl.rt.get_device() == (3, 0)
    ptr, ret = acl.rt.malloc(100, 0)
    assert ret == 0 and address.split(ptr)[0] == 3   # allocations go to the current device
    assert acl.rt.set_device(1) == 0
    assert acl.rt.get_device() == (1, 0)
    assert acl.rt.free(ptr) == 0                      # freeing works whatever the current device


def test_set_device_is_per_thread(acl):
    assert acl.rt.set_device(0) == 0
    in_t1, in_t2 = threading.Barrier(2), threading.Barrier(2)
    seen = {}

    def worker():
        assert acl.rt.get_device() == (0, acl.ACL_ERROR_RT_CONTEXT_NULL)  # main's device is not ours
        assert acl.rt.set_device(2) == 0
        in_t1.wait()      # main checks its device while we hold device 2
        in_t2.wait()
        seen["worker"] = acl.rt.get_device()

    t = threading.Thread(target=worker)
    t.start()
    in_t1.wait()
    seen["main"] = acl.rt.get_device()
    assert acl.rt.set_device(1) == 0      # main switches while the worker holds device 2
    in_t2.wait()
    t.join(10)
    assert seen == {"main": (0, 0), "worker": (2, 0)}
    assert acl.rt.get_device() == (1, 0)
    # a fresh thread has no device at all
    assert in_thread(acl.rt.get_device) == (0, 107002)


def test_default_context_and_stream_shared_by_threads(acl):
    assert acl.rt.set_device(1) == 0
    ctx, ret = acl.rt.get_context()
    assert ret == 0
    stream, ret = acl.rt.ctx_get_current_default_stream()
    assert ret == 0 and stream != 0
    sid = acl.rt.get_stream_id(0)
    other = in_thread(lambda: (acl.rt.set_device(1), acl.rt.get_context(),
                               acl.rt.ctx_get_current_default_stream(), acl.rt.get_stream_id(None)))
    assert other == (0, (ctx, 0), (stream, 0), sid)
    # another device has another default context and stream
    assert acl.rt.set_device(2) == 0
    assert acl.rt.get_context()[0] != ctx
    assert acl.rt.ctx_get_current_default_stream()[0] != stream


def test_default_stream_as_0_and_none(acl):
    assert acl.rt.set_device(0) == 0
    handle, _ = acl.rt.ctx_get_current_default_stream()
    ids = {acl.rt.get_stream_id(s) for s in (0, None, handle)}
    assert len(ids) == 1 and ids.pop()[1] == 0
    ptr, _ = acl.rt.malloc(4096, 0)
    host, _ = acl.rt.malloc_host(4096)
    for n, s in enumerate((0, None, handle), start=1):
        assert acl.rt.memset_async(ptr, 4096, n, 4096, s) == 0
        assert acl.rt.memcpy_async(host, 4096, ptr, 4096, acl.ACL_MEMCPY_DEVICE_TO_HOST, s) == 0
        assert acl.rt.synchronize_stream(s) == 0
        assert acl.rt.stream_query(s) == (acl.ACL_STREAM_STATUS_COMPLETE, 0)
        assert (acl.util.ptr_to_numpy(host, (4096,), 2) == n).all()
    assert acl.rt.synchronize_stream_with_timeout(None, 1000) == 0
    assert acl.rt.free_host(host) == 0
    assert acl.rt.free(ptr) == 0


# ---------------------------------------------------------------------------- reset
def test_reset_device_paired_counts(acl):
    assert acl.rt.set_device(0) == 0
    assert acl.rt.set_device(0) == 0
    base = hbm_free(acl)
    ptr, _ = acl.rt.malloc(1 * MiB, acl.ACL_MEM_MALLOC_NORMAL_ONLY)
    stream, _ = acl.rt.create_stream()
    assert acl.rt.reset_device(0) == 0
    # one set is still outstanding: everything keeps working
    assert acl.rt.get_device() == (0, 0)
    assert acl.rt.memset_async(ptr, MiB, 5, MiB, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    assert (from_device(acl, ptr, 16) == 5).all()
    assert acl.rt.reset_device(0) == 0
    # the default context went away with its streams and this process's memory
    assert acl.rt.get_device() == (0, acl.ACL_ERROR_RT_CONTEXT_NULL)
    assert acl.rt.reset_device(0) == acl.ACL_ERROR_RT_CONTEXT_RELEASE_ERROR == 507007
    assert acl.rt.set_device(0) == 0
    assert acl.rt.stream_query(stream) == (0, acl.ACL_ERROR_INVALID_PARAM)
    assert hbm_free(acl) == base                # the allocation went with the reset
    assert acl.rt.free(ptr) == acl.ACL_ERROR_RT_PARAM_INVALID


def test_reset_device_never_set(acl):
    assert acl.rt.reset_device(2) == 507007
    assert acl.rt.reset_device_force(2) == 507007
    assert acl.rt.reset_device(7) == acl.ACL_ERROR_RT_INVALID_DEVICEID


def test_reset_device_force(acl):
    for _ in range(3):
        assert acl.rt.set_device(1) == 0
    base = hbm_free(acl)
    ptr, _ = acl.rt.malloc(3 * MiB, acl.ACL_MEM_MALLOC_HUGE_ONLY)
    assert hbm_free(acl) == base - 4 * MiB
    assert acl.rt.reset_device_force(1) == 0
    assert acl.rt.get_device() == (0, 107002)
    assert acl.rt.reset_device(1) == 507007           # nothing left to reset
    assert acl.rt.reset_device_force(1) == 507007
    assert acl.rt.set_device(1) == 0
    assert hbm_free(acl) == base


def test_reset_keeps_other_device(acl):
    assert acl.rt.set_device(0) == 0
    p0, _ = acl.rt.malloc(4096, 0)
    to_device(acl, p0, np.full(4096, 7, np.uint8))
    assert acl.rt.set_device(1) == 0
    p1, _ = acl.rt.malloc(4096, 0)
    assert acl.rt.reset_device(1) == 0
    assert acl.rt.set_device(0) == 0
    assert (from_device(acl, p0, 4096) == 7).all()
    assert acl.rt.memcpy(p1, 4096, p0, 4096, acl.ACL_MEMCPY_DEVICE_TO_DEVICE) == acl.ACL_ERROR_RT_PARAM_INVALID


def test_get_primary_ctx_state(acl):
    assert acl.rt.get_primary_ctx_state(0) == (0, 0, 0)
    assert acl.rt.set_device(0) == 0
    assert acl.rt.get_primary_ctx_state(0) == (1, 0, 0)
    assert acl.rt.reset_device(0) == 0
    assert acl.rt.get_primary_ctx_state(0) == (0, 0, 0)


# ---------------------------------------------------------------------------- sync / mem info
def test_synchronize_device_waits_for_every_stream(acl):
    assert acl.rt.set_device(0) == 0
    n = 32 * MiB
    bufs = [acl.rt.malloc(n, 0)[0] for _ in range(3)]
    streams = [0, acl.rt.create_stream()[0], acl.rt.create_stream()[0]]
    for value, (buf, s) in enumerate(zip(bufs, streams), start=1):
        for _ in range(3):
            assert acl.rt.memset_async(buf, n, value, n, s) == 0
    assert acl.rt.synchronize_device() == 0
    for value, (buf, s) in enumerate(zip(bufs, streams), start=1):
        assert acl.rt.stream_query(s) == (acl.ACL_STREAM_STATUS_COMPLETE, 0)
        assert (from_device(acl, buf + n - 64, 64) == value).all()
    assert acl.rt.synchronize_device_with_timeout(-1) == 0
    assert acl.rt.synchronize_device_with_timeout(0) == acl.ACL_ERROR_RT_PARAM_INVALID


def test_synchronize_device_without_device(acl):
    assert acl.rt.synchronize_device() == acl.ACL_ERROR_RT_CONTEXT_NULL


def test_get_mem_info_tracks_allocations(acl, board):
    assert acl.rt.get_mem_info(acl.ACL_HBM_MEM) == (0, 0, acl.ACL_ERROR_RT_CONTEXT_NULL)
    assert acl.rt.set_device(2) == 0
    # set_device itself reserves the AI Core stacks (32 KiB x 20 cores on Ascend910B4)
    base = SMALL_HBM - 32 * 1024 * 20
    assert acl.rt.get_mem_info(acl.ACL_HBM_MEM) == (base, SMALL_HBM, 0)
    a, _ = acl.rt.malloc(1 * MiB, acl.ACL_MEM_MALLOC_NORMAL_ONLY)       # 1 MiB + 32 -> 1 MiB + 4 KiB
    assert hbm_free(acl) == base - MiB - 4096
    b, _ = acl.rt.malloc(10 * MiB, acl.ACL_MEM_MALLOC_HUGE_ONLY)        # -> 12 MiB of 2 MiB pages
    assert hbm_free(acl) == base - MiB - 4096 - 12 * MiB
    # other devices are not affected
    assert acl.rt.set_device(3) == 0
    assert hbm_free(acl) == base
    assert acl.rt.set_device(2) == 0
    assert acl.rt.free(a) == 0
    assert hbm_free(acl) == base - 12 * MiB
    assert acl.rt.free(b) == 0
    assert hbm_free(acl) == base
    # the type-agnostic class answers the same; DDR reads 0/0 on HBM parts
    assert acl.rt.get_mem_info(acl.ACL_MEM_NORMAL) == (base, SMALL_HBM, 0)
    assert acl.rt.get_mem_info(acl.ACL_DDR_MEM) == (0, 0, 0)
    assert acl.rt.get_mem_info(99)[2] == acl.ACL_ERROR_INVALID_PARAM
    # resetting the device (set twice above) gives the stacks back
    assert acl.rt.reset_device(2) == 0
    assert launcher.status(board)["devices"][2]["hbm_used"] == 32 * 1024 * 20
    assert acl.rt.reset_device(2) == 0
    assert launcher.status(board)["devices"][2]["hbm_used"] == 0
