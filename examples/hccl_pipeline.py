"""Pipeline parallelism with HCCL send / recv: four stages on four devices, each a layer,
micro-batches flowing from stage to stage.

    main thread: root, ret = hccl.get_root_info()     -- the blob every rank joins with
    stage s (a thread, device s):
        comm, ret = hccl.comm_init_root_info(stages, root, s)   (HCCL's sample, thread per rank)
        for each micro-batch:
            stage 0: the input, memcpy H2D            others: hccl.recv(act, ..., s - 1)
            layer s on the device: act = (s + 2) * act + 1   (ops.scale, ops.axpy)
            last stage: memcpy D2H                    others: hccl.send(act, ..., s + 1)
    the last stage's outputs equal numpy running the four layers

Every send and recv is a task on the stage's stream: stage s+1 may start on micro-batch
k while stage s works on k+1, the devices ordering the hand-overs by notifies.  The same
program runs with a process per stage: pass ``root`` to each process (a file, a pipe) and
call comm_init_root_info there.

    python examples/hccl_pipeline.py
"""

import sys
import threading

import numpy as np

import mdev.acl as acl
import mdev.hccl as hccl
from mdev import ops

STAGES, MICRO_BATCHES, N = 4, 6, 16384          # 64 KiB of float32 activations per micro-batch


def check(ret, what):
    if ret != 0:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def micro_batch(k):
    return np.random.default_rng(k).standard_normal(N).astype(np.float32)


def stage(s, root, outputs):
    check(acl.rt.set_device(s), "set_device")
    comm, ret = hccl.comm_init_root_info(STAGES, root, s)
    check(ret, "comm_init_root_info")
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    nbytes = N * 4
    acts = []
    for _ in range(MICRO_BATCHES):
        ptr, ret = acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        acts.append(ptr)
    ones, ret = acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    check(ops.fill[1, stream](ones, 1.0, N), "fill")
    results = []
    for k, act in enumerate(acts):
        if s == 0:
            x = micro_batch(k)
            check(acl.rt.memcpy(act, nbytes, acl.util.numpy_to_ptr(x), nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE), "memcpy")
        else:
            check(hccl.recv(act, N, hccl.HCCL_DATA_TYPE_FP32, s - 1, comm, stream), "recv")
        check(ops.scale[1, stream](act, act, float(s + 2), N), "scale")
        check(ops.axpy[1, stream](act, ones, act, 1.0, N), "axpy")
        if s < STAGES - 1:
            check(hccl.send(act, N, hccl.HCCL_DATA_TYPE_FP32, s + 1, comm, stream), "send")
        else:
            out = np.empty(N, np.float32)
            results.append(out)
    check(acl.rt.synchronize_stream(stream), "synchronize_stream")
    if s == STAGES - 1:
        for out, act in zip(results, acts):
            check(acl.rt.memcpy(acl.util.numpy_to_ptr(out), nbytes, act, nbytes, acl.ACL_MEMCPY_DEVICE_TO_HOST),
                  "memcpy")
        outputs.extend(results)
    check(hccl.comm_destroy(comm), "comm_destroy")
    for ptr in acts + [ones]:
        check(acl.rt.free(ptr), "free")
    check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(s), "reset_device")


def main():
    check(acl.init(), "init")
    count, ret = acl.rt.get_device_count()
    check(ret, "get_device_count")
    if count < STAGES:
        print(f"hccl_pipeline: needs {STAGES} devices, the board has {count}")
        return 1
    root, ret = hccl.get_root_info()
    check(ret, "get_root_info")
    outputs, errors = [], []

    def run(s):
        try:
            stage(s, root, outputs)
        except Exception as exc:      # reported from the main thread
            errors.append(f"stage {s}: {exc}")

    threads = [threading.Thread(target=run, args=(s,)) for s in range(STAGES)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(acl.finalize(), "finalize")
    if errors:
        print("\n".join(errors))
        return 1
    expected = []
    for k in range(MICRO_BATCHES):
        x = micro_batch(k)
        for s in range(STAGES):
            x = (np.float32(s + 2) * x + np.float32(1.0)).astype(np.float32)
        expected.append(x)
    ok = len(outputs) == MICRO_BATCHES and all(np.array_equal(o, e) for o, e in zip(outputs, expected))
    print(f"hccl_pipeline: {MICRO_BATCHES} micro-batches through {STAGES} stages by send/recv, "
          f"outputs equal numpy's: {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
