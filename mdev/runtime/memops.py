"""Memory API: device and pinned allocation, copies (1-D and 2-D) and memsets.

Each copy is validated here first (NULL, sizes, kinds, bounds, peer access); then it
either runs in this process (synchronous calls, pageable host memory) or becomes a task
on the stream (asynchronous calls between device and pinned memory).
"""

from __future__ import annotations

import numpy as np

from mdev import constants as C
from mdev import errors as E
from mdev.errors import AclError
from mdev.runtime.boundary import api
from mdev.runtime import hooks
from mdev.runtime import capture as _graph
from mdev.memory import address
from mdev.runtime import streams
from mdev.runtime import trace as _trace
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.memory import DEVICE, PAGEABLE, PINNED, Allocation, Operand, pairs
from mdev.runtime.validate import as_int, size

_KIND_NAMES = {
    C.ACL_MEMCPY_HOST_TO_HOST: "ACL_MEMCPY_HOST_TO_HOST",
    C.ACL_MEMCPY_HOST_TO_DEVICE: "ACL_MEMCPY_HOST_TO_DEVICE",
    C.ACL_MEMCPY_DEVICE_TO_HOST: "ACL_MEMCPY_DEVICE_TO_HOST",
    C.ACL_MEMCPY_DEVICE_TO_DEVICE: "ACL_MEMCPY_DEVICE_TO_DEVICE",
    C.ACL_MEMCPY_DEFAULT: "ACL_MEMCPY_DEFAULT",
    C.ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE: "ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE",
}
# (source is host, destination is host) each kind demands; None = inferred from addresses
_DIRECTION = {
    C.ACL_MEMCPY_HOST_TO_HOST: (True, True),
    C.ACL_MEMCPY_HOST_TO_DEVICE: (True, False),
    C.ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE: (True, False),
    C.ACL_MEMCPY_DEVICE_TO_HOST: (False, True),
    C.ACL_MEMCPY_DEVICE_TO_DEVICE: (False, False),
    C.ACL_MEMCPY_DEFAULT: None,
}
_KINDS_2D_SYNC = {C.ACL_MEMCPY_HOST_TO_DEVICE, C.ACL_MEMCPY_DEVICE_TO_HOST}
_KINDS_2D_ASYNC = _KINDS_2D_SYNC | {C.ACL_MEMCPY_DEVICE_TO_DEVICE}
MAX_2D_WIDTH, MAX_2D_HEIGHT = 5_000_000, 5_242_880


# ---------------------------------------------------------------------------- allocation
@api(1)
def malloc(size_: int, policy: int, align32: bool = False) -> int:
    nbytes = size(size_, positive=True)
    policy = as_int(policy, "policy")
    device = rt.current_context().device
    geometry = policy
    if policy & 0xFF > C.ACL_MEM_MALLOC_HUGE1G_ONLY_P2P:
        # documented: a value outside the enum means huge pages from 2 MiB up, else normal
        # pages (not HUGE_FIRST's 1 MiB threshold)
        geometry = C.ACL_MEM_MALLOC_HUGE_ONLY if nbytes >= 2 * address.MiB else C.ACL_MEM_MALLOC_NORMAL_ONLY
    page = address.page_size(nbytes, geometry)
    reserved = address.align_up(address.padded_size(nbytes, geometry, align32), page)
    ptr = rt.link(device).request("malloc", nbytes, reserved, page, policy)
    rt.memory.add(Allocation(ptr, nbytes, DEVICE, device, page, reserved, policy))
    return ptr


@api(1)
def malloc_align32(size_: int, policy: int) -> int:
    return malloc(size_, policy, align32=True)


def _to_free(ptr, kind: str, name: str, what: str) -> Allocation:
    """The allocation a free names: the start of a live one of ``kind`` (memcheck reports
    any other pointer)."""
    if not ptr:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{name} is NULL")
    ptr = as_int(ptr, name)
    alloc = rt.memory.get(ptr)
    if alloc is None or alloc.kind != kind:
        if hooks.checker is not None:
            hooks.checker.bad_free(ptr)
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{ptr:#x} is not the start of a live {what} (double free?)")
    return alloc


@api()
def free(dev_ptr: int) -> None:
    alloc = _to_free(dev_ptr, DEVICE, "devPtr", "device allocation")
    if alloc.ipc_key is not None:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{dev_ptr:#x} was imported over IPC: "
                       "release it with ipc_mem_close, not free")
    rt.memory.remove(alloc.ptr)
    close_exports(alloc)
    rt.link(alloc.device).request("free", alloc.ptr)


def close_exports(alloc: Allocation) -> None:
    """Freed memory closes its IPC keys: a stale key must never reach what the device hands
    out next at that address.  Processes that imported it keep it until they close."""
    for key in alloc.exports or ():
        try:
            rt.attach().request("ipc_close", key)
        except AclError:
            pass    # already closed
    alloc.exports = None


@api(1)
def malloc_host(size_: int) -> int:
    return rt.memory.new_pinned(size(size_, positive=True)).ptr


@api()
def free_host(host_ptr: int) -> None:
    alloc = _to_free(host_ptr, PINNED, "hostPtr", "malloc_host buffer")
    if alloc.ipc_key is not None:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{host_ptr:#x} is another process's pinned buffer mapped "
                       "here (a collective's staging slots): it is not this process's to free")
    rt.memory.remove(alloc.ptr)
    board = rt.attach()
    seg = alloc.segment
    for link in list(board._links.values()):
        try:
            link.request("forget_segment", seg.name)
        except AclError:
            pass
    board.request("unregister_segment", seg.name)
    seg.close()
    seg.unlink()


# ---------------------------------------------------------------------------- checks
def _kind(kind, allowed) -> int:
    kind = as_int(kind, "kind")
    if kind not in allowed:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"memcpy kind {kind} is not allowed here")
    return kind


