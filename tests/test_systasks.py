"""System tasks (aclrtReduceAsync and aclrtRandomNumAsync of the CANN Runtime API reference;
guide 03-04): SDMA reduce and random numbers."""

from __future__ import annotations

import numpy as np
import pytest

from async_util import device_buffer, ok, out, pinned
from helpers import from_device, to_device
from random_tasks import DROPOUT, NORMAL, TRUNCATED, UNIFORM, normal, para, task, uniform

SUM, MAX, MIN, EQUAL = 10, 11, 12, 13
ACL_FLOAT, ACL_FLOAT16, ACL_INT8, ACL_INT32, ACL_UINT8 = 0, 1, 2, 3, 4
ACL_INT16, ACL_UINT32, ACL_INT64, ACL_UINT64, ACL_DOUBLE, ACL_BF16 = 6, 8, 9, 10, 11, 27


def bf16_bits(values) -> np.ndarray:
    """bfloat16 patterns of values exactly representable in bfloat16."""
    bits = np.asarray(values, np.float32).view(np.uint32)
    assert not (bits & 0xFFFF).any(), "not exactly representable in bfloat16"
    return (bits >> 16).astype(np.uint16)


def bf16_values(bits) -> np.ndarray:
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def on_device(acl, data: np.ndarray) -> int:
    ptr = device_buffer(acl, max(data.nbytes, 1))
    to_device(acl, ptr, data)
    return ptr


# ============================================================================ reduce
def test_reduce_guide_example(dev):
    """Guide 03-04: {1,2,3,4} reduced (SUM) into a copy of itself gives {2,4,6,8}."""
    acl = dev
    data = np.array([1, 2, 3, 4], np.float32)
    src, dst = on_device(acl, data), on_device(acl, data)
    stream = out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.reduce_async(dst, src, data.nbytes, acl.ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, acl.ACL_FLOAT,
                                stream, None))
    ok(acl, acl.rt.synchronize_stream(stream))
    assert list(from_device(acl, dst, 16, np.float32)) == [2, 4, 6, 8]
    assert list(from_device(acl, src, 16, np.float32)) == [1, 2, 3, 4]
    # into itself
    ok(acl, acl.rt.reduce_async(src, src, data.nbytes, SUM, ACL_FLOAT, 0, None))
    ok(acl, acl.rt.synchronize_device())
    assert list(from_device(acl, src, 16, np.float32)) == [2, 4, 6, 8]


A = [1, -2, 3, 4, 0, 7, -8, 5, 6, 2]
B = [1, 2, -3, 4, 0, 6, -8, 9, 6, 3]
TYPES = {ACL_INT8: np.int8, ACL_INT16: np.int16, ACL_INT32: np.int32, ACL_FLOAT16: np.float16,
         ACL_FLOAT: np.float32, ACL_BF16: "bf16"}
OPS = {SUM: lambda a, b: a + b, MAX: np.maximum, MIN: np.minimum, EQUAL: lambda a, b: (a == b)}


@pytest.mark.parametrize("kind", [SUM, MAX, MIN, EQUAL])
@pytest.mark.parametrize("data_type", list(TYPES))
def test_reduce_kinds_and_types(dev, kind, data_type):
    acl = dev
    dtype = TYPES[data_type]
    if dtype == "bf16":
        a, b = bf16_bits(A), bf16_bits(B)
        expected = bf16_bits(OPS[kind](bf16_values(a), bf16_values(b)).astype(np.float32))
    else:
        a, b = np.array(A, dtype), np.array(B, dtype)
        expected = OPS[kind](a, b).astype(dtype)
    dst, src = on_device(acl, a), on_device(acl, b)
    ok(acl, acl.rt.reduce_async(dst, src, a.nbytes, kind, data_type, 0, None))
    ok(acl, acl.rt.synchronize_device())
    np.testing.assert_array_equal(from_device(acl, dst, a.nbytes, expected.dtype), expected)


def test_reduce_integer_sum_wraps(dev):
    acl = dev
    a, b = np.array([100, -100, 127], np.int8), np.array([100, -100, 1], np.int8)
    dst, src = on_device(acl, a), on_device(acl, b)
    ok(acl, acl.rt.reduce_async(dst, src, 3, SUM, ACL_INT8, 0, None))
    ok(acl, acl.rt.synchronize_device())
    assert list(from_device(acl, dst, 3, np.int8)) == [-56, 56, -128]


