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

NPY_FLOAT32 = 11               # NumPy type number, as acl.util.ptr_to_numpy takes it
DEVICE_ID = 0
COUNT = 1 << 16
SIZE = COUNT * 4
REPORT_TIMEOUT_MS = 100

g_run_flag = True
g_log = []


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


# -------------------------------------------------------------------------- part 1
def my_host_callback(args):
    """Runs between the copies: doubles the data the device produced, in pinned memory."""
    host_ptr, count = args
    data = acl.util.ptr_to_numpy(host_ptr, (count,), NPY_FLOAT32)
    g_log.append(f"In my_host_callback: first element {data[0]:.1f} (thread {threading.current_thread().name})")
    data *= 2
    time.sleep(0.05)               # later tasks of the stream wait for this


def part1(stream):
    dev_in, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    dev_out, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    host, ret = acl.rt.malloc_host(SIZE)
    check(ret, "malloc_host")
    acl.util.ptr_to_numpy(host, (COUNT,), NPY_FLOAT32)[:] = np.arange(COUNT, dtype=np.float32)

    check(acl.rt.memcpy_async(dev_in, SIZE, host, SIZE, acl.ACL_MEMCPY_HOST_TO_DEVICE, stream), "memcpy_async H2D")
    # "device work": copy dev_in -> dev_out and back to the host buffer
    check(acl.rt.memcpy_async(dev_out, SIZE, dev_in, SIZE, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, stream), "memcpy_async")
    check(acl.rt.memcpy_async(host, SIZE, dev_out, SIZE, acl.ACL_MEMCPY_DEVICE_TO_HOST, stream), "memcpy_async D2H")
    check(acl.rt.launch_host_func(stream, my_host_callback, (host, COUNT)), "launch_host_func")
    # runs only after my_host_callback returned: it uploads the doubled values
    check(acl.rt.memcpy_async(dev_out, SIZE, host, SIZE, acl.ACL_MEMCPY_HOST_TO_DEVICE, stream), "memcpy_async H2D")
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")

    result = np.zeros(COUNT, np.float32)
    check(acl.rt.memcpy(acl.util.numpy_to_ptr(result), SIZE, dev_out, SIZE, acl.ACL_MEMCPY_DEVICE_TO_HOST), "memcpy")
    ok = bool((result == 2 * np.arange(COUNT, dtype=np.float32)).all())
    print(g_log[-1])
    print(f"part 1: the copy after launch_host_func saw the callback's result: {'OK' if ok else 'WRONG'}")
    for ptr in (dev_in, dev_out):
        check(acl.rt.free(ptr), "free")
    check(acl.rt.free_host(host), "free_host")
    return ok


# -------------------------------------------------------------------------- part 2
def report_thread_func(args_list):
    context, timeout = args_list
    check(acl.rt.set_context(context), "set_context")
    timeouts = 0
    while g_run_flag:
        ret = acl.rt.process_report(timeout)
        if ret == acl.ACL_ERROR_RT_REPORT_TIMEOUT:
            timeouts += 1              # nothing to run within the timeout: loop again
    g_log.append(f"report thread: {timeouts} idle timeouts")


def batch_callback(user_data):
    g_log.append(("callback", user_data, threading.get_ident()))


def part2(stream):
    global g_run_flag
    context, ret = acl.rt.get_context()          # the report thread works in this context
    check(ret, "get_context")
    tid, ret = acl.util.start_thread(report_thread_func, [context, REPORT_TIMEOUT_MS])
    check(ret, "start_thread")
    check(acl.rt.subscribe_report(tid, stream), "subscribe_report")
    dev, ret = acl.rt.malloc(SIZE, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    for batch in range(4):
        check(acl.rt.memset_async(dev, SIZE, batch, SIZE, stream), "memset_async")
        block = acl.ACL_CALLBACK_BLOCK if batch % 2 == 0 else acl.ACL_CALLBACK_NO_BLOCK
        check(acl.rt.launch_callback(batch_callback, batch, block, stream), "launch_callback")
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    time.sleep(0.2)                # NO_BLOCK callbacks may still be running: let them finish
    check(acl.rt.unsubscribe_report(tid, stream), "unsubscribe_report")
    g_run_flag = False
    check(acl.util.stop_thread(tid), "stop_thread")
    check(acl.rt.free(dev), "free")

    calls = [entry for entry in g_log if isinstance(entry, tuple)]
    batches = sorted(batch for _, batch, _ in calls)
    on_report_thread = all(ident == tid for _, _, ident in calls)
    print(f"part 2: report thread ran callbacks for batches {batches}, "
          f"all on the subscribed thread: {on_report_thread}")
    print(g_log[-1])
    return batches == [0, 1, 2, 3] and on_report_thread


def main():
    check(acl.init(), "init")
    check(acl.rt.set_device(DEVICE_ID), "set_device")
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")

    ok1 = part1(stream)
    ok2 = part2(stream)

    check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(DEVICE_ID), "reset_device")
    check(acl.finalize(), "finalize")
    ok = ok1 and ok2
    print(f"host_callback: launch_host_func and report-thread callbacks verified: {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
