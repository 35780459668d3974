"""Device memory usage (CANN programming guide, 02 "Device内存使用").

The basic round trip every Ascend program makes:

    set_device -> malloc (device) -> memcpy H2D -> work on device memory (here: memset)
    -> memcpy D2H -> check the result on the host -> free -> reset_device

Run it against the default board (started on demand):

    python examples/memory_usage.py
"""

import sys

import numpy as np

import mdev.acl as acl

DEVICE_ID = 0
N = 16                                   # float32 elements, as in the guide's sample


def check(ret, what):
    """Every ACL call returns an error code: ACL_SUCCESS (0) or the reason it failed."""
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def main():
    # STEP 1: initialise and select the device
    ret = acl.init()
    check(ret, "init")
    check(acl.rt.set_device(DEVICE_ID), "set_device")

    # STEP 2: host data (ordinary pageable memory: a numpy array)
    host_in = np.arange(N, dtype=np.float32)
    host_out = np.zeros(N, dtype=np.float32)
    nbytes = host_in.nbytes

    # STEP 3: device memory
    dev_ptr, ret = acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")

    # STEP 4: host -> device (dst, dst size, src, count, kind)
    check(acl.rt.memcpy(dev_ptr, nbytes, acl.util.numpy_to_ptr(host_in), nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE),
          "memcpy H2D")

    # STEP 5: "compute" on the device: clear the second half of the buffer
    half = nbytes // 2
    check(acl.rt.memset(dev_ptr + half, nbytes - half, 0, nbytes - half), "memset")

    # STEP 6: device -> host
    check(acl.rt.memcpy(acl.util.numpy_to_ptr(host_out), nbytes, dev_ptr, nbytes, acl.ACL_MEMCPY_DEVICE_TO_HOST),
          "memcpy D2H")

    # STEP 7: check on the host
    expected = host_in.copy()
    expected[N // 2:] = 0
    print(f"device {DEVICE_ID} buffer after H2D + memset of bytes {half}..{nbytes - 1}:")
    print("  ", host_out)
    ok = np.array_equal(host_out, expected)

    # STEP 8: release resources, in reverse order of creation
    check(acl.rt.free(dev_ptr), "free")
    check(acl.rt.reset_device(DEVICE_ID), "reset_device")
    check(acl.finalize(), "finalize")
    verdict = "OK" if ok else f"MISMATCH, expected {expected}"
    print(f"memory_usage: {N} float32 round-tripped through device {DEVICE_ID}, memset verified: {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
