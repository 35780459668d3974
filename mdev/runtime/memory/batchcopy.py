"""Batch copies (aclrtMemcpyBatch*) and descriptor copies (aclrtMemcpyAsyncWithDesc).

    memcpy_batch(dsts, destMaxs, srcs, sizes, n, attrs, attrsIndexes, numAttrs)
        n copies of one direction (host -> device or device -> host), unordered among
        themselves; attrs[k] (dstLoc / srcLoc) covers copies attrsIndexes[k] .. the next
        index - 1.  A copy the attributes do not describe fails the batch with its index
        (failIndex; SIZE_MAX when no copy is to blame).  The async forms queue them on a
        stream (synchronously with pageable host memory, as aclrtMemcpyAsync does).
    set_memcpy_desc(desc, INNER_D2D, src, dst, count)   a 32-byte descriptor in device memory
    memcpy_async_with_desc(desc, INNER_D2D, stream)     a stream task that reads the descriptor
                                                         when it runs (the second-level pointer)
"""

from __future__ import annotations

import struct

from mdev import constants as C
from mdev import errors as E
from mdev.errors import AclError
from mdev.memory import address
from mdev.runtime.memory import memops
from mdev.runtime import streams
from mdev.runtime.boundary import api
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.memtable import DEVICE
from mdev.runtime.validate import as_int, as_list, size

SIZE_MAX = (1 << 64) - 1
DESC = struct.Struct("<QQQQ")        # src, dst, count, reserved: what a descriptor holds
_KIND_OF = {(C.ACL_MEM_LOCATION_TYPE_HOST, C.ACL_MEM_LOCATION_TYPE_DEVICE): C.ACL_MEMCPY_HOST_TO_DEVICE,
            (C.ACL_MEM_LOCATION_TYPE_DEVICE, C.ACL_MEM_LOCATION_TYPE_HOST): C.ACL_MEMCPY_DEVICE_TO_HOST}


class BatchError(AclError):
    """A batch refused because of copy ``index`` (SIZE_MAX: of none in particular): the
    failIndex output of the failed call."""

    def __init__(self, code: int, message: str, index: int = SIZE_MAX) -> None:
        super().__init__(code, message)
        self.outputs = (index,)


def _location(loc, what: str) -> tuple[int, int]:
    if not isinstance(loc, dict):
        raise BatchError(E.ACL_ERROR_INVALID_PARAM, f"{what} must be an aclrtMemLocation dict {{'id', 'type'}}")
    return as_int(loc.get("type"), f"{what}.type"), as_int(loc.get("id", 0), f"{what}.id")


def _plan(dsts, dest_maxs, srcs, sizes, num_batches, attrs, attrs_indexes, num_attrs) -> list:
    """The batch's copies as (dst, destMax, src, size, kind, device): checked, or BatchError."""
    n, k = size(num_batches, "numBatches"), size(num_attrs, "numAttrs")
    lists = [as_list(x, what) for x, what in ((dsts, "dsts"), (dest_maxs, "destMaxs"), (srcs, "srcs"),
                                              (sizes, "sizes"))]
    attrs = as_list(attrs, "attrs")
    starts = [as_int(i, "attrsIndexes[i]") for i in as_list(attrs_indexes, "attrsIndexes")]
    if any(len(x) < n for x in lists) or len(attrs) < k or len(starts) < k:
        raise BatchError(E.ACL_ERROR_INVALID_PARAM, "dsts, destMaxs, srcs and sizes need numBatches entries, "
                         "attrs and attrsIndexes numAttrs entries")
    if not n or not k or k > n or starts[0] != 0 or any(b <= a for a, b in zip(starts, starts[1:k])) \
            or starts[k - 1] >= n:
        raise BatchError(E.ACL_ERROR_INVALID_PARAM, "attrsIndexes must start at 0 and rise strictly below "
                         "numBatches, with 0 < numAttrs <= numBatches")
    kinds = []
    for a in attrs[:k]:
        if not isinstance(a, dict):
            raise BatchError(E.ACL_ERROR_INVALID_PARAM, "each attr is an aclrtMemcpyBatchAttr dict")
        dst_loc, src_loc = _location(a.get("dstLoc"), "dstLoc"), _location(a.get("srcLoc"), "srcLoc")
        kind = _KIND_OF.get((src_loc[0], dst_loc[0]))
        if kind is None:
            raise BatchError(E.ACL_ERROR_INVALID_PARAM, "a batch copies host -> device or device -> host only")
        device = dst_loc[1] if kind == C.ACL_MEMCPY_HOST_TO_DEVICE else src_loc[1]
        kinds.append((kind, rt.check_device(device)))
    if len({kind for kind, _ in kinds}) > 1:
        raise BatchError(E.ACL_ERROR_INVALID_PARAM, "all the copies of a batch go one direction")
    plan = []
    for i in range(n):
        kind, device = kinds[sum(1 for s in starts[:k] if s <= i) - 1]
        dst, dest_max, src, nbytes = (x[i] for x in lists)
        plan.append((dst, dest_max, src, nbytes, kind, device, i))
    return plan


