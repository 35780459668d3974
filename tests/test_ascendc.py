"""Ascend C kernels on emulated devices: mdev's own test kernels (tests/ascendc), built once per
session with ascendc.cmake's ascendc_fatbin_library, loaded with aclrtBinaryLoadFromFile and
run by the devices' native kernel runners.

    each API of the subset vs numpy (half and float), Cast / ReduceSum / ReduceMax, DataCopy's
    32-byte rule, UB overflow, an out-of-bounds GlobalTensor, a wild pointer, a trap (all the
    vector-core exception 507035, the device still serving), a spinning kernel stopped by
    aclrtStreamAbort, printf ordering, a kernel on every device of an 8-device board at once
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

N = 256
HERE = Path(__file__).resolve().parent / "ascendc"
FAULT = 507035


@pytest.fixture(scope="session")
def test_image(cann_home, tmp_path_factory) -> str:
    build = tmp_path_factory.mktemp("ascendc_build")
    env = dict(os.environ, ASCENDC_CMAKE_DIR=f"{cann_home}/tikcpp/ascendc_kernel_cmake")
    for command in (["cmake", "-S", str(HERE), "-B", str(build)], ["cmake", "--build", str(build)]):
        proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return str(build / "mdev_ascendc" / "test_kernels" / "test_kernels.o")


class Kernels:
    """The test image loaded on the current device of ``acl``."""

    def __init__(self, acl, image: str) -> None:
        self.acl = acl
        self.binary, ret = acl.rt.binary_load_from_file(image, None)
        assert ret == 0, acl.get_recent_err_msg()
        self.stream, ret = acl.rt.create_stream()
        assert ret == 0

    def launch(self, name: str, blocks: int, *slots: int, stream=None, cfg=None) -> int:
        fn, ret = self.acl.rt.binary_get_function(self.binary, name)
        assert ret == 0, self.acl.get_recent_err_msg()
        args = struct.pack(f"<{len(slots)}Q", *(s & (1 << 64) - 1 for s in slots))
        return self.acl.rt.launch_kernel_with_host_args(fn, blocks, stream or self.stream, cfg, args, len(args),
                                                        None, 0)

    def run(self, name: str, blocks: int, *slots: int) -> int:
        assert self.launch(name, blocks, *slots) == 0, self.acl.get_recent_err_msg()
        return self.acl.rt.synchronize_stream(self.stream)

    def put(self, array: np.ndarray) -> int:
        ptr, ret = self.acl.rt.malloc(max(array.nbytes, 32), 0)
        assert ret == 0
        data = np.ascontiguousarray(array)
        assert self.acl.rt.memcpy(ptr, data.nbytes, data.ctypes.data, data.nbytes, 1) == 0
        return ptr

    def get(self, ptr: int, dtype, count: int) -> np.ndarray:
        host = np.zeros(count, dtype)
        assert self.acl.rt.memcpy(host.ctypes.data, host.nbytes, ptr, host.nbytes, 2) == 0, \
            self.acl.get_recent_err_msg()
        return host


@pytest.fixture
def kernels(dev, test_image):
    return Kernels(dev, test_image)


OPS = {0: np.add, 1: np.subtract, 2: np.multiply, 3: np.divide, 4: np.maximum, 5: np.minimum,
       6: lambda a, b: a + b[0], 7: lambda a, b: a * b[0], 8: np.exp, 9: np.abs, 10: lambda a: np.maximum(a, 0),
       11: lambda a, b: np.full_like(a, b[0]), 12: np.log, 13: np.sqrt}
UNARY = {8, 9, 10, 12, 13}


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("op", sorted(OPS))
def test_vector_api_matches_numpy(kernels, op, dtype):
    blocks = 4
    rng = np.random.default_rng(op)
    x = rng.uniform(0.5 if op in (12, 13) else -4, 4, blocks * N).astype(dtype)
    y = rng.uniform(0.5, 4, blocks * N).astype(dtype)
    px, py, pz = kernels.put(x), kernels.put(y), kernels.put(np.zeros_like(x))
    name = "compute_half" if dtype == np.float16 else "compute_float"
    assert kernels.run(name, blocks, px, py, pz, op) == 0, kernels.acl.get_recent_err_msg()
    got = kernels.get(pz, dtype, blocks * N)
    want = np.concatenate([(OPS[op](x[b * N:(b + 1) * N], y[b * N:(b + 1) * N]) if op not in UNARY else
                            OPS[op](x[b * N:(b + 1) * N])).astype(dtype) for b in range(blocks)])
    if op in (8, 12, 13):      # transcendental: computed in float, rounded once
        np.testing.assert_allclose(got, want, rtol=1e-3 if dtype == np.float16 else 1e-6)
    else:
        np.testing.assert_array_equal(got, want)


def _bf16(values: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits (uint16), rounded to nearest even."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def _from_bf16(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("op", [0, 1, 2, 3, 4, 5])
def test_bf16_arithmetic(kernels, op):
    """bfloat16_t: computed in float, rounded to nearest even on store."""
    blocks = 2
    rng = np.random.default_rng(10 + op)
    x = _bf16(rng.uniform(-4, 4, blocks * N).astype(np.float32))
    y = _bf16(rng.uniform(0.5, 4, blocks * N).astype(np.float32))
    px, py, pz = kernels.put(x), kernels.put(y), kernels.put(np.zeros_like(x))
    assert kernels.run("compute_bf16", blocks, px, py, pz, op) == 0, kernels.acl.get_recent_err_msg()
    want = _bf16(OPS[op](_from_bf16(x), _from_bf16(y)).astype(np.float32))
    np.testing.assert_array_equal(kernels.get(pz, np.uint16, blocks * N), want)


def test_reduce_and_cast(kernels):
    x = np.random.default_rng(1).uniform(-2, 2, N).astype(np.float32)
    h = np.linspace(-3, 3, N).astype(np.float16)
    out = kernels.put(np.zeros(N + 8, np.float32))
    assert kernels.run("reduce_cast", 1, kernels.put(x), kernels.put(h), out) == 0, kernels.acl.get_recent_err_msg()
    got = kernels.get(out, np.float32, N + 8)
    assert got[0] == pytest.approx(float(x.sum()), rel=1e-5)
    assert got[1] == x.max()
    np.testing.assert_array_equal(got[8:], h.astype(np.float32))


def _fails(kernels, name, blocks, *slots, says: str) -> None:
    assert kernels.run(name, blocks, *slots) == FAULT
    assert says in kernels.acl.get_recent_err_msg()
    # the device still serves: a later launch on a new stream works
    kernels.stream, _ = kernels.acl.rt.create_stream()
    assert kernels.run("empty", 2) == 0, kernels.acl.get_recent_err_msg()


def test_datacopy_wants_whole_32_byte_blocks(kernels):
    x, z = kernels.put(np.arange(64, dtype=np.float32)), kernels.put(np.zeros(64, np.float32))
    assert kernels.run("copy_count", 1, x, z, 16, 64) == 0
    np.testing.assert_array_equal(kernels.get(z, np.float32, 16), np.arange(16, dtype=np.float32))
    _fails(kernels, "copy_count", 1, x, z, 12, 64, says="not a multiple of 32 bytes")


def test_global_tensor_is_bounds_checked(kernels):
    x, z = kernels.put(np.zeros(64, np.float32)), kernels.put(np.zeros(64, np.float32))
    _fails(kernels, "copy_count", 1, x, z, 72, 64, says="out of bounds")          # past SetGlobalBuffer's 64
    _fails(kernels, "copy_count", 1, x, z, 4096, 4096, says="out of bounds of its allocation")


def test_unified_buffer_overflow(kernels):
    assert kernels.run("ub_ask", 1, 192 * 1024) == 0
    _fails(kernels, "ub_ask", 1, 192 * 1024 + 64, says="UB overflow")


def test_wild_pointer_faults_and_device_survives(kernels):
    _fails(kernels, "wild", 3, 0x10, says="Segmentation fault")


def test_trap(kernels):
    _fails(kernels, "trapper", 2, says="executed a trap")


def test_spinning_kernel_stopped_by_stream_abort(kernels):
    flag = kernels.put(np.zeros(8, np.int32))
    assert kernels.launch("spin", 2, flag) == 0
    time.sleep(0.3)
    start = time.monotonic()
    assert kernels.acl.rt.stream_abort(kernels.stream) == 0, kernels.acl.get_recent_err_msg()
    kernels.acl.rt.synchronize_stream(kernels.stream)
    assert time.monotonic() - start < 5
    stream, _ = kernels.acl.rt.create_stream()
    kernels.stream = stream
    assert kernels.run("empty", 1) == 0, kernels.acl.get_recent_err_msg()
    # the stopped launch's cores went back with its runner: a launch wanting every core runs
    # (it waited for ever when the aborted stream's run kept them)
    assert kernels.launch("empty", 4096) == 0, kernels.acl.get_recent_err_msg()
    assert kernels.acl.rt.synchronize_stream_with_timeout(stream, 10000) == 0, kernels.acl.get_recent_err_msg()


def test_forced_destroy_lets_the_kernel_at_its_head_end(kernels, capsys):
    """1_h2d_sync_memory_copy's ending: ReadDo launched, aclrtDestroyStreamForce at once. On an
    NPU the kernel is on its core by then: it runs to its end, and its printf reaches stdout
    before the destroy returns (mdev dropped it when the destroy overtook the launch)."""
    acl = kernels.acl
    for attempt in range(10):
        out = kernels.put(np.zeros(2, np.int32))
        stream, ret = acl.rt.create_stream()
        assert ret == 0
        assert kernels.launch("talk", 2, out, 1, stream=stream) == 0
        assert acl.rt.destroy_stream_force(stream) == 0, acl.get_recent_err_msg()
        assert sorted(capsys.readouterr().out.splitlines()) == ["block 0 line 0", "block 1 line 0"], attempt
        np.testing.assert_array_equal(kernels.get(out, np.int32, 2), [1, 2])
        assert acl.rt.free(out) == 0


def test_forced_destroy_stops_a_spinning_kernel_after_a_grace(kernels):
    acl = kernels.acl
    flag = kernels.put(np.zeros(8, np.int32))
    out = kernels.put(np.zeros(2, np.int32))
    assert kernels.launch("spin", 2, flag) == 0
    assert kernels.launch("talk", 2, out, 0) == 0       # queued behind the spinning head: dropped
    start = time.monotonic()
    assert acl.rt.destroy_stream_force(kernels.stream) == 0
    assert time.monotonic() - start < 5
    time.sleep(0.2)
    np.testing.assert_array_equal(kernels.get(out, np.int32, 2), [0, 0])
    kernels.stream, _ = acl.rt.create_stream()
    assert kernels.run("empty", 1) == 0, acl.get_recent_err_msg()


def test_a_run_of_launches_keeps_the_stream_order(kernels):
    """Launches handed to the runner ahead of their ends run one after another, and a copy
    behind them on the stream waits for all of them: a = x + 40 y through 40 chained adds."""
    acl = kernels.acl
    x = np.arange(N, dtype=np.float32)
    y = np.full(N, 0.5, np.float32)
    a, b, py = kernels.put(x), kernels.put(np.zeros(N, np.float32)), kernels.put(y)
    for i in range(20):
        assert kernels.launch("compute_float", 1, a, py, b, 0) == 0
        assert kernels.launch("compute_float", 1, b, py, a, 0) == 0
    host = np.zeros(N, np.float32)
    assert acl.rt.memcpy_async(host.ctypes.data, host.nbytes, a, host.nbytes, 2, kernels.stream) == 0
    assert acl.rt.synchronize_stream(kernels.stream) == 0, acl.get_recent_err_msg()
    np.testing.assert_array_equal(host, x + 20)


def test_a_fault_in_a_run_of_launches_is_its_own(kernels, capsys):
    """A launch that faults among launches handed on: the stream reports 507035, the
    launches behind it still run (continue-on-failure), printf comes in launch order."""
    first, last = kernels.put(np.zeros(2, np.int32)), kernels.put(np.zeros(2, np.int32))
    assert kernels.launch("talk", 1, first, 1) == 0
    assert kernels.launch("wild", 1, 16) == 0
    assert kernels.launch("talk", 2, last, 1) == 0
    assert kernels.acl.rt.synchronize_stream(kernels.stream) == FAULT
    assert capsys.readouterr().out.splitlines() == ["block 0 line 0", "block 0 line 0", "block 1 line 0"]
    np.testing.assert_array_equal(kernels.get(last, np.int32, 2), [1, 2])


def test_abort_drops_the_launches_handed_on_behind_the_head(kernels):
    acl = kernels.acl
    flag, out = kernels.put(np.zeros(8, np.int32)), kernels.put(np.zeros(2, np.int32))
    assert kernels.launch("spin", 1, flag) == 0
    for _ in range(3):
        assert kernels.launch("talk", 2, out, 0) == 0
    time.sleep(0.3)                          # all handed on to the runner by now
    assert acl.rt.stream_abort(kernels.stream) == 0, acl.get_recent_err_msg()
    acl.rt.synchronize_stream(kernels.stream)
    time.sleep(0.2)
    np.testing.assert_array_equal(kernels.get(out, np.int32, 2), [0, 0])
    assert kernels.run("talk", 2, out, 0) == 0, acl.get_recent_err_msg()
    np.testing.assert_array_equal(kernels.get(out, np.int32, 2), [1, 2])


def test_a_launch_behind_one_timed_out_still_runs(kernels):
    """The execute timeout stops only its launch: the one handed on behind it runs (on a
    fresh runner), and its own timeout counts from its start."""
    acl = kernels.acl
    flag, out = kernels.put(np.zeros(8, np.int32)), kernels.put(np.zeros(2, np.int32))
    short = {acl.ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US: {"timeoutLow": 300_000, "timeoutHigh": 0}}
    assert kernels.launch("spin", 1, flag, cfg=short) == 0
    assert kernels.launch("talk", 2, out, 0, cfg=short) == 0
    start = time.monotonic()
    assert acl.rt.synchronize_stream(kernels.stream) == acl.ACL_ERROR_RT_VECTOR_CORE_TIMEOUT
    assert time.monotonic() - start < 5
    np.testing.assert_array_equal(kernels.get(out, np.int32, 2), [1, 2])


def test_synchronous_copy_comes_after_a_kernel_launched_before_it(kernels):
    """5_d2d_sync_memory_copy: WriteDo, then aclrtMemcpy without a synchronisation between. The
    copy waits for no stream, but on an NPU the short kernel has ended before the copy starts."""
    for attempt in range(10):
        out = kernels.put(np.zeros(2, np.int32))
        assert kernels.launch("talk", 2, out, 0) == 0
        np.testing.assert_array_equal(kernels.get(out, np.int32, 2), [1, 2], err_msg=f"attempt {attempt}")
        assert kernels.acl.rt.free(out) == 0
    assert kernels.acl.rt.synchronize_stream(kernels.stream) == 0


def test_synchronous_copy_overtakes_a_long_kernel(kernels):
    """... but it synchronises nothing: a kernel still running after the grace is overtaken, once."""
    acl = kernels.acl
    flag = kernels.put(np.zeros(8, np.int32))
    assert kernels.launch("spin", 1, flag) == 0
    start = time.monotonic()
    np.testing.assert_array_equal(kernels.get(flag, np.int32, 8), np.zeros(8))
    assert time.monotonic() - start < 5
    start = time.monotonic()
    kernels.get(flag, np.int32, 8)
    assert time.monotonic() - start < 0.25              # not again for the same launch
    assert acl.rt.stream_query(kernels.stream)[0] == acl.ACL_STREAM_STATUS_NOT_READY
    one = np.ones(8, np.int32)
    assert acl.rt.memcpy(flag, one.nbytes, one.ctypes.data, one.nbytes, 1) == 0     # lets the spin end
    assert acl.rt.synchronize_stream(kernels.stream) == 0, acl.get_recent_err_msg()


def test_printf_in_order_before_the_synchronisation_returns(kernels, capsys):
    out = kernels.put(np.zeros(4, np.int32))
    assert kernels.run("talk", 4, out, 50) == 0
    text = capsys.readouterr().out
    for b in range(4):
        lines = [line for line in text.splitlines() if line.startswith(f"block {b} ")]
        assert lines == [f"block {b} line {i}" for i in range(50)]
    np.testing.assert_array_equal(kernels.get(out, np.int32, 4), [1, 2, 3, 4])


def test_a_kernel_on_every_device_of_8_at_once(acl8, test_image):
    acl = acl8
    count, _ = acl.rt.get_device_count()
    assert count == 8
    results, errors = {}, []

    def on(device):
        try:
            assert acl.rt.set_device(device) == 0
            k = Kernels(acl, test_image)
            out = k.put(np.zeros(48, np.int32))
            assert k.run("talk", 48, out, 0) == 0, acl.get_recent_err_msg()
            results[device] = k.get(out, np.int32, 48)
        except Exception as exc:     # reported by the main thread
            errors.append((device, exc))

    threads = [threading.Thread(target=on, args=(d,)) for d in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    for device in range(8):
        np.testing.assert_array_equal(results[device], np.arange(1, 49))


def test_datacopypad_and_scalar_ops(kernels):
    rows = 6
    x = np.random.default_rng(2).uniform(0.5, 4, rows * 5).astype(np.float32)
    z = kernels.put(np.zeros(rows * 15, np.float32))
    assert kernels.run("pad_rows", 1, kernels.put(x), z, rows) == 0, kernels.acl.get_recent_err_msg()
    got = kernels.get(z, np.float32, rows * 15)
    np.testing.assert_array_equal(got[:rows * 5], np.maximum(x, 2))
    np.testing.assert_array_equal(got[rows * 5:rows * 10], np.minimum(x, 2))
    np.testing.assert_allclose(got[rows * 10:], 1 / x, rtol=1e-7)


def test_native_launch_captured_in_a_model(kernels, tmp_path):
    """A native launch captured into a model RI runs at each execution of the model; the
    model's dump shows it as a KERNEL task with its name and block count."""
    acl = kernels.acl
    out = kernels.put(np.zeros(4, np.int32))
    ok = acl.mdl.ri_capture_begin(kernels.stream, 0)      # ACL_MODEL_RI_CAPTURE_MODE_GLOBAL
    assert ok == 0, acl.get_recent_err_msg()
    assert kernels.launch("talk", 4, out, 0) == 0
    model, ret = acl.mdl.ri_capture_end(kernels.stream)
    assert ret == 0, acl.get_recent_err_msg()
    np.testing.assert_array_equal(kernels.get(out, np.int32, 4), [0, 0, 0, 0])     # captured, not run
    path = tmp_path / "model.json"
    assert acl.mdl.ri_debug_json_print(model, str(path), 0) == 0
    tasks = json.loads(path.read_text())["model"]["tasks"]
    assert [t["type"] for t in tasks] == ["KERNEL"] and "talk <<<4>>>" in json.dumps(tasks), tasks
    assert acl.mdl.ri_execute(model, -1) == 0, acl.get_recent_err_msg()
    np.testing.assert_array_equal(kernels.get(out, np.int32, 4), [1, 2, 3, 4])
    assert acl.mdl.ri_destroy(model) == 0


