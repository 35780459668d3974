"""Memory API: device and pinned allocation, copies (1-D and 2-D) and memsets.

Each copy is validated here first (NULL, sizes, kinds, bounds, peer access); then it
either runs in this process (synchronous calls, pageable host memory) or becomes a task
on the stream (asynchronous calls between device and pinned memory).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from mdev import constants as C
from mdev import errors as E
from mdev.errors import AclError
from mdev.runtime.boundary import api
from mdev.runtime import hooks
from mdev.runtime import capture as _graph
from mdev.memory import address
from mdev.memory.program import program
from mdev.runtime import streams
from mdev.runtime import trace as _trace
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.memtable import DEVICE, PAGEABLE, PINNED, Allocation, Operand, pairs
from mdev.runtime.validate import as_int, size

_KIND_NAMES = {
    C.ACL_MEMCPY_HOST_TO_HOST: "ACL_MEMCPY_HOST_TO_HOST",
    C.ACL_MEMCPY_HOST_TO_DEVICE: "ACL_MEMCPY_HOST_TO_DEVICE",
    C.ACL_MEMCPY_DEVICE_TO_HOST: "ACL_MEMCPY_DEVICE_TO_HOST",
    C.ACL_MEMCPY_DEVICE_TO_DEVICE: "ACL_MEMCPY_DEVICE_TO_DEVICE",
    C.ACL_MEMCPY_DEFAULT: "ACL_MEMCPY_DEFAULT",
    C.ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE: "ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE",
}
_H2H, _H2D, _D2H, _D2D = (C.ACL_MEMCPY_HOST_TO_HOST, C.ACL_MEMCPY_HOST_TO_DEVICE,
                          C.ACL_MEMCPY_DEVICE_TO_HOST, C.ACL_MEMCPY_DEVICE_TO_DEVICE)
# kinds the pointers correct (see corrected_kind)
_PLAIN_KINDS = frozenset((_H2H, _H2D, _D2H, _D2D, C.ACL_MEMCPY_DEFAULT))
# The kind asynchronous and 2-D copies end up with, as the runtime corrects it from the
# pointers (MemcpyKindAutoCorrect).  Between memory the runtime knows (device memory,
# pinned or registered host memory) the pointers decide whatever the caller said ...
_KIND_OF = {("host", "device"): _H2D, ("device", "host"): _D2H, ("host", "host"): _H2H,
            ("device", "device"): _D2D}
# ... with pageable host memory on a side, the kinds that can move the data are taken as
# given, DEFAULT becomes the natural one, the rest are refused: (src, dst) -> (accepted, DEFAULT's)
_KINDS_WITH_PAGEABLE = {
    ("pageable", "device"): ({_H2D, _D2D}, _H2D),
    ("device", "pageable"): ({_D2H, _D2D}, _D2H),
    ("host", "pageable"): ({_H2H, _H2D}, _H2H),
    ("pageable", "host"): ({_H2H, _D2H}, _H2H),
    ("pageable", "pageable"): ({_H2H, _H2D, _D2H, _D2D}, _H2H),
}
_KINDS_2D_SYNC = {C.ACL_MEMCPY_HOST_TO_DEVICE, C.ACL_MEMCPY_DEVICE_TO_HOST}
_KINDS_2D_ASYNC = _KINDS_2D_SYNC | {C.ACL_MEMCPY_DEVICE_TO_DEVICE}
MAX_2D_WIDTH, MAX_2D_HEIGHT = 5_000_000, 5_242_880


# ---------------------------------------------------------------------------- allocation
def allocate(size_: int, policy: int, align32: bool = False, **fields) -> Allocation:
    """Device memory of the current device (``fields``: DVPP, module of the allocation)."""
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
    alloc = Allocation(ptr, nbytes, DEVICE, device, page, reserved, policy, **fields)
    rt.memory.add(alloc)
    return alloc


@api(1)
def malloc(size_: int, policy: int) -> int:
    return allocate(size_, policy).ptr


@api(1)
def malloc_align32(size_: int, policy: int) -> int:
    return allocate(size_, policy, align32=True).ptr


# aclrtMallocAttrType -> the field of aclrtMallocAttrValue that carries it
_ATTR_FIELDS = {C.ACL_RT_MEM_ATTR_MODULE_ID: "moduleId", C.ACL_RT_MEM_ATTR_DEVICE_ID: "deviceId",
                C.ACL_RT_MEM_ATTR_VA_FLAG: "vaFlag"}
_POLICY_HINTS = C.ACL_MEM_TYPE_LOW_BAND_WIDTH | C.ACL_MEM_TYPE_HIGH_BAND_WIDTH | C.ACL_MEM_ACCESS_USER_SPACE_READONLY


def malloc_attributes(cfg) -> dict[int, int]:
    """aclrtMallocConfig as pyACL passes it -- None or {} (NULL), or {"attrs": [{"attr": id,
    "value": {"moduleId" | "deviceId" | "vaFlag": n}}], "numAttrs": n} -- as {attr: value}."""
    if cfg is None or cfg == {}:
        return {}
    if not isinstance(cfg, dict) or not isinstance(cfg.get("attrs"), (list, tuple)):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, 'cfg must be {} or {"attrs": [...], "numAttrs": n}')
    attrs = list(cfg["attrs"])
    if "numAttrs" in cfg and as_int(cfg["numAttrs"], "numAttrs") != len(attrs):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"numAttrs is {cfg['numAttrs']}, attrs holds {len(attrs)}")
    out = {}
    for item in attrs:
        attr = as_int(item.get("attr") if isinstance(item, dict) else None, "attr")
        field = _ATTR_FIELDS.get(attr)
        if field is None:
            raise AclError(E.ACL_ERROR_INVALID_PARAM, f"unknown malloc attribute {attr}")
        value = item.get("value", {})
        out[attr] = as_int(value.get(field) if isinstance(value, dict) else value, field)
    return out


@api(1)
def malloc_with_cfg(size_: int, policy: int, cfg=None) -> int:
    """aclrtMallocWithCfg: the policy may OR a bandwidth hint and
    ACL_MEM_ACCESS_USER_SPACE_READONLY into its base value (hints: no effect on an emulated
    device); a DEVICE_ID attribute must name the current device."""
    policy = as_int(policy, "policy")
    attrs = malloc_attributes(cfg)
    for attr, value in attrs.items():
        if attr == C.ACL_RT_MEM_ATTR_DEVICE_ID and value != rt.local_device(rt.current_context().device):
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"the DEVICE_ID attribute ({value}) is not the current "
                           f"device ({rt.local_device(rt.current_context().device)})")
        if attr == C.ACL_RT_MEM_ATTR_VA_FLAG:
            raise AclError(E.ACL_ERROR_INVALID_PARAM, "ACL_RT_MEM_ATTR_VA_FLAG applies to host memory only")
    return allocate(size_, policy & ~_POLICY_HINTS, module=attrs.get(C.ACL_RT_MEM_ATTR_MODULE_ID, 33)).ptr


@api(1)
def malloc_for_task_scheduler(size_: int, policy: int, cfg=None) -> int:
    """Device memory the on-device task scheduler uses (graph mode): ordinary device memory
    of the current device on an mdev board."""
    return malloc_with_cfg(size_, policy, cfg)


def to_free(ptr, kind: str, name: str, what: str) -> Allocation:
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
    managed = rt.memory.get(as_int(dev_ptr, "devPtr")) if dev_ptr else None
    if managed is not None and managed.managed:       # aclrtMemAllocManaged's memory
        rt.memory.release_pinned(managed)
        return
    alloc = to_free(dev_ptr, DEVICE, "devPtr", "device allocation")
    if alloc.held_by is not None:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{dev_ptr:#x} belongs to {alloc.held_by}: the runtime "
                       "frees it with its owner")
    if alloc.ipc_key is not None:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{dev_ptr:#x} was imported over IPC: "
                       "release it with ipc_mem_close, not free")
    release(alloc)


def release(alloc: Allocation) -> None:
    """Give a device allocation back to its device (which holds the range while a running
    task still uses it)."""
    streams.after_launches({alloc.device})
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
    alloc = to_free(host_ptr, PINNED, "hostPtr", "malloc_host buffer")
    if alloc.ipc_key is not None:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{host_ptr:#x} is another process's pinned buffer mapped "
                       "here (a collective's staging slots): it is not this process's to free")
    if alloc.registered:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{host_ptr:#x} is registered host memory: end the "
                       "registration with host_unregister, not free_host")
    if alloc.managed:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{host_ptr:#x} is managed memory (mem_alloc_managed): "
                       "free it with free, not free_host")
    if alloc.held_by is not None:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{host_ptr:#x} belongs to {alloc.held_by}: the runtime "
                       "frees it with its owner")
    rt.memory.release_pinned(alloc)


# ---------------------------------------------------------------------------- checks
def _kind(kind, allowed) -> int:
    kind = as_int(kind, "kind")
    if kind not in allowed:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"memcpy kind {kind} is not allowed here")
    return kind


def _operands(dst, src, nbytes: int) -> tuple[Operand, Operand]:
    return (rt.memory.operand(dst, nbytes, write=True, what="dst"),
            rt.memory.operand(src, nbytes, write=False, what="src"))


def _side(op: Operand) -> str:
    return "pageable" if op.kind == PAGEABLE else "host" if op.is_host else "device"


def corrected_kind(kind: int, d: Operand, s: Operand) -> int:
    """The kind an asynchronous or 2-D copy between ``s`` and ``d`` runs as (see _KIND_OF)."""
    if kind not in (_H2H, _H2D, _D2H, _D2D, C.ACL_MEMCPY_DEFAULT):
        if (s.is_host, d.is_host) != (True, False):          # HOST_TO_BUF_TO_DEVICE
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{_KIND_NAMES[kind]} does not match the pointers: "
                           f"src is {s.kind} memory, dst is {d.kind} memory")
        return kind
    sides = (_side(s), _side(d))
    if sides in _KIND_OF:
        return _KIND_OF[sides]
    accepted, default = _KINDS_WITH_PAGEABLE[sides]
    if kind == C.ACL_MEMCPY_DEFAULT:
        return default
    if kind not in accepted:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID,
                       f"{_KIND_NAMES[kind]} cannot copy from {s.kind} to {d.kind} memory (accepted here: "
                       + ", ".join(_KIND_NAMES[k] for k in sorted(accepted)) + ")")
    return kind


def check_reach(executing: int, *operands: Operand) -> None:
    """Device memory of another device needs peer access from the executing device (not
    memory imported through a FABRIC handle)."""
    for op in (part for operand in operands for part in operand.parts()):
        if (op.kind == DEVICE and op.device != executing and (executing, op.device) not in rt.peer_access
                and not op.allocation.fabric):
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID,
                           f"device {executing} cannot reach memory of device {op.device}: "
                           f"enable peer access first (device_enable_peer_access)")


def _after_launches(*operands: Operand) -> None:
    """A synchronous operation on device memory comes after the kernels launched just before
    it, as on an NPU (mdev.runtime.streams.after_launches)."""
    streams.after_launches({op.device for op in operands if op.kind == DEVICE})


def _copy_here(d: Operand, s: Operand) -> None:
    if hooks.checker is not None:
        hooks.checker.host_access(reads=[s], writes=[d])
    for dp, sp in pairs(d, s):          # VMM ranges across several mappings: piece by piece
        rt.memory.copy(dp, sp)


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
    """aclrtMemcpy: the pointers decide the direction (the kind is only checked to be one
    of the copy kinds), as the driver's copy does."""
    _require(dst, "dst"), _require(src, "src")
    _kind(kind, _KIND_NAMES)
    _, count = _sizes(dest_max, count)
    if count == 0:
        return
    d, s = _operands(dst, src, count)
    check_reach(rt.current_context().device, d, s)
    if _graph.held.captures:
        _graph.check_unsafe("memcpy")
    _after_launches(d, s)
    if _trace.host_on:          # traced: the host-side record times the copy
        _trace.host_op("memcpy", d, s, count, lambda: _copy_here(d, s))
        return
    _copy_here(d, s)


