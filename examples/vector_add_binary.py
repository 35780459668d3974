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

DEVICE_ID = 0
NUM_BLOCKS = 8
N = 4096
BINARY = os.path.abspath(os.path.join(os.path.dirname(__file__), "kernels", "vector_add_kernel.py"))


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def launch_and_read(name, ret, stream, z_dev, z_host):
    """Check a launch, wait for it, copy z back to the host."""
    check(ret, name)
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    check(acl.rt.memcpy(acl.util.numpy_to_ptr(z_host), z_host.nbytes, z_dev, z_host.nbytes,
                        acl.ACL_MEMCPY_DEVICE_TO_HOST), "memcpy D2H")


def main():
    check(acl.init(), "init")
    check(acl.rt.set_device(DEVICE_ID), "set_device")
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")

    x_host = np.linspace(0, 1, N, dtype=np.float32)
    y_host = np.full(N, 2.0, dtype=np.float32)
    z_host = np.zeros(N, dtype=np.float32)
    ptrs = []
    for host in (x_host, y_host, z_host):
        dev, ret = acl.rt.malloc(host.nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        check(acl.rt.memcpy(dev, host.nbytes, acl.util.numpy_to_ptr(host), host.nbytes,
                            acl.ACL_MEMCPY_HOST_TO_DEVICE), "memcpy H2D")
        ptrs.append(dev)
    x_dev, y_dev, z_dev = ptrs

    # load the binary and look the kernel up by name
    bin_handle, ret = acl.rt.binary_load_from_file(BINARY, None)
    check(ret, "binary_load_from_file")
    add, ret = acl.rt.binary_get_function(bin_handle, "add_custom")
    check(ret, "binary_get_function")
    count, ret = acl.rt.function_get_param_count(add)
    check(ret, "function_get_param_count")
    print(f"loaded {os.path.basename(BINARY)}: add_custom takes {count} parameters")

    # arguments, left to right in signature order: each aclrtKernelArgsAppend takes one
    # parameter as its host bytes
    args_handle, ret = acl.rt.kernel_args_init(add)
    check(ret, "kernel_args_init")
    for value in (struct.pack("<Q", x_dev), struct.pack("<Q", y_dev), struct.pack("<Q", z_dev),
                  struct.pack("<q", N)):
        _, ret = acl.rt.kernel_args_append(args_handle, value, len(value))
        check(ret, "kernel_args_append")
    check(acl.rt.kernel_args_finalize(args_handle), "kernel_args_finalize")
    ret = acl.rt.launch_kernel_with_config(add, NUM_BLOCKS, stream, None, args_handle, None)
    launch_and_read("launch_kernel_with_config", ret, stream, z_dev, z_host)
    add_ok = np.array_equal(z_host, x_host + y_host)

    # the binary's second kernel, with a packed host argument block: z = z - y  (back to x)
    sub, ret = acl.rt.binary_get_function(bin_handle, "sub_custom")
    check(ret, "binary_get_function")
    host_args = struct.pack("<QQQq", z_dev, y_dev, z_dev, N)
    ret = acl.rt.launch_kernel_with_host_args(sub, NUM_BLOCKS, stream, None, host_args, len(host_args), None, 0)
    launch_and_read("launch_kernel_with_host_args", ret, stream, z_dev, z_host)
    sub_ok = np.allclose(z_host, x_host, atol=1e-6)

    check(acl.rt.binary_unload(bin_handle), "binary_unload")
    for dev in ptrs:
        check(acl.rt.free(dev), "free")
    check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(DEVICE_ID), "reset_device")
    check(acl.finalize(), "finalize")
    ok = add_ok and sub_ok
    print(f"vector_add_binary: add_custom and sub_custom from {os.path.basename(BINARY)} "
          f"on {N} float32 with {NUM_BLOCKS} blocks, verified: {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