def test_memcheck_reports_a_native_out_of_bounds_access(run_py, board, test_image):
    """MDEV_SANITIZE=memcheck: the fault of an out-of-bounds GlobalTensor access is reported."""
    code = f"""
import struct, numpy as np
import mdev.acl as acl
acl.init(); acl.rt.set_device(0)
b, _ = acl.rt.binary_load_from_file({test_image!r}, None)
f, _ = acl.rt.binary_get_function(b, "copy_count")
x, _ = acl.rt.malloc(256, 0)
z, _ = acl.rt.malloc(256, 0)
args = struct.pack("<4Q", x, z, 4096, 4096)
acl.rt.launch_kernel_with_host_args(f, 1, 0, None, args, len(args), None, 0)
print("sync", acl.rt.synchronize_device())
"""
    proc = run_py(code, board, env={"MDEV_SANITIZE": "memcheck"})
    text = proc.stdout + proc.stderr
    assert "sync 507035" in text, text
    # the access (16 KiB from the start of x, a 256-byte allocation) as memcheck words it
    assert "a 16384-byte GlobalTensor access of kernel copy_count: 16384 bytes at offset 0" in text, text


def test_unloaded_image_leaves_the_runners(kernels):
    """binary_unload: the runner closes the image (its descriptor), and a load again works."""
    acl = kernels.acl
    assert kernels.run("empty", 1) == 0
    runner_pids = subprocess.run(["pgrep", "-f", "mdev-kernel-runner"], capture_output=True, text=True).stdout.split()
    before = {pid: len(os.listdir(f"/proc/{pid}/fd")) for pid in runner_pids if os.path.exists(f"/proc/{pid}/fd")}
    assert acl.rt.binary_unload(kernels.binary) == 0
    after = {pid: len(os.listdir(f"/proc/{pid}/fd")) for pid in before if os.path.exists(f"/proc/{pid}/fd")}
    assert any(after[pid] < before[pid] for pid in after), (before, after)


