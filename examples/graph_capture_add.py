"""Single-stream capture of an add, replayed 8 times (guide 04-01 "单流捕获").

Between ``aclmdlRICaptureBegin`` and ``aclmdlRICaptureEnd`` the tasks issued on the stream
are stored in a model run instance instead of running; ``aclmdlRIExecuteAsync`` then runs
all of them as one task, as often as needed, without issuing them again.

The guide's sample computes ``out = self + alpha * other`` (aclnnAdd, alpha 1.1) with mdev's
built-in ``axpy`` kernel.  Captured: the H2D copy of ``self``, the add, the D2H copy of
``out`` back into ``self``'s host buffer -- so every replay adds 1.1 once more and prints
1.1, 2.2, ..., 8.8.  The synchronous copy of ``other`` is made once, during the capture,
after switching this thread to RELAXED mode (GLOBAL mode forbids synchronous copies).

    python examples/graph_capture_add.py
"""

import json
import os
import sys
import tempfile

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
    shape = (4, 2)
    size = shape[0] * shape[1]
    nbytes = size * 4
    alpha_value = 1.1                   # aclnnAdd: out = self + other * alpha

    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(0))
    self_d, ret = acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    other_d, ret = acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    out_d, ret = acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)

    # pinned host memory (aclrtMallocHost): captured copies need it
    self_h, ret = acl.rt.malloc_host(nbytes)
    check_ret("acl.rt.malloc_host", ret)
    other_h, ret = acl.rt.malloc_host(nbytes)
    check_ret("acl.rt.malloc_host", ret)
    self_v = acl.util.ptr_to_numpy(self_h, (size,), NPY_FLOAT32)
    other_v = acl.util.ptr_to_numpy(other_h, (size,), NPY_FLOAT32)
    self_v[:] = 0
    other_v[:] = 1

    stream, ret = acl.rt.create_stream()
    check_ret("acl.rt.create_stream", ret)

    # ======== begin capture ========
    check_ret("acl.mdl.ri_capture_begin", acl.mdl.ri_capture_begin(stream, acl.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL))
    check_ret("acl.rt.memcpy_async", acl.rt.memcpy_async(self_d, nbytes, self_h, nbytes, ACL_MEMCPY_HOST_TO_DEVICE,
                                                         stream))
    # switch to RELAXED to allow the synchronous copy (made once, now)
    mode, ret = acl.mdl.ri_capture_thread_exchange_mode(acl.ACL_MODEL_RI_CAPTURE_MODE_RELAXED)
    check_ret("acl.mdl.ri_capture_thread_exchange_mode", ret)
    check_ret("acl.rt.memcpy", acl.rt.memcpy(other_d, nbytes, other_h, nbytes, ACL_MEMCPY_HOST_TO_DEVICE))
    mode, ret = acl.mdl.ri_capture_thread_exchange_mode(mode)            # back to GLOBAL
    check_ret("acl.mdl.ri_capture_thread_exchange_mode", ret)
    check_ret("axpy (aclnnAdd)", ops.axpy[1, stream](self_d, other_d, out_d, alpha_value, size))
    check_ret("acl.rt.memcpy_async", acl.rt.memcpy_async(self_h, nbytes, out_d, nbytes, ACL_MEMCPY_DEVICE_TO_HOST,
                                                         stream))
    # ======== end capture ========
    model, ret = acl.mdl.ri_capture_end(stream)
    check_ret("acl.mdl.ri_capture_end", ret)

    # the model's tasks, for debugging (chrome://tracing can open the file)
    json_dir = tempfile.mkdtemp(prefix="mdev-graph-")
    json_path = os.path.join(json_dir, "modelRI.json")
    check_ret("acl.mdl.ri_debug_json_print", acl.mdl.ri_debug_json_print(model, json_path, 0))
    with open(json_path) as f:
        kinds = [t["type"] for t in json.load(f)["model"]["tasks"]]
    print(f"modelRI.json: {len(kinds)} captured tasks: {', '.join(kinds)}")
    os.remove(json_path)
    os.rmdir(json_dir)

    # execute the model several times
    lines = []
    for i in range(8):
        check_ret("acl.mdl.ri_execute_async", acl.mdl.ri_execute_async(model, stream))
        check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(stream))
        ACL_LOG("%f %f %f %f %f %f %f %f\n", *self_v[:8])
        lines.append(" ".join("%f" % x for x in self_v))

    check_ret("acl.mdl.ri_destroy", acl.mdl.ri_destroy(model))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    for ptr in (self_d, other_d, out_d):
        check_ret("acl.rt.free", acl.rt.free(ptr))
    for ptr in (self_h, other_h):
        check_ret("acl.rt.free_host", acl.rt.free_host(ptr))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(0))
    check_ret("acl.finalize", acl.finalize())

    expected = [" ".join([f"{i * 1.1:.6f}"] * 8) for i in range(1, 9)]
    if lines != expected:
        print("graph_capture_add: MISMATCH")
        return 1
    print("graph_capture_add: captured once, replayed 8 times, outputs 1.1 .. 8.8 as in the guide: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
