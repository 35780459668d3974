"""Kernels (the CANN Runtime API reference on hiascend.com: Kernel Loading and Execution; guide
03-03): both launch styles, every launch API, argument handles, device faults and exception
callbacks, kernel prints, memory-semantic spins, core resource limits (the device and stream
resource limits of the same reference, guide 07) and the AI Core stack reserved by set_device
(aclInit's StackSize, guide 08).

The ``acl`` board is pcie4: 4 x Ascend910B4, 20 AI Core / 20 cube / 40 vector cores.
"""

from __future__ import annotations

import json
import os
import struct
import threading
import time

import numpy as np
import pytest

from async_util import Gate, device_buffer, ok, out, pinned, stream_done
from helpers import from_device, to_device, wait_until
from mdev import ops
from mdev.kernel import float32, kernel

VECTOR, CUBE, AICORE = 40, 20, 20
KiB = 1 << 10
NPY_FLOAT32 = 11


def floats(acl, values) -> int:
    """Device buffer holding ``values`` as float32."""
    data = np.asarray(values, np.float32)
    ptr_ = device_buffer(acl, max(data.nbytes, 4))
    to_device(acl, ptr_, data)
    return ptr_


def read_f32(acl, ptr_, n) -> np.ndarray:
    return from_device(acl, ptr_, 4 * n, np.float32)


# ---------------------------------------------------------------------------- kernels of this module
@kernel
def add_custom(ctx, x, y, z, n):
    """The guide's add_custom: each block adds its share of n elements."""
    per = n // ctx.block_num
    lo = ctx.block_idx * per
    hi = n if ctx.block_idx == ctx.block_num - 1 else lo + per
    xs, ys, zs = (ctx.gm(p, np.float32, n) for p in (x, y, z))
    zs[lo:hi] = xs[lo:hi] + ys[lo:hi]


@kernel
def record_blocks(ctx, out):
    """out[block] = block_num * 1000 + block_idx + 1 (0 means: block never ran)."""
    ctx.gm(out, np.int64, ctx.block_num)[ctx.block_idx] = ctx.block_num * 1000 + ctx.block_idx + 1


@kernel(vectorized=True)
def record_vectorized(ctx, out):
    view = ctx.gm(out, np.int64, ctx.block_num + 1)
    view[:ctx.block_num] = np.arange(ctx.block_num) + 1
    view[ctx.block_num] = -1 if ctx.block_idx is None else ctx.block_idx


@kernel
def concurrency(ctx, counters, hold_s: float32):
    """counters[0]: blocks running now, counters[1 + b]: how many ran when block b started."""
    old = ctx.atomic_add(counters, 1)
    ctx.gm(counters, np.int64, ctx.block_num + 1)[1 + ctx.block_idx] = old + 1
    time.sleep(hold_s)
    ctx.atomic_add(counters, -1)


@kernel(core="cube")
def cube_concurrency(ctx, counters, hold_s: float32):
    old = ctx.atomic_add(counters, 1)
    ctx.gm(counters, np.int64, ctx.block_num + 1)[1 + ctx.block_idx] = old + 1
    time.sleep(hold_s)
    ctx.atomic_add(counters, -1)


@kernel
def shared_peak(ctx, running, peaks, hold_s: float32):
    """running: blocks running now, of every launch sharing it; peaks[b]: how many ran when
    block b of this launch started."""
    ctx.gm(peaks, np.int64, ctx.block_num)[ctx.block_idx] = ctx.atomic_add(running, 1) + 1
    time.sleep(hold_s)
    ctx.atomic_add(running, -1)


@kernel
def boom(ctx, x):
    if ctx.block_idx == 1:
        raise RuntimeError("kernel bug in block 1")
    ctx.gm(x, np.float32, 1)


@kernel
def overrun(ctx, x, n):
    ctx.gm(x, np.float32, n + 1)[:] = 1.0


@kernel
def wild_pointer(ctx):
    ctx.gm(0x1234, np.float32, 4)


@kernel
def say_hello(ctx, tag):
    ctx.print("hello from block", ctx.block_idx, "of", ctx.block_num, "tag", tag)


@kernel
def wait_for_flag(ctx, flag, out_):
    """The guide's memory-semantic kernel: spin until *flag == 2, then mark out."""
    word = ctx.gm(flag, np.uint64, 1)
    ctx.spin_until(lambda: int(word[0]) == 2)
    ctx.gm(out_, np.uint64, 1)[0] = 7


@kernel
def sleeper(ctx, seconds: float32):
    time.sleep(seconds)


def _half(n):
    return n // 2


@kernel
def uses_helper(ctx, x, n):
    ctx.gm(x, np.float32, n)[:_half(n)] = 5.0


@kernel
def on_pinned(ctx, host, n):
    view = ctx.gm(host, np.float32, n)
    view[:] = view * 2 + 1


BINARY_SOURCE = '''
import numpy as np
from mdev.kernel import kernel, ptr, int64, float32


@kernel
def add_custom(ctx, x: ptr, y: ptr, z: ptr, n: int64):
    per = n // ctx.block_num
    lo = ctx.block_idx * per
    hi = n if ctx.block_idx == ctx.block_num - 1 else lo + per
    zs = ctx.gm(z, np.float32, n)
    zs[lo:hi] = ctx.gm(x, np.float32, n)[lo:hi] + ctx.gm(y, np.float32, n)[lo:hi]


@kernel
def scale_by(ctx, x: ptr, n: int64, factor: float32):
    if ctx.block_idx == 0:
        ctx.gm(x, np.float32, n)[:] *= factor


@kernel
def sum_table(ctx, table: ptr, count: int64, out: ptr):
    ctx.gm(out, np.float32, 1)[0] = ctx.gm(table, np.float32, count).sum()
'''


@pytest.fixture
def binary_file(tmp_path):
    path = tmp_path / "kernels_bin.py"
    path.write_text(BINARY_SOURCE)
    return str(path)


@pytest.fixture
def binary(dev, binary_file):
    handle = out(dev, dev.rt.binary_load_from_file(binary_file, None))
    yield handle
    dev.rt.binary_unload(handle)


def function(acl, binary_handle, name):
    return out(acl, acl.rt.binary_get_function(binary_handle, name))


# ============================================================================ mixed style
def test_mixed_style_vector_add(dev):
    acl = dev
    n = 4099
    x, y = np.arange(n, dtype=np.float32), np.full(n, 0.5, np.float32)
    px, py, pz = floats(acl, x), floats(acl, y), device_buffer(acl, 4 * n)
    stream = out(acl, acl.rt.create_stream())
    assert add_custom[8, stream](px, py, pz, n) == acl.ACL_SUCCESS
    ok(acl, acl.rt.synchronize_stream(stream))
    np.testing.assert_array_equal(read_f32(acl, pz, n), x + y)


