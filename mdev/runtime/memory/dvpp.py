"""DVPP memory: ``acldvppMalloc`` / ``acldvppFree`` (pyACL's ``acl.media.dvpp_malloc`` /
``dvpp_free``).

The media engines themselves (JPEG, VPC, video codecs) are not emulated; their buffers are.
A DVPP buffer is ordinary device memory of the current device with the media engines'
rules: huge pages (so its start is 128-byte aligned, as the engines need), the size
rounded up to 32 bytes plus 32 (ALIGN_UP[len,32]+32, as acldvppMalloc documents), and the
DVPP memory type (``aclrtCheckMemType`` with ACL_RT_MEM_TYPE_DVPP).  Kernels, copies and
model inputs use it like any device memory.
"""

from __future__ import annotations

from mdev import constants as C
from mdev import errors as E
from mdev.errors import AclError
from mdev.runtime.memory import memops
from mdev.runtime.boundary import api
from mdev.runtime.memtable import DEVICE


@api(1)
def dvpp_malloc(size_: int) -> int:
    return memops.allocate(size_, C.ACL_MEM_MALLOC_HUGE_ONLY, dvpp=True).ptr


@api()
def dvpp_free(dev_ptr: int) -> None:
    """acldvppFree: memory from acldvppMalloc (aclrtMalloc's is freed with aclrtFree)."""
    alloc = memops.to_free(dev_ptr, DEVICE, "devPtr", "DVPP allocation")
    if not alloc.dvpp:
        raise AclError(E.ACL_ERROR_RT_PARAM_INVALID,
                       f"{alloc.ptr:#x} was not allocated by acldvppMalloc: free it with aclrtFree")
    memops.release(alloc)
