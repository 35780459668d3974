"""The emulated CANN install and what devices report about themselves: package versions,
CANN attributes, SoC architecture, data type sizes, device capabilities, status, UUIDs,
id mapping, device limits, error details, application logs, err_msg_mode.

The flows of the runtime-only CANN samples 0_quickstart/{1_error_handling, 2_system_info,
3_cross_version/0_runtime_compatibility} are checked here in pyACL form.
"""

from __future__ import annotations

import json
import threading

import pytest

E_PARAM, E_INVALID, E_FILE, E_NOT_SUPPORT = 107000, 100000, 100003, 207000


def test_system_info_sample(acl):
    """0_quickstart/2_system_info: versions, run mode, fp16 helpers, data type sizes."""
    assert acl.init() == 0
    assert acl.get_version_str("runtime") == ("9.1.0", 0)
    assert acl.get_version_num("runtime") == (90100000, 0)
    assert acl.rt.get_run_mode() == (acl.ACL_HOST, 0)
    half = acl.float_to_float16(1.625)
    assert half == 0x3E80 and acl.float16_to_float(half) == 1.625
    sizes = [acl.data_type_size(t) for t in (acl.ACL_FLOAT, acl.ACL_FLOAT16, acl.ACL_INT64)]
    assert sizes == [4, 2, 8]                  # "Data type size: ACL_FLOAT=4, ACL_FLOAT16=2, ACL_INT64=8"
    assert acl.finalize() == 0


def test_data_type_sizes_follow_the_runtime():
    import mdev.acl as acl
    assert acl.data_type_size(acl.ACL_STRING) == acl.data_type_size(acl.ACL_DT_UNDEFINED) == 0
    assert acl.data_type_size(acl.ACL_INT4) == acl.data_type_size(acl.ACL_BOOL) == 1
    assert acl.data_type_size(acl.ACL_BF16) == 2 and acl.data_type_size(acl.ACL_COMPLEX32) == 4
    assert acl.data_type_size(acl.ACL_COMPLEX128) == 16
    assert acl.data_type_size(12345) == 8      # the runtime's switch: anything else is 8 bytes
    with pytest.raises(TypeError):
        acl.data_type_size("float")


def test_versions_and_bad_packages(acl):
    from mdev.runtime.devices.sysinfo import version_number
    assert version_number("8.5.1") == 80501000                 # the guide's example
    assert version_number("8.5.0-rc2") < version_number("8.5.0") < version_number("8.5.1.alpha1")
    assert version_number("8.5.0.alpha1") < version_number("8.5.0.beta1") < version_number("8.5.0rc1")
    assert acl.get_version_str("no-such-package") == ("", E_FILE)
    assert acl.get_version_num("no-such-package") == (0, E_FILE)
    assert acl.get_version_str("")[1] == E_INVALID
    version, ret = acl.get_cann_version(acl.ACL_PKG_NAME_RUNTIME)
    assert ret == 0 and version["version"] == "9.1.0" and version["major_version"] == "9"
    assert acl.get_cann_version(acl.ACL_PKG_NAME_OPP)[1] == E_FILE            # not in an mdev install
    assert acl.get_cann_version(99)[1] == E_INVALID


def test_runtime_compatibility_sample(acl):
    """0_quickstart/3_cross_version/0_runtime_compatibility on a 910B4 board."""
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    attrs, count, ret = acl.get_cann_attribute_list()
    assert ret == 0 and count == 3 and attrs == [acl.ACL_CANN_ATTR_INF_NAN, acl.ACL_CANN_ATTR_BF16,
                                                 acl.ACL_CANN_ATTR_JIT_COMPILE]
    values = [acl.get_cann_attribute(a) for a in attrs]
    assert values == [(1, 0), (1, 0), (0, 0)]          # A2 SoC; no operator compiler in mdev
    assert acl.get_cann_attribute(77)[1] == E_INVALID
    soc = acl.get_soc_name()
    assert soc == "Ascend910B4"
    assert acl.rt.check_arch_compatibility(soc) == (1, 0)
    assert acl.rt.check_arch_compatibility("Ascend910B3") == (1, 0)     # same architecture (2201)
    assert acl.rt.check_arch_compatibility("Ascend310P3") == (0, 0)
    assert acl.rt.check_arch_compatibility("Ascend999")[1] == E_PARAM
    assert acl.rt.get_device_capability(0, acl.ACL_FEATURE_TSCPU_TASK_UPDATE_SUPPORT_AIC_AIV) == \
        (acl.ACL_DEV_FEATURE_SUPPORT, 0)
    assert acl.rt.get_device_capability(0, acl.ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV) == (0, 0)
    assert acl.rt.get_device_capability(0, 5)[1] == E_NOT_SUPPORT
    assert acl.rt.get_device_capability(9, 1)[1] == 107001
    assert acl.rt.reset_device_force(0) == 0
    assert acl.finalize() == 0


