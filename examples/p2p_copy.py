"""Copy between two devices with peer access (guide 05 "跨Device的数据交互", device P2P sample).

    device_can_access_peer(0, 1) and (1, 0)
    set_device(0) -> device_enable_peer_access(1, 0) -> malloc on device 0
    set_device(1) -> device_enable_peer_access(0, 0) -> malloc on device 1
    memcpy device 0 -> device 1 (synchronous), memcpy_async device 1 -> device 0 (stream of
    device 1), verify both, disable peer access both ways, reset both devices

Peer access is directional: each direction is enabled with the device that makes the
copy current.  Without it a cross-device copy fails with ACL_ERROR_RT_PARAM_INVALID
(107000); this example shows that first.

    python examples/p2p_copy.py
"""

import sys

import numpy as np

import mdev.acl as acl

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_MEMCPY_DEVICE_TO_DEVICE = 3
ACL_ERROR_RT_PARAM_INVALID = 107000

SRC, DST = 0, 1
SIZE = 16 << 20                               # 16 MiB


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def main():
    check_ret("acl.init", acl.init())

    # 1. may the two devices reach each other?  (both directions are asked separately)
    can_01, ret = acl.rt.device_can_access_peer(SRC, DST)
    check_ret("acl.rt.device_can_access_peer", ret)
    can_10, ret = acl.rt.device_can_access_peer(DST, SRC)
    check_ret("acl.rt.device_can_access_peer", ret)
    print(f"can access peer: {SRC} -> {DST}: {can_01}, {DST} -> {SRC}: {can_10}")
    if not (can_01 and can_10):
        print("p2p_copy: the topology does not allow peer access between these devices")
        return 1

    # 2. device 0: memory, data, and (before enabling) a copy that the runtime refuses
    check_ret("acl.rt.set_device", acl.rt.set_device(SRC))
    dev0, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    data = (np.arange(SIZE, dtype=np.uint64) * 2654435761 % 251).astype(np.uint8)
    ret = acl.rt.memcpy(dev0, SIZE, acl.util.numpy_to_ptr(data), SIZE, ACL_MEMCPY_HOST_TO_DEVICE)
    check_ret("acl.rt.memcpy H2D", ret)
    check_ret("acl.rt.set_device", acl.rt.set_device(DST))
    dev1, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    ret = acl.rt.memcpy(dev1, SIZE, dev0, SIZE, ACL_MEMCPY_DEVICE_TO_DEVICE)
    print(f"copy {SRC} -> {DST} before enabling peer access: ret = {ret}")
    refused = ret == ACL_ERROR_RT_PARAM_INVALID
    acl.get_recent_err_msg()                  # read (and clear) the message of that failure

    # 3. enable peer access, one direction per call, from the device that copies
    check_ret("acl.rt.set_device", acl.rt.set_device(SRC))
    check_ret("acl.rt.device_enable_peer_access", acl.rt.device_enable_peer_access(DST, 0))
    check_ret("acl.rt.set_device", acl.rt.set_device(DST))
    check_ret("acl.rt.device_enable_peer_access", acl.rt.device_enable_peer_access(SRC, 0))
    status_01, ret = acl.rt.device_peer_access_status(SRC, DST)
    check_ret("acl.rt.device_peer_access_status", ret)
    status_10, ret = acl.rt.device_peer_access_status(DST, SRC)
    check_ret("acl.rt.device_peer_access_status", ret)
    print(f"peer access enabled: {SRC} -> {DST}: {status_01}, {DST} -> {SRC}: {status_10}")

    # 4. synchronous copy device 0 -> device 1 (device 1 current: it reads its peer)
    ret = acl.rt.memcpy(dev1, SIZE, dev0, SIZE, ACL_MEMCPY_DEVICE_TO_DEVICE)
    check_ret("acl.rt.memcpy D2D", ret)
    back = np.zeros(SIZE, np.uint8)
    ret = acl.rt.memcpy(acl.util.numpy_to_ptr(back), SIZE, dev1, SIZE, ACL_MEMCPY_DEVICE_TO_HOST)
    check_ret("acl.rt.memcpy D2H", ret)
    sync_ok = bool(np.array_equal(back, data))
    print(f"memcpy {SIZE >> 20} MiB device {SRC} -> device {DST}: {'verified' if sync_ok else 'MISMATCH'}")

    # 5. asynchronous copy back on a stream of device 1, into the second half of device 0's buffer
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    half = SIZE // 2
    ret = acl.rt.memcpy_async(dev0 + half, half, dev1, half, ACL_MEMCPY_DEVICE_TO_DEVICE, stream)
    check_ret("acl.rt.memcpy_async D2D", ret)
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    check_ret("acl.rt.set_device", acl.rt.set_device(SRC))
    ret = acl.rt.memcpy(acl.util.numpy_to_ptr(back), SIZE, dev0, SIZE, ACL_MEMCPY_DEVICE_TO_HOST)
    check_ret("acl.rt.memcpy D2H", ret)
    expected = np.concatenate([data[:half], data[:half]])
    async_ok = bool(np.array_equal(back, expected))
    print(f"memcpy_async {half >> 20} MiB device {DST} -> device {SRC}: {'verified' if async_ok else 'MISMATCH'}")

    # 6. clean up: disable both directions, free, reset
    check_ret("acl.rt.device_disable_peer_access", acl.rt.device_disable_peer_access(DST))
    check_ret("acl.rt.free", acl.rt.free(dev0))
    check_ret("acl.rt.set_device", acl.rt.set_device(DST))
    check_ret("acl.rt.device_disable_peer_access", acl.rt.device_disable_peer_access(SRC))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.free", acl.rt.free(dev1))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(SRC))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DST))
    check_ret("acl.finalize", acl.finalize())

    if not (refused and sync_ok and async_ok):
        print("p2p_copy: FAILED")
        return 1
    print(f"p2p_copy: device {SRC} <-> device {DST} with peer access, sync and async copies verified: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