def test_runner_pool_forgets_unloaded_images_once_no_runner_holds_them(test_image):
    """A device's runner pool remembers an unloaded image only until the runners that held it
    (the one busy at the unload included) have let go of it."""
    from mdev.board import native
    pool = native.Runners()
    image = native.Image(7, Path(test_image).read_bytes(), "test_kernels.o")
    busy, idle = pool.take(), pool.take()
    try:
        for runner in (busy, idle):
            runner.load(image)
        pool.give(idle)
        pool.forget(7)                       # unloaded from the device while one runner is busy
        assert 7 not in idle.loaded and 7 in busy.loaded
        pool.give(busy)
        assert 7 not in busy.loaded
        assert not pool._gone                # nothing left to remember
    finally:
        for runner in (busy, idle):
            pool.drop(runner)


def test_ascendc_library_program(cann_home, board, tmp_path):
    """ascendc_library: the image linked into the program, <<<>>> in a host wrapper and the
    generated ACLRT_LAUNCH_KERNEL(scale), printf lines, a NULL pointer argument's fault."""
    env = dict(os.environ, ASCENDC_CMAKE_DIR=f"{cann_home}/tikcpp/ascendc_kernel_cmake", MDEV_BOARD=board,
               MDEV_AUTOSTART="0")
    build = tmp_path / "build"
    for command in (["cmake", "-S", str(HERE / "library"), "-B", str(build)], ["cmake", "--build", str(build)]):
        proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        rewrites = proc.stdout.count("mdev: rewriting Ascend C kernel source")
    assert rewrites == 1, f"kernels.cpp rewritten {rewrites} times"      # once for the image and the program
    proc = subprocess.run([str(build / "main")], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "result 20 40 60 80" in proc.stdout, proc.stdout + proc.stderr
    assert sorted(line for line in proc.stdout.splitlines() if line.startswith("block ")) == \
        sorted([f"block {b} of 4" for b in range(4)] * 2)
    assert "bad launch sync 507035" in proc.stdout, proc.stdout + proc.stderr


def test_sources_of_one_basename_in_one_image(cann_home, dev, tmp_path):
    """a/k.cpp and b/k.cpp in one ascendc_fatbin_library: both kernels are in the image."""
    for sub, name in (("a", "first"), ("b", "second")):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "k.cpp").write_text('#include "kernel_operator.h"\n'
                                              f'extern "C" __global__ __aicore__ void {name}() {{}}\n')
    (tmp_path / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.16)\nproject(pair CXX)\n"
                                             "include($ENV{ASCENDC_CMAKE_DIR}/ascendc.cmake)\n"
                                             "ascendc_fatbin_library(pair a/k.cpp b/k.cpp)\n")
    env = dict(os.environ, ASCENDC_CMAKE_DIR=f"{cann_home}/tikcpp/ascendc_kernel_cmake")
    build = tmp_path / "build"
    for command in (["cmake", "-S", str(tmp_path), "-B", str(build)], ["cmake", "--build", str(build)]):
        proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    binary, ret = dev.rt.binary_load_from_file(str(build / "mdev_ascendc" / "pair" / "pair.o"), None)
    assert ret == 0, dev.get_recent_err_msg()
    for name in ("first", "second"):
        assert dev.rt.binary_get_function(binary, name)[1] == 0, name
    assert dev.rt.binary_unload(binary) == 0


