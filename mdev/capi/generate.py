"""C entry points written from the prototypes, one per declared function (run at build time).

    functions.tsv --prototypes--> CFunction --entry_points()--> <face>_entries.c
        aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t* free, size_t* total)
        {
            mdev_result mdev_r;
            mdev_call(&mdev_face_acl, 190, 507899ULL, &mdev_r, "ii", "ipp", MDEV_I(attr),
                      MDEV_P(free), MDEV_P(total));
            if (mdev_r.stored && mdev_r.ret == 0) {
                *free = (size_t)mdev_r.out[0];
                *total = (size_t)mdev_r.out[1];
            }
            return (aclError)mdev_r.ret;
        }

Every argument is passed (outputs as addresses too, so the adapter can refuse a NULL one);
the adapter returns ``ret`` or ``(free, total, ret)``, and the entry point stores the values
through the output parameters in their own C types.

A function with a spec (mdev.capi.asynchronous.spec) carries it in the face's table: under the
host agent its calls may return once libmdev_client.so has checked them against the agent's
grants.  The file includes the face's own headers, so the compiler checks every definition against
its declaration: a drifting prototype fails the build instead of breaking the ABI.  A
variadic function (``aclAppLog``) passes its printf-style text as one more string.  The
output is never committed: ``mdev cann-home`` writes it next to the library it builds.

A face is (its C functions, the Python module that implements them, the headers that
declare them): ``libascendcl.so`` is the "acl" face, ``libhccl.so`` the "hccl" face, both over
``mdev.capi.adapter`` and the same loader.  An entry point that Python cannot run returns its
library's internal error (ACL_ERROR_RT_INTERNAL_ERROR, HCCL_E_INTERNAL).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

from mdev.capi import asynchronous, channel, nnopbase
from mdev.capi.failures import STATUS_TYPES
from mdev.capi.prototypes import CFunction, CType, Param

_MACRO = {"i": "MDEV_I", "u": "MDEV_U", "f": "MDEV_F", "p": "MDEV_P", "s": "MDEV_S", "b": "MDEV_B"}


@dataclass(frozen=True)
class Face:
    name: str                      # C identifier of the face ("acl")
    module: str                    # Python module with entry(c_name)
    headers: tuple[str, ...]       # what the entry points' file includes
    functions: tuple[CFunction, ...]
    # per function: (C lines before the call, their extra argument letters, the arguments),
    # or None: what a face sends beyond the prototype's arguments (libopapi.so: descriptors)
    extra: Callable[[CFunction], tuple[list[str], str, list[str]] | None] | None = None


def _fail_value(ret: CType) -> str:
    """What an entry point returns when Python cannot run it."""
    if ret.base in STATUS_TYPES and not ret.stars:
        return f"{STATUS_TYPES[ret.base].internal}ULL"
    return "0ULL"


def _returned(ret: CType, value: str) -> str:
    """The C return value from ``value`` (the uint64_t the adapter gave)."""
    if ret.stars or ret.passing == "p":
        return f"({ret.spelling})(uintptr_t){value}"
    if ret.passing == "f":
        return f"mdev_float({value})"
    return f"({ret.spelling}){value}"


def _store(p: Param, k: int) -> str:
    """``*param = k-th returned value``, in the pointee's own type."""
    pointee = p.type.pointee()
    if pointee.passing == "f":
        value = f"mdev_double(mdev_r.out[{k}])"
    elif pointee.stars or pointee.passing == "p":
        value = f"(uintptr_t)mdev_r.out[{k}]"
    else:
        value = f"mdev_r.out[{k}]"
    return f"        *{p.name} = ({pointee.spelling}){value};"


def entry_point(face: str, index: int, fn: CFunction, extra: tuple[list[str], str, list[str]] | None = None) -> str:
    letters = "".join(p.type.passing for p in fn.params)
    args = [f"{_MACRO[p.type.passing]}({p.name})" for p in fn.params]
    outputs = fn.outputs
    kinds = "".join("f" if p.type.pointee().passing == "f" else "i" for p in outputs)
    lines = [fn.declaration, "{", "    mdev_result mdev_r;"]
    if extra is not None:
        lines += extra[0]
        letters += extra[1]
        args += extra[2]
    if fn.variadic:
        last = fn.params[-1].name
        lines += ["    va_list mdev_args;", f"    va_start(mdev_args, {last});",
                  f"    char* mdev_text = mdev_format({last}, mdev_args);", "    va_end(mdev_args);"]
        letters += "s"
        args.append("mdev_text")
    lines.append(f"    mdev_call(&mdev_face_{face}, {index}, {_fail_value(fn.ret)}, &mdev_r, \"{kinds}\", \"{letters}\""
                 + "".join(f", {a}" for a in args) + ");")
    if fn.variadic:
        lines.append("    free(mdev_text);")
    if outputs:
        lines.append("    if (mdev_r.stored && mdev_r.ret == 0) {")
        lines += [_store(p, k) for k, p in enumerate(outputs)]
        lines.append("    }")
    if not fn.ret.is_void:
        lines.append(f"    return {_returned(fn.ret, 'mdev_r.ret')};")
    lines.append("}")
    return "\n".join(lines)


def entry_points(face: Face) -> str:
    """The C source of every entry point of ``face``."""
    names = ",\n".join(f"    {json.dumps(fn.name)}" for fn in face.functions)
    specs = ",\n".join(f"    {json.dumps(asynchronous.table_spec(fn.name, len(fn.params), bool(fn.outputs)))}"
                       if asynchronous.table_spec(fn.name, len(fn.params), bool(fn.outputs)) else "    NULL"
                       for fn in face.functions)
    count = len(face.functions)
    parts = [
        f"/* Generated by mdev.capi.generate for the {face.name!r} face ({face.module}): do not edit. */",
        "#include <stdlib.h>",
        *(f'#include "{h}"' for h in face.headers),
        '#include "mdev_embed.h"',
        "",
        '#pragma GCC diagnostic ignored "-Wdeprecated-declarations"',
        f"static const char* const mdev_names_{face.name}[{count}] = {{\n{names}\n}};",
        f"static void* mdev_entries_{face.name}[{count}];",
        f"static const char* const mdev_specs_{face.name}[{count}] = {{\n{specs}\n}};",
        f"static mdev_face mdev_face_{face.name} = {{{json.dumps(face.module)}, mdev_names_{face.name}, "
        f"{count}, mdev_entries_{face.name}, mdev_specs_{face.name}}};",
        "",
    ]
    parts += [entry_point(face.name, i, fn, face.extra(fn) if face.extra else None) + "\n"
              for i, fn in enumerate(face.functions)]
    return "\n".join(parts)


def config_header(python: str, root: str) -> str:
    """mdev_config.h: the interpreter the library embeds (and the agent runs), where mdev's
    package lives, and the layout of the agent's channel (mdev.capi.channel)."""
    return ("/* Generated by mdev cann-home: the Python that libmdev_embed.so and the host agent run. */\n"
            f"#define MDEV_PYTHON {json.dumps(python)}\n#define MDEV_ROOT {json.dumps(root)}\n"
            + channel.c_defines() + nnopbase.c_defines())
