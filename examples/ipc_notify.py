"""One process signals another through an IPC notify (guide 06 "进程间通信", notify part).

    creator (this process, device 0)                 signaller (child process, device 1)
    notify = create_notify(0)                <-- pid --  device_get_bare_tgid()
    key = notify_get_export_key(notify, 65, flags)
    notify_set_import_pid(notify, [pid])     (only with PID validation)
    buffer exported the same way (IPC memory key)
    stream: wait_and_reset_notify(notify)    -- keys -->  notify = notify_import_by_key(key, ENABLE_PEER_ACCESS)
            memcpy_async(buffer -> pinned)               shared = ipc_mem_import_by_key(...)
                                                         stream: memcpy_async(own data -> shared)
                                                                 record_notify(notify)
    synchronize_stream: the data is there   <-- done --

The notify belongs to its creator: only the creating process may wait on it, importers
may only record it.  One record releases exactly one wait.  The round runs twice: with
PID validation and with ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION (0x2 -- not the
0x1 of IPC memory).

    python examples/ipc_notify.py
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
ACL_NOTIFY_DEFAULT = 0
ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT = 0x0
ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION = 0x2
ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS = 0x2
ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT = 0x0
ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION = 0x1
ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS = 0x1
NPY_INT32 = 5

COUNT = 512 * 1024                       # int32 elements: 2 MiB
SIZE = COUNT * 4
WAIT_TIMEOUT_S = 60


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


# ---------------------------------------------------------------------------- signaller
def signaller(device):
    def send(*words):
        print(*words, flush=True)

    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(device))
    pid, ret = acl.rt.device_get_bare_tgid()
    check_ret("acl.rt.device_get_bare_tgid", ret)
    send("pid", pid)

    _, notify_key, mem_key, fill = sys.stdin.readline().split()
    notify, ret = acl.rt.notify_import_by_key(notify_key, ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS)
    check_ret("acl.rt.notify_import_by_key", ret)
    shared, ret = acl.rt.ipc_mem_import_by_key(mem_key, ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS)
    check_ret("acl.rt.ipc_mem_import_by_key", ret)
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    local, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    data = np.arange(COUNT, dtype=np.int32) * int(fill)
    check_ret("memcpy H2D", acl.rt.memcpy(local, SIZE, acl.util.numpy_to_ptr(data), SIZE, ACL_MEMCPY_HOST_TO_DEVICE))

    check_ret("memcpy_async local -> shared",
              acl.rt.memcpy_async(shared, SIZE, local, SIZE, ACL_MEMCPY_DEVICE_TO_DEVICE, stream))
    check_ret("acl.rt.record_notify", acl.rt.record_notify(notify, stream))     # after the copy
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    send("recorded")

    sys.stdin.readline()                 # "close"
    check_ret("acl.rt.ipc_mem_close", acl.rt.ipc_mem_close(mem_key))
    check_ret("acl.rt.destroy_notify", acl.rt.destroy_notify(notify))
    check_ret("acl.rt.free", acl.rt.free(local))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(device))
    check_ret("acl.finalize", acl.finalize())
    send("closed")


# ---------------------------------------------------------------------------- creator
def signal_once(device, peer, validate_pid, fill):
    child = subprocess.Popen([sys.executable, __file__, "signaller", str(peer)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def send(*words):
        child.stdin.write(" ".join(map(str, words)) + "\n")
        child.stdin.flush()

    def expect(word):
        line = child.stdout.readline().split()
        if not line or line[0] != word:
            raise Exception(f"signaller said {line!r}, expected {word!r}")
        return line[1:]

    try:
        stream, ret = acl.rt.create_stream()
        check_ret("acl.rt.create_stream", ret)
        buffer, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("acl.rt.malloc", ret)
        pinned, ret = acl.rt.malloc_host(SIZE)
        check_ret("acl.rt.malloc_host", ret)
        notify, ret = acl.rt.create_notify(ACL_NOTIFY_DEFAULT)
        check_ret("acl.rt.create_notify", ret)

        pid = int(expect("pid")[0])
        if validate_pid:
            notify_key, ret = acl.rt.notify_get_export_key(notify, 65, ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT)
            check_ret("acl.rt.notify_get_export_key", ret)
            check_ret("acl.rt.notify_set_import_pid", acl.rt.notify_set_import_pid(notify, [pid]))
            mem_key, ret = acl.rt.ipc_mem_get_export_key(buffer, SIZE, 65, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT)
            check_ret("acl.rt.ipc_mem_get_export_key", ret)
            check_ret("acl.rt.ipc_mem_set_import_pid", acl.rt.ipc_mem_set_import_pid(mem_key, [pid]))
        else:
            notify_key, ret = acl.rt.notify_get_export_key(notify, 65, ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION)
            check_ret("acl.rt.notify_get_export_key", ret)
            mem_key, ret = acl.rt.ipc_mem_get_export_key(buffer, SIZE, 65,
                                                         ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION)
            check_ret("acl.rt.ipc_mem_get_export_key", ret)

        # queue the consumer side first: it waits on the device, the host goes on
        check_ret("acl.rt.wait_and_reset_notify", acl.rt.wait_and_reset_notify(notify, stream, WAIT_TIMEOUT_S))
        check_ret("memcpy_async D2H", acl.rt.memcpy_async(pinned, SIZE, buffer, SIZE, ACL_MEMCPY_DEVICE_TO_HOST, stream))
        send("keys", notify_key, mem_key, fill)
        expect("recorded")
        check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
        got = acl.util.ptr_to_numpy(pinned, (COUNT,), NPY_INT32)
        ok = np.array_equal(got, np.arange(COUNT, dtype=np.int32) * fill)
        send("close")
        expect("closed")

        check_ret("acl.rt.ipc_mem_close", acl.rt.ipc_mem_close(mem_key))
        check_ret("acl.rt.destroy_notify", acl.rt.destroy_notify(notify))
        check_ret("acl.rt.free", acl.rt.free(buffer))
        check_ret("acl.rt.free_host", acl.rt.free_host(pinned))
        check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    except BaseException:
        child.kill()
        child.wait()
        raise
    if child.wait(60) != 0:
        raise Exception(f"the signaller failed (exit {child.returncode})")
    mode = f"with PID validation (pid {pid} listed)" if validate_pid else "without PID validation"
    print(f"  {mode}: device {peer} wrote the buffer and recorded; device {device}'s wait released, "
          f"data {'OK' if ok else 'WRONG'}")
    return ok


def main():
    check_ret("acl.init", acl.init())
    count, ret = acl.rt.get_device_count()
    check_ret("acl.rt.get_device_count", ret)
    device, peer = 0, (1 if count > 1 else 0)
    check_ret("acl.rt.set_device", acl.rt.set_device(device))
    ok = all([signal_once(device, peer, True, 3), signal_once(device, peer, False, 5)])
    check_ret("acl.rt.reset_device", acl.rt.reset_device(device))
    check_ret("acl.finalize", acl.finalize())
    print(f"ipc_notify: device {peer} signalled device {device} across processes, "
          f"with and without PID validation: {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "signaller":
        signaller(int(sys.argv[2]))
        sys.exit(0)
    sys.exit(main())
