"""Peer-to-peer copies between two devices, in the style of the public pyACL samples.

One context per device; each device enables access to the other (ACL needs both
directions).  Device 0's buffer is copied straight into device 1's memory, synchronously
and on a stream of device 1, and the result is read back through device 1.
"""
import sys

import numpy as np

import acl

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_DEVICE_TO_DEVICE = 1, 2, 3   # aclrtMemcpyKind

COUNT = 512 * 1024                      # float32 elements (2 MiB)


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception("{} failed ret={}".format(message, ret))


def main():
    check_ret("acl.init", acl.init())
    count, ret = acl.rt.get_device_count()
    check_ret("acl.rt.get_device_count", ret)
    print("[INFO] {} devices".format(count))
    if count < 2:
        print("[ERROR] this sample needs two devices")
        return 1
    dev0, dev1 = 0, 1
    for a, b in ((dev0, dev1), (dev1, dev0)):
        can, ret = acl.rt.device_can_access_peer(a, b)
        check_ret("acl.rt.device_can_access_peer", ret)
        print("[INFO] device {} can access device {}: {}".format(a, b, can))
        if can != 1:
            print("[ERROR] devices {} and {} are not peers on this board".format(a, b))
            return 1

    contexts = {}
    for dev, peer in ((dev0, dev1), (dev1, dev0)):
        check_ret("acl.rt.set_device", acl.rt.set_device(dev))
        contexts[dev], ret = acl.rt.create_context(dev)
        check_ret("acl.rt.create_context", ret)
        check_ret("acl.rt.device_enable_peer_access", acl.rt.device_enable_peer_access(peer, 0))
        status, ret = acl.rt.device_peer_access_status(dev, peer)
        check_ret("acl.rt.device_peer_access_status", ret)
        print("[INFO] device {} -> {} peer access enabled: {}".format(dev, peer, status))

    size = COUNT * 4
    data = np.linspace(0.0, 1.0, COUNT, dtype=np.float32)
    bytes_data = data.tobytes()

    check_ret("acl.rt.set_context", acl.rt.set_context(contexts[dev0]))
    buf0, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    ret = acl.rt.memcpy(buf0, size, acl.util.bytes_to_ptr(bytes_data), size, ACL_MEMCPY_HOST_TO_DEVICE)
    check_ret("acl.rt.memcpy H2D", ret)

    check_ret("acl.rt.set_context", acl.rt.set_context(contexts[dev1]))
    device, ret = acl.rt.get_device()
    check_ret("acl.rt.get_device", ret)
    buf1, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    buf1b, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)

    # synchronous peer copy, executed by the current device (1)
    ret = acl.rt.memcpy(buf1, size, buf0, size, ACL_MEMCPY_DEVICE_TO_DEVICE)
    check_ret("acl.rt.memcpy D2D device 0 -> 1", ret)
    # asynchronous peer copy on a stream of device 1
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    ret = acl.rt.memcpy_async(buf1b, size, buf0, size, ACL_MEMCPY_DEVICE_TO_DEVICE, stream)
    check_ret("acl.rt.memcpy_async D2D device 0 -> 1", ret)
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))

    for name, buf in (("memcpy", buf1), ("memcpy_async", buf1b)):
        out = bytes(size)
        ret = acl.rt.memcpy(acl.util.bytes_to_ptr(out), size, buf, size, ACL_MEMCPY_DEVICE_TO_HOST)
        check_ret("acl.rt.memcpy D2H", ret)
        if not np.array_equal(np.frombuffer(out, dtype=np.float32), data):
            raise Exception("device {} got wrong data from device {} ({})".format(device, dev0, name))
        print("[INFO] device {} holds device {}'s data after {} ({} bytes)".format(device, dev0, name, size))

    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.free", acl.rt.free(buf1))
    check_ret("acl.rt.free", acl.rt.free(buf1b))
    check_ret("acl.rt.device_disable_peer_access", acl.rt.device_disable_peer_access(dev0))
    check_ret("acl.rt.set_context", acl.rt.set_context(contexts[dev0]))
    check_ret("acl.rt.free", acl.rt.free(buf0))
    check_ret("acl.rt.device_disable_peer_access", acl.rt.device_disable_peer_access(dev1))
    for dev in (dev0, dev1):
        check_ret("acl.rt.destroy_context", acl.rt.destroy_context(contexts[dev]))
        check_ret("acl.rt.reset_device", acl.rt.reset_device(dev))
    check_ret("acl.finalize", acl.finalize())
    print("[INFO] multi device p2p OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
