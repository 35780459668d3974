"""libacl_op_compiler.so's adapters: the compile options whose values are sizes and strings.

    aclGetCompileoptSize(opt) -> size_t          (0 when there is nothing to read)
    aclGetCompileopt(opt, char* value, length)   the value written into the caller's buffer

aclSetCompileopt is marshalled from its prototype; all three are
mdev.runtime.operators' (set_compileopt, get_compileopt_size, get_compileopt).
"""

from __future__ import annotations

from mdev.capi.special import _text_into, adapts, needs, writes_out


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
