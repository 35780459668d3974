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


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def physical_prop(device):
    return dict(handleType=acl.ACL_MEM_HANDLE_TYPE_NONE, allocationType=acl.ACL_MEM_ALLOCATION_TYPE_PINNED,
                memAttr=acl.ACL_HBM_MEM_HUGE, location=dict(type=acl.ACL_MEM_LOCATION_TYPE_DEVICE, id=device),
                reserve=0)


def expected(nbytes):
    return (np.arange(nbytes, dtype=np.uint64) % 253).astype(np.uint8)


def map_range(handles, grain):
    """Reserve one virtual range and map the physical pieces into it, one after the other."""
    va, ret = acl.rt.reserve_mem_address(grain * len(handles), 0, 0, 0)
    check(ret, "reserve_mem_address")
    for i, handle in enumerate(handles):
        check(acl.rt.map_mem(va + i * grain, grain, 0, handle, 0), "map_mem")
    return va


def unmap_range(va, handles, grain):
    for i, handle in enumerate(handles):
        check(acl.rt.unmap_mem(va + i * grain), "unmap_mem")
        check(acl.rt.free_physical(handle), "free_physical")
    check(acl.rt.release_mem_address(va), "release_mem_address")


def to_host(ptr, nbytes):
    out = np.empty(nbytes, np.uint8)
    check(acl.rt.memcpy(acl.util.numpy_to_ptr(out), nbytes, ptr, nbytes, acl.ACL_MEMCPY_DEVICE_TO_HOST), "memcpy D2H")
    return out


# ---------------------------------------------------------------------------- process B
def importer(device, owner):
    """Child process: one line per message, from process A on stdin, to it on stdout."""
    check(acl.init(), "init")
    check(acl.rt.set_device(device), "set_device")
    if device != owner:
        check(acl.rt.device_enable_peer_access(owner, 0), "device_enable_peer_access")
    pid, ret = acl.rt.device_get_bare_tgid()
    check(ret, "device_get_bare_tgid")
    print(pid, flush=True)

    grain, *shareables = map(int, sys.stdin.readline().split())
    total = grain * len(shareables)
    handles = []
    for shareable in shareables:
        handle, ret = acl.rt.mem_import_from_shareable_handle(shareable, device)
        check(ret, "mem_import_from_shareable_handle")
        handles.append(handle)
    va = map_range(handles, grain)
    desc = [dict(flags=acl.ACL_RT_MEM_ACCESS_FLAGS_READWRITE,
                 location=dict(type=acl.ACL_MEM_LOCATION_TYPE_DEVICE, id=device))]
    for i in range(len(handles)):
        check(acl.rt.mem_set_access(va + i * grain, grain, desc, 1), "mem_set_access")

    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    local, ret = acl.rt.malloc(total, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    check(acl.rt.memcpy_async(local, total, va, total, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, stream), "memcpy_async D2D")
    check(acl.rt.memset_async(va + grain, grain, 0x42, grain, stream), "memset_async")
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    ok = np.array_equal(to_host(local, total), expected(total))

    unmap_range(va, handles, grain)
    check(acl.rt.free(local), "free")
    check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(device), "reset_device")
    check(acl.finalize(), "finalize")
    print("OK" if ok else "WRONG", flush=True)


# ---------------------------------------------------------------------------- process A
def share_once(device, peer, validate_pid):
    prop = physical_prop(device)
    grain, ret = acl.rt.mem_get_allocation_granularity(prop, acl.ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED)
    check(ret, "mem_get_allocation_granularity")
    handles = []
    for _ in range(2):
        handle, ret = acl.rt.malloc_physical(grain, prop, 0)
        check(ret, "malloc_physical")
        handles.append(handle)
    total = grain * len(handles)
    va = map_range(handles, grain)
    data = expected(total)
    check(acl.rt.memcpy(va, total, acl.util.numpy_to_ptr(data), total, acl.ACL_MEMCPY_HOST_TO_DEVICE),
          "memcpy H2D over both pieces")

    child = subprocess.Popen([sys.executable, __file__, "importer", str(peer), str(device)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        pid = int(child.stdout.readline())
        flags = (acl.ACL_RT_VMM_EXPORT_FLAG_DEFAULT if validate_pid
                 else acl.ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION)
        shareables = []
        for handle in handles:
            shareable, ret = acl.rt.mem_export_to_shareable_handle(handle, acl.ACL_MEM_HANDLE_TYPE_NONE, flags)
            check(ret, "mem_export_to_shareable_handle")
            if validate_pid:
                check(acl.rt.mem_set_pid_to_shareable_handle(shareable, [pid]), "mem_set_pid_to_shareable_handle")
            shareables.append(shareable)
        print(grain, *shareables, file=child.stdin, flush=True)
        read_ok = child.stdout.readline().strip() == "OK"      # B is done
    except BaseException:
        child.kill()                     # never leave process B waiting for us
        child.wait()
        raise
    if child.wait(60) != 0:
        raise RuntimeError(f"the importer failed (exit {child.returncode})")

    back = to_host(va, total)
    write_ok = np.array_equal(back[:grain], data[:grain]) and (back[grain:] == 0x42).all()
    unmap_range(va, handles, grain)
    mode = f"with PID validation (pid {pid} listed)" if validate_pid else "without PID validation"
    print(f"  {mode}: 2 x {grain >> 20} MiB handles, one {total >> 20} MiB range in each process; "
          f"B read it {'OK' if read_ok else 'WRONG'}, A sees B's memset {'OK' if write_ok else 'WRONG'}")
    return read_ok and write_ok


def main():
    check(acl.init(), "init")
    count, ret = acl.rt.get_device_count()
    check(ret, "get_device_count")
    device, peer = 0, (1 if count > 1 else 0)
    check(acl.rt.set_device(device), "set_device")
    print(f"process A on device {device}, process B on device {peer}")
    rounds = [share_once(device, peer, validate_pid) for validate_pid in (True, False)]
    check(acl.rt.reset_device(device), "reset_device")
    check(acl.finalize(), "finalize")
    ok = all(rounds)
    print(f"vmm_sharing: physical memory of device {device} mapped in two processes, with and without "
          f"PID validation: {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":                   # the child process runs this file again, as "importer"
    sys.exit(importer(int(sys.argv[2]), int(sys.argv[3])) if sys.argv[1:2] == ["importer"] else main())
