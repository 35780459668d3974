"""Core resource limits (guide 07 "运行时核资源控制").

A process can cap the cores its kernels use on a device (aclrtSetDeviceResLimit), a
stream can have its own cap (aclrtSetStreamResLimit), and a thread can adopt a stream's
caps (aclrtUseStreamResInCurrentThread) so that operators which tile by
aclrtGetResInCurrentThread -- aclnnAdd, say -- size themselves to them.  The stream's
cap wins over the process cap, which wins over the hardware count.

A launch asking for more blocks than its stream may use runs in waves no wider than the
limit: the kernel below counts how many of its blocks run at the same moment.

    python examples/resource_limit.py
"""

import sys
import time

import numpy as np

import mdev.acl as acl
from mdev import ops
from mdev.kernel import float32, kernel, ptr

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_DEV_ATTR_VECTOR_CORE_NUM = 201
ACL_RT_DEV_RES_CUBE_CORE = 0
ACL_RT_DEV_RES_VECTOR_CORE = 1

DEVICE_ID = 0
NUM_BLOCKS = 8


@kernel
def count_concurrent(ctx, counters: ptr, hold_s: float32):
    """counters[0]: blocks running now; counters[1 + i]: how many ran when block i started."""
    running = ctx.atomic_add(counters, 1) + 1
    ctx.gm(counters, np.int64, ctx.block_num + 1)[1 + ctx.block_idx] = running
    time.sleep(hold_s)
    ctx.atomic_add(counters, -1)


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def value(result, message):
    *out, ret = result
    check_ret(message, ret)
    return out[0]


def max_concurrent(stream, blocks):
    counters, ret = acl.rt.malloc(8 * (blocks + 1), ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    check_ret("acl.rt.memset", acl.rt.memset(counters, 8 * (blocks + 1), 0, 8 * (blocks + 1)))
    check_ret("count_concurrent launch", count_concurrent[blocks, stream](counters, 0.1))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    seen = np.zeros(blocks + 1, np.int64)
    check_ret("acl.rt.memcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(seen), seen.nbytes, counters, seen.nbytes,
                                             ACL_MEMCPY_DEVICE_TO_HOST))
    check_ret("acl.rt.free", acl.rt.free(counters))
    return int(seen[1:].max())


def main():
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    vector_cores = value(acl.rt.get_device_info(DEVICE_ID, ACL_DEV_ATTR_VECTOR_CORE_NUM), "get_device_info")
    print(f"device {DEVICE_ID}: {vector_cores} vector cores; "
          f"limit now {value(acl.rt.get_device_res_limit(DEVICE_ID, ACL_RT_DEV_RES_VECTOR_CORE), 'get')}")

    # process-level limit for the device
    check_ret("set_device_res_limit", acl.rt.set_device_res_limit(DEVICE_ID, ACL_RT_DEV_RES_CUBE_CORE, NUM_BLOCKS))
    check_ret("set_device_res_limit",
              acl.rt.set_device_res_limit(DEVICE_ID, ACL_RT_DEV_RES_VECTOR_CORE, NUM_BLOCKS))
    cube = value(acl.rt.get_device_res_limit(DEVICE_ID, ACL_RT_DEV_RES_CUBE_CORE), "get_device_res_limit")
    print(f"process limit: {cube} cube cores, {NUM_BLOCKS} vector cores")

    # stream-level limit, adopted by this thread
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    check_ret("set_stream_res_limit", acl.rt.set_stream_res_limit(stream, ACL_RT_DEV_RES_CUBE_CORE, NUM_BLOCKS))
    check_ret("set_stream_res_limit",
              acl.rt.set_stream_res_limit(stream, ACL_RT_DEV_RES_VECTOR_CORE, NUM_BLOCKS * 2))
    check_ret("use_stream_res_in_current_thread", acl.rt.use_stream_res_in_current_thread(stream))
    tiling = value(acl.rt.get_res_in_current_thread(ACL_RT_DEV_RES_VECTOR_CORE), "get_res_in_current_thread")
    print(f"stream limit {NUM_BLOCKS * 2} vector cores, adopted by this thread: "
          f"get_res_in_current_thread -> {tiling}")

    # an operator that tiles by the thread's limit: out = x + alpha * y over `tiling` blocks
    n = 1 << 16
    x = np.arange(n, dtype=np.float32)
    bufs = []
    for _ in range(3):
        dev, ret = acl.rt.malloc(x.nbytes, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("acl.rt.malloc", ret)
        check_ret("acl.rt.memcpy", acl.rt.memcpy(dev, x.nbytes, acl.util.numpy_to_ptr(x), x.nbytes,
                                                 ACL_MEMCPY_HOST_TO_DEVICE))
        bufs.append(dev)
    check_ret("axpy launch", ops.axpy[tiling, stream](bufs[0], bufs[1], bufs[2], 2.0, n))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    result = np.zeros(n, np.float32)
    check_ret("acl.rt.memcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(result), x.nbytes, bufs[2], x.nbytes,
                                             ACL_MEMCPY_DEVICE_TO_HOST))
    axpy_ok = np.array_equal(result, 3 * x)
    print(f"axpy over {tiling} blocks: out = x + 2 * y verified: {axpy_ok}")

    # more blocks than the limit: waves of at most the limit
    on_stream = max_concurrent(stream, 40)
    on_default = max_concurrent(0, 40)
    print(f"40 blocks on the limited stream: at most {on_stream} at once; "
          f"on the default stream (process limit): at most {on_default}")

    check_ret("unuse_stream_res_in_current_thread", acl.rt.unuse_stream_res_in_current_thread(stream))
    check_ret("reset_stream_res_limit", acl.rt.reset_stream_res_limit(stream))
    check_ret("reset_device_res_limit", acl.rt.reset_device_res_limit(DEVICE_ID))
    back = value(acl.rt.get_res_in_current_thread(ACL_RT_DEV_RES_VECTOR_CORE), "get_res_in_current_thread")
    print(f"after reset: get_res_in_current_thread -> {back} (the hardware count)")

    for dev in bufs:
        check_ret("acl.rt.free", acl.rt.free(dev))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())
    ok = (axpy_ok and tiling == NUM_BLOCKS * 2 and on_stream == NUM_BLOCKS * 2 and on_default == NUM_BLOCKS
          and back == vector_cores)
    if not ok:
        print("resource_limit: UNEXPECTED")
        return 1
    print(f"resource_limit: precedence stream ({NUM_BLOCKS * 2}) > process ({NUM_BLOCKS}) > hardware "
          f"({vector_cores}), launches ran in waves: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
