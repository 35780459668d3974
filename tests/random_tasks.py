"""Task descriptions for ``random_num_async`` (aclrtRandomNumTaskInfo as pyACL dicts), shared
by the system-task and sanitizer tests."""

from __future__ import annotations

UNIFORM, NORMAL, TRUNCATED, DROPOUT = 1, 2, 3, 0     # ACL_RT_RANDOM_NUM_FUNC_TYPE_*


def para(value, is_addr=0, size=None) -> dict:
    info = {"isAddr": is_addr, "valueOrAddr": value}
    if size is not None:
        info["size"] = size
    return info


def task(data_type, func_type, params, result, counter, seed, num, member=None) -> dict:
    member = member or {UNIFORM: "uniformDisInfo", NORMAL: "normalDisInfo", TRUNCATED: "normalDisInfo",
                        DROPOUT: "dropoutBitmaskInfo"}.get(func_type, "uniformDisInfo")
    return {"dataType": data_type,
            "randomNumFuncParaInfo": {"funcType": func_type, "paramInfo": {member: params}},
            "randomParaAddr": 0, "randomResultAddr": result, "randomCounterAddr": counter,
            "randomSeed": seed if isinstance(seed, dict) else para(seed),
            "randomNum": num if isinstance(num, dict) else para(num)}


def uniform(lo, hi):
    return {"min": para(lo), "max": para(hi)}


def normal(mean, std):
    return {"mean": para(mean), "stddev": para(std)}
