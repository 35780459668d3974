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

IPC_KEY_LEN = 65
COUNT = 1 << 20                          # int32 elements: 4 MiB, whole 2 MiB pages
SIZE = COUNT * 4


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def to_device(dev, array):
    check(acl.rt.memcpy(dev, SIZE, acl.util.numpy_to_ptr(array), SIZE, acl.ACL_MEMCPY_HOST_TO_DEVICE), "memcpy H2D")


def to_host(dev):
    out = np.empty(COUNT, np.int32)
    check(acl.rt.memcpy(acl.util.numpy_to_ptr(out), SIZE, dev, SIZE, acl.ACL_MEMCPY_DEVICE_TO_HOST), "memcpy D2H")
    return out


# ---------------------------------------------------------------------------- importer
def importer(device):
    """Child process: one line per message, from the exporter on stdin, to it on stdout."""
    check(acl.init(), "init")
    check(acl.rt.set_device(device), "set_device")
    pid, ret = acl.rt.device_get_bare_tgid()
    check(ret, "device_get_bare_tgid")
    print(pid, flush=True)

    key = sys.stdin.readline().strip()
    shared, ret = acl.rt.ipc_mem_import_by_key(key, acl.ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS)
    check(ret, "ipc_mem_import_by_key")
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    local, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")

    def device_copy(dst, src):
        check(acl.rt.memcpy_async(dst, SIZE, src, SIZE, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, stream), "memcpy_async D2D")
        check(acl.rt.synchronize_stream(stream), "synchronize_stream")

    # the shared memory takes device copies only: read and write it through our own memory
    device_copy(local, shared)
    seen = to_host(local)
    if not np.array_equal(seen, np.arange(COUNT, dtype=np.int32)):
        raise RuntimeError("the importer read wrong data")
    to_device(local, seen * 2)
    device_copy(shared, local)
    print("done", flush=True)

    sys.stdin.readline()                 # "close": the exporter has checked our writes
    check(acl.rt.ipc_mem_close(key), "ipc_mem_close")
    check(acl.rt.free(local), "free")
    check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(device), "reset_device")
    check(acl.finalize(), "finalize")
    print("closed", flush=True)


# ---------------------------------------------------------------------------- exporter
def share_once(device, peer, validate_pid):
    child = subprocess.Popen([sys.executable, __file__, "importer", str(peer)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        dev, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        data = np.arange(COUNT, dtype=np.int32)
        to_device(dev, data)
        pid = int(child.stdout.readline())
        flags = (acl.ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT if validate_pid
                 else acl.ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION)
        key, ret = acl.rt.ipc_mem_get_export_key(dev, SIZE, IPC_KEY_LEN, flags)
        check(ret, "ipc_mem_get_export_key")
        if validate_pid:
            check(acl.rt.ipc_mem_set_import_pid(key, [pid]), "ipc_mem_set_import_pid")
        print(key, file=child.stdin, flush=True)

        child.stdout.readline()          # "done": the importer wrote into our memory
        ok = np.array_equal(to_host(dev), data * 2)
        print("close", file=child.stdin, flush=True)
        child.stdout.readline()          # "closed": importers close the key first
        check(acl.rt.ipc_mem_close(key), "ipc_mem_close")
        check(acl.rt.free(dev), "free")
    except BaseException:
        child.kill()                     # never leave the importer waiting for us
        child.wait()
        raise
    if child.wait(60) != 0:
        raise RuntimeError(f"the importer failed (exit {child.returncode})")
    mode = f"with PID validation (pid {pid} listed)" if validate_pid else "without PID validation"
    print(f"  {mode}: device {peer} read {SIZE >> 20} MiB of device {device} and wrote it back doubled: "
          f"{'OK' if ok else 'WRONG'}")
    return ok


def main():
    check(acl.init(), "init")
    count, ret = acl.rt.get_device_count()
    check(ret, "get_device_count")
    device, peer = 0, (1 if count > 1 else 0)
    check(acl.rt.set_device(device), "set_device")
    print(f"exporter pid {acl.rt.device_get_bare_tgid()[0]} on device {device}, importer on device {peer}")
    rounds = [share_once(device, peer, validate_pid) for validate_pid in (True, False)]
    check(acl.rt.reset_device(device), "reset_device")
    check(acl.finalize(), "finalize")
    ok = all(rounds)
    print(f"ipc_memory: device {device} -> device {peer}, with and without PID validation: {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":                   # the child process runs this file again, as "importer"
    sys.exit(importer(int(sys.argv[2])) if sys.argv[1:2] == ["importer"] else main())
