"""Hand-written adapters of libhccl.so: the HCCL functions whose prototype alone does not say
how to call mdev.runtime.collectives.api.

    HcclGetErrorString      const char* of a code (static buffers, valid for the process)
    HcclGetRootInfo         the HcclRootInfo blob written into the caller's structure
    HcclCommInitRootInfo    the caller's HcclRootInfo read (HCCL_ROOT_INFO_BYTES bytes)
    HcclCommInitAll         int32_t devices[ndev] read, HcclComm comms[ndev] written
    HcclBatchSendRecv       HcclSendRecvItem[itemNum] read
    HcclAlltoAllV           four uint64_t arrays of one entry per rank read
    HcclAllGatherV, HcclReduceScatterV   two such arrays; HcclAlltoAllVC a rank x rank matrix
    HcclCommInitRootInfoConfig, HcclCommInitClusterInfoConfig   the caller's HcclCommConfig read
                            (its header: HcclCommConfigInit's size, magic word and version)
    HcclCreateSubCommConfig the global HcclComm read through its pointer, uint32_t rankIds[rankNum]
    HcclGetCommConfigCapability   a uint32_t, not an HcclResult
    HcclSetConfig / HcclGetConfig  the HcclConfigValue union (an int32_t) by value / written
    HcclGetCommName         the name written into the caller's char[COMM_NAME_MAX_LENGTH]

They register in mdev.capi.special's tables, like the acl face's, and report failures in
HcclResult codes (mdev.capi.failures.codes_of).
"""

from __future__ import annotations

import ctypes
import struct

from mdev import hccl_types as H
from mdev.capi import cmemory, structs
from mdev.capi.failures import null_output
from mdev.capi.special import ADAPTERS, CONVERSIONS, adapts, needs
from mdev.runtime import boundary
from mdev.runtime.collectives import api

_U64, _U32, _I32 = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_int32
_strings: dict[int, int] = {}      # HcclResult -> the address of its text, kept for the process


@adapts("HcclGetErrorString")
def _error_string(fn, impl):
    def call(code):
        if code not in _strings:
            _strings[code] = cmemory.keep(H.error_string(code).encode() + b"\0")
        return _strings[code]
    return call


@adapts("HcclGetRootInfo")
def _root_info(fn, impl):
    def make(get):
        def call(address):
            if not address:
                return null_output(fn, "rootInfo")
            blob, ret = get()
            if ret == H.HCCL_SUCCESS:
                cmemory.write(address, blob)
            return ret
        return call
    return needs(impl, fn, make)


CONVERSIONS[("HcclCommInitRootInfo", "rootInfo")] = (
    lambda address: cmemory.read(address, H.HCCL_ROOT_INFO_BYTES) if address else None)


@adapts("HcclCommInitAll")
def _comm_init_all(fn, impl):
    def make(init):
        def call(ndev, devices, comms):
            for address, name in ((devices, "devices"), (comms, "comms")):
                if not address and ndev:
                    return null_output(fn, name)
            made, ret = init(ndev, cmemory.read_array(ctypes.c_int32, devices, ndev) if devices else [])
            if ret == H.HCCL_SUCCESS:
                cmemory.write(comms, bytes((ctypes.c_void_p * ndev)(*made)))
            return ret
        return call
    return needs(impl, fn, make)


@adapts("HcclBatchSendRecv")
def _batch_send_recv(fn, impl):
    def make(batch):
        def call(items, item_num, comm, stream):
            if not items and item_num:
                return null_output(fn, "sendRecvInfo")
            read = cmemory.at(structs.HcclSendRecvItem * item_num, items) if item_num else []
            return batch([(i.sendRecvType, i.buf or 0, i.count, i.dataType, i.remoteRank) for i in read],
                         item_num, comm, stream)
        return call
    return needs(impl, fn, make)



# ---------------------------------------------------------------------------- configurations
class HcclCommConfig(ctypes.Structure):
    """hccl_types.h's HcclCommConfig (tests/test_capi_headers.py checks the layout)."""
    _fields_ = [("size", ctypes.c_size_t), ("magicWord", _U32), ("version", _U32), ("reserved", _U64),
                ("hcclBufferSize", _U32), ("hcclDeterministic", _U32), ("hcclCommName", ctypes.c_char * 128),
                ("hcclUdi", ctypes.c_char * 128), ("hcclOpExpansionMode", _U32), ("hcclRdmaTrafficClass", _U32),
                ("hcclRdmaServiceLevel", _U32), ("hcclWorldRankID", _U32), ("hcclJobID", _U64),
                ("aclGraphZeroCopyEnable", ctypes.c_uint8), ("hcclExecTimeOut", _I32),
                ("hcclAlgo", ctypes.c_char * 1600), ("hcclRetryEnable", ctypes.c_char * 50),
                ("hcclRetryParams", ctypes.c_char * 128), ("hcclBufferName", ctypes.c_char * 128),
                ("hcclQos", _U32), ("hcclSymWinMaxMemSizePerRank", _U64)]


_HEADER = ("size", "magicWord", "version", "reserved")


class BadConfig(Exception):
    """The caller's HcclCommConfig was not made by HcclCommConfigInit."""


