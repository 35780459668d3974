"""Memory-semantic synchronisation (guide 03-07 "内存语义同步").

Streams synchronise through a 64-bit word of ordinary device memory:

    1. the guide's handshake: stream1 waits until the word == 1 (written by stream2 after
       its work), does its own work, then writes 2, which stream2 waits for in turn
    2. a progress counter: stream2 writes 1, 2, 3 after each of three steps; stream3 waits
       with ACL_STREAM_WAIT_VALUE_GEQ 3, i.e. for all three
    3. the word is plain memory: acl.rt.memset_async on another stream clears / sets it,
       and that alone releases a wait (ACL_STREAM_WAIT_VALUE_AND on a bit mask)

    python examples/value_write_wait.py
"""

import sys

import numpy as np

import mdev.acl as acl

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_STREAM_WAIT_VALUE_GEQ = 0x0
ACL_STREAM_WAIT_VALUE_EQ = 0x1
ACL_STREAM_WAIT_VALUE_AND = 0x2
NPY_UINT8 = 2

DEVICE_ID = 0
SIZE = 1 << 20


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def read_u64(ptr):
    out = np.zeros(1, np.uint64)
    check_ret("acl.rt.memcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(out), 8, ptr, 8, ACL_MEMCPY_DEVICE_TO_HOST))
    return int(out[0])


def main():
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    streams = []
    for _ in range(3):
        stream, ret = acl.rt.create_stream()
        check_ret("acl.rt.create_stream", ret)
        streams.append(stream)
    stream1, stream2, stream3 = streams
    sync_mem, ret = acl.rt.malloc(64, ACL_MEM_MALLOC_HUGE_FIRST)   # 8-byte aligned words
    check_ret("acl.rt.malloc", ret)
    check_ret("acl.rt.memset", acl.rt.memset(sync_mem, 64, 0, 64))  # initialise the sync words
    data, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    host, ret = acl.rt.malloc_host(SIZE)
    check_ret("acl.rt.malloc_host", ret)

    # 1. handshake: stream1 consumes what stream2 produced, then tells stream2 it is done
    check_ret("acl.rt.value_wait", acl.rt.value_wait(sync_mem, 1, ACL_STREAM_WAIT_VALUE_EQ, stream1))
    ret = acl.rt.memcpy_async(host, SIZE, data, SIZE, ACL_MEMCPY_DEVICE_TO_HOST, stream1)
    check_ret("acl.rt.memcpy_async", ret)
    check_ret("acl.rt.value_write", acl.rt.value_write(sync_mem, 2, 0, stream1))
    check_ret("acl.rt.memset_async", acl.rt.memset_async(data, SIZE, 0x5C, SIZE, stream2))
    check_ret("acl.rt.value_write", acl.rt.value_write(sync_mem, 1, 0, stream2))
    check_ret("acl.rt.value_wait", acl.rt.value_wait(sync_mem, 2, ACL_STREAM_WAIT_VALUE_EQ, stream2))
    for stream in (stream1, stream2):
        check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    view = acl.util.ptr_to_numpy(host, (SIZE,), NPY_UINT8)
    handshake_ok = bool((view == 0x5C).all()) and read_u64(sync_mem) == 2
    del view
    print(f"1. handshake: stream1 read stream2's data after value 1, stream2 resumed after value 2: "
          f"{'OK' if handshake_ok else 'WRONG'}")

    # 2. progress counter: GEQ releases stream3 once the counter reaches 3
    counter = sync_mem + 8
    marker = sync_mem + 16
    check_ret("acl.rt.value_wait", acl.rt.value_wait(counter, 3, ACL_STREAM_WAIT_VALUE_GEQ, stream3))
    check_ret("acl.rt.value_write", acl.rt.value_write(marker, 0xC0FFEE, 0, stream3))
    for step in (1, 2, 3):
        ret = acl.rt.memset_async(data, SIZE, step, SIZE, stream2)
        check_ret("acl.rt.memset_async", ret)
        check_ret("acl.rt.value_write", acl.rt.value_write(counter, step, 0, stream2))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream3))
    counter_ok = read_u64(counter) == 3 and read_u64(marker) == 0xC0FFEE
    print(f"2. counter: stream3 waited for counter >= 3, then ran: {'OK' if counter_ok else 'WRONG'}")

    # 3. a memset is a write like any other: setting bit 2 releases an AND wait on 0b100
    flags = sync_mem + 24
    check_ret("acl.rt.value_wait", acl.rt.value_wait(flags, 0b100, ACL_STREAM_WAIT_VALUE_AND, stream1))
    check_ret("acl.rt.value_write", acl.rt.value_write(marker, 7, 0, stream1))
    check_ret("acl.rt.memset_async", acl.rt.memset_async(flags, 1, 0b100, 1, stream3))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream1))
    memset_ok = read_u64(marker) == 7
    print(f"3. memset_async of the flag word released the AND wait: {'OK' if memset_ok else 'WRONG'}")

    check_ret("acl.rt.free_host", acl.rt.free_host(host))
    check_ret("acl.rt.free", acl.rt.free(data))
    check_ret("acl.rt.free", acl.rt.free(sync_mem))
    for stream in streams:
        check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())

    if not (handshake_ok and counter_ok and memset_ok):
        print("value_write_wait: FAILED")
        return 1
    print("value_write_wait: handshake, counter and memset release verified: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