def test_acl_device_capability(acl):
    assert acl.get_device_capability(0, acl.ACL_DEVICE_INFO_AI_CORE_NUM) == (20, 0)       # Ascend910B4
    assert acl.get_device_capability(0, acl.ACL_DEVICE_INFO_VECTOR_CORE_NUM) == (40, 0)
    assert acl.get_device_capability(1, acl.ACL_DEVICE_INFO_L2_SIZE)[0] > 0
    assert acl.get_device_capability(4, acl.ACL_DEVICE_INFO_AI_CORE_NUM)[1] == E_INVALID   # ACL checks the id
    assert acl.get_device_capability(0, 7)[1] == E_INVALID


def test_error_handling_sample(acl):
    """0_quickstart/1_error_handling: last error, peek, messages, error verbose; consumed once."""
    assert acl.init() == 0
    assert acl.rt.set_device(0) == 0
    assert acl.rt.get_run_mode() == (acl.ACL_HOST, 0)
    assert acl.rt.create_event_with_flag(0xFFFF)[1] == E_PARAM      # an expected failure
    assert acl.rt.peek_at_last_error(acl.ACL_RT_THREAD_LEVEL) == E_PARAM
    assert acl.rt.get_last_error(acl.ACL_RT_THREAD_LEVEL) == E_PARAM
    assert "invalid event flags" in acl.get_recent_err_msg()
    info, ret = acl.rt.get_error_verbose(0)
    assert ret == 0 and info["error_type"] == acl.ACL_RT_NO_ERROR and info["has_detail"] == 0
    assert acl.rt.peek_at_last_error(0) == 0 and acl.rt.get_last_error(0) == 0
    assert acl.get_recent_err_msg() is None                  # "recentErrMsg=<null>"
    assert acl.rt.reset_device_force(0) == 0
    assert acl.finalize() == 0


def test_device_status_uuid_ids_and_utilisation(acl):
    assert acl.rt.query_device_status(0) == (acl.ACL_RT_DEVICE_STATUS_NORMAL, 0)
    assert acl.rt.query_device_status(4)[1] == 107001
    a, ret = acl.rt.device_get_uuid(0)
    b, _ = acl.rt.device_get_uuid(1)
    assert ret == 0 and len(a["bytes"]) == 16 and a != b and acl.rt.device_get_uuid(0)[0] == a
    for fn in ("get_logic_dev_id_by_user_dev_id", "get_user_dev_id_by_logic_dev_id", "get_logic_dev_id_by_phy_dev_id",
               "get_phy_dev_id_by_logic_dev_id", "get_user_dev_id_by_phy_dev_id", "get_phy_dev_id_by_user_dev_id"):
        assert getattr(acl.rt, fn)(3) == (3, 0)
        assert getattr(acl.rt, fn)(4)[1] == 107001
    rate, ret = acl.rt.get_device_utilization_rate(0)
    assert ret == 0 and rate["cube_utilization"] == rate["vector_utilization"] == 0       # idle
    assert rate["memory_utilization"] == -1
    assert acl.rt.get_mem_uce_info(0, 20) == ([], 0)
    assert acl.rt.mem_uce_repair(0, []) == 0


