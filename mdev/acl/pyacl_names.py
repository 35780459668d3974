"""Every function of the real pyACL extension, and what mdev does with it: the coverage
report (``docs/pyacl_compat.md``) from pyACL's name tables (mdev.acl.unsupported) and the
functions the mdev modules define.

A name is *implemented* when the mdev module defines it; every other pyACL name resolves to
a stub that returns ``ACL_ERROR_API_NOT_SUPPORT`` (200001) with a message saying why (see
mdev.acl.unsupported).

    python -m mdev.acl.pyacl_names                 # counts per module
    python -m mdev.acl.pyacl_names --markdown      # the compatibility table (docs/pyacl_compat.md)
"""

from __future__ import annotations

import importlib
import sys
import types

from mdev.acl.unsupported import FAMILY, FUNCTIONS, PARTIAL_MODULES, STUB_MODULES, reason, stub_module
from mdev.runtime import names


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
    """"implemented" or "unsupported"."""
    return "implemented" if is_implemented(module, name) else "unsupported"


_HELPER_MODULES = ("mdev.errors", "mdev.constants", "mdev.acl.unsupported", "mdev.runtime.boundary")


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
        c = {"implemented": 0, "unsupported": 0}
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
  `warnings.simplefilter("ignore", mdev.acl.unsupported.MdevUnsupportedWarning)`).
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
    total = {k: sum(m[k] for m in c.values()) for k in ("implemented", "unsupported")}
    out = [
        "# pyACL compatibility",
        "",
        "Generated by `python -m mdev.acl.pyacl_names --markdown` from the name table in",
        "`mdev/acl/pyacl_names.py` (pyACL's own method tables, `hicann/runtime` `python/pyACL/`)",
        "and the functions mdev defines; a test keeps this file in step with the code.",
        "",
        "Status: **implemented** — mdev emulates it; "
        "**unsupported** — returns `ACL_ERROR_API_NOT_SUPPORT` (200001) with the message "
        "\"acl.&lt;mod&gt;.&lt;name&gt; is not supported by mdev (…)\".  "
        "Returns: what pyACL returns (`n + ret`: n outputs, then `ret`).",
        "",
        "| module | implemented | unsupported | total |",
        "|---|---:|---:|---:|",
    ]
    for module, m in c.items():
        out.append(f"| `acl{'.' + module if module else ''}` | {m['implemented']} | "
                   f"{m['unsupported']} | {sum(m.values())} |")
    out.append(f"| **all** | **{total['implemented']}** | "
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
    for module in PARTIAL_MODULES + STUB_MODULES:
        names = FUNCTIONS[module]
        done = [n for n in names if status(module, n) == "implemented"]
        rest = [n for n in names if n not in done]
        out += [f"## `acl.{module}`", ""]
        if done:
            out += ["Implemented: " + ", ".join(f"`{n}`" for n in done) + ".", "",
                    f"The other {len(rest)} functions are unsupported: {FAMILY[module]}.", ""]
        else:
            out += [f"All {len(names)} functions unsupported: {FAMILY[module]}.", ""]
        out += [", ".join(f"`{n}`" for n in rest), ""]
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
