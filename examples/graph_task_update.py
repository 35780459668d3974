"""Task groups and task update (guide 04-03 "任务更新", way two), both flows.

During the capture, ``aclmdlRICaptureTaskGrpBegin`` / ``TaskGrpEnd`` mark kernel launches as
a task group and return its handle; after the capture, kernel launches issued on another
stream between ``aclmdlRICaptureTaskUpdateBegin(stream, handle)`` and ``TaskUpdateEnd``
replace the group's tasks (same count and types).  The update itself is an asynchronous
task of that stream.

    outtmp = self + alpha * other           (alpha = 1.1)
    out    = outtmp + alpha * other         (the task group; updated to alpha = 5.5)

1. Concurrent update (the guide's sample): the captured origin stream waits for an
   ``ACL_EVENT_EXTERNAL`` event (and resets it) just before the group; each loop executes
   the model, updates the group on ``updateStream`` and records the event there, so the
   replay picks the group up only once the update is in.  Loop 0 updates nothing
   (out = 2.2), loop 1 updates alpha to 5.5 (out = 6.6).
2. Update first, then execute: no event, the update stream is synchronised before the
   model runs.  The same replay gives 2.2 before the update and 6.6 after it.

    python examples/graph_task_update.py
"""

import sys

import mdev.acl as acl
from mdev import ops

ACL_SUCCESS = 0
ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST = 1, 2
NPY_FLOAT32 = 11
GLOBAL = 0


def ACL_LOG(fmt, *args):
    print("[INFO]  " + fmt % args)


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def alloc(nbytes):
    ptr, ret = acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    return ptr


def pinned(nbytes, size, value):
    ptr, ret = acl.rt.malloc_host(nbytes)
    check_ret("acl.rt.malloc_host", ret)
    view = acl.util.ptr_to_numpy(ptr, (size,), NPY_FLOAT32)
    view[:] = value
    return ptr, view


def capture(d, h, size, nbytes, stream, alpha, event=None):
    """The guide's capture; with ``event``, the wait/reset in front of the group."""
    self_d, other_d, out_d, tmp_d = d
    self_h, other_h, out_h = h
    check_ret("acl.mdl.ri_capture_begin", acl.mdl.ri_capture_begin(stream, GLOBAL))
    check_ret("acl.rt.memcpy_async", acl.rt.memcpy_async(self_d, nbytes, self_h, nbytes, ACL_MEMCPY_HOST_TO_DEVICE,
                                                         stream))
    check_ret("acl.rt.memcpy_async", acl.rt.memcpy_async(other_d, nbytes, other_h, nbytes,
                                                         ACL_MEMCPY_HOST_TO_DEVICE, stream))
    check_ret("axpy", ops.axpy[1, stream](self_d, other_d, tmp_d, alpha, size))           # outtmp
    if event is not None:
        # wait for the update stream, then reset the external event for the next replay
        check_ret("acl.rt.stream_wait_event", acl.rt.stream_wait_event(stream, event))
        check_ret("acl.rt.reset_event", acl.rt.reset_event(event, stream))
    check_ret("acl.mdl.ri_capture_task_grp_begin", acl.mdl.ri_capture_task_grp_begin(stream))
    check_ret("axpy", ops.axpy[1, stream](tmp_d, other_d, out_d, alpha, size))             # out
    handle, ret = acl.mdl.ri_capture_task_grp_end(stream)
    check_ret("acl.mdl.ri_capture_task_grp_end", ret)
    check_ret("acl.rt.memcpy_async", acl.rt.memcpy_async(out_h, nbytes, out_d, nbytes, ACL_MEMCPY_DEVICE_TO_HOST,
                                                         stream))
    model, ret = acl.mdl.ri_capture_end(stream)
    check_ret("acl.mdl.ri_capture_end", ret)
    return model, handle


def main():
    size = 4 * 2
    nbytes = size * 4
    alpha_value, update_alpha_value = 1.1, 5.5

    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(0))
    d = [alloc(nbytes) for _ in range(4)]
    self_d, other_d, out_d, tmp_d = d
    self_h, _ = pinned(nbytes, size, 0)
    other_h, _ = pinned(nbytes, size, 1)
    out_h, out_v = pinned(nbytes, size, 0)
    h = (self_h, other_h, out_h)

    stream1, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    update_stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    results = []

    # -- 1. concurrent update, with an external event
    event, ret = acl.rt.create_event_with_flag(acl.ACL_EVENT_EXTERNAL)
    check_ret("acl.rt.create_event_with_flag", ret)
    model, handle = capture(d, h, size, nbytes, stream1, alpha_value, event)
    for i in range(2):
        ACL_LOG("execute model, loop: %d", i)
        check_ret("acl.mdl.ri_execute_async", acl.mdl.ri_execute_async(model, stream1))
        check_ret("acl.mdl.ri_capture_task_update_begin", acl.mdl.ri_capture_task_update_begin(update_stream, handle))
        if i == 1:
            check_ret("axpy", ops.axpy[1, update_stream](tmp_d, other_d, out_d, update_alpha_value, size))
            ACL_LOG("update alpha value of aclnnAdd")
        check_ret("acl.mdl.ri_capture_task_update_end", acl.mdl.ri_capture_task_update_end(update_stream))
        # tell stream1 the update is in: it continues after its event wait
        check_ret("acl.rt.record_event", acl.rt.record_event(event, update_stream))
        check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(update_stream))
        check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream1))
        ACL_LOG("%f %f %f %f %f %f %f %f\n", *out_v[:8])
        results.append(round(float(out_v[0]), 4))
    check_ret("acl.mdl.ri_destroy", acl.mdl.ri_destroy(model))
    check_ret("acl.rt.destroy_event", acl.rt.destroy_event(event))

    # -- 2. update first, then execute
    model, handle = capture(d, h, size, nbytes, stream1, alpha_value)
    check_ret("acl.mdl.ri_execute_async", acl.mdl.ri_execute_async(model, stream1))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream1))
    ACL_LOG("sequential, before the update: %f", out_v[0])
    results.append(round(float(out_v[0]), 4))
    check_ret("acl.mdl.ri_capture_task_update_begin", acl.mdl.ri_capture_task_update_begin(update_stream, handle))
    check_ret("axpy", ops.axpy[1, update_stream](tmp_d, other_d, out_d, update_alpha_value, size))
    check_ret("acl.mdl.ri_capture_task_update_end", acl.mdl.ri_capture_task_update_end(update_stream))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(update_stream))
    check_ret("acl.mdl.ri_execute_async", acl.mdl.ri_execute_async(model, stream1))
    check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream1))
    ACL_LOG("sequential, after the update:  %f", out_v[0])
    results.append(round(float(out_v[0]), 4))
    check_ret("acl.mdl.ri_destroy", acl.mdl.ri_destroy(model))

    for s in (stream1, update_stream):
        check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(s))
    for ptr in d:
        check_ret("acl.rt.free", acl.rt.free(ptr))
    for ptr in h:
        check_ret("acl.rt.free_host", acl.rt.free_host(ptr))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(0))
    check_ret("acl.finalize", acl.finalize())
    if results != [2.2, 6.6, 2.2, 6.6]:
        print(f"graph_task_update: MISMATCH {results}")
        return 1
    print("graph_task_update: alpha 1.1 -> 5.5, concurrent (external event) and sequential updates verified: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
