"""User allocators (acl_rt_allocator.h): descriptors and their registration on streams.

    desc = allocator_create_desc()            a descriptor: allocator object + four callbacks
    allocator_set_*_to_desc(desc, ...)        (alloc, free, alloc-advise, get-address)
    allocator_register(stream, desc)          a copy of the descriptor is kept for the stream
    allocator_get_by_stream(stream)           (desc, object, alloc, free, advise, get address)
    allocator_unregister(stream)

The runtime hands a stream's workspace requests to the allocator registered on it; in the
real runtime only single-operator and dynamic-shape model execution make such requests,
and mdev emulates neither, so here the registry is what programs (and the C ABI's
callers) read back.  A callback is a Python callable, or a C function pointer (an int)
from the C face.
"""

from __future__ import annotations

from dataclasses import dataclass

from mdev import errors as E
from mdev.errors import AclError
from mdev.runtime.boundary import api
from mdev.runtime.core import RUNTIME as rt
from mdev.runtime.core import lookup


# this module's part of the runtime's state, made afresh with it (finalize, fork)
held = rt.family(
    allocators=dict,
    registered_allocators=dict,  # stream handle -> descriptor copy
)

DESC_HANDLES = 0xA1_0000_0000
_CALLBACKS = ("alloc", "free", "alloc_advise", "get_addr_from_block")


@dataclass(eq=False)
class AllocatorDesc:
    handle: int
    obj: object = None
    alloc: object = None
    free: object = None
    alloc_advise: object = None
    get_addr_from_block: object = None
    destroyed: bool = False

    def copy(self) -> tuple:
        return (self.handle, self.obj, *(getattr(self, name) for name in _CALLBACKS))


def _desc(handle) -> AllocatorDesc:
    return lookup(held.allocators, handle, "allocator descriptor", code=E.ACL_ERROR_INVALID_PARAM)


def _present(value, name: str):
    """A required pointer argument: NULL (None / 0) is ACL_ERROR_INVALID_PARAM."""
    if value is None or value == 0:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{name} is NULL")
    return value


def _callback(value, name: str):
    _present(value, name)
    if not callable(value) and not (isinstance(value, int) and not isinstance(value, bool)):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{name} must be callable (or a C function pointer)")
    return value


def allocator_create_desc() -> int:
    """A new, empty descriptor (a value, no ret: pyACL's shape)."""
    return rt.keep(held.allocators, AllocatorDesc(rt.new_handle(DESC_HANDLES)))


@api()
def allocator_destroy_desc(allocator_desc) -> None:
    """A registration keeps its own copy: a descriptor may go once registered."""
    rt.forget(held.allocators, _desc(allocator_desc))


@api()
def allocator_set_obj_to_desc(allocator_desc, allocator) -> None:
    _desc(allocator_desc).obj = _present(allocator, "allocator")


def _setter(name: str):
    def set_callback(allocator_desc, func) -> None:
        setattr(_desc(allocator_desc), name, _callback(func, "func"))
    set_callback.__name__ = set_callback.__qualname__ = f"allocator_set_{name}_func_to_desc"
    set_callback.__doc__ = f"aclrtAllocatorSet...FuncToDesc: the descriptor's {name.replace('_', ' ')} callback."
    return api()(set_callback)          # registered under its name


for _name in _CALLBACKS:
    globals()[f"allocator_set_{_name}_func_to_desc"] = _setter(_name)
del _name


def _stream(stream):
    if stream is None or stream == 0:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "stream is NULL: an allocator is registered on an explicit stream")
    return rt.stream(stream)


@api()
def allocator_register(stream, allocator_desc) -> None:
    """The later registration on a stream replaces the earlier one."""
    st = _stream(stream)
    desc = _desc(_present(allocator_desc, "allocatorDesc"))
    for name in ("obj", "alloc", "free", "get_addr_from_block"):
        _present(getattr(desc, name), f"allocatorDesc->{name}")
    with rt.lock:
        held.registered_allocators[st.handle] = desc.copy()


@api(6, failed=None)
def allocator_get_by_stream(stream) -> tuple:
    """(descriptor, allocator object, alloc, free, alloc advise, get address) registered on
    ``stream``, as they were when registered."""
    st = _stream(stream)
    registered = held.registered_allocators.get(st.handle)
    if registered is None:
        raise AclError(E.ACL_ERROR_INVALID_PARAM, "the stream is not registered with any allocator")
    return registered


@api()
def allocator_unregister(stream) -> None:
    """Unregistering a stream with no allocator (or one that no longer exists) does nothing,
    as documented."""
    with rt.lock:
        held.registered_allocators.pop(_present(stream, "stream"), None)