@api()
def memcpy_async(dst: int, dest_max: int, src: int, count: int, kind: int, stream) -> None:
    if dst and src and type(kind) is int and kind in _PLAIN_KINDS and type(dest_max) is int and \
            type(count) is int and 0 < count <= dest_max < 1 << 64:
        # the common call, checked in one expression (as memset_async's); a copy within the
        # stream's own device's memory needs neither the kind's correction (the pointers make
        # it device to device) nor the reach check (a small copy: 4.4 us of host time, was 7)
        st = rt.stream_in_context(stream)
        d, s = _operands(dst, src, count)
        device = st.device
        if d.kind == DEVICE and s.kind == DEVICE and d.pieces is None and s.pieces is None and \
                d.allocation.device == device and s.allocation.device == device:
            if dst != src:
                streams.submit(st, "copy", d.location(), s.location(), count)
            return
    else:
        _require(dst, "dst"), _require(src, "src")
        kind = _kind(kind, _KIND_NAMES)
        _, count = _sizes(dest_max, count)
        st = rt.stream_in_context(stream)
        if count == 0:
            return
        d, s = _operands(dst, src, count)
    if corrected_kind(kind, d, s) == _H2H:
        raise AclError(E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "asynchronous host-to-host copies are not supported")
    if dst == src:
        return
    if PAGEABLE in (d.kind, s.kind):
        # documented: with pageable host memory the call returns after the copy is done
        check_reach(st.device, d, s)
        if s.kind == PAGEABLE and d.kind != PAGEABLE and isinstance(st.recorder, _graph.Build):
            submit_copy(st, d, _staged(st.recorder, s))
            return
        _graph.check_pageable(st, "memcpy_async")
        streams.wait([st])
        _copy_here(d, s)
        return
    submit_copy(st, d, s)


