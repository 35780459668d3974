"""Host memory the devices reach: registration of the program's own memory, and configured
pinned allocations.

    host_register(p, n, MAPPED)      the pages [p, p+n) become a shared segment in place
    host_register_v2(p, n, flags)    (their contents kept, same addresses), which every device
                                     maps: kernels reach them at p, asynchronous copies with
                                     them are real DMA (the memory counts as pinned)
    host_get_device_pointer(p)       the device-side address: p itself (the VA-consistent
                                     mapping of the A2/A3 parts)
    host_unregister(p)               private pages again, with the segment's contents
    malloc_host_with_cfg(n, cfg)     malloc_host with an aclrtMallocConfig

Memory of aclrtMallocHost is pinned already, and the devices reach it: registering a range of
it with host_register_v2 succeeds (as CANN documents) and changes nothing; host_unregister
ends that registration.  Registration needs 4 KiB-aligned, mapped, writable memory of this process; a range that
overlaps another registration or pinned memory is ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED.
"""

from __future__ import annotations

from mdev import constants as C
from mdev import errors as E
from mdev.errors import AclError
from mdev.memory import address
from mdev.runtime.boundary import api
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.memory.memops import malloc_attributes
from mdev.runtime.memtable import PINNED, Allocation
from mdev.runtime.validate import as_int, size

PAGE = address.NORMAL_PAGE
_V2_FLAGS = C.ACL_HOST_REG_MAPPED | C.ACL_HOST_REG_PINNED | C.ACL_HOST_REG_IOMEMORY | C.ACL_HOST_REG_READONLY
_RESERVED_V1 = (C.ACL_HOST_REGISTER_IOMEMORY, C.ACL_HOST_REGISTER_READONLY)


def _register(ptr, size_: int, what: str) -> int:
    ptr = as_int(ptr, "ptr")
    if not ptr:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "ptr is NULL")
    nbytes = size(size_, "size", positive=True)
    if ptr % PAGE:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{what}: ptr {ptr:#x} is not {PAGE}-byte aligned")
    if address.split(ptr) is not None or address.VMM_BASE <= ptr < address.VMM_END:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID, f"{what}: {ptr:#x} is device memory, not host memory")
    nbytes = address.align_up(nbytes, PAGE)
    # nothing of it may be pinned already (host memory lies below the device addresses, where
    # only pinned allocations are); both checks look at ranges, whatever the size
    alloc = rt.memory.overlapping(ptr, min(ptr + nbytes, address.DEVICE_BASE) - ptr)
    if alloc is not None:
        kind = "registered" if alloc.registered else "pinned (malloc_host)"
        raise AclError(E.ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
                       f"{what}: [{ptr:#x}, +{nbytes}) overlaps {kind} host memory at {alloc.ptr:#x}")
    rt.memory.operand(ptr, nbytes, write=True, what="ptr")      # mapped and writable here
    return rt.memory.new_pinned(nbytes, at=ptr).ptr


@api(1)
def host_register(ptr, size_: int, type_: int) -> int:
    """aclrtHostRegister: the device-side address of the registered memory."""
    kind = as_int(type_, "type")
    if kind in _RESERVED_V1:
        raise AclError(E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, f"host register type {kind:#x} is reserved")
    if kind != C.ACL_HOST_REGISTER_MAPPED:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"unknown host register type {kind}")
    return _register(ptr, size_, "host_register")


@api()
def host_register_v2(ptr, size_: int, flag: int) -> None:
    """ACL_HOST_REG_MAPPED and / or ACL_HOST_REG_PINNED: either way the pages become shared
    memory every device maps, which is both."""
    flag = as_int(flag, "flag")
    if not flag or flag & ~_V2_FLAGS:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"flag {flag:#x} is not an OR of ACL_HOST_REG_* flags")
    if flag & (C.ACL_HOST_REG_IOMEMORY | C.ACL_HOST_REG_READONLY):
        raise AclError(E.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "ACL_HOST_REG_IOMEMORY / _READONLY are reserved")
    pinned = _malloc_host_memory(ptr)
    if pinned is not None:
        nbytes = size(size_, "size", positive=True)
        if ptr + nbytes > pinned.ptr + pinned.size:
            raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{nbytes} bytes at {ptr:#x} overrun the aclrtMallocHost "
                           f"allocation at {pinned.ptr:#x}")
        if pinned.registered_within is None:
            pinned.registered_within = set()
        pinned.registered_within.add(ptr)
        return
    _register(ptr, size_, "host_register_v2")


def _malloc_host_memory(ptr) -> Allocation | None:
    """The aclrtMallocHost allocation ``ptr`` lies in (already pinned: registering it only
    records the range), or None."""
    alloc = rt.memory.containing(as_int(ptr, "ptr")) if ptr is not None else None
    if alloc is not None and not alloc.registered and alloc.kind == PINNED and not alloc.managed:
        return alloc
    return None


def _registered_within(ptr) -> Allocation | None:
    """The aclrtMallocHost allocation that ``ptr`` starts a host_register_v2 range in, or None."""
    alloc = _malloc_host_memory(ptr)
    return alloc if alloc is not None and ptr in (alloc.registered_within or ()) else None


def _registration(ptr) -> Allocation:
    alloc = rt.memory.containing(as_int(ptr, "ptr")) if ptr else None
    if alloc is None or not alloc.registered:
        raise AclError(E.ACL_ERROR_HOST_MEMORY_NOT_REGISTERED, f"{ptr!r} is not registered host memory")
    return alloc


@api(1)
def host_get_device_pointer(p_host, flag: int = 0) -> int:
    if as_int(flag, "flag") != 0:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "flag must be 0")
    if _registered_within(p_host) is None:
        _registration(p_host)
    return p_host


@api()
def host_unregister(ptr) -> None:
    within = _registered_within(ptr)
    if within is not None:
        within.registered_within.discard(ptr)
        return
    alloc = _registration(ptr)
    if alloc.ptr != ptr:
        raise AclError(E.ACL_ERROR_HOST_MEMORY_NOT_REGISTERED, f"{ptr:#x} is inside a registration that "
                       f"starts at {alloc.ptr:#x}")
    rt.memory.release_pinned(alloc)


@api(1)
def malloc_host_with_cfg(size_: int, cfg=None) -> int:
    """aclrtMallocHostWithCfg: pinned host memory; of the attributes only
    ACL_RT_MEM_ATTR_VA_FLAG applies to host memory (its device address is its host address
    either way on an mdev board)."""
    nbytes = size(size_, positive=True)
    for attr, value in malloc_attributes(cfg).items():
        if attr == C.ACL_RT_MEM_ATTR_VA_FLAG:
            if value not in (0, 1):
                raise AclError(E.ACL_ERROR_INVALID_PARAM, f"vaFlag must be 0 or 1, got {value}")
        elif attr != C.ACL_RT_MEM_ATTR_MODULE_ID:
            raise AclError(E.ACL_ERROR_INVALID_PARAM, f"attribute {attr} does not apply to host memory")
    return rt.memory.new_pinned(nbytes).ptr
