"""Exception callbacks (guide 09 "异常处理").

A kernel that raises or touches memory outside its allocations is a device fault: the
launch itself succeeds, the next synchronisation returns ACL_ERROR_RT_AICORE_EXCEPTION
(507015), and the exception-info callback -- registered before the work is submitted --
learns the device, stream, task and error code.  The device goes on serving other
streams (and the faulting stream too, once the error has been reported).

    python examples/exception_callback.py
"""

import sys

import numpy as np

import mdev.acl as acl
from mdev import ops
from mdev.kernel import int64, kernel, ptr

DEVICE_ID = 0
N = 256

seen = []


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


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


def main():
    check(acl.init(), "init")
    check(acl.rt.set_device(DEVICE_ID), "set_device")
    check(acl.rt.set_exception_info_callback(exception_callback), "set_exception_info_callback")
    bad, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    good, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    bad_id, ret = acl.rt.get_stream_id(bad)
    check(ret, "get_stream_id")
    buf, ret = acl.rt.malloc(4 * N, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")

    launch_ret = off_by_one[4, bad](buf, N)
    print(f"launch of the faulty kernel returned {launch_ret}")
    sync_ret = acl.rt.synchronize_stream(bad)
    print(f"synchronize_stream returned {sync_ret}: {acl.get_recent_err_msg()}")

    # the device keeps working: another stream, then the faulting one
    check(ops.fill[4, good](buf, 1.5, N), "fill launch")
    check(acl.rt.synchronize_stream(good), "synchronize_stream")
    check(ops.scale[4, bad](buf, buf, 2.0, N), "scale launch")
    check(acl.rt.synchronize_stream(bad), "synchronize_stream")
    host = np.zeros(N, np.float32)
    check(acl.rt.memcpy(acl.util.numpy_to_ptr(host), 4 * N, buf, 4 * N, acl.ACL_MEMCPY_DEVICE_TO_HOST), "memcpy")
    print(f"after the fault: fill on another stream and scale on the same stream -> {host[:3]}...")

    check(acl.rt.set_exception_info_callback(None), "set_exception_info_callback")
    check(acl.rt.free(buf), "free")
    for stream in (bad, good):
        check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(DEVICE_ID), "reset_device")
    check(acl.finalize(), "finalize")
    fault = acl.ACL_ERROR_RT_AICORE_EXCEPTION
    ok = (launch_ret == acl.ACL_SUCCESS and sync_ret == fault and (host == 3.0).all()
          and seen == [{"device": DEVICE_ID, "stream": bad_id, "task": 1, "error": fault}])
    print(f"exception_callback: AI Core exception 507015 reported at sync and to the callback, device still serving: "
          f"{'OK' if ok else 'UNEXPECTED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