def _operands(dst, src, nbytes: int, kind: int) -> tuple[Operand, Operand]:
    d = rt.memory.operand(dst, nbytes, write=True, what="dst")
    s = rt.memory.operand(src, nbytes, write=False, what="src")
    want = _DIRECTION[kind]
    if want is not None and (s.is_host, d.is_host) != want:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID,
                       f"{_KIND_NAMES[kind]} does not match the pointers: src is {s.kind} memory, "
                       f"dst is {d.kind} memory")
    return d, s


def check_reach(executing: int, *operands: Operand) -> None:
    """Device memory of another device needs peer access from the executing device."""
    for op in (part for operand in operands for part in operand.parts()):
        if op.kind == DEVICE and op.device != executing and (executing, op.device) not in rt.peer_access:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID,
                           f"device {executing} cannot reach memory of device {op.device}: "
                           f"enable peer access first (device_enable_peer_access)")


def _copy_here(d: Operand, s: Operand) -> None:
    if hooks.checker is not None:
        hooks.checker.host_access(reads=[s], writes=[d])
    for dp, sp in pairs(d, s):          # VMM ranges across several mappings: piece by piece
        np.copyto(rt.memory.view(dp), rt.memory.view(sp))


def _sizes(dest_max, count) -> tuple[int, int]:
    dest_max, count = size(dest_max, "destMax"), size(count, "count")
    if count and (dest_max == 0 or count > dest_max):
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"count {count} exceeds destMax {dest_max}")
    return dest_max, count


def _require(ptr, what: str) -> None:
    if not ptr:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{what} is NULL")


# ---------------------------------------------------------------------------- copies
@api()
def memcpy(dst: int, dest_max: int, src: int, count: int, kind: int) -> None:
    _require(dst, "dst"), _require(src, "src")
    kind = _kind(kind, _DIRECTION)
    _, count = _sizes(dest_max, count)
    if count == 0:
        return
    d, s = _operands(dst, src, count, kind)
    check_reach(rt.current_context().device, d, s)
    if rt.captures:
        _graph.check_unsafe("memcpy")
    if _trace.host_on:          # traced: the host-side record times the copy
        _trace.host_op("memcpy", d, s, count, lambda: _copy_here(d, s))
        return
    _copy_here(d, s)


@api()
def memcpy_async(dst: int, dest_max: int, src: int, count: int, kind: int, stream) -> None:
    _require(dst, "dst"), _require(src, "src")
    kind = _kind(kind, _DIRECTION)
    _, count = _sizes(dest_max, count)
    st = rt.stream_in_context(stream)
    if kind == C.ACL_MEMCPY_HOST_TO_HOST:
        raise AclError(E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "asynchronous host-to-host copies are not supported")
    if count == 0 or dst == src:
        return
    d, s = _operands(dst, src, count, kind)
    if PAGEABLE in (d.kind, s.kind):
        # documented: with pageable host memory the call returns after the copy is done
        check_reach(st.device, d, s)
        _graph.check_pageable(st, "memcpy_async")
        streams.wait([st])
        _copy_here(d, s)
        return
    submit_copy(st, d, s)


def submit_copy(st, d: Operand, s: Operand) -> None:
    """Queue a copy between validated device / pinned operands of equal length on stream ``st``
    (a runtime Stream), after checking that its device reaches them."""
    check_reach(st.device, d, s)
    for dp, sp in pairs(d, s):
        streams.submit(st, "copy", dp.location(), sp.location(), dp.nbytes)


