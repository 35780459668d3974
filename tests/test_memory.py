"""Device and pinned allocation, copies (all kinds, 1-D and 2-D, sync and async), memsets,
pageable host memory (the CANN Runtime API reference on hiascend.com: Memory Management)."""

from __future__ import annotations

import os
import stat
import threading

import numpy as np
import pytest

from conftest import SMALL_HBM
from async_util import ok, out
from helpers import GiB, MiB, attached, extra_board, from_device, hbm_free, to_device
from mdev.naming import BoardPaths
from mdev.memory import address

NPY_UINT8, NPY_INT32, NPY_FLOAT32 = 2, 5, 11


def used_by(acl, size, policy):
    """Bytes of HBM one allocation of ``size`` under ``policy`` takes, and its pointer."""
    before = hbm_free(acl)
    ptr, ret = acl.rt.malloc(size, policy)
    assert ret == 0, acl.get_recent_err_msg()
    return before - hbm_free(acl), ptr


def rand_bytes(n, seed=0):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def busy(acl, stream, ptr, nbytes, times=4, value=0x5A):
    """Queue ``times`` memsets of ``nbytes`` on ``stream``: tens of ms of device work."""
    for _ in range(times):
        assert acl.rt.memset_async(ptr, nbytes, value, nbytes, stream) == 0


# ---------------------------------------------------------------------------- allocation
# (policy, size, bytes reserved, start alignment) -- spec 7.1 and rule 16:
# ALIGN_UP(size, 32) + 32, in whole pages of 4 KiB / 2 MiB (HUGE_FIRST: <= 1 MiB -> 4 KiB)
GEOMETRY = [
    ("ACL_MEM_MALLOC_HUGE_FIRST", 100, 4096, 4096),
    ("ACL_MEM_MALLOC_HUGE_FIRST", 1 * MiB, MiB + 4096, 4096),
    ("ACL_MEM_MALLOC_HUGE_FIRST", MiB + 1, 2 * MiB, 2 * MiB),
    ("ACL_MEM_MALLOC_HUGE_FIRST", 4 * MiB, 6 * MiB, 2 * MiB),          # 4 MiB + 32 -> three huge pages
    ("ACL_MEM_MALLOC_HUGE_ONLY", 100, 2 * MiB, 2 * MiB),
    ("ACL_MEM_MALLOC_NORMAL_ONLY", 3 * MiB, 3 * MiB + 4096, 4096),
    ("ACL_MEM_MALLOC_NORMAL_ONLY", 4064, 4096, 4096),                 # 4064 + 32 fits one page
    ("ACL_MEM_MALLOC_NORMAL_ONLY", 4065, 8192, 4096),
    ("ACL_MEM_MALLOC_HUGE_FIRST_P2P", 3 * MiB, 4 * MiB, 2 * MiB),
    ("ACL_MEM_MALLOC_HUGE_ONLY_P2P", 5000, 2 * MiB, 2 * MiB),
    ("ACL_MEM_MALLOC_NORMAL_ONLY_P2P", 5000, 8192, 4096),
    ("ACL_MEM_TYPE_HIGH_BAND_WIDTH", 100, 4096, 4096),                # bandwidth hints: no effect
    ("ACL_MEM_TYPE_LOW_BAND_WIDTH", 3 * MiB, 4 * MiB, 2 * MiB),
]


@pytest.mark.parametrize("policy,size,reserved,align", GEOMETRY)
def test_malloc_policy_geometry(dev, policy, size, reserved, align):
    acl = dev
    base = hbm_free(acl)
    taken, ptr = used_by(acl, size, getattr(acl, policy))
    assert taken == reserved
    assert ptr % align == 0 and ptr % 64 == 0
    assert address.split(ptr)[0] == 0
    assert acl.rt.free(ptr) == 0
    assert hbm_free(acl) == base


