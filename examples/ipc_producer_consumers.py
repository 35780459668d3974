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

NPY_FLOAT32 = 11                         # NumPy type number, as acl.util.ptr_to_numpy takes it
COUNT = 2 << 20                          # float32 elements: 8 MiB
SIZE = COUNT * 4
EXPECTED = np.linspace(0.0, 1.0, COUNT, dtype=np.float32)


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def checksum(data):
    return float(data.astype(np.float64).sum())


def buffers():
    """What both sides work with: a stream, SIZE bytes of device memory and of pinned memory."""
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    device_buffer, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    pinned, ret = acl.rt.malloc_host(SIZE)
    check(ret, "malloc_host")
    return stream, device_buffer, pinned


def release(key, event, stream, device_buffer, pinned, device):
    """Both sides end the same way: close the key (importers first), release the rest."""
    check(acl.rt.ipc_mem_close(key), "ipc_mem_close")
    check(acl.rt.destroy_event(event), "destroy_event")
    check(acl.rt.free(device_buffer), "free")
    check(acl.rt.free_host(pinned), "free_host")
    check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(device), "reset_device")
    check(acl.finalize(), "finalize")


# ---------------------------------------------------------------------------- consumer
def consumer(device):
    """Child process: one line per message, from the producer on stdin, to it on stdout."""
    check(acl.init(), "init")
    check(acl.rt.set_device(device), "set_device")
    pid, ret = acl.rt.device_get_bare_tgid()
    check(ret, "device_get_bare_tgid")
    print(pid, flush=True)

    handle_hex, key = sys.stdin.readline().split()
    event, ret = acl.rt.ipc_open_event_handle(bytes.fromhex(handle_hex))
    check(ret, "ipc_open_event_handle")
    shared, ret = acl.rt.ipc_mem_import_by_key(key, acl.ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS)
    check(ret, "ipc_mem_import_by_key")
    stream, local, pinned = buffers()

    # wait for the producer's record, copy the buffer over peer access, then to the host
    check(acl.rt.stream_wait_event(stream, event), "stream_wait_event")
    check(acl.rt.memcpy_async(local, SIZE, shared, SIZE, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, stream), "memcpy_async D2D")
    check(acl.rt.memcpy_async(pinned, SIZE, local, SIZE, acl.ACL_MEMCPY_DEVICE_TO_HOST, stream), "memcpy_async D2H")
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    seen = acl.util.ptr_to_numpy(pinned, (COUNT,), NPY_FLOAT32)
    print(device, f"{checksum(seen):.6f}", "OK" if np.array_equal(seen, EXPECTED) else "WRONG", flush=True)
    del seen

    sys.stdin.readline()                 # "close"
    release(key, event, stream, local, pinned, device)
    print("closed", flush=True)


# ---------------------------------------------------------------------------- producer
class Child:
    """A consumer process; lines on its stdin and stdout carry the messages."""

    def __init__(self, device):
        self.device = device
        self.proc = subprocess.Popen([sys.executable, __file__, "consumer", str(device)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def send(self, *words):
        print(*words, file=self.proc.stdin, flush=True)

    def receive(self):
        return self.proc.stdout.readline().split()


def main():
    wanted = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    check(acl.init(), "init")
    count, ret = acl.rt.get_device_count()
    check(ret, "get_device_count")
    consumers = min(wanted, count - 1)
    if consumers < 3:
        print(f"ipc_producer_consumers: needs at least 4 devices (this board has {count}); "
              f"run it on the 8-device preset (MDEV_TOPOLOGY=hccs8)")
        return 1
    producer = 0
    check(acl.rt.set_device(producer), "set_device")
    stream, buffer, pinned = buffers()
    acl.util.ptr_to_numpy(pinned, (COUNT,), NPY_FLOAT32)[:] = EXPECTED

    children = [Child(device) for device in range(1, consumers + 1)]
    try:
        pids = [int(c.receive()[0]) for c in children]
        key, ret = acl.rt.ipc_mem_get_export_key(buffer, SIZE, 65, acl.ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT)
        check(ret, "ipc_mem_get_export_key")
        check(acl.rt.ipc_mem_set_import_pid(key, pids), "ipc_mem_set_import_pid")
        event, ret = acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_IPC)
        check(ret, "create_event_ex_with_flag")
        handle, ret = acl.rt.ipc_get_event_handle(event)
        check(ret, "ipc_get_event_handle")
        print(f"[producer] device {producer}: {SIZE >> 20} MiB buffer exported to pids {pids}")

        # produce, record, and only then hand out the event: the consumers' waits refer to it
        check(acl.rt.memcpy_async(buffer, SIZE, pinned, SIZE, acl.ACL_MEMCPY_HOST_TO_DEVICE, stream),
              "memcpy_async H2D")
        check(acl.rt.record_event(event, stream), "record_event")
        for c in children:
            c.send(bytes(handle).hex(), key)
        good = []
        for c in children:
            device, sum_seen, verdict = c.receive()
            good.append(verdict == "OK" and abs(float(sum_seen) - checksum(EXPECTED)) < 1e-3)
            print(f"[consumer] device {device}: copied the buffer over peer access, checksum {sum_seen} "
                  f"{'OK' if good[-1] else 'WRONG'}")
        for c in children:
            c.send("close")
        for c in children:
            c.receive()                  # "closed": importers close the key first
    except BaseException:
        for c in children:
            c.proc.kill()                # never leave a consumer waiting for us
            c.proc.wait()
        raise
    for c in children:
        if c.proc.wait(60) != 0:
            raise RuntimeError(f"consumer on device {c.device} failed (exit {c.proc.returncode})")

    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    release(key, event, stream, buffer, pinned, producer)
    ok = all(good)
    print(f"ipc_producer_consumers: device {producer} fed {consumers} consumer processes on devices "
          f"1..{consumers} from one buffer: {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":                   # the child process runs this file again, as "consumer"
    sys.exit(consumer(int(sys.argv[2])) if sys.argv[1:2] == ["consumer"] else main())