def _operands_2d(dst, dpitch, src, spitch, width, height, kind) -> tuple[Operand, Operand] | None:
    _require(dst, "dst"), _require(src, "src")
    dpitch, spitch = size(dpitch, "dpitch"), size(spitch, "spitch")
    width, height = size(width, "width"), size(height, "height")
    if width == 0 or height == 0:
        return None
    if width > MAX_2D_WIDTH or height > MAX_2D_HEIGHT or width > dpitch or width > spitch:
        raise AclError(E.ACL_ERROR_INVALID_PARAM,
                       f"2-D copy of {width}x{height} with pitches {dpitch}/{spitch} is out of range "
                       f"(width <= both pitches, width <= {MAX_2D_WIDTH}, height <= {MAX_2D_HEIGHT})")
    d = rt.memory.operand(dst, dpitch * (height - 1) + width, write=True, what="dst")
    s = rt.memory.operand(src, spitch * (height - 1) + width, write=False, what="src")
    want = _DIRECTION[kind]
    if (s.is_host, d.is_host) != want:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID,
                       f"{_KIND_NAMES[kind]} does not match the pointers: src is {s.kind}, dst is {d.kind}")
    return d, s


def _rows_apart(d: Operand, dpitch: int, s: Operand, spitch: int, width: int, height: int):
    """A 2-D copy touching several VMM mappings, as (dst, src) 1-D copies row by row."""
    for r in range(height):
        yield from pairs(d.slice(r * dpitch, width), s.slice(r * spitch, width))


def _copy2d_here(d: Operand, dpitch: int, s: Operand, spitch: int, width: int, height: int) -> None:
    if d.pieces or s.pieces:
        for dp, sp in _rows_apart(d, dpitch, s, spitch, width, height):
            _copy_here(dp, sp)
        return
    if hooks.checker is not None:
        hooks.checker.host_access(reads=[s], writes=[d])     # the rows' bounding ranges
    rows = np.lib.stride_tricks.as_strided
    np.copyto(rows(rt.memory.view(d), (height, width), (dpitch, 1)),
              rows(rt.memory.view(s), (height, width), (spitch, 1)))


@api()
def memcpy2d(dst, dpitch, src, spitch, width, height, kind) -> None:
    kind = _kind(kind, _KINDS_2D_SYNC)
    ops = _operands_2d(dst, dpitch, src, spitch, width, height, kind)
    if ops is None:
        return
    check_reach(rt.current_context().device, *ops)
    if rt.captures:
        _graph.check_unsafe("memcpy2d")
    if _trace.host_on:          # traced: the host-side record times the copy
        _trace.host_op("memcpy", ops[0], ops[1], width * height,
                       lambda: _copy2d_here(ops[0], dpitch, ops[1], spitch, width, height))
        return
    _copy2d_here(ops[0], dpitch, ops[1], spitch, width, height)


@api()
def memcpy2d_async(dst, dpitch, src, spitch, width, height, kind, stream) -> None:
    kind = _kind(kind, _KINDS_2D_ASYNC)
    st = rt.stream_in_context(stream)
    ops = _operands_2d(dst, dpitch, src, spitch, width, height, kind)
    if ops is None:
        return
    d, s = ops
    check_reach(st.device, d, s)
    if PAGEABLE in (d.kind, s.kind):
        _graph.check_pageable(st, "memcpy2d_async")
        streams.wait([st])
        _copy2d_here(d, dpitch, s, spitch, width, height)
        return
    if d.pieces or s.pieces:
        for dp, sp in _rows_apart(d, dpitch, s, spitch, width, height):
            streams.submit(st, "copy", dp.location(), sp.location(), dp.nbytes)
        return
    streams.submit(st, "copy2d", d.location(), dpitch, s.location(), spitch, width, height)


# ---------------------------------------------------------------------------- memset
def _memset_operand(dev_ptr, max_count, value, count) -> tuple[Operand | None, int]:
    _require(dev_ptr, "devPtr")
    max_count, count = size(max_count, "maxCount"), size(count, "count")
    value = as_int(value, "value")
    if count > max_count:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"count {count} exceeds maxCount {max_count}")
    if count == 0:
        return None, value
    return rt.memory.operand(dev_ptr, count, write=True, what="devPtr"), value


@api()
def memset(dev_ptr: int, max_count: int, value: int, count: int) -> None:
    op, value = _memset_operand(dev_ptr, max_count, value, count)
    if op is None:
        return
    check_reach(rt.current_context().device, op)
    if rt.captures:
        _graph.check_unsafe("memset")
    if hooks.checker is not None:
        hooks.checker.host_access(writes=[op], fill=value & 0xFF)
    if _trace.host_on:          # traced: the host-side record times the memset
        _trace.host_op("memset", op, None, count,
                       lambda: [rt.memory.view(part).fill(value & 0xFF) for part in op.parts()])
        return
    for part in op.parts():
        rt.memory.view(part).fill(value & 0xFF)


@api()
def memset_async(dev_ptr: int, max_count: int, value: int, count: int, stream) -> None:
    st = rt.stream_in_context(stream)
    op, value = _memset_operand(dev_ptr, max_count, value, count)
    if op is None:
        return
    check_reach(st.device, op)
    if op.kind == PAGEABLE:
        _graph.check_pageable(st, "memset_async")
        streams.wait([st])
        rt.memory.view(op).fill(value & 0xFF)
        return
    for part in op.parts():
        streams.submit(st, "memset", part.location(), value, part.nbytes)
