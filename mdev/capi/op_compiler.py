"""The single-operator (aclop) path's C functions: compile options, and what mdev does not have.

    aclGetCompileoptSize(opt) -> size_t          (0 when there is nothing to read)
    aclGetCompileopt(opt, char* value, length)   the value written into the caller's buffer
    aclop* compilation and attributes, tensor descriptions (acl_op.h, acl_op_compiler.h,
    acl_base.h)                                  ACL_ERROR_API_NOT_SUPPORT, saying why

aclSetCompileopt is marshalled from its prototype; the three are mdev.runtime.execution.operators'
(set_compileopt, get_compileopt_size, get_compileopt).  Frameworks reach the aclop path only
when an aclnn op is missing, and mdev's libopapi.so exports every op torch_npu can call.
"""

from __future__ import annotations

from mdev.capi.failures import unsupported
from mdev.capi.prototypes import functions
from mdev.capi.special import _text_into, adapts, needs, writes_out

_COMPILE_OPTIONS = ("aclSetCompileopt", "aclGetCompileoptSize", "aclGetCompileopt")
ACLOP = tuple(f.name for f in functions() if f.header in ("acl/acl_op.h", "acl/acl_op_compiler.h", "acl/acl_base.h")
              and f.name not in _COMPILE_OPTIONS)


@adapts("aclGetCompileoptSize")
def _compileopt_size(fn, impl):
    def make(get):
        def call(opt):
            return get(opt)[0]
        return call
    return needs(impl, fn, make)


@adapts("aclGetCompileopt")
def _compileopt(fn, impl):
    return writes_out(fn, impl, "value", lambda opt, value, length: (opt,),
                      _text_into(fn, lambda opt, value, length: length))


@adapts(*ACLOP)
def _aclop(fn, impl):
    return unsupported(fn, "mdev runs operators through aclnn (libopapi.so); the aclop path needs CANN's graph "
                           "engine and its online operator compiler")
