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

ACL_SUCCESS = 0
ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST = 1, 2
NPY_FLOAT32 = 11


def ACL_LOG(fmt, *args):
    print("[INFO]  " + fmt % args)


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def main():
    size = 4 * 2
    nbytes = size * 4
    alpha_value = 1.1

    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(0))
    ptrs = []
    for _ in range(3):
        ptr, ret = acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("acl.rt.malloc", ret)
        ptrs.append(ptr)
    self_d, other_d, out_d = ptrs
    self_h, ret = acl.rt.malloc_host(nbytes)
    check_ret("acl.rt.malloc_host", ret)
    other_h, ret = acl.rt.malloc_host(nbytes)
    check_ret("acl.rt.malloc_host", ret)
    self_v = acl.util.ptr_to_numpy(self_h, (size,), NPY_FLOAT32)
    acl.util.ptr_to_numpy(other_h, (size,), NPY_FLOAT32)[:] = 1
    self_v[:] = 0

    stream1, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    stream2, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)
    # capture needs events created with create_event_ex_with_flag(ACL_EVENT_SYNC)
    event1, ret = acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC)
    check_ret("acl.rt.create_event_ex_with_flag", ret)
    event2, ret = acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC)
    check_ret("acl.rt.create_event_ex_with_flag", ret)

    # ======== begin capture ========
    check_ret("acl.mdl.ri_capture_begin", acl.mdl.ri_capture_begin(stream1, acl.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL))
    check_ret("acl.rt.memcpy_async", acl.rt.memcpy_async(self_d, nbytes, self_h, nbytes, ACL_MEMCPY_HOST_TO_DEVICE,
                                                         stream1))
    mode, ret = acl.mdl.ri_capture_thread_exchange_mode(acl.ACL_MODEL_RI_CAPTURE_MODE_RELAXED)
    check_ret("acl.mdl.ri_capture_thread_exchange_mode", ret)
    check_ret("acl.rt.memcpy", acl.rt.memcpy(other_d, nbytes, other_h, nbytes, ACL_MEMCPY_HOST_TO_DEVICE))
    mode, ret = acl.mdl.ri_capture_thread_exchange_mode(mode)
    check_ret("acl.mdl.ri_capture_thread_exchange_mode", ret)
    # event1 brings stream2 into the capture
    check_ret("acl.rt.record_event", acl.rt.record_event(event1, stream1))
    check_ret("acl.rt.stream_wait_event", acl.rt.stream_wait_event(stream2, event1))
    status, _, ret = acl.mdl.ri_capture_get_info(stream2)
    check_ret("acl.mdl.ri_capture_get_info", ret)
    joined = status == acl.ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE
    check_ret("axpy (aclnnAdd)", ops.axpy[1, stream2](self_d, other_d, out_d, alpha_value, size))
    # event2 returns stream2 to the origin stream
    check_ret("acl.rt.record_event", acl.rt.record_event(event2, stream2))
    check_ret("acl.rt.stream_wait_event", acl.rt.stream_wait_event(stream1, event2))
    check_ret("acl.rt.memcpy_async", acl.rt.memcpy_async(self_h, nbytes, out_d, nbytes, ACL_MEMCPY_DEVICE_TO_HOST,
                                                         stream1))
    # ======== end capture ========
    model, ret = acl.mdl.ri_capture_end(stream1)
    check_ret("acl.mdl.ri_capture_end", ret)
    check_ret("acl.mdl.ri_debug_print", acl.mdl.ri_debug_print(model))

    lines = []
    for _ in range(8):
        check_ret("acl.mdl.ri_execute_async", acl.mdl.ri_execute_async(model, stream1))
        check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream1))
        ACL_LOG("%f %f %f %f %f %f %f %f\n", *self_v[:8])
        lines.append(" ".join("%f" % x for x in self_v))

    check_ret("acl.mdl.ri_destroy", acl.mdl.ri_destroy(model))
    for s in (stream1, stream2):
        check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(s))
    for e in (event1, event2):
        check_ret("acl.rt.destroy_event", acl.rt.destroy_event(e))
    for ptr in ptrs:
        check_ret("acl.rt.free", acl.rt.free(ptr))
    for ptr in (self_h, other_h):
        check_ret("acl.rt.free_host", acl.rt.free_host(ptr))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(0))
    check_ret("acl.finalize", acl.finalize())

    expected = [" ".join([f"{i * 1.1:.6f}"] * 8) for i in range(1, 9)]
    if not joined or lines != expected:
        print("graph_cross_stream: MISMATCH")
        return 1
    print("graph_cross_stream: add captured on stream2 between fork and join, replayed 8 times: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
