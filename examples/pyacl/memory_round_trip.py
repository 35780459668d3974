"""Memory round trip, written the way the public pyACL samples are written.

host (numpy) --memcpy H2D--> device buffer A --memcpy D2D--> device buffer B
             <--memcpy D2H-- (into pinned host memory from malloc_host) ...

Nothing here knows about mdev: on a real Ascend machine `python memory_round_trip.py`
runs it; on a laptop `mdev run memory_round_trip.py` does.
"""
import sys

import numpy as np

import acl

# pyACL exports no constants: programs define the ones they use
ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_DEVICE_TO_DEVICE = 1, 2, 3   # aclrtMemcpyKind
ACL_HBM_MEM = 1
NPY_FLOAT32 = 11

DEVICE_ID = 0
COUNT = 256 * 1024                      # float32 elements (1 MiB)


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception("{} failed ret={}".format(message, ret))


class MemorySample(object):
    def __init__(self, device_id):
        self.device_id = device_id
        self.context = None
        self.size = COUNT * 4
        self.dev_a = None
        self.dev_b = None
        self.host_out = None

    def init_resource(self):
        print("[INFO] init resource stage:")
        ret = acl.init()
        check_ret("acl.init", ret)
        ret = acl.rt.set_device(self.device_id)
        check_ret("acl.rt.set_device", ret)
        self.context, ret = acl.rt.create_context(self.device_id)
        check_ret("acl.rt.create_context", ret)
        print("[INFO] soc name: {}".format(acl.get_soc_name()))
        free, total, ret = acl.rt.get_mem_info(ACL_HBM_MEM)
        check_ret("acl.rt.get_mem_info", ret)
        print("[INFO] HBM free {} of {} bytes".format(free, total))

    def run(self):
        data = np.arange(COUNT, dtype=np.float32)
        if "bytes_to_ptr" in dir(acl.util):
            bytes_data = data.tobytes()
            host_in = acl.util.bytes_to_ptr(bytes_data)
        else:
            host_in = acl.util.numpy_to_ptr(data)

        self.dev_a, ret = acl.rt.malloc(self.size, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("acl.rt.malloc", ret)
        self.dev_b, ret = acl.rt.malloc(self.size, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("acl.rt.malloc", ret)
        self.host_out, ret = acl.rt.malloc_host(self.size)
        check_ret("acl.rt.malloc_host", ret)
        ret = acl.rt.memset(self.host_out, self.size, 0, self.size)
        check_ret("acl.rt.memset", ret)

        ret = acl.rt.memcpy(self.dev_a, self.size, host_in, self.size, ACL_MEMCPY_HOST_TO_DEVICE)
        check_ret("acl.rt.memcpy H2D", ret)
        ret = acl.rt.memcpy(self.dev_b, self.size, self.dev_a, self.size, ACL_MEMCPY_DEVICE_TO_DEVICE)
        check_ret("acl.rt.memcpy D2D", ret)
        ret = acl.rt.memcpy(self.host_out, self.size, self.dev_b, self.size, ACL_MEMCPY_DEVICE_TO_HOST)
        check_ret("acl.rt.memcpy D2H", ret)

        # read the result back the two ways the samples do it
        out_bytes = acl.util.ptr_to_bytes(self.host_out, self.size)
        result = np.frombuffer(out_bytes, dtype=np.float32)
        view = acl.util.ptr_to_numpy(self.host_out, (COUNT,), NPY_FLOAT32)
        print("[INFO] first elements: {}".format(result[:4].tolist()))
        if not np.array_equal(result, data) or not np.array_equal(view, data):
            raise Exception("round trip data mismatch")

        # D2H into a bytes object: the samples rely on memcpy writing into its buffer
        sink = bytes(self.size)
        ret = acl.rt.memcpy(acl.util.bytes_to_ptr(sink), self.size, self.dev_a, self.size,
                            ACL_MEMCPY_DEVICE_TO_HOST)
        check_ret("acl.rt.memcpy D2H into bytes", ret)
        if not np.array_equal(np.frombuffer(sink, dtype=np.float32), data):
            raise Exception("bytes_to_ptr buffer was not updated")
        print("[INFO] round trip of {} bytes verified".format(self.size))

    def release_resource(self):
        print("[INFO] release resource stage:")
        if self.host_out:
            check_ret("acl.rt.free_host", acl.rt.free_host(self.host_out))
        for ptr in (self.dev_a, self.dev_b):
            if ptr:
                check_ret("acl.rt.free", acl.rt.free(ptr))
        if self.context:
            check_ret("acl.rt.destroy_context", acl.rt.destroy_context(self.context))
        check_ret("acl.rt.reset_device", acl.rt.reset_device(self.device_id))
        check_ret("acl.finalize", acl.finalize())


if __name__ == "__main__":
    sample = MemorySample(DEVICE_ID)
    try:
        sample.init_resource()
        sample.run()
    finally:
        sample.release_resource()
    print("[INFO] memory round trip OK")
    sys.exit(0)
