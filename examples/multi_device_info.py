"""Multi-device selection and device information (guide 05 "多Device选择").

    get_device_count -> get_device_info for every device -> get_devices_topo and
    device_can_access_peer for every pair -> per device: set_device, get_mem_info,
    create_stream, a task -> reset_device_force (default context, default stream and every
    stream created in it go at once)

set_device switches the device of the calling thread only; memory, streams and events
created afterwards belong to the new device.

    python examples/multi_device_info.py
"""

import sys

import numpy as np

import mdev.acl as acl

ATTRS = {"AI Core": acl.ACL_DEV_ATTR_AICORE_CORE_NUM, "Cube": acl.ACL_DEV_ATTR_CUBE_CORE_NUM,
         "Vector": acl.ACL_DEV_ATTR_VECTOR_CORE_NUM, "AI CPU": acl.ACL_DEV_ATTR_AICPU_CORE_NUM,
         "HBM GiB": acl.ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE, "L2 MiB": acl.ACL_DEV_ATTR_L2_CACHE_SIZE,
         "NpuArch": acl.ACL_DEV_ATTR_NPU_ARCH}
TOPO_NAMES = {getattr(acl, f"ACL_RT_DEVS_TOPOLOGY_{name}"): name         # link classes of get_devices_topo
              for name in ("HCCS", "PIX", "PIB", "PHB", "SYS", "SIO", "HCCS_SW")}


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def attribute_cell(device, name):
    value, ret = acl.rt.get_device_info(device, ATTRS[name])
    check(ret, "get_device_info")
    if name == "HBM GiB":
        value = f"{value / (1 << 30):g}"
    elif name == "L2 MiB":
        value = value >> 20
    return f"{value:>9}"


def link_cell(a, b):
    """(link class / peer access, 1 if a may use peer access to b)"""
    if a == b:
        return f"{'X':>9}", 0
    topo, ret = acl.rt.get_devices_topo(a, b)
    check(ret, "get_devices_topo")
    can, ret = acl.rt.device_can_access_peer(a, b)
    check(ret, "device_can_access_peer")
    return f"{TOPO_NAMES.get(topo, hex(topo)) + ('/p2p' if can else '/-'):>9}", can


def main():
    check(acl.init(), "init")
    count, ret = acl.rt.get_device_count()
    check(ret, "get_device_count")
    print(f"{count} devices ({acl.get_soc_name()}), ids 0..{count - 1}")

    # device attributes, no device needs to be set for these queries
    print("device " + "".join(f"{name:>9}" for name in ATTRS))
    for device in range(count):
        print(f"{device:>6} " + "".join(attribute_cell(device, name) for name in ATTRS))

    # how every pair is connected, and whether it may use peer access
    print("link class (aclrtGetDevicesTopo) / peer access (aclrtDeviceCanAccessPeer):")
    print("       " + "".join(f"{b:>9}" for b in range(count)))
    p2p_pairs = 0
    for a in range(count):
        cells = [link_cell(a, b) for b in range(count)]
        p2p_pairs += sum(can for _, can in cells)
        print(f"{a:>6} " + "".join(cell for cell, _ in cells))

    # select each device in turn: streams and memory belong to the device current at creation
    streams, buffers = {}, {}
    for device in range(count):
        check(acl.rt.set_device(device), "set_device")
        current, ret = acl.rt.get_device()
        check(ret, "get_device")
        free, total, ret = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
        check(ret, "get_mem_info")
        streams[device], ret = acl.rt.create_stream()
        check(ret, "create_stream")
        buffers[device], ret = acl.rt.malloc(4096, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        # a task on this device: fill the buffer with the device id
        check(acl.rt.memset_async(buffers[device], 4096, device, 4096, streams[device]), "memset_async")
        print(f"set_device({device}): current device {current}, HBM free {free >> 20} of {total >> 20} MiB")

    # collect: each device's buffer holds its own id
    verified = []
    host = np.zeros(4096, np.uint8)
    for device in range(count):
        check(acl.rt.set_device(device), "set_device")
        check(acl.rt.synchronize_stream(streams[device]), "synchronize_stream")
        check(acl.rt.memcpy(acl.util.numpy_to_ptr(host), 4096, buffers[device], 4096, acl.ACL_MEMCPY_DEVICE_TO_HOST),
              "memcpy")
        verified.append(bool((host == device).all()))
        check(acl.rt.free(buffers[device]), "free")

    # reset_device_force: default context, default stream and the streams created in it
    for device in reversed(range(count)):
        check(acl.rt.reset_device_force(device), "reset_device_force")
    _, no_context = acl.rt.get_device()      # the thread's context went with the reset
    print(f"after reset_device_force of every device: get_device -> ret {no_context} (no context)")
    check(acl.finalize(), "finalize")
    ok = all(verified) and no_context == acl.ACL_ERROR_RT_CONTEXT_NULL
    print(f"multi_device_info: {count} devices listed, {p2p_pairs} of {count * (count - 1)} ordered pairs "
          f"P2P-capable, one task per device verified: {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
