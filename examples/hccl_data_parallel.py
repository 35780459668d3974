"""A data-parallel training step: every device computes gradients on its shard of the
batch, HCCL AllReduce sums them, and every device applies the same SGD update.

The model is linear regression (loss = mean((x @ w - y)^2) / 2), small enough to check
against numpy doing the full-batch step in one process:

    host: comm_init_all(n, [0..n-1])  -- one communicator per device, a thread drives each
    rank r (thread r, device r):
        grad_r = x_r^T (x_r w - y_r) / batch          (its shard; computed on the host here,
        memcpy H2D grad_r                              copied to the device as a framework would)
        hccl.all_reduce(grad, grad, SUM)               in place, on the rank's stream
        ops.axpy: w = w + (-lr) * grad                 on the device, after the all-reduce
        synchronize_stream -> read w back
    every replica of w is the same and equals numpy's full-batch step

The all-reduce runs as copies, notifies and reduce tasks on the devices (mesh on the
default hccs8 board: each rank's chunk reduced by its owner, then gathered); HCCL_ALGO=
"level0:ring" runs it as a ring.  The time printed is the last step's all-reduce between
its events on the slowest rank: wall time, or with MDEV_MODEL_TIME=1 (``mdev run
--model-time``) its modelled time (``mdev bench hccl`` prints that next to HCCL's formula).

    python examples/hccl_data_parallel.py
"""

import sys
import threading

import numpy as np

import mdev.acl as acl
import mdev.hccl as hccl
from mdev import ops

FEATURES, PER_RANK, LR, STEPS = 4096, 64, 0.05, 3     # w has 4096 float32: 16 KiB of gradients


def check(ret, what):
    if ret != 0:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def shard(rank):
    """Rank ``rank``'s part of the batch (the same data whoever computes it)."""
    rng = np.random.default_rng(rank)
    x = rng.standard_normal((PER_RANK, FEATURES)).astype(np.float32)
    y = (x[:, :8].sum(axis=1) + 0.1 * rng.standard_normal(PER_RANK)).astype(np.float32)
    return x, y


def gradient(x, y, w, batch):
    return (x.T @ (x @ w - y) / batch).astype(np.float32)


def train(rank, comm, world, results):
    check(acl.rt.set_device(rank), "set_device")
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    nbytes = FEATURES * 4
    w_dev, ret = acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    g_dev, ret = acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    w = np.zeros(FEATURES, np.float32)               # the same initial replica on every rank
    check(acl.rt.memcpy(w_dev, nbytes, acl.util.numpy_to_ptr(w), nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE), "memcpy")
    x, y = shard(rank)
    start, ret = acl.rt.create_event()
    check(ret, "create_event")
    end, ret = acl.rt.create_event()
    check(ret, "create_event")
    for step in range(STEPS):
        g = gradient(x, y, w, PER_RANK * world)      # this shard's share of the batch gradient
        check(acl.rt.memcpy(g_dev, nbytes, acl.util.numpy_to_ptr(g), nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE),
              "memcpy")
        check(acl.rt.record_event(start, stream), "record_event")
        check(hccl.all_reduce(g_dev, g_dev, FEATURES, hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_REDUCE_SUM, comm, stream),
              "all_reduce")
        check(acl.rt.record_event(end, stream), "record_event")
        check(ops.axpy[1, stream](w_dev, g_dev, w_dev, -LR, FEATURES), "axpy")     # w -= lr * sum of gradients
        check(acl.rt.synchronize_stream(stream), "synchronize_stream")
        check(acl.rt.memcpy(acl.util.numpy_to_ptr(w), nbytes, w_dev, nbytes, acl.ACL_MEMCPY_DEVICE_TO_HOST), "memcpy")
    ms, ret = acl.rt.event_elapsed_time(start, end)
    check(ret, "event_elapsed_time")
    for ptr in (w_dev, g_dev):
        check(acl.rt.free(ptr), "free")
    check(acl.rt.destroy_stream(stream), "destroy_stream")
    check(acl.rt.reset_device(rank), "reset_device")
    results[rank] = (w, ms)


def main():
    check(acl.init(), "init")
    world, ret = acl.rt.get_device_count()
    check(ret, "get_device_count")
    comms, ret = hccl.comm_init_all(world, list(range(world)))
    check(ret, "comm_init_all")
    results, errors = {}, []

    def run(rank):
        try:
            train(rank, comms[rank], world, results)
        except Exception as exc:      # reported from the main thread
            errors.append(f"rank {rank}: {exc}")

    threads = [threading.Thread(target=run, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for comm in comms:
        check(hccl.comm_destroy(comm), "comm_destroy")
    check(acl.finalize(), "finalize")
    if errors:
        print("\n".join(errors))
        return 1

    # numpy: the same steps on the whole batch in one process
    shards = [shard(r) for r in range(world)]
    w = np.zeros(FEATURES, np.float32)
    for _ in range(STEPS):
        g = sum(gradient(x, y, w, PER_RANK * world) for x, y in shards)
        w = (w - LR * g).astype(np.float32)
    same = all(np.array_equal(results[r][0], results[0][0]) for r in range(world))
    close = np.allclose(results[0][0], w, rtol=1e-4, atol=1e-6)
    loss = float(np.mean([np.mean((x @ results[0][0] - y) ** 2) for x, y in shards]) / 2)
    print(f"hccl_data_parallel: {world} ranks, {STEPS} steps, all-reduce of {FEATURES * 4 // 1024} KiB "
          f"({max(ms for _, ms in results.values()):.4f} ms between its events); loss {loss:.4f}")
    ok = same and close
    print(f"hccl_data_parallel: every replica identical, equal to numpy's full-batch step: {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
