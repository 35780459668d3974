"""Labels, user allocators, overflow detection and kernel fault codes: the flows of the
runtime-only CANN samples 2_advanced_features/label/0_simple_label,
3_memory_advanced/allocator/0_custom_allocator, 4_reliability/overflow_detection and
1_basic_features/stream/1_stream_with_failure_mode (its fault codes), in pyACL form, plus
what the functions do beyond the samples and the codes bad input gets."""

from __future__ import annotations

import numpy as np
import pytest

from async_util import ok, out
from helpers import from_device, to_device
from mdev.kernel import kernel, ptr

PERSISTENT, HEAD, DEFAULT_FLAG = 0x4, 0, 0x7FFFFFFF    # ACL_STREAM_PERSISTENT, ACL_MODEL_STREAM_FLAG_HEAD / _DEFAULT
E_PARAM, E_INVALID, E_NOT_SUPPORT, E_STREAM_MODEL = 107000, 100000, 207000, 107005


@pytest.fixture
def dev(acl):
    ok(acl, acl.init())
    ok(acl, acl.rt.set_device(0))
    yield acl


def words(acl, n: int) -> int:
    p = out(acl, acl.rt.malloc(8 * n, 0))
    ok(acl, acl.rt.memset(p, 8 * n, 0, 8 * n))
    return p


# ============================================================================ labels
def test_simple_label_sample(dev):
    """0_simple_label, step by step, as its README lists the output."""
    acl = dev
    context = out(acl, acl.rt.create_context(0))
    label_stream = out(acl, acl.rt.create_stream_with_config(0, PERSISTENT))
    execute_stream = out(acl, acl.rt.create_stream())
    model = out(acl, acl.mdl.ri_build_begin(0))
    ok(acl, acl.mdl.ri_bind_stream(model, label_stream, HEAD))
    index = out(acl, acl.rt.malloc(4, 0))
    to_device(acl, index, np.array([1], np.uint32))
    labels = [out(acl, acl.rt.create_label()) for _ in range(2)]
    label_list = out(acl, acl.rt.create_label_list(labels, 2))
    ok(acl, acl.rt.switch_label_by_index(index, 2, label_list, label_stream))
    for label in labels:
        ok(acl, acl.rt.set_label(label, label_stream))
    ok(acl, acl.mdl.ri_end_task(model, label_stream))
    ok(acl, acl.mdl.ri_build_end(model, None))
    ok(acl, acl.mdl.ri_execute_async(model, execute_stream))
    ok(acl, acl.rt.synchronize_stream(execute_stream))        # "Switch label executed successfully"
    teardown = [acl.mdl.ri_unbind_stream(model, label_stream), acl.mdl.ri_destroy(model),
                acl.rt.destroy_label_list(label_list), *(acl.rt.destroy_label(lab) for lab in reversed(labels)),
                acl.rt.free(index), acl.rt.destroy_stream(execute_stream), acl.rt.destroy_stream(label_stream),
                acl.rt.destroy_context(context), acl.rt.reset_device_force(0), acl.finalize()]
    assert teardown == [0] * len(teardown)


def _branching_model(acl):
    """switch(index) -> label 0: write a; label 1: write b; label 2 (on another stream): write c."""
    head = out(acl, acl.rt.create_stream_with_config(0, PERSISTENT))
    side = out(acl, acl.rt.create_stream_with_config(0, PERSISTENT))
    model = out(acl, acl.mdl.ri_build_begin(0))
    ok(acl, acl.mdl.ri_bind_stream(model, head, HEAD))
    ok(acl, acl.mdl.ri_bind_stream(model, side, DEFAULT_FLAG))
    index, marks = words(acl, 1), words(acl, 3)
    labels = [out(acl, acl.rt.create_label()) for _ in range(3)]
    label_list = out(acl, acl.rt.create_label_list(labels, 3))
    ok(acl, acl.rt.switch_label_by_index(index, 3, label_list, head))
    ok(acl, acl.rt.set_label(labels[0], head))
    ok(acl, acl.rt.value_write(marks, 1, 0, head))
    ok(acl, acl.rt.set_label(labels[1], head))
    ok(acl, acl.rt.value_write(marks + 8, 1, 0, head))
    ok(acl, acl.rt.set_label(labels[2], side))
    ok(acl, acl.rt.value_write(marks + 16, 1, 0, side))
    ok(acl, acl.mdl.ri_build_end(model, None))
    return model, index, marks, labels, label_list