def _run(plan: list, stream=None) -> None:
    for dst, dest_max, src, nbytes, kind, device, i in plan:
        try:
            if not size(nbytes, "sizes[i]"):
                continue
            operand = rt.memory.operand(dst if kind == C.ACL_MEMCPY_HOST_TO_DEVICE else src, size(nbytes),
                                        write=kind == C.ACL_MEMCPY_HOST_TO_DEVICE, what="device side")
            if operand.kind != DEVICE or operand.device != device:
                raise AclError(E.ACL_ERROR_INVALID_PARAM, f"copy {i} does not reach device memory of the "
                               f"device its attribute names")
            if stream is None:
                memops.memcpy(dst, dest_max, src, nbytes, kind)
            else:
                memops.memcpy_async(dst, dest_max, src, nbytes, kind, stream)
        except BatchError:
            raise
        except AclError as exc:
            raise BatchError(exc.code, f"copy {i}: {exc.message}", i) from None


def _batch(args: tuple, stream=None) -> int:
    """Run a batch; its failIndex on failure travels in the BatchError."""
    try:
        _run(_plan(*args), stream)
    except BatchError:
        raise
    except AclError as exc:       # a malformed argument, not a copy's fault
        raise BatchError(exc.code, exc.message) from None
    return SIZE_MAX


@api(1, failed=SIZE_MAX)
def memcpy_batch(dsts, dest_maxs, srcs, sizes, num_batches, attrs, attrs_indexes, num_attrs) -> int:
    """aclrtMemcpyBatch: the copies, synchronously; returns failIndex (SIZE_MAX: none)."""
    return _batch((dsts, dest_maxs, srcs, sizes, num_batches, attrs, attrs_indexes, num_attrs))


@api(1, failed=SIZE_MAX)
def memcpy_batch_async(dsts, dest_maxs, srcs, sizes, num_batches, attrs, attrs_indexes, num_attrs,
                       stream) -> int:
    return _batch((dsts, dest_maxs, srcs, sizes, num_batches, attrs, attrs_indexes, num_attrs),
                  rt.stream_in_context(stream).handle)


@api()
def memcpy_batch_v2(dsts, dest_maxs, srcs, sizes, num_batches, attrs, attrs_indexes, num_attrs) -> None:
    """aclrtMemcpyBatchV2: the same without failIndex."""
    _batch((dsts, dest_maxs, srcs, sizes, num_batches, attrs, attrs_indexes, num_attrs))


@api()
def memcpy_batch_async_v2(dsts, dest_maxs, srcs, sizes, num_batches, attrs, attrs_indexes, num_attrs,
                          stream) -> None:
    _batch((dsts, dest_maxs, srcs, sizes, num_batches, attrs, attrs_indexes, num_attrs),
           rt.stream_in_context(stream).handle)


# ---------------------------------------------------------------------------- descriptors
def _inner(kind) -> None:
    if as_int(kind, "kind") != C.ACL_MEMCPY_INNER_DEVICE_TO_DEVICE:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "descriptor copies take ACL_MEMCPY_INNER_DEVICE_TO_DEVICE only")


@api(1)
def get_memcpy_desc_size(kind: int) -> int:
    _inner(kind)
    rt.current_context()
    return DESC.size


@api(1)
def set_memcpy_desc(desc, kind: int, src_addr, dst_addr, count: int, config=None) -> int:
    """Write src, dst and count into the descriptor (device memory); returns ``desc``."""
    _inner(kind)
    if config not in (None, 0):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "config is reserved: pass None")
    nbytes = size(count, "count")
    where = rt.memory.operand(desc, DESC.size, write=True, what="desc")
    src = rt.memory.operand(src_addr, nbytes, write=False, what="srcAddr")
    dst = rt.memory.operand(dst_addr, nbytes, write=True, what="dstAddr")
    if any(op.kind != DEVICE for op in (where, src, dst)) or len({op.device for op in (where, src, dst)}) > 1:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "desc, srcAddr and dstAddr must be memory of one device")
    rt.memory.view(where)[:] = memoryview(DESC.pack(src_addr, dst_addr, nbytes, 0)).cast("B")
    return desc


@api()
def memcpy_async_with_desc(desc, kind: int, stream) -> None:
    _inner(kind)
    st = rt.stream_in_context(stream)
    where = rt.memory.operand(desc, DESC.size, write=False, what="desc")
    if where.kind != DEVICE or where.device != st.device:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "desc must be device memory of the stream's device")
    streams.submit(st, "copy_desc", where.location(), address.device_base(st.device))
