"""Managed (unified) memory, as the A2 / A3 parts document it: one address the host and every
device use, with advice and prefetches that tune where its pages live.

    mem_alloc_managed(n, ACL_RT_MEM_ATTACH_GLOBAL)   pinned host memory (a shared segment every
                                                     device maps): the host reads and writes it
                                                     in place, kernels and copies reach it at
                                                     the same address; aclrtFree releases it
    mem_managed_advise(p, n, advice, location)      checked, then recorded: every page of an
    mem_managed_prefetch_async(p, n, location, ..)  mdev board is resident for host and devices
                                                     alike, so placement changes no result and
                                                     no modelled time

Only ACL_RT_MEM_ATTACH_GLOBAL is documented for the flag.
"""

from __future__ import annotations

from mdev import constants as C
from mdev import errors as E
from mdev.errors import AclError
from mdev.runtime.boundary import api
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.memtable import Allocation
from mdev.runtime.validate import as_int, size

_ADVICE = range(C.ACL_MEM_ADVISE_SET_READ_MOSTLY, C.ACL_MEM_ADVISE_UNSET_ACCESSED_BY + 1)
_LOCATIONS = (C.ACL_MEM_LOCATIONTYPE_DEVICE, C.ACL_MEM_LOCATIONTYPE_HOST)


@api(1)
def mem_alloc_managed(size_: int, flag: int) -> int:
    nbytes = size(size_, "size", positive=True)
    if as_int(flag, "flag") != C.ACL_RT_MEM_ATTACH_GLOBAL:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"flag must be ACL_RT_MEM_ATTACH_GLOBAL, got {flag!r}")
    rt.current_context()
    alloc = rt.memory.new_pinned(nbytes)
    alloc.managed = True
    return alloc.ptr


def _range(ptr, size_: int) -> Allocation:
    ptr = as_int(ptr, "ptr")
    nbytes = size(size_, "size", positive=True)
    alloc = rt.memory.containing(ptr) if ptr else None
    if alloc is None or not alloc.managed:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{ptr:#x} is not managed memory (aclrtMemAllocManaged)")
    if ptr + nbytes > alloc.ptr + alloc.size:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{nbytes} bytes at {ptr:#x} overrun the managed allocation")
    return alloc


def _location(location) -> tuple[int, int]:
    """aclrtMemManagedLocation: {"type", "id"}, a (type, id) pair, or its 8 bytes (C)."""
    if isinstance(location, (bytes, bytearray)):
        kind, ident = int.from_bytes(location[:4], "little"), int.from_bytes(location[4:8], "little", signed=True)
    elif isinstance(location, dict):
        kind, ident = as_int(location.get("type"), "location.type"), as_int(location.get("id", 0), "location.id")
    else:
        kind, ident = (as_int(v, "location") for v in location)
    if kind not in _LOCATIONS:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"location type {kind} is neither DEVICE nor HOST")
    if kind == C.ACL_MEM_LOCATIONTYPE_DEVICE and not 0 <= ident < rt.device_count():
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"no device {ident}")
    return kind, ident


@api()
def mem_managed_advise(ptr, size_: int, advise: int, location) -> None:
    _range(ptr, size_)
    if as_int(advise, "advise") not in _ADVICE:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"unknown advice {advise}")
    _location(location)


@api()
def mem_managed_prefetch_async(ptr, size_: int, location, flags: int, stream) -> None:
    _range(ptr, size_)
    _location(location)
    if as_int(flags, "flags") != 0:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "flags must be 0")
    rt.stream_in_context(stream)
