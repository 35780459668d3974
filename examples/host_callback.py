"""Host callbacks on a stream (guide "Host回调任务", pyACL callback samples).

Part 1, acl.rt.launch_host_func: the guide's sequence

    memcpy_async H2D -> (device work) -> launch_host_func(stream, fn, args) -> memcpy_async D2H

fn runs on a runtime-owned host thread once everything before it on the stream has
finished, and the stream's later tasks wait until fn returns -- here fn post-processes
the data in pinned memory between the two copies.

Part 2, acl.rt.launch_callback with the subscribe/report thread of pyACL samples:

    tid, ret = acl.util.start_thread(thread_func, [context, timeout_ms])   # loops on process_report
    ret = acl.rt.subscribe_report(tid, stream)
    ret = acl.rt.launch_callback(fn, user_data, ACL_CALLBACK_BLOCK, stream)
    ...
    ret = acl.rt.unsubscribe_report(tid, stream); ret = acl.util.stop_thread(tid)

    python examples/host_callback.py
"""

import sys
import threading
import time

import numpy as np

import mdev.acl as acl

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_MEMCPY_DEVICE_TO_DEVICE = 3
ACL_CALLBACK_NO_BLOCK = 0
ACL_CALLBACK_BLOCK = 1
ACL_ERROR_RT_REPORT_TIMEOUT = 507012
NPY_FLOAT32 = 11

DEVICE_ID = 0
COUNT = 1 << 16
SIZE = COUNT * 4
REPORT_TIMEOUT_MS = 100

g_run_flag = True
g_log = []


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


# -------------------------------------------------------------------------- part 1
def my_host_callback(args):
    """Runs between the copies: doubles the data the device produced, in pinned memory."""
    host_ptr, count = args
    data = acl.util.ptr_to_numpy(host_ptr, (count,), NPY_FLOAT32)
    g_log.append(f"In my_host_callback: first element {data[0]:.1f} (thread {threading.current_thread().name})")
    data *= 2
    time.sleep(0.05)               # later tasks of the stream wait for this


def part1(stream):
    dev_in, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    dev_out, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    host, ret = acl.rt.malloc_host(SIZE)
    check_ret("acl.rt.malloc_host", ret)
    acl.util.ptr_to_numpy(host, (COUNT,), NPY_FLOAT32)[:] = np.arange(COUNT, dtype=np.float32)

    check_ret("acl.rt.memcpy_async", acl.rt.memcpy_async(dev_in, SIZE, host, SIZE, ACL_MEMCPY_HOST_TO_DEVICE, stream))
    # "device work": copy dev_in -> dev_out and back to the host buffer
    check_ret("acl.rt.memcpy_async", acl.rt.memcpy_async(dev_out, SIZE, dev_in, SIZE, ACL_MEMCPY_DEVICE_TO_DEVICE, stream))
    check_ret("acl.rt.memcpy_async", acl.rt.memcpy_async(host, SIZE, dev_out, SIZE, ACL_MEMCPY_DEVICE_TO_HOST, stream))
    check_ret("acl.rt.launch_host_func", acl.rt.launch_host_func(stream, my_host_callback, (host, COUNT)))
    # runs only after my_host_callback returned: it uploads the doubled values
    check_ret("acl.rt.memcpy_async", acl.rt.memcpy_async(dev_out, SIZE, host, SIZE, ACL_MEMCPY_HOST_TO_DEVICE, stream))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))

    check = np.zeros(COUNT, np.float32)
    ret = acl.rt.memcpy(acl.util.numpy_to_ptr(check), SIZE, dev_out, SIZE, ACL_MEMCPY_DEVICE_TO_HOST)
    check_ret("acl.rt.memcpy", ret)
    ok = bool((check == 2 * np.arange(COUNT, dtype=np.float32)).all())
    print(g_log[-1])
    print(f"part 1: the copy after launch_host_func saw the callback's result: {'OK' if ok else 'WRONG'}")
    for ptr in (dev_in, dev_out):
        check_ret("acl.rt.free", acl.rt.free(ptr))
    check_ret("acl.rt.free_host", acl.rt.free_host(host))
    return ok


# -------------------------------------------------------------------------- part 2
def report_thread_func(args_list):
    context, timeout = args_list
    check_ret("acl.rt.set_context", acl.rt.set_context(context))
    timeouts = 0
    while g_run_flag:
        ret = acl.rt.process_report(timeout)
        if ret == ACL_ERROR_RT_REPORT_TIMEOUT:
            timeouts += 1              # nothing to run within the timeout: loop again
    g_log.append(f"report thread: {timeouts} idle timeouts")


def batch_callback(user_data):
    g_log.append(("callback", user_data, threading.get_ident()))


def part2(context, stream):
    global g_run_flag
    tid, ret = acl.util.start_thread(report_thread_func, [context, REPORT_TIMEOUT_MS])
    check_ret("acl.util.start_thread", ret)
    check_ret("acl.rt.subscribe_report", acl.rt.subscribe_report(tid, stream))
    dev, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    for batch in range(4):
        check_ret("acl.rt.memset_async", acl.rt.memset_async(dev, SIZE, batch, SIZE, stream))
        block = ACL_CALLBACK_BLOCK if batch % 2 == 0 else ACL_CALLBACK_NO_BLOCK
        check_ret("acl.rt.launch_callback", acl.rt.launch_callback(batch_callback, batch, block, stream))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    time.sleep(0.2)                # NO_BLOCK callbacks may still be running: let them finish
    check_ret("acl.rt.unsubscribe_report", acl.rt.unsubscribe_report(tid, stream))
    g_run_flag = False
    check_ret("acl.util.stop_thread", acl.util.stop_thread(tid))
    check_ret("acl.rt.free", acl.rt.free(dev))

    calls = [entry for entry in g_log if isinstance(entry, tuple)]
    batches = sorted(batch for _, batch, _ in calls)
    on_report_thread = all(ident == tid for _, _, ident in calls)
    print(f"part 2: report thread ran callbacks for batches {batches}, "
          f"all on the subscribed thread: {on_report_thread}")
    print(g_log[-1])
    return batches == [0, 1, 2, 3] and on_report_thread


def main():
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    context, ret = acl.rt.get_context()
    check_ret("acl.rt.get_context", ret)
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)

    ok1 = part1(stream)
    ok2 = part2(context, stream)

    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())
    if not (ok1 and ok2):
        print("host_callback: FAILED")
        return 1
    print("host_callback: launch_host_func and report-thread callbacks verified: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
