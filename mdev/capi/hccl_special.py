"""Hand-written adapters of libhccl.so: the HCCL functions whose prototype alone does not say
how to call mdev.runtime.collectives.api.

    HcclGetErrorString      const char* of a code (static buffers, valid for the process)
    HcclGetRootInfo         the HcclRootInfo blob written into the caller's structure
    HcclCommInitRootInfo    the caller's HcclRootInfo read (HCCL_ROOT_INFO_BYTES bytes)
    HcclCommInitAll         int32_t devices[ndev] read, HcclComm comms[ndev] written
    HcclBatchSendRecv       HcclSendRecvItem[itemNum] read
    HcclAlltoAllV           four uint64_t arrays of one entry per rank read

They register in mdev.capi.special's tables, like the acl face's, and report failures in
HcclResult codes (mdev.capi.failures.codes_of).
"""

from __future__ import annotations

import ctypes

from mdev import hccl_types as H
from mdev.capi import cmemory, structs
from mdev.capi.failures import null_output
from mdev.capi.special import CONVERSIONS, adapts, needs
from mdev.runtime import boundary
from mdev.runtime.collectives import api

_U64 = ctypes.c_uint64
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


@adapts("HcclAlltoAllV")
def _all_to_all_v(fn, impl):
    rank_size = boundary.bind(api.get_rank_size, 1, 0, boundary.HCCL)
    arrays = ("sendCounts", "sdispls", "recvCounts", "rdispls")

    def make(exchange):
        def call(send_buf, send_counts, sdispls, send_type, recv_buf, recv_counts, rdispls, recv_type, comm, stream):
            nranks, ret = rank_size(comm)
            if ret != H.HCCL_SUCCESS:
                return ret
            lists = []
            for address, name in zip((send_counts, sdispls, recv_counts, rdispls), arrays):
                if not address:
                    return null_output(fn, name)
                lists.append(cmemory.read_array(_U64, address, nranks))
            return exchange(send_buf, lists[0], lists[1], send_type, recv_buf, lists[2], lists[3], recv_type,
                            comm, stream)
        return call
    return needs(impl, fn, make)
