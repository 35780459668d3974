"""Device memory shared between two processes through an IPC key (guide 06 "进程间通信").

    exporter (this process, device 0)            importer (child process, device 1)
    malloc, fill                                 set_device(1)
                                     <-- pid --  pid = device_get_bare_tgid()
    key = ipc_mem_get_export_key(ptr, size, 65, flags)
    ipc_mem_set_import_pid(key, [pid])   (only with PID validation)
                                     -- key -->  ptr = ipc_mem_import_by_key(key, ENABLE_PEER_ACCESS)
                                                 memcpy_async shared -> own memory, check it,
                                                 write doubled values back, synchronize_stream
                                     <- done --
    check the importer's writes      -- close -> ipc_mem_close(key)   (importers close first)
                                     <- closed -
    ipc_mem_close(key), free

The round runs twice: with PID validation (export flag 0: the importer's pid must be on
the key's list) and without it (ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION).  The
key travels through the child's stdin; the child answers on its stdout.  Cross-device
IPC memory takes no H2D/D2H copies, so the importer goes through its own device memory.

    python examples/ipc_memory.py
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
ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT = 0x0
ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION = 0x1
ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS = 0x1
IPC_KEY_LEN = 65

COUNT = 1 << 20                          # int32 elements: 4 MiB, whole 2 MiB pages
SIZE = COUNT * 4


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


# ---------------------------------------------------------------------------- importer
def importer(device):
    """Child process: messages to the exporter on stdout, log lines on stderr."""
    def send(*words):
        print(*words, flush=True)

    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(device))
    pid, ret = acl.rt.device_get_bare_tgid()
    check_ret("acl.rt.device_get_bare_tgid", ret)
    send("pid", pid)

    key = sys.stdin.readline().split()[1]
    shared, ret = acl.rt.ipc_mem_import_by_key(key, ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS)
    check_ret("acl.rt.ipc_mem_import_by_key", ret)
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    local, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)

    check_ret("memcpy_async shared -> local",
              acl.rt.memcpy_async(local, SIZE, shared, SIZE, ACL_MEMCPY_DEVICE_TO_DEVICE, stream))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    seen = np.empty(COUNT, np.int32)
    check_ret("memcpy D2H", acl.rt.memcpy(acl.util.numpy_to_ptr(seen), SIZE, local, SIZE,
                                          ACL_MEMCPY_DEVICE_TO_HOST))
    if not np.array_equal(seen, np.arange(COUNT, dtype=np.int32)):
        raise Exception("the importer read wrong data")

    doubled = seen * 2
    check_ret("memcpy H2D", acl.rt.memcpy(local, SIZE, acl.util.numpy_to_ptr(doubled), SIZE,
                                          ACL_MEMCPY_HOST_TO_DEVICE))
    check_ret("memcpy_async local -> shared",
              acl.rt.memcpy_async(shared, SIZE, local, SIZE, ACL_MEMCPY_DEVICE_TO_DEVICE, stream))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    send("done")

    sys.stdin.readline()                 # "close": the exporter has checked our writes
    check_ret("acl.rt.ipc_mem_close", acl.rt.ipc_mem_close(key))
    check_ret("acl.rt.free", acl.rt.free(local))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(device))
    check_ret("acl.finalize", acl.finalize())
    send("closed")


# ---------------------------------------------------------------------------- exporter
def share_once(device, peer, validate_pid):
    child = subprocess.Popen([sys.executable, __file__, "importer", str(peer)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def send(*words):
        child.stdin.write(" ".join(map(str, words)) + "\n")
        child.stdin.flush()

    def expect(word):
        line = child.stdout.readline().split()
        if not line or line[0] != word:
            child.kill()
            raise Exception(f"importer said {line!r}, expected {word!r} (exit {child.wait()})")
        return line[1:]

    try:
        dev, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("acl.rt.malloc", ret)
        data = np.arange(COUNT, dtype=np.int32)
        check_ret("memcpy H2D", acl.rt.memcpy(dev, SIZE, acl.util.numpy_to_ptr(data), SIZE,
                                              ACL_MEMCPY_HOST_TO_DEVICE))
        pid = int(expect("pid")[0])
        flags = (ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT if validate_pid
                 else ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION)
        key, ret = acl.rt.ipc_mem_get_export_key(dev, SIZE, IPC_KEY_LEN, flags)
        check_ret("acl.rt.ipc_mem_get_export_key", ret)
        if validate_pid:
            check_ret("acl.rt.ipc_mem_set_import_pid", acl.rt.ipc_mem_set_import_pid(key, [pid]))
        send("key", key)

        expect("done")
        back = np.empty(COUNT, np.int32)
        check_ret("memcpy D2H", acl.rt.memcpy(acl.util.numpy_to_ptr(back), SIZE, dev, SIZE,
                                              ACL_MEMCPY_DEVICE_TO_HOST))
        ok = np.array_equal(back, data * 2)
        send("close")
        expect("closed")
        check_ret("acl.rt.ipc_mem_close", acl.rt.ipc_mem_close(key))
        check_ret("acl.rt.free", acl.rt.free(dev))
    except BaseException:
        child.kill()                     # never leave the importer waiting for us
        child.wait()
        raise
    if child.wait(60) != 0:
        raise Exception(f"the importer failed (exit {child.returncode})")
    mode = "with PID validation (pid %d listed)" % pid if validate_pid else "without PID validation"
    print(f"  {mode}: device {peer} read {SIZE >> 20} MiB of device {device} and wrote it back doubled: "
          f"{'OK' if ok else 'WRONG'}")
    return ok


def main():
    check_ret("acl.init", acl.init())
    count, ret = acl.rt.get_device_count()
    check_ret("acl.rt.get_device_count", ret)
    device, peer = 0, (1 if count > 1 else 0)
    check_ret("acl.rt.set_device", acl.rt.set_device(device))
    print(f"exporter pid {acl.rt.device_get_bare_tgid()[0]} on device {device}, importer on device {peer}")
    ok = all([share_once(device, peer, validate_pid=True), share_once(device, peer, validate_pid=False)])
    check_ret("acl.rt.reset_device", acl.rt.reset_device(device))
    check_ret("acl.finalize", acl.finalize())
    if not ok:
        print("ipc_memory: FAILED")
        return 1
    print(f"ipc_memory: device {device} -> device {peer}, with and without PID validation: OK")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "importer":
        importer(int(sys.argv[2]))
        sys.exit(0)
    sys.exit(main())
