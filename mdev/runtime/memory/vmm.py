"""Virtual memory management: reserve address ranges, allocate physical memory, map one onto the other.

    reserve_mem_address --> VA range in this process's VMM window [2**49, 2**49 + 2**47)
    malloc_physical     --> handle: a block of a device's HBM (the device's "malloc")
    map_mem(va, handle) --> the VA range reaches that block; every memory API takes the VA
    export / import     --> the same block in another process: a shareable uint64 through the
                            supervisor registry (kind "vmm"); the device keeps an imported
                            block alive until its last importer lets go.  A FABRIC handle
                            (kind "fabric", Atlas A3 only) is imported on any server of the
                            supernode: a host process on another node attaches the block too

A VA is resolved piece by piece: each mapping of a reservation is one piece, a range that
crosses mappings becomes an operand with several pieces, and copies and memsets run per
piece.  A handle counts references (malloc_physical / import / retain each add one,
free_physical drops one); the memory goes once no reference and no mapping is left.
Reserved-but-unmapped addresses are refused (107000) and fault on the device.
"""

from __future__ import annotations

import bisect
import copy
import threading
from dataclasses import dataclass, field

from mdev import constants as C
from mdev import errors as E
from mdev.errors import AclError
from mdev.memory import address
from mdev.memory.allocator import return_hole
from mdev.runtime.boundary import api
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.memtable import DEVICE, Allocation, Operand
from mdev.runtime.validate import as_int, size
from mdev.topology.model import is_a3

PHYSICAL_HANDLES = 0x7_0000_0000
VMM_BASE, VMM_END = address.VMM_BASE, address.VMM_END        # [2**49, 2**49 + 2**47)
KiB, MiB, GiB = address.KiB, address.MiB, address.GiB

_GIANT = {C.ACL_HBM_MEM_HUGE1G, C.ACL_HBM_MEM_P2P_HUGE1G, C.ACL_MEM_HUGE1G, C.ACL_MEM_P2P_HUGE1G}
_DEVICE_ATTRS = {C.ACL_HBM_MEM_HUGE, C.ACL_HBM_MEM_NORMAL, C.ACL_HBM_MEM_P2P_HUGE, C.ACL_HBM_MEM_P2P_NORMAL,
                 C.ACL_HBM_MEM_HUGE1G, C.ACL_HBM_MEM_P2P_HUGE1G, C.ACL_MEM_NORMAL, C.ACL_MEM_HUGE,
                 C.ACL_MEM_HUGE1G, C.ACL_MEM_P2P_NORMAL, C.ACL_MEM_P2P_HUGE, C.ACL_MEM_P2P_HUGE1G}
_HOST_ATTRS = {C.ACL_DDR_MEM_HUGE, C.ACL_DDR_MEM_NORMAL, C.ACL_DDR_MEM_P2P_HUGE, C.ACL_DDR_MEM_P2P_NORMAL}
_HOST_LOCATIONS = {C.ACL_MEM_LOCATION_TYPE_HOST, C.ACL_MEM_LOCATION_TYPE_HOST_NUMA}
_OPTIONS = {C.ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, C.ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED}
_EXPORT_FLAGS = {C.ACL_RT_VMM_EXPORT_FLAG_DEFAULT, C.ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION}


def granularity(mem_attr: int) -> int:
    """Allocation granularity of a memory kind (MINIMUM = RECOMMENDED; the driver does not say)."""
    if mem_attr in _GIANT:
        return GiB
    if mem_attr in (C.ACL_DDR_MEM_NORMAL, C.ACL_DDR_MEM_P2P_NORMAL):
        return 4 * KiB
    return 2 * MiB       # every other kind, ACL_HBM_MEM_NORMAL too (silently 2 MiB pages)


# ---------------------------------------------------------------------------- state
@dataclass(eq=False)
class Physical:
    handle: int
    device: int                 # the device whose HBM holds the memory
    offset: int                 # where in that HBM
    size: int
    prop: dict                  # aclrtPhysicalMemProp (location: the device it is used from)
    key: str | None = None      # imported: the registry key it came from
    shareable: int | None = None   # exported: the shareable handle handed out
    share_key: str | None = None   # ... and its registry key
    refs: int = 1
    maps: int = 0
    alloc: Allocation | None = None

    @property
    def imported(self) -> bool:
        return self.key is not None

    def __post_init__(self) -> None:
        # how the memory APIs see the block: a device allocation at its device address
        self.alloc = Allocation(address.device_base(self.device) + self.offset, self.size, DEVICE, self.device,
                                granularity(self.prop["memAttr"]), self.size)


