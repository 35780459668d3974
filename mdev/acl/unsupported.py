"""pyACL's names that mdev does not implement: the name tables, why, and the stubs.

The name lists are pyACL's own method tables (``hicann/runtime``, ``python/pyACL/``:
``py_init_acl.cpp`` for ``acl.*``, ``rt/pyrt_methods.cpp`` for ``acl.rt.*``,
``mdl/pymdl_methods.cpp``, ``media/…``, ``op/…``, ``blas/…``, ``util/…``, ``prof/…``,
``himpi/…``, ``fv/…``), kept in ``pyacl_methods.txt``.  Each name carries the shape of
what pyACL returns, read from its ``Py_BuildValue`` call:

    "r"   ``ret`` alone                      ``ret = acl.rt.free(ptr)``
    "1".."5"  that many outputs, then ``ret``   ``ptr, ret = acl.rt.malloc(size, policy)``
    "v"   one value and no ``ret`` (a handle, size or enum; 0 when it fails)
    "s"   a string and no ``ret`` (None when it fails)
    "n"   None
    "?"   not recorded here: taken from the caller (``a, b, ret = …`` gets three items)

    acl.<mod>.<name> not defined by the mdev module --__getattr__--> resolve(mod, name)
        a pyACL name  -> a stub: records ACL_ERROR_API_NOT_SUPPORT (200001) with "acl.<mod>.<name>
                         is not supported by mdev (<why>)", warns once (MdevUnsupportedWarning),
                         returns pyACL's shape
        anything else -> AttributeError (a typo fails where it is made)

The faces import this module with themselves: a lookup from ``__del__`` while the
interpreter shuts down can import nothing.  The coverage report is mdev.acl.pyacl_names.
"""

from __future__ import annotations

import dis
import difflib
import sys
import types
import warnings
from pathlib import Path

from mdev import errors as E
from mdev.runtime.boundary import record_error

# ----------------------------------------------------------------------------- name tables
_TABLES = Path(__file__).with_name("pyacl_methods.txt")


def _sections() -> dict[str, str]:
    """The method tables' text by [section]."""
    sections: dict[str, list[str]] = {}
    current: list[str] = []
    for line in _TABLES.read_text().splitlines():
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), [])
        elif not line.startswith("#"):
            current.append(line)
    return {name: "\n".join(lines) for name, lines in sections.items()}


def _parse(text: str, extra: str = "") -> dict[str, tuple[str, str]]:
    """name -> (shape, tag); tag is "" or "USE_MDL" (or "mdev" for the RI extension)."""
    table: dict[str, tuple[str, str]] = {}
    for body, base_tag in ((text, ""), (extra, "mdev")):
        tag = base_tag
        for token in body.split():
            if token == "USE_MDL":
                tag = "USE_MDL"
                continue
            name, shape = token.split(":")
            table[name] = (shape, tag)
    return table


#: acl submodule ("" is the top level) -> {name: (shape, tag)}
_TEXT = _sections()
FUNCTIONS: dict[str, dict[str, tuple[str, str]]] = {
    module: _parse(_TEXT[module or "top"], _TEXT.get(f"{module} ri", ""))
    for module in ("", "rt", "mdl", "util", "media", "op", "blas", "prof", "himpi", "fv")
}

#: submodules mdev makes as small stub modules (every function unsupported)
STUB_MODULES = ("op", "blas", "himpi", "fv")

#: submodules mdev defines in part (the rest of pyACL's names resolve to stubs)
PARTIAL_MODULES = ("media", "prof")

# ----------------------------------------------------------------------------- why not
FAMILY = {
    "media": "the media engines (DVPP image processing, JPEG/PNG codecs, video) are not emulated",
    "himpi": "DVPP (hi_mpi) media processing is not emulated",
    "op": "single-operator compile and execution are not emulated",
    "blas": "CBLAS operators are not emulated",
    "prof": "mdev's profiler collects its timeline trace only (init, configs, start, stop, finalize)",
    "fv": "feature-vector retrieval is not emulated",
}

_DATA_BUFFERS = ("create_data_buffer", "destroy_data_buffer", "get_data_buffer_", "update_data_buffer",
                 "create_tensor_desc", "destroy_tensor_desc", "get_tensor_desc_", "set_tensor_",
                 "trans_tensor_desc_format")


