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

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEM_MALLOC_NORMAL_ONLY = 2
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_MEMCPY_DEVICE_TO_DEVICE = 3
ACL_EVENT_IPC = 0x40
ACL_STREAM_WAIT_VALUE_EQ = 1
ACL_STREAM_STATUS_COMPLETE = 0
ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION = 0x1
ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS = 0x1
NPY_INT32 = 5

COUNT = 4 << 20                          # int32 elements: 16 MiB
SIZE = COUNT * 4


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


# ---------------------------------------------------------------------------- consumer
def consumer(device):
    def send(*words):
        print(*words, flush=True)

    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(device))
    _, handle_hex, key = sys.stdin.readline().split()
    event, ret = acl.rt.ipc_open_event_handle(bytes.fromhex(handle_hex))
    check_ret("acl.rt.ipc_open_event_handle", ret)
    shared, ret = acl.rt.ipc_mem_import_by_key(key, ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS)
    check_ret("acl.rt.ipc_mem_import_by_key", ret)
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    local, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)

    check_ret("acl.rt.stream_wait_event", acl.rt.stream_wait_event(stream, event))
    check_ret("memcpy_async shared -> local",
              acl.rt.memcpy_async(local, SIZE, shared, SIZE, ACL_MEMCPY_DEVICE_TO_DEVICE, stream))
    status, ret = acl.rt.stream_query(stream)
    check_ret("acl.rt.stream_query", ret)
    send("queued", "COMPLETE" if status == ACL_STREAM_STATUS_COMPLETE else "NOT_READY")

    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    seen = np.empty(COUNT, np.int32)
    check_ret("memcpy D2H", acl.rt.memcpy(acl.util.numpy_to_ptr(seen), SIZE, local, SIZE,
                                          ACL_MEMCPY_DEVICE_TO_HOST))
    ok = np.array_equal(seen, np.arange(COUNT, dtype=np.int32) + 7)
    check_ret("acl.rt.ipc_mem_close", acl.rt.ipc_mem_close(key))
    check_ret("acl.rt.destroy_event", acl.rt.destroy_event(event))
    check_ret("acl.rt.free", acl.rt.free(local))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(device))
    check_ret("acl.finalize", acl.finalize())
    send("done", "OK" if ok else "WRONG")


# ---------------------------------------------------------------------------- producer
def main():
    check_ret("acl.init", acl.init())
    count, ret = acl.rt.get_device_count()
    check_ret("acl.rt.get_device_count", ret)
    device, peer = 0, (1 if count > 1 else 0)
    check_ret("acl.rt.set_device", acl.rt.set_device(device))
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)

    shared, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    gate, ret = acl.rt.malloc(4096, ACL_MEM_MALLOC_NORMAL_ONLY)
    check_ret("acl.rt.malloc", ret)
    check_ret("acl.rt.memset", acl.rt.memset(gate, 8, 0, 8))
    pinned, ret = acl.rt.malloc_host(SIZE)
    check_ret("acl.rt.malloc_host", ret)
    acl.util.ptr_to_numpy(pinned, (COUNT,), NPY_INT32)[:] = np.arange(COUNT, dtype=np.int32) + 7

    event, ret = acl.rt.create_event_ex_with_flag(ACL_EVENT_IPC)
    check_ret("acl.rt.create_event_ex_with_flag(ACL_EVENT_IPC)", ret)
    handle, ret = acl.rt.ipc_get_event_handle(event)
    check_ret("acl.rt.ipc_get_event_handle", ret)
    key, ret = acl.rt.ipc_mem_get_export_key(shared, SIZE, 65, ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION)
    check_ret("acl.rt.ipc_mem_get_export_key", ret)

    # the producing work, held behind a gate we open later, then the record
    check_ret("acl.rt.value_wait", acl.rt.value_wait(gate, 1, ACL_STREAM_WAIT_VALUE_EQ, stream))
    check_ret("memcpy_async H2D", acl.rt.memcpy_async(shared, SIZE, pinned, SIZE, ACL_MEMCPY_HOST_TO_DEVICE, stream))
    check_ret("acl.rt.record_event", acl.rt.record_event(event, stream))
    print(f"[producer] device {device}: produce + record_event queued behind a closed gate")

    child = subprocess.Popen([sys.executable, __file__, "consumer", str(peer)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        child.stdin.write(f"handles {bytes(handle).hex()} {key}\n")
        child.stdin.flush()
        queued = child.stdout.readline().split()
        print(f"[consumer] device {peer}: stream_wait_event + copy queued, its stream is {queued[1]}")
        one = np.array([1], np.uint64)
        check_ret("open the gate", acl.rt.memcpy(gate, 8, acl.util.numpy_to_ptr(one), 8, ACL_MEMCPY_HOST_TO_DEVICE))
        done = child.stdout.readline().split()
        print(f"[consumer] synchronize_stream returned after our record; data {done[1]}")
    except BaseException:
        child.kill()
        child.wait()
        raise
    if child.wait(60) != 0:
        raise Exception(f"the consumer failed (exit {child.returncode})")

    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    check_ret("acl.rt.ipc_mem_close", acl.rt.ipc_mem_close(key))
    check_ret("acl.rt.destroy_event", acl.rt.destroy_event(event))
    for ptr in (shared, gate):
        check_ret("acl.rt.free", acl.rt.free(ptr))
    check_ret("acl.rt.free_host", acl.rt.free_host(pinned))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(device))
    check_ret("acl.finalize", acl.finalize())
    ok = queued[1] == "NOT_READY" and done[1] == "OK"
    print(f"ipc_event: device {peer} stream waited for device {device}'s record in another process: "
          f"{'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "consumer":
        consumer(int(sys.argv[2]))
        sys.exit(0)
    sys.exit(main())