@pytest.mark.parametrize("size,reserved", [(100, 4096), (3 * MiB, 4 * MiB), (MiB + MiB // 2, MiB + MiB // 2 + 4096)])
def test_malloc_policy_outside_enum(dev, size, reserved):
    # "a value outside the enum is treated as huge pages if size >= 2 MiB, else normal pages"
    taken, ptr = used_by(dev, size, 0x42)
    assert taken == reserved
    assert dev.rt.free(ptr) == 0


def test_malloc_align32(dev):
    acl = dev
    before = hbm_free(acl)
    ptr, ret = acl.rt.malloc_align32(4096, acl.ACL_MEM_MALLOC_NORMAL_ONLY)   # no +32: one page
    assert ret == 0 and before - hbm_free(acl) == 4096
    assert acl.rt.free(ptr) == 0


def test_malloc_huge1g(acl, monkeypatch):
    with extra_board("g1", "laptop2", hbm=2 * GiB) as name, attached(monkeypatch, name) as acl2:
        assert acl2.rt.set_device(1) == 0
        for policy in (acl2.ACL_MEM_MALLOC_HUGE1G_ONLY, acl2.ACL_MEM_MALLOC_HUGE1G_ONLY_P2P):
            taken, ptr = used_by(acl2, 100, policy)
            assert taken == GiB                                # 1 GiB pages: no extra 32 bytes
            assert ptr % GiB == 0
            assert acl2.rt.free(ptr) == 0
        base = hbm_free(acl2)
        # 1 GiB pages only: a size that needs three of them does not fit a 2 GiB device
        assert acl2.rt.malloc(2 * GiB + 1, acl2.ACL_MEM_MALLOC_HUGE1G_ONLY) == (0, acl2.ACL_ERROR_RT_MEMORY_ALLOCATION)
        a, ret = acl2.rt.malloc(GiB, acl2.ACL_MEM_MALLOC_HUGE1G_ONLY)     # exactly one page: no +32
        assert ret == 0 and hbm_free(acl2) == base - GiB
        assert acl2.rt.free(a) == 0
        assert hbm_free(acl2) == base


def test_malloc_out_of_memory(dev):
    acl = dev
    base = hbm_free(acl)
    assert acl.rt.malloc(SMALL_HBM + 1, acl.ACL_MEM_MALLOC_NORMAL_ONLY) == (0, acl.ACL_ERROR_RT_MEMORY_ALLOCATION)
    assert acl.rt.malloc(base + 1, acl.ACL_MEM_MALLOC_NORMAL_ONLY) == (0, 207001)
    assert acl.ACL_ERROR_RT_MEMORY_ALLOCATION == 207001
    # exhausting the device piece by piece ends in the same error, and freeing recovers
    ptrs = []
    while True:
        ptr, ret = acl.rt.malloc(32 * MiB - 32, acl.ACL_MEM_MALLOC_HUGE_ONLY)
        if ret:
            assert ret == 207001
            break
        ptrs.append(ptr)
    assert len(ptrs) == base // (32 * MiB)
    assert hbm_free(acl) == base - len(ptrs) * 32 * MiB
    for p in ptrs:
        assert acl.rt.free(p) == 0
    assert hbm_free(acl) == base


@pytest.mark.parametrize("size", [0, -1, 1 << 64, "1", 1.5])
def test_malloc_bad_size(dev, size):
    assert dev.rt.malloc(size, 0) == (0, dev.ACL_ERROR_INVALID_PARAM)


def test_malloc_before_set_device(acl):
    assert acl.rt.malloc(100, 0) == (0, acl.ACL_ERROR_RT_CONTEXT_NULL)


def test_fresh_memory_reads_zero(dev):
    acl = dev
    ptr, _ = acl.rt.malloc(8 * MiB, 0)
    assert not from_device(acl, ptr, 8 * MiB).any()
    to_device(acl, ptr, np.full(8 * MiB, 0xFF, np.uint8))
    assert acl.rt.free(ptr) == 0
    ptr2, _ = acl.rt.malloc(8 * MiB, 0)
    assert ptr2 == ptr                      # first fit: the same range again ...
    assert not from_device(acl, ptr2, 8 * MiB).any()      # ... and it reads zero again
    assert acl.rt.free(ptr2) == 0


def test_free_errors(dev):
    acl = dev
    ptr, _ = acl.rt.malloc(4096, 0)
    host, _ = acl.rt.malloc_host(4096)
    assert acl.rt.free(0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.free(ptr + 64) == acl.ACL_ERROR_RT_PARAM_INVALID           # interior pointer
    assert acl.rt.free(host) == acl.ACL_ERROR_RT_PARAM_INVALID               # pinned, not device
    assert acl.rt.free_host(ptr) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.free_host(0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.free(ptr) == 0
    assert acl.rt.free(ptr) == acl.ACL_ERROR_RT_PARAM_INVALID                # double free
    assert acl.rt.free_host(host) == 0
    assert acl.rt.free_host(host) == acl.ACL_ERROR_RT_PARAM_INVALID


# ---------------------------------------------------------------------------- pinned host memory
def test_malloc_host_is_shared_segment(dev, board):
    acl = dev
    before = set(BoardPaths(board).segments())
    host, ret = acl.rt.malloc_host(1 * MiB)
    assert ret == 0 and host % 64 == 0
    new = set(BoardPaths(board).segments()) - before
    assert len(new) == 1
    seg = "/dev/shm/" + new.pop().lstrip("/")
    assert f".pin.{os.getpid()}." in seg
    assert stat.S_IMODE(os.stat(seg).st_mode) == 0o600
    assert acl.rt.free_host(host) == 0
    assert not os.path.exists(seg)


def test_malloc_host_beyond_ram_is_an_error(dev):
    """Pinned memory is resident: more than the machine can hold is the allocation error at
    malloc_host, not a SIGBUS when the buffer is touched later."""
    acl = dev
    assert acl.rt.malloc_host(1 << 40) == (0, acl.ACL_ERROR_RT_MEMORY_ALLOCATION)
    assert "pin" in acl.get_recent_err_msg()
    assert acl.rt.malloc_host(0) == (0, acl.ACL_ERROR_INVALID_PARAM)
    host, ret = acl.rt.malloc_host(4 * MiB)
    assert ret == 0
    acl.util.ptr_to_numpy(host, (4 * MiB,), NPY_UINT8)[:] = 1
    assert acl.rt.free_host(host) == 0


def test_pinning_leaves_the_machine_its_headroom(dev, monkeypatch):
    """Pinned and managed memory take RAM: a size /dev/shm could hold but that would leave
    the machine less than the headroom is the allocation error (20 GB of managed memory on
    a 24 GB machine used to stall it while the pages were taken)."""
    from mdev import procfs
    from mdev.runtime.memtable import PIN_HEADROOM
    acl = dev
    ok(acl, acl.rt.set_device(0))
    monkeypatch.setattr(procfs, "memory_available", lambda: PIN_HEADROOM + 2 * MiB)
    assert acl.rt.malloc_host(4 * MiB) == (0, acl.ACL_ERROR_RT_MEMORY_ALLOCATION)
    assert "RAM" in acl.get_recent_err_msg()
    assert acl.rt.mem_alloc_managed(4 * MiB, acl.ACL_RT_MEM_ATTACH_GLOBAL) == (0, acl.ACL_ERROR_RT_MEMORY_ALLOCATION)
    host = out(acl, acl.rt.malloc_host(1 * MiB))
    ok(acl, acl.rt.free_host(host))


def test_ptr_to_numpy_is_live_view(dev):
    acl = dev
    src, _ = acl.rt.malloc_host(4096)
    dst, _ = acl.rt.malloc_host(4096)
    dptr, _ = acl.rt.malloc(4096, 0)
    stream, _ = acl.rt.create_stream()
    view = acl.util.ptr_to_numpy(src, (1024,), NPY_INT32)
    assert view.dtype == np.int32 and view.shape == (1024,)
    view[:] = np.arange(1024, dtype=np.int32) * 3
    # the device process reads the host's writes and writes back into another pinned buffer
    assert acl.rt.memcpy_async(dptr, 4096, src, 4096, acl.ACL_MEMCPY_HOST_TO_DEVICE, stream) == 0
    assert acl.rt.memcpy_async(dst, 4096, dptr, 4096, acl.ACL_MEMCPY_DEVICE_TO_HOST, stream) == 0
    out = acl.util.ptr_to_numpy(dst, (32, 32), NPY_INT32)       # view created before the copy ran
    assert acl.rt.synchronize_stream(stream) == 0
    assert (out.ravel() == np.arange(1024) * 3).all()
    # a later write through the view is seen by the next copy
    view[0] = -7
    assert acl.rt.memcpy(dptr, 4, src, 4, acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    assert from_device(acl, dptr, 4, np.int32)[0] == -7
    assert acl.util.ptr_to_numpy(src + 8, (2,), NPY_FLOAT32).dtype == np.float32
    assert bytes(acl.util.ptr_to_bytes(src, 8)) == np.array([-7, 3], np.int32).tobytes()
    for p in (src, dst):
        assert acl.rt.free_host(p) == 0


def test_pinned_memory_after_finalize_and_init(acl):
    """A device that mapped a pinned buffer before finalize must not reuse that mapping later."""
    def round_trip(n, value):
        assert acl.rt.set_device(0) == 0
        ptr, _ = acl.rt.malloc(n, 0)
        host, _ = acl.rt.malloc_host(n)
        s, _ = acl.rt.create_stream()
        assert acl.rt.memset(ptr, n, value, n) == 0
        assert acl.rt.memcpy_async(host, n, ptr, n, acl.ACL_MEMCPY_DEVICE_TO_HOST, s) == 0
        assert acl.rt.synchronize_stream(s) == 0, acl.get_recent_err_msg()
        return acl.util.ptr_to_numpy(host, (n,), NPY_UINT8)

    for n, value in ((4096, 1), (1 * MiB, 2), (8192, 3)):
        assert acl.init() == 0
        view = round_trip(n, value)
        assert (view == value).all()
        assert acl.finalize() == 0      # frees the pinned buffer without free_host


def test_host_helpers_refuse_device_and_bad_args(dev):
    acl = dev
    ptr, _ = acl.rt.malloc(4096, 0)
    with pytest.raises(ValueError):
        acl.util.ptr_to_numpy(ptr, (16,), NPY_UINT8)
    with pytest.raises(ValueError):
        acl.util.ptr_to_bytes(ptr, 16)
    with pytest.raises(ValueError):
        acl.util.ptr_to_numpy(ptr, (16,), 9999)
    with pytest.raises(TypeError):
        acl.util.numpy_to_ptr([1, 2, 3])
    with pytest.raises(ValueError):
        acl.util.numpy_contiguous_to_ptr(np.zeros((4, 4))[:, 1])
    assert acl.rt.free(ptr) == 0


# ---------------------------------------------------------------------------- memcpy
def test_memcpy_all_kinds(dev):
    acl = dev
    n = 64 * 1024
    data = rand_bytes(n, 1)
    d1, _ = acl.rt.malloc(n, 0)
    d2, _ = acl.rt.malloc(n, 0)
    pin, _ = acl.rt.malloc_host(n)
    pinned = acl.util.ptr_to_numpy(pin, (n,), NPY_UINT8)
    page_a = data.copy()
    page_b = np.zeros(n, np.uint8)
    pa, pb = acl.util.numpy_to_ptr(page_a), acl.util.numpy_to_ptr(page_b)

    # H2H: pageable -> pageable, pageable -> pinned
    assert acl.rt.memcpy(pb, n, pa, n, acl.ACL_MEMCPY_HOST_TO_HOST) == 0
    assert (page_b == data).all()
    assert acl.rt.memcpy(pin, n, pa, n, acl.ACL_MEMCPY_HOST_TO_HOST) == 0
    assert (pinned == data).all()
    # H2D from pageable, D2D, D2H into pinned
    assert acl.rt.memcpy(d1, n, pa, n, acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    assert acl.rt.memcpy(d2, n, d1, n, acl.ACL_MEMCPY_DEVICE_TO_DEVICE) == 0
    pinned[:] = 0
    assert acl.rt.memcpy(pin, n, d2, n, acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    assert (pinned == data).all()
    # HOST_TO_BUF_TO_DEVICE is a host-to-device copy
    rev = data[::-1].copy()
    assert acl.rt.memcpy(d1, n, acl.util.numpy_to_ptr(rev), n, acl.ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE) == 0
    assert (from_device(acl, d1, n) == rev).all()
    # DEFAULT infers every direction from the addresses
    page_b[:] = 0
    assert acl.rt.memcpy(d2, n, pa, n, acl.ACL_MEMCPY_DEFAULT) == 0            # H2D
    assert acl.rt.memcpy(d1, n, d2, n, acl.ACL_MEMCPY_DEFAULT) == 0            # D2D
    assert acl.rt.memcpy(pb, n, d1, n, acl.ACL_MEMCPY_DEFAULT) == 0            # D2H
    assert (page_b == data).all()
    pinned[:] = 1
    assert acl.rt.memcpy(pb, n, pin, n, acl.ACL_MEMCPY_DEFAULT) == 0           # H2H
    assert (page_b == 1).all()
    assert acl.rt.free(d1) == 0 and acl.rt.free(d2) == 0 and acl.rt.free_host(pin) == 0


def test_memcpy_offsets_and_partial(dev):
    acl = dev
    ptr, _ = acl.rt.malloc(1000, 0)
    to_device(acl, ptr, np.zeros(1000, np.uint8))
    chunk = np.arange(1, 101, dtype=np.uint8)
    # destMax larger than count copies count bytes only
    assert acl.rt.memcpy(ptr + 450, 550, acl.util.numpy_to_ptr(chunk), 100, acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    out = from_device(acl, ptr, 1000)
    assert (out[450:550] == chunk).all() and not out[:450].any() and not out[550:].any()
    # the very last byte of the allocation is addressable
    assert acl.rt.memcpy(ptr + 999, 1, acl.util.numpy_to_ptr(chunk), 1, acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    assert from_device(acl, ptr, 1000)[999] == 1
    assert acl.rt.free(ptr) == 0


def test_memcpy_zero_count(dev):
    acl = dev
    a = np.zeros(4, np.uint8)
    # count 0 succeeds and copies nothing, whatever destMax is
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(a), 0, acl.util.numpy_to_ptr(a), 0, acl.ACL_MEMCPY_HOST_TO_HOST) == 0
    ptr, _ = acl.rt.malloc(64, 0)
    assert acl.rt.free(ptr) == 0
    assert acl.rt.memcpy(ptr, 64, acl.util.numpy_to_ptr(a), 0, acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0


def test_memcpy_cross_device_needs_peer_access(dev):
    acl = dev
    a, _ = acl.rt.malloc(4096, 0)
    assert acl.rt.set_device(1) == 0
    b, _ = acl.rt.malloc(4096, 0)
    # current device 1 has not enabled access to device 0
    assert acl.rt.memcpy(b, 4096, a, 4096, acl.ACL_MEMCPY_DEVICE_TO_DEVICE) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert "peer" in acl.get_recent_err_msg()


def test_bytes_to_ptr_receives_d2h(dev):
    """pyACL samples copy device results into a bytes object and read it with np.frombuffer."""
    acl = dev
    values = np.arange(256, dtype=np.float32) / 7
    ptr, _ = acl.rt.malloc(values.nbytes, 0)
    to_device(acl, ptr, values)
    out = bytes(values.nbytes)                 # immutable, all zero
    out_ptr = acl.util.bytes_to_ptr(out)
    assert out_ptr != 0
    assert acl.rt.memcpy(out_ptr, len(out), ptr, values.nbytes, acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    assert (np.frombuffer(out, dtype=np.float32) == values).all()
    # and a bytes object as the source of an upload
    src = np.arange(64, dtype=np.uint8).tobytes()
    assert acl.rt.memcpy(ptr, 64, acl.util.bytes_to_ptr(src), 64, acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    assert from_device(acl, ptr, 64).tobytes() == src
    # a bytearray works the same way
    ba = bytearray(64)
    assert acl.rt.memcpy(acl.util.bytes_to_ptr(ba), 64, ptr, 64, acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    assert bytes(ba) == src
    assert acl.rt.free(ptr) == 0


# ---------------------------------------------------------------------------- memcpy_async
def test_memcpy_async_all_kinds_pinned(dev):
    acl = dev
    n = 256 * 1024
    data = rand_bytes(n, 2)
    d1, _ = acl.rt.malloc(n, 0)
    d2, _ = acl.rt.malloc(n, 0)
    h1, _ = acl.rt.malloc_host(n)
    h2, _ = acl.rt.malloc_host(n)
    v1 = acl.util.ptr_to_numpy(h1, (n,), NPY_UINT8)
    v2 = acl.util.ptr_to_numpy(h2, (n,), NPY_UINT8)
    v1[:] = data
    s, _ = acl.rt.create_stream()
    K = acl
    assert acl.rt.memcpy_async(d1, n, h1, n, K.ACL_MEMCPY_HOST_TO_DEVICE, s) == 0
    assert acl.rt.memcpy_async(d2, n, d1, n, K.ACL_MEMCPY_DEVICE_TO_DEVICE, s) == 0
    assert acl.rt.memcpy_async(h2, n, d2, n, K.ACL_MEMCPY_DEVICE_TO_HOST, s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    assert (v2 == data).all()
    v2[:] = 0
    assert acl.rt.memset_async(d1, n, 0, n, s) == 0
    assert acl.rt.memcpy_async(d1, n, h1, n, K.ACL_MEMCPY_DEFAULT, s) == 0
    assert acl.rt.memcpy_async(h2, n, d1, n, K.ACL_MEMCPY_DEFAULT, s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    assert (v2 == data).all()
    # asynchronous host-to-host is not supported on the EP form
    assert acl.rt.memcpy_async(h2, n, h1, n, K.ACL_MEMCPY_HOST_TO_HOST, s) == K.ACL_ERROR_RT_FEATURE_NOT_SUPPORT == 207000
    # src == dst is a no-op success
    assert acl.rt.memcpy_async(d1, n, d1, n, K.ACL_MEMCPY_DEVICE_TO_DEVICE, s) == 0
    for p in (d1, d2):
        assert acl.rt.free(p) == 0
    for p in (h1, h2):
        assert acl.rt.free_host(p) == 0


def test_memcpy_kind_is_corrected_from_the_pointers(dev):
    """As the real runtime: aclrtMemcpy copies the way the pointers say (the driver's copy
    takes no kind); aclrtMemcpyAsync and the 2-D copies correct the kind between memory the
    runtime knows and, with pageable memory on one side, refuse the kinds that cannot move
    the data (MemcpyKindAutoCorrect)."""
    acl = dev
    n = 4096
    d, _ = acl.rt.malloc(n, 0)
    pinned, _ = acl.rt.malloc_host(n)
    acl.util.ptr_to_numpy(pinned, (n,), NPY_UINT8)[:] = 7
    page = np.zeros(n, np.uint8)
    pp = acl.util.numpy_to_ptr(page)
    D2H, H2D, D2D = acl.ACL_MEMCPY_DEVICE_TO_HOST, acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_DEVICE
    # the Ascend samples' memcpy_host_DVPP read a pinned buffer back "device to host": it works
    assert acl.rt.memcpy(pp, n, pinned, n, D2H) == 0 and (page == 7).all()
    assert acl.rt.memcpy(d, n, pinned, n, D2H) == 0               # sync: the pointers decide
    s, _ = acl.rt.create_stream()
    assert acl.rt.memcpy_async(d, n, pinned, n, D2D, s) == 0      # pinned -> device: runs as H2D
    assert acl.rt.memcpy_async(pinned, n, d, n, H2D, s) == 0      # device -> pinned: runs as D2H
    assert acl.rt.synchronize_stream(s) == 0
    assert acl.rt.memcpy_async(pinned, n, d, n, acl.ACL_MEMCPY_HOST_TO_HOST, s) == 0
    assert acl.rt.memcpy_async(d, n, pp, n, D2D, s) == 0          # pageable -> device: H2D or D2D
    assert acl.rt.memcpy_async(d, n, pp, n, D2H, s) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.memcpy_async(pp, n, pinned, n, D2H, s) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.memcpy_async(pp, n, pinned, n, acl.ACL_MEMCPY_DEFAULT, s) == 207000   # H2H, async
    assert acl.rt.memcpy2d(d, 64, pinned, 64, 64, 4, D2H) == 0     # corrected to H2D
    assert acl.rt.memcpy2d(d, 64, pp, 64, 64, 4, D2H) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.synchronize_stream(s) == 0
    assert acl.rt.free(d) == 0 and acl.rt.free_host(pinned) == 0


def test_memcpy_async_within_a_device_under_every_kind(dev):
    """The short path of memcpy_async (both pointers in the stream's own device's memory)
    copies under every kind the pointers correct, and refuses what the general path refuses."""
    acl = dev
    n = 64
    a, _ = acl.rt.malloc(n, 0)
    b, _ = acl.rt.malloc(n, 0)
    s, _ = acl.rt.create_stream()
    kinds = (acl.ACL_MEMCPY_HOST_TO_HOST, acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST,
             acl.ACL_MEMCPY_DEVICE_TO_DEVICE, acl.ACL_MEMCPY_DEFAULT)
    for value, kind in enumerate(kinds, 1):
        assert acl.rt.memset(a, n, value, n) == 0 and acl.rt.memset(b, n, 0, n) == 0
        assert acl.rt.memcpy_async(b, n, a, 4, kind, s) == 0
        assert acl.rt.synchronize_stream(s) == 0
        out = np.ones(n, np.uint8)
        assert acl.rt.memcpy(acl.util.numpy_to_ptr(out), n, b, n, acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
        assert (out[:4] == value).all() and (out[4:] == 0).all()
    assert acl.rt.memcpy_async(b, n, a, n, acl.ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE, s) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.memcpy_async(b, 4, a, 8, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, s) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.memcpy_async(b, n, a, n + 1, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, s) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.memcpy_async(b, n, a, n, 99, s) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.memcpy_async(b, n, b, n, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, s) == 0      # onto itself: nothing
    assert acl.rt.synchronize_stream(s) == 0
    assert acl.rt.destroy_stream(s) == 0
    assert acl.rt.free(a) == 0 and acl.rt.free(b) == 0


def test_memcpy_async_pinned_is_asynchronous(dev):
    """With pinned host memory the copy is queued: the stream is held by a host func until
    the call has returned and been looked at, so "not done yet" is not a race."""
    acl = dev
    small, _ = acl.rt.malloc(4096, 0)
    host, _ = acl.rt.malloc_host(4096)
    view = acl.util.ptr_to_numpy(host, (4096,), NPY_UINT8)
    s, _ = acl.rt.create_stream()
    assert acl.rt.memset(small, 4096, 3, 4096) == 0
    gate = threading.Event()
    assert acl.rt.launch_host_func(s, lambda _: gate.wait(30), None) == 0
    assert acl.rt.memcpy_async(host, 4096, small, 4096, acl.ACL_MEMCPY_DEVICE_TO_HOST, s) == 0
    assert acl.rt.stream_query(s) == (acl.ACL_STREAM_STATUS_NOT_READY, 0)
    assert not view.any()
    gate.set()
    assert acl.rt.synchronize_stream(s) == 0
    assert (view == 3).all()


def test_memcpy_async_pageable_completes_before_return(dev):
    acl = dev
    n = 32 * MiB
    big, _ = acl.rt.malloc(n, 0)
    s, _ = acl.rt.create_stream()
    # D2H into pageable memory: waits for the stream's earlier work, then copies
    busy(acl, s, big, n, times=4, value=0x11)
    out = np.zeros(4096, np.uint8)
    assert acl.rt.memcpy_async(acl.util.numpy_to_ptr(out), 4096, big + n - 4096, 4096,
                               acl.ACL_MEMCPY_DEVICE_TO_HOST, s) == 0
    assert (out == 0x11).all()
    assert acl.rt.stream_query(s) == (acl.ACL_STREAM_STATUS_COMPLETE, 0)
    # H2D from pageable memory: the source may be reused as soon as the call returns
    src = np.full(4096, 0x22, np.uint8)
    assert acl.rt.memcpy_async(big, 4096, acl.util.numpy_to_ptr(src), 4096,
                               acl.ACL_MEMCPY_HOST_TO_DEVICE, s) == 0
    src[:] = 0x33
    assert acl.rt.synchronize_stream(s) == 0
    assert (from_device(acl, big, 4096) == 0x22).all()
    # bytes objects are pageable too
    blob = bytes(range(256)) * 16
    assert acl.rt.memcpy_async(big, 4096, acl.util.bytes_to_ptr(blob), 4096,
                               acl.ACL_MEMCPY_HOST_TO_DEVICE, s) == 0
    assert from_device(acl, big, 4096).tobytes() == blob
    assert acl.rt.free(big) == 0


# ---------------------------------------------------------------------------- memset
def test_memset(dev):
    acl = dev
    ptr, _ = acl.rt.malloc(1024, 0)
    assert acl.rt.memset(ptr, 1024, 0x1AB, 1024) == 0           # low 8 bits only
    assert (from_device(acl, ptr, 1024) == 0xAB).all()
    assert acl.rt.memset(ptr + 100, 924, 7, 10) == 0
    out = from_device(acl, ptr, 1024)
    assert (out[100:110] == 7).all() and (out[:100] == 0xAB).all() and (out[110:] == 0xAB).all()
    assert acl.rt.memset(ptr, 1024, 1, 0) == 0                  # count 0: nothing
    assert from_device(acl, ptr, 1)[0] == 0xAB
    assert acl.rt.memset(ptr, 10, 1, 11) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.memset(ptr, 2048, 1, 2048) == acl.ACL_ERROR_RT_PARAM_INVALID   # beyond the allocation
    # pinned host memory can be set too
    host, _ = acl.rt.malloc_host(256)
    assert acl.rt.memset(host, 256, 9, 256) == 0
    assert (acl.util.ptr_to_numpy(host, (256,), NPY_UINT8) == 9).all()
    assert acl.rt.free_host(host) == 0
    assert acl.rt.free(ptr) == 0


def test_memset_async(dev):
    acl = dev
    ptr, _ = acl.rt.malloc(8 * MiB, 0)
    host, _ = acl.rt.malloc_host(4096)
    s, _ = acl.rt.create_stream()
    assert acl.rt.memset_async(ptr, 8 * MiB, 0x3C, 8 * MiB, s) == 0
    assert acl.rt.memset_async(host, 4096, 0x4D, 4096, s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    assert (from_device(acl, ptr, 8 * MiB) == 0x3C).all()
    assert (acl.util.ptr_to_numpy(host, (4096,), NPY_UINT8) == 0x4D).all()
    # pageable memory: done when the call returns
    page = np.zeros(100, np.uint8)
    assert acl.rt.memset_async(acl.util.numpy_to_ptr(page), 100, 5, 100, s) == 0
    assert (page == 5).all()
    assert acl.rt.memset_async(ptr, 8, 1, 9, s) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert acl.rt.memset_async(ptr, 8, 1, 0, s) == 0
    assert acl.rt.free(ptr) == 0


def test_small_device_copies_and_memsets_match_numpy(dev):
    """Up to 4 KiB the device writes its own HBM through another path than numpy's: the
    same bytes, overlapping copies included, and the first and last byte of an allocation."""
    acl = dev
    size = 8192
    ptr, _ = acl.rt.malloc(size, 0)
    s, _ = acl.rt.create_stream()
    want = rand_bytes(size, seed=5)
    to_device(acl, ptr, want)
    steps = [("copy", 100, 0, 4096), ("copy", 0, 1, 4095), ("copy", 7, 3, 16),      # overlapping both ways
             ("copy", 5000, 0, 1), ("copy", size - 4096, 0, 4096), ("copy", 0, 4095, 4097),
             ("set", 0, 0x1A5, 1), ("set", size - 1, 0xFE, 1), ("set", 300, 0x33, 4096),
             ("set", 10, 0, 4097)]
    for kind, at, arg, n in steps:
        if kind == "copy":
            assert acl.rt.memcpy_async(ptr + at, size - at, ptr + arg, n, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, s) == 0
            want[at:at + n] = want[arg:arg + n].copy()
        else:
            assert acl.rt.memset_async(ptr + at, size - at, arg, n, s) == 0
            want[at:at + n] = arg & 0xFF
    assert acl.rt.synchronize_stream(s) == 0
    assert from_device(acl, ptr, size).tobytes() == want.tobytes()
    assert acl.rt.destroy_stream(s) == 0
    assert acl.rt.free(ptr) == 0


def test_allocator_find_never_answers_a_released_block():
    """find keeps its last answer for the next lookup: a release must end that."""
    from mdev.memory.allocator import Allocator
    alloc = Allocator(1 << 20)
    first = alloc.allocate(100, 4096, 4096, 1, 0)
    assert alloc.find(first.offset + 10) is first
    alloc.release(first.offset)
    assert alloc.find(first.offset + 10) is None
    second = alloc.allocate(100, 4096, 4096, 2, 0)
    assert second.offset == first.offset and alloc.find(first.offset + 10) is second


# ---------------------------------------------------------------------------- 2-D copies
def test_memcpy2d_h2d_d2h(dev):
    acl = dev
    rows, width, spitch, dpitch = 6, 10, 16, 32
    src = np.arange(rows * spitch, dtype=np.uint8)
    ptr, _ = acl.rt.malloc(rows * dpitch, 0)
    to_device(acl, ptr, np.full(rows * dpitch, 0xEE, np.uint8))
    assert acl.rt.memcpy2d(ptr, dpitch, acl.util.numpy_to_ptr(src), spitch, width, rows,
                           acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    dev_img = from_device(acl, ptr, rows * dpitch).reshape(rows, dpitch)
    assert (dev_img[:, :width] == src.reshape(rows, spitch)[:, :width]).all()
    assert (dev_img[:, width:] == 0xEE).all()            # the pitch gap is untouched
    back = np.zeros((rows, 12), np.uint8)
    assert acl.rt.memcpy2d(acl.util.numpy_to_ptr(back), 12, ptr, dpitch, width, rows,
                           acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    assert (back[:, :width] == src.reshape(rows, spitch)[:, :width]).all() and not back[:, width:].any()
    # only H2D and D2H for the synchronous form
    assert acl.rt.memcpy2d(ptr, dpitch, ptr, dpitch, width, rows, acl.ACL_MEMCPY_DEVICE_TO_DEVICE) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.memcpy2d(ptr, dpitch, ptr, dpitch, width, rows, acl.ACL_MEMCPY_DEFAULT) == acl.ACL_ERROR_INVALID_PARAM
    # width larger than a pitch, and a last row beyond the allocation
    assert acl.rt.memcpy2d(ptr, 8, acl.util.numpy_to_ptr(src), spitch, width, rows,
                           acl.ACL_MEMCPY_HOST_TO_DEVICE) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.memcpy2d(ptr, dpitch, acl.util.numpy_to_ptr(src), spitch, width, rows + 1,
                           acl.ACL_MEMCPY_HOST_TO_DEVICE) == acl.ACL_ERROR_RT_PARAM_INVALID
    # zero width or height: success, nothing copied
    assert acl.rt.memcpy2d(ptr, dpitch, acl.util.numpy_to_ptr(src), spitch, 0, rows,
                           acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    assert acl.rt.free(ptr) == 0


def test_memcpy2d_async(dev):
    acl = dev
    rows, width, pitch = 64, 100, 128
    host, _ = acl.rt.malloc_host(rows * pitch)
    out, _ = acl.rt.malloc_host(rows * pitch)
    hv = acl.util.ptr_to_numpy(host, (rows, pitch), NPY_UINT8)
    ov = acl.util.ptr_to_numpy(out, (rows, pitch), NPY_UINT8)
    hv[:] = rand_bytes(rows * pitch, 3).reshape(rows, pitch)
    a, _ = acl.rt.malloc(rows * 256, 0)
    b, _ = acl.rt.malloc(rows * 256, 0)
    s, _ = acl.rt.create_stream()
    K = acl
    assert acl.rt.memcpy2d_async(a, 256, host, pitch, width, rows, K.ACL_MEMCPY_HOST_TO_DEVICE, s) == 0
    assert acl.rt.memcpy2d_async(b, 256, a, 256, width, rows, K.ACL_MEMCPY_DEVICE_TO_DEVICE, s) == 0
    assert acl.rt.memcpy2d_async(out, pitch, b, 256, width, rows, K.ACL_MEMCPY_DEVICE_TO_HOST, s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    assert (ov[:, :width] == hv[:, :width]).all() and not ov[:, width:].any()
    # pageable destination: complete when the call returns
    page = np.zeros((rows, width), np.uint8)
    assert acl.rt.memcpy2d_async(acl.util.numpy_to_ptr(page), width, b, 256, width, rows,
                                 K.ACL_MEMCPY_DEVICE_TO_HOST, s) == 0
    assert (page == hv[:, :width]).all()
    assert acl.rt.memcpy2d_async(b, 256, a, 256, width, rows, K.ACL_MEMCPY_HOST_TO_HOST, s) == K.ACL_ERROR_INVALID_PARAM
    assert acl.rt.memcpy2d_async(b, 256, a, 256, width, 0, K.ACL_MEMCPY_DEVICE_TO_DEVICE, s) == 0
    for p in (a, b):
        assert acl.rt.free(p) == 0
    for p in (host, out):
        assert acl.rt.free_host(p) == 0
