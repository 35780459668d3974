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

ACL_SUCCESS = 0
ACL_MEM_MALLOC_NORMAL_ONLY = 2
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_STREAM_WAIT_VALUE_EQ = 1
ACL_STREAM_STATUS_COMPLETE = 0

DEVICE_ID = 0
NUM_BLOCKS = 4


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


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def status(stream):
    value, ret = acl.rt.stream_query(stream)
    check_ret("acl.rt.stream_query", ret)
    return "COMPLETE" if value == ACL_STREAM_STATUS_COMPLETE else "NOT_READY"


def main():
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    stream1, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    stream2, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    sync_mem, ret = acl.rt.malloc(8, ACL_MEM_MALLOC_NORMAL_ONLY)
    check_ret("acl.rt.malloc", ret)
    log, ret = acl.rt.malloc(16, ACL_MEM_MALLOC_NORMAL_ONLY)
    check_ret("acl.rt.malloc", ret)
    check_ret("acl.rt.memset", acl.rt.memset(sync_mem, 8, 0, 8))     # memset initialises sync memory

    check_ret("acl.rt.value_wait", acl.rt.value_wait(sync_mem, 1, ACL_STREAM_WAIT_VALUE_EQ, stream1))
    check_ret("my_kernel1 launch", my_kernel1[NUM_BLOCKS, stream2](sync_mem, log))
    check_ret("my_kernel2 launch", my_kernel2[NUM_BLOCKS, stream1](sync_mem, log))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream2))
    time.sleep(0.2)
    waiting = status(stream1)
    print(f"my_kernel1 wrote 1 (stream 2 done); my_kernel2 on stream 1 is spinning: stream 1 {waiting}")

    t_write = time.monotonic_ns()
    check_ret("acl.rt.value_write", acl.rt.value_write(sync_mem, 2, 0, stream2))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream1))
    stamps = np.zeros(2, np.int64)
    check_ret("acl.rt.memcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(stamps), 16, log, 16, ACL_MEMCPY_DEVICE_TO_HOST))
    released_after = stamps[1] >= t_write
    print(f"value_write(2) on stream 2 released my_kernel2 {(stamps[1] - t_write) / 1e6:.1f} ms later: "
          f"stream 1 {status(stream1)}")

    for ptr_ in (sync_mem, log):
        check_ret("acl.rt.free", acl.rt.free(ptr_))
    for stream in (stream1, stream2):
        check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())
    if waiting != "NOT_READY" or not released_after:
        print("kernel_memory_sync: UNEXPECTED ORDER")
        return 1
    print("kernel_memory_sync: a kernel on stream 1 waited for the flag, released by value_write on stream 2: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
