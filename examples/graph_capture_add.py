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

NPY_FLOAT32 = 11                        # NumPy type number, as acl.util.ptr_to_numpy takes it


def ACL_LOG(fmt, *args):
    print("[INFO]  " + fmt % args)


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def main():
    shape = (4, 2)
    size = shape[0] * shape[1]
    nbytes = size * 4
    alpha_value = 1.1                   # aclnnAdd: out = self + other * alpha

    check(acl.init(), "init")
    check(acl.rt.set_device(0), "set_device")
    device = []
    for _ in range(3):
        ptr, ret = acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        device.append(ptr)
    self_d, other_d, out_d = device
    # pinned host memory (aclrtMallocHost): captured copies need it
    pinned = []
    for value in (0, 1):
        ptr, ret = acl.rt.malloc_host(nbytes)
        check(ret, "malloc_host")
        acl.util.ptr_to_numpy(ptr, (size,), NPY_FLOAT32)[:] = value
        pinned.append(ptr)
    self_h, other_h = pinned
    self_v = acl.util.ptr_to_numpy(self_h, (size,), NPY_FLOAT32)     # each replay's output lands here
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")

    # ======== begin capture ========
    check(acl.mdl.ri_capture_begin(stream, acl.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), "ri_capture_begin")
    check(acl.rt.memcpy_async(self_d, nbytes, self_h, nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE, stream), "memcpy_async")
    # switch to RELAXED to allow the synchronous copy (made once, now)
    mode, ret = acl.mdl.ri_capture_thread_exchange_mode(acl.ACL_MODEL_RI_CAPTURE_MODE_RELAXED)
    check(ret, "ri_capture_thread_exchange_mode")
    check(acl.rt.memcpy(other_d, nbytes, other_h, nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE), "memcpy")
    mode, ret = acl.mdl.ri_capture_thread_exchange_mode(mode)            # back to GLOBAL
    check(ret, "ri_capture_thread_exchange_mode")
    check(ops.axpy[1, stream](self_d, other_d, out_d, alpha_value, size), "axpy (aclnnAdd)")
    check(acl.rt.memcpy_async(self_h, nbytes, out_d, nbytes, acl.ACL_MEMCPY_DEVICE_TO_HOST, stream), "memcpy_async")
    # ======== end capture ========
    model, ret = acl.mdl.ri_capture_end(stream)
    check(ret, "ri_capture_end")

    # the model's tasks, for debugging (chrome://tracing can open the file)
    json_dir = tempfile.mkdtemp(prefix="mdev-graph-")
    json_path = os.path.join(json_dir, "modelRI.json")
    check(acl.mdl.ri_debug_json_print(model, json_path, 0), "ri_debug_json_print")
    with open(json_path) as f:
        kinds = [t["type"] for t in json.load(f)["model"]["tasks"]]
    print(f"modelRI.json: {len(kinds)} captured tasks: {', '.join(kinds)}")
    os.remove(json_path)
    os.rmdir(json_dir)

    # execute the model several times: each replay adds alpha once more
    lines = []
    for _ in range(8):
        check(acl.mdl.ri_execute_async(model, stream), "ri_execute_async")
        check(acl.rt.synchronize_stream(stream), "synchronize_stream")
        ACL_LOG("%f %f %f %f %f %f %f %f\n", *self_v[:8])
        lines.append(" ".join("%f" % x for x in self_v))

    check(acl.mdl.ri_destroy(model), "ri_destroy")
    check(acl.rt.destroy_stream(stream), "destroy_stream")
    for ptr in device:
        check(acl.rt.free(ptr), "free")
    for ptr in pinned:
        check(acl.rt.free_host(ptr), "free_host")
    check(acl.rt.reset_device(0), "reset_device")
    check(acl.finalize(), "finalize")
    ok = lines == [" ".join([f"{i * 1.1:.6f}"] * 8) for i in range(1, 9)]
    print(f"graph_capture_add: captured once, replayed 8 times, outputs 1.1 .. 8.8 as in the guide: "
          f"{'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
