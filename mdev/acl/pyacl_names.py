"""Every function of the real pyACL extension, and what mdev does with it.

The name lists are pyACL's own method tables (``hicann/runtime``, ``python/pyACL/``:
``py_init_acl.cpp`` for ``acl.*``, ``rt/pyrt_methods.cpp`` for ``acl.rt.*``,
``mdl/pymdl_methods.cpp``, ``media/…``, ``op/…``, ``blas/…``, ``util/…``, ``prof/…``,
``himpi/…``, ``fv/…``).  Each name carries the shape of what pyACL returns, read from its
``Py_BuildValue`` call:

    "r"   ``ret`` alone                      ``ret = acl.rt.free(ptr)``
    "1".."5"  that many outputs, then ``ret``   ``ptr, ret = acl.rt.malloc(size, policy)``
    "v"   one value and no ``ret`` (a handle, size or enum; 0 when it fails)
    "s"   a string and no ``ret`` (None when it fails)
    "n"   None
    "?"   not recorded here: taken from the caller (``a, b, ret = …`` gets three items)

A name is *implemented* when the mdev module defines it.  Any other pyACL name resolves,
through the module's ``__getattr__``, to a stub that records ``ACL_ERROR_API_NOT_SUPPORT``
(200001) with the message "acl.<mod>.<name> is not supported by mdev (<why>)", warns once
(``MdevUnsupportedWarning``) and returns pyACL's shape.  A name pyACL does not have raises
AttributeError, so a typo still fails where it is made.

    python -m mdev.acl.pyacl_names --markdown      # the compatibility table (docs/pyacl_compat.md)
"""

from __future__ import annotations

import dis
import difflib
import importlib
import sys
import types
import warnings
from pathlib import Path

from mdev.runtime import names

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
STUB_MODULES = ("media", "op", "blas", "prof", "himpi", "fv")

# ----------------------------------------------------------------------------- why not
_FAMILY = {
    "media": "DVPP / JPEG / video codecs are not emulated",
    "himpi": "DVPP (hi_mpi) media processing is not emulated",
    "op": "single-operator compile and execution are not emulated",
    "blas": "CBLAS operators are not emulated",
    "prof": "the profiler is not emulated",
    "fv": "feature-vector retrieval is not emulated",
}

# (prefix or exact name, reason) tried in order for acl.rt and the top level
_RT_REASONS = [
    (("binary_", "create_binary", "destroy_binary", "get_function_", "register_cpu_func",
      "launch_kernel", "kernel_args_"), "this part of the kernel API is not emulated yet"),
    (("get_device_res_limit", "set_device_res_limit", "reset_device_res_limit",
      "get_stream_res_limit", "set_stream_res_limit", "reset_stream_res_limit",
      "use_stream_res_in_current_thread", "unuse_stream_res_in_current_thread",
      "get_res_in_current_thread"), "this resource-limit function is not emulated yet"),
    (("reserve_mem_address", "release_mem_address", "malloc_physical", "free_physical",
      "map_mem", "unmap_mem", "mem_export_to_shareable_handle", "mem_set_pid_to_shareable_handle",
      "mem_import_from_shareable_handle", "mem_get_allocation_granularity"),
     "virtual memory management (VMM) is planned (issue 6)"),
    (("ipc_mem_", "notify_get_export_key", "notify_set_import_pid", "notify_import_by_key"),
     "IPC is planned (issue 6)"),
    (("allocator_",), "external allocators are not emulated"),
    (("set_group", "get_group_count", "create_group_info", "destroy_group_info",
      "get_all_group_info", "get_group_info_detail"), "AI Core groups are not emulated"),
    (("get_mem_uce_info", "mem_uce_repair"), "HBM UCE errors are not emulated"),
    (("set_device_sat_mode", "get_device_sat_mode", "get_overflow_status", "reset_overflow_status",
      "set_stream_overflow_switch", "get_stream_overflow_switch"),
     "floating-point overflow detection is not emulated"),
    (("host_register", "host_unregister", "host_get_device_pointer"),
     "host memory registration is not emulated yet"),
    (("create_data_buffer", "destroy_data_buffer", "get_data_buffer_", "update_data_buffer",
      "data_type_size", "create_tensor_desc", "destroy_tensor_desc", "get_tensor_desc_",
      "set_tensor_", "trans_tensor_desc_format"),
     "data buffers and tensor descriptors (for model and operator execution) are not emulated"),
    (("get_cann_", "get_version_str"), "there is no CANN package to query"),
]