def reason(module: str, name: str) -> str:
    """Why ``acl.<module>.<name>`` is not available in mdev (for messages and the table)."""
    if module in FAMILY:
        return FAMILY[module]
    if module == "mdl":
        return "offline models (.om loading, execution, AIPP, dump) are not emulated"
    if name.startswith(_DATA_BUFFERS):
        return ("data buffers and tensor descriptors are the inputs of offline-model and "
                "single-operator execution, which mdev does not emulate")
    return "not emulated"


# ----------------------------------------------------------------------------- stubs
class MdevUnsupportedWarning(UserWarning):
    """A pyACL function that mdev does not emulate was called."""


def _caller_unpack_count(frame) -> int | None:
    """How many names the caller unpacks our result into (``a, b = f()`` -> 2), if it does."""
    if frame is None:
        return None
    try:
        for ins in dis.get_instructions(frame.f_code):
            if ins.offset > frame.f_lasti:
                return ins.arg if ins.opname == "UNPACK_SEQUENCE" else None
    except Exception:  # no bytecode to look at: fall back to a bare ret
        return None
    return None


def make_stub(module: str, name: str, shape: str):
    qualified = f"acl.{module}.{name}" if module else f"acl.{name}"
    message = f"{qualified} is not supported by mdev ({reason(module, name)})"
    warned = []

    def stub(*args, **kwargs):
        code = E.ACL_ERROR_API_NOT_SUPPORT
        record_error(code, message)
        if not warned:
            warned.append(True)
            warnings.warn(message, MdevUnsupportedWarning, stacklevel=2)
        if shape == "r":
            return code
        if shape == "v":
            return 0
        if shape in ("s", "n"):
            return None
        if shape == "?":
            n = _caller_unpack_count(sys._getframe(1))
            return code if not n else (None,) * (n - 1) + (code,)
        return (None,) * int(shape) + (code,)

    stub.__name__ = stub.__qualname__ = name
    stub.__doc__ = f"{message}: returns ACL_ERROR_API_NOT_SUPPORT (200001) as pyACL's return shape."
    stub.mdev_unsupported = True
    return stub


def module_getattr(module: str):
    """A module-level ``__getattr__``: stubs for pyACL names, AttributeError for the rest."""
    table = FUNCTIONS[module]
    stubs: dict[str, types.FunctionType] = {}
    qualified = f"acl.{module}" if module else "acl"

    def __getattr__(name: str):
        if name in table:
            stub = stubs.get(name)
            if stub is None:
                stub = stubs[name] = make_stub(module, name, table[name][0])
            return stub
        hint = difflib.get_close_matches(name, list(table), n=1) if not name.startswith("__") else []
        raise AttributeError(f"module {qualified!r} has no attribute {name!r}"
                             + (f" (did you mean {hint[0]!r}?)" if hint else ""))

    return __getattr__


_getattrs: dict[str, object] = {}


def resolve(module: str, name: str):
    """What ``acl.<module>.<name>`` is when the mdev module does not define it.

    The mdev modules call this from their ``__getattr__`` (imported with them: a lookup
    from ``__del__`` at interpreter shutdown can import nothing).  At the top level it also
    yields the stub submodules.
    """
    if module == "" and name in STUB_MODULES:
        return stub_module(name)
    getter = _getattrs.get(module)
    if getter is None:
        getter = _getattrs[module] = module_getattr(module)
    return getter(name)


_stub_modules: dict[str, types.ModuleType] = {}


def stub_module(module: str) -> types.ModuleType:
    """``mdev.acl.<module>`` for a pyACL submodule none of whose functions mdev emulates
    (kept here, not only in sys.modules, which is empty while the interpreter shuts down)."""
    mod = _stub_modules.get(module)
    if mod is None:
        full = f"mdev.acl.{module}"
        mod = _stub_modules[module] = types.ModuleType(
            full, f"acl.{module}: {FAMILY[module]}; every function returns ACL_ERROR_API_NOT_SUPPORT (200001).")
        mod.__getattr__ = module_getattr(module)
        sys.modules.setdefault(full, mod)           # import mdev.acl.<module> finds it
    return mod