def test_rewrite_of_kernel_sources():
    """<<<>>> and asm("trap") rewritten on their lines (the line count kept), kernels listed,
    aclrtlaunch_K.h declared from the signature; what the rewrite cannot handle names file:line."""
    from mdev.capi import ascendc
    source = ('#include "kernel_operator.h"\n'
              '// K<<<1, nullptr, s>>>(x) in a comment stays\n'
              'extern "C" __global__ __aicore__ void K(__gm__ float* x, GM_ADDR y, int32_t n) { asm("trap"); }\n'
              'extern "C" __global__ __aicore__ void Declared(GM_ADDR x);\n'
              'void Do(void* s, float* x) { K<<<8, nullptr, s>>>(x, nullptr, 3); }\n')
    text, kernels = ascendc.rewrite(source, "k.cpp")
    body = text.split("\n")[1:6]
    assert body[1] == source.split("\n")[1]
    assert "__mdev_trap()" in body[2] and "asm" not in body[2]
    assert 'launcher<decltype(&K)>(MDEV_ASCENDC_IMAGE_REF, "K", (8), (nullptr), (s))(x, nullptr, 3)' in body[4]
    assert [k.name for k in kernels] == ["K"]
    assert 'uint32_t aclrtlaunch_K(uint32_t blockDim, aclrtStream stream, void* x, void* y, int32_t n);' in \
        ascendc.launch_header(kernels[0])
    for bad, says in [('template <typename T> __global__ void T1(T* x) {}\n', "k.cpp:1: template kernels"),
                      ('void f() { asm("nop"); }\n', "k.cpp:1: inline assembly is not emulated"),
                      ('void f(void* s) {\n K<<<1,\n nullptr, s>>>(); }\n', "k.cpp:2: cannot parse this <<<>>>"),
                      ('void f(void* s) { K<<<1, s>>>(); }\n', "k.cpp:1: <<<1, s>>>")]:
        with pytest.raises(ascendc.RewriteError, match=says):
            ascendc.rewrite(bad, "k.cpp")