@pytest.mark.parametrize("picked, written", [(0, [1, 1, 0]), (1, [0, 1, 0]), (2, [0, 0, 1]), (7, [0, 0, 1])])
def test_switch_label_picks_the_branch(dev, picked, written):
    """The index is read when the switch runs; past the last label it takes the last one; a
    label on another stream of the model hands over to that stream."""
    acl = dev
    model, index, marks, _, _ = _branching_model(acl)
    stream = out(acl, acl.rt.create_stream())
    to_device(acl, index, np.array([picked], np.uint64))
    ok(acl, acl.mdl.ri_execute_async(model, stream))
    ok(acl, acl.rt.synchronize_stream(stream))
    assert from_device(acl, marks, 24, np.uint64).tolist() == written
    ok(acl, acl.mdl.ri_destroy(model))


def test_label_errors(dev):
    acl = dev
    plain = out(acl, acl.rt.create_stream())
    index = words(acl, 1)
    label = out(acl, acl.rt.create_label())
    label_list = out(acl, acl.rt.create_label_list([label], 1))
    assert acl.rt.set_label(label, plain) == E_STREAM_MODEL              # not bound to a model
    assert acl.rt.switch_label_by_index(index, 1, label_list, plain) == E_STREAM_MODEL
    assert acl.rt.create_label_list([label], 0)[1] == E_INVALID
    assert acl.rt.create_label_list([label], 2)[1] == E_INVALID
    assert acl.rt.create_label_list([label_list], 1)[1] == E_PARAM       # not a label
    head = out(acl, acl.rt.create_stream_with_config(0, PERSISTENT))
    model = out(acl, acl.mdl.ri_build_begin(0))
    ok(acl, acl.mdl.ri_bind_stream(model, head, HEAD))
    assert acl.rt.switch_label_by_index(index, 2, label_list, head) == E_PARAM    # maxValue > labels
    ok(acl, acl.rt.set_label(label, head))
    assert acl.rt.set_label(label, head) == E_PARAM                      # a label marks one place
    other = out(acl, acl.rt.create_label())
    ok(acl, acl.rt.switch_label_by_index(index, 1, out(acl, acl.rt.create_label_list([other], 1)), head))
    ok(acl, acl.mdl.ri_build_end(model, None))
    assert acl.mdl.ri_execute(model, 5000) == 507011        # the switch picks a label the model does not hold
    ok(acl, acl.rt.destroy_label(label))
    assert acl.rt.destroy_label(label) == E_PARAM
    assert acl.rt.destroy_label(0) == E_INVALID


# ============================================================================ allocators
def test_custom_allocator_sample(dev):
    """0_custom_allocator: register, query by stream, alloc / advise / free through it."""
    acl = dev
    context = out(acl, acl.rt.create_context(0))
    stream = out(acl, acl.rt.create_stream())
    state = {"alloc": 0, "free": 0}
    blocks = {}

    def custom_alloc(allocator, size):
        allocator["alloc"] += 1
        block = len(blocks) + 1
        blocks[block] = bytearray(size)
        return block

    def custom_free(allocator, block):
        del blocks[block]
        allocator["free"] += 1

    desc = acl.rt.allocator_create_desc()
    assert desc
    ok(acl, acl.rt.allocator_set_obj_to_desc(desc, state))
    ok(acl, acl.rt.allocator_set_alloc_func_to_desc(desc, custom_alloc))
    ok(acl, acl.rt.allocator_set_free_func_to_desc(desc, custom_free))
    ok(acl, acl.rt.allocator_set_alloc_advise_func_to_desc(desc, lambda a, size, addr: custom_alloc(a, size)))
    ok(acl, acl.rt.allocator_set_get_addr_from_block_func_to_desc(desc, lambda block: id(blocks[block])))
    ok(acl, acl.rt.allocator_register(stream, desc))
    desc_out, allocator, alloc, free, advise, get_addr = out(acl, acl.rt.allocator_get_by_stream(stream))
    assert desc_out == desc and allocator is state
    block = alloc(allocator, 256)
    assert get_addr(block)
    free(allocator, advise(allocator, 128, None))
    free(allocator, block)
    assert state == {"alloc": 2, "free": 2}                  # "allocCount=2, freeCount=2"
    assert [acl.rt.allocator_unregister(stream), acl.rt.allocator_destroy_desc(desc),
            acl.rt.destroy_stream(stream), acl.rt.destroy_context(context)] == [0] * 4