@dataclass(eq=False)
class Mapping:
    va: int
    size: int
    phys: Physical
    access: dict = field(default_factory=dict)    # (location type, id) -> aclrtMemAccessFlags

    @property
    def end(self) -> int:
        return self.va + self.size


@dataclass(eq=False)
class Reservation:
    va: int
    size: int
    span: int                   # address space taken (size rounded up to the alignment)
    maps: list = field(default_factory=list)      # Mappings, sorted by va
    starts: list = field(default_factory=list)

    @property
    def end(self) -> int:
        return self.va + self.size

    def mapping_at(self, va: int) -> Mapping | None:
        i = bisect.bisect_right(self.starts, va) - 1
        if i >= 0 and va < self.maps[i].end:
            return self.maps[i]
        return None


class Space:
    """This process's VMM state: physical handles, reservations, free address space."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.handles: dict[int, Physical] = {}
        self.imports: dict[str, Physical] = {}
        self.reservations: dict[int, Reservation] = {}
        self.starts: list[int] = []
        self.holes: list[list[int]] = [[VMM_BASE, VMM_END - VMM_BASE]]
        self._kernel_map: tuple | None = ()

    def operand(self, ptr: int, nbytes: int, what: str) -> Operand:
        """The device memory behind [ptr, ptr+nbytes) of the VMM window, piece by piece."""
        with self.lock:
            res = self.find(ptr)
            if res is None or ptr >= res.end:
                raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{what} {ptr:#x} is a VMM address outside every "
                               f"reservation of this process (reserve_mem_address, or released)")
            end = ptr + nbytes
            if end > res.end:
                raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{what} {ptr:#x} + {nbytes} bytes overruns its "
                               f"reservation [{res.va:#x}, +{res.size}) by {end - res.end} bytes")
            pieces, pos = [], ptr
            i = max(0, bisect.bisect_right(res.starts, ptr) - 1)
            while i < len(res.maps):
                m = res.maps[i]
                if m.end <= pos:
                    i += 1
                    continue
                if m.va > pos:
                    break
                take = min(end, m.end) - pos
                alloc = m.phys.alloc
                pieces.append(Operand(DEVICE, alloc.ptr + pos - m.va, take, alloc))
                pos += take
                i += 1
                if pos >= end:
                    break
        if not pieces or pos < end:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{what} {ptr:#x} (+{nbytes} bytes): {pos:#x} is reserved "
                           f"but not mapped (map_mem)")
        if len(pieces) == 1:
            return pieces[0]
        return Operand(DEVICE, ptr, nbytes, pieces[0].allocation, pieces)

    def find(self, va: int) -> Reservation | None:
        i = bisect.bisect_right(self.starts, va) - 1
        if i >= 0:
            res = self.reservations[self.starts[i]]
            if va < res.va + res.span:
                return res
        return None

    def take(self, span: int, align: int, expect: int) -> int:
        for i, (start, length) in enumerate(self.holes):
            va = expect if expect else address.align_up(start, align)
            if start <= va and va + span <= start + length:
                pieces = [[start, va - start]] if va > start else []
                if start + length > va + span:
                    pieces.append([va + span, start + length - va - span])
                self.holes[i:i + 1] = pieces
                return va
            if expect and start > expect:
                break
        if expect:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"expectPtr {expect:#x} (+{span} bytes) is not free "
                           f"address space of this process's VMM window")
        raise AclError(E.ACL_ERROR_RT_MEMORY_ALLOCATION, f"no {span} bytes of VMM address space left")

    def give_back(self, va: int, span: int) -> None:
        return_hole(self.holes, va, span)

    def kernel_map(self) -> tuple:
        table = self._kernel_map
        if table is None:
            with self.lock:
                table = self._kernel_map = tuple(
                    (m.va, m.size, ("d", m.phys.device, m.phys.offset))
                    for res in self.reservations.values() for m in res.maps)
        return table


def space() -> Space:
    sp = rt.memory.vmm
    if sp is None:
        with rt.lock:
            sp = rt.memory.vmm
            if sp is None:
                sp = rt.memory.vmm = Space()
    return sp


def kernel_map() -> tuple:
    """(va, size, location) of every mapping: kernels reach VMM addresses through it."""
    sp = rt.memory.vmm
    return () if sp is None else sp.kernel_map()


# ---------------------------------------------------------------------------- properties
def _field(d: dict, name: str, what: str):
    if not isinstance(d, dict):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{what} must be a dict, got {type(d).__name__}")
    if name not in d:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{what} has no field {name!r}")
    return as_int(d[name], f"{what}.{name}")


def _location(loc, what: str = "location") -> tuple[int, int]:
    return _field(loc, "type", what), _field(loc, "id", what)


def _prop(prop) -> dict:
    """A checked, normalised copy of an aclrtPhysicalMemProp dict."""
    handle_type = _field(prop, "handleType", "prop")
    allocation_type = _field(prop, "allocationType", "prop")
    attr = _field(prop, "memAttr", "prop")
    if "location" not in prop:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "prop has no field 'location'")
    loc_type, loc_id = _location(prop["location"], "prop.location")
    reserve = as_int(prop.get("reserve", 0), "prop.reserve")
    if handle_type != C.ACL_MEM_HANDLE_TYPE_NONE:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"handleType {handle_type}: only ACL_MEM_HANDLE_TYPE_NONE")
    if allocation_type != C.ACL_MEM_ALLOCATION_TYPE_PINNED:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"allocationType {allocation_type}: only "
                       "ACL_MEM_ALLOCATION_TYPE_PINNED")
    if loc_type == C.ACL_MEM_LOCATION_TYPE_DEVICE:
        rt.check_device(loc_id)
        if attr not in _DEVICE_ATTRS:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"memAttr {attr} is not a device memory kind "
                           "(ACL_HBM_MEM_* / ACL_MEM_*)")
    elif loc_type in _HOST_LOCATIONS:
        if attr not in _HOST_ATTRS:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"memAttr {attr} is not a host memory kind (ACL_DDR_MEM_*)")
    else:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"location type {loc_type}: DEVICE, HOST or HOST_NUMA")
    return {"handleType": handle_type, "allocationType": allocation_type, "memAttr": attr,
            "location": {"type": loc_type, "id": loc_id}, "reserve": reserve}


def _physical(handle) -> Physical:
    ph = space().handles.get(handle) if isinstance(handle, int) else None
    if ph is None:
        raise AclError(E.ACL_ERROR_INVALID_PARAM if not handle else E.ACL_ERROR_RT_PARAM_INVALID,
                       f"{handle!r} is not a live physical memory handle (malloc_physical / import / retain)")
    return ph


def _zero(value, name: str) -> None:
    if as_int(value, name) != 0:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{name} is reserved and must be 0, got {value}")


# ---------------------------------------------------------------------------- physical memory
@api(1)
def mem_get_allocation_granularity(prop, option: int) -> int:
    p = _prop(prop)
    if as_int(option, "option") not in _OPTIONS:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"option {option}: ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM "
                       "or _RECOMMENDED")
    return granularity(p["memAttr"])


@api(1)
def malloc_physical(size_: int, prop, flags: int) -> int:
    _zero(flags, "flags")
    nbytes = size(size_, positive=True)
    p = _prop(prop)
    if p["location"]["type"] != C.ACL_MEM_LOCATION_TYPE_DEVICE:
        raise AclError(E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "host physical memory (VMM on DDR) is not emulated")
    grain = granularity(p["memAttr"])
    if nbytes % grain:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"size {nbytes} is not a multiple of the allocation "
                       f"granularity {grain} (mem_get_allocation_granularity)")
    device = rt.check_device(p["location"]["id"])
    policy = C.ACL_MEM_MALLOC_HUGE1G_ONLY if grain == GiB else C.ACL_MEM_MALLOC_HUGE_ONLY
    ptr = rt.link(device).request("malloc", nbytes, nbytes, grain, policy)
    ph = Physical(rt.new_handle(PHYSICAL_HANDLES), device, ptr - address.device_base(device), nbytes, p)
    sp = space()
    with sp.lock:
        sp.handles[ph.handle] = ph
    return ph.handle


@api()
def free_physical(handle) -> None:
    sp = space()
    with sp.lock:
        ph = _physical(handle)
        ph.refs -= 1
        if ph.refs > 0:
            return
        del sp.handles[ph.handle]
        if ph.maps:
            return        # still mapped: goes with the last unmap_mem
    _release(ph)


def _release(ph: Physical) -> None:
    """No reference and no mapping is left: give the memory back (or detach from it)."""
    board = rt.attach()
    link = rt.link(ph.device)
    if ph.imported:
        with space().lock:
            if space().imports.get(ph.key) is ph:
                del space().imports[ph.key]
        for step in (lambda: link.request("ipc_detach", ph.offset), lambda: board.request("ipc_close", ph.key)):
            try:
                step()
            except AclError:
                pass
        return
    if ph.shareable is not None:
        try:   # later imports fail; processes that imported it keep it until they free it
            board.request("ipc_close", ph.share_key)
        except AclError:
            pass
    link.request("free", ph.alloc.ptr)


@api(1)
def mem_retain_allocation_handle(virt_ptr: int) -> int:
    sp = space()
    with sp.lock:
        m = _mapping(virt_ptr)
        ph = m.phys
        ph.refs += 1
        sp.handles[ph.handle] = ph
    return ph.handle


@api(1, failed=None)
def mem_get_allocation_properties_from_handle(handle) -> dict:
    return copy.deepcopy(_physical(handle).prop)


# ---------------------------------------------------------------------------- address space
@api(1)
def reserve_mem_address(size_: int, alignment: int, expect_ptr, flags: int) -> int:
    nbytes = size(size_, positive=True)
    _zero(alignment, "alignment")
    if as_int(flags, "flags") not in (0, 1):      # normal or huge pages: mdev's are alike
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"flags must be 0 (normal pages) or 1 (huge pages), got {flags}")
    expect = 0 if expect_ptr is None else as_int(expect_ptr, "expectPtr")
    align = GiB if nbytes >= GiB else 2 * MiB
    span = address.align_up(nbytes, align)
    if expect and (expect % align or not VMM_BASE <= expect < VMM_END):
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"expectPtr {expect:#x} must be {align}-byte aligned and "
                       f"inside the VMM window [{VMM_BASE:#x}, {VMM_END:#x})")
    sp = space()
    with sp.lock:
        va = sp.take(span, align, expect)
        sp.reservations[va] = Reservation(va, nbytes, span)
        bisect.insort(sp.starts, va)
    return va


@api()
def release_mem_address(virt_ptr: int) -> None:
    va = as_int(virt_ptr, "virPtr")
    sp = space()
    with sp.lock:
        res = sp.reservations.get(va)
        if res is None:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID if va else E.ACL_ERROR_INVALID_PARAM,
                           f"{va:#x} is not the start of a reservation of this process")
        if res.maps:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"the reservation at {va:#x} still has {len(res.maps)} "
                           "mapping(s): unmap_mem them first")
        del sp.reservations[va]
        del sp.starts[bisect.bisect_left(sp.starts, va)]
        sp.give_back(va, res.span)


@api()
def map_mem(virt_ptr: int, size_: int, offset: int, handle, flags: int) -> None:
    va = as_int(virt_ptr, "virPtr")
    nbytes = size(size_, positive=True)
    _zero(flags, "flags")
    if as_int(offset, "offset") != 0:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"offset must be 0, got {offset}")
    sp = space()
    with sp.lock:
        ph = _physical(handle)
        if nbytes != ph.size:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"size {nbytes} must be the physical allocation's "
                           f"size {ph.size}")
        res = sp.find(va)
        if res is None or va >= res.end:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{va:#x} is not inside a reservation of this process")
        grain = granularity(ph.prop["memAttr"])
        if (va - res.va) % grain:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{va:#x} is not at a multiple of the {grain}-byte "
                           "granularity inside its reservation")
        if va + nbytes > res.end:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{nbytes} bytes at {va:#x} overrun the reservation "
                           f"[{res.va:#x}, +{res.size})")
        i = bisect.bisect_left(res.starts, va)
        if (i > 0 and res.maps[i - 1].end > va) or (i < len(res.maps) and res.maps[i].va < va + nbytes):
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"[{va:#x}, +{nbytes}) overlaps an existing mapping")
        if res.maps:
            other = res.maps[0].phys
            if other.device != ph.device:
                raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"the reservation already maps memory of device "
                               f"{other.device}; one reservation cannot bind two devices (this is device {ph.device})")
            if other.imported != ph.imported:
                raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "one reservation cannot mix handles from "
                               "malloc_physical with imported handles")
        m = Mapping(va, nbytes, ph, {(C.ACL_MEM_LOCATION_TYPE_DEVICE, ph.prop["location"]["id"]):
                                     C.ACL_RT_MEM_ACCESS_FLAGS_READWRITE})
        res.maps.insert(i, m)
        res.starts.insert(i, va)
        ph.maps += 1
        sp._kernel_map = None


@api()
def unmap_mem(virt_ptr: int) -> None:
    va = as_int(virt_ptr, "virPtr")
    sp = space()
    with sp.lock:
        res = sp.find(va)
        i = bisect.bisect_left(res.starts, va) if res is not None else 0
        if res is None or i >= len(res.maps) or res.starts[i] != va:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID if va else E.ACL_ERROR_INVALID_PARAM,
                           f"{va:#x} is not the start of a mapping (map_mem)")
        m = res.maps.pop(i)
        del res.starts[i]
        sp._kernel_map = None
        ph = m.phys
        ph.maps -= 1
        last = ph.maps == 0 and ph.refs == 0
    if last:
        _release(ph)


def _mapping(virt_ptr) -> Mapping:
    va = as_int(virt_ptr, "virPtr")
    res = space().find(va)
    m = res.mapping_at(va) if res is not None else None
    if m is None:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID if va else E.ACL_ERROR_INVALID_PARAM,
                       f"{va:#x} is not a mapped VMM address of this process")
    return m


@api()
def mem_set_access(virt_ptr: int, size_: int, desc, count: int) -> None:
    va = as_int(virt_ptr, "virPtr")
    nbytes = size(size_, positive=True)
    if isinstance(desc, dict):
        desc = [desc]
    count = as_int(count, "count")
    if not isinstance(desc, (list, tuple)) or count <= 0 or count > len(desc):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"desc must be a list of at least count={count} "
                       "aclrtMemAccessDesc dicts")
    grants = []
    for d in desc[:count]:
        flags = _field(d, "flags", "desc")
        loc_type, loc_id = _location(d.get("location") if isinstance(d, dict) else None, "desc.location")
        if flags != C.ACL_RT_MEM_ACCESS_FLAGS_READWRITE:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"access flags {flags}: only "
                           "ACL_RT_MEM_ACCESS_FLAGS_READWRITE is supported")
        if loc_type == C.ACL_MEM_LOCATION_TYPE_DEVICE:
            rt.check_device(loc_id)
        elif loc_type != C.ACL_MEM_LOCATION_TYPE_HOST:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"location type {loc_type}: HOST or DEVICE")
        grants.append(((loc_type, loc_id), flags))
    sp = space()
    with sp.lock:
        res = sp.find(va)
        i = bisect.bisect_left(res.starts, va) if res is not None else 0
        if res is None or i >= len(res.maps) or res.starts[i] != va:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{va:#x} is not the start of a mapping: virPtr and size "
                           "must be those given to map_mem")
        covered, pos = [], va
        while pos < va + nbytes and i < len(res.maps) and res.maps[i].va == pos:
            covered.append(res.maps[i])
            pos = res.maps[i].end
            i += 1
        if pos != va + nbytes:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"[{va:#x}, +{nbytes}) is not exactly a mapped range: "
                           "virPtr and size must be those given to map_mem")
        for m in covered:
            m.access.update(grants)


@api(1)
def mem_get_access(virt_ptr: int, location) -> int:
    key = _location(location)
    with space().lock:
        return _mapping(virt_ptr).access.get(key, C.ACL_RT_MEM_ACCESS_FLAGS_NONE)


# ---------------------------------------------------------------------------- sharing
# aclrtMemSharedHandleType -> the registry's kind: a DEFAULT handle is good on its own
# server, a FABRIC handle on every server of an A3 supernode (and on its own)
_KINDS = {C.ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT: "vmm", C.ACL_MEM_SHARE_HANDLE_TYPE_FABRIC: "fabric"}


def _key(shareable, kind: str = "vmm") -> str:
    value = as_int(shareable, "shareableHandle")
    if not 0 < value < 1 << 64:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"shareable handle {value} is not a uint64 handle")
    return f"mdev-{kind}-{value:016x}"


def _export(handle, flags: int, kind: str = "vmm") -> int:
    if as_int(flags, "flags") not in _EXPORT_FLAGS:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"export flags {flags:#x}: ACL_RT_VMM_EXPORT_FLAG_DEFAULT or "
                       "_DISABLE_PID_VALIDATION")
    sp = space()
    with sp.lock:
        ph = _physical(handle)
        if ph.imported:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "an imported handle cannot be exported again")
        if ph.shareable is not None:
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, "this handle was exported already: one shareable "
                           "handle per physical handle")
        validate = flags != C.ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION
        key = rt.attach().request("ipc_export", kind, ph.device, (ph.offset, ph.size, ph.prop["memAttr"]),
                                  validate)
        prefix = f"mdev-{kind}-"
        if not key.startswith(prefix):
            raise AclError(E.ACL_ERROR_RT_INTERNAL_ERROR, f"the board handed out {key!r} for a VMM export")
        ph.shareable, ph.share_key = int(key[len(prefix):], 16), key
        return ph.shareable


@api(1)
def mem_export_to_shareable_handle(handle, handle_type: int, flags: int) -> int:
    if as_int(handle_type, "handleType") != C.ACL_MEM_HANDLE_TYPE_NONE:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"handleType {handle_type}: only ACL_MEM_HANDLE_TYPE_NONE")
    return _export(handle, flags)


def _pids(pids) -> list[int]:
    if isinstance(pids, int):
        pids = [pids]
    if not isinstance(pids, (list, tuple)) or not pids:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "pid must be a non-empty list of process ids")
    return [as_int(p, "pid") for p in pids]


@api()
def mem_set_pid_to_shareable_handle(shareable, pids) -> None:
    rt.attach().request("ipc_set_pids", _key(shareable), _pids(pids))


@api(1)
def mem_import_from_shareable_handle(shareable, device_id: int) -> int:
    return _import(shareable, "vmm", rt.check_device(device_id))


def _import(shareable, kind: str, device: int) -> int:
    """Memory exported as a ``kind`` shareable handle, as a physical handle used from board
    device ``device``."""
    key = _key(shareable, kind)
    board = rt.attach()
    info = board.request("ipc_import", key, kind)      # the exporting process itself is refused
    home, detail = info["device"], info["detail"]
    offset, nbytes = detail[0], detail[1]
    attr = detail[2] if len(detail) > 2 else C.ACL_HBM_MEM_HUGE
    sp = space()
    with sp.lock:
        known = sp.imports.get(key)
        if known is not None:          # imported here before: one more reference
            known.refs += 1
            sp.handles[known.handle] = known
            return known.handle
    try:
        if kind == "fabric":
            if not board.topology.fabric_reachable(device, home):
                raise AclError(E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, f"device {rt.local_device(device)} and the "
                               f"exporting device are not on one supernode fabric")
        elif device != home and not board.topology.can_access_peer(device, home):
            route = board.topology.path(device, home)
            raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"device {rt.local_device(device)} cannot reach memory "
                           f"of device {rt.local_device(home)}: they are connected through {route.label}, which "
                           "allows no peer access")
        rt.link(home).request("ipc_attach", offset, nbytes, info["seal"])
    except AclError:
        board.request("ipc_close", key)
        raise
    prop = {"handleType": C.ACL_MEM_HANDLE_TYPE_NONE, "allocationType": C.ACL_MEM_ALLOCATION_TYPE_PINNED,
            "memAttr": attr, "location": {"type": C.ACL_MEM_LOCATION_TYPE_DEVICE, "id": rt.local_device(device)},
            "reserve": 0}
    ph = Physical(rt.new_handle(PHYSICAL_HANDLES), home, offset, nbytes, prop, key=key)
    ph.alloc.fabric = kind == "fabric"
    with sp.lock:
        sp.handles[ph.handle] = ph
        sp.imports[key] = ph
    return ph.handle


def _share_kind(share_type) -> str:
    """The registry kind of an aclrtMemSharedHandleType; FABRIC where this server has the fabric."""
    kind = _KINDS.get(as_int(share_type, "shareType"))
    if kind is None:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"shareType {share_type}: ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT or "
                       "_FABRIC")
    board = rt.attach()
    soc = board.topology.device(board.devices.start).soc_name
    if kind == "fabric" and not is_a3(soc):
        raise AclError(E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "FABRIC handles (memory shared across the servers of "
                       f"a supernode) exist only on Atlas A3 parts; this server's devices are {soc}")
    return kind


@api(1)
def mem_export_to_shareable_handle_v2(handle, flags: int, share_type: int) -> int:
    return _export(handle, flags, _share_kind(share_type))


@api()
def mem_set_pid_to_shareable_handle_v2(shareable, share_type: int, pids) -> None:
    rt.attach().request("ipc_set_pids", _key(shareable, _share_kind(share_type)), _pids(pids))


@api(1)
def mem_import_from_shareable_handle_v2(shareable, share_type: int, flags: int) -> int:
    """The V2 import makes the handle on the calling thread's current device."""
    kind = _share_kind(share_type)
    _zero(flags, "flags")
    return _import(shareable, kind, rt.current_context().device)
