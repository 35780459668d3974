"""DVPP buffers, written the way the public pyACL memory samples are written.

pinned host buffer --memcpy H2D--> DVPP buffer (acl.media.dvpp_malloc)
                   <--memcpy_async D2H-- into a second pinned buffer, on a stream

A media program stages its pictures in DVPP memory before the media engines read them;
here the data only makes the round trip, and device memory use is read before, during and
after (the free memory drops by whole huge pages per buffer and comes back on dvpp_free).
Nothing here knows about mdev: `mdev run dvpp_buffers.py` runs it.
"""
import sys

import numpy as np

import acl

ACL_SUCCESS = 0
ACL_HBM_MEM = 1
ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST = 1, 2
NPY_UINT8 = 2

DEVICE_ID = 0
PICTURE_BYTES = 1920 * 1080 * 3 // 2        # one YUV420SP 1080p frame
FRAMES = 3


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception("{} failed ret={}".format(message, ret))


def hbm_free():
    free, _, ret = acl.rt.get_mem_info(ACL_HBM_MEM)
    check_ret("acl.rt.get_mem_info", ret)
    return free


def main():
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))       # its default context
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    before = hbm_free()

    frames = []
    for i in range(FRAMES):
        host_in, ret = acl.rt.malloc_host(PICTURE_BYTES)
        check_ret("acl.rt.malloc_host", ret)
        host_out, ret = acl.rt.malloc_host(PICTURE_BYTES)
        check_ret("acl.rt.malloc_host", ret)
        check_ret("acl.rt.memset_async", acl.rt.memset_async(host_in, PICTURE_BYTES, 16 + i, PICTURE_BYTES,
                                                              stream))
        picture, ret = acl.media.dvpp_malloc(PICTURE_BYTES)
        check_ret("acl.media.dvpp_malloc", ret)
        frames.append((host_in, host_out, picture))
        check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
        check_ret("acl.rt.memcpy", acl.rt.memcpy(picture, PICTURE_BYTES, host_in, PICTURE_BYTES,
                                                 ACL_MEMCPY_HOST_TO_DEVICE))
        check_ret("acl.rt.memcpy_async", acl.rt.memcpy_async(host_out, PICTURE_BYTES, picture, PICTURE_BYTES,
                                                             ACL_MEMCPY_DEVICE_TO_HOST, stream))
    print("[INFO] {} DVPP buffers take {} bytes of HBM".format(FRAMES, before - hbm_free()))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))

    for i, (host_in, host_out, picture) in enumerate(frames):
        back = acl.util.ptr_to_numpy(host_out, (PICTURE_BYTES,), NPY_UINT8)
        print("[INFO] frame {} came back intact: {}".format(i, bool((back == 16 + i).all())))
        check_ret("acl.media.dvpp_free", acl.media.dvpp_free(picture))
        check_ret("acl.rt.free_host", acl.rt.free_host(host_in))
        check_ret("acl.rt.free_host", acl.rt.free_host(host_out))
    print("[INFO] HBM free again after dvpp_free: {}".format(hbm_free() == before))

    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())
    print("[INFO] dvpp buffers OK")


if __name__ == "__main__":
    try:
        main()
    except Exception as error:
        print("[ERROR] {}".format(error))
        sys.exit(1)
