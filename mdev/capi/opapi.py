"""libopapi.so: the operator library's C functions, written from mdev/operators.py's signatures.

    Operator("Add", "self, other, alpha:scalar, out:out", ...)
        --> aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor* self, const aclTensor* other,
                const aclScalar* alpha, aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor)
            -> mdev.runtime.execution.operators.operator_get_workspace_size("Add", handles and values...)
        --> aclnnStatus aclnnAdd(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                aclrtStream stream)
            -> mdev.runtime.execution.operators.operator_run: one operator task on the stream

``functions()`` are the prototypes (the generator writes their entry points);
``op_headers()`` declares them as the CANN tree does, one header per op family
(aclnnop/aclnn_add.h: aclnnAdd, aclnnAdds, aclnnInplaceAdd, aclnnInplaceAdds), and
``header()``, aclnnop/aclnn_ops.h, includes them all; ``adapter(cname)`` is the Python
callable behind one.  Every other name torch_npu can call (aclnn_names.txt) is exported too,
without parameters: it answers ACLNN_ERR_INNER_FIND_KERNEL_ERROR (561003) and a message
naming the op, so a framework fails loudly at GetWorkspaceSize instead of falling back to
the aclop path, which mdev does not have.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path

from mdev.capi import local, nnopbase, signatures, special
from mdev.capi.failures import null_output, unsupported
from mdev.capi.prototypes import CFunction, Param, parse_type
from mdev.operators import BOOL, DTYPE, FLOAT, INT, OPERATORS, STR, Operator
from mdev.runtime import boundary
from mdev.runtime.execution import operators

HEADER = "aclnnop/aclnn_ops.h"          # mdev's ops, in the tree's include/
MISSING_HEADER = "aclnnop/aclnn_missing.h"     # the names it lacks (the build's only: not for programs)
_NAMES = Path(__file__).resolve().parent / "aclnn_names.txt"
_GWS = "GetWorkspaceSize"
VALUES = (INT, FLOAT, BOOL, DTYPE, STR)       # parameters passed by value (the others are descriptors)
PACK_BYTES = 16384                            # descriptors an op's call brings with it (else they are read)
_STATUS = parse_type("aclnnStatus")


def _run_prototype(name: str) -> CFunction:
    params = (("workspace", "void*"), ("workspaceSize", "uint64_t"), ("executor", "aclOpExecutor*"),
              ("stream", "aclrtStream"))
    return CFunction("aclnn" + name, _STATUS, tuple(Param(n, parse_type(t)) for n, t in params), False, HEADER)


def _gws_prototype(op: Operator) -> CFunction:
    params = [Param(name, parse_type(c_type)) for (name, _), c_type in zip(op.params, op.c_types)]
    params += [Param("workspaceSize", parse_type("uint64_t*")),
               Param("executor", parse_type("aclOpExecutor**"), output=True)]
    return CFunction(f"aclnn{op.name}{_GWS}", _STATUS, tuple(params), False, HEADER)


# looked up by torch_npu after it loads custom kernels: mdev has no static kernel binaries to
# reselect, so the reselection has nothing to do and succeeds
RESELECT = ("aclnnReselectStaticKernel", "aclnnReselectStaticKernelWithPath")


@functools.cache
def missing() -> tuple[str, ...]:
    """The ops torch_npu can call that mdev's operator library lacks (names without aclnn)."""
    names = (line.strip() for line in _NAMES.read_text().splitlines())
    return tuple(n for n in names if n and not n.startswith("#") and n not in OPERATORS)


@functools.cache
def functions() -> tuple[CFunction, ...]:
    """libopapi.so's functions: each op's two, then each missing op's two (no parameters)."""
    ours = [f for op in OPERATORS.values() for f in (_gws_prototype(op), _run_prototype(op.name))]
    theirs = [CFunction(f"aclnn{name}{suffix}", _STATUS, (), False, MISSING_HEADER)
              for name in missing() for suffix in (_GWS, "")]
    reselect = [CFunction(name, _STATUS, (), False, MISSING_HEADER) for name in RESELECT]
    return (*ours, *theirs, *reselect)


@functools.cache
def by_name() -> dict[str, CFunction]:
    return {f.name: f for f in functions()}


def _declarations(header: str) -> str:
    return "\n".join(f"ACL_FUNC_VISIBILITY {f.declaration};" for f in functions() if f.header == header)


# families the CANN tree names otherwise than the snake case of their first op
_FAMILY_FILES = {"BatchMatMul": "batch_matmul", "ArgMax": "argmax", "ArgMin": "argmin", "PowTensorScalar": "pow",
                 "RemainderTensorTensor": "remainder"}


def family(op: str) -> str:
    """The family whose header declares ``op``: Inplace and scalar ("s") variants are their
    op's (InplaceAdds -> Add; InplaceCopy -> Copy), as in the CANN tree."""
    base = op.removeprefix("Inplace")
    if base.endswith("s") and {base[:-1], "Inplace" + base[:-1]} & OPERATORS.keys():
        base = base[:-1]
    return base


def header_of(op: str) -> str:
    """aclnnop/aclnn_<family in snake case>.h: where the CANN tree declares ``op``."""
    name = family(op)
    name = _FAMILY_FILES.get(name) or re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
    return f"aclnnop/aclnn_{name}.h"


def _guarded(path: str, comment: str, body: str) -> str:
    guard = "MDEV_" + re.sub(r"\W", "_", path).upper()
    return (f"/* Generated by mdev cann-home from mdev/operators.py: {comment} */\n"
            f"#ifndef {guard}\n#define {guard}\n\n{body}\n\n#endif /* {guard} */\n")