def test_allocator_rules(dev):
    acl = dev
    stream = out(acl, acl.rt.create_stream())
    desc = acl.rt.allocator_create_desc()
    assert acl.rt.allocator_set_alloc_func_to_desc(desc, None) == E_INVALID
    assert acl.rt.allocator_set_obj_to_desc(0, {}) == E_INVALID
    ok(acl, acl.rt.allocator_set_obj_to_desc(desc, 0x1234))
    ok(acl, acl.rt.allocator_set_alloc_func_to_desc(desc, print))
    assert acl.rt.allocator_register(stream, desc) == E_INVALID          # free and get-address missing
    ok(acl, acl.rt.allocator_set_free_func_to_desc(desc, print))
    ok(acl, acl.rt.allocator_set_get_addr_from_block_func_to_desc(desc, print))
    assert acl.rt.allocator_register(0, desc) == E_INVALID               # the default stream
    assert acl.rt.allocator_get_by_stream(stream)[-1] == E_INVALID       # nothing registered
    ok(acl, acl.rt.allocator_register(stream, desc))
    ok(acl, acl.rt.allocator_destroy_desc(desc))                         # the registration keeps a copy
    assert out(acl, acl.rt.allocator_get_by_stream(stream))[1] == 0x1234
    ok(acl, acl.rt.allocator_unregister(stream))
    ok(acl, acl.rt.allocator_unregister(stream))                         # twice: nothing to do
    assert acl.rt.allocator_destroy_desc(desc) == E_INVALID


# ============================================================================ overflow
@kernel
def overflow_fp16(ctx, data: ptr):
    x = ctx.gm(data, np.float16, 4)
    x[:] = x * np.float16(60000)


def test_overflow_detection_sample(dev):
    acl = dev
    out(acl, acl.rt.create_context(0))                # the sample runs in a context of its own
    original = out(acl, acl.rt.get_device_sat_mode())
    assert original == acl.ACL_RT_OVERFLOW_MODE_INFNAN               # A2 parts start in INF_NAN mode
    ok(acl, acl.rt.set_device_sat_mode(acl.ACL_RT_OVERFLOW_MODE_SATURATION))
    assert out(acl, acl.rt.get_device_sat_mode()) == acl.ACL_RT_OVERFLOW_MODE_SATURATION
    stream = out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.set_stream_overflow_switch(stream, 1))
    assert out(acl, acl.rt.get_stream_overflow_switch(stream)) == 1
    status = out(acl, acl.rt.malloc(64, 0))

    def read_status() -> int:
        ok(acl, acl.rt.get_overflow_status(status, 64, stream))
        ok(acl, acl.rt.synchronize_stream(stream))
        return int(from_device(acl, status, 64)[:4].view(np.uint32)[0])

    assert read_status() == 0                                    # "Overflow status before reset=0"
    ok(acl, acl.rt.reset_overflow_status(stream))
    ok(acl, acl.rt.synchronize_stream(stream))
    assert read_status() == 0
    # beyond the sample: a kernel that overflows sets the status, a reset clears it
    data = out(acl, acl.rt.malloc(8, 0))
    to_device(acl, data, np.full(4, 2, np.float16))
    ok(acl, overflow_fp16[1, stream](data))
    assert read_status() == 1
    ok(acl, acl.rt.reset_overflow_status(stream))
    assert read_status() == 0
    quiet = out(acl, acl.rt.create_stream())                     # switch off: not reported
    ok(acl, overflow_fp16[1, quiet](data))
    ok(acl, acl.rt.synchronize_stream(quiet))
    assert read_status() == 0
    ok(acl, acl.rt.set_device_sat_mode(original))      # the sample restores the mode


def test_overflow_argument_errors(dev):
    acl = dev
    stream = out(acl, acl.rt.create_stream())
    status = out(acl, acl.rt.malloc(64, 0))
    assert acl.rt.set_device_sat_mode(acl.ACL_RT_OVERFLOW_MODE_UNDEF) == E_PARAM
    assert acl.rt.set_stream_overflow_switch(stream, 2) == E_INVALID
    assert acl.rt.get_overflow_status(status, 32, stream) == E_PARAM
    host = np.zeros(64, np.uint8)
    assert acl.rt.get_overflow_status(acl.util.numpy_to_ptr(host), 64, stream) == E_PARAM
    ok(acl, acl.rt.set_stream_attribute(stream, acl.ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK, 1))
    assert out(acl, acl.rt.get_stream_overflow_switch(stream)) == 1


def test_sat_mode_on_a_part_without_inf_nan(monkeypatch):
    """Ascend910A has no INF_NAN mode: it runs saturated and refuses INF_NAN with 207000."""
    from helpers import attached, extra_board
    with extra_board("satmode-910a", "islands8", devices=2) as name, attached(monkeypatch, name) as acl:
        ok(acl, acl.rt.set_device(0))
        assert out(acl, acl.rt.get_device_sat_mode()) == acl.ACL_RT_OVERFLOW_MODE_SATURATION
        assert acl.rt.set_device_sat_mode(acl.ACL_RT_OVERFLOW_MODE_INFNAN) == E_NOT_SUPPORT
        assert acl.get_cann_attribute(acl.ACL_CANN_ATTR_BF16) == (0, 0)