@pytest.mark.parametrize("config", ["omitted", "none", "zero"])
def test_mixed_style_default_stream(dev, config):
    acl = dev
    buf = device_buffer(acl, 8 * 6)
    launch = {"omitted": record_blocks[6], "none": record_blocks[6, None], "zero": record_blocks[6, 0]}[config]
    ok(acl, launch(buf))
    ok(acl, acl.rt.synchronize_stream(0))
    assert list(from_device(acl, buf, 48, np.int64)) == [6001, 6002, 6003, 6004, 6005, 6006]


def test_every_block_runs_once(dev):
    acl = dev
    blocks = 100
    buf = device_buffer(acl, 8 * blocks)
    ok(acl, record_blocks[blocks](buf))
    ok(acl, acl.rt.synchronize_device())
    assert list(from_device(acl, buf, 8 * blocks, np.int64)) == [blocks * 1000 + b + 1 for b in range(blocks)]


def test_vectorized_kernel_runs_once_for_all_blocks(dev):
    acl = dev
    buf = device_buffer(acl, 8 * 13)
    ok(acl, record_vectorized[12](buf))
    ok(acl, acl.rt.synchronize_device())
    assert list(from_device(acl, buf, 8 * 13, np.int64)) == list(range(1, 13)) + [-1]


def test_launch_error_is_returned_and_recorded(dev):
    acl = dev
    buf = device_buffer(acl, 8)
    assert record_blocks[0](buf) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.get_last_error() == acl.ACL_ERROR_INVALID_PARAM
    assert record_blocks[1, 0xDEAD](buf) == acl.ACL_ERROR_INVALID_PARAM      # not a stream
    assert acl.rt.get_last_error() == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.get_last_error() == acl.ACL_SUCCESS


def test_launch_needs_a_device(acl):
    assert record_blocks[1](0) == acl.ACL_ERROR_RT_CONTEXT_NULL


def test_launch_on_stream_of_other_context(dev):
    acl = dev
    other = out(acl, acl.rt.create_context(1))
    stream1 = out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.set_device(0))
    assert record_blocks[1, stream1](device_buffer(acl, 8)) == acl.ACL_ERROR_RT_STREAM_CONTEXT
    ok(acl, acl.rt.set_context(other))
    ok(acl, acl.rt.destroy_stream(stream1))
    ok(acl, acl.rt.destroy_context(other))


def test_kernel_helpers_ship_with_the_kernel(dev):
    """A kernel calling a helper function of its own module runs on the device."""
    acl = dev
    buf = floats(acl, np.zeros(10))
    ok(acl, uses_helper[1](buf, 10))
    ok(acl, acl.rt.synchronize_device())
    assert list(read_f32(acl, buf, 10)) == [5.0] * 5 + [0.0] * 5


def test_same_kernel_on_two_devices(dev):
    acl = dev
    results = []
    for device in (0, 1):
        ok(acl, acl.rt.set_device(device))
        buf = device_buffer(acl, 16)
        ok(acl, record_blocks[2](buf))
        ok(acl, acl.rt.synchronize_device())
        results.append(list(from_device(acl, buf, 16, np.int64)))
    assert results == [[2001, 2002]] * 2


def test_kernel_reads_and_writes_pinned_host_memory(dev):
    acl = dev
    host, view = pinned(acl, 4 * 64, np.float32)
    view[:] = np.arange(64)
    ok(acl, on_pinned[1](host, 64))
    ok(acl, acl.rt.synchronize_device())
    np.testing.assert_array_equal(view, np.arange(64) * 2 + 1)
    ok(acl, acl.rt.free_host(host))


# ============================================================================ built-in kernels
def test_ops_float32(dev):
    acl = dev
    n = 10_001
    rng = np.random.default_rng(1)
    x, y = rng.random(n, np.float32), rng.random(n, np.float32)
    px, py, pout = floats(acl, x), floats(acl, y), device_buffer(acl, 4 * n)
    stream = out(acl, acl.rt.create_stream())
    cases = [
        (ops.add, (px, py, pout, n), x + y),
        (ops.mul, (px, py, pout, n), x * y),
        (ops.axpy, (px, py, pout, 2.5, n), x + np.float32(2.5) * y),
        (ops.fill, (pout, 3.25, n), np.full(n, 3.25, np.float32)),
        (ops.copy, (py, pout, n), y),
        (ops.scale, (px, pout, -0.5, n), np.float32(-0.5) * x),
    ]
    for op, args, expected in cases:
        for blocks in (1, 7, 48):
            ok(acl, acl.rt.memset_async(pout, 4 * n, 0, 4 * n, stream))
            ok(acl, op[blocks, stream](*args))
            ok(acl, acl.rt.synchronize_stream(stream))
            np.testing.assert_allclose(read_f32(acl, pout, n), expected, rtol=1e-6, err_msg=f"{op.name}[{blocks}]")


@pytest.mark.parametrize("acl_type,dtype", [(1, np.float16), (3, np.int32), (9, np.int64), (2, np.int8)])
def test_ops_other_dtypes(dev, acl_type, dtype):
    acl = dev
    n = 300
    x, y = (np.arange(n) % 20).astype(dtype), (np.arange(n)[::-1] % 7).astype(dtype)
    size = x.nbytes
    px, py, pout = (device_buffer(acl, size) for _ in range(3))
    to_device(acl, px, x)
    to_device(acl, py, y)
    for op, args, expected in [(ops.add, (px, py, pout, n, acl_type), x + y),
                               (ops.mul, (px, py, pout, n, acl_type), x * y),
                               (ops.axpy, (px, py, pout, 2.0, n, acl_type), (x + 2 * y).astype(dtype)),
                               (ops.fill, (pout, 9, n, acl_type), np.full(n, 9, dtype)),
                               (ops.copy, (px, pout, n, acl_type), x),
                               (ops.scale, (px, pout, 3.0, n, acl_type), (3 * x).astype(dtype))]:
        ok(acl, op[4](*args))
        ok(acl, acl.rt.synchronize_device())
        np.testing.assert_array_equal(from_device(acl, pout, size, dtype), expected, err_msg=op.name)


