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

ACL_SUCCESS = 0
ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST = 1, 2
NPY_FLOAT32 = 11
N = 8


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


def main():
    check_ret("acl.init", acl.init())
    check_ret("acl.rt.set_device", acl.rt.set_device(0))
    nbytes = N * 4
    acc, ret = acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    one, ret = acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check_ret("acl.rt.malloc", ret)
    ones = np.ones(N, np.float32)
    check_ret("acl.rt.memcpy", acl.rt.memcpy(one, nbytes, acl.util.numpy_to_ptr(ones), nbytes,
                                             ACL_MEMCPY_HOST_TO_DEVICE))
    host, ret = acl.rt.malloc_host(nbytes)
    check_ret("acl.rt.malloc_host", ret)
    view = acl.util.ptr_to_numpy(host, (N,), NPY_FLOAT32)
    view[:] = -1

    # a persistent stream: what is issued on it is stored, not run
    stream, ret = acl.rt.create_stream_with_config(0, acl.ACL_STREAM_PERSISTENT)
    check_ret("acl.rt.create_stream_with_config", ret)
    model, ret = acl.mdl.ri_build_begin(0)
    check_ret("acl.mdl.ri_build_begin", ret)
    check_ret("acl.mdl.ri_bind_stream", acl.mdl.ri_bind_stream(model, stream, acl.ACL_MODEL_STREAM_FLAG_HEAD))
    check_ret("axpy", ops.axpy[1, stream](acc, one, acc, 1.0, N))                 # acc += 1
    check_ret("acl.rt.memcpy_async", acl.rt.memcpy_async(host, nbytes, acc, nbytes, ACL_MEMCPY_DEVICE_TO_HOST,
                                                         stream))
    check_ret("acl.mdl.ri_end_task", acl.mdl.ri_end_task(model, stream))
    check_ret("acl.mdl.ri_build_end", acl.mdl.ri_build_end(model, None))
    stored_not_run = bool((view == -1).all())
    print(f"[INFO]  after build: host buffer {view[0]:f} (the stored tasks have not run)")

    # run the model twice on the default stream
    seen = []
    for i in range(2):
        check_ret("acl.mdl.ri_execute", acl.mdl.ri_execute(model, -1))
        seen.append(float(view[0]))
        print(f"[INFO]  execute {i + 1}: " + " ".join(f"{x:f}" for x in view))

    check_ret("acl.mdl.ri_unbind_stream", acl.mdl.ri_unbind_stream(model, stream))
    check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(stream))
    check_ret("acl.mdl.ri_destroy", acl.mdl.ri_destroy(model))
    for ptr in (acc, one):
        check_ret("acl.rt.free", acl.rt.free(ptr))
    check_ret("acl.rt.free_host", acl.rt.free_host(host))
    check_ret("acl.rt.reset_device", acl.rt.reset_device(0))
    check_ret("acl.finalize", acl.finalize())
    if not stored_not_run or seen != [1.0, 2.0]:
        print(f"graph_persistent_stream: MISMATCH (stored-not-run {stored_not_run}, runs {seen})")
        return 1
    print("graph_persistent_stream: tasks stored on a persistent stream, model executed twice, "
          "each run verified: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