def test_utilisation_counts_busy_cores(acl):
    """A kernel holding every vector core of device 0 shows as 100 % vector utilisation."""
    from mdev.kernel import kernel, ptr

    @kernel
    def hold(ctx, flag: ptr):
        word = ctx.gm(flag, "int64", 1)
        ctx.spin_until(lambda: word[0] != 0, timeout=30)

    assert acl.rt.set_device(0) == 0
    stream, _ = acl.rt.create_stream()
    flag, _ = acl.rt.malloc(8, 0)
    assert acl.rt.memset(flag, 8, 0, 8) == 0
    assert hold[40, stream](flag) == 0
    from helpers import wait_until
    assert wait_until(lambda: acl.rt.get_device_utilization_rate(0)[0]["vector_utilization"] == 100)
    assert acl.rt.memset(flag, 8, 1, 8) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    assert acl.rt.destroy_stream(stream) == 0


def test_device_limits(acl, tmp_path):
    assert acl.rt.device_get_limit(acl.ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE) == (32 << 10, 0)
    assert acl.rt.device_get_limit(acl.ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE) == (32 << 10, 0)
    assert acl.rt.device_get_limit(acl.ACL_RT_DEV_LIMIT_SIMT_STACK_SIZE)[1] == E_NOT_SUPPORT    # Ascend 950 only
    assert acl.rt.device_set_limit(acl.ACL_RT_DEV_LIMIT_SIMT_PRINTF_FIFO_SIZE, 1 << 20) == E_NOT_SUPPORT
    assert acl.rt.device_set_limit(9, 1) == E_INVALID
    assert acl.rt.device_set_limit(acl.ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, 200 << 10) == E_PARAM
    assert acl.rt.device_set_limit(acl.ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE, 100) == E_PARAM
    # a 100 KiB stack (rounded to 112 KiB) per AI Core is reserved by the next set_device
    assert acl.rt.device_set_limit(acl.ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, 100 << 10) == 0
    assert acl.rt.device_get_limit(acl.ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE) == (100 << 10, 0)
    assert acl.rt.set_device(1) == 0
    free, total, _ = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
    assert total - free >= 20 * (112 << 10)
    assert acl.rt.reset_device(1) == 0
    # aclInit's StackSize and device_set_limit set the same value: the later one counts
    config = tmp_path / "acl.json"
    config.write_text(json.dumps({"StackSize": {"aicore_stack_size": 65536}}))
    assert acl.init(str(config)) == 0
    assert acl.rt.device_get_limit(acl.ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE) == (65536, 0)


def test_app_log_goes_to_the_plog_file(run_py, board, tmp_path):
    proc = run_py("""
        import mdev.acl as acl
        def work():
            acl.app_log(acl.ACL_ERROR, "the error line")
            acl.app_log(acl.ACL_INFO, "below the default level")
        work()
        from mdev.runtime import applog
        print(applog.log_file())
    """, board, env={"ASCEND_PROCESS_LOG_PATH": str(tmp_path)})
    path = proc.stdout.strip().splitlines()[-1]
    assert path.startswith(str(tmp_path / "debug" / "plog" / "plog-"))
    lines = open(path).read().splitlines()
    assert len(lines) == 1 and lines[0].startswith("[ERROR] APP(") and lines[0].endswith("work: the error line")
    assert "<string>:" in lines[0]                      # the caller's file and line
    proc = run_py("""
        import mdev.acl as acl
        acl.app_log(acl.ACL_INFO, "to stdout")
    """, board, env={"ASCEND_SLOG_PRINT_TO_STDOUT": "1", "ASCEND_GLOBAL_LOG_LEVEL": "1"})
    assert "[INFO] APP(" in proc.stdout and "to stdout" in proc.stdout


def test_err_msg_mode_makes_messages_per_process(acl, tmp_path):
    def fail_in_thread():
        acl.rt.set_device(9)

    assert acl.init() == 0
    t = threading.Thread(target=fail_in_thread)
    t.start(), t.join()
    assert acl.get_recent_err_msg() is None              # default "0": the other thread's message
    assert acl.finalize() == 0
    config = tmp_path / "acl.json"
    config.write_text(json.dumps({"err_msg_mode": "1"}))
    assert acl.init(str(config)) == 0
    t = threading.Thread(target=fail_in_thread)
    t.start(), t.join()
    assert "device 9 does not exist" in acl.get_recent_err_msg()
    assert acl.get_recent_err_msg() is None              # read once, for the whole process
    assert acl.finalize() == 0
    config.write_text(json.dumps({"err_msg_mode": "2"}))
    assert acl.init(str(config)) == E_INVALID
