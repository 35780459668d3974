"""The headers' structures as ctypes mirrors, and as the dicts the runtime takes and returns.

    C structure at an address --read--> runtime dict / list     (inputs)
        aclrtRandomNumTaskInfo        -> random_task()          (mdev.runtime.execution.systasks' dict)
        aclrtPhysicalMemProp          -> mem_prop()             (mdev.runtime.memory.vmm's dict)
        aclrtMemLocation, aclrtMemAccessDesc[n], aclrtPlaceHolderInfo[n]
        aclrtLaunchKernelCfg          -> launch_cfg()           [(attribute id, value)]
        aclrtBinaryLoadOptions        -> load_options()
    aclrtMallocConfig             -> malloc_cfg()           (mdev.runtime.memory.memops' dict)
    aclrtMemcpyBatchAttr[n]       -> batch_attrs()
    runtime dict --cmemory.store_struct--> the caller's structure  (outputs: the mirrors below)
    HcclSendRecvItem[n]           read by mdev.capi.hccl_special (libhccl.so's batched send/recv)

Only layouts are here; tests/test_capi_library.py checks them against the compiler's.
"""

from __future__ import annotations

import ctypes

from mdev import constants as C
from mdev.capi import cmemory


class RandomPara(ctypes.Structure):
    _fields_ = [("isAddr", ctypes.c_uint8), ("valueOrAddr", ctypes.c_uint8 * 8), ("size", ctypes.c_uint8),
                ("rsv", ctypes.c_uint8 * 6)]


class _ParamInfo(ctypes.Union):
    _fields_ = [("dropoutBitmaskInfo", RandomPara * 1), ("uniformDisInfo", RandomPara * 2),
                ("normalDisInfo", RandomPara * 2)]


class RandomNumTaskInfo(ctypes.Structure):
    _fields_ = [("dataType", ctypes.c_int32), ("funcType", ctypes.c_int32), ("paramInfo", _ParamInfo),
                ("randomParaAddr", ctypes.c_uint64), ("randomResultAddr", ctypes.c_uint64),
                ("randomCounterAddr", ctypes.c_uint64), ("randomSeed", RandomPara), ("randomNum", RandomPara),
                ("rsv", ctypes.c_uint8 * 8)]


class MemLocation(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint32), ("type", ctypes.c_int32)]


class PhysicalMemProp(ctypes.Structure):
    _fields_ = [("handleType", ctypes.c_int32), ("allocationType", ctypes.c_int32), ("memAttr", ctypes.c_int32),
                ("location", MemLocation), ("reserve", ctypes.c_uint64)]


class MemAccessDesc(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_int32), ("location", MemLocation), ("rsv", ctypes.c_uint8 * 12)]


class Attribute(ctypes.Structure):
    """aclrtLaunchKernelAttr / aclrtBinaryLoadOption: an id and a 16-byte union value."""
    _fields_ = [("id", ctypes.c_int32), ("value", ctypes.c_uint8 * 16)]


class AttributeList(ctypes.Structure):
    """aclrtLaunchKernelCfg / aclrtBinaryLoadOptions: a pointer to n of them, and n."""
    _fields_ = [("items", ctypes.c_uint64), ("count", ctypes.c_size_t)]


class MemcpyBatchAttr(ctypes.Structure):
    _fields_ = [("dstLoc", MemLocation), ("srcLoc", MemLocation), ("rsv", ctypes.c_uint8 * 16)]


class CntNotifyRecordInfo(ctypes.Structure):
    _fields_ = [("mode", ctypes.c_int32), ("value", ctypes.c_uint32)]


class CntNotifyWaitInfo(ctypes.Structure):
    _fields_ = [("mode", ctypes.c_int32), ("value", ctypes.c_uint32), ("timeout", ctypes.c_uint32),
                ("isClear", ctypes.c_uint8), ("rsv", ctypes.c_uint8 * 3)]


class MemUsageInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 32), ("curMemSize", ctypes.c_uint64), ("memPeakSize", ctypes.c_uint64),
                ("reserved", ctypes.c_size_t * 8)]


class MallocAttribute(ctypes.Structure):
    _fields_ = [("attr", ctypes.c_int32), ("value", ctypes.c_uint8 * 8)]


class PtrAttributes(ctypes.Structure):
    _fields_ = [("location", MemLocation), ("pageSize", ctypes.c_uint32), ("rsv", ctypes.c_uint32 * 4)]


class PlaceHolder(ctypes.Structure):
    _fields_ = [("addrOffset", ctypes.c_uint32), ("dataOffset", ctypes.c_uint32)]


class MemUceInfo(ctypes.Structure):
    _fields_ = [("addr", ctypes.c_uint64), ("len", ctypes.c_size_t), ("reserved", ctypes.c_size_t * 14)]


class _UceInfoArray(ctypes.Structure):
    _fields_ = [("arraySize", ctypes.c_size_t), ("memUceInfoArray", MemUceInfo * C.ACL_RT_MEM_UCE_INFO_MAX_NUM)]


class _ErrorDetail(ctypes.Union):
    _fields_ = [("uceInfo", _UceInfoArray), ("aicoreErrType", ctypes.c_int32)]


class ErrorInfo(ctypes.Structure):
    _fields_ = [("tryRepair", ctypes.c_uint8), ("hasDetail", ctypes.c_uint8), ("reserved", ctypes.c_uint8 * 2),
                ("errorType", ctypes.c_int32), ("detail", _ErrorDetail)]


class UtilizationInfo(ctypes.Structure):
    _fields_ = [("cubeUtilization", ctypes.c_int32), ("vectorUtilization", ctypes.c_int32),
                ("aicpuUtilization", ctypes.c_int32), ("memoryUtilization", ctypes.c_int32),
                ("utilizationExtend", ctypes.c_uint64)]


class Uuid(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_char * 16)]


class CANNPackageVersion(ctypes.Structure):
    _fields_ = [("version", ctypes.c_char * C.ACL_PKG_VERSION_MAX_SIZE)] + [
        (name, ctypes.c_char * C.ACL_PKG_VERSION_PARTS_MAX_SIZE)
        for name in ("majorVersion", "minorVersion", "releaseVersion", "patchVersion")] + [
        ("reserved", ctypes.c_char * C.ACL_PKG_VERSION_MAX_SIZE)]


IpcEventHandle = ctypes.c_char * C.ACL_IPC_EVENT_HANDLE_SIZE


# ---------------------------------------------------------------------------- readers
_RANDOM_MEMBERS = {"dropoutBitmaskInfo": ("dropoutRation",), "uniformDisInfo": ("min", "max"),
                   "normalDisInfo": ("mean", "stddev")}


def _para(p: RandomPara) -> dict:
    raw = bytes(p.valueOrAddr)
    return {"isAddr": p.isAddr, "valueOrAddr": int.from_bytes(raw, "little") if p.isAddr else raw, "size": p.size}


def random_task(address: int) -> dict | None:
    """aclrtRandomNumTaskInfo at ``address`` as the runtime's dict (every union member: the
    runtime picks the one ``funcType`` names)."""
    if not address:
        return None
    info = cmemory.at(RandomNumTaskInfo, address)
    params = {member: {field: _para(p) for field, p in zip(fields, getattr(info.paramInfo, member))}
              for member, fields in _RANDOM_MEMBERS.items()}
    return {"dataType": info.dataType,
            "randomNumFuncParaInfo": {"funcType": info.funcType, "paramInfo": params},
            "randomParaAddr": info.randomParaAddr, "randomResultAddr": info.randomResultAddr,
            "randomCounterAddr": info.randomCounterAddr,
            "randomSeed": _para(info.randomSeed), "randomNum": _para(info.randomNum)}


def _location(loc: MemLocation) -> dict:
    return {"id": loc.id, "type": loc.type}