def test_sync_all_is_a_barrier_of_all_blocks(kernels):
    blocks = 6
    a, b = kernels.put(np.zeros(blocks, np.int32)), kernels.put(np.zeros(blocks, np.int32))
    assert kernels.run("rotate", blocks, a, b, -1) == 0, kernels.acl.get_recent_err_msg()
    np.testing.assert_array_equal(kernels.get(b, np.int32, blocks), [(i + 1) % blocks * 10 for i in range(blocks)])
    # a block that faults before the barrier releases the others with a fault (no hang)
    assert kernels.launch("rotate", blocks, a, b, 3) == 0
    assert kernels.acl.rt.synchronize_stream_with_timeout(kernels.stream, 20_000) == FAULT
    assert "trap" in kernels.acl.get_recent_err_msg()


def test_a_file_that_is_no_device_image(kernels, tmp_path):
    """An ELF file that is no loadable image, or an image of no kernels' table: the documented
    code with the reason; the device goes on serving."""
    acl = kernels.acl
    junk = tmp_path / "junk.o"
    junk.write_bytes(b"\x7fELF" + bytes(200))
    assert acl.rt.binary_load_from_file(str(junk), None) == (0, acl.ACL_ERROR_INVALID_PARAM)
    assert "not a loadable device image" in acl.get_recent_err_msg()
    plain = tmp_path / "plain.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-x", "c", "-", "-o", str(plain)], input="int f(void){return 1;}\n",
                   text=True, check=True, timeout=60)
    assert acl.rt.binary_load_from_file(str(plain), None) == (0, acl.ACL_ERROR_INVALID_PARAM)
    assert "not an Ascend C device image of this mdev" in acl.get_recent_err_msg()
    assert kernels.run("empty", 2) == 0, acl.get_recent_err_msg()


def test_disarmed_deadlines_leave_the_watchdog():
    """Every launch arms its execute timeout (1091 s unless set) and disarms it at its end:
    the watchdog's heap holds the live deadlines, not one per launch ever made."""
    from mdev.board.watchdog import Watchdog
    dog = Watchdog()
    far = time.monotonic() + 1091
    for _ in range(10_000):
        dog.disarm(dog.arm(far, lambda: None))
    assert len(dog._heap) < 200
