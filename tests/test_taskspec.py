"""Op descriptors (mdev.taskspec): every op a device runs has one, it describes the op's
own argument tuple, and every consumer (device, trace, time model, sanitizer, model dump,
compact frames) covers it; and the strided copy, an op added through its module, its
descriptor and these tests alone, runs end to end on a board.
"""

from __future__ import annotations

import ast
import inspect
import json
import textwrap

import numpy as np
import pytest

import mdev.board.device_process  # noqa: F401  registers every op
from async_util import device_buffer, ok, out
from helpers import from_device, to_device
from mdev import protocol, sanitizer, timemodel
from mdev import taskspec as T
from mdev.board.tasktable import OPS

ACL_FLOAT = 0


def test_every_registered_op_has_a_descriptor_and_every_descriptor_an_op():
    assert sorted(OPS) == sorted(T.SPECS)


@pytest.mark.parametrize("name", sorted(T.SPECS))
def test_a_descriptor_names_its_ops_own_arguments(name):
    params = list(inspect.signature(OPS[name]).parameters)[2:]     # after (device, stream)
    assert tuple(params) == T.SPECS[name].args
    assert OPS[name].engine == T.SPECS[name].engine and OPS[name].locations == T.SPECS[name].locations


def _viewed(fn) -> set[str]:
    """Parameters of an op that it looks at as memory: the location of a ``memory.view``,
    of a tensor (``_tensor``) or of a parameter read by address (``_param``)."""
    params = set(list(inspect.signature(fn).parameters)[2:])
    found = set()
    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(fn)))):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        at = {"view": 0, "_tensor": 2, "_param": 2}.get(name)
        if at is not None and len(node.args) > at and isinstance(node.args[at], ast.Name) \
                and node.args[at].id in params:
            found.add(node.args[at].id)
    return found


@pytest.mark.parametrize("name", sorted(T.SPECS))
def test_every_memory_an_op_touches_is_an_operand_of_its_descriptor(name):
    """So the sanitizer and the trace see it: none is silently left out."""
    spec = T.SPECS[name]
    assert _viewed(OPS[name]) <= {spec.args[o.at] for o in spec.operands}


@pytest.mark.parametrize("name", sorted(T.SPECS))
def test_every_consumer_covers_every_op(name):
    spec = T.SPECS[name]
    assert timemodel.TIME[name] in (T.TRANSFER, T.FILL, T.KERNEL, T.MEASURED, T.WAIT, T.INSTANT, T.PRESCRIBED)
    if spec.moves:           # the trace routes its bytes from a source into a target
        assert spec.target() is not None and spec.target().direct
    assert all(o.role in (T.READ, T.WRITE, T.UPDATE, T.HELD) for o in spec.operands)
    assert isinstance(spec.ri[0], int) and spec.ri[1]
    assert set(spec.locations) <= set(range(len(spec.args)))


def test_compact_frames_carry_locations_where_the_descriptors_have_them():
    for name, signature in protocol.COMPACT_TASKS:
        assert tuple(i for i, kind in enumerate(signature) if kind == "d") == T.SPECS[name].locations
        assert len(signature) == len(T.SPECS[name].args)


def test_operand_extents_and_accesses():
    d0, d1 = ("d", 0, 16), ("d", 0, 4096)
    assert T.SPECS["copy2d"].accesses((d0, 100, d1, 64, 10, 3)) == [(d1, 138, False, None), (d0, 210, True, None)]
    assert T.SPECS["memset"].accesses((d0, 0x1FF, 8)) == [(d0, 8, True, 0xFF)]
    assert T.SPECS["reduce"].accesses((d0, d1, 8, 10, ACL_FLOAT)) == \
        [(d1, 8, False, None), (d0, 8, False, None), (d0, 8, True, None)]
    # a tensor operand: the bounding range of its elements, by shape, strides (elements) and type
    transpose = (d0, (1, 3), d1, (4, 1), (3, 4), ACL_FLOAT)
    assert T.SPECS["copy_strided"].accesses(transpose) == [(d1, 48, False, None), (d0, 48, True, None)]
    assert T.SPECS["copy_strided"].target().moved(transpose) == 48
    assert T.tensor_extent((2, 2), (8, 1), ACL_FLOAT) == 4 * (1 + 8 + 1)      # a 2x2 corner of an 8-wide matrix
    assert T.tensor_extent((5, 0), (1, 1), ACL_FLOAT) == 0
    assert T.SPECS["copy_strided"].describe(transpose) == "(3, 4) of type 0, device 0 -> device 0"


# ---------------------------------------------------------------------------- the strided copy, end to end
def _submit_strided(acl, dst: int, dst_strides, src: int, src_strides, shape, stream) -> None:
    """What the operator library does for a view copy: resolve the pointers, submit the task."""
    from mdev.runtime import streams
    from mdev.runtime.core import RUNTIME as rt
    size = 4 * (1 + sum((n - 1) * s for n, s in zip(shape, src_strides)))
    st = rt.stream_in_context(stream)
    d = rt.memory.operand(dst, size, write=True).location()
    s = rt.memory.operand(src, size, write=False).location()
    streams.submit(st, "copy_strided", d, tuple(dst_strides), s, tuple(src_strides), tuple(shape), ACL_FLOAT)