def test_reduce_bf16_rounds_to_nearest_even(dev):
    acl = dev
    # spacing of bfloat16 in [1, 2) is 2**-7
    a = bf16_bits([1.0, 1.0078125, 1.0, -1.0, 2.0 ** 127])
    b = bf16_bits([2 ** -8, 2 ** -8, 3 * 2 ** -9, -(2 ** -8), 2.0 ** 127])
    dst, src = on_device(acl, a), on_device(acl, b)
    ok(acl, acl.rt.reduce_async(dst, src, a.nbytes, SUM, ACL_BF16, 0, None))
    ok(acl, acl.rt.synchronize_device())
    got = from_device(acl, dst, a.nbytes, np.uint16)
    assert list(got[:4]) == [0x3F80,        # 1 + 2^-8: a tie, to the even 1.0
                             0x3F82,        # 1.0078125 + 2^-8: a tie, to the even 1.015625
                             0x3F81,        # 1 + 3*2^-9: nearer 1.0078125
                             0xBF80]        # -1 - 2^-8: a tie, to the even -1.0
    assert got[4] == 0x7F80                 # overflow: +inf


def test_reduce_float_max_min_with_specials(dev):
    acl = dev
    a = np.array([np.inf, -np.inf, 0.0, 1.5], np.float32)
    b = np.array([1.0, 2.0, -0.0, np.nan], np.float32)
    for kind, expected in ((MAX, [np.inf, 2.0, 0.0, np.nan]), (MIN, [1.0, -np.inf, -0.0, np.nan])):
        dst, src = on_device(acl, a), on_device(acl, b)
        ok(acl, acl.rt.reduce_async(dst, src, a.nbytes, kind, ACL_FLOAT, 0, None))
        ok(acl, acl.rt.synchronize_device())
        np.testing.assert_array_equal(from_device(acl, dst, 16, np.float32), np.array(expected, np.float32))