def test_ops_large_launch_in_parallel_parts(dev):
    """Past ops.SPLIT elements per part a launch's work is cut into parallel parts."""
    acl = dev
    n = 2 * ops.SPLIT + 12_345
    x = np.arange(n, dtype=np.float32)
    y = np.full(n, 0.5, np.float32)
    px, py, pout = floats(acl, x), floats(acl, y), device_buffer(acl, 4 * n)
    for op, args, expected in [(ops.add, (px, py, pout, n), x + y),
                               (ops.axpy, (px, py, pout, 4.0, n), x + 2.0),
                               (ops.fill, (pout, 7.0, n), np.full(n, 7.0, np.float32)),
                               (ops.scale, (px, pout, 0.5, n), x / 2)]:
        for blocks in (1, 3, 48):
            ok(acl, acl.rt.memset(pout, 4 * n, 0, 4 * n))
            ok(acl, op[blocks](*args))
            ok(acl, acl.rt.synchronize_device())
            np.testing.assert_array_equal(read_f32(acl, pout, n), expected, err_msg=f"{op.name}[{blocks}]")


def test_ops_numpy_dtype_in_mixed_style(dev):
    acl = dev
    buf = device_buffer(acl, 8 * 5)
    ok(acl, ops.fill[2](buf, 1.5, 5, np.float64))
    ok(acl, acl.rt.synchronize_device())
    assert list(from_device(acl, buf, 40, np.float64)) == [1.5] * 5


def test_ops_from_the_module_file_as_a_binary(dev):
    """mdev/ops.py is Python source, so it loads as a binary too; same results."""
    acl = dev
    binary = out(acl, acl.rt.binary_load_from_file(os.path.abspath(ops.__file__), None))
    names = [out(acl, acl.rt.get_function_name(out(acl, acl.rt.binary_get_function_by_entry(binary, i))))
             for i in range(6)]
    assert names == ["add", "mul", "axpy", "fill", "copy", "scale"]
    axpy = function(acl, binary, "axpy")
    assert out(acl, acl.rt.function_get_param_count(axpy)) == 6
    n = 1000
    x, y = np.arange(n, dtype=np.float32), np.ones(n, np.float32)
    px, py, pout = floats(acl, x), floats(acl, y), device_buffer(acl, 4 * n)
    args = struct.pack("<QQQf4xqi", px, py, pout, 0.25, n, acl.ACL_FLOAT)
    ok(acl, acl.rt.launch_kernel_with_host_args(axpy, 8, 0, None, args, len(args), None, 0))
    ok(acl, acl.rt.synchronize_device())
    np.testing.assert_array_equal(read_f32(acl, pout, n), x + 0.25)
    ok(acl, acl.rt.binary_unload(binary))


def test_op_with_bad_dtype_faults(dev):
    acl = dev
    buf = device_buffer(acl, 64)
    ok(acl, ops.fill[1](buf, 1.0, 4, acl.ACL_BF16))
    assert acl.rt.synchronize_device() == acl.ACL_ERROR_RT_VECTOR_CORE_EXCEPTION


# ============================================================================ binary style
def test_binary_functions_by_name_and_entry(dev, binary):
    acl = dev
    names = ["add_custom", "scale_by", "sum_table"]
    for entry, name in enumerate(names):
        by_entry = out(acl, acl.rt.binary_get_function_by_entry(binary, entry))
        assert by_entry == function(acl, binary, name)
        assert out(acl, acl.rt.get_function_name(by_entry)) == name
    assert [out(acl, acl.rt.function_get_param_count(function(acl, binary, n))) for n in names] == [4, 3, 3]
    assert acl.rt.binary_get_function(binary, "nope") == (0, acl.ACL_ERROR_RT_KERNEL_LOOKUP)
    assert acl.ACL_ERROR_RT_KERNEL_LOOKUP == 507027
    assert acl.rt.binary_get_function_by_entry(binary, 3) == (0, acl.ACL_ERROR_RT_KERNEL_LOOKUP)


def test_binary_load_errors(dev, binary_file, tmp_path):
    acl = dev
    # a relative path is the current directory's (the CANN samples pass ./out/...)
    handle = out(acl, acl.rt.binary_load_from_file(os.path.relpath(binary_file), None))
    ok(acl, acl.rt.binary_unload(handle))
    assert acl.ACL_ERROR_INVALID_PARAM == 100000
    assert acl.rt.binary_load_from_file(str(tmp_path / "missing.py"), None) == (0, acl.ACL_ERROR_RT_FILE_OPEN)
    broken = tmp_path / "broken.py"
    broken.write_text("def oops(:\n")
    assert acl.rt.binary_load_from_file(str(broken), None)[1] == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.binary_load_from_file("", None)[1] == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.binary_load_from_data(b"", 0, None)[1] == acl.ACL_ERROR_INVALID_PARAM


def test_binary_load_needs_a_device(acl, binary_file):
    assert acl.rt.binary_load_from_file(binary_file, None) == (0, acl.ACL_ERROR_RT_CONTEXT_NULL)


def test_binary_from_data_plain_functions(dev):
    """Without @kernel, a binary's public top-level functions are its kernels."""
    acl = dev
    source = (b"import numpy as np\n"
              b"def _private(ctx):\n    pass\n"
              b"def fill_seven(ctx, x, n):\n    ctx.gm(x, np.float32, n)[:] = 7\n")
    binary = out(acl, acl.rt.binary_load_from_data(source, len(source), None))
    assert acl.rt.binary_get_function(binary, "_private")[1] == acl.ACL_ERROR_RT_KERNEL_LOOKUP
    func = function(acl, binary, "fill_seven")
    buf = device_buffer(acl, 16)
    ok(acl, acl.rt.launch_kernel_with_args_array(func, 1, 0, None, [struct.pack("<Q", buf), struct.pack("<q", 4)]))
    ok(acl, acl.rt.synchronize_device())
    assert list(read_f32(acl, buf, 4)) == [7.0] * 4
    # from a host pointer, as pyACL passes it
    data = np.frombuffer(source, np.uint8).copy()
    binary2 = out(acl, acl.rt.binary_load_from_data(acl.util.numpy_to_ptr(data), data.nbytes, None))
    assert function(acl, binary2, "fill_seven")
    ok(acl, acl.rt.binary_unload(binary))
    ok(acl, acl.rt.binary_unload(binary2))


