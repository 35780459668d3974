"""Stop on failure vs continue on failure (guide "配置任务遇错即停").

A task that fails on the device does not make its submitting call fail: the error comes
back from the next synchronisation, and lands in the thread's last-error slot.  Here the
failing task is a value wait that times out (acl.rt.set_op_wait_timeout(1): a device-side
wait gives up after 1 s).

    context A, ACL_STOP_ON_FAILURE on stream1:
        stream1: value_wait (times out) -> memset           the memset never runs
        stream2: host func (1.5 s)      -> memset           dropped too: the whole context stops
        later submissions to the context are refused with the failure code
    context B, default ACL_CONTINUE_ON_FAILURE:
        stream3: value_wait (times out) -> memset           the memset still runs

    python examples/stop_on_failure.py
"""

import sys
import time

import numpy as np

import mdev.acl as acl

DEVICE_ID = 0


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def device_words(count):
    ptr, ret = acl.rt.malloc(8 * count, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    check(acl.rt.memset(ptr, 8 * count, 0, 8 * count), "memset")
    return ptr


def read_words(ptr, count):
    out = np.zeros(count, np.uint64)
    check(acl.rt.memcpy(acl.util.numpy_to_ptr(out), 8 * count, ptr, 8 * count, acl.ACL_MEMCPY_DEVICE_TO_HOST), "memcpy")
    return [int(x) for x in out]


def release(streams, *ptrs):
    for ptr in ptrs:
        check(acl.rt.free(ptr), "free")
    for stream in streams:
        check(acl.rt.destroy_stream(stream), "destroy_stream")


def stop_mode():
    stream1, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    stream2, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    check(acl.rt.set_stream_failure_mode(stream1, acl.ACL_STOP_ON_FAILURE), "set_stream_failure_mode")
    mode, ret = acl.rt.get_stream_attribute(stream1, acl.ACL_STREAM_ATTR_FAILURE_MODE)
    check(ret, "get_stream_attribute")
    print(f"[A] stream1 failure mode: {mode} (ACL_STOP_ON_FAILURE)")

    never = device_words(1)                      # nobody ever writes it
    marks = device_words(3)
    # every submission succeeds: the failure happens later, on the device
    check(acl.rt.value_wait(never, 1, acl.ACL_STREAM_WAIT_VALUE_EQ, stream1), "value_wait")
    check(acl.rt.memset_async(marks, 8, 1, 8, stream1), "memset_async")
    check(acl.rt.launch_host_func(stream2, time.sleep, 1.5), "launch_host_func")
    check(acl.rt.memset_async(marks + 8, 8, 2, 8, stream2), "memset_async")
    print(f"[A] submissions returned ACL_SUCCESS; last error so far: {acl.rt.peek_at_last_error()}")

    ret1 = acl.rt.synchronize_stream(stream1)
    ret2 = acl.rt.synchronize_stream(stream2)
    print(f"[A] synchronize_stream(stream1) = {ret1}, synchronize_stream(stream2) = {ret2}")
    print(f"[A] {acl.get_recent_err_msg().splitlines()[0]}")
    ret_submit = acl.rt.memset_async(marks + 16, 8, 3, 8, stream2)
    ret_again = acl.rt.synchronize_stream(stream1)
    print(f"[A] a new submission to the stopped context: ret = {ret_submit}; sync again: {ret_again}")
    last, cleared = acl.rt.get_last_error(), acl.rt.get_last_error()
    print(f"[A] get_last_error() = {last}, then {cleared} (reading resets it)")
    ran = read_words(marks, 3)
    print(f"[A] markers written after the failure: {ran} (all 0: nothing ran)")
    release((stream1, stream2), never, marks)
    return (ret1 == ret2 == ret_submit == ret_again == last == acl.ACL_ERROR_RT_TASK_TIMEOUT
            and cleared == acl.ACL_SUCCESS and ran == [0, 0, 0])


def continue_mode():
    context, ret = acl.rt.create_context(DEVICE_ID)     # a fresh context, default mode
    check(ret, "create_context")
    stream3, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    never = device_words(1)
    marks = device_words(1)
    check(acl.rt.value_wait(never, 1, acl.ACL_STREAM_WAIT_VALUE_EQ, stream3), "value_wait")
    check(acl.rt.memset_async(marks, 8, 9, 8, stream3), "memset_async")
    ret1 = acl.rt.synchronize_stream(stream3)
    ret2 = acl.rt.synchronize_stream(stream3)
    ran = read_words(marks, 1)
    print(f"[B] synchronize_stream(stream3) = {ret1}, then {ret2}; marker after the failure: {ran} "
          f"(the memset ran)")
    acl.rt.get_last_error()
    release((stream3,), never, marks)
    check(acl.rt.destroy_context(context), "destroy_context")
    return ret1 == acl.ACL_ERROR_RT_TASK_TIMEOUT and ret2 == acl.ACL_SUCCESS and ran == [0x0909090909090909]


def main():
    check(acl.init(), "init")
    check(acl.rt.set_device(DEVICE_ID), "set_device")
    check(acl.rt.set_op_wait_timeout(1), "set_op_wait_timeout")     # seconds
    stopped, continued = stop_mode(), continue_mode()
    check(acl.rt.reset_device(DEVICE_ID), "reset_device")
    check(acl.finalize(), "finalize")
    ok = stopped and continued
    print(f"stop_on_failure: stop mode halted the context, continue mode ran on: {'OK' if ok else 'UNEXPECTED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