def _staged(recorder, s: Operand) -> Operand:
    """A stored copy from pageable memory (a built model's stream) copies from pinned memory
    the model owns, holding the source's bytes as they are now."""
    buffer = recorder.stage(s.nbytes)
    staging = rt.memory.operand(buffer.ptr, s.nbytes, write=True, what="staging")
    _copy_here(staging, s)
    return staging


def submit_copy(st, d: Operand, s: Operand) -> None:
    """Queue a copy between validated device / pinned operands of equal length on stream ``st``
    (a runtime Stream), after checking that its device reaches them."""
    check_reach(st.device, d, s)
    for dp, sp in pairs(d, s):
        streams.submit(st, "copy", dp.location(), sp.location(), dp.nbytes)


def _operands_2d(dst, dpitch, src, spitch, width, height, kind,
                 allowed: set[int]) -> tuple[Operand, Operand] | None:
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
    runs_as = corrected_kind(kind, d, s)
    if runs_as not in allowed:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"a 2-D copy from {s.kind} to {d.kind} memory is "
                       f"{_KIND_NAMES[runs_as]}, which 2-D copies do not support here")
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
    if s.kind == PAGEABLE:                   # the program's rows, copied by the kernel
        source = program().read_rows(s.ptr, spitch, width, height, "src")
    else:
        source = rows(rt.memory.view(s), (height, width), (spitch, 1))
    if d.kind == PAGEABLE:
        program().write_rows(d.ptr, dpitch, source, "dst")
    else:
        np.copyto(rows(rt.memory.view(d), (height, width), (dpitch, 1)), source)