def test_a_strided_copy_transposes_a_matrix(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    matrix = np.arange(12, dtype=np.float32).reshape(3, 4)
    src, dst = device_buffer(acl, 48), device_buffer(acl, 48)
    to_device(acl, src, matrix)
    # dst is 4 x 3 (row-major): element (i, j) of the 3 x 4 source goes to (j, i)
    _submit_strided(acl, dst, (1, 3), src, (4, 1), (3, 4), stream)
    ok(acl, acl.rt.synchronize_stream(stream))
    assert (from_device(acl, dst, 48, np.float32).reshape(4, 3) == matrix.T).all()
    # a bad tensor (a stride below zero; a destination writing one element many times) fails
    # the task, not the device
    for dst_strides in ((-1, 3), (0, 0)):
        _submit_strided(acl, dst, dst_strides, src, (4, 1), (3, 4), stream)
        assert acl.rt.synchronize_stream(stream) == acl.ACL_ERROR_RT_PARAM_INVALID
        ok(acl, acl.rt.destroy_stream_force(stream))
        stream = out(acl, acl.rt.create_stream())
    # a source may repeat its elements: a row broadcast into every row
    _submit_strided(acl, dst, (4, 1), src, (0, 1), (3, 4), stream)
    ok(acl, acl.rt.synchronize_stream(stream))
    assert (from_device(acl, dst, 48, np.float32).reshape(3, 4) == matrix[0]).all()
    _submit_strided(acl, dst, (1, 3), src, (4, 1), (3, 4), stream)       # the device still serves
    ok(acl, acl.rt.synchronize_stream(stream))
    ok(acl, acl.rt.destroy_stream(stream))
    ok(acl, acl.rt.free(src)), ok(acl, acl.rt.free(dst))


def test_a_strided_copy_refuses_a_destination_whose_elements_meet(acl):
    """Shape (3, 2) with strides (2, 4): elements (2, 0) and (0, 1) are both at offset 4,
    though the layout spans more bytes than its elements fill."""
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    src, dst = device_buffer(acl, 48), device_buffer(acl, 48)
    _submit_strided(acl, dst, (2, 4), src, (2, 1), (3, 2), stream)
    assert acl.rt.synchronize_stream(stream) == acl.ACL_ERROR_RT_PARAM_INVALID
    ok(acl, acl.rt.destroy_stream_force(stream))
    ok(acl, acl.rt.free(src)), ok(acl, acl.rt.free(dst))


def test_overlaps_agrees_with_counting_offsets():
    from mdev.board.tasks import overlaps
    rng = np.random.default_rng(7)
    for _ in range(2000):
        ndim = int(rng.integers(1, 4))
        shape = tuple(int(n) for n in rng.integers(0, 4, ndim))
        strides = tuple(int(s) for s in rng.integers(0, 7, ndim))
        offsets = [sum(i * s for i, s in zip(index, strides)) for index in np.ndindex(*shape)]
        assert overlaps(shape, strides) == (len(set(offsets)) < len(offsets)), (shape, strides)


def test_the_sanitizer_checks_a_strided_copys_tensor_operands(acl):
    ok(acl, acl.rt.set_device(0))
    stream = out(acl, acl.rt.create_stream())
    with sanitizer.checking("initcheck") as found:
        src = out(acl, acl.rt.malloc(64, 0))
        dst = out(acl, acl.rt.malloc(64, 0))
        ok(acl, acl.rt.memset_async(src, 64, 0, 16, stream))      # the first row only
        _submit_strided(acl, dst, (1, 2), src, (4, 1), (2, 4), stream)
        ok(acl, acl.rt.synchronize_stream(stream))
    assert [(r.checker, r.kind) for r in found] == [("initcheck", "uninitialised read")]
    assert f"16 of 32 bytes read at offset 16 of allocation {src:#x}" in found[0].lines[0]
    ok(acl, acl.rt.destroy_stream(stream))
    ok(acl, acl.rt.free(src)), ok(acl, acl.rt.free(dst))


def test_a_strided_copy_is_traced_with_its_bytes_and_route(board, run_py, tmp_path):
    path = tmp_path / "trace.json"
    run_py(f"""
        import numpy as np
        import mdev.acl as acl
        from mdev.runtime import streams
        from mdev.runtime.core import RUNTIME as rt
        assert acl.init() == 0 and acl.rt.set_device(0) == 0
        stream, _ = acl.rt.create_stream()
        src, _ = acl.rt.malloc(48, 0)
        dst, _ = acl.rt.malloc(48, 0)
        loc = lambda p: rt.memory.operand(p, 48, write=True).location()
        streams.submit(rt.stream_in_context(stream), "copy_strided", loc(dst), (1, 3), loc(src), (4, 1), (3, 4), 0)
        assert acl.rt.synchronize_stream(stream) == 0
        assert acl.finalize() == 0
    """, board, env={"MDEV_TRACE": str(path)})
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "task" and e["args"]["kind"] == "copy_strided"]
    assert events and events[0]["args"]["bytes"] == 48 and events[0]["args"]["route"] == "D2D"