# ============================================================================ fault codes
@kernel
def vector_fault(ctx, x: ptr):
    ctx.gm(x, np.uint32, 1)[0] = 1 // 0


@kernel(core="cube")
def cube_fault(ctx, x: ptr):
    ctx.gm(x, np.uint32, 1)[0] = 1 // 0


@kernel
def vector_trap(ctx):
    ctx.trap()


@kernel(core="cube")
def cube_trap(ctx):
    ctx.trap()


@kernel
def out_of_bounds(ctx, x: ptr):
    ctx.gm(x, np.uint32, 4096)[:] = 1


@kernel
def easy_op(ctx, x: ptr):
    v = ctx.gm(x, np.uint32, 1)
    v[0] += 1


CPU_FAULT = b"""
from mdev.kernel import kernel, ptr
@kernel
def cpu_fault(ctx, x: ptr):
    raise RuntimeError("an AI CPU kernel fails")
"""


def cpu_fault(acl, x: int, stream) -> int:
    """An AI CPU kernel (register_cpu_func) that raises."""
    handle = out(acl, acl.rt.binary_load(acl.rt.create_binary(CPU_FAULT, len(CPU_FAULT))))
    func = out(acl, acl.rt.register_cpu_func(handle, "cpu_fault", "cpu_fault"))
    return acl.rt.launch_kernel_with_host_args(func, 1, stream, None, x.to_bytes(8, "little"), 8, None, 0)


@pytest.mark.parametrize("launch, code", [
    (lambda acl, x, s: vector_fault[1, s](x), 507035),     # ACL_ERROR_RT_VECTOR_CORE_EXCEPTION
    (lambda acl, x, s: cube_fault[1, s](x), 507015),       # ACL_ERROR_RT_AICORE_EXCEPTION
    (lambda acl, x, s: vector_trap[2, s](), 507036),       # ACL_ERROR_RT_VECTOR_CORE_TRAP_EXCEPTION
    (lambda acl, x, s: cube_trap[1, s](), 507016),         # ACL_ERROR_RT_AICORE_TRAP_EXCEPTION
    (lambda acl, x, s: out_of_bounds[1, s](x), 507035),
    (cpu_fault, 507018),                                   # ACL_ERROR_RT_AICPU_EXCEPTION
])
def test_kernel_faults_by_core_type(dev, launch, code):
    """The sync reports the fault of the kernel's core type; the exception callback the same."""
    acl = dev
    seen = []
    ok(acl, acl.rt.set_exception_info_callback(lambda info: seen.append(
        acl.rt.get_error_code_from_exception_info(info))))
    stream = out(acl, acl.rt.create_stream())
    x = words(acl, 1)
    ok(acl, launch(acl, x, stream))
    assert acl.rt.synchronize_stream(stream) == code
    assert seen == [code]
    ok(acl, acl.rt.set_exception_info_callback(None))


def test_failure_mode_sample_codes(dev):
    """1_stream_with_failure_mode: easy, error, easy without and with ACL_STOP_ON_FAILURE;
    its README shows 507035 from the vector kernel, the count 2 and then 1."""
    acl = dev
    context = out(acl, acl.rt.create_context(0))
    stream = out(acl, acl.rt.create_stream())
    num = words(acl, 1)
    for kernel_launch in (easy_op[1, stream], lambda x: vector_fault[1, stream](x), easy_op[1, stream]):
        ok(acl, kernel_launch(num))
    assert acl.rt.synchronize_stream(stream) == 507035
    assert from_device(acl, num, 4, np.uint32)[0] == 2           # "Without failure mode, the result is 2."
    ok(acl, acl.rt.memset(num, 8, 0, 8))
    ok(acl, acl.rt.set_stream_failure_mode(stream, acl.ACL_STOP_ON_FAILURE))
    ok(acl, easy_op[1, stream](num))
    ok(acl, vector_fault[1, stream](num))
    easy_op[1, stream](num)                                      # refused or dropped: the context stopped
    assert acl.rt.synchronize_stream(stream) == 507035
    assert from_device(acl, num, 4, np.uint32)[0] == 1           # "After set failure mode, ... 1."
    ok(acl, acl.rt.destroy_stream_force(stream))
    ok(acl, acl.rt.destroy_context(context))