def read_comm_config(address: int) -> dict | None:
    """The caller's HcclCommConfig as the runtime's dict (NULL: None); its first ``size`` bytes
    (an older, shorter configuration keeps the later fields' defaults)."""
    if not address:
        return None
    size, magic, version = struct.unpack("=QII", cmemory.read(address, 16))       # HcclCommConfigInit's header
    if magic != H.HCCL_COMM_CONFIG_MAGIC_WORD or not 0 < version <= H.HCCL_COMM_CONFIG_VERSION or size < 32:
        raise BadConfig(f"config at {address:#x} was not made by HcclCommConfigInit (size {size}, magic word "
                        f"{magic:#x}, version {version})")
    config = HcclCommConfig()
    data = cmemory.read(address, min(size, ctypes.sizeof(HcclCommConfig)))
    for name, value in H.comm_config().items():
        setattr(config, name, value.encode() if isinstance(value, str) else value)
    ctypes.memmove(ctypes.addressof(config), data, len(data))
    out = {}
    for name, _ in HcclCommConfig._fields_:
        if name not in _HEADER:
            value = getattr(config, name)
            out[name] = value.decode(errors="replace") if isinstance(value, bytes) else value
    return out


def _configured(fn, impl, at: int, convert_inputs):
    """An adapter reading the HcclCommConfig of argument ``at``; a bad one is HCCL_E_PARA."""
    def make(init):
        def call(*args):
            if not args[-1]:
                return null_output(fn, fn.params[-1].name)
            try:
                config = read_comm_config(args[at])
            except BadConfig as exc:
                boundary.record_error(H.HCCL_E_PARA, f"{fn.name}: {exc}", boundary.HCCL)
                return H.HCCL_E_PARA
            return init(*convert_inputs(args), config)
        return call
    return needs(impl, fn, make)


@adapts("HcclCommInitRootInfoConfig")
def _init_root_info_config(fn, impl):
    root = CONVERSIONS[("HcclCommInitRootInfo", "rootInfo")]
    return _configured(fn, impl, 3, lambda args: (args[0], root(args[1]), args[2]))


@adapts("HcclCommInitClusterInfoConfig")
def _init_cluster_info_config(fn, impl):
    return _configured(fn, impl, 2, lambda args: (cmemory.text(args[0]) if args[0] else None, args[1]))


@adapts("HcclCreateSubCommConfig")
def _create_sub_comm_config(fn, impl):
    def make(create):
        def call(comm, rank_num, rank_ids, sub_comm_id, sub_comm_rank_id, config, sub_comm):
            if not comm:
                return null_output(fn, "comm")
            if not sub_comm:
                return null_output(fn, "subComm")
            try:
                settings = read_comm_config(config)
            except BadConfig as exc:
                boundary.record_error(H.HCCL_E_PARA, f"{fn.name}: {exc}", boundary.HCCL)
                return H.HCCL_E_PARA
            ranks = cmemory.read_array(_U32, rank_ids, rank_num) if rank_ids else None
            handle, ret = create(cmemory.load(ctypes.c_uint64, comm), ranks, sub_comm_id, sub_comm_rank_id, settings)
            if ret == H.HCCL_SUCCESS:
                cmemory.write(sub_comm, bytes(ctypes.c_void_p(handle or None)))
            return ret
        return call
    return needs(impl, fn, make)


@adapts("HcclGetCommConfigCapability")
def _config_capability(fn, impl):
    def make(get):
        def call():
            value, _ = get()
            return value
        return call
    return needs(impl, fn, make)


CONVERSIONS[("HcclSetConfig", "configValue")] = lambda data: int.from_bytes(bytes(data)[:4], "little", signed=True)


@adapts("HcclGetConfig")
def _get_config(fn, impl):
    def make(get):
        def call(config, address):
            if not address:
                return null_output(fn, "configValue")
            value, ret = get(config)
            if ret == H.HCCL_SUCCESS:
                cmemory.write(address, bytes(_I32(value)))
            return ret
        return call
    return needs(impl, fn, make)


@adapts("HcclGetCommName")
def _comm_name(fn, impl):
    def make(get):
        def call(comm, address):
            if not address:
                return null_output(fn, "commName")
            name, ret = get(comm)
            if ret == H.HCCL_SUCCESS and not cmemory.write_text(address, H.COMM_NAME_MAX_LENGTH, name):
                boundary.record_error(H.HCCL_E_INTERNAL, f"{fn.name}: the name {name!r} is too long", boundary.HCCL)
                return H.HCCL_E_INTERNAL
            return ret
        return call
    return needs(impl, fn, make)


# ---------------------------------------------------------------------------- V variants
def _rank_arrays(fn, impl, positions: tuple[int, ...], per_rank: int = 1):
    """An adapter reading the uint64_t arrays of arguments ``positions`` (``per_rank`` = 1:
    one entry per rank of the communicator; 2: rank x rank) into lists for the runtime."""
    rank_size = boundary.bind(api.get_rank_size, 1, 0, boundary.HCCL)
    comm_at = [p.name for p in fn.params].index("comm")

    def make(run):
        def call(*args):
            nranks, ret = rank_size(args[comm_at])
            if ret != H.HCCL_SUCCESS:
                return ret
            values = list(args)
            for i in positions:
                if not args[i]:
                    return null_output(fn, fn.params[i].name)
                values[i] = cmemory.read_array(_U64, args[i], nranks ** per_rank)
            return run(*values)
        return call
    return needs(impl, fn, make)


ADAPTERS.update({
    "HcclAlltoAllV": lambda fn, impl: _rank_arrays(fn, impl, (1, 2, 5, 6)),      # counts and displacements
    "HcclAllGatherV": lambda fn, impl: _rank_arrays(fn, impl, (3, 4)),
    "HcclReduceScatterV": lambda fn, impl: _rank_arrays(fn, impl, (1, 2)),
    "HcclAlltoAllVC": lambda fn, impl: _rank_arrays(fn, impl, (1,), per_rank=2),  # the count matrix
})