@functools.cache
def op_headers() -> dict[str, str]:
    """aclnnop/aclnn_<op>.h -> its text: each op family's functions (libopapi.so's)."""
    families: dict[str, list[str]] = {}
    for name in OPERATORS:
        families.setdefault(header_of(name), []).append(name)
    texts = {}
    for path, ops in families.items():
        wanted = {f"aclnn{op}{suffix}" for op in ops for suffix in (_GWS, "")}
        body = "\n".join(f"ACL_FUNC_VISIBILITY {f.declaration};" for f in functions() if f.name in wanted)
        texts[path] = _guarded(path, f"{', '.join(ops)} of mdev's operator library (libopapi.so).",
                               "#include \"acl/acl_base.h\"\n#include \"aclnn/acl_meta.h\"\n\n"
                               "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n" + body +
                               "\n\n#ifdef __cplusplus\n}\n#endif")
    return texts


def header() -> str:
    """aclnnop/aclnn_ops.h: every op of mdev's operator library (its headers, included)."""
    includes = "\n".join(f'#include "{path}"' for path in sorted(op_headers()))
    return _guarded(HEADER, f"the {len(OPERATORS)} operators of mdev's operator library (libopapi.so), "
                    "one header per op family as in the CANN tree; descriptors are aclnn/acl_meta.h's.", includes)


def missing_header() -> str:
    """The declarations of the missing ops' exported stubs, of the reselection, and of
    libnnopbase.so's packing of descriptors (for the build, not for programs)."""
    return ("/* Generated by mdev cann-home: ops torch_npu can call that mdev lacks (each answers 561003). */\n"
            "#include <stddef.h>\n#include \"aclnn/acl_meta.h\"\n" + _declarations(MISSING_HEADER) + "\n"
            "size_t mdev_nnopbase_pack(const void* const* descriptors, const uint32_t* kinds, int count, "
            "unsigned char* out, size_t room);\n")


def packing(fn: CFunction) -> tuple[list[str], str, list[str]] | None:
    """What an op's GetWorkspaceSize entry point sends beyond its arguments: a copy of its
    descriptors (mdev_nnopbase_pack; empty when they do not fit PACK_BYTES)."""
    op = OPERATORS.get(fn.name[len("aclnn"):-len(_GWS)]) if fn.name.endswith(_GWS) else None
    if op is None:
        return None
    described = [(name, kind) for name, kind in op.params if kind not in VALUES]
    if not described:
        return None
    pointers = ", ".join(f"(const void*){name}" for name, _ in described)
    magics = ", ".join(f"{nnopbase.magic(kind):#x}u" for _, kind in described)
    return ([f"    const void* const mdev_d[] = {{{pointers}}};",
             f"    static const uint32_t mdev_k[] = {{{magics}}};",
             f"    unsigned char mdev_blob[{PACK_BYTES}];",
             f"    size_t mdev_n = mdev_nnopbase_pack(mdev_d, mdev_k, {len(described)}, mdev_blob, sizeof mdev_blob);"],
            "b", ["(const void*)mdev_blob, mdev_n"])


def _workspace_size(fn: CFunction, op: Operator) -> Callable:
    """aclnnXGetWorkspaceSize: the descriptors read from the caller's memory (mdev.capi.nnopbase),
    then the runtime's check and executor."""
    where = f"{fn.name}"
    described = [(i, name, kind) for i, (name, kind) in enumerate(op.params) if kind not in VALUES]
    texts = [i for i, (_, kind) in enumerate(op.params) if kind == STR]

    def get_workspace_size(packed, *params):
        params = list(params)
        pointers = [(params[i], kind, f"{where}: {name}") for i, name, kind in described]
        descriptors = nnopbase.unpack(packed, pointers) if packed else nnopbase.read(pointers)
        for (i, _, _), descriptor in zip(described, descriptors):
            params[i] = descriptor
        for i in texts:
            params[i] = special.string(params[i])
        return operators.operator_get_workspace_size(op.name, *params)

    get = boundary.bind(get_workspace_size, *operators.operator_get_workspace_size.api_shape, boundary.ACLNN)
    pointers = frozenset(i for i, _, _ in described)

    def call(*args):
        *params, workspace_size, executor, packed = args if described else (*args, b"")
        if not workspace_size:
            return null_output(fn, "workspaceSize")
        if not executor:
            return null_output(fn, "executor")
        made = signatures.repeat(op, fn.name, params, pointers, packed)
        if made is None:
            made = get(packed, *params)
            if made[-1] == 0:
                signatures.remember(op, fn.name, params, pointers, packed, made[1])
        return made

    call.__name__ = fn.name
    return call


@functools.cache
def _run() -> Callable:
    run = boundary.bind(operators.operator_run, *operators.operator_run.api_shape, boundary.ACLNN)

    def call(workspace, workspace_size, executor, stream):
        return run(workspace, workspace_size, local.executor(executor), stream)
    return call


def adapter(cname: str) -> Callable:
    """The Python callable behind libopapi.so's function ``cname``."""
    fn = by_name()[cname]
    name = cname[len("aclnn"):]
    if cname in RESELECT:
        return lambda: boundary.ACLNN.success
    if fn.header == MISSING_HEADER:
        op = name.removesuffix(_GWS)
        return unsupported(fn, f"mdev's operator library has no operator {op!r} ({len(OPERATORS)} operators: see "
                               f"the README, Operators (aclnn))")
    if name.endswith(_GWS) and name[:-len(_GWS)] in OPERATORS:
        return _workspace_size(fn, OPERATORS[name[:-len(_GWS)]])
    return _run()
