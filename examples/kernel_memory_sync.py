"""Kernels and streams synchronising through device memory (guide 03-07 "内存语义同步").

The guide's sample, step by step:

    stream1: aclrtValueWait(syncMem, 1, EQ)       waits until a kernel on stream2 writes 1
    stream2: myKernel1<<<>>>(syncMem)              writes *syncMem = 1 -> releases stream1
    stream1: myKernel2<<<>>>(syncMem)              spins inside the kernel until *syncMem == 2
    stream2: aclrtValueWrite(syncMem, 2)           releases myKernel2

A kernel waits on memory with ``ctx.spin_until``: it yields while it waits, so a waiting
kernel does not starve the device.

    python examples/kernel_memory_sync.py
"""

import sys
import time

import numpy as np

import mdev.acl as acl
from mdev.kernel import kernel, ptr

DEVICE_ID = 0
NUM_BLOCKS = 4


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


@kernel
def my_kernel1(ctx, sync_mem: ptr, log: ptr):
    ctx.gm(log, np.int64, 2)[0] = time.monotonic_ns()
    if ctx.block_idx == 0:
        ctx.gm(sync_mem, np.uint64, 1)[0] = 1          # *flag = 1


@kernel
def my_kernel2(ctx, sync_mem: ptr, log: ptr):
    flag = ctx.gm(sync_mem, np.uint64, 1)
    ctx.spin_until(lambda: int(flag[0]) == 2)          # while (*flag != 2) {}
    ctx.gm(log, np.int64, 2)[1] = time.monotonic_ns()


def status(stream):
    value, ret = acl.rt.stream_query(stream)
    check(ret, "stream_query")
    return "COMPLETE" if value == acl.ACL_STREAM_STATUS_COMPLETE else "NOT_READY"


def main():
    check(acl.init(), "init")
    check(acl.rt.set_device(DEVICE_ID), "set_device")
    stream1, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    stream2, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    sync_mem, ret = acl.rt.malloc(8, acl.ACL_MEM_MALLOC_NORMAL_ONLY)
    check(ret, "malloc")
    log, ret = acl.rt.malloc(16, acl.ACL_MEM_MALLOC_NORMAL_ONLY)
    check(ret, "malloc")
    check(acl.rt.memset(sync_mem, 8, 0, 8), "memset")     # memset initialises sync memory

    check(acl.rt.value_wait(sync_mem, 1, acl.ACL_STREAM_WAIT_VALUE_EQ, stream1), "value_wait")
    check(my_kernel1[NUM_BLOCKS, stream2](sync_mem, log), "my_kernel1 launch")
    check(my_kernel2[NUM_BLOCKS, stream1](sync_mem, log), "my_kernel2 launch")
    check(acl.rt.synchronize_stream(stream2), "synchronize_stream")
    time.sleep(0.2)
    waiting = status(stream1)
    print(f"my_kernel1 wrote 1 (stream 2 done); my_kernel2 on stream 1 is spinning: stream 1 {waiting}")

    t_write = time.monotonic_ns()
    check(acl.rt.value_write(sync_mem, 2, 0, stream2), "value_write")
    check(acl.rt.synchronize_stream(stream1), "synchronize_stream")
    stamps = np.zeros(2, np.int64)
    check(acl.rt.memcpy(acl.util.numpy_to_ptr(stamps), 16, log, 16, acl.ACL_MEMCPY_DEVICE_TO_HOST), "memcpy")
    print(f"value_write(2) on stream 2 released my_kernel2 {(stamps[1] - t_write) / 1e6:.1f} ms later: "
          f"stream 1 {status(stream1)}")

    for buffer in (sync_mem, log):
        check(acl.rt.free(buffer), "free")
    for stream in (stream1, stream2):
        check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(DEVICE_ID), "reset_device")
    check(acl.finalize(), "finalize")
    ok = waiting == "NOT_READY" and stamps[1] >= t_write
    print("kernel_memory_sync: a kernel on stream 1 waited for the flag, released by value_write on stream 2: "
          + ("OK" if ok else "UNEXPECTED ORDER"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