def test_launch_kernel_args_in_device_memory(dev, binary):
    acl = dev
    n = 1000
    x = np.arange(n, dtype=np.float32)
    px, py, pz = floats(acl, x), floats(acl, 2 * x), device_buffer(acl, 4 * n)
    block = struct.pack("<QQQq", px, py, pz, n)
    args = device_buffer(acl, len(block))
    to_device(acl, args, np.frombuffer(block, np.uint8))
    stream = out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.launch_kernel(function(acl, binary, "add_custom"), 8, args, len(block), stream))
    ok(acl, acl.rt.synchronize_stream(stream))
    np.testing.assert_array_equal(read_f32(acl, pz, n), 3 * x)
    # V2: the same with a launch configuration
    ok(acl, acl.rt.memset_async(pz, 4 * n, 0, 4 * n, stream))
    cfg = {acl.ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT: 5}
    ok(acl, acl.rt.launch_kernel_v2(function(acl, binary, "add_custom"), 3, args, len(block), cfg, stream))
    ok(acl, acl.rt.synchronize_stream(stream))
    np.testing.assert_array_equal(read_f32(acl, pz, n), 3 * x)
    # argsData must be device memory of the stream's device
    host_block = np.frombuffer(block, np.uint8).copy()
    assert acl.rt.launch_kernel(function(acl, binary, "add_custom"), 8, acl.util.numpy_to_ptr(host_block),
                                len(block), stream) == acl.ACL_ERROR_RT_PARAM_INVALID
    ok(acl, acl.rt.synchronize_stream(stream))


def test_launch_kernel_v2_scalar_in_device_args(dev, binary):
    acl = dev
    px = floats(acl, [1, 2, 3])
    block = struct.pack("<Qqf4x", px, 3, 4.0)
    args = device_buffer(acl, len(block))
    to_device(acl, args, np.frombuffer(block, np.uint8))
    ok(acl, acl.rt.launch_kernel_v2(function(acl, binary, "scale_by"), 1, args, len(block), None, 0))
    ok(acl, acl.rt.synchronize_device())
    assert list(read_f32(acl, px, 3)) == [4.0, 8.0, 12.0]


def test_launch_kernel_with_host_args_and_placeholder(dev, binary):
    acl = dev
    table = np.array([1.5, 2.5, 3.0, 4.0], np.float32)
    result = device_buffer(acl, 4)
    # [table ptr (placeholder)] [count] [out] | placeholder data: the table
    block = bytearray(struct.pack("<QqQ", 0, 4, result)) + table.tobytes()
    holders = [{"addrOffset": 0, "dataOffset": 24}]
    ok(acl, acl.rt.launch_kernel_with_host_args(function(acl, binary, "sum_table"), 1, 0, None,
                                                acl.util.bytes_to_ptr(block), len(block), holders, 1))
    block[24:40] = bytes(16)      # the host block is consumed at submission
    ok(acl, acl.rt.synchronize_device())
    assert read_f32(acl, result, 1)[0] == table.sum()
    # a placeholder address outside the block is refused
    assert acl.rt.launch_kernel_with_host_args(function(acl, binary, "sum_table"), 1, 0, None, bytes(block),
                                               len(block), [(40, 24)], 1) == acl.ACL_ERROR_INVALID_PARAM


def test_launch_kernel_with_args_array(dev, binary):
    acl = dev
    px = floats(acl, [1, 2])
    n_arr = np.array([2], np.int64)
    factor = np.array([10.0, 0.0], np.float32)      # each argument is read as an 8-byte slot
    func = function(acl, binary, "scale_by")
    ok(acl, acl.rt.launch_kernel_with_args_array(
        func, 1, 0, None, [struct.pack("<Q", px), acl.util.numpy_to_ptr(n_arr), acl.util.numpy_to_ptr(factor)]))
    ok(acl, acl.rt.synchronize_device())
    assert list(read_f32(acl, px, 2)) == [10.0, 20.0]
    # the count of arguments must match the kernel's parameters
    assert acl.rt.launch_kernel_with_args_array(func, 1, 0, None, [struct.pack("<Q", px)]) == acl.ACL_ERROR_INVALID_PARAM


def test_args_handle_append_placeholder_update_finalize(dev, binary):
    acl = dev
    func = function(acl, binary, "sum_table")
    result = device_buffer(acl, 4)
    assert out(acl, acl.rt.kernel_args_get_mem_size(func, 24)) >= 24
    assert out(acl, acl.rt.kernel_args_get_handle_mem_size(func)) > 0
    handle = out(acl, acl.rt.kernel_args_init(func))
    p_table = out(acl, acl.rt.kernel_args_append_place_holder(handle))
    count = np.array([4], np.int64)
    p_count = out(acl, acl.rt.kernel_args_append(handle, acl.util.numpy_to_ptr(count), 8))
    out(acl, acl.rt.kernel_args_append(handle, struct.pack("<Q", result), 8))
    buffer = out(acl, acl.rt.kernel_args_get_place_holder_buffer(handle, p_table, 16))
    acl.util.ptr_to_numpy(buffer, (4,), NPY_FLOAT32)[:] = [1, 2, 3, 4]
    # not finalized yet
    assert acl.rt.launch_kernel_with_config(func, 1, 0, None, handle, None) == acl.ACL_ERROR_RT_PARAM_INVALID
    ok(acl, acl.rt.kernel_args_finalize(handle))
    ok(acl, acl.rt.launch_kernel_with_config(func, 1, 0, None, handle, None))
    ok(acl, acl.rt.synchronize_device())
    assert read_f32(acl, result, 1)[0] == 10.0
    # update a value: the handle needs another finalize before it launches again
    ok(acl, acl.rt.kernel_args_para_update(handle, p_count, struct.pack("<q", 2), 8))
    assert acl.rt.launch_kernel_with_config(func, 1, 0, None, handle, None) == acl.ACL_ERROR_RT_PARAM_INVALID
    ok(acl, acl.rt.kernel_args_finalize(handle))
    ok(acl, acl.rt.launch_kernel_with_config(func, 1, 0, None, handle, None))
    ok(acl, acl.rt.synchronize_device())
    assert read_f32(acl, result, 1)[0] == 3.0
    # a placeholder is no appended value; a handle of another function does not fit
    assert acl.rt.kernel_args_para_update(handle, p_table, struct.pack("<q", 1), 8) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.kernel_args_get_place_holder_buffer(handle, p_count, 8)[1] == acl.ACL_ERROR_INVALID_PARAM
    other = out(acl, acl.rt.kernel_args_init(function(acl, binary, "scale_by")))
    ok(acl, acl.rt.kernel_args_finalize(other))
    assert acl.rt.launch_kernel_with_config(func, 1, 0, None, other, None) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.launch_kernel_with_config(func, 1, 0, None, 0xBAD, None) == acl.ACL_ERROR_INVALID_PARAM


