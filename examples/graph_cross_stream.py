"""Cross-stream capture (guide 04-02 "跨流捕获").

The capture is begun and ended on the origin stream (stream1).  Recording ``event1`` on
stream1 and making stream2 wait for it pulls stream2 into the capture; stream2 returns to
the origin by recording ``event2``, which stream1 waits for.  Both streams' tasks end up
in one model run instance, with the dependencies the events expressed: on replay the add
runs on stream2's lane after the H2D copy and before the D2H copy.  Events used in a
capture are created with ``create_event_ex_with_flag(ACL_EVENT_SYNC)``.

Same computation as examples/graph_capture_add.py: 1.1, 2.2, ..., 8.8 over 8 replays.
The model is also printed with ``aclmdlRIDebugPrint``.

    python examples/graph_cross_stream.py
"""

import sys

import mdev.acl as acl
from mdev import ops

NPY_FLOAT32 = 11                        # NumPy type number, as acl.util.ptr_to_numpy takes it
SIZE = 4 * 2                            # float32 elements
NBYTES = SIZE * 4
ALPHA = 1.1                             # aclnnAdd: out = self + other * alpha


def ACL_LOG(fmt, *args):
    print("[INFO]  " + fmt % args)


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def capture(streams, events, self_d, other_d, out_d, self_h, other_h):
    """Fork stream2 off the capture of stream1 with event1, join it back with event2.
    Returns the model and whether stream2 was part of the capture."""
    stream1, stream2 = streams
    event1, event2 = events
    # ======== begin capture ========
    check(acl.mdl.ri_capture_begin(stream1, acl.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), "ri_capture_begin")
    check(acl.rt.memcpy_async(self_d, NBYTES, self_h, NBYTES, acl.ACL_MEMCPY_HOST_TO_DEVICE, stream1), "memcpy_async")
    mode, ret = acl.mdl.ri_capture_thread_exchange_mode(acl.ACL_MODEL_RI_CAPTURE_MODE_RELAXED)
    check(ret, "ri_capture_thread_exchange_mode")
    check(acl.rt.memcpy(other_d, NBYTES, other_h, NBYTES, acl.ACL_MEMCPY_HOST_TO_DEVICE), "memcpy")
    mode, ret = acl.mdl.ri_capture_thread_exchange_mode(mode)
    check(ret, "ri_capture_thread_exchange_mode")
    # event1 brings stream2 into the capture
    check(acl.rt.record_event(event1, stream1), "record_event")
    check(acl.rt.stream_wait_event(stream2, event1), "stream_wait_event")
    status, _, ret = acl.mdl.ri_capture_get_info(stream2)
    check(ret, "ri_capture_get_info")
    check(ops.axpy[1, stream2](self_d, other_d, out_d, ALPHA, SIZE), "axpy (aclnnAdd)")
    # event2 returns stream2 to the origin stream
    check(acl.rt.record_event(event2, stream2), "record_event")
    check(acl.rt.stream_wait_event(stream1, event2), "stream_wait_event")
    check(acl.rt.memcpy_async(self_h, NBYTES, out_d, NBYTES, acl.ACL_MEMCPY_DEVICE_TO_HOST, stream1), "memcpy_async")
    # ======== end capture ========
    model, ret = acl.mdl.ri_capture_end(stream1)
    check(ret, "ri_capture_end")
    return model, status == acl.ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE


def main():
    check(acl.init(), "init")
    check(acl.rt.set_device(0), "set_device")
    device, pinned, streams, events = [], [], [], []
    for _ in range(3):
        ptr, ret = acl.rt.malloc(NBYTES, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        device.append(ptr)
    for value in (0, 1):                # self, other
        ptr, ret = acl.rt.malloc_host(NBYTES)
        check(ret, "malloc_host")
        acl.util.ptr_to_numpy(ptr, (SIZE,), NPY_FLOAT32)[:] = value
        pinned.append(ptr)
    for _ in range(2):                  # stream1 (the origin), stream2; event1 (fork), event2 (join)
        stream, ret = acl.rt.create_stream()
        check(ret, "create_stream")
        streams.append(stream)
        # capture needs events created with create_event_ex_with_flag(ACL_EVENT_SYNC)
        event, ret = acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC)
        check(ret, "create_event_ex_with_flag")
        events.append(event)

    model, joined = capture(streams, events, *device, *pinned)
    check(acl.mdl.ri_debug_print(model), "ri_debug_print")
    self_v = acl.util.ptr_to_numpy(pinned[0], (SIZE,), NPY_FLOAT32)
    lines = []
    for _ in range(8):
        check(acl.mdl.ri_execute_async(model, streams[0]), "ri_execute_async")
        check(acl.rt.synchronize_stream(streams[0]), "synchronize_stream")
        ACL_LOG("%f %f %f %f %f %f %f %f\n", *self_v[:8])
        lines.append(" ".join("%f" % x for x in self_v))

    check(acl.mdl.ri_destroy(model), "ri_destroy")
    for stream, event in zip(streams, events):
        check(acl.rt.destroy_stream(stream), "destroy_stream")
        check(acl.rt.destroy_event(event), "destroy_event")
    for ptr in device:
        check(acl.rt.free(ptr), "free")
    for ptr in pinned:
        check(acl.rt.free_host(ptr), "free_host")
    check(acl.rt.reset_device(0), "reset_device")
    check(acl.finalize(), "finalize")
    ok = joined and lines == [" ".join([f"{i * 1.1:.6f}"] * 8) for i in range(1, 9)]
    print(f"graph_cross_stream: add captured on stream2 between fork and join, replayed 8 times: "
          f"{'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
