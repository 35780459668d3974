"""``acl.media``: pyACL's media-data-processing (DVPP) module.

Only DVPP memory is emulated -- ``dev_ptr, ret = acl.media.dvpp_malloc(size)`` and
``ret = acl.media.dvpp_free(dev_ptr)`` (see mdev.runtime.memory.dvpp for the alignment rules) --
so media programs can stage their buffers.  The image and video functions (channels,
picture descriptors, VPC, JPEG/PNG codecs, VDEC/VENC) need the media engines, which mdev
does not emulate: they return ``ACL_ERROR_API_NOT_SUPPORT`` (200001) in pyACL's return
shape (see mdev.acl.unsupported).
"""

from __future__ import annotations

from mdev.acl import unsupported as _unsupported
from mdev.runtime import boundary as _boundary
from mdev.runtime import registry as _registry

globals().update(_registry.bound("acl.media"))
_boundary.publish(globals())


def __getattr__(name: str):
    """pyACL names mdev does not emulate resolve to stubs; anything else is an AttributeError."""
    return _unsupported.resolve("media", name)
