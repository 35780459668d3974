"""Runtime behaviour the CANN kernel samples need beyond kernels (issue 31 item 5, and the
callback sample): managed memory with advice and prefetch, aclrtHostRegisterV2 on memory of
aclrtMallocHost, host funcs run by a subscribed thread (aclrtSubscribeHostFunc)."""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from async_util import ok, out
from mdev.kernel import kernel


@kernel
def double(ctx, p, n):
    a = ctx.gm(p, np.float32, n)
    a *= 2


def test_managed_memory_is_one_address_for_host_and_device(dev):
    acl = dev
    p = out(acl, acl.rt.mem_alloc_managed(4096, acl.ACL_RT_MEM_ATTACH_GLOBAL))
    host = np.ctypeslib.as_array((ctypes.c_float * 16).from_address(p))
    host[:] = np.arange(16)
    device = {"type": acl.ACL_MEM_LOCATIONTYPE_DEVICE, "id": 0}
    ok(acl, acl.rt.mem_managed_advise(p, 4096, acl.ACL_MEM_ADVISE_SET_PREFERRED_LOCATION, device))
    ok(acl, acl.rt.mem_managed_prefetch_async(p, 4096, device, 0, 0))
    assert double[1](p, 16) == 0
    ok(acl, acl.rt.synchronize_device())
    np.testing.assert_array_equal(host, np.arange(16) * 2)
    # bad advice, a range past the allocation, a bad location: the documented code
    assert acl.rt.mem_managed_advise(p, 4096, 99, device) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.mem_managed_prefetch_async(p, 8192, device, 0, 0) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.mem_managed_advise(p, 64, 0, {"type": 7, "id": 0}) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.rt.mem_alloc_managed(4096, 0x2)[1] == acl.ACL_ERROR_INVALID_PARAM
    # free_host is not its free: the memory stays usable
    assert acl.rt.free_host(p) == acl.ACL_ERROR_RT_PARAM_INVALID
    assert host[1] == 2
    ok(acl, acl.rt.free(p))
    assert acl.rt.free(p) == acl.ACL_ERROR_RT_PARAM_INVALID


def test_host_register_v2_on_malloc_host_memory(dev):
    acl = dev
    p = out(acl, acl.rt.malloc_host(8192))
    ok(acl, acl.rt.host_register_v2(p, 4096, acl.ACL_HOST_REG_PINNED))
    assert out(acl, acl.rt.host_get_device_pointer(p, 0)) == p
    assert acl.rt.host_register_v2(p, 16384, acl.ACL_HOST_REG_PINNED) == acl.ACL_ERROR_INVALID_PARAM
    ok(acl, acl.rt.host_unregister(p))
    assert acl.rt.host_unregister(p) == acl.ACL_ERROR_HOST_MEMORY_NOT_REGISTERED
    ok(acl, acl.rt.free_host(p))


def test_a_registration_inside_malloc_host_memory_ends_with_it(dev):
    """Freeing the aclrtMallocHost memory ends a host_register_v2 of it: its address is then
    registered nowhere (a process-wide record kept it alive past the free)."""
    acl = dev
    p = out(acl, acl.rt.malloc_host(8192))
    ok(acl, acl.rt.host_register_v2(p, 4096, acl.ACL_HOST_REG_PINNED))
    ok(acl, acl.rt.free_host(p))
    assert acl.rt.host_get_device_pointer(p, 0)[1] == acl.ACL_ERROR_HOST_MEMORY_NOT_REGISTERED
    assert acl.rt.host_unregister(p) == acl.ACL_ERROR_HOST_MEMORY_NOT_REGISTERED


def test_host_funcs_run_on_the_subscribed_thread(dev):
    acl = dev
    stream = out(acl, acl.rt.create_stream())
    ran, go, results = [], threading.Event(), {}

    def serve():
        go.wait(10)
        results["process"] = acl.rt.process_host_func(5000)

    t = threading.Thread(target=serve)
    t.start()
    ok(acl, acl.rt.subscribe_host_func(t.ident, stream))       # as the sample does: from the main thread
    go.set()
    ok(acl, acl.rt.launch_host_func(stream, lambda arg: ran.append((arg, threading.get_ident())), 7))
    ok(acl, acl.rt.synchronize_stream(stream))
    t.join(10)
    assert results == {"process": 0}
    assert ran == [(7, t.ident)]
    ok(acl, acl.rt.unsubscribe_host_func(t.ident, stream))
    assert acl.rt.unsubscribe_host_func(t.ident, stream) == acl.ACL_ERROR_RT_STREAM_SUBSCRIBE
    assert acl.rt.process_host_func(10) == acl.ACL_ERROR_RT_THREAD_SUBSCRIBE
    ok(acl, acl.rt.destroy_stream(stream))
