"""Exception callbacks (guide 09 "异常处理").

A kernel that raises or touches memory outside its allocations is a device fault: the
launch itself succeeds, the next synchronisation returns ACL_ERROR_RT_VECTOR_CORE_EXCEPTION
(507035: the kernel runs on the vector cores, as @kernel does by default; a cube kernel's
fault is ACL_ERROR_RT_AICORE_EXCEPTION, 507015), and the exception-info callback --
registered before the work is submitted -- learns the device, stream, task and error code.
The device goes on serving other streams (and the faulting stream too, once the error has
been reported).

    python examples/exception_callback.py
"""

import sys

import numpy as np

import mdev.acl as acl
from mdev import ops
from mdev.kernel import int64, kernel, ptr

ACL_SUCCESS = 0
ACL_ERROR_RT_VECTOR_CORE_EXCEPTION = 507035
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_DEVICE_TO_HOST = 2

DEVICE_ID = 0
N = 256

seen = []


def exception_callback(info):
    """Runs on a runtime thread; info is valid only during the call."""
    record = {"device": acl.rt.get_device_id_from_exception_info(info),
              "stream": acl.rt.get_stream_id_from_exception_info(info),
              "task": acl.rt.get_task_id_from_exception_info(info),
              "error": acl.rt.get_error_code_from_exception_info(info)}
    seen.append(record)
    print(f"exception callback: device {record['device']} stream {record['stream']} "
          f"task {record['task']} error {record['error']}")


@kernel
def off_by_one(ctx, x: ptr, n: int64):
    """Writes one element past the end of its buffer (an out-of-bounds bug)."""
    ctx.gm(x, np.float32, n + 1)[:] = 0.0


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def main():
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    check_ret("set_exception_info_callback", acl.rt.set_exception_info_callback(exception_callback))
    bad, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    good, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    buf, ret = acl.rt.malloc(4 * N, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    bad_id, ret = acl.rt.get_stream_id(bad)
    check_ret("acl.rt.get_stream_id", ret)

    launch_ret = off_by_one[4, bad](buf, N)
    print(f"launch of the faulty kernel returned {launch_ret}")
    sync_ret = acl.rt.synchronize_stream(bad)
    print(f"synchronize_stream returned {sync_ret}: {acl.get_recent_err_msg()}")

    # the device keeps working: another stream, then the faulting one
    check_ret("fill launch", ops.fill[4, good](buf, 1.5, N))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(good))
    check_ret("scale launch", ops.scale[4, bad](buf, buf, 2.0, N))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(bad))
    host = np.zeros(N, np.float32)
    check_ret("acl.rt.memcpy", acl.rt.memcpy(acl.util.numpy_to_ptr(host), 4 * N, buf, 4 * N,
                                             ACL_MEMCPY_DEVICE_TO_HOST))
    still_works = bool((host == 3.0).all())
    print(f"after the fault: fill on another stream and scale on the same stream -> {host[:3]}...")

    check_ret("set_exception_info_callback", acl.rt.set_exception_info_callback(None))
    check_ret("acl.rt.free", acl.rt.free(buf))
    for stream in (bad, good):
        check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())
    ok = (launch_ret == ACL_SUCCESS and sync_ret == ACL_ERROR_RT_VECTOR_CORE_EXCEPTION and still_works
          and seen == [{"device": DEVICE_ID, "stream": bad_id, "task": 1, "error": ACL_ERROR_RT_VECTOR_CORE_EXCEPTION}])
    if not ok:
        print("exception_callback: UNEXPECTED")
        return 1
    print("exception_callback: Vector Core exception 507035 reported at sync and to the callback, device still serving: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