def reason(module: str, name: str) -> str:
    """Why ``acl.<module>.<name>`` is not available in mdev (for messages and the table)."""
    if module in _FAMILY:
        return _FAMILY[module]
    if module == "mdl":
        if FUNCTIONS["mdl"].get(name, ("", ""))[1] == "mdev":
            return "this model-run-instance function is not emulated yet"
        return "offline models (.om loading, execution, AIPP, dump) are not emulated"
    for prefixes, why in _RT_REASONS:
        if name.startswith(prefixes):
            return why
    return "not emulated yet"


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
        from mdev import errors as E
        from mdev.runtime.boundary import record_error

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

    The mdev modules call this from their ``__getattr__`` (lazily, so importing mdev.acl
    does not import this table).  At the top level it also yields the stub submodules.
    """
    if module == "" and name in STUB_MODULES:
        return stub_module(name)
    getter = _getattrs.get(module)
    if getter is None:
        getter = _getattrs[module] = module_getattr(module)
    return getter(name)


def stub_module(module: str) -> types.ModuleType:
    """``mdev.acl.<module>`` for a pyACL submodule none of whose functions mdev emulates."""
    full = f"mdev.acl.{module}"
    mod = sys.modules.get(full)
    if mod is None:
        mod = types.ModuleType(full, f"acl.{module}: {_FAMILY[module]}; every function returns "
                                     "ACL_ERROR_API_NOT_SUPPORT (200001).")
        mod.__getattr__ = module_getattr(module)
        sys.modules[full] = mod
        setattr(sys.modules["mdev.acl"], module, mod)
    return mod


# ----------------------------------------------------------------------------- status
def mdev_module(module: str) -> types.ModuleType:
    if module in STUB_MODULES:
        importlib.import_module("mdev.acl")
        return stub_module(module)
    return importlib.import_module("mdev.acl" + (f".{module}" if module else ""))


def is_implemented(module: str, name: str) -> bool:
    value = vars(mdev_module(module)).get(name)
    return callable(value) and not isinstance(value, types.ModuleType) \
        and not getattr(value, "mdev_unsupported", False)


def status(module: str, name: str) -> str:
    """"implemented", "planned" (a later issue) or "unsupported"."""
    if is_implemented(module, name):
        return "implemented"
    return "planned" if "planned" in reason(module, name) else "unsupported"


_HELPER_MODULES = ("mdev.errors", "mdev.constants", "mdev.acl.pyacl_names", "mdev.runtime.boundary")


def extensions(module: str) -> list[str]:
    """Public functions mdev's module has that pyACL's does not."""
    mod = mdev_module(module)
    table = FUNCTIONS[module]
    names = []
    for name, value in vars(mod).items():
        if name.startswith("_") or name in table or isinstance(value, (types.ModuleType, type)):
            continue
        origin = getattr(value, "__module__", "") or ""
        if callable(value) and origin.startswith("mdev.") and origin not in _HELPER_MODULES:
            names.append(name)
    return sorted(names)


def counts() -> dict[str, dict[str, int]]:
    result = {}
    for module, table in FUNCTIONS.items():
        c = {"implemented": 0, "planned": 0, "unsupported": 0}
        for name, (_, tag) in table.items():
            if tag != "mdev":
                c[status(module, name)] += 1
        result[module] = c
    return result


# ----------------------------------------------------------------------------- C names
c_name = names.c_name          # the shared naming rule (mdev.runtime.names)


# ----------------------------------------------------------------------------- markdown
_SHAPE_TEXT = {"r": "`ret`", "v": "value", "s": "str", "n": "None", "?": "—"}

_DIFFERENCES = """\
## Differences that remain

* **Bad arguments.** pyACL's argument parser raises `TypeError`/`ValueError` for arguments
  of the wrong type or number; mdev returns `ACL_ERROR_INVALID_PARAM` (100000) and records a
  message (`acl.get_recent_err_msg()`), like every other failure.  `acl.util` helpers raise,
  as pyACL's do.
* **`None` as a handle.** mdev accepts `None` as the default stream wherever pyACL takes `0`.
* **Unsupported functions are attributes.** Every pyACL name resolves (`hasattr` is True), but
  `dir(acl.<mod>)` lists only what mdev implements, so the samples' probe
  `"bytes_to_ptr" in dir(acl.util)` reflects what works.  Calling an unsupported function
  returns `ACL_ERROR_API_NOT_SUPPORT` (200001) in pyACL's return shape (outputs `None`, or 0
  / `None` for functions without `ret`), sets the thread's last error and message, and
  warns once with `MdevUnsupportedWarning` (silence it with
  `warnings.simplefilter("ignore", mdev.acl.pyacl_names.MdevUnsupportedWarning)`).
