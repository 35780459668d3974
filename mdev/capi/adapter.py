"""The C face: every C entry point of libascendcl.so and libhccl.so as a Python callable over
mdev.runtime (as mdev.runtime.registry places them: HCCL's, of mdev.runtime.collectives.api, in
group "hccl").

    C program --> aclrtMalloc(&ptr, size, policy)                    (generated entry point)
      --> the host agent (or libmdev_embed.so): ints / bytes --> entry("aclrtMalloc")(ptr_addr, size, policy)
      --> NULL output? 100000 and a message, before anything is done
      --> inputs converted (strings; structures and C callbacks by mdev.capi.special)
      --> the runtime implementation, bound (mdev.runtime.boundary): errors become codes,
          the thread's last error and messages are set
      <-- ret, or (values..., ret): the entry point stores the values through the caller's
          output pointers (as pyACL returns outputs first, then ret)

Which implementation a C function has follows the shared naming rule (mdev.runtime.names:
aclrtMalloc -> memops.malloc, aclmdlRIBuildBegin -> models.build_begin).  Most functions
are marshalled from their prototype alone: numbers and pointers pass as ints, ``const
char*`` as str, and a non-const pointer to a number or handle is an output
(mdev.capi.prototypes), one per value the implementation returns; a structure or callback
argument takes the conversion mdev.capi.special names for it.  Functions that need more
(strings or structures to return, arrays) have a hand-written adapter there.  A function
with neither returns ACL_ERROR_API_NOT_SUPPORT (200001) -- an HCCL one HCCL_E_NOT_SUPPORT (5)
-- and a message naming it.  Failures are in the codes of the function's library
(mdev.capi.failures.codes_of); libhccl.so's hand-written adapters are mdev.capi.hccl_special,
libnnopbase.so's mdev.capi.nnopbase, libmsprofiler.so's mdev.capi.prof_special; libopapi.so's
functions are mdev.capi.opapi's.
"""

from __future__ import annotations

import inspect
from typing import Callable

from mdev import sanitizer as _sanitizer  # noqa: F401  (MDEV_SANITIZE turns it on at attach / init)
from mdev.capi import hccl_special, nnopbase, op_compiler, opapi, prof_special, special  # noqa: F401  (adapters)
from mdev.capi.failures import codes_of, null_output, returns_status, unsupported
from mdev.capi.prototypes import CFunction, Param, by_name
from mdev.runtime import boundary, names, registry

def implementation(cname: str, table: dict) -> Callable | None:
    """The runtime function behind C function ``cname``: the same group and name, or the same
    name in the other of acl*/aclrt* when the headers do not declare both spellings."""
    group, name = names.snake_name(cname)
    fn = table.get((group, name))
    if fn is None and group in ("", "rt"):
        other = "rt" if group == "" else ""
        if names.c_name(other, name) not in by_name():
            fn = table.get((other, name))
    return fn


# ---------------------------------------------------------------------------- marshalling
class NotMarshallable(Exception):
    """The prototype alone does not say how to call the implementation."""


def _input(fn: CFunction, p: Param) -> Callable | None:
    """How an argument as the C side passes it becomes the implementation's argument."""
    t = p.type
    if (fn.name, p.name) in special.CONVERSIONS:
        return special.CONVERSIONS[fn.name, p.name]
    if t.passing == "s":
        return special.string
    if not t.stars and t.typedef is not None and t.typedef.kind == "function":
        raise NotMarshallable(f"{p.name} is a C callback ({t.spelling})")
    if t.passing == "b" or (t.stars and t.base not in ("void", "char") and t.pointee().scalar is None):
        raise NotMarshallable(f"{p.name} is a structure ({t.spelling})")
    return None


def marshalled(fn: CFunction, impl: Callable) -> Callable:
    """The entry point of ``fn`` over ``impl`` from the prototype (NotMarshallable if it cannot).

    It returns what the bound implementation returns, ``ret`` or ``(values..., ret)``: the
    C entry point stores the values through its output parameters."""
    if not returns_status(fn):
        raise NotMarshallable(f"returns {fn.ret.spelling}")
    outputs = [(i, p.name) for i, p in enumerate(fn.params) if p.is_output]
    inputs = [(i, _input(fn, p)) for i, p in enumerate(fn.params) if not p.is_output]
    n_out, failed = impl.api_shape
    if n_out != len(outputs):
        raise NotMarshallable(f"{len(outputs)} output pointers, the implementation returns {n_out} values")
    try:
        inspect.signature(impl).bind(*(None for _ in inputs))
    except TypeError as exc:
        raise NotMarshallable(f"inputs do not fit {impl.__name__}: {exc}") from None
    bound = boundary.bind(impl, n_out, failed, codes_of(fn))
    if not outputs and all(convert is None for _, convert in inputs):
        return bound                       # the C arguments are the implementation's arguments
    pick = [i for i, _ in inputs]
    converting = [(k, i, convert) for k, (i, convert) in enumerate(inputs) if convert is not None]

    def call(*args):
        for i, name in outputs:
            if not args[i]:
                return null_output(fn, name)
        values = [args[i] for i in pick]
        for k, i, convert in converting:
            values[k] = convert(args[i])
        return bound(*values)

    call.__name__ = fn.name
    return call


# ---------------------------------------------------------------------------- entry points
_IMPLEMENTATIONS: dict | None = None


def build(cname: str) -> Callable:
    """The Python callable behind C function ``cname`` (what :func:`entry` hands the library)."""
    global _IMPLEMENTATIONS
    if _IMPLEMENTATIONS is None:
        _IMPLEMENTATIONS = registry.c_table()
    if cname in opapi.by_name():
        return opapi.adapter(cname)
    fn = by_name()[cname]
    if cname in special.ADAPTERS:
        return special.ADAPTERS[cname](fn, implementation(cname, _IMPLEMENTATIONS))
    impl = implementation(cname, _IMPLEMENTATIONS)
    if impl is None:
        return unsupported(fn, "not emulated yet")
    try:
        return marshalled(fn, impl)
    except NotMarshallable as exc:
        return unsupported(fn, f"the C adapter cannot pass its arguments yet: {exc}")


def entry(cname: str) -> Callable:
    """Called once per C function by the host agent's thread for a C thread (or by
    libmdev_embed.so), on the function's first call."""
    return build(cname)
