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

NPY_FLOAT32 = 11                        # NumPy type number, as acl.util.ptr_to_numpy takes it
SIZE = 4 * 2                            # float32 elements
NBYTES = SIZE * 4
ALPHA, UPDATE_ALPHA = 1.1, 5.5


def ACL_LOG(fmt, *args):
    print("[INFO]  " + fmt % args)


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def alloc(nbytes):
    ptr, ret = acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    return ptr


def capture(d, h, stream, event=None):
    """The guide's capture; with ``event``, the wait/reset in front of the group."""
    self_d, other_d, out_d, tmp_d = d
    self_h, other_h, out_h = h
    check(acl.mdl.ri_capture_begin(stream, acl.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), "ri_capture_begin")
    for dst, src in ((self_d, self_h), (other_d, other_h)):
        check(acl.rt.memcpy_async(dst, NBYTES, src, NBYTES, acl.ACL_MEMCPY_HOST_TO_DEVICE, stream), "memcpy_async")
    check(ops.axpy[1, stream](self_d, other_d, tmp_d, ALPHA, SIZE), "axpy")           # outtmp
    if event is not None:
        # wait for the update stream, then reset the external event for the next replay
        check(acl.rt.stream_wait_event(stream, event), "stream_wait_event")
        check(acl.rt.reset_event(event, stream), "reset_event")
    check(acl.mdl.ri_capture_task_grp_begin(stream), "ri_capture_task_grp_begin")
    check(ops.axpy[1, stream](tmp_d, other_d, out_d, ALPHA, SIZE), "axpy")             # out
    handle, ret = acl.mdl.ri_capture_task_grp_end(stream)
    check(ret, "ri_capture_task_grp_end")
    check(acl.rt.memcpy_async(out_h, NBYTES, out_d, NBYTES, acl.ACL_MEMCPY_DEVICE_TO_HOST, stream), "memcpy_async")
    model, ret = acl.mdl.ri_capture_end(stream)
    check(ret, "ri_capture_end")
    return model, handle


def update(handle, update_stream, tmp_d, other_d, out_d, new_alpha=None):
    """Replace the task group's launch by one with ``new_alpha`` (None: an empty update)."""
    check(acl.mdl.ri_capture_task_update_begin(update_stream, handle), "ri_capture_task_update_begin")
    if new_alpha is not None:
        check(ops.axpy[1, update_stream](tmp_d, other_d, out_d, new_alpha, SIZE), "axpy")
        ACL_LOG("update alpha value of aclnnAdd")
    check(acl.mdl.ri_capture_task_update_end(update_stream), "ri_capture_task_update_end")


def execute(model, stream, out_v, fmt):
    """Run the model, wait for it, log and return out[0]."""
    check(acl.mdl.ri_execute_async(model, stream), "ri_execute_async")
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    ACL_LOG(fmt, out_v[0])
    return round(float(out_v[0]), 4)


def main():
    check(acl.init(), "init")
    check(acl.rt.set_device(0), "set_device")
    d = [alloc(NBYTES) for _ in range(4)]
    self_d, other_d, out_d, tmp_d = d
    h = []
    for value in (0, 1, 0):             # self, other, out
        ptr, ret = acl.rt.malloc_host(NBYTES)
        check(ret, "malloc_host")
        acl.util.ptr_to_numpy(ptr, (SIZE,), NPY_FLOAT32)[:] = value
        h.append(ptr)
    out_v = acl.util.ptr_to_numpy(h[2], (SIZE,), NPY_FLOAT32)
    stream1, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    update_stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    results = []

    # -- 1. concurrent update, with an external event
    event, ret = acl.rt.create_event_with_flag(acl.ACL_EVENT_EXTERNAL)
    check(ret, "create_event_with_flag")
    model, handle = capture(d, h, stream1, event)
    for i in range(2):
        ACL_LOG("execute model, loop: %d", i)
        check(acl.mdl.ri_execute_async(model, stream1), "ri_execute_async")
        update(handle, update_stream, tmp_d, other_d, out_d, UPDATE_ALPHA if i == 1 else None)
        # tell stream1 the update is in: it continues after its event wait
        check(acl.rt.record_event(event, update_stream), "record_event")
        check(acl.rt.synchronize_stream(update_stream), "synchronize_stream")
        check(acl.rt.synchronize_stream(stream1), "synchronize_stream")
        ACL_LOG("%f %f %f %f %f %f %f %f\n", *out_v[:8])
        results.append(round(float(out_v[0]), 4))
    check(acl.mdl.ri_destroy(model), "ri_destroy")
    check(acl.rt.destroy_event(event), "destroy_event")

    # -- 2. update first, then execute
    model, handle = capture(d, h, stream1)
    results.append(execute(model, stream1, out_v, "sequential, before the update: %f"))
    update(handle, update_stream, tmp_d, other_d, out_d, UPDATE_ALPHA)
    check(acl.rt.synchronize_stream(update_stream), "synchronize_stream")
    results.append(execute(model, stream1, out_v, "sequential, after the update:  %f"))
    check(acl.mdl.ri_destroy(model), "ri_destroy")

    for stream in (stream1, update_stream):
        check(acl.rt.destroy_stream(stream), "destroy_stream")
    for ptr in d:
        check(acl.rt.free(ptr), "free")
    for ptr in h:
        check(acl.rt.free_host(ptr), "free_host")
    check(acl.rt.reset_device(0), "reset_device")
    check(acl.finalize(), "finalize")
    ok = results == [2.2, 6.6, 2.2, 6.6]
    print(f"graph_task_update: alpha 1.1 -> 5.5, concurrent (external event) and sequential updates verified: "
          f"{'OK' if ok else f'MISMATCH {results}'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