def test_placeholder_buffer_belongs_to_its_handle(dev, binary_file):
    """The runtime owns a placeholder's buffer: free_host refuses it, and unloading the
    binary frees it with the argument handle (it lived until finalize)."""
    from mdev.runtime.core import RUNTIME
    acl = dev
    binary = out(acl, acl.rt.binary_load_from_file(binary_file, None))
    handle = out(acl, acl.rt.kernel_args_init(function(acl, binary, "sum_table")))
    param = out(acl, acl.rt.kernel_args_append_place_holder(handle))
    buffer = out(acl, acl.rt.kernel_args_get_place_holder_buffer(handle, param, 16))
    assert acl.rt.free_host(buffer) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert RUNTIME.memory.get(buffer) is not None
    ok(acl, acl.rt.binary_unload(binary))
    assert RUNTIME.memory.get(buffer) is None
    assert acl.rt.kernel_args_finalize(handle) == acl.ACL_ERROR_INVALID_PARAM


def test_unloaded_binary_cannot_launch(dev, binary_file):
    acl = dev
    binary = out(acl, acl.rt.binary_load_from_file(binary_file, None))
    func = function(acl, binary, "scale_by")
    px = floats(acl, [1])
    args = struct.pack("<Qqf4x", px, 1, 2.0)
    ok(acl, acl.rt.binary_unload(binary))
    assert acl.rt.launch_kernel_with_host_args(func, 1, 0, None, args, len(args), None, 0) == \
        acl.ACL_ERROR_RT_INVALID_HANDLE
    assert acl.rt.binary_get_function(binary, "scale_by")[1] == acl.ACL_ERROR_RT_INVALID_HANDLE
    assert acl.rt.binary_unload(binary) == acl.ACL_ERROR_RT_INVALID_HANDLE
    assert acl.rt.function_get_param_count(func)[1] == acl.ACL_ERROR_RT_INVALID_HANDLE
    ok(acl, acl.rt.synchronize_device())
    assert read_f32(acl, px, 1)[0] == 1.0


def test_function_of_another_device(dev, binary):
    acl = dev
    func = function(acl, binary, "scale_by")
    ok(acl, acl.rt.set_device(1))
    args = struct.pack("<Qqf4x", 0, 0, 1.0)
    assert acl.rt.launch_kernel_with_host_args(func, 1, 0, None, args, len(args), None, 0) == \
        acl.ACL_ERROR_RT_INVALID_HANDLE
    ok(acl, acl.rt.set_device(0))


def test_launch_timeout_attribute(dev, binary_file, tmp_path):
    acl = dev
    path = tmp_path / "slow.py"
    path.write_text("import time\nfrom mdev.kernel import kernel, float32\n"
                    "@kernel\ndef slow(ctx, seconds: float32):\n    time.sleep(seconds)\n")
    binary = out(acl, acl.rt.binary_load_from_file(str(path), None))
    func = function(acl, binary, "slow")
    args = struct.pack("<f4x", 0.4)
    cfg = {acl.ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US: {"timeoutLow": 50_000, "timeoutHigh": 0}}
    ok(acl, acl.rt.launch_kernel_with_host_args(func, 1, 0, cfg, args, len(args), None, 0))
    assert acl.rt.synchronize_device() == acl.ACL_ERROR_RT_VECTOR_CORE_TIMEOUT     # a vector kernel
    both = {acl.ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT: 1, acl.ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US: 5}
    assert acl.rt.launch_kernel_with_host_args(func, 1, 0, both, args, len(args), None, 0) == \
        acl.ACL_ERROR_RT_PARAM_INVALID
    ok(acl, acl.rt.binary_unload(binary))


# ============================================================================ device faults
def test_kernel_fault_reports_at_sync_with_exception_info(dev):
    acl = dev
    infos = []

    def callback(info):
        infos.append({"device": acl.rt.get_device_id_from_exception_info(info),
                      "stream": acl.rt.get_stream_id_from_exception_info(info),
                      "task": acl.rt.get_task_id_from_exception_info(info),
                      "code": acl.rt.get_error_code_from_exception_info(info)})

    ok(acl, acl.rt.set_device(1))
    ok(acl, acl.rt.set_exception_info_callback(callback))
    stream = out(acl, acl.rt.create_stream())
    buf = device_buffer(acl, 64)
    ok(acl, acl.rt.memset_async(buf, 64, 0, 64, stream))                 # task 1
    assert boom[4, stream](buf) == acl.ACL_SUCCESS                        # task 2: the launch succeeds
    assert acl.rt.synchronize_stream(stream) == acl.ACL_ERROR_RT_VECTOR_CORE_EXCEPTION == 507035
    assert "kernel bug in block 1" in acl.get_recent_err_msg()
    assert infos == [{"device": 1, "stream": out(acl, acl.rt.get_stream_id(stream)), "task": 2,
                      "code": acl.ACL_ERROR_RT_VECTOR_CORE_EXCEPTION}]
    # reported once; the stream and the device go on working
    ok(acl, acl.rt.synchronize_stream(stream))
    ok(acl, ops.fill[4, stream](buf, 2.0, 16))
    ok(acl, acl.rt.synchronize_stream(stream))
    assert list(read_f32(acl, buf, 16)) == [2.0] * 16
    ok(acl, acl.rt.set_exception_info_callback(None))
    ok(acl, acl.rt.destroy_stream(stream))


def test_kernel_fault_leaves_other_streams_running(dev):
    acl = dev
    bad, good = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    buf = device_buffer(acl, 4 * 8)
    flag = device_buffer(acl, 8)
    gate = Gate(acl, bad)
    ok(acl, overrun[2, bad](buf, 8))                   # queued behind the gate
    ok(acl, ops.fill[2, good](buf, 4.0, 8))
    ok(acl, acl.rt.synchronize_stream(good))
    gate.open()
    assert acl.rt.synchronize_stream(bad) == acl.ACL_ERROR_RT_VECTOR_CORE_EXCEPTION
    assert "overrun" in acl.get_recent_err_msg()
    ok(acl, acl.rt.value_write(flag, 1, 0, good))
    ok(acl, ops.scale[2, good](buf, buf, 0.5, 8))
    ok(acl, acl.rt.synchronize_stream(good))
    assert list(read_f32(acl, buf, 8)) == [2.0] * 8       # the overrun wrote nothing (bounds are checked first)
    assert from_device(acl, flag, 8, np.uint64)[0] == 1


@pytest.mark.parametrize("bad", ["overrun", "wild", "raise"])
def test_each_kind_of_fault_is_an_aicore_exception(dev, bad):
    acl = dev
    buf = device_buffer(acl, 16)
    launch = {"overrun": lambda: overrun[1](buf, 4), "wild": lambda: wild_pointer[1](),
              "raise": lambda: boom[2](buf)}[bad]
    ok(acl, launch())
    assert acl.rt.synchronize_device() == acl.ACL_ERROR_RT_VECTOR_CORE_EXCEPTION


