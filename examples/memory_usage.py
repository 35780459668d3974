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

# constants, as pyACL samples define them (values from acl_rt.h / acl_base.h)
ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2

DEVICE_ID = 0
N = 16                                   # float32 elements, as in the guide's sample


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def main():
    # STEP 1: initialise and select the device
    ret = acl.init()
    check_ret("acl.init", ret)
    ret = acl.rt.set_device(DEVICE_ID)
    check_ret("acl.rt.set_device", ret)

    # STEP 2: host data (ordinary pageable memory: a numpy array)
    host_in = np.arange(N, dtype=np.float32)
    host_out = np.zeros(N, dtype=np.float32)
    nbytes = host_in.nbytes

    # STEP 3: device memory
    dev_ptr, ret = acl.rt.malloc(nbytes, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)

    # STEP 4: host -> device
    ret = acl.rt.memcpy(dev_ptr, nbytes, acl.util.numpy_to_ptr(host_in), nbytes,
                        ACL_MEMCPY_HOST_TO_DEVICE)
    check_ret("acl.rt.memcpy H2D", ret)

    # STEP 5: "compute" on the device: clear the second half of the buffer
    half = nbytes // 2
    ret = acl.rt.memset(dev_ptr + half, nbytes - half, 0, nbytes - half)
    check_ret("acl.rt.memset", ret)

    # STEP 6: device -> host
    ret = acl.rt.memcpy(acl.util.numpy_to_ptr(host_out), nbytes, dev_ptr, nbytes,
                        ACL_MEMCPY_DEVICE_TO_HOST)
    check_ret("acl.rt.memcpy D2H", ret)

    # STEP 7: check on the host
    expected = host_in.copy()
    expected[N // 2:] = 0
    print(f"device {DEVICE_ID} buffer after H2D + memset of bytes {half}..{nbytes - 1}:")
    print("  ", host_out)
    ok = np.array_equal(host_out, expected)

    # STEP 8: release resources
    ret = acl.rt.free(dev_ptr)
    check_ret("acl.rt.free", ret)
    ret = acl.rt.reset_device(DEVICE_ID)
    check_ret("acl.rt.reset_device", ret)
    ret = acl.finalize()
    check_ret("acl.finalize", ret)

    if not ok:
        print(f"memory_usage: MISMATCH, expected {expected}")
        return 1
    print(f"memory_usage: {N} float32 round-tripped through device {DEVICE_ID}, memset verified: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