@api()
def memcpy2d(dst, dpitch, src, spitch, width, height, kind) -> None:
    kind = _kind(kind, _KINDS_2D_SYNC)
    ops = _operands_2d(dst, dpitch, src, spitch, width, height, kind, _KINDS_2D_SYNC)
    if ops is None:
        return
    check_reach(rt.current_context().device, *ops)
    if _graph.held.captures:
        _graph.check_unsafe("memcpy2d")
    _after_launches(*ops)
    if _trace.host_on:          # traced: the host-side record times the copy
        _trace.host_op("memcpy", ops[0], ops[1], width * height,
                       lambda: _copy2d_here(ops[0], dpitch, ops[1], spitch, width, height))
        return
    _copy2d_here(ops[0], dpitch, ops[1], spitch, width, height)


@api()
def memcpy2d_async(dst, dpitch, src, spitch, width, height, kind, stream) -> None:
    kind = _kind(kind, _KINDS_2D_ASYNC)
    st = rt.stream_in_context(stream)
    ops = _operands_2d(dst, dpitch, src, spitch, width, height, kind, _KINDS_2D_ASYNC)
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
    if dev_ptr and type(max_count) is int and type(count) is int and type(value) is int and \
            0 < count <= max_count < 1 << 64:
        # the common call, checked in one expression (a small task's host time is mostly
        # checks like these): the checks below tell what is wrong with any other
        return rt.memory.operand(dev_ptr, count, write=True, what="devPtr"), value
    _require(dev_ptr, "devPtr")
    max_count, count = size(max_count, "maxCount"), size(count, "count")
    value = as_int(value, "value")
    if count > max_count:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"count {count} exceeds maxCount {max_count}")
    if count == 0:
        return None, value
    return rt.memory.operand(dev_ptr, count, write=True, what="devPtr"), value