def test_registered_exception_callbacks_see_kernel_faults(dev):
    acl = dev
    codes = []
    cb = lambda info: codes.append(acl.rt.get_error_code_from_exception_info(info))  # noqa: E731
    ok(acl, acl.rt.exception_info_callback_register(cb))
    ok(acl, wild_pointer[1]())
    assert acl.rt.synchronize_device() == acl.ACL_ERROR_RT_VECTOR_CORE_EXCEPTION
    assert codes == [acl.ACL_ERROR_RT_VECTOR_CORE_EXCEPTION]      # done by the time sync returns
    ok(acl, acl.rt.exception_info_callback_unregister(cb))


# ============================================================================ prints
def test_kernel_print_reaches_stdout_by_sync(dev, capsys):
    acl = dev
    stream = out(acl, acl.rt.create_stream())
    ok(acl, say_hello[3, stream](42))
    ok(acl, acl.rt.synchronize_stream(stream))
    lines = capsys.readouterr().out.splitlines()
    assert sorted(lines) == [f"hello from block {b} of 3 tag 42" for b in range(3)]


def test_kernel_print_in_another_process(board, run_py):
    proc = run_py("""
        import numpy as np
        import mdev.acl as acl
        from mdev.kernel import kernel

        @kernel
        def hello(ctx, n):
            ctx.print("device says", n * 2)

        assert acl.rt.set_device(2) == 0
        assert hello[1](21) == 0
        assert acl.rt.synchronize_device() == 0
        print("SYNCED", flush=True)
    """, board)
    assert proc.stdout.splitlines() == ["device says 42", "SYNCED"]


# ============================================================================ memory-semantic spins
def test_kernel_spins_until_another_stream_writes_the_flag(dev):
    """Guide 03-07: a kernel waits until the flag becomes 2 while another stream writes it."""
    acl = dev
    waiter, writer = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    flag, result = device_buffer(acl, 8), device_buffer(acl, 8)
    ok(acl, wait_for_flag[1, waiter](flag, result))
    ok(acl, acl.rt.value_write(flag, 1, 0, writer))
    ok(acl, acl.rt.synchronize_stream(writer))
    time.sleep(0.2)
    assert not stream_done(acl, waiter)
    assert from_device(acl, result, 8, np.uint64)[0] == 0
    # other work of the device is not starved by the spinning kernel
    other = device_buffer(acl, 16)
    ok(acl, ops.fill[4, writer](other, 1.0, 4))
    ok(acl, acl.rt.synchronize_stream(writer))
    ok(acl, acl.rt.value_write(flag, 2, 0, writer))
    ok(acl, acl.rt.synchronize_stream(waiter))
    assert from_device(acl, result, 8, np.uint64)[0] == 7


def test_spinning_kernel_released_by_a_kernel_and_by_a_host_write(dev):
    acl = dev
    waiter, writer = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    flag, result = device_buffer(acl, 8), device_buffer(acl, 8)
    ok(acl, wait_for_flag[1, waiter](flag, result))
    ok(acl, ops.fill[1, writer](flag, 2, 1, acl.ACL_UINT64))       # a kernel writes the flag
    ok(acl, acl.rt.synchronize_stream(waiter))
    assert from_device(acl, result, 8, np.uint64)[0] == 7
    ok(acl, acl.rt.memset(flag, 8, 0, 8))
    ok(acl, wait_for_flag[1, waiter](flag, result))
    time.sleep(0.1)
    assert not stream_done(acl, waiter)
    to_device(acl, flag, np.array([2], np.uint64))               # the device polls host writes
    ok(acl, acl.rt.synchronize_stream_with_timeout(waiter, 5000))


@kernel
def write_one(ctx, sync_mem):
    if ctx.block_idx == 0:
        ctx.gm(sync_mem, np.uint64, 1)[0] = 1


def test_guide_memory_semantic_sample(dev):
    """Guide 03-07 in full: a value_wait on stream 1 released by a kernel's write on stream 2,
    then a kernel on stream 1 spinning until value_write(2) on stream 2."""
    acl = dev
    s1, s2 = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    sync_mem, result = device_buffer(acl, 8), device_buffer(acl, 8)
    ok(acl, acl.rt.value_wait(sync_mem, 1, acl.ACL_STREAM_WAIT_VALUE_EQ, s1))
    ok(acl, wait_for_flag[4, s1](sync_mem, result))
    time.sleep(0.1)
    assert not stream_done(acl, s1)
    ok(acl, write_one[4, s2](sync_mem))
    ok(acl, acl.rt.synchronize_stream(s2))
    time.sleep(0.1)
    assert not stream_done(acl, s1)                      # past the value_wait, spinning in the kernel
    assert from_device(acl, result, 8, np.uint64)[0] == 0
    ok(acl, acl.rt.value_write(sync_mem, 2, 0, s2))
    ok(acl, acl.rt.synchronize_stream_with_timeout(s1, 5000))
    assert from_device(acl, result, 8, np.uint64)[0] == 7


def test_abort_interrupts_a_spinning_kernel(dev):
    acl = dev
    stream = out(acl, acl.rt.create_stream())
    flag, result = device_buffer(acl, 8), device_buffer(acl, 8)
    ok(acl, wait_for_flag[1, stream](flag, result))
    time.sleep(0.1)
    ok(acl, acl.rt.stream_abort(stream))
    assert wait_until(lambda: stream_done(acl, stream), 5)
    acl.rt.synchronize_stream(stream)
    ok(acl, acl.rt.destroy_stream(stream))


# ============================================================================ concurrency
def peaks(acl, counters, blocks) -> np.ndarray:
    return from_device(acl, counters, 8 * (blocks + 1), np.int64)[1:]


def test_blocks_of_a_launch_run_concurrently_up_to_the_core_count(dev):
    acl = dev
    counters = device_buffer(acl, 8 * 49)
    ok(acl, concurrency[48](counters, 0.3))
    ok(acl, acl.rt.synchronize_device())
    assert peaks(acl, counters, 48).max() == VECTOR
    assert from_device(acl, counters, 8, np.int64)[0] == 0


def test_cube_kernel_uses_the_cube_cores(dev):
    acl = dev
    counters = device_buffer(acl, 8 * 25)
    ok(acl, cube_concurrency[24](counters, 0.3))
    ok(acl, acl.rt.synchronize_device())
    assert peaks(acl, counters, 24).max() == CUBE


