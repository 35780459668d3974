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

SRC, DST = 0, 1
SIZE = 16 << 20                               # 16 MiB


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def both_ways(query):
    """query(a, b) for SRC -> DST and DST -> SRC."""
    answers = []
    for a, b in ((SRC, DST), (DST, SRC)):
        value, ret = query(a, b)
        check(ret, query.__name__)
        answers.append(value)
    return answers


def read_back(back, dev):
    check(acl.rt.memcpy(acl.util.numpy_to_ptr(back), SIZE, dev, SIZE, acl.ACL_MEMCPY_DEVICE_TO_HOST), "memcpy D2H")
    return back


def main():
    check(acl.init(), "init")

    # 1. may the two devices reach each other?  (both directions are asked separately)
    can_01, can_10 = both_ways(acl.rt.device_can_access_peer)
    print(f"can access peer: {SRC} -> {DST}: {can_01}, {DST} -> {SRC}: {can_10}")
    if not (can_01 and can_10):
        print("p2p_copy: the topology does not allow peer access between these devices")
        return 1

    # 2. device 0: memory, data, and (before enabling) a copy that the runtime refuses
    check(acl.rt.set_device(SRC), "set_device")
    dev0, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    data = (np.arange(SIZE, dtype=np.uint64) * 2654435761 % 251).astype(np.uint8)
    check(acl.rt.memcpy(dev0, SIZE, acl.util.numpy_to_ptr(data), SIZE, acl.ACL_MEMCPY_HOST_TO_DEVICE), "memcpy H2D")
    check(acl.rt.set_device(DST), "set_device")
    dev1, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    ret = acl.rt.memcpy(dev1, SIZE, dev0, SIZE, acl.ACL_MEMCPY_DEVICE_TO_DEVICE)
    print(f"copy {SRC} -> {DST} before enabling peer access: ret = {ret}")
    refused = ret == acl.ACL_ERROR_RT_PARAM_INVALID
    acl.get_recent_err_msg()                  # read (and clear) the message of that failure

    # 3. enable peer access, one direction per call, from the device that copies
    for device, peer in ((SRC, DST), (DST, SRC)):
        check(acl.rt.set_device(device), "set_device")
        check(acl.rt.device_enable_peer_access(peer, 0), "device_enable_peer_access")
    status_01, status_10 = both_ways(acl.rt.device_peer_access_status)
    print(f"peer access enabled: {SRC} -> {DST}: {status_01}, {DST} -> {SRC}: {status_10}")

    # 4. synchronous copy device 0 -> device 1 (device 1 current: it reads its peer)
    check(acl.rt.memcpy(dev1, SIZE, dev0, SIZE, acl.ACL_MEMCPY_DEVICE_TO_DEVICE), "memcpy D2D")
    back = np.zeros(SIZE, np.uint8)
    sync_ok = bool(np.array_equal(read_back(back, dev1), data))
    print(f"memcpy {SIZE >> 20} MiB device {SRC} -> device {DST}: {'verified' if sync_ok else 'MISMATCH'}")

    # 5. asynchronous copy back on a stream of device 1, into the second half of device 0's buffer
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    half = SIZE // 2
    check(acl.rt.memcpy_async(dev0 + half, half, dev1, half, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, stream),
          "memcpy_async D2D")
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    check(acl.rt.set_device(SRC), "set_device")
    async_ok = bool(np.array_equal(read_back(back, dev0), np.concatenate([data[:half], data[:half]])))
    print(f"memcpy_async {half >> 20} MiB device {DST} -> device {SRC}: {'verified' if async_ok else 'MISMATCH'}")

    # 6. clean up: disable both directions, free, reset
    check(acl.rt.device_disable_peer_access(DST), "device_disable_peer_access")
    check(acl.rt.free(dev0), "free")
    check(acl.rt.set_device(DST), "set_device")
    check(acl.rt.device_disable_peer_access(SRC), "device_disable_peer_access")
    check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.free(dev1), "free")
    for device in (SRC, DST):
        check(acl.rt.reset_device(device), "reset_device")
    check(acl.finalize(), "finalize")
    ok = refused and sync_ok and async_ok
    print(f"p2p_copy: device {SRC} <-> device {DST} with peer access, sync and async copies verified: "
          f"{'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
