"""Every API function of the runtime, and where each face presents it.

    @api (mdev.runtime.boundary) --> boundary.REGISTRY[module][name] = fn   as a module loads
    entries() loads every module of mdev.runtime (sub-packages too): the registry is whole
    pyACL face (mdev.acl, mdev.hccl) --bound(face)--> its names, bound to their codes
    C face (mdev.capi.adapter) -------c_table()----> (C group, name) -> implementation

A module's functions are pyACL's ``acl.rt`` and the C group "rt" (``aclrt*``) unless
``PLACES`` puts them elsewhere; the C names follow mdev.runtime.names.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from dataclasses import dataclass
from typing import Callable

import mdev.runtime
from mdev.runtime import boundary

# module -> (pyACL module, C group, prefix of its names in both)
PLACES = {
    "mdev.runtime.devices.lifecycle": ("acl", "", ""),
    "mdev.runtime.devices.sysinfo": ("acl", "", ""),
    "mdev.runtime.execution.models": ("acl.mdl", "mdl", "ri_"),
    "mdev.runtime.memory.dvpp": ("acl.media", "rt", ""),
    "mdev.runtime.devices.threads": ("acl.util", "rt", ""),
    "mdev.runtime.collectives.api": ("hccl", "hccl", ""),
    "mdev.runtime.profiling": ("acl.prof", "prof", ""),
    "mdev.runtime.execution.operators": ("aclnn", "", ""),
}
DEFAULT_PLACE = ("acl.rt", "rt", "")


@dataclass(frozen=True)
class Entry:
    name: str           # as both faces spell it (snake_case, with its place's prefix)
    fn: Callable
    face: str           # the pyACL module presenting it
    group: str          # its C group (mdev.runtime.names)


_entries: list[Entry] = []
_building = threading.Lock()       # faces imported from two threads at once build it once


def entries() -> list[Entry]:
    """Every ``@api`` function of mdev.runtime, loading the modules that define them."""
    if not _entries:
        with _building:
            if not _entries:
                for info in pkgutil.walk_packages(mdev.runtime.__path__, "mdev.runtime."):
                    importlib.import_module(info.name)
                built = []
                for module, functions in boundary.REGISTRY.items():
                    face, group, prefix = PLACES.get(module, DEFAULT_PLACE)
                    built += [Entry(prefix + name, fn, face, group) for name, fn in functions.items()]
                _entries[:] = built         # whole: a reader without the lock sees none or all
    return _entries


def bound(face: str, codes: boundary.Codes = boundary.ACL) -> dict[str, Callable]:
    """name -> bound function, for every API function pyACL module ``face`` presents."""
    return {e.name: boundary.bind(e.fn, *e.fn.api_shape, codes=codes) for e in entries() if e.face == face}


def c_table() -> dict[tuple[str, str], Callable]:
    """(C group, name) -> implementation, for the C face."""
    table = {}
    for e in entries():
        if (e.group, e.name) in table:
            raise RuntimeError(f"{(e.group, e.name)} is implemented twice: {table[e.group, e.name].__module__}, "
                               f"{e.fn.__module__}")
        table[e.group, e.name] = e.fn
    return table