def location_at(address: int) -> dict | None:
    return _location(cmemory.at(MemLocation, address)) if address else None


def mem_prop(address: int) -> dict | None:
    """aclrtPhysicalMemProp at ``address`` as the runtime's dict (None for NULL)."""
    if not address:
        return None
    p = cmemory.at(PhysicalMemProp, address)
    return {"handleType": p.handleType, "allocationType": p.allocationType, "memAttr": p.memAttr,
            "location": _location(p.location), "reserve": p.reserve}


def access_descs(address: int, count: int) -> list[dict] | None:
    return [{"flags": d.flags, "location": _location(d.location)}
            for d in cmemory.at(MemAccessDesc * count, address)] if address and count else None


def place_holders(address: int, count: int) -> list[tuple[int, int]] | None:
    return [(h.addrOffset, h.dataOffset) for h in cmemory.at(PlaceHolder * count, address)] \
        if address and count else None


# bytes of each launch attribute's union member (4 for the uint32 / enum ones)
_ATTRIBUTE_BYTES = {C.ACL_RT_LAUNCH_KERNEL_ATTR_BLOCK_TASK_PREFETCH: 1, C.ACL_RT_LAUNCH_KERNEL_ATTR_DATA_DUMP: 1,
                    C.ACL_RT_LAUNCH_KERNEL_ATTR_ENABLE_PROFILING: 1, C.ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT: 2,
                    C.ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US: 8}


def _attributes(address: int, widths: dict) -> list[tuple[int, int]] | None:
    """(id, value) of each entry of the list at ``address`` (None for NULL)."""
    if not address:
        return None
    listing = cmemory.at(AttributeList, address)
    items = cmemory.at(Attribute * listing.count, listing.items) if listing.items and listing.count else []
    return [(a.id, int.from_bytes(bytes(a.value)[:widths.get(a.id, 4)], "little")) for a in items]


def launch_cfg(address: int) -> list[tuple[int, int]] | None:
    return _attributes(address, _ATTRIBUTE_BYTES)


def load_options(address: int) -> list[tuple[int, int]] | None:
    return _attributes(address, {})


def uce_infos(address: int, count: int) -> list[dict]:
    """aclrtMemUceInfo[count] at ``address`` as dicts (addr, len)."""
    return [{"addr": u.addr, "len": u.len} for u in cmemory.at(MemUceInfo * count, address)] \
        if address and count else []


# bytes of each malloc attribute's union member
_MALLOC_ATTRIBUTE_BYTES = {C.ACL_RT_MEM_ATTR_MODULE_ID: 2}


def malloc_cfg(address: int) -> dict | None:
    """aclrtMallocConfig at ``address``: {"attrs": [{"attr", "value"}], "numAttrs"} (None for NULL)."""
    if not address:
        return None
    listing = cmemory.at(AttributeList, address)
    items = cmemory.at(MallocAttribute * listing.count, listing.items) if listing.items and listing.count else []
    attrs = [{"attr": a.attr, "value": int.from_bytes(bytes(a.value)[:_MALLOC_ATTRIBUTE_BYTES.get(a.attr, 4)], "little")}
             for a in items]
    return {"attrs": attrs, "numAttrs": listing.count}


def batch_attrs(address: int, count: int) -> list[dict]:
    """aclrtMemcpyBatchAttr[count] at ``address`` as {"dstLoc", "srcLoc"} dicts."""
    return [{"dstLoc": _location(a.dstLoc), "srcLoc": _location(a.srcLoc)}
            for a in cmemory.at(MemcpyBatchAttr * count, address)] if address and count else []


class HcclSendRecvItem(ctypes.Structure):
    _fields_ = [("sendRecvType", ctypes.c_int32), ("buf", ctypes.c_void_p), ("count", ctypes.c_uint64),
                ("dataType", ctypes.c_int32), ("remoteRank", ctypes.c_uint32)]
