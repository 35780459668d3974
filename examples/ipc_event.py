"""A stream of one process waits for an event recorded by another process (IPC events).

    producer (this process, device 0)               consumer (child process, device 1)
    event = create_event_ex_with_flag(ACL_EVENT_IPC)
    handle = ipc_get_event_handle(event)
    stream: value_wait(gate, 1)    <- held until we open the gate
            memcpy_async(pinned data -> shared buffer)
            record_event(event)
                          -- event handle + memory key -->  event = ipc_open_event_handle(handle)
                                                          shared = ipc_mem_import_by_key(key, PEER)
                                                          stream: stream_wait_event(event)
                                                                  memcpy_async(shared -> own)
                          <-- "queued, NOT_READY" ------- (its stream waits for our record)
    open the gate (memcpy 1 into the gate word)
                          <-- "done, data OK" ----------  synchronize_stream, check the data

The record is issued before the consumer waits: a wait submitted before any record would
be a no-op (an event's wait refers to the records issued when the wait is submitted).

    python examples/ipc_event.py
"""

import subprocess
import sys

import numpy as np

import mdev.acl as acl

NPY_INT32 = 5                            # NumPy type number, as acl.util.ptr_to_numpy takes it
COUNT = 4 << 20                          # int32 elements: 16 MiB
SIZE = COUNT * 4


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def release(key, event, stream, device_buffer, device):
    """Both processes end alike: the shared memory closed (by the consumer first), the rest released."""
    check(acl.rt.ipc_mem_close(key), "ipc_mem_close")
    check(acl.rt.destroy_event(event), "destroy_event")
    check(acl.rt.free(device_buffer), "free")
    check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(device), "reset_device")


# ---------------------------------------------------------------------------- consumer
def consumer(device):
    """Child process: one line per message, from the producer on stdin, to it on stdout."""
    check(acl.init(), "init")
    check(acl.rt.set_device(device), "set_device")
    handle_hex, key = sys.stdin.readline().split()
    event, ret = acl.rt.ipc_open_event_handle(bytes.fromhex(handle_hex))
    check(ret, "ipc_open_event_handle")
    shared, ret = acl.rt.ipc_mem_import_by_key(key, acl.ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS)
    check(ret, "ipc_mem_import_by_key")
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    local, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")

    check(acl.rt.stream_wait_event(stream, event), "stream_wait_event")
    check(acl.rt.memcpy_async(local, SIZE, shared, SIZE, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, stream), "memcpy_async D2D")
    status, ret = acl.rt.stream_query(stream)
    check(ret, "stream_query")
    print("COMPLETE" if status == acl.ACL_STREAM_STATUS_COMPLETE else "NOT_READY", flush=True)   # queued

    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    seen = np.empty(COUNT, np.int32)
    check(acl.rt.memcpy(acl.util.numpy_to_ptr(seen), SIZE, local, SIZE, acl.ACL_MEMCPY_DEVICE_TO_HOST), "memcpy D2H")
    release(key, event, stream, local, device)
    check(acl.finalize(), "finalize")
    print("OK" if np.array_equal(seen, np.arange(COUNT, dtype=np.int32) + 7) else "WRONG", flush=True)   # done


# ---------------------------------------------------------------------------- producer
def main():
    check(acl.init(), "init")
    count, ret = acl.rt.get_device_count()
    check(ret, "get_device_count")
    device, peer = 0, (1 if count > 1 else 0)
    check(acl.rt.set_device(device), "set_device")
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    shared, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    gate, ret = acl.rt.malloc(4096, acl.ACL_MEM_MALLOC_NORMAL_ONLY)
    check(ret, "malloc")
    check(acl.rt.memset(gate, 8, 0, 8), "memset")
    pinned, ret = acl.rt.malloc_host(SIZE)
    check(ret, "malloc_host")
    acl.util.ptr_to_numpy(pinned, (COUNT,), NPY_INT32)[:] = np.arange(COUNT, dtype=np.int32) + 7

    event, ret = acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_IPC)
    check(ret, "create_event_ex_with_flag(ACL_EVENT_IPC)")
    handle, ret = acl.rt.ipc_get_event_handle(event)
    check(ret, "ipc_get_event_handle")
    key, ret = acl.rt.ipc_mem_get_export_key(shared, SIZE, 65, acl.ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION)
    check(ret, "ipc_mem_get_export_key")

    # the producing work, held behind a gate we open later, then the record
    check(acl.rt.value_wait(gate, 1, acl.ACL_STREAM_WAIT_VALUE_EQ, stream), "value_wait")
    check(acl.rt.memcpy_async(shared, SIZE, pinned, SIZE, acl.ACL_MEMCPY_HOST_TO_DEVICE, stream), "memcpy_async H2D")
    check(acl.rt.record_event(event, stream), "record_event")
    print(f"[producer] device {device}: produce + record_event queued behind a closed gate")

    child = subprocess.Popen([sys.executable, __file__, "consumer", str(peer)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        print(bytes(handle).hex(), key, file=child.stdin, flush=True)
        queued = child.stdout.readline().strip()
        print(f"[consumer] device {peer}: stream_wait_event + copy queued, its stream is {queued}")
        one = np.array([1], np.uint64)
        check(acl.rt.memcpy(gate, 8, acl.util.numpy_to_ptr(one), 8, acl.ACL_MEMCPY_HOST_TO_DEVICE), "open the gate")
        done = child.stdout.readline().strip()
        print(f"[consumer] synchronize_stream returned after our record; data {done}")
    except BaseException:
        child.kill()                     # never leave the consumer waiting for us
        child.wait()
        raise
    if child.wait(60) != 0:
        raise RuntimeError(f"the consumer failed (exit {child.returncode})")

    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    check(acl.rt.free(gate), "free")
    check(acl.rt.free_host(pinned), "free_host")
    release(key, event, stream, shared, device)
    check(acl.finalize(), "finalize")
    ok = queued == "NOT_READY" and done == "OK"
    print(f"ipc_event: device {peer} stream waited for device {device}'s record in another process: "
          f"{'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":                   # the child process runs this file again, as "consumer"
    sys.exit(consumer(int(sys.argv[2])) if sys.argv[1:2] == ["consumer"] else main())
