"""Virtual memory management (the CANN Runtime API reference's virtual memory functions,
aclrtReserveMemAddress ... aclrtMemImportFromShareableHandle; guide 02 "虚拟内存管理").

    reserve_mem_address -> VA range      malloc_physical -> handle (device HBM)
    map_mem(va, size, 0, handle, 0)      every memory API (and kernels) take the VA
    unmap_mem, free_physical, release_mem_address
    export -> shareable uint64 -> import in another process (a real second process here)
    FABRIC export -> import on another server of an A3 supernode (2 nodes x 2 devices)

The ``acl`` board is pcie4: 4 devices of 256 MiB, peer access inside the PCIe switch.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import SMALL_HBM
from helpers import MiB, extra_board, from_device, hbm_free, small_supernode, to_device, wait_until
from mdev.board import launcher
from mdev.kernel import kernel
from peer import Peer

E_PARAM, E_INVALID, E_NO_PERMISSION, E_NOT_SUPPORT = 107000, 100000, 207006, 207000
E_ALLOC, E_DEVICE_ID, E_VECTOR = 207001, 107001, 507035
G2M = 2 * MiB
VMM_BASE, VMM_END = (1 << 49), (1 << 49) + (1 << 47)
RW = 0x3                                      # ACL_RT_MEM_ACCESS_FLAGS_READWRITE
NO_PID = 0x1                                  # ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION


def prop(device: int = 0, attr: int = 4, loc_type: int = 1) -> dict:
    """aclrtPhysicalMemProp as pyACL takes it (memAttr 4 = ACL_HBM_MEM_HUGE)."""
    return dict(handleType=0, allocationType=0, memAttr=attr, location=dict(type=loc_type, id=device), reserve=0)


def ok(acl, ret) -> None:
    assert ret == 0, f"ret={ret}: {acl.get_recent_err_msg()}"


def out(acl, result):
    *values, ret = result
    ok(acl, ret)
    return values[0] if len(values) == 1 else tuple(values)


def physical(acl, nbytes: int = G2M, device: int = 0) -> int:
    return out(acl, acl.rt.malloc_physical(nbytes, prop(device), 0))


def reserve(acl, nbytes: int) -> int:
    return out(acl, acl.rt.reserve_mem_address(nbytes, 0, 0, 0))


def pattern(nbytes: int, seed: int = 0) -> np.ndarray:
    return ((np.arange(nbytes, dtype=np.uint64) * 7 + seed) % 251).astype(np.uint8)


def peer_on(board: str, device: int, node: int = 0) -> Peer:
    """A second host process on cluster node ``node`` of ``board``, with ``device`` set."""
    p = Peer(board, env={"MDEV_NODE": str(node)})
    p.do("ok(acl.rt.set_device(d))", d=device)
    p.do("""
        def vmm_map(handle, nbytes):
            va, ret = acl.rt.reserve_mem_address(nbytes, 0, 0, 0); ok(ret)
            ok(acl.rt.map_mem(va, nbytes, 0, handle, 0), "map_mem")
            return va
    """)
    return p


# ============================================================================ granularity
def test_granularity(acl):
    ok(acl, acl.rt.set_device(0))
    for attr, expected in [(4, G2M), (5, G2M), (8, G2M), (10, 1 << 30), (11, 1 << 30), (12, G2M), (13, G2M),
                           (14, 1 << 30), (15, G2M), (16, G2M), (17, 1 << 30)]:
        for option in (0, 1):        # MINIMUM, RECOMMENDED
            assert acl.rt.mem_get_allocation_granularity(prop(0, attr), option) == (expected, 0), attr
    # host DDR kinds (location HOST): 4 KiB normal pages, 2 MiB huge pages
    assert acl.rt.mem_get_allocation_granularity(prop(0, 3, loc_type=0), 0) == (4096, 0)
    assert acl.rt.mem_get_allocation_granularity(prop(0, 7, loc_type=0), 1) == (4096, 0)
    assert acl.rt.mem_get_allocation_granularity(prop(0, 2, loc_type=0), 0) == (G2M, 0)
    assert acl.rt.mem_get_allocation_granularity(prop(0, 4), 2)[1] == E_INVALID
    assert acl.rt.mem_get_allocation_granularity(prop(0, 3), 0)[1] == E_PARAM       # DDR kind on a device
    assert acl.rt.mem_get_allocation_granularity(prop(0, 4, loc_type=0), 0)[1] == E_PARAM
    assert acl.rt.mem_get_allocation_granularity(prop(9), 0)[1] == E_DEVICE_ID
    assert acl.rt.mem_get_allocation_granularity({"memAttr": 4}, 0)[1] == E_INVALID
    assert acl.rt.mem_get_allocation_granularity(None, 0)[1] == E_INVALID


# ============================================================================ physical memory
def test_malloc_physical_counts_and_errors(dev):
    acl = dev
    before = hbm_free(acl)
    h = physical(acl, 4 * MiB)
    assert hbm_free(acl) == before - 4 * MiB                    # exactly the physical size
    assert acl.rt.mem_get_allocation_properties_from_handle(h) == (prop(0), 0)
    h1 = physical(acl, G2M, device=1)                           # location decides the device
    assert hbm_free(acl) == before - 4 * MiB
    assert acl.rt.malloc_physical(G2M + 4096, prop(), 0)[1] == E_PARAM     # not a granularity multiple
    assert acl.rt.malloc_physical(MiB, prop(0, 5), 0)[1] == E_PARAM        # HBM_NORMAL is 2 MiB too
    assert acl.rt.malloc_physical(0, prop(), 0)[1] == E_INVALID
    assert acl.rt.malloc_physical(G2M, prop(), 1)[1] == E_INVALID          # flags must be 0
    assert acl.rt.malloc_physical(G2M, dict(prop(), handleType=2), 0)[1] == E_PARAM
    assert acl.rt.malloc_physical(G2M, dict(prop(), allocationType=1), 0)[1] == E_PARAM
    assert acl.rt.malloc_physical(G2M, prop(0, 3, loc_type=0), 0)[1] == E_NOT_SUPPORT   # host memory
    assert acl.rt.malloc_physical(SMALL_HBM * 2, prop(), 0)[1] == E_ALLOC
    assert acl.rt.malloc_physical(1 << 30, prop(0, 10), 0)[1] == E_ALLOC   # 1 GiB pages on a 256 MiB part
    ok(acl, acl.rt.free_physical(h))
    ok(acl, acl.rt.free_physical(h1))
    assert hbm_free(acl) == before
    assert acl.rt.free_physical(h) == E_PARAM                               # double free
    assert acl.rt.free_physical(0) == E_INVALID
    assert acl.rt.mem_get_allocation_properties_from_handle(h) == (None, E_PARAM)


# ============================================================================ address space
def test_reserve_and_release(dev):
    acl = dev
    a = reserve(acl, 8 * MiB)
    b = reserve(acl, 3 * MiB)                    # sizes round up to 2 MiB inside the window
    assert VMM_BASE <= a < VMM_END and VMM_BASE <= b < VMM_END
    assert a % G2M == 0 and b % G2M == 0 and (b >= a + 8 * MiB or b + 4 * MiB <= a)
    big = reserve(acl, 1 << 30)
    assert big % (1 << 30) == 0                  # >= 1 GiB: 1 GiB aligned
    assert acl.rt.reserve_mem_address(G2M, 4096, 0, 0)[1] == E_INVALID     # alignment must be 0
    assert acl.rt.reserve_mem_address(G2M, 0, 0, 2)[1] == E_INVALID        # flags: 0 normal, 1 huge pages
    huge, ret = acl.rt.reserve_mem_address(G2M, 0, 0, 1)                       # as hccl_test -z / -m reserve
    assert ret == 0 and acl.rt.release_mem_address(huge) == 0
    assert acl.rt.reserve_mem_address(0, 0, 0, 0)[1] == E_INVALID
    # a requested address: honoured when free and aligned, refused otherwise
    want = VMM_END - 64 * MiB
    assert acl.rt.reserve_mem_address(4 * MiB, 0, want, 0) == (want, 0)
    assert acl.rt.reserve_mem_address(G2M, 0, want + G2M, 0)[1] == E_PARAM          # taken
    assert acl.rt.reserve_mem_address(G2M, 0, want - 4096, 0)[1] == E_PARAM         # misaligned
    assert acl.rt.reserve_mem_address(G2M, 0, 1 << 40, 0)[1] == E_PARAM             # outside the window
    for va in (a, b, big, want):
        ok(acl, acl.rt.release_mem_address(va))
    assert acl.rt.release_mem_address(a) == E_PARAM                        # released already
    assert acl.rt.release_mem_address(a + G2M) == E_PARAM
    assert reserve(acl, 8 * MiB) == a                                      # the space comes back
    ok(acl, acl.rt.release_mem_address(a))


def test_map_rules(dev):
    acl = dev
    va = reserve(acl, 8 * MiB)
    h, h4 = physical(acl), physical(acl, 4 * MiB)
    assert acl.rt.map_mem(va, 4 * MiB, 0, h, 0) == E_PARAM                # size must be the physical size
    assert acl.rt.map_mem(va, G2M, G2M, h, 0) == E_PARAM                   # offset must be 0
    assert acl.rt.map_mem(va, G2M, 0, h, 1) == E_INVALID                   # flags must be 0
    assert acl.rt.map_mem(va + 4096, G2M, 0, h, 0) == E_PARAM              # not on a granule
    assert acl.rt.map_mem(va + 6 * MiB, 4 * MiB, 0, h4, 0) == E_PARAM      # overruns the reservation
    assert acl.rt.map_mem(VMM_BASE - G2M, G2M, 0, h, 0) == E_PARAM         # not reserved
    assert acl.rt.map_mem(va, G2M, 0, 0x7_0000_0000 + 99999, 0) == E_PARAM  # not a handle
    ok(acl, acl.rt.map_mem(va + 2 * MiB, G2M, 0, h, 0))                    # anywhere inside, on a granule
    assert acl.rt.map_mem(va, 4 * MiB, 0, h4, 0) == E_PARAM                # overlaps the first mapping
    ok(acl, acl.rt.map_mem(va + 4 * MiB, 4 * MiB, 0, h4, 0))
    # one reservation, one device
    other = physical(acl, device=1)
    assert acl.rt.map_mem(va, G2M, 0, other, 0) == E_PARAM
    assert "two devices" in acl.get_recent_err_msg()
    # unmapping needs the start of a mapping; release needs every mapping gone
    assert acl.rt.unmap_mem(va + 3 * MiB) == E_PARAM
    assert acl.rt.unmap_mem(va) == E_PARAM
    assert acl.rt.release_mem_address(va) == E_PARAM
    ok(acl, acl.rt.unmap_mem(va + 2 * MiB))
    assert acl.rt.release_mem_address(va) == E_PARAM
    ok(acl, acl.rt.unmap_mem(va + 4 * MiB))
    ok(acl, acl.rt.release_mem_address(va))
    for handle in (h, h4, other):
        ok(acl, acl.rt.free_physical(handle))


def test_lifecycle_and_accounting(dev):
    acl = dev
    before = hbm_free(acl)
    va = reserve(acl, 4 * MiB)
    assert hbm_free(acl) == before                      # reserving costs no memory
    h = physical(acl, 4 * MiB)
    assert hbm_free(acl) == before - 4 * MiB
    ok(acl, acl.rt.map_mem(va, 4 * MiB, 0, h, 0))
    assert hbm_free(acl) == before - 4 * MiB            # mapping costs none either
    assert not from_device(acl, va, 4 * MiB).any()      # fresh memory reads as zero
    data = pattern(4 * MiB)
    to_device(acl, va, data)
    # freeing a mapped handle: the memory lives on until the last unmap
    ok(acl, acl.rt.free_physical(h))
    assert hbm_free(acl) == before - 4 * MiB
    assert from_device(acl, va, 4 * MiB).tobytes() == data.tobytes()
    assert acl.rt.map_mem(va, 4 * MiB, 0, h, 0) == E_PARAM       # the handle itself is gone
    ok(acl, acl.rt.unmap_mem(va))
    assert hbm_free(acl) == before
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(data), 16, va, 16, 2) == E_PARAM     # unmapped now
    ok(acl, acl.rt.release_mem_address(va))
    assert acl.rt.memset(va, 16, 0, 16) == E_PARAM                                   # not even reserved
    assert "reservation" in acl.get_recent_err_msg()


def test_reserved_but_unmapped_access_is_refused(dev):
    acl = dev
    va = reserve(acl, 6 * MiB)
    h = physical(acl)
    ok(acl, acl.rt.map_mem(va + G2M, G2M, 0, h, 0))      # [va, +2M) and [va+4M, +2M) stay unmapped
    host = np.zeros(G2M, np.uint8)
    hp = acl.util.numpy_to_ptr(host)
    assert acl.rt.memcpy(va, G2M, hp, G2M, 1) == E_PARAM
    assert "not mapped" in acl.get_recent_err_msg()
    assert acl.rt.memcpy(hp, G2M, va + 3 * MiB, G2M, 2) == E_PARAM        # runs into the hole
    assert acl.rt.memset(va + 6 * MiB - 16, 32, 0, 32) == E_PARAM         # past the reservation
    stream = out(acl, acl.rt.create_stream())
    assert acl.rt.memset_async(va, 16, 1, 16, stream) == E_PARAM
    ok(acl, acl.rt.memcpy(va + G2M, G2M, hp, G2M, 1))                     # the mapped part works
    ok(acl, acl.rt.unmap_mem(va + G2M))
    ok(acl, acl.rt.release_mem_address(va))
    ok(acl, acl.rt.free_physical(h))
    ok(acl, acl.rt.destroy_stream(stream))


# ============================================================================ using mapped memory
def test_two_physical_pieces_copied_as_one_range(dev):
    """Two handles mapped back to back are one 4 MiB range for copies and memsets; each
    physical piece holds its half (seen through mappings of its own)."""
    acl = dev
    va = reserve(acl, 4 * MiB)
    h1, h2 = physical(acl), physical(acl)
    ok(acl, acl.rt.map_mem(va, G2M, 0, h1, 0))
    ok(acl, acl.rt.map_mem(va + G2M, G2M, 0, h2, 0))
    data = pattern(4 * MiB, 3)
    to_device(acl, va, data)                                          # sync H2D across both
    assert from_device(acl, va, 4 * MiB).tobytes() == data.tobytes()
    single = reserve(acl, G2M)
    ok(acl, acl.rt.map_mem(single, G2M, 0, h2, 0))                    # h2 alone
    assert from_device(acl, single, G2M).tobytes() == data[G2M:].tobytes()

    # asynchronous: pinned -> VA (unaligned, across the seam) -> device memory -> pinned
    stream = out(acl, acl.rt.create_stream())
    n = 3 * MiB
    pinned = out(acl, acl.rt.malloc_host(n))
    back = out(acl, acl.rt.malloc_host(n))
    plain = out(acl, acl.rt.malloc(n, 0))
    src = acl.util.ptr_to_numpy(pinned, (n,), 2)
    src[:] = pattern(n, 9)
    start = va + MiB - 100
    ok(acl, acl.rt.memcpy_async(start, n, pinned, n, acl.ACL_MEMCPY_HOST_TO_DEVICE, stream))
    ok(acl, acl.rt.memcpy_async(plain, n, start, n, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, stream))
    ok(acl, acl.rt.memcpy_async(back, n, plain, n, acl.ACL_MEMCPY_DEVICE_TO_HOST, stream))
    ok(acl, acl.rt.synchronize_stream(stream))
    assert acl.util.ptr_to_numpy(back, (n,), 2).tobytes() == src.tobytes()
    # VA -> VA (overlapping pieces on both sides), synchronous D2D
    ok(acl, acl.rt.memcpy(va, G2M + 4096, start, G2M + 4096, acl.ACL_MEMCPY_DEVICE_TO_DEVICE))
    assert from_device(acl, va, G2M + 4096).tobytes() == src[:G2M + 4096].tobytes()
    # memset across the seam, sync and async
    ok(acl, acl.rt.memset(va + G2M - 10, 20, 0xEE, 20))
    ok(acl, acl.rt.memset_async(va + G2M + 10, 100, 0xDD, 100, stream))
    ok(acl, acl.rt.synchronize_stream(stream))
    seen = from_device(acl, va + G2M - 10, 120)
    assert (seen[:20] == 0xEE).all() and (seen[20:] == 0xDD).all()
    # 2-D copy whose rows straddle the seam (sync and async)
    rows = np.arange(16 * 64, dtype=np.uint8).reshape(16, 64)
    dst2d = va + G2M - 8 * 128
    ok(acl, acl.rt.memcpy2d(dst2d, 128, acl.util.numpy_to_ptr(rows), 64, 64, 16, acl.ACL_MEMCPY_HOST_TO_DEVICE))
    got = from_device(acl, dst2d, 16 * 128).reshape(16, 128)[:, :64]
    assert (got == rows).all()
    ok(acl, acl.rt.memcpy2d_async(plain, 64, dst2d, 128, 64, 16, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, stream))
    ok(acl, acl.rt.synchronize_stream(stream))
    assert (from_device(acl, plain, 16 * 64).reshape(16, 64) == rows).all()

    for v in (va, va + G2M, single):
        ok(acl, acl.rt.unmap_mem(v))
    for v in (va, single):
        ok(acl, acl.rt.release_mem_address(v))
    ok(acl, acl.rt.free_physical(h1))
    ok(acl, acl.rt.free_physical(h2))
    ok(acl, acl.rt.free(plain))
    ok(acl, acl.rt.free_host(pinned))
    ok(acl, acl.rt.free_host(back))
    ok(acl, acl.rt.destroy_stream(stream))


def test_same_physical_memory_at_two_addresses(dev):
    acl = dev
    h = physical(acl)
    va1, va2 = reserve(acl, G2M), reserve(acl, 4 * MiB)
    ok(acl, acl.rt.map_mem(va1, G2M, 0, h, 0))
    ok(acl, acl.rt.map_mem(va2 + G2M, G2M, 0, h, 0))
    to_device(acl, va1 + 4096, np.full(4096, 0x5C, np.uint8))
    assert (from_device(acl, va2 + G2M + 4096, 4096) == 0x5C).all()
    ok(acl, acl.rt.memset(va2 + G2M, 16, 0x01, 16))
    assert (from_device(acl, va1, 16) == 1).all()
    # the memory goes with the last of its mappings, after the handle was freed
    before = hbm_free(acl)
    ok(acl, acl.rt.free_physical(h))
    ok(acl, acl.rt.unmap_mem(va1))
    assert hbm_free(acl) == before
    assert (from_device(acl, va2 + G2M, 16) == 1).all()
    ok(acl, acl.rt.unmap_mem(va2 + G2M))
    assert hbm_free(acl) == before + G2M
    for va in (va1, va2):
        ok(acl, acl.rt.release_mem_address(va))


def test_value_ops_through_a_va(dev):
    acl = dev
    h = physical(acl)
    va = reserve(acl, G2M)
    ok(acl, acl.rt.map_mem(va, G2M, 0, h, 0))
    with pytest.raises(ValueError, match="device memory"):    # as for any device pointer
        acl.util.ptr_to_numpy(va, (16,), 11)
    stream = out(acl, acl.rt.create_stream())
    ok(acl, acl.rt.value_write(va + 1024, 77, 0, stream))
    ok(acl, acl.rt.value_wait(va + 1024, 77, 1, stream))  # EQ
    ok(acl, acl.rt.synchronize_stream(stream))
    assert from_device(acl, va + 1024, 8).view(np.uint64)[0] == 77
    ok(acl, acl.rt.unmap_mem(va))
    ok(acl, acl.rt.release_mem_address(va))
    ok(acl, acl.rt.free_physical(h))
    ok(acl, acl.rt.destroy_stream(stream))


@kernel
def scale_add(ctx, dst, src, n):
    """dst[i] = 2 * src[i] + 1 over n int32 (dst and src may be VMM addresses)."""
    ctx.gm(dst, np.int32, n)[:] = ctx.gm(src, np.int32, n) * 2 + 1


@kernel
def touch(ctx, p):
    ctx.gm(p, np.uint8, 16)[:] = 1


def test_kernels_take_vmm_addresses(dev):
    acl = dev
    va = reserve(acl, 4 * MiB)
    h1, h2 = physical(acl), physical(acl)
    ok(acl, acl.rt.map_mem(va, G2M, 0, h1, 0))
    ok(acl, acl.rt.map_mem(va + G2M, G2M, 0, h2, 0))
    n = G2M // 4
    src = np.arange(n, dtype=np.int32)
    to_device(acl, va, src)
    stream = out(acl, acl.rt.create_stream())
    assert scale_add[1, stream](va + G2M, va, n) == 0          # each pointer within one mapping
    ok(acl, acl.rt.synchronize_stream(stream))
    assert (from_device(acl, va + G2M, G2M).view(np.int32) == src * 2 + 1).all()
    # reserved but unmapped, or across a seam: a device fault at the next synchronisation
    ok(acl, acl.rt.unmap_mem(va + G2M))
    assert touch[1, stream](va + G2M + 64) == 0
    assert acl.rt.synchronize_stream(stream) == E_VECTOR
    assert scale_add[1, stream](va + 4096, va, n) == 0         # 2 MiB from va+4096 crosses into the hole
    assert acl.rt.synchronize_stream(stream) == E_VECTOR
    ok(acl, acl.rt.unmap_mem(va))
    ok(acl, acl.rt.release_mem_address(va))
    ok(acl, acl.rt.free_physical(h1))
    ok(acl, acl.rt.free_physical(h2))
    ok(acl, acl.rt.destroy_stream(stream))


def test_peer_device_memory_through_a_va(dev):
    """Physical memory of device 1 mapped in this process, used from device 0: peer access rules."""
    acl = dev
    h = physical(acl, device=1)
    va = reserve(acl, G2M)
    ok(acl, acl.rt.map_mem(va, G2M, 0, h, 0))
    host = np.arange(4096, dtype=np.uint8)
    assert acl.rt.memcpy(va, 4096, acl.util.numpy_to_ptr(host), 4096, 1) == E_PARAM   # 0 -> 1 not enabled
    ok(acl, acl.rt.device_enable_peer_access(1, 0))
    ok(acl, acl.rt.memcpy(va, 4096, acl.util.numpy_to_ptr(host), 4096, 1))
    assert from_device(acl, va, 4096).tobytes() == host.tobytes()
    ok(acl, acl.rt.device_disable_peer_access(1))
    ok(acl, acl.rt.unmap_mem(va))
    ok(acl, acl.rt.release_mem_address(va))
    ok(acl, acl.rt.free_physical(h))


# ============================================================================ handles and access
def test_retain_properties_and_access(dev):
    acl = dev
    h = physical(acl, 4 * MiB)
    va = reserve(acl, 4 * MiB)
    ok(acl, acl.rt.map_mem(va, 4 * MiB, 0, h, 0))
    assert acl.rt.mem_retain_allocation_handle(va + 12345) == (h, 0)
    assert acl.rt.mem_retain_allocation_handle(va - 1)[1] == E_PARAM
    assert acl.rt.mem_get_allocation_properties_from_handle(h) == (prop(0), 0)
    # access: the mapping's device has read-write access after map_mem
    device0, device1, host = dict(type=1, id=0), dict(type=1, id=1), dict(type=0, id=0)
    assert acl.rt.mem_get_access(va, device0) == (RW, 0)
    assert acl.rt.mem_get_access(va + MiB, device1) == (0, 0)
    descs = [dict(flags=RW, location=device1), dict(flags=RW, location=host)]
    ok(acl, acl.rt.mem_set_access(va, 4 * MiB, descs, 2))
    assert acl.rt.mem_get_access(va, device1) == (RW, 0)
    assert acl.rt.mem_get_access(va, host) == (RW, 0)
    assert acl.rt.mem_set_access(va, G2M, descs, 1) == E_PARAM           # not the mapped size
    assert acl.rt.mem_set_access(va + G2M, G2M, descs, 1) == E_PARAM     # not a mapping start
    assert acl.rt.mem_set_access(va, 4 * MiB, [dict(flags=1, location=device1)], 1) == E_PARAM   # READ only
    assert acl.rt.mem_set_access(va, 4 * MiB, [dict(flags=RW, location=dict(type=1, id=9))], 1) == E_DEVICE_ID
    assert acl.rt.mem_set_access(va, 4 * MiB, descs, 3) == E_INVALID     # count > len(desc)
    assert acl.rt.mem_get_access(va + 4 * MiB, device0)[1] == E_PARAM
    # the retain holds a reference: two frees are needed, the second one with the unmap
    before = hbm_free(acl)
    ok(acl, acl.rt.free_physical(h))
    ok(acl, acl.rt.unmap_mem(va))
    assert hbm_free(acl) == before                    # the retained reference keeps it
    ok(acl, acl.rt.free_physical(h))
    assert hbm_free(acl) == before + 4 * MiB
    ok(acl, acl.rt.release_mem_address(va))


# ============================================================================ sharing between processes
def test_share_with_pid_validation(dev, board):
    acl = dev
    h = physical(acl, 4 * MiB)
    va = reserve(acl, 4 * MiB)
    ok(acl, acl.rt.map_mem(va, 4 * MiB, 0, h, 0))
    data = pattern(4 * MiB, 5)
    to_device(acl, va, data)
    shareable = out(acl, acl.rt.mem_export_to_shareable_handle(h, 0, 0))
    assert isinstance(shareable, int) and 0 < shareable < 1 << 64
    assert acl.rt.mem_export_to_shareable_handle(h, 0, 0)[1] == E_PARAM    # 1:1 per handle
    assert acl.rt.mem_import_from_shareable_handle(shareable, 0)[1] == E_PARAM   # not in the exporter
    with peer_on(board, 0) as b:
        imp = "acl.rt.mem_import_from_shareable_handle(sh, 0)"
        assert b.ev(imp, sh=shareable) == (0, E_NO_PERMISSION)
        assert b.ev("acl.rt.mem_set_pid_to_shareable_handle(sh, [os.getpid()])") == E_NO_PERMISSION
        ok(acl, acl.rt.mem_set_pid_to_shareable_handle(shareable, [b.pid]))
        b.do(f"h, ret = {imp}; ok(ret); va = vmm_map(h, n)", n=4 * MiB)
        assert b.ev("get(va, n).tobytes() == data", data=data.tobytes())
        assert b.ev("acl.rt.mem_get_allocation_properties_from_handle(h)") == (prop(0), 0)
        assert b.ev("acl.rt.mem_export_to_shareable_handle(h, 0, 0)[1]") == E_PARAM   # imported
        b.do("put(va + 4096, np.full(4096, 0xA1, np.uint8))")
        assert (from_device(acl, va + 4096, 4096) == 0xA1).all()
        b.do("ok(acl.rt.unmap_mem(va)); ok(acl.rt.release_mem_address(va)); ok(acl.rt.free_physical(h))")
    ok(acl, acl.rt.unmap_mem(va))
    ok(acl, acl.rt.release_mem_address(va))
    ok(acl, acl.rt.free_physical(h))


def test_share_without_pid_validation_and_v2(dev, board):
    acl = dev
    h, h2 = physical(acl), physical(acl)
    to_device_va = reserve(acl, 4 * MiB)
    ok(acl, acl.rt.map_mem(to_device_va, G2M, 0, h, 0))
    ok(acl, acl.rt.map_mem(to_device_va + G2M, G2M, 0, h2, 0))
    to_device(acl, to_device_va, pattern(4 * MiB, 1))
    s1 = out(acl, acl.rt.mem_export_to_shareable_handle(h, 0, NO_PID))
    s2 = out(acl, acl.rt.mem_export_to_shareable_handle_v2(h2, NO_PID, 0x1))       # SHARE_HANDLE_TYPE_DEFAULT
    assert s1 != s2
    assert acl.rt.mem_export_to_shareable_handle_v2(h2, 0, 0x2)[1] == E_NOT_SUPPORT  # FABRIC: A3 only
    assert acl.rt.mem_set_pid_to_shareable_handle_v2(s2, 0x1, [1, 2]) == 0
    assert acl.rt.mem_set_pid_to_shareable_handle_v2(s2, 0x2, [1]) == E_NOT_SUPPORT
    assert acl.rt.mem_export_to_shareable_handle(h2, 0, 0x4)[1] == E_INVALID
    assert acl.rt.mem_export_to_shareable_handle(h2, 2, 0)[1] == E_PARAM             # handleType POSIX
    with peer_on(board, 0) as b:
        b.do("""
            h1, ret = acl.rt.mem_import_from_shareable_handle(s1, 0); ok(ret)
            h2, ret = acl.rt.mem_import_from_shareable_handle_v2(s2, 1, 0); ok(ret)   # current device
            va, ret = acl.rt.reserve_mem_address(n, 0, 0, 0); ok(ret)
            ok(acl.rt.map_mem(va, n // 2, 0, h1, 0)); ok(acl.rt.map_mem(va + n // 2, n // 2, 0, h2, 0))
        """, s1=s1, s2=s2, n=4 * MiB)
        assert b.ev("get(va, n).tobytes() == data", data=pattern(4 * MiB, 1).tobytes())
        # importing the same shareable again gives the same handle, one more reference
        assert b.ev("acl.rt.mem_import_from_shareable_handle(s1, 0)") == (b.ev("h1"), 0)
        assert b.ev("acl.rt.free_physical(h1)") == 0
        # an imported handle and one from malloc_physical may not share a reservation
        b.do("mine, ret = acl.rt.malloc_physical(2 << 20, p, 0); ok(ret)", p=prop(0))
        b.do("va2, ret = acl.rt.reserve_mem_address(4 << 20, 0, 0, 0); ok(ret); ok(acl.rt.map_mem(va2, 2 << 20, 0, h1, 0))")
        assert b.ev("acl.rt.map_mem(va2 + (2 << 20), 2 << 20, 0, mine, 0)") == E_PARAM
        assert b.ev("acl.rt.mem_import_from_shareable_handle_v2(s1, 1, 1)[1]") == E_INVALID   # flags
        assert b.ev("acl.rt.mem_import_from_shareable_handle_v2(s1, 2, 0)[1]") == E_NOT_SUPPORT
        assert b.ev("acl.rt.mem_import_from_shareable_handle(12345, 0)[1]") == E_PARAM     # unknown handle
    for va in (to_device_va, to_device_va + G2M):
        ok(acl, acl.rt.unmap_mem(va))
    ok(acl, acl.rt.release_mem_address(to_device_va))
    ok(acl, acl.rt.free_physical(h))
    ok(acl, acl.rt.free_physical(h2))


def test_exporter_free_keeps_memory_until_importer_frees(acl, board):
    with peer_on(board, 0) as b:
        ok(acl, acl.rt.set_device(0))
        before = hbm_free(acl)
        h = physical(acl, 4 * MiB)
        va = reserve(acl, 4 * MiB)
        ok(acl, acl.rt.map_mem(va, 4 * MiB, 0, h, 0))
        data = pattern(4 * MiB, 8)
        to_device(acl, va, data)
        shareable = out(acl, acl.rt.mem_export_to_shareable_handle(h, 0, NO_PID))
        b.do("h, ret = acl.rt.mem_import_from_shareable_handle(s, 0); ok(ret)", s=shareable)
        ok(acl, acl.rt.unmap_mem(va))
        ok(acl, acl.rt.free_physical(h))                 # the exporter is done with it ...
        assert hbm_free(acl) == before - 4 * MiB         # ... the importer still holds it
        b.do("va = vmm_map(h, n); assert get(va, n).tobytes() == data", n=4 * MiB, data=data.tobytes())
        with peer_on(board, 0) as late:                  # the key closed with the exporter's free
            assert late.ev("acl.rt.mem_import_from_shareable_handle(s, 0)[1]", s=shareable) == E_PARAM
        b.do("ok(acl.rt.unmap_mem(va)); ok(acl.rt.free_physical(h))")
        assert wait_until(lambda: hbm_free(acl) == before), hbm_free(acl)
    ok(acl, acl.rt.release_mem_address(va))


def test_importer_killed_leaves_exporter_memory_intact(dev, board):
    acl = dev
    h = physical(acl)
    va = reserve(acl, G2M)
    ok(acl, acl.rt.map_mem(va, G2M, 0, h, 0))
    data = pattern(G2M, 2)
    to_device(acl, va, data)
    shareable = out(acl, acl.rt.mem_export_to_shareable_handle(h, 0, NO_PID))
    b = peer_on(board, 0)
    try:
        b.do("h, ret = acl.rt.mem_import_from_shareable_handle(s, 0); ok(ret); va = vmm_map(h, 2 << 20)",
             s=shareable)
        pid = b.pid
    finally:
        b.kill()
        b.close()
    assert wait_until(lambda: pid not in [c["pid"] for c in launcher.status(board)["clients"]], timeout=15)
    assert from_device(acl, va, G2M).tobytes() == data.tobytes()
    before = hbm_free(acl)
    ok(acl, acl.rt.unmap_mem(va))
    ok(acl, acl.rt.free_physical(h))
    assert hbm_free(acl) == before + G2M                # nobody else holds it any more
    ok(acl, acl.rt.release_mem_address(va))


def test_import_after_exporter_freed_fails(dev, board):
    acl = dev
    h = physical(acl)
    shareable = out(acl, acl.rt.mem_export_to_shareable_handle(h, 0, NO_PID))
    ok(acl, acl.rt.free_physical(h))
    with peer_on(board, 0) as b:
        assert b.ev("acl.rt.mem_import_from_shareable_handle(s, 0)[1]", s=shareable) == E_PARAM


def test_cross_device_import(dev, board):
    """Imported on another device: allowed where P2P is; the copies then need peer access."""
    acl = dev
    h = physical(acl)
    va = reserve(acl, G2M)
    ok(acl, acl.rt.map_mem(va, G2M, 0, h, 0))
    data = pattern(G2M, 4)
    to_device(acl, va, data)
    shareable = out(acl, acl.rt.mem_export_to_shareable_handle(h, 0, NO_PID))
    with peer_on(board, 2) as b:
        b.do("h, ret = acl.rt.mem_import_from_shareable_handle(s, 2); ok(ret); va = vmm_map(h, 2 << 20)",
             s=shareable)
        assert b.ev("acl.rt.mem_get_allocation_properties_from_handle(h)[0]['location']") == dict(type=1, id=2)
        assert b.ev("acl.rt.memcpy(acl.util.numpy_to_ptr(np.zeros(16, np.uint8)), 16, va, 16, 2)") == E_PARAM
        b.do("""
            ok(acl.rt.device_enable_peer_access(0, 0))
            s, ret = acl.rt.create_stream(); ok(ret)
            local, ret = acl.rt.malloc(n, 0); ok(ret)
            ok(acl.rt.memcpy_async(local, n, va, n, 3, s)); ok(acl.rt.synchronize_stream(s))
            assert get(local, n).tobytes() == data
        """, n=G2M, data=data.tobytes())
        b.do("ok(acl.rt.unmap_mem(va)); ok(acl.rt.free_physical(h))")
    ok(acl, acl.rt.unmap_mem(va))
    ok(acl, acl.rt.release_mem_address(va))
    ok(acl, acl.rt.free_physical(h))


def test_cross_island_import_is_refused(islands_board):
    with peer_on(islands_board, 0) as a, peer_on(islands_board, 6) as b:
        a.do("h, ret = acl.rt.malloc_physical(2 << 20, p, 0); ok(ret)", p=prop(0))
        shareable = a.ev("acl.rt.mem_export_to_shareable_handle(h, 0, 1)")[0]
        assert b.ev("acl.rt.mem_import_from_shareable_handle(s, 6)[1]", s=shareable) == E_PARAM
        assert "peer access" in b.ev("acl.get_recent_err_msg()")
        assert b.ev("acl.rt.mem_import_from_shareable_handle(s, 2)[1]") == 0          # same island
        assert b.ev("acl.rt.mem_set_pid_to_shareable_handle(s, [1])") == E_NO_PERMISSION


# ============================================================================ FABRIC handles (A3 supernodes)
FABRIC, DEFAULT = 0x2, 0x1                    # aclrtMemSharedHandleType


@pytest.fixture(scope="module")
def supernode():
    with extra_board("a3sn", topo=small_supernode()) as name:
        yield name


def test_fabric_handle_crosses_the_servers_of_a_supernode(supernode):
    """Exported as FABRIC on server 0, imported on server 1 (and on server 0): both see
    one block of device 0's HBM, by copies and by a kernel, writes included."""
    data = pattern(G2M, 9)
    with peer_on(supernode, 0, node=0) as a, peer_on(supernode, 0, node=1) as b, \
            peer_on(supernode, 0, node=0) as c:
        a.do("h, ret = acl.rt.malloc_physical(n, p, 0); ok(ret); va = vmm_map(h, n)", n=G2M, p=prop(0))
        a.do("put(va, np.frombuffer(d, np.uint8))", d=data.tobytes())
        shareable = a.ev("acl.rt.mem_export_to_shareable_handle_v2(h, 1, 2)")[0]       # no pid check, FABRIC
        assert b.ev("acl.rt.mem_import_from_shareable_handle_v2(s, 1, 0)[1]", s=shareable) == E_PARAM  # DEFAULT
        assert b.ev("acl.rt.mem_import_from_shareable_handle(s, 0)[1]", s=shareable) == E_PARAM
        for peer in (b, c):          # another server, then the exporter's own
            peer.do("h, ret = acl.rt.mem_import_from_shareable_handle_v2(s, 2, 0); ok(ret); va = vmm_map(h, n)",
                    s=shareable, n=G2M)
            assert peer.ev("get(va, n).tobytes() == d", n=G2M, d=data.tobytes())
        b.do("""
            from mdev.kernel import kernel
            @kernel
            def copy_in(ctx, dst, src, n):
                ctx.gm(dst, np.uint8, n)[:] = ctx.gm(src, np.uint8, n)
            st, ret = acl.rt.create_stream(); ok(ret)
            mine, ret = acl.rt.malloc(n, 0); ok(ret)
            ok(copy_in[1, st](mine, va, n)); ok(acl.rt.synchronize_stream(st), "a kernel on server 1 reading it")
        """, n=G2M)
        assert b.ev("get(mine, n).tobytes() == d", n=G2M, d=data.tobytes())
        b.do("ok(acl.rt.free(mine)); ok(acl.rt.destroy_stream(st))")
        b.do("put(va + 4096, np.full(4096, 0xA7, np.uint8))")
        assert (np.frombuffer(a.ev("get(va + 4096, 4096).tobytes()"), np.uint8) == 0xA7).all()
        for peer in (b, c, a):
            peer.do("ok(acl.rt.unmap_mem(va)); ok(acl.rt.release_mem_address(va)); ok(acl.rt.free_physical(h))")


def test_fabric_handle_with_pid_validation(supernode):
    with peer_on(supernode, 0, node=0) as a, peer_on(supernode, 1, node=1) as b:
        a.do("h, ret = acl.rt.malloc_physical(n, p, 0); ok(ret)", n=G2M, p=prop(0))
        shareable = a.ev("acl.rt.mem_export_to_shareable_handle_v2(h, 0, 2)")[0]
        imp = "acl.rt.mem_import_from_shareable_handle_v2(s, 2, 0)[1]"
        assert b.ev(imp, s=shareable) == E_NO_PERMISSION
        assert a.ev("acl.rt.mem_set_pid_to_shareable_handle_v2(s, 1, [p])", s=shareable, p=b.pid) == E_PARAM
        assert a.ev("acl.rt.mem_set_pid_to_shareable_handle_v2(s, 2, [p])", s=shareable, p=b.pid) == 0
        assert b.ev(imp) == 0
        b.do("ok(acl.rt.free_physical(acl.rt.mem_import_from_shareable_handle_v2(s, 2, 0)[0]))")
        a.do("ok(acl.rt.free_physical(h))")


def test_fabric_refused_without_a3_fabric(board, islands_board):
    """Not an A3 part (pcie4: Ascend910B-class): 207000 on every FABRIC call; DEFAULT still works."""
    for name in (board, islands_board):
        with peer_on(name, 0) as a:
            a.do("h, ret = acl.rt.malloc_physical(n, p, 0); ok(ret)", n=G2M, p=prop(0))
            assert a.ev("acl.rt.mem_export_to_shareable_handle_v2(h, 1, 2)[1]") == E_NOT_SUPPORT
            message = a.ev("acl.get_recent_err_msg()")
            assert "Atlas A3" in message and "Ascend910" in message, message      # says what the board has
            s = a.ev("acl.rt.mem_export_to_shareable_handle_v2(h, 1, 1)")[0]
            assert a.ev("acl.rt.mem_import_from_shareable_handle_v2(s, 2, 0)[1]", s=s) == E_NOT_SUPPORT
            assert a.ev("acl.rt.mem_set_pid_to_shareable_handle_v2(s, 2, [1])", s=s) == E_NOT_SUPPORT
            a.do("ok(acl.rt.free_physical(h))")


def test_fabric_routes_only_on_a3_supernode_fabric():
    a3 = small_supernode()
    assert a3.fabric_reachable(0, 3) and a3.fabric_reachable(1, 0) and a3.fabric_reachable(2, 2)
    a2 = launcher.resolve_topology("a2-4x8")                 # A2 servers joined by RoCE
    assert not a2.fabric_reachable(0, 8) and not a2.fabric_reachable(0, 1)
