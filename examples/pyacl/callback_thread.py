"""Host callbacks on a stream, handled by a report thread (acl.util.start_thread).

The pyACL pattern: start a thread whose loop calls acl.rt.process_report(timeout), subscribe
it to the stream with acl.rt.subscribe_report, then acl.rt.launch_callback(fn, user_data,
block_type, stream) puts "call fn(user_data) on the report thread" into the stream.  A
blocking callback holds the stream until it returns, so work queued after it waits.
"""
import sys
import threading
import time

import numpy as np

import acl

ACL_SUCCESS = 0
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST = 1, 2   # aclrtMemcpyKind
ACL_CALLBACK_NO_BLOCK = 0
ACL_CALLBACK_BLOCK = 1
NPY_UINT8 = 2

DEVICE_ID = 0
SIZE = 64 * 1024
TIMEOUT_MS = 100
BATCHES = 4

g_run_flag = True
g_results = []
g_lock = threading.Lock()


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception("{} failed ret={}".format(message, ret))


def report_thread_func(args_list):
    """The report thread: serve callbacks until the main thread clears the flag."""
    context, timeout = args_list
    ret = acl.rt.set_context(context)
    check_ret("acl.rt.set_context", ret)
    print("[INFO] report thread started, timeout {} ms".format(timeout))
    while g_run_flag:
        acl.rt.process_report(timeout)       # a timeout just means "nothing to do yet"
    print("[INFO] report thread exits")


def batch_done_callback(user_data):
    """Runs on the report thread once the stream has reached it."""
    batch, host_ptr = user_data
    data = acl.util.ptr_to_numpy(host_ptr, (SIZE,), NPY_UINT8)
    with g_lock:
        g_results.append((batch, int(data[0]), threading.get_ident()))


def slow_callback(user_data):
    time.sleep(user_data)


def main():
    global g_run_flag
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
    context, ret = acl.rt.create_context(DEVICE_ID)
    check_ret("acl.rt.create_context", ret)
    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)

    # without a subscribed thread, launch_callback is refused
    ret = acl.rt.launch_callback(batch_done_callback, [0, 0], ACL_CALLBACK_BLOCK, stream)
    print("[INFO] launch_callback before subscribe_report: ret={}".format(ret))
    if ret == ACL_SUCCESS:
        raise Exception("launch_callback without a subscribed thread should fail")

    thread_id, ret = acl.util.start_thread(report_thread_func, [context, TIMEOUT_MS])
    check_ret("acl.util.start_thread", ret)
    ret = acl.rt.subscribe_report(thread_id, stream)
    check_ret("acl.rt.subscribe_report", ret)

    dev, ret = acl.rt.malloc(SIZE, ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    hosts = []
    for batch in range(BATCHES):
        host, ret = acl.rt.malloc_host(SIZE)
        check_ret("acl.rt.malloc_host", ret)
        hosts.append(host)
        staging = np.full(SIZE, batch + 1, dtype=np.uint8)
        ret = acl.rt.memcpy(dev, SIZE, acl.util.numpy_to_ptr(staging), SIZE, ACL_MEMCPY_HOST_TO_DEVICE)
        check_ret("acl.rt.memcpy", ret)
        ret = acl.rt.memcpy_async(host, SIZE, dev, SIZE, ACL_MEMCPY_DEVICE_TO_HOST, stream)
        check_ret("acl.rt.memcpy_async", ret)
        block = ACL_CALLBACK_BLOCK if batch % 2 == 0 else ACL_CALLBACK_NO_BLOCK
        ret = acl.rt.launch_callback(batch_done_callback, [batch, host], block, stream)
        check_ret("acl.rt.launch_callback", ret)
        # the next memcpy overwrites dev: wait for this batch's copy to finish first
        check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))

    # a blocking callback holds the stream: synchronize returns after it
    start = time.time()
    ret = acl.rt.launch_callback(slow_callback, 0.2, ACL_CALLBACK_BLOCK, stream)
    check_ret("acl.rt.launch_callback", ret)
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
    held = time.time() - start
    print("[INFO] blocking callback held the stream for {:.2f} s".format(held))
    if held < 0.2:
        raise Exception("synchronize_stream returned before the blocking callback")

    ret = acl.rt.unsubscribe_report(thread_id, stream)
    check_ret("acl.rt.unsubscribe_report", ret)
    g_run_flag = False
    ret = acl.util.stop_thread(thread_id)
    check_ret("acl.util.stop_thread", ret)

    with g_lock:
        results = sorted(g_results)
    for batch, value, tid in results:
        print("[INFO] callback batch {} saw value {} on the report thread: {}".format(
            batch, value, tid == thread_id))
    if [(b, v) for b, v, _ in results] != [(b, b + 1) for b in range(BATCHES)]:
        raise Exception("callbacks saw {}".format(results))
    if any(tid != thread_id for _, _, tid in results):
        raise Exception("a callback ran outside the subscribed thread")

    for host in hosts:
        check_ret("acl.rt.free_host", acl.rt.free_host(host))
    check_ret("acl.rt.free", acl.rt.free(dev))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.rt.destroy_context", acl.rt.destroy_context(context))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
    check_ret("acl.finalize", acl.finalize())
    print("[INFO] callback thread OK")


if __name__ == "__main__":
    main()
    sys.exit(0)