def _check_synchronous_fill(op: Operand, api_name: str) -> None:
    """The current device must reach the memory, and no capture may be running."""
    check_reach(rt.current_context().device, op)
    if _graph.held.captures:
        _graph.check_unsafe(api_name)


@api()
def memset(dev_ptr: int, max_count: int, value: int, count: int) -> None:
    op, value = _memset_operand(dev_ptr, max_count, value, count)
    if op is None:
        return
    _check_synchronous_fill(op, "memset")
    _after_launches(op)
    if hooks.checker is not None:
        hooks.checker.host_access(writes=[op], fill=value & 0xFF)
    if _trace.host_on:          # traced: the host-side record times the memset
        _trace.host_op("memset", op, None, count,
                       lambda: [rt.memory.fill(part, value) for part in op.parts()])
        return
    for part in op.parts():
        rt.memory.fill(part, value)


@api()
def memset_async(dev_ptr: int, max_count: int, value: int, count: int, stream) -> None:
    st = rt.stream_in_context(stream)
    op, value = _memset_operand(dev_ptr, max_count, value, count)
    if op is not None:
        _fill_by_stream(st, op, PAGEABLE, "memset_async", _fill8_here, "memset", value)


def _fill8_here(op: Operand, value: int) -> None:
    rt.memory.fill(op, value)


def _fill_by_stream(st, op: Operand, at_once: str, api_name: str, fill_here: Callable[[Operand, int], None],
                    task: str, value: int) -> None:
    """A fill on stream ``st``: host memory of kind ``at_once`` is filled when the stream has
    drained, before the call returns (as documented); other memory gets ``task`` tasks."""
    if op.kind == DEVICE and op.pieces is None and op.allocation.device == st.device:
        streams.submit(st, task, op.location(), value, op.nbytes)      # its own device's memory
        return
    check_reach(st.device, op)
    if op.kind == at_once:
        _graph.check_pageable(st, api_name)
        streams.wait([st])
        fill_here(op, value)
        return
    for part in op.parts():
        streams.submit(st, task, part.location(), value, part.nbytes)