def test_reduce_partial_count_and_stream_order(dev):
    """count is in bytes: only the first count/size elements reduce; a reduce runs in
    stream order between an async upload and download."""
    acl = dev
    n = 1 << 16
    host_in, view_in = pinned(acl, 4 * n, np.int32)
    host_out, view_out = pinned(acl, 4 * n, np.int32)
    view_in[:] = np.arange(n)
    dst, src = device_buffer(acl, 4 * n), device_buffer(acl, 4 * n)
    stream = out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.memcpy_async(src, 4 * n, host_in, 4 * n, acl.ACL_MEMCPY_HOST_TO_DEVICE, stream))
    ok(acl, acl.rt.memcpy_async(dst, 4 * n, host_in, 4 * n, acl.ACL_MEMCPY_HOST_TO_DEVICE, stream))
    ok(acl, acl.rt.reduce_async(dst, src, 4 * (n // 2), SUM, ACL_INT32, stream, None))
    ok(acl, acl.rt.memcpy_async(host_out, 4 * n, dst, 4 * n, acl.ACL_MEMCPY_DEVICE_TO_HOST, stream))
    ok(acl, acl.rt.synchronize_stream(stream))
    expected = np.arange(n)
    expected[:n // 2] *= 2
    np.testing.assert_array_equal(view_out, expected)


def test_reduce_count_zero_is_a_no_op(dev):
    acl = dev
    dst = on_device(acl, np.array([5], np.int32))
    ok(acl, acl.rt.reduce_async(dst, dst, 0, SUM, ACL_INT32, 0, None))
    ok(acl, acl.rt.synchronize_device())
    assert from_device(acl, dst, 4, np.int32)[0] == 5


def test_reduce_errors(dev):
    acl = dev
    P = acl.ACL_ERROR_RT_PARAM_INVALID
    dst, src = device_buffer(acl, 64), device_buffer(acl, 64)
    for kind in (0, 9, 14, -1):
        assert acl.rt.reduce_async(dst, src, 64, kind, ACL_FLOAT, 0, None) == P
    for data_type in (ACL_INT64, ACL_UINT8, ACL_DOUBLE, ACL_UINT32, ACL_UINT64, 99):
        assert acl.rt.reduce_async(dst, src, 64, SUM, data_type, 0, None) == P
    assert acl.rt.reduce_async(dst, src, 6, SUM, ACL_FLOAT, 0, None) == P          # not whole elements
    assert acl.rt.reduce_async(dst, src, 65, SUM, ACL_INT8, 0, None) == P          # overruns
    assert acl.rt.reduce_async(0, src, 64, SUM, ACL_FLOAT, 0, None) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.reduce_async(dst, 0, 64, SUM, ACL_FLOAT, 0, None) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.reduce_async(dst, src, -4, SUM, ACL_FLOAT, 0, None) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.reduce_async(dst, src, 64, SUM, ACL_FLOAT, 0, dst) == acl.ACL_ERROR_INVALID_PARAM
    host_ptr, _ = pinned(acl, 64)
    host = np.zeros(16, np.float32)
    assert acl.rt.reduce_async(dst, host_ptr, 64, SUM, ACL_FLOAT, 0, None) == P    # pinned host
    assert acl.rt.reduce_async(acl.util.numpy_to_ptr(host), src, 64, SUM, ACL_FLOAT, 0, None) == P
    ok(acl, acl.rt.set_device(1))
    other = device_buffer(acl, 64)
    stream1 = out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.set_device(0))
    assert acl.rt.reduce_async(dst, other, 64, SUM, ACL_FLOAT, 0, None) == P       # another device's memory
    assert acl.rt.reduce_async(dst, src, 64, SUM, ACL_FLOAT, stream1, None) == acl.ACL_ERROR_RT_STREAM_CONTEXT
    ok(acl, acl.rt.synchronize_device())


def test_reduce_needs_a_device(acl):
    assert acl.rt.reduce_async(1 << 48, 1 << 48, 4, SUM, ACL_FLOAT, 0, None) == acl.ACL_ERROR_RT_CONTEXT_NULL


# ============================================================================ random numbers
def counter_value(acl, counter) -> int:
    return int.from_bytes(from_device(acl, counter, 16).tobytes(), "little")


def generate(acl, data_type, func_type, params, n, seed=7, counter=None, itemsize=4, stream=0):
    result = device_buffer(acl, max(n * itemsize, 8))
    counter = counter or device_buffer(acl, 16)
    ok(acl, acl.rt.random_num_async(task(data_type, func_type, params, result, counter, seed, n), stream, None))
    ok(acl, acl.rt.synchronize_device())
    return result, counter


def test_random_same_seed_and_counter_same_numbers(dev):
    acl = dev
    n = 1000
    result, counter = generate(acl, ACL_FLOAT, UNIFORM, uniform(0.0, 1.0), n)
    first = from_device(acl, result, 4 * n, np.float32).copy()
    assert counter_value(acl, counter) == n                  # advanced by the values generated
    generate(acl, ACL_FLOAT, UNIFORM, uniform(0.0, 1.0), n, counter=counter)
    assert counter_value(acl, counter) == 2 * n
    again, _ = generate(acl, ACL_FLOAT, UNIFORM, uniform(0.0, 1.0), n, counter=counter)
    assert not np.array_equal(from_device(acl, again, 4 * n, np.float32), first)   # the counter moved on
    ok(acl, acl.rt.memset(counter, 16, 0, 16))
    replay, _ = generate(acl, ACL_FLOAT, UNIFORM, uniform(0.0, 1.0), n, counter=counter)
    np.testing.assert_array_equal(from_device(acl, replay, 4 * n, np.float32), first)
    other_seed, _ = generate(acl, ACL_FLOAT, UNIFORM, uniform(0.0, 1.0), n, seed=8)
    assert not np.array_equal(from_device(acl, other_seed, 4 * n, np.float32), first)


def test_random_same_numbers_on_another_device_and_process(dev, board, run_py):
    acl = dev
    result, _ = generate(acl, ACL_FLOAT, NORMAL, normal(0.0, 1.0), 64, seed=99)
    mine = from_device(acl, result, 256, np.float32)
    proc = run_py("""
        import numpy as np
        import mdev.acl as acl
        assert acl.rt.set_device(2) == 0
        res, _ = acl.rt.malloc(256, 0)
        cnt, _ = acl.rt.malloc(16, 0)
        assert acl.rt.memset(cnt, 16, 0, 16) == 0
        p = lambda v: {"isAddr": 0, "valueOrAddr": v}
        info = {"dataType": 0, "randomNumFuncParaInfo": {"funcType": 2,
                "paramInfo": {"normalDisInfo": {"mean": p(0.0), "stddev": p(1.0)}}},
                "randomResultAddr": res, "randomCounterAddr": cnt, "randomSeed": p(99), "randomNum": p(64)}
        assert acl.rt.random_num_async(info, 0, None) == 0
        assert acl.rt.synchronize_device() == 0
        out = np.empty(64, np.float32)
        assert acl.rt.memcpy(acl.util.numpy_to_ptr(out), 256, res, 256, 2) == 0
        print(out.tobytes().hex())
    """, board)
    assert bytes.fromhex(proc.stdout.strip()) == mine.tobytes()


def test_random_follows_the_documented_generator(dev):
    """Values are numpy's Philox keyed by the seed, started at the 16-byte counter."""
    acl = dev
    n, seed, start = 500, 12345, (3 << 64) + 17
    counter = on_device(acl, np.frombuffer(start.to_bytes(16, "little"), np.uint8))
    result, _ = generate(acl, ACL_FLOAT, UNIFORM, uniform(-1.0, 3.0), n, seed=seed, counter=counter)
    gen = np.random.Generator(np.random.Philox(key=seed, counter=start))
    expected = (-1.0 + 4.0 * gen.random(n)).astype(np.float32)
    np.testing.assert_array_equal(from_device(acl, result, 4 * n, np.float32), expected)
    assert counter_value(acl, counter) == start + n


def test_random_counter_carries_into_the_high_word(dev):
    acl = dev
    start = (1 << 64) - 10
    counter = on_device(acl, np.frombuffer(start.to_bytes(16, "little"), np.uint8))
    generate(acl, ACL_INT32, UNIFORM, uniform(0, 10), 100, counter=counter)
    assert list(from_device(acl, counter, 16, np.uint64)) == [90, 1]


def test_random_uniform_float32(dev):
    acl = dev
    n = 100_000
    result, _ = generate(acl, ACL_FLOAT, UNIFORM, uniform(-2.0, 3.0), n)
    v = from_device(acl, result, 4 * n, np.float32)
    assert v.min() >= -2.0 and v.max() < 3.0
    assert abs(v.mean() - 0.5) < 0.05 and abs(v.std() - 5 / 12 ** 0.5) < 0.05


@pytest.mark.parametrize("data_type,dtype,lo,hi", [(ACL_INT32, np.int32, 5, 10), (ACL_INT64, np.int64, -100, -50),
                                                   (ACL_UINT32, np.uint32, 0, 7),
                                                   (ACL_UINT64, np.uint64, 1 << 40, (1 << 40) + 3)])
def test_random_uniform_integers(dev, data_type, dtype, lo, hi):
    acl = dev
    n = 5000
    size = np.dtype(dtype).itemsize
    result, _ = generate(acl, data_type, UNIFORM, uniform(lo, hi), n, itemsize=size)
    v = from_device(acl, result, size * n, dtype)
    assert set(v.tolist()) == set(range(lo, hi))


@pytest.mark.parametrize("data_type", [ACL_FLOAT16, ACL_BF16])
def test_random_uniform_half_types_stay_below_max(dev, data_type):
    acl = dev
    n = 50_000
    result, _ = generate(acl, data_type, UNIFORM, uniform(0.0, 1.0), n, itemsize=2)
    raw = from_device(acl, result, 2 * n, np.uint16)
    v = raw.view(np.float16).astype(np.float32) if data_type == ACL_FLOAT16 else bf16_values(raw)
    assert v.min() >= 0.0 and v.max() < 1.0
    assert abs(v.mean() - 0.5) < 0.02


@pytest.mark.parametrize("data_type", [ACL_FLOAT, ACL_FLOAT16, ACL_BF16])
def test_random_normal(dev, data_type):
    acl = dev
    n = 200_000
    size = 4 if data_type == ACL_FLOAT else 2
    result, _ = generate(acl, data_type, NORMAL, normal(3.0, 2.0), n, itemsize=size)
    raw = from_device(acl, result, size * n, np.uint8)
    v = {ACL_FLOAT: lambda: raw.view(np.float32), ACL_FLOAT16: lambda: raw.view(np.float16).astype(np.float32),
         ACL_BF16: lambda: bf16_values(raw.view(np.uint16))}[data_type]()
    assert abs(v.mean() - 3.0) < 0.05 and abs(v.std() - 2.0) < 0.05
    assert np.abs(v - 3.0).max() > 5.0        # tails beyond 2.5 stddev exist


def test_random_truncated_normal(dev):
    acl = dev
    n = 200_000
    result, _ = generate(acl, ACL_FLOAT, TRUNCATED, normal(-1.0, 0.5), n)
    v = from_device(acl, result, 4 * n, np.float32).astype(np.float64)
    assert np.abs(v + 1.0).max() <= 1.0 + 1e-6              # nothing beyond 2 stddev
    assert abs(v.mean() + 1.0) < 0.01
    assert abs(v.std() - 0.5 * 0.8796) < 0.01               # stddev of N(0,1) cut at +-2


def test_random_dropout_bitmask(dev):
    acl = dev
    n, p = 10_001, 0.3
    nbytes = -(-n // 8)
    result = device_buffer(acl, nbytes + 1)
    to_device(acl, result, np.full(nbytes + 1, 0xAB, np.uint8))
    counter = device_buffer(acl, 16)
    params = {"dropoutRation": para(p)}          # (sic) the header's field name
    ok(acl, acl.rt.random_num_async(task(ACL_FLOAT, DROPOUT, params, result, counter, 5, n), 0, None))
    ok(acl, acl.rt.synchronize_device())
    raw = from_device(acl, result, nbytes + 1)
    assert raw[nbytes] == 0xAB                   # ceil(n / 8) bytes written, no more
    bits = np.unpackbits(raw[:nbytes], bitorder="little")
    assert not bits[n:].any()
    assert abs(bits[:n].mean() - (1 - p)) < 0.02
    assert counter_value(acl, counter) == n
    # dropoutRatio (spelt right) works too, and p = 0 keeps everything
    ok(acl, acl.rt.random_num_async(task(ACL_FLOAT16, DROPOUT, {"dropoutRatio": para(0.0)}, result, counter, 5, 64),
                                    0, None))
    ok(acl, acl.rt.synchronize_device())
    assert list(from_device(acl, result, 8)) == [0xFF] * 8


def test_random_parameters_from_device_memory(dev):
    acl = dev
    n = 256
    immediate, _ = generate(acl, ACL_FLOAT, UNIFORM, uniform(10.0, 20.0), n, seed=31)
    lo, hi = on_device(acl, np.array([10.0], np.float32)), on_device(acl, np.array([20.0], np.float32))
    seed = on_device(acl, np.array([31], np.uint64))
    num = on_device(acl, np.array([n], np.uint64))
    result, counter = device_buffer(acl, 4 * n), device_buffer(acl, 16)
    info = task(ACL_FLOAT, UNIFORM, {"min": para(lo, 1, 4), "max": para(hi, 1)}, result, counter,
                para(seed, 1, 8), para(num, 1))
    ok(acl, acl.rt.random_num_async(info, 0, None))
    ok(acl, acl.rt.synchronize_device())
    np.testing.assert_array_equal(from_device(acl, result, 4 * n, np.float32),
                                  from_device(acl, immediate, 4 * n, np.float32))
    assert counter_value(acl, counter) == n


def test_random_parameter_read_when_the_task_runs(dev):
    """A parameter in device memory is read at execution: a value written earlier in the
    stream counts."""
    acl = dev
    stream = out(acl, acl.rt.create_stream())
    num = device_buffer(acl, 8)
    result, counter = device_buffer(acl, 4 * 16), device_buffer(acl, 16)
    ok(acl, acl.rt.value_write(num, 16, 0, stream))
    ok(acl, acl.rt.random_num_async(task(ACL_FLOAT, UNIFORM, uniform(1.0, 2.0), result, counter, 3, para(num, 1)),
                                    stream, None))
    ok(acl, acl.rt.synchronize_stream(stream))
    assert counter_value(acl, counter) == 16
    assert (from_device(acl, result, 64, np.float32) >= 1.0).all()
    # a count from device memory that overruns the result buffer faults the task
    ok(acl, acl.rt.value_write(num, 17, 0, stream))
    ok(acl, acl.rt.random_num_async(task(ACL_FLOAT, UNIFORM, uniform(1.0, 2.0), result, counter, 3, para(num, 1)),
                                    stream, None))
    assert acl.rt.synchronize_stream(stream) == acl.ACL_ERROR_RT_SYS_DMA
    assert counter_value(acl, counter) == 16


def test_random_flat_param_info_and_bare_numbers(dev):
    acl = dev
    result, counter = device_buffer(acl, 40), device_buffer(acl, 16)
    info = {"dataType": ACL_INT32, "randomNumFuncParaInfo": {"funcType": UNIFORM, "paramInfo": {"min": 3, "max": 4}},
            "randomResultAddr": result, "randomCounterAddr": counter, "randomSeed": 1, "randomNum": 10}
    ok(acl, acl.rt.random_num_async(info, 0, None))
    ok(acl, acl.rt.synchronize_device())
    assert list(from_device(acl, result, 40, np.int32)) == [3] * 10


def test_random_zero_values(dev):
    acl = dev
    result, counter = generate(acl, ACL_FLOAT, UNIFORM, uniform(0.0, 1.0), 0)
    assert counter_value(acl, counter) == 0


def test_random_errors(dev):
    acl = dev
    P, I = acl.ACL_ERROR_RT_PARAM_INVALID, acl.ACL_ERROR_INVALID_PARAM
    result, counter = device_buffer(acl, 400), device_buffer(acl, 16)

    def call(data_type=ACL_FLOAT, func_type=UNIFORM, params=None, res=result, cnt=counter, n=100, **changes):
        info = task(data_type, func_type, params or uniform(0.0, 1.0), res, cnt, 1, n)
        info.update(changes)
        return acl.rt.random_num_async(info, 0, None)

    for data_type in (ACL_INT8, ACL_INT16, ACL_UINT8, ACL_DOUBLE, 99):
        assert call(data_type=data_type) == P
    assert call(func_type=4) == P
    assert call(data_type=ACL_INT32, func_type=NORMAL, params=normal(0, 1)) == P
    assert call(params=uniform(1.0, 1.0)) == P                      # min < max
    assert call(func_type=NORMAL, params=normal(0.0, -1.0)) == P
    assert call(func_type=DROPOUT, params={"dropoutRation": para(1.5)}) == P
    assert call(n=101) == P                                         # 404 bytes overrun the result
    assert call(cnt=device_buffer(acl, 8)) == P                     # the counter takes 16 bytes
    host = np.zeros(16, np.uint8)
    assert call(cnt=acl.util.numpy_to_ptr(host)) == P
    assert call(res=0) == I
    assert call(randomSeed=para(-1)) == P
    assert call(randomNum=para(1.5)) == I
    assert call(randomNum=para(5, 1)) == P                          # an address that is no allocation
    assert call(params={"min": para(0.0)}) == I                     # max missing
    info = task(ACL_FLOAT, UNIFORM, uniform(0.0, 1.0), result, counter, 1, 10)
    del info["randomSeed"]
    assert acl.rt.random_num_async(info, 0, None) == I
    assert acl.rt.random_num_async(None, 0, None) == I
    assert acl.rt.random_num_async(task(ACL_FLOAT, UNIFORM, uniform(0.0, 1.0), result, counter, 1, 10), 0, 1) == I
    ok(acl, acl.rt.set_device(1))
    other = device_buffer(acl, 400)
    ok(acl, acl.rt.set_device(0))
    assert call(res=other) == P
    assert counter_value(acl, counter) == 0                         # nothing ran
    ok(acl, acl.rt.synchronize_device())
