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

DEVICE_ID = 0
SIZE = 1 << 20


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def read_u64(ptr):
    out = np.zeros(1, np.uint64)
    check(acl.rt.memcpy(acl.util.numpy_to_ptr(out), 8, ptr, 8, acl.ACL_MEMCPY_DEVICE_TO_HOST), "memcpy")
    return int(out[0])


def main():
    check(acl.init(), "init")
    check(acl.rt.set_device(DEVICE_ID), "set_device")
    streams = []
    for _ in range(3):
        stream, ret = acl.rt.create_stream()
        check(ret, "create_stream")
        streams.append(stream)
    stream1, stream2, stream3 = streams
    sync_mem, ret = acl.rt.malloc(64, acl.ACL_MEM_MALLOC_HUGE_FIRST)   # 8-byte aligned words
    check(ret, "malloc")
    check(acl.rt.memset(sync_mem, 64, 0, 64), "memset")  # initialise the sync words
    data, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    host, ret = acl.rt.malloc_host(SIZE)
    check(ret, "malloc_host")

    # 1. handshake: stream1 consumes what stream2 produced, then tells stream2 it is done
    check(acl.rt.value_wait(sync_mem, 1, acl.ACL_STREAM_WAIT_VALUE_EQ, stream1), "value_wait")
    check(acl.rt.memcpy_async(host, SIZE, data, SIZE, acl.ACL_MEMCPY_DEVICE_TO_HOST, stream1), "memcpy_async")
    check(acl.rt.value_write(sync_mem, 2, 0, stream1), "value_write")
    check(acl.rt.memset_async(data, SIZE, 0x5C, SIZE, stream2), "memset_async")
    check(acl.rt.value_write(sync_mem, 1, 0, stream2), "value_write")
    check(acl.rt.value_wait(sync_mem, 2, acl.ACL_STREAM_WAIT_VALUE_EQ, stream2), "value_wait")
    for stream in (stream1, stream2):
        check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    handshake_ok = acl.util.ptr_to_bytes(host, SIZE) == bytes([0x5C]) * SIZE and read_u64(sync_mem) == 2
    print(f"1. handshake: stream1 read stream2's data after value 1, stream2 resumed after value 2: "
          f"{'OK' if handshake_ok else 'WRONG'}")

    # 2. progress counter: GEQ releases stream3 once the counter reaches 3
    counter = sync_mem + 8
    marker = sync_mem + 16
    check(acl.rt.value_wait(counter, 3, acl.ACL_STREAM_WAIT_VALUE_GEQ, stream3), "value_wait")
    check(acl.rt.value_write(marker, 0xC0FFEE, 0, stream3), "value_write")
    for step in (1, 2, 3):
        check(acl.rt.memset_async(data, SIZE, step, SIZE, stream2), "memset_async")
        check(acl.rt.value_write(counter, step, 0, stream2), "value_write")
    check(acl.rt.synchronize_stream(stream3), "synchronize_stream")
    counter_ok = read_u64(counter) == 3 and read_u64(marker) == 0xC0FFEE
    print(f"2. counter: stream3 waited for counter >= 3, then ran: {'OK' if counter_ok else 'WRONG'}")

    # 3. a memset is a write like any other: setting bit 2 releases an AND wait on 0b100
    flags = sync_mem + 24
    check(acl.rt.value_wait(flags, 0b100, acl.ACL_STREAM_WAIT_VALUE_AND, stream1), "value_wait")
    check(acl.rt.value_write(marker, 7, 0, stream1), "value_write")
    check(acl.rt.memset_async(flags, 1, 0b100, 1, stream3), "memset_async")
    check(acl.rt.synchronize_stream(stream1), "synchronize_stream")
    memset_ok = read_u64(marker) == 7
    print(f"3. memset_async of the flag word released the AND wait: {'OK' if memset_ok else 'WRONG'}")

    check(acl.rt.free_host(host), "free_host")
    for ptr in (data, sync_mem):
        check(acl.rt.free(ptr), "free")
    for stream in streams:
        check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(DEVICE_ID), "reset_device")
    check(acl.finalize(), "finalize")
    ok = handshake_ok and counter_ok and memset_ok
    print(f"value_write_wait: handshake, counter and memset release verified: {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
