"""C names of the runtime's functions, both ways: what every face agrees to call them.

    runtime function (group, snake_case)  <-- c_name / snake_name -->  C API name
        ("rt", "memcpy2d_async")                                        aclrtMemcpy2dAsync
        ("", "init")                                                    aclInit
        ("mdl", "ri_capture_end")                                       aclmdlRICaptureEnd
        ("hccl", "all_reduce")                                          HcclAllReduce

A group is the prefix family: "" for ``acl*``/``aclsys*``, "rt" for ``aclrt*``, "mdl" for
``aclmdl*`` (model run instances take "ri_"), "prof" for ``aclprof*``, "hccl" for HCCL's ``Hccl*``.  The pyACL face names its functions by the
same rule (``acl.rt.memcpy2d_async``) and the C face finds the implementation of a C entry
point through it, so the exceptions to the rule are listed once, here.
"""

from __future__ import annotations

import re

# the C names that the CamelCase rule does not give
OVERRIDES = {
    ("rt", "set_context"): "aclrtSetCurrentContext",
    ("rt", "get_context"): "aclrtGetCurrentContext",
    ("rt", "unsubscribe_report"): "aclrtUnSubscribeReport",
    ("rt", "unsubscribe_host_func"): "aclrtUnSubscribeHostFunc",
    ("rt", "binary_unload"): "aclrtBinaryUnLoad",
    ("rt", "set_op_execute_timeout_v2"): "aclrtSetOpExecuteTimeOutV2",
    ("rt", "get_op_timeout_interval"): "aclrtGetOpTimeOutInterval",
    ("", "get_version"): "aclrtGetVersion",
    ("", "get_soc_name"): "aclrtGetSocName",
    ("", "get_cann_version"): "aclsysGetCANNVersion",
    ("", "get_version_str"): "aclsysGetVersionStr",
    ("", "get_version_num"): "aclsysGetVersionNum",
    ("", "app_log"): "ACL_APP_LOG",
    ("hccl", "all_to_all"): "HcclAlltoAll",
    ("hccl", "all_to_all_v"): "HcclAlltoAllV",
    ("hccl", "all_to_all_vc"): "HcclAlltoAllVC",
}
_BY_C_NAME = {c: key for key, c in OVERRIDES.items()}
_PREFIXES = {"": "acl", "rt": "aclrt", "mdl": "aclmdl", "prof": "aclprof", "hccl": "Hccl"}
# a word boundary inside CamelCase: fooBar, foo2Bar, PCIBus (an acronym before a word)
_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def snake(camel: str) -> str:
    """``MseLoss`` -> ``mse_loss``, ``NLLLoss`` -> ``nll_loss``."""
    return _BOUNDARY.sub("_", camel).lower()


def c_name(group: str, name: str) -> str:
    """The C name of runtime function ``name`` of ``group`` ("" when the group has none)."""
    if (group, name) in OVERRIDES:
        return OVERRIDES[group, name]
    camel = "".join(part[:1].upper() + part[1:] for part in name.split("_"))
    prefix = _PREFIXES.get(group, "")
    if group == "mdl" and name.startswith("ri_"):
        camel = "RI" + camel[2:]
    return prefix + camel if prefix else ""


def snake_name(c: str) -> tuple[str, str]:
    """(group, snake_case name) of C function ``c``: the inverse of :func:`c_name`."""
    if c in _BY_C_NAME:
        return _BY_C_NAME[c]
    for prefix, group, lead in (("aclmdlRI", "mdl", "ri_"), ("aclmdl", "mdl", ""), ("aclrt", "rt", ""),
                                ("aclprof", "prof", ""),
                                ("aclsys", "", ""), ("acl", "", ""), ("Hccl", "hccl", "")):
        if c.startswith(prefix):
            return group, lead + snake(c[len(prefix):])
    raise ValueError(f"{c} is not a CANN runtime or HCCL function name")