def test_kernels_on_different_streams_run_concurrently(dev):
    acl = dev
    streams = [out(acl, acl.rt.create_stream()) for _ in range(3)]
    running, peak_bufs = device_buffer(acl, 8), [device_buffer(acl, 16) for _ in streams]
    for s, peak in zip(streams, peak_bufs):
        ok(acl, shared_peak[2, s](running, peak, 0.4))
    for s in streams:
        ok(acl, acl.rt.synchronize_stream(s))
    # all six blocks of the three launches were inside the kernel at once
    assert max(from_device(acl, p, 16, np.int64).max() for p in peak_bufs) == 6


def test_streams_share_the_device_cores(dev):
    """Two 15-block cube launches on two streams cannot overlap on 20 cube cores."""
    acl = dev
    streams = [out(acl, acl.rt.create_stream()) for _ in range(2)]
    running, peak_bufs = device_buffer(acl, 8), [device_buffer(acl, 8 * 15) for _ in streams]

    @kernel(core="cube")
    def cube_peak(ctx, running, peaks, hold_s: float32):
        shared_peak.fn(ctx, running, peaks, hold_s)

    for s, peak in zip(streams, peak_bufs):
        ok(acl, cube_peak[15, s](running, peak, 0.3))
    for s in streams:
        ok(acl, acl.rt.synchronize_stream(s))
    assert max(from_device(acl, p, 8 * 15, np.int64).max() for p in peak_bufs) == 15


# ============================================================================ core resource limits
def test_launch_runs_in_waves_under_a_stream_limit(dev):
    acl = dev
    stream = out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.set_stream_res_limit(stream, acl.ACL_RT_DEV_RES_VECTOR_CORE, 3))
    counters = device_buffer(acl, 8 * 10)
    t0 = time.perf_counter()
    ok(acl, concurrency[9, stream](counters, 0.15))
    ok(acl, acl.rt.synchronize_stream(stream))
    elapsed = time.perf_counter() - t0
    p = peaks(acl, counters, 9)
    assert p.max() == 3 and p.min() >= 1
    assert elapsed >= 3 * 0.15 * 0.9          # three waves


def test_launch_under_a_device_limit_and_stream_precedence(dev):
    acl = dev
    ok(acl, acl.rt.set_device_res_limit(0, acl.ACL_RT_DEV_RES_VECTOR_CORE, 4))
    plain, limited = out(acl, acl.rt.create_stream()), out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.set_stream_res_limit(limited, acl.ACL_RT_DEV_RES_VECTOR_CORE, 6))
    for stream, expected in ((plain, 4), (limited, 6), (0, 4)):
        counters = device_buffer(acl, 8 * 13)
        ok(acl, concurrency[12, stream](counters, 0.15))
        ok(acl, acl.rt.synchronize_stream(stream))
        assert peaks(acl, counters, 12).max() == expected
    # the vector limit does not touch cube kernels
    counters = device_buffer(acl, 8 * 9)
    ok(acl, cube_concurrency[8, plain](counters, 0.15))
    ok(acl, acl.rt.synchronize_stream(plain))
    assert peaks(acl, counters, 8).max() == 8
    ok(acl, acl.rt.reset_device_res_limit(0))


def test_limit_counts_at_submission(dev):
    acl = dev
    stream = out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.set_stream_res_limit(stream, acl.ACL_RT_DEV_RES_VECTOR_CORE, 2))
    gate = Gate(acl, stream)
    counters = device_buffer(acl, 8 * 7)
    ok(acl, concurrency[6, stream](counters, 0.1))
    ok(acl, acl.rt.set_stream_res_limit(stream, acl.ACL_RT_DEV_RES_VECTOR_CORE, 6))
    gate.open()
    ok(acl, acl.rt.synchronize_stream(stream))
    assert peaks(acl, counters, 6).max() == 2


def test_res_limit_precedence_dev_guide_example(dev):
    """Guide 07: process limit 16, stream limit 20 -> the thread using the stream gets 20
    (the guide's device has 32 vector cores; pcie4 has 40)."""
    acl = dev
    V, C_ = acl.ACL_RT_DEV_RES_VECTOR_CORE, acl.ACL_RT_DEV_RES_CUBE_CORE
    assert acl.rt.get_device_res_limit(0, V) == (VECTOR, 0)          # hardware default
    assert acl.rt.get_device_res_limit(0, C_) == (CUBE, 0)
    assert acl.rt.get_res_in_current_thread(V) == (VECTOR, 0)
    ok(acl, acl.rt.set_device_res_limit(0, V, 16))
    stream = out(acl, acl.rt.create_stream())
    assert acl.rt.get_stream_res_limit(stream, V) == (16, 0)         # unset: the process limit
    ok(acl, acl.rt.set_stream_res_limit(stream, V, 20))
    assert acl.rt.get_stream_res_limit(stream, V) == (20, 0)
    assert acl.rt.get_stream_res_limit(stream, C_) == (CUBE, 0)
    assert acl.rt.get_res_in_current_thread(V) == (16, 0)
    ok(acl, acl.rt.use_stream_res_in_current_thread(stream))
    assert acl.rt.get_res_in_current_thread(V) == (20, 0)
    # another thread has not adopted the stream
    seen = []
    t = threading.Thread(target=lambda: (acl.rt.set_device(0), seen.append(acl.rt.get_res_in_current_thread(V))))
    t.start()
    t.join()
    assert seen == [(16, 0)]
    ok(acl, acl.rt.unuse_stream_res_in_current_thread(stream))
    assert acl.rt.get_res_in_current_thread(V) == (16, 0)
    ok(acl, acl.rt.reset_stream_res_limit(stream))
    assert acl.rt.get_stream_res_limit(stream, V) == (16, 0)
    ok(acl, acl.rt.reset_device_res_limit(0))
    assert acl.rt.get_device_res_limit(0, V) == (VECTOR, 0)
    assert acl.rt.get_stream_res_limit(stream, V) == (VECTOR, 0)
    ok(acl, acl.rt.set_device_res_limit(0, V, 8))                    # last call wins
    ok(acl, acl.rt.set_device_res_limit(0, V, 12))
    assert acl.rt.get_device_res_limit(0, V) == (12, 0)
    ok(acl, acl.rt.reset_device_res_limit(0))


