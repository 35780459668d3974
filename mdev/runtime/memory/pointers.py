"""What the runtime knows about an address and about a process's device memory use.

    pointer_get_attributes(p)     where p lives (device / runtime host memory / not the
                                  runtime's) and its page size, from the memory table
    check_mem_type(ps, n, type)   whether every address is device (and DVPP) memory
    get_mem_usage_info(d, n)      this process's device memory on d by software module
                                  (APP = what the program allocated, RUNTIME = the AI Core
                                  stacks the runtime reserved), current and peak, largest first
"""

from __future__ import annotations

from mdev import constants as C
from mdev import errors as E
from mdev.errors import AclError
from mdev.memory import address
from mdev.runtime.boundary import api
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.memtable import DEVICE, Allocation
from mdev.runtime.validate import as_int, as_list, size

_MODULES = {33: "APP"}      # ACL_RT_MEM_ATTR_MODULE_ID values with a name of their own
_MEM_TYPES = C.ACL_RT_MEM_TYPE_DEV | C.ACL_RT_MEM_TYPE_DVPP | C.ACL_RT_MEM_TYPE_RSVD


def _address(ptr) -> int:
    ptr = as_int(ptr, "ptr")
    if not ptr:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "ptr is NULL")
    return ptr


def _holding(ptr: int) -> Allocation | None:
    """The allocation (or VMM mapping, as an allocation-like record) holding ``ptr``."""
    if address.VMM_BASE <= ptr < address.VMM_END and rt.memory.vmm is not None:
        try:
            return rt.memory.vmm.operand(ptr, 1, "ptr").allocation
        except AclError:
            return None
    return rt.memory.containing(ptr)


@api(1, failed=None)
def pointer_get_attributes(ptr) -> dict:
    """aclrtPtrAttributes as pyACL returns it: {"location": {"id", "type"}, "page_size", "rsv"}."""
    alloc = _holding(_address(ptr))
    if alloc is None:
        kind, ident, page = C.ACL_MEM_LOCATION_TYPE_UNREGISTERED, 0, address.NORMAL_PAGE
    elif alloc.kind == DEVICE:
        kind, ident, page = C.ACL_MEM_LOCATION_TYPE_DEVICE, rt.local_device(alloc.device), alloc.page
    else:
        kind, ident, page = C.ACL_MEM_LOCATION_TYPE_HOST, 0, address.NORMAL_PAGE
    return {"location": {"id": ident, "type": kind}, "page_size": page, "rsv": [0, 0, 0, 0]}


@api(1)
def check_mem_type(addr_list, size_: int, mem_type: int, reserve: int = 0) -> int:
    """aclrtCheckMemType: 1 if every address of the list is memory of the given type(s)."""
    addrs = as_list(addr_list, "addrList")[:size(size_, "size", positive=True)]
    kinds = as_int(mem_type, "memType")
    if as_int(reserve, "reserve") != 0 or not kinds or kinds & ~_MEM_TYPES or len(addrs) < size_:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "memType must be an OR of ACL_RT_MEM_TYPE_*, reserve 0, and "
                       "the list hold size addresses")

    def matches(alloc: Allocation | None) -> bool:
        if alloc is None or alloc.kind != DEVICE:
            return False
        return bool(kinds & (C.ACL_RT_MEM_TYPE_DVPP if alloc.dvpp else C.ACL_RT_MEM_TYPE_DEV))

    return int(all(matches(_holding(_address(p))) for p in addrs))


@api(1)
def get_mem_usage_info(device_id: int, input_num: int) -> list:
    """aclrtMemUsageInfo entries ({"name", "cur_mem_size", "mem_peak_size"}), at most
    ``input_num``, largest current use first."""
    device = rt.check_device(device_id)
    wanted = size(input_num, "inputNum", positive=True)
    entries = [{"name": _MODULES.get(module, f"MODULE_{module}"), "cur_mem_size": now, "mem_peak_size": peak}
               for (dev, module), (now, peak) in list(rt.memory.usage.items()) if dev == device]
    stacks = sum(ctx.stack_bytes for ctx in list(rt.contexts.values()) if ctx.device == device)
    if stacks:
        entries.append({"name": "RUNTIME", "cur_mem_size": stacks, "mem_peak_size": stacks})
    entries.sort(key=lambda e: -e["cur_mem_size"])
    return entries[:wanted]
