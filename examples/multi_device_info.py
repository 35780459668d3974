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

ACL_SUCCESS = 0
ACL_HBM_MEM = 1
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_ERROR_RT_CONTEXT_NULL = 107002
ATTRS = {                                  # aclrtDevAttr values
    "AI Core": 101,                        # ACL_DEV_ATTR_AICORE_CORE_NUM
    "Cube": 102,                           # ACL_DEV_ATTR_CUBE_CORE_NUM
    "Vector": 201,                         # ACL_DEV_ATTR_VECTOR_CORE_NUM
    "AI CPU": 1,                           # ACL_DEV_ATTR_AICPU_CORE_NUM
    "HBM GiB": 301,                        # ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE
    "L2 MiB": 302,                         # ACL_DEV_ATTR_L2_CACHE_SIZE
    "NpuArch": 601,                        # ACL_DEV_ATTR_NPU_ARCH
}
TOPO_NAMES = {0x01: "HCCS", 0x02: "PIX", 0x04: "PIB", 0x08: "PHB", 0x10: "SYS", 0x20: "SIO", 0x40: "HCCS_SW"}


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def main():
    check_ret("acl.init", acl.init())
    count, ret = acl.rt.get_device_count()
    check_ret("acl.rt.get_device_count", ret)
    print(f"{count} devices ({acl.get_soc_name()}), ids 0..{count - 1}")

    # device attributes, no device needs to be set for these queries
    print("device " + "".join(f"{name:>9}" for name in ATTRS))
    for device in range(count):
        row = []
        for name, attr in ATTRS.items():
            value, ret = acl.rt.get_device_info(device, attr)
            check_ret("acl.rt.get_device_info", ret)
            if name == "HBM GiB":
                value = f"{value / (1 << 30):g}"
            elif name == "L2 MiB":
                value = value >> 20
            row.append(f"{value:>9}")
        print(f"{device:>6} " + "".join(row))

    # how every pair is connected, and whether it may use peer access
    print("link class (aclrtGetDevicesTopo) / peer access (aclrtDeviceCanAccessPeer):")
    print("       " + "".join(f"{b:>9}" for b in range(count)))
    p2p_pairs = 0
    for a in range(count):
        cells = []
        for b in range(count):
            if a == b:
                cells.append(f"{'X':>9}")
                continue
            topo, ret = acl.rt.get_devices_topo(a, b)
            check_ret("acl.rt.get_devices_topo", ret)
            can, ret = acl.rt.device_can_access_peer(a, b)
            check_ret("acl.rt.device_can_access_peer", ret)
            p2p_pairs += can
            cells.append(f"{TOPO_NAMES.get(topo, hex(topo)) + ('/p2p' if can else '/-'):>9}")
        print(f"{a:>6} " + "".join(cells))

    # select each device in turn: streams and memory belong to the device current at creation
    streams, buffers = {}, {}
    for device in range(count):
        check_ret("acl.rt.set_device", acl.rt.set_device(device))
        current, ret = acl.rt.get_device()
        check_ret("acl.rt.get_device", ret)
        free, total, ret = acl.rt.get_mem_info(ACL_HBM_MEM)
        check_ret("acl.rt.get_mem_info", ret)
        streams[device], ret = acl.rt.create_stream()
        check_ret("acl.rt.create_stream", ret)
        buffers[device], ret = acl.rt.malloc(4096, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("acl.rt.malloc", ret)
        # a task on this device: fill the buffer with the device id
        ret = acl.rt.memset_async(buffers[device], 4096, device, 4096, streams[device])
        check_ret("acl.rt.memset_async", ret)
        print(f"set_device({device}): current device {current}, HBM free {free >> 20} of {total >> 20} MiB")

    # collect: each device's buffer holds its own id
    ok = True
    host = np.zeros(4096, np.uint8)
    for device in range(count):
        check_ret("acl.rt.set_device", acl.rt.set_device(device))
        check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(streams[device]))
        ret = acl.rt.memcpy(acl.util.numpy_to_ptr(host), 4096, buffers[device], 4096, ACL_MEMCPY_DEVICE_TO_HOST)
        check_ret("acl.rt.memcpy", ret)
        ok &= bool((host == device).all())
        check_ret("acl.rt.free", acl.rt.free(buffers[device]))

    # reset_device_force: default context, default stream and the streams created in it
    for device in reversed(range(count)):
        check_ret("acl.rt.reset_device_force", acl.rt.reset_device_force(device))
    _, ret = acl.rt.get_device()
    ok &= ret == ACL_ERROR_RT_CONTEXT_NULL      # the thread's context went with the reset
    print(f"after reset_device_force of every device: get_device -> ret {ret} (no context)")
    check_ret("acl.finalize", acl.finalize())

    if not ok:
        print("multi_device_info: MISMATCH")
        return 1
    print(f"multi_device_info: {count} devices listed, {p2p_pairs} of {count * (count - 1)} ordered pairs "
          f"P2P-capable, one task per device verified: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