def test_res_limit_errors(dev):
    acl = dev
    V = acl.ACL_RT_DEV_RES_VECTOR_CORE
    assert acl.rt.set_device_res_limit(0, V, VECTOR + 1) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.set_device_res_limit(0, 2, 4) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.set_device_res_limit(0, V, 0) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.set_device_res_limit(3, V, 4) == acl.ACL_ERROR_RT_PARAM_INVALID      # device 3 not set here
    assert acl.rt.set_device_res_limit(9, V, 4) == acl.ACL_ERROR_RT_INVALID_DEVICEID
    assert acl.rt.get_device_res_limit(0, 5)[1] == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.set_stream_res_limit(0, acl.ACL_RT_DEV_RES_CUBE_CORE, CUBE + 1) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.set_stream_res_limit(0, 7, 1) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.get_res_in_current_thread(2)[1] == acl.ACL_ERROR_RT_PARAM_INVALID
    ok(acl, acl.rt.set_stream_res_limit(0, V, 5))                    # NULL: the default stream
    assert acl.rt.get_stream_res_limit(0, V) == (5, 0)
    ok(acl, acl.rt.reset_stream_res_limit(0))


# ============================================================================ AI Core stack
def _stack_bytes(acl, config: dict | None, tmp_path, device: int = 1) -> int:
    """HBM that set_device(device) takes beyond what a bare explicit context takes."""
    if config is not None:
        path = tmp_path / "acl.json"
        path.write_text(json.dumps(config))
        ok(acl, acl.init(str(path)))
    ctx = out(acl, acl.rt.create_context(device))       # no stack: not the default context
    before = out(acl, acl.rt.get_mem_info(acl.ACL_HBM_MEM))[0]
    ok(acl, acl.rt.set_device(device))
    after = out(acl, acl.rt.get_mem_info(acl.ACL_HBM_MEM))[0]
    ok(acl, acl.rt.reset_device(device))
    ok(acl, acl.rt.set_context(ctx))
    assert out(acl, acl.rt.get_mem_info(acl.ACL_HBM_MEM))[0] == before      # reset released it
    ok(acl, acl.rt.destroy_context(ctx))
    if config is not None:
        ok(acl, acl.finalize())
    return before - after


@pytest.mark.parametrize("config,per_core", [
    (None, 32 * KiB),                                             # no aclInit config: the default
    ({}, 32 * KiB),
    ({"StackSize": {}}, 32 * KiB),
    ({"StackSize": {"aicore_stack_size": 32768}}, 32 * KiB),
    ({"StackSize": {"aicore_stack_size": 1}}, 32 * KiB),          # below the minimum
    ({"StackSize": {"aicore_stack_size": 0}}, 32 * KiB),
    ({"StackSize": {"aicore_stack_size": 40000}}, 48 * KiB),      # rounded up to 16 KiB
    ({"StackSize": {"aicore_stack_size": 65536}}, 64 * KiB),
    ({"StackSize": {"aicore_stack_size": 196608}}, 192 * KiB),    # the A2/A3 maximum
])
def test_aicore_stack_reserved_at_set_device(acl, tmp_path, config, per_core):
    assert _stack_bytes(acl, config, tmp_path) == per_core * AICORE


@pytest.mark.parametrize("value", [196609, 256 * KiB, -1, "65536", 1.5, True])
def test_aicore_stack_size_invalid(acl, tmp_path, value):
    path = tmp_path / "acl.json"
    path.write_text(json.dumps({"StackSize": {"aicore_stack_size": value}}))
    assert acl.init(str(path)) == acl.ACL_ERROR_INVALID_PARAM
    ok(acl, acl.init())            # the failed call did not initialise


def test_aicore_stack_is_shared_by_set_device_calls_and_not_user_memory(dev):
    acl = dev
    free0 = out(acl, acl.rt.get_mem_info(acl.ACL_HBM_MEM))[0]
    total = out(acl, acl.rt.get_mem_info(acl.ACL_HBM_MEM))[1]
    assert total - free0 >= 32 * KiB * AICORE
    ok(acl, acl.rt.set_device(0))             # a second set of the same device: same context, same stack
    assert out(acl, acl.rt.get_mem_info(acl.ACL_HBM_MEM))[0] == free0
    ptr_ = out(acl, acl.rt.malloc(1 << 20, acl.ACL_MEM_MALLOC_HUGE_FIRST))
    ok(acl, acl.rt.free(ptr_))
    assert out(acl, acl.rt.get_mem_info(acl.ACL_HBM_MEM))[0] == free0
    ok(acl, acl.rt.reset_device(0))
    assert out(acl, acl.rt.get_mem_info(acl.ACL_HBM_MEM))[0] == free0   # one reference left


def test_aicore_stack_released_by_finalize(acl):
    ok(acl, acl.init())
    ok(acl, acl.rt.set_device(2))
    free, total = out(acl, acl.rt.get_mem_info(acl.ACL_HBM_MEM))
    assert total - free >= 32 * KiB * AICORE
    ok(acl, acl.finalize())
    out(acl, acl.rt.create_context(2))                  # attached afresh; no stack of its own
    assert wait_until(lambda: acl.rt.get_mem_info(acl.ACL_HBM_MEM)[0] == total, 10)


def test_aicore_stack_released_when_the_process_goes(board, run_py, acl):
    out(acl, acl.rt.create_context(3))
    # memory of earlier tests' processes is released asynchronously
    assert wait_until(lambda: acl.rt.get_mem_info(acl.ACL_HBM_MEM)[0] == acl.rt.get_mem_info(acl.ACL_HBM_MEM)[1], 10)
    free0, total, _ = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
    proc = run_py("""
        import mdev.acl as acl
        assert acl.rt.set_device(3) == 0
        free, total, ret = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
        print(free)
    """, board)
    assert free0 - int(proc.stdout.split()[0]) == 32 * KiB * AICORE
    assert wait_until(lambda: acl.rt.get_mem_info(acl.ACL_HBM_MEM)[0] == free0, 10)


# ============================================================================ regression: stream slot reuse
def test_idle_sync_of_a_stream_in_a_reused_slot_is_immediate(dev, capsys):
    """A device reports, per stream slot, how many messages it had sent to the stream's
    process when the slot's last task completed (control page ``stream_msgs``); a host
    synchronisation waits until its reader has handled that many.  A new stream in a
    reused slot must not inherit the count of the slot's previous owner -- a process
    attached afresh has received fewer messages and would wait for the 10 s timeout."""
    acl = dev
    ok(acl, acl.init())
    ok(acl, say_hello[64, 0](1))                      # 64 messages to this process
    ok(acl, acl.rt.synchronize_device())
    capsys.readouterr()
    ok(acl, acl.finalize())                           # detach: the slot is freed, the count stays
    time.sleep(0.5)                                   # (the device sees the detach)
    ok(acl, acl.rt.set_device(0))                     # a new connection: 0 messages so far, same slot
    t0 = time.perf_counter()
    ok(acl, acl.rt.synchronize_stream(0))             # nothing was submitted to this stream
    assert time.perf_counter() - t0 < 2.0
