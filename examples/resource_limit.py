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

DEVICE_ID = 0
NUM_BLOCKS = 8


@kernel
def count_concurrent(ctx, counters: ptr, hold_s: float32):
    """counters[0]: blocks running now; counters[1 + i]: how many ran when block i started."""
    running = ctx.atomic_add(counters, 1) + 1
    ctx.gm(counters, np.int64, ctx.block_num + 1)[1 + ctx.block_idx] = running
    time.sleep(hold_s)
    ctx.atomic_add(counters, -1)


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def value(result, what):
    """The value of a (value, ret) result, once ret is checked."""
    *out, ret = result
    check(ret, what)
    return out[0]


def copy(dst, src, nbytes, kind):
    check(acl.rt.memcpy(dst, nbytes, src, nbytes, kind), "memcpy")


def max_concurrent(stream, blocks):
    counters, ret = acl.rt.malloc(8 * (blocks + 1), acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    check(acl.rt.memset(counters, 8 * (blocks + 1), 0, 8 * (blocks + 1)), "memset")
    check(count_concurrent[blocks, stream](counters, 0.1), "count_concurrent launch")
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    seen = np.zeros(blocks + 1, np.int64)
    copy(acl.util.numpy_to_ptr(seen), counters, seen.nbytes, acl.ACL_MEMCPY_DEVICE_TO_HOST)
    check(acl.rt.free(counters), "free")
    return int(seen[1:].max())


def main():
    check(acl.init(), "init")
    check(acl.rt.set_device(DEVICE_ID), "set_device")
    vector_cores = value(acl.rt.get_device_info(DEVICE_ID, acl.ACL_DEV_ATTR_VECTOR_CORE_NUM), "get_device_info")
    limit = value(acl.rt.get_device_res_limit(DEVICE_ID, acl.ACL_RT_DEV_RES_VECTOR_CORE), "get_device_res_limit")
    print(f"device {DEVICE_ID}: {vector_cores} vector cores; limit now {limit}")

    # process-level limit for the device
    for kind in (acl.ACL_RT_DEV_RES_CUBE_CORE, acl.ACL_RT_DEV_RES_VECTOR_CORE):
        check(acl.rt.set_device_res_limit(DEVICE_ID, kind, NUM_BLOCKS), "set_device_res_limit")
    cube = value(acl.rt.get_device_res_limit(DEVICE_ID, acl.ACL_RT_DEV_RES_CUBE_CORE), "get_device_res_limit")
    print(f"process limit: {cube} cube cores, {NUM_BLOCKS} vector cores")

    # stream-level limit, adopted by this thread
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    for kind, cores in ((acl.ACL_RT_DEV_RES_CUBE_CORE, NUM_BLOCKS), (acl.ACL_RT_DEV_RES_VECTOR_CORE, NUM_BLOCKS * 2)):
        check(acl.rt.set_stream_res_limit(stream, kind, cores), "set_stream_res_limit")
    check(acl.rt.use_stream_res_in_current_thread(stream), "use_stream_res_in_current_thread")
    tiling = value(acl.rt.get_res_in_current_thread(acl.ACL_RT_DEV_RES_VECTOR_CORE), "get_res_in_current_thread")
    print(f"stream limit {NUM_BLOCKS * 2} vector cores, adopted by this thread: "
          f"get_res_in_current_thread -> {tiling}")

    # an operator that tiles by the thread's limit: out = x + alpha * y over `tiling` blocks
    n = 1 << 16
    x = np.arange(n, dtype=np.float32)
    bufs = []
    for _ in range(3):
        dev, ret = acl.rt.malloc(x.nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        copy(dev, acl.util.numpy_to_ptr(x), x.nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE)
        bufs.append(dev)
    check(ops.axpy[tiling, stream](bufs[0], bufs[1], bufs[2], 2.0, n), "axpy launch")
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    result = np.zeros(n, np.float32)
    copy(acl.util.numpy_to_ptr(result), bufs[2], x.nbytes, acl.ACL_MEMCPY_DEVICE_TO_HOST)
    axpy_ok = np.array_equal(result, 3 * x)
    print(f"axpy over {tiling} blocks: out = x + 2 * y verified: {axpy_ok}")
    for dev in bufs:
        check(acl.rt.free(dev), "free")

    # more blocks than the limit: waves of at most the limit
    on_stream = max_concurrent(stream, 40)
    on_default = max_concurrent(0, 40)
    print(f"40 blocks on the limited stream: at most {on_stream} at once; "
          f"on the default stream (process limit): at most {on_default}")

    check(acl.rt.unuse_stream_res_in_current_thread(stream), "unuse_stream_res_in_current_thread")
    check(acl.rt.reset_stream_res_limit(stream), "reset_stream_res_limit")
    check(acl.rt.reset_device_res_limit(DEVICE_ID), "reset_device_res_limit")
    back = value(acl.rt.get_res_in_current_thread(acl.ACL_RT_DEV_RES_VECTOR_CORE), "get_res_in_current_thread")
    print(f"after reset: get_res_in_current_thread -> {back} (the hardware count)")

    check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(DEVICE_ID), "reset_device")
    check(acl.finalize(), "finalize")
    ok = (axpy_ok and tiling == NUM_BLOCKS * 2 and on_stream == NUM_BLOCKS * 2 and on_default == NUM_BLOCKS
          and back == vector_cores)
    print(f"resource_limit: precedence stream ({NUM_BLOCKS * 2}) > process ({NUM_BLOCKS}) > hardware "
          f"({vector_cores}), launches ran in waves: {'OK' if ok else 'UNEXPECTED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
