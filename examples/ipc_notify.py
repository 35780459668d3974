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

NPY_INT32 = 5                            # NumPy type number, as acl.util.ptr_to_numpy takes it
COUNT = 512 * 1024                       # int32 elements: 2 MiB
SIZE = COUNT * 4
WAIT_TIMEOUT_S = 60


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def release(mem_key, notify, stream, device_buffer):
    """What both sides hold: the buffer's key (the importer closes first), the notify, a stream, device memory."""
    check(acl.rt.ipc_mem_close(mem_key), "ipc_mem_close")
    check(acl.rt.destroy_notify(notify), "destroy_notify")
    check(acl.rt.free(device_buffer), "free")
    check(acl.rt.destroy_stream(stream), "destroy_stream")


# ---------------------------------------------------------------------------- signaller
def signaller(device):
    """Child process: one line per message, from the creator on stdin, to it on stdout."""
    check(acl.init(), "init")
    check(acl.rt.set_device(device), "set_device")
    pid, ret = acl.rt.device_get_bare_tgid()
    check(ret, "device_get_bare_tgid")
    print(pid, flush=True)

    notify_key, mem_key, fill = sys.stdin.readline().split()
    notify, ret = acl.rt.notify_import_by_key(notify_key, acl.ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS)
    check(ret, "notify_import_by_key")
    shared, ret = acl.rt.ipc_mem_import_by_key(mem_key, acl.ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS)
    check(ret, "ipc_mem_import_by_key")
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    local, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    data = np.arange(COUNT, dtype=np.int32) * int(fill)
    check(acl.rt.memcpy(local, SIZE, acl.util.numpy_to_ptr(data), SIZE, acl.ACL_MEMCPY_HOST_TO_DEVICE), "memcpy H2D")

    check(acl.rt.memcpy_async(shared, SIZE, local, SIZE, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, stream), "memcpy_async D2D")
    check(acl.rt.record_notify(notify, stream), "record_notify")     # after the copy
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    print("recorded", flush=True)

    sys.stdin.readline()                 # "close"
    release(mem_key, notify, stream, local)
    check(acl.rt.reset_device(device), "reset_device")
    check(acl.finalize(), "finalize")
    print("closed", flush=True)


# ---------------------------------------------------------------------------- creator
def export_keys(notify, buffer, pid, validate_pid):
    """The notify's key and the buffer's key, for ``pid`` only or for anyone."""
    if validate_pid:
        notify_flags, mem_flags = acl.ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT, acl.ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT
    else:                                # the two flags differ: 0x2 for notifies, 0x1 for memory
        notify_flags = acl.ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION
        mem_flags = acl.ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION
    notify_key, ret = acl.rt.notify_get_export_key(notify, 65, notify_flags)
    check(ret, "notify_get_export_key")
    mem_key, ret = acl.rt.ipc_mem_get_export_key(buffer, SIZE, 65, mem_flags)
    check(ret, "ipc_mem_get_export_key")
    if validate_pid:
        check(acl.rt.notify_set_import_pid(notify, [pid]), "notify_set_import_pid")
        check(acl.rt.ipc_mem_set_import_pid(mem_key, [pid]), "ipc_mem_set_import_pid")
    return notify_key, mem_key


def signal_once(device, peer, validate_pid, fill):
    child = subprocess.Popen([sys.executable, __file__, "signaller", str(peer)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        stream, ret = acl.rt.create_stream()
        check(ret, "create_stream")
        buffer, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        pinned, ret = acl.rt.malloc_host(SIZE)
        check(ret, "malloc_host")
        notify, ret = acl.rt.create_notify(acl.ACL_NOTIFY_DEFAULT)
        check(ret, "create_notify")
        pid = int(child.stdout.readline())
        notify_key, mem_key = export_keys(notify, buffer, pid, validate_pid)

        # queue the consumer side first: it waits on the device, the host goes on
        check(acl.rt.wait_and_reset_notify(notify, stream, WAIT_TIMEOUT_S), "wait_and_reset_notify")
        check(acl.rt.memcpy_async(pinned, SIZE, buffer, SIZE, acl.ACL_MEMCPY_DEVICE_TO_HOST, stream),
              "memcpy_async D2H")
        print(notify_key, mem_key, fill, file=child.stdin, flush=True)
        child.stdout.readline()          # "recorded"
        check(acl.rt.synchronize_stream(stream), "synchronize_stream")
        ok = np.array_equal(acl.util.ptr_to_numpy(pinned, (COUNT,), NPY_INT32), np.arange(COUNT, dtype=np.int32) * fill)
        print("close", file=child.stdin, flush=True)
        child.stdout.readline()          # "closed": importers close the key first

        release(mem_key, notify, stream, buffer)
        check(acl.rt.free_host(pinned), "free_host")
    except BaseException:
        child.kill()                     # never leave the signaller waiting for us
        child.wait()
        raise
    if child.wait(60) != 0:
        raise RuntimeError(f"the signaller failed (exit {child.returncode})")
    mode = f"with PID validation (pid {pid} listed)" if validate_pid else "without PID validation"
    print(f"  {mode}: device {peer} wrote the buffer and recorded; device {device}'s wait released, "
          f"data {'OK' if ok else 'WRONG'}")
    return ok


def main():
    check(acl.init(), "init")
    count, ret = acl.rt.get_device_count()
    check(ret, "get_device_count")
    device, peer = 0, (1 if count > 1 else 0)
    check(acl.rt.set_device(device), "set_device")
    rounds = [signal_once(device, peer, validate_pid, fill) for validate_pid, fill in ((True, 3), (False, 5))]
    check(acl.rt.reset_device(device), "reset_device")
    check(acl.finalize(), "finalize")
    ok = all(rounds)
    print(f"ipc_notify: device {peer} signalled device {device} across processes, "
          f"with and without PID validation: {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":                   # the child process runs this file again, as "signaller"
    sys.exit(signaller(int(sys.argv[2])) if sys.argv[1:2] == ["signaller"] else main())
