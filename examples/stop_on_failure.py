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

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_STOP_ON_FAILURE = 1
ACL_STREAM_ATTR_FAILURE_MODE = 1
ACL_STREAM_WAIT_VALUE_EQ = 0x1
ACL_ERROR_RT_TASK_TIMEOUT = 107020

DEVICE_ID = 0


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def device_words(count):
    ptr, ret = acl.rt.malloc(8 * count, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    check_ret("acl.rt.memset", acl.rt.memset(ptr, 8 * count, 0, 8 * count))
    return ptr


def read_words(ptr, count):
    out = np.zeros(count, np.uint64)
    ret = acl.rt.memcpy(acl.util.numpy_to_ptr(out), 8 * count, ptr, 8 * count, ACL_MEMCPY_DEVICE_TO_HOST)
    check_ret("acl.rt.memcpy", ret)
    return [int(x) for x in out]


def stop_mode():
    stream1, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    stream2, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    check_ret("acl.rt.set_stream_failure_mode", acl.rt.set_stream_failure_mode(stream1, ACL_STOP_ON_FAILURE))
    mode, ret = acl.rt.get_stream_attribute(stream1, ACL_STREAM_ATTR_FAILURE_MODE)
    check_ret("acl.rt.get_stream_attribute", ret)
    print(f"[A] stream1 failure mode: {mode} (ACL_STOP_ON_FAILURE)")

    never = device_words(1)                      # nobody ever writes it
    marks = device_words(3)
    # every submission succeeds: the failure happens later, on the device
    check_ret("acl.rt.value_wait", acl.rt.value_wait(never, 1, ACL_STREAM_WAIT_VALUE_EQ, stream1))
    check_ret("acl.rt.memset_async", acl.rt.memset_async(marks, 8, 1, 8, stream1))
    check_ret("acl.rt.launch_host_func", acl.rt.launch_host_func(stream2, time.sleep, 1.5))
    check_ret("acl.rt.memset_async", acl.rt.memset_async(marks + 8, 8, 2, 8, stream2))
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
    check_ret("acl.rt.free", acl.rt.free(never))
    check_ret("acl.rt.free", acl.rt.free(marks))
    for stream in (stream1, stream2):
        check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    code = ACL_ERROR_RT_TASK_TIMEOUT
    return (ret1 == ret2 == ret_submit == ret_again == last == code and cleared == ACL_SUCCESS
            and ran == [0, 0, 0])


def continue_mode():
    context, ret = acl.rt.create_context(DEVICE_ID)     # a fresh context, default mode
    check_ret("acl.rt.create_context", ret)
    stream3, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    never = device_words(1)
    marks = device_words(1)
    check_ret("acl.rt.value_wait", acl.rt.value_wait(never, 1, ACL_STREAM_WAIT_VALUE_EQ, stream3))
    check_ret("acl.rt.memset_async", acl.rt.memset_async(marks, 8, 9, 8, stream3))
    ret1 = acl.rt.synchronize_stream(stream3)
    ret2 = acl.rt.synchronize_stream(stream3)
    ran = read_words(marks, 1)
    print(f"[B] synchronize_stream(stream3) = {ret1}, then {ret2}; marker after the failure: {ran} "
          f"(the memset ran)")
    acl.rt.get_last_error()
    check_ret("acl.rt.free", acl.rt.free(never))
    check_ret("acl.rt.free", acl.rt.free(marks))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream3))
    check_ret("acl.rt.destroy_context", acl.rt.destroy_context(context))
    return ret1 == ACL_ERROR_RT_TASK_TIMEOUT and ret2 == ACL_SUCCESS and ran == [0x0909090909090909]


def main():
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    check_ret("acl.rt.set_op_wait_timeout", acl.rt.set_op_wait_timeout(1))   # seconds
    ok_stop = stop_mode()
    ok_continue = continue_mode()
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())
    if not (ok_stop and ok_continue):
        print("stop_on_failure: UNEXPECTED")
        return 1
    print("stop_on_failure: stop mode halted the context, continue mode ran on: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