* **Integer widths.** pyACL narrows some outputs in `Py_BuildValue` (`get_device_info` and
  `get_devices_topo` to 32 bits); mdev returns the full value.
* **Threads.** `acl.util.start_thread` starts a Python `threading.Thread`; `stop_thread`
  joins it (the function must return, e.g. when its loop flag is cleared), as pyACL's does.
* **Pointers.** Device addresses are integers above 2^48 and never collide with host
  addresses; host pointers from `bytes_to_ptr`/`numpy_to_ptr` are real addresses of the
  process, as in pyACL.
* **Model run instances / capture (`acl.mdl.ri_*`).** Not part of pyACL's method table (pyACL
  has no `aclmdlRI*` wrappers); mdev puts them under `acl.mdl`, named by pyACL's rule with
  "RI" as one word (`aclmdlRICaptureBegin` -> `acl.mdl.ri_capture_begin`).  They are listed
  in the `acl.mdl` table but not counted above.  Each is also available under its full
  snake_case name (`acl.mdl.mdl_ri_capture_begin`), and `aclrtActiveStream` (starting a
  non-head stream of a built model) is `acl.rt.active_stream`.
"""


def markdown() -> str:
    c = counts()
    total = {k: sum(m[k] for m in c.values()) for k in ("implemented", "planned", "unsupported")}
    out = [
        "# pyACL compatibility",
        "",
        "Generated by `python -m mdev.acl.pyacl_names --markdown` from the name table in",
        "`mdev/acl/pyacl_names.py` (pyACL's own method tables, `hicann/runtime` `python/pyACL/`)",
        "and the functions mdev defines; a test keeps this file in step with the code.",
        "",
        "Status: **implemented** — mdev emulates it; **planned** — a later issue will; "
        "**unsupported** — returns `ACL_ERROR_API_NOT_SUPPORT` (200001) with the message "
        "\"acl.&lt;mod&gt;.&lt;name&gt; is not supported by mdev (…)\".  "
        "Returns: what pyACL returns (`n + ret`: n outputs, then `ret`).",
        "",
        "| module | implemented | planned | unsupported | total |",
        "|---|---:|---:|---:|---:|",
    ]
    for module, m in c.items():
        out.append(f"| `acl{'.' + module if module else ''}` | {m['implemented']} | {m['planned']} | "
                   f"{m['unsupported']} | {sum(m.values())} |")
    out.append(f"| **all** | **{total['implemented']}** | **{total['planned']}** | "
               f"**{total['unsupported']}** | **{sum(total.values())}** |")
    out.append("")
    out.append(_DIFFERENCES)
    for module in ("", "rt", "util", "mdl"):
        label = "acl" + (f".{module}" if module else "")
        out += [f"## `{label}`", "", "| function | C API | returns | status | notes |", "|---|---|---|---|---|"]
        for name, (shape, tag) in FUNCTIONS[module].items():
            st = status(module, name)
            parts = [{"USE_MDL": "only in USE_MDL builds", "mdev": "not in pyACL (mdev extension)"}.get(tag, ""),
                     "" if st == "implemented" else reason(module, name)]
            note = "; ".join(p for p in parts if p)
            returns = _SHAPE_TEXT.get(shape) or f"{shape} + `ret`"
            cname = c_name(module, name)
            out.append(f"| `{label}.{name}` | {f'`{cname}`' if cname else ''} | {returns} | {st} | {note} |")
        ext = extensions(module)
        if ext:
            out += ["", f"mdev extensions in `{label}` (not in pyACL): "
                    + ", ".join(f"`{n}`" for n in ext) + "."]
        out.append("")
    for module in STUB_MODULES:
        names = FUNCTIONS[module]
        out += [f"## `acl.{module}`", "",
                f"All {len(names)} functions unsupported: {_FAMILY[module]}.", "",
                ", ".join(f"`{n}`" for n in names), ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m mdev.acl.pyacl_names",
                                     description="pyACL function table and mdev's coverage of it")
    parser.add_argument("--markdown", action="store_true", help="print the compatibility table")
    args = parser.parse_args(argv)
    if args.markdown:
        sys.stdout.write(markdown())
    else:
        for module, m in counts().items():
            print(f"acl{'.' + module if module else '':<7} {m}")
    return 0


if __name__ == "__main__":
    # run the copy mdev.acl uses, not this __main__ one (their stubs and classes must agree)
    from mdev.acl import pyacl_names as _canonical
    sys.exit(_canonical.main())
