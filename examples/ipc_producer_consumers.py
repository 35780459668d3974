"""A producer process feeds N consumer processes from one device buffer (IPC memory + event).

    producer (this process, device 0)          consumer i (child process, device i)
                                   <-- pid ---  device_get_bare_tgid()
    malloc buffer, key = ipc_mem_get_export_key(buffer, size, 65, 0)
    ipc_mem_set_import_pid(key, [pid_1, ..., pid_N])
    event = create_event_ex_with_flag(ACL_EVENT_IPC), handle = ipc_get_event_handle(event)
    stream: memcpy_async(pinned -> buffer), record_event(event)
                                   -- handle + key -->  open the event, import the buffer with
                                                        ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS
                                                        stream: stream_wait_event(event)
                                                                memcpy_async(buffer -> own memory)
                                   <-- checksum ---     synchronize_stream, check
                                   -- close -->         ipc_mem_close(key)  (importers first)
    ipc_mem_close(key), free       <-- closed --

Meant for the 8-device board (the default preset): consumers run on devices 1..N, each
reaching device 0's memory over HCCS.

    python examples/ipc_producer_consumers.py [N]        # N consumers, default 4 (at least 3)
"""

import subprocess
import sys

import numpy as np

import mdev.acl as acl

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_MEMCPY_DEVICE_TO_DEVICE = 3
ACL_EVENT_IPC = 0x40
ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT = 0x0
ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS = 0x1
NPY_FLOAT32 = 11

COUNT = 2 << 20                          # float32 elements: 8 MiB
SIZE = COUNT * 4


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def expected_data():
    return np.linspace(0.0, 1.0, COUNT, dtype=np.float32)


# ---------------------------------------------------------------------------- consumer
def consumer(device):
    def send(*words):
        print(*words, flush=True)

    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(device))
    pid, ret = acl.rt.device_get_bare_tgid()
    check_ret("acl.rt.device_get_bare_tgid", ret)
    send("pid", pid)

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
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    seen = np.empty(COUNT, np.float32)
    check_ret("memcpy D2H", acl.rt.memcpy(acl.util.numpy_to_ptr(seen), SIZE, local, SIZE,
                                          ACL_MEMCPY_DEVICE_TO_HOST))
    same = np.array_equal(seen, expected_data())
    send("done", device, f"{float(seen.astype(np.float64).sum()):.6f}", "OK" if same else "WRONG")

    sys.stdin.readline()                 # "close"
    check_ret("acl.rt.ipc_mem_close", acl.rt.ipc_mem_close(key))
    check_ret("acl.rt.destroy_event", acl.rt.destroy_event(event))
    check_ret("acl.rt.free", acl.rt.free(local))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(device))
    check_ret("acl.finalize", acl.finalize())
    send("closed")


# ---------------------------------------------------------------------------- producer
class Child:
    """A consumer process and the pipes that carry keys to it and answers back."""

    def __init__(self, device):
        self.device = device
        self.proc = subprocess.Popen([sys.executable, __file__, "consumer", str(device)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def send(self, *words):
        self.proc.stdin.write(" ".join(map(str, words)) + "\n")
        self.proc.stdin.flush()

    def expect(self, word):
        line = self.proc.stdout.readline().split()
        if not line or line[0] != word:
            raise Exception(f"consumer on device {self.device} said {line!r}, expected {word!r}")
        return line[1:]


def main():
    wanted = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    check_ret("acl.init", acl.init())
    count, ret = acl.rt.get_device_count()
    check_ret("acl.rt.get_device_count", ret)
    consumers = min(wanted, count - 1)
    if consumers < 3:
        print(f"ipc_producer_consumers: needs at least 4 devices (this board has {count}); "
              f"run it on the 8-device preset (MDEV_TOPOLOGY=hccs8)")
        return 1
    producer = 0
    check_ret("acl.rt.set_device", acl.rt.set_device(producer))
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    buffer, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    pinned, ret = acl.rt.malloc_host(SIZE)
    check_ret("acl.rt.malloc_host", ret)
    acl.util.ptr_to_numpy(pinned, (COUNT,), NPY_FLOAT32)[:] = expected_data()

    children = [Child(device) for device in range(1, consumers + 1)]
    try:
        pids = [int(c.expect("pid")[0]) for c in children]
        key, ret = acl.rt.ipc_mem_get_export_key(buffer, SIZE, 65, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT)
        check_ret("acl.rt.ipc_mem_get_export_key", ret)
        check_ret("acl.rt.ipc_mem_set_import_pid", acl.rt.ipc_mem_set_import_pid(key, pids))
        event, ret = acl.rt.create_event_ex_with_flag(ACL_EVENT_IPC)
        check_ret("acl.rt.create_event_ex_with_flag", ret)
        handle, ret = acl.rt.ipc_get_event_handle(event)
        check_ret("acl.rt.ipc_get_event_handle", ret)
        print(f"[producer] device {producer}: {SIZE >> 20} MiB buffer exported to pids {pids}")

        # produce, record, and only then hand out the event: the consumers' waits refer to it
        check_ret("memcpy_async H2D", acl.rt.memcpy_async(buffer, SIZE, pinned, SIZE, ACL_MEMCPY_HOST_TO_DEVICE, stream))
        check_ret("acl.rt.record_event", acl.rt.record_event(event, stream))
        for c in children:
            c.send("go", bytes(handle).hex(), key)

        expected_sum = float(expected_data().astype(np.float64).sum())
        ok = True
        for c in children:
            device, checksum, verdict = c.expect("done")
            good = verdict == "OK" and abs(float(checksum) - expected_sum) < 1e-3
            ok &= good
            print(f"[consumer] device {device}: copied the buffer over peer access, checksum {checksum} "
                  f"{'OK' if good else 'WRONG'}")
        for c in children:
            c.send("close")
        for c in children:
            c.expect("closed")
    except BaseException:
        for c in children:
            c.proc.kill()
            c.proc.wait()
        raise
    for c in children:
        if c.proc.wait(60) != 0:
            raise Exception(f"consumer on device {c.device} failed (exit {c.proc.returncode})")

    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    check_ret("acl.rt.ipc_mem_close", acl.rt.ipc_mem_close(key))
    check_ret("acl.rt.destroy_event", acl.rt.destroy_event(event))
    check_ret("acl.rt.free", acl.rt.free(buffer))
    check_ret("acl.rt.free_host", acl.rt.free_host(pinned))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(producer))
    check_ret("acl.finalize", acl.finalize())
    print(f"ipc_producer_consumers: device {producer} fed {consumers} consumer processes on devices "
          f"1..{consumers} from one buffer: {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "consumer":
        consumer(int(sys.argv[2]))
        sys.exit(0)
    sys.exit(main())
