"""Physical memory shared between two processes through VMM handles (guide 02 "虚拟内存管理",
06 "进程间通信": physical memory sharing, with and without a PID list).

    process A (this one, device 0)                      process B (child, device 1)
    granularity = mem_get_allocation_granularity(prop)
    h0, h1 = malloc_physical(granularity, prop, 0)  x2
    va = reserve_mem_address(2 * granularity)
    map_mem(va, ..., h0) and map_mem(va + granularity, ..., h1)   -> one contiguous range
    memcpy H2D into va (one copy over both pieces)
                                           <-- pid --   device_get_bare_tgid()
    s0, s1 = mem_export_to_shareable_handle(h, NONE, flags)
    mem_set_pid_to_shareable_handle(s, [pid])   (only with PID validation)
                                           -- s0 s1 --> device_enable_peer_access(0)
                                                        h = mem_import_from_shareable_handle(s, 1)  x2
                                                        reserve, map both, mem_set_access
                                                        memcpy_async va -> own memory, check it,
                                                        memset the second piece through its va
                                                        unmap, free_physical, release
                                           <-- done --
    see B's write, unmap, free_physical, release_mem_address

    python examples/vmm_sharing.py
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
ACL_MEM_HANDLE_TYPE_NONE = 0
ACL_MEM_ALLOCATION_TYPE_PINNED = 0
ACL_HBM_MEM_HUGE = 4
ACL_MEM_LOCATION_TYPE_DEVICE = 1
ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1
ACL_RT_MEM_ACCESS_FLAGS_READWRITE = 0x3
ACL_RT_VMM_EXPORT_FLAG_DEFAULT = 0x0
ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION = 0x1


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def physical_prop(device):
    return dict(handleType=ACL_MEM_HANDLE_TYPE_NONE, allocationType=ACL_MEM_ALLOCATION_TYPE_PINNED,
                memAttr=ACL_HBM_MEM_HUGE, location=dict(type=ACL_MEM_LOCATION_TYPE_DEVICE, id=device), reserve=0)


def expected(nbytes):
    return (np.arange(nbytes, dtype=np.uint64) % 253).astype(np.uint8)


# ---------------------------------------------------------------------------- process B
def importer(device, owner):
    def send(*words):
        print(*words, flush=True)

    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(device))
    if device != owner:
        check_ret("acl.rt.device_enable_peer_access", acl.rt.device_enable_peer_access(owner, 0))
    pid, ret = acl.rt.device_get_bare_tgid()
    check_ret("acl.rt.device_get_bare_tgid", ret)
    send("pid", pid)

    _, grain, *shareables = sys.stdin.readline().split()
    grain, total = int(grain), int(grain) * len(shareables)
    handles = []
    for shareable in shareables:
        handle, ret = acl.rt.mem_import_from_shareable_handle(int(shareable), device)
        check_ret("acl.rt.mem_import_from_shareable_handle", ret)
        handles.append(handle)
    va, ret = acl.rt.reserve_mem_address(total, 0, 0, 0)
    check_ret("acl.rt.reserve_mem_address", ret)
    for i, handle in enumerate(handles):
        check_ret("acl.rt.map_mem", acl.rt.map_mem(va + i * grain, grain, 0, handle, 0))
    desc = [dict(flags=ACL_RT_MEM_ACCESS_FLAGS_READWRITE, location=dict(type=ACL_MEM_LOCATION_TYPE_DEVICE, id=device))]
    for i in range(len(handles)):
        check_ret("acl.rt.mem_set_access", acl.rt.mem_set_access(va + i * grain, grain, desc, 1))

    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    local, ret = acl.rt.malloc(total, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    check_ret("memcpy_async va -> local", acl.rt.memcpy_async(local, total, va, total, ACL_MEMCPY_DEVICE_TO_DEVICE, stream))
    check_ret("acl.rt.memset_async", acl.rt.memset_async(va + grain, grain, 0x42, grain, stream))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    seen = np.empty(total, np.uint8)
    check_ret("memcpy D2H", acl.rt.memcpy(acl.util.numpy_to_ptr(seen), total, local, total, ACL_MEMCPY_DEVICE_TO_HOST))
    ok = np.array_equal(seen, expected(total))

    for i, handle in enumerate(handles):
        check_ret("acl.rt.unmap_mem", acl.rt.unmap_mem(va + i * grain))
        check_ret("acl.rt.free_physical", acl.rt.free_physical(handle))
    check_ret("acl.rt.release_mem_address", acl.rt.release_mem_address(va))
    check_ret("acl.rt.free", acl.rt.free(local))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(device))
    check_ret("acl.finalize", acl.finalize())
    send("done", "OK" if ok else "WRONG")


# ---------------------------------------------------------------------------- process A
def share_once(device, peer, validate_pid):
    prop = physical_prop(device)
    grain, ret = acl.rt.mem_get_allocation_granularity(prop, ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED)
    check_ret("acl.rt.mem_get_allocation_granularity", ret)
    handles = []
    for _ in range(2):
        handle, ret = acl.rt.malloc_physical(grain, prop, 0)
        check_ret("acl.rt.malloc_physical", ret)
        handles.append(handle)
    total = grain * len(handles)
    va, ret = acl.rt.reserve_mem_address(total, 0, 0, 0)
    check_ret("acl.rt.reserve_mem_address", ret)
    for i, handle in enumerate(handles):
        check_ret("acl.rt.map_mem", acl.rt.map_mem(va + i * grain, grain, 0, handle, 0))
    data = expected(total)
    check_ret("memcpy H2D over both pieces", acl.rt.memcpy(va, total, acl.util.numpy_to_ptr(data), total,
                                                          ACL_MEMCPY_HOST_TO_DEVICE))

    child = subprocess.Popen([sys.executable, __file__, "importer", str(peer), str(device)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline().split()
        if not line or line[0] != "pid":
            raise Exception(f"the importer said {line!r}")
        pid = int(line[1])
        flags = ACL_RT_VMM_EXPORT_FLAG_DEFAULT if validate_pid else ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION
        shareables = []
        for handle in handles:
            shareable, ret = acl.rt.mem_export_to_shareable_handle(handle, ACL_MEM_HANDLE_TYPE_NONE, flags)
            check_ret("acl.rt.mem_export_to_shareable_handle", ret)
            if validate_pid:
                check_ret("acl.rt.mem_set_pid_to_shareable_handle",
                          acl.rt.mem_set_pid_to_shareable_handle(shareable, [pid]))
            shareables.append(shareable)
        child.stdin.write(f"handles {grain} {' '.join(map(str, shareables))}\n")
        child.stdin.flush()
        line = child.stdout.readline().split()
        if not line or line[0] != "done":
            raise Exception(f"the importer said {line!r}")
        read_ok = line[1] == "OK"
    except BaseException:
        child.kill()
        child.wait()
        raise
    if child.wait(60) != 0:
        raise Exception(f"the importer failed (exit {child.returncode})")

    back = np.empty(total, np.uint8)
    check_ret("memcpy D2H", acl.rt.memcpy(acl.util.numpy_to_ptr(back), total, va, total, ACL_MEMCPY_DEVICE_TO_HOST))
    write_ok = np.array_equal(back[:grain], data[:grain]) and (back[grain:] == 0x42).all()
    for i, handle in enumerate(handles):
        check_ret("acl.rt.unmap_mem", acl.rt.unmap_mem(va + i * grain))
        check_ret("acl.rt.free_physical", acl.rt.free_physical(handle))
    check_ret("acl.rt.release_mem_address", acl.rt.release_mem_address(va))
    mode = f"with PID validation (pid {pid} listed)" if validate_pid else "without PID validation"
    print(f"  {mode}: 2 x {grain >> 20} MiB handles, one {total >> 20} MiB range in each process; "
          f"B read it {'OK' if read_ok else 'WRONG'}, A sees B's memset {'OK' if write_ok else 'WRONG'}")
    return read_ok and write_ok


def main():
    check_ret("acl.init", acl.init())
    count, ret = acl.rt.get_device_count()
    check_ret("acl.rt.get_device_count", ret)
    device, peer = 0, (1 if count > 1 else 0)
    check_ret("acl.rt.set_device", acl.rt.set_device(device))
    print(f"process A on device {device}, process B on device {peer}")
    ok = all([share_once(device, peer, validate_pid=True), share_once(device, peer, validate_pid=False)])
    check_ret("acl.rt.reset_device", acl.rt.reset_device(device))
    check_ret("acl.finalize", acl.finalize())
    print(f"vmm_sharing: physical memory of device {device} mapped in two processes, with and without "
          f"PID validation: {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[1] == "importer":
        importer(int(sys.argv[2]), int(sys.argv[3]))
        sys.exit(0)
    sys.exit(main())
