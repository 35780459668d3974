"""Model run instance built on a persistent stream (guide 03-02 "Persistent流").

Tasks issued on a stream created with ``ACL_STREAM_PERSISTENT`` are stored, not run; bound
to a model run instance (``aclmdlRIBindStream``) they become the model, which
``aclmdlRIExecute`` runs -- as many times as needed -- on the default stream:

    aclrtCreateStreamWithConfig(&stream, 0, ACL_STREAM_PERSISTENT);
    aclmdlRIBuildBegin(&modelRI, 0);
    aclmdlRIBindStream(modelRI, stream, ACL_MODEL_STREAM_FLAG_HEAD);
    ... tasks on stream ...
    aclmdlRIEndTask(modelRI, stream);
    aclmdlRIBuildEnd(modelRI, nullptr);
    aclmdlRIExecute(modelRI, -1);
    aclmdlRIExecute(modelRI, -1);
    aclmdlRIUnbindStream(modelRI, stream);
    aclrtDestroyStream(stream);
    aclmdlRIDestroy(modelRI);

Here the stored tasks are ``acc = acc + 1.0 * one`` (the built-in axpy kernel) and a copy of
``acc`` to pinned host memory, so each execution shows up on the host.

    python examples/graph_persistent_stream.py
"""

import sys

import numpy as np

import mdev.acl as acl
from mdev import ops

NPY_FLOAT32 = 11                        # NumPy type number, as acl.util.ptr_to_numpy takes it
N = 8


def check(ret, what):
    if ret != acl.ACL_SUCCESS:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def main():
    check(acl.init(), "init")
    check(acl.rt.set_device(0), "set_device")
    nbytes = N * 4
    device = []
    for value in (0.0, 1.0):            # acc = 0, one = 1
        ptr, ret = acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        init = np.full(N, value, np.float32)
        check(acl.rt.memcpy(ptr, nbytes, acl.util.numpy_to_ptr(init), nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE),
              "memcpy")
        device.append(ptr)
    acc, one = device
    host, ret = acl.rt.malloc_host(nbytes)
    check(ret, "malloc_host")
    view = acl.util.ptr_to_numpy(host, (N,), NPY_FLOAT32)
    view[:] = -1

    # a persistent stream: what is issued on it is stored, not run
    stream, ret = acl.rt.create_stream_with_config(0, acl.ACL_STREAM_PERSISTENT)
    check(ret, "create_stream_with_config")
    model, ret = acl.mdl.ri_build_begin(0)
    check(ret, "ri_build_begin")
    check(acl.mdl.ri_bind_stream(model, stream, acl.ACL_MODEL_STREAM_FLAG_HEAD), "ri_bind_stream")
    check(ops.axpy[1, stream](acc, one, acc, 1.0, N), "axpy")                 # acc += 1
    check(acl.rt.memcpy_async(host, nbytes, acc, nbytes, acl.ACL_MEMCPY_DEVICE_TO_HOST, stream), "memcpy_async")
    check(acl.mdl.ri_end_task(model, stream), "ri_end_task")
    check(acl.mdl.ri_build_end(model, None), "ri_build_end")
    stored_not_run = bool((view == -1).all())
    print(f"[INFO]  after build: host buffer {view[0]:f} (the stored tasks have not run)")

    # run the model twice on the default stream
    seen = []
    for i in range(2):
        check(acl.mdl.ri_execute(model, -1), "ri_execute")
        seen.append(float(view[0]))
        print(f"[INFO]  execute {i + 1}: " + " ".join(f"{x:f}" for x in view))

    check(acl.mdl.ri_unbind_stream(model, stream), "ri_unbind_stream")
    check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.mdl.ri_destroy(model), "ri_destroy")
    for ptr in device:
        check(acl.rt.free(ptr), "free")
    check(acl.rt.free_host(host), "free_host")
    check(acl.rt.reset_device(0), "reset_device")
    check(acl.finalize(), "finalize")
    ok = stored_not_run and seen == [1.0, 2.0]
    print("graph_persistent_stream: tasks stored on a persistent stream, model executed twice, each run verified: "
          + ("OK" if ok else f"MISMATCH (stored-not-run {stored_not_run}, runs {seen})"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
