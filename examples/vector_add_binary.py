"""Vector add, binary style (guide 03-03 "Kernel加载与执行").

The kernel comes from a binary loaded at run time (here the Python "binary"
examples/kernels/vector_add_kernel.py):

    aclrtBinaryLoadFromFile -> aclrtBinaryGetFunction("add_custom")
    -> aclrtKernelArgsInit / aclrtKernelArgsAppend x4 / aclrtKernelArgsFinalize
    -> aclrtLaunchKernelWithConfig -> aclrtSynchronizeStream -> aclrtBinaryUnLoad

then launches the binary's second kernel with a packed host argument block
(aclrtLaunchKernelWithHostArgs).  The binary path must be absolute.

    python examples/vector_add_binary.py
"""

import os
import struct
import sys

import numpy as np

import mdev.acl as acl

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2

DEVICE_ID = 0
NUM_BLOCKS = 8
N = 4096
BINARY = os.path.abspath(os.path.join(os.path.dirname(__file__), "kernels", "vector_add_kernel.py"))


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def append(args_handle, value: bytes):
    """aclrtKernelArgsAppend of one parameter given as its host bytes."""
    param_handle, ret = acl.rt.kernel_args_append(args_handle, value, len(value))
    check_ret("acl.rt.kernel_args_append", ret)
    return param_handle


def main():
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)

    x_host = np.linspace(0, 1, N, dtype=np.float32)
    y_host = np.full(N, 2.0, dtype=np.float32)
    z_host = np.zeros(N, dtype=np.float32)
    nbytes = x_host.nbytes
    ptrs = []
    for host in (x_host, y_host, None):
        dev, ret = acl.rt.malloc(nbytes, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("acl.rt.malloc", ret)
        if host is not None:
            ret = acl.rt.memcpy(dev, nbytes, acl.util.numpy_to_ptr(host), nbytes, ACL_MEMCPY_HOST_TO_DEVICE)
            check_ret("acl.rt.memcpy H2D", ret)
        ptrs.append(dev)
    x_dev, y_dev, z_dev = ptrs

    # load the binary and look the kernel up by name
    bin_handle, ret = acl.rt.binary_load_from_file(BINARY, None)
    check_ret("acl.rt.binary_load_from_file", ret)
    func, ret = acl.rt.binary_get_function(bin_handle, "add_custom")
    check_ret("acl.rt.binary_get_function", ret)
    count, ret = acl.rt.function_get_param_count(func)
    check_ret("acl.rt.function_get_param_count", ret)
    print(f"loaded {os.path.basename(BINARY)}: add_custom takes {count} parameters")

    # arguments, left to right in signature order
    args_handle, ret = acl.rt.kernel_args_init(func)
    check_ret("acl.rt.kernel_args_init", ret)
    for value in (struct.pack("<Q", x_dev), struct.pack("<Q", y_dev), struct.pack("<Q", z_dev),
                  struct.pack("<q", N)):
        append(args_handle, value)
    check_ret("acl.rt.kernel_args_finalize", acl.rt.kernel_args_finalize(args_handle))

    ret = acl.rt.launch_kernel_with_config(func, NUM_BLOCKS, stream, None, args_handle, None)
    check_ret("acl.rt.launch_kernel_with_config", ret)
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    ret = acl.rt.memcpy(acl.util.numpy_to_ptr(z_host), nbytes, z_dev, nbytes, ACL_MEMCPY_DEVICE_TO_HOST)
    check_ret("acl.rt.memcpy D2H", ret)
    ok = np.array_equal(z_host, x_host + y_host)

    # the binary's second kernel, with a packed host argument block: z = z - y  (back to x)
    sub, ret = acl.rt.binary_get_function(bin_handle, "sub_custom")
    check_ret("acl.rt.binary_get_function", ret)
    host_args = struct.pack("<QQQq", z_dev, y_dev, z_dev, N)
    ret = acl.rt.launch_kernel_with_host_args(sub, NUM_BLOCKS, stream, None, host_args, len(host_args), None, 0)
    check_ret("acl.rt.launch_kernel_with_host_args", ret)
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    ret = acl.rt.memcpy(acl.util.numpy_to_ptr(z_host), nbytes, z_dev, nbytes, ACL_MEMCPY_DEVICE_TO_HOST)
    check_ret("acl.rt.memcpy D2H", ret)
    ok = ok and np.allclose(z_host, x_host, atol=1e-6)

    check_ret("acl.rt.binary_unload", acl.rt.binary_unload(bin_handle))
    for dev in ptrs:
        check_ret("acl.rt.free", acl.rt.free(dev))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())
    if not ok:
        print("vector_add_binary: MISMATCH")
        return 1
    print(f"vector_add_binary: add_custom and sub_custom from {os.path.basename(BINARY)} "
          f"on {N} float32 with {NUM_BLOCKS} blocks, verified: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
