"""The board comes up, a host round-trips memory through a device, and nothing leaks."""

import numpy as np


def test_round_trip(acl):
    assert acl.rt.set_device(0) == 0
    ptr, ret = acl.rt.malloc(4096, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    assert ret == 0
    src = np.arange(1024, dtype=np.int32)
    dst = np.zeros_like(src)
    assert acl.rt.memcpy(ptr, 4096, acl.util.numpy_to_ptr(src), 4096, acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(dst), 4096, ptr, 4096, acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    assert (dst == src).all()
    assert acl.rt.free(ptr) == 0


def test_separate_process(board, run_py):
    out = run_py("""
        import mdev.acl as acl
        assert acl.rt.set_device(1) == 0
        n, ret = acl.rt.get_device_count()
        print(n, ret)
    """, board)
    assert out.stdout.split() == ["4", "0"]
