"""Device memory shared between two processes through an IPC key (pyACL ipc_mem_* API).

The flow documented for acl.rt.ipc_mem_get_export_key:

  process A (exporter, device 0)             process B (importer, device 1)
  device_enable_peer_access(1, 0)            device_enable_peer_access(0, 0)
  malloc                                     pid = device_get_bare_tgid()  --pid-->
  key = ipc_mem_get_export_key(ptr, size, 65, 0)
  ipc_mem_set_import_pid(key, [pid])  --key-->
                                             ptr = ipc_mem_import_by_key(key, 0)
                                             read it, write it (async D2D only: no H2D/D2H
                                             on cross-device IPC memory), ipc_mem_close(key)
  ipc_mem_close(key) (after B's), free  <--closed--

With one device, both processes use device 0 and no peer access is needed.
"""
import multiprocessing as mp
import sys

import numpy as np

import acl

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_DEVICE_TO_DEVICE = 1, 2, 3   # aclrtMemcpyKind
ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT = 0x0
ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT = 0x0
IPC_KEY_LEN = 65

COUNT = 256 * 1024                      # int32 elements (1 MiB)
TIMEOUT = 60


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception("{} failed ret={}: {}".format(message, ret, acl.get_recent_err_msg()))


def importer(device, peer, to_exporter, from_exporter):
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(device))
    if device != peer:
        check_ret("acl.rt.device_enable_peer_access", acl.rt.device_enable_peer_access(peer, 0))
    pid, ret = acl.rt.device_get_bare_tgid()
    check_ret("acl.rt.device_get_bare_tgid", ret)
    to_exporter.put(("pid", pid))

    _, key = from_exporter.get(timeout=TIMEOUT)
    shared, ret = acl.rt.ipc_mem_import_by_key(key, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT)
    check_ret("acl.rt.ipc_mem_import_by_key", ret)
    print("[importer] device {} imported the exporter's memory".format(device))

    size = COUNT * 4
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    local, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    ret = acl.rt.memcpy_async(local, size, shared, size, ACL_MEMCPY_DEVICE_TO_DEVICE, stream)
    check_ret("acl.rt.memcpy_async shared -> local", ret)
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    out = bytes(size)
    ret = acl.rt.memcpy(acl.util.bytes_to_ptr(out), size, local, size, ACL_MEMCPY_DEVICE_TO_HOST)
    check_ret("acl.rt.memcpy D2H", ret)
    seen = np.frombuffer(out, dtype=np.int32)
    if not np.array_equal(seen, np.arange(COUNT, dtype=np.int32)):
        raise Exception("importer read wrong data")
    print("[importer] read the exporter's data")

    doubled = (np.arange(COUNT, dtype=np.int32) * 2).tobytes()
    ret = acl.rt.memcpy(local, size, acl.util.bytes_to_ptr(doubled), size, ACL_MEMCPY_HOST_TO_DEVICE)
    check_ret("acl.rt.memcpy H2D", ret)
    ret = acl.rt.memcpy_async(shared, size, local, size, ACL_MEMCPY_DEVICE_TO_DEVICE, stream)
    check_ret("acl.rt.memcpy_async local -> shared", ret)
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    print("[importer] wrote into the shared memory")
    to_exporter.put(("written", None))

    from_exporter.get(timeout=TIMEOUT)            # the exporter has checked what we wrote
    check_ret("acl.rt.ipc_mem_close", acl.rt.ipc_mem_close(key))
    check_ret("acl.rt.free", acl.rt.free(local))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(device))
    check_ret("acl.finalize", acl.finalize())
    to_exporter.put(("closed", None))


def main():
    check_ret("acl.init", acl.init())
    count, ret = acl.rt.get_device_count()
    check_ret("acl.rt.get_device_count", ret)
    device, peer = 0, (1 if count > 1 else 0)
    check_ret("acl.rt.set_device", acl.rt.set_device(device))
    if device != peer:
        check_ret("acl.rt.device_enable_peer_access", acl.rt.device_enable_peer_access(peer, 0))

    size = COUNT * 4
    dev_ptr, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    data = np.arange(COUNT, dtype=np.int32).tobytes()
    ret = acl.rt.memcpy(dev_ptr, size, acl.util.bytes_to_ptr(data), size, ACL_MEMCPY_HOST_TO_DEVICE)
    check_ret("acl.rt.memcpy H2D", ret)

    ctx = mp.get_context("spawn")
    to_exporter, from_exporter = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=importer, args=(peer, device, to_exporter, from_exporter))
    proc.start()
    try:
        _, pid = to_exporter.get(timeout=TIMEOUT)
        key, ret = acl.rt.ipc_mem_get_export_key(dev_ptr, size, IPC_KEY_LEN,
                                                 ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT)
        check_ret("acl.rt.ipc_mem_get_export_key", ret)
        check_ret("acl.rt.ipc_mem_set_import_pid", acl.rt.ipc_mem_set_import_pid(key, [pid]))
        print("[exporter] device {} exported {} bytes to pid {}".format(device, size, pid))
        from_exporter.put(("key", key))

        to_exporter.get(timeout=TIMEOUT)          # the importer wrote into our memory
        out = bytes(size)
        ret = acl.rt.memcpy(acl.util.bytes_to_ptr(out), size, dev_ptr, size, ACL_MEMCPY_DEVICE_TO_HOST)
        check_ret("acl.rt.memcpy D2H", ret)
        if not np.array_equal(np.frombuffer(out, dtype=np.int32), np.arange(COUNT, dtype=np.int32) * 2):
            raise Exception("exporter does not see what the importer wrote")
        print("[exporter] sees the importer's writes")
        from_exporter.put(("checked", None))

        to_exporter.get(timeout=TIMEOUT)          # the importer closed its key: now we may
        check_ret("acl.rt.ipc_mem_close", acl.rt.ipc_mem_close(key))
    except BaseException:
        proc.terminate()                          # do not leave the importer waiting
        proc.join()
        raise
    proc.join(TIMEOUT)
    if proc.exitcode != 0:
        raise Exception("importer failed with exit code {}".format(proc.exitcode))
    check_ret("acl.rt.free", acl.rt.free(dev_ptr))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(device))
    check_ret("acl.finalize", acl.finalize())
    print("[INFO] ipc two processes OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