# ---------------------------------------------------------------------------- 32-bit fills
def _d32_operand(ptr, mem_size, value, count) -> tuple[Operand | None, int]:
    """N 32-bit words of memory from malloc / malloc_host (not pageable memory)."""
    _require(ptr, "ptr")
    mem_size, count = size(mem_size, "memSize"), size(count, "N")
    value = as_int(value, "value") & 0xFFFFFFFF
    if 4 * count > mem_size:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{count} words need {4 * count} bytes, memSize is {mem_size}")
    if count == 0:
        return None, value
    op = rt.memory.operand(ptr, 4 * count, write=True, what="ptr")
    if op.kind == PAGEABLE:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "memset_d32 takes memory from malloc or malloc_host")
    if ptr % 4:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"ptr {ptr:#x} is not 4-byte aligned")
    return op, value


def _fill32_here(op: Operand, value: int) -> None:
    if hooks.checker is not None:
        hooks.checker.host_access(writes=[op])
    for part in op.parts():
        rt.memory.view(part).view(np.uint32).fill(value)


@api()
def memset_d32(ptr, mem_size: int, value: int, count: int) -> None:
    """aclrtMemsetD32: ``count`` 32-bit words of ``value``, synchronously."""
    op, value = _d32_operand(ptr, mem_size, value, count)
    if op is not None:
        _check_synchronous_fill(op, "memset_d32")
        _fill32_here(op, value)


@api()
def memset_d32_async(ptr, mem_size: int, value: int, count: int, stream) -> None:
    """aclrtMemsetD32Async: a stream task for device memory; host memory is filled at once
    after the stream drained, as documented."""
    st = rt.stream_in_context(stream)
    op, value = _d32_operand(ptr, mem_size, value, count)
    if op is not None:
        _fill_by_stream(st, op, PINNED, "memset_d32_async", _fill32_here, "fill32", value)


# ---------------------------------------------------------------------------- cache maintenance
# An emulated device has no caches between its cores and HBM: the maintenance calls check
# their memory and order nothing but themselves, as the runtime documents for this version.
def _device_range(ptr, nbytes, what: str) -> Operand:
    _require(ptr, what)
    op = rt.memory.operand(ptr, size(nbytes, "size", positive=True), write=False, what=what)
    if op.kind != DEVICE:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{what} must be device memory")
    return op


@api()
def mem_flush(dev_ptr, size_: int) -> None:
    _device_range(dev_ptr, size_, "devPtr")


@api()
def mem_invalidate(dev_ptr, size_: int) -> None:
    _device_range(dev_ptr, size_, "devPtr")


_CMO_TYPES = (C.ACL_RT_CMO_TYPE_PREFETCH, C.ACL_RT_CMO_TYPE_WRITEBACK, C.ACL_RT_CMO_TYPE_INVALID,
              C.ACL_RT_CMO_TYPE_FLUSH)


@api()
def cmo_async(src, size_: int, cmo_type: int, stream) -> None:
    """aclrtCmoAsync: an ordered stream task over device memory of the stream's device."""
    st = rt.stream_in_context(stream)
    kind = as_int(cmo_type, "cmoType")
    if kind not in _CMO_TYPES:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"cmoType must be one of ACL_RT_CMO_TYPE_*, got {kind}")
    op = _device_range(src, size_, "src")
    if op.device != st.device:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "src must be memory of the stream's device")
    streams.submit(st, "cmo", op.location(), op.nbytes, kind)


@api()
def memcpy_async_with_condition(dst, dest_max, src, count, kind, stream) -> None:
    """Deprecated alias of memcpy_async."""
    memcpy_async(dst, dest_max, src, count, kind, stream)
