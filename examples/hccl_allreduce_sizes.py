"""AllReduce of growing sizes on every device of the node: the job `mdev whatif` compares
across machines.

    host: comm_init_all(n, [0..n-1])  -- n = the node's device count, a thread per rank
    rank r, for each size (1 MiB, 4 MiB, 16 MiB by default):
        hccl.all_reduce(buf, buf, SUM) in place, fp32, on the rank's stream; synchronize
    every rank's result equals numpy's sum (small integers in fp32: exact in any order)

Run under a trace, each operation is named in it, so `mdev trace summary` and
`mdev whatif` print its modelled time and the algorithm HCCL's topology rules chose:

    mdev whatif examples/hccl_allreduce_sizes.py --topology hccs8 --topology a2-4x8 \\
        --topology cloudmatrix384 --hbm 256MiB [--args "--max 64M"]

(on the cluster presets the program runs on node 0: 8 HCCS-meshed NPUs of an A2 server,
16 dies of a CloudMatrix384 node joined by UB).

    python examples/hccl_allreduce_sizes.py [--min 1M] [--max 16M] [--factor 4]
"""

import argparse
import sys
import threading

import numpy as np

import mdev.acl as acl
import mdev.hccl as hccl

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size(text):
    text = text.strip().upper().rstrip("B")
    return int(text[:-1]) * UNITS[text[-1]] if text[-1] in UNITS else int(text)


def check(ret, what):
    if ret != 0:
        raise RuntimeError(f"{what} failed ret={ret}: {acl.get_recent_err_msg()}")


def rank(r, comm, sizes, results):
    check(acl.rt.set_device(r), "set_device")
    stream, ret = acl.rt.create_stream()
    check(ret, "create_stream")
    buf, ret = acl.rt.malloc(max(sizes), acl.ACL_MEM_MALLOC_HUGE_FIRST)
    check(ret, "malloc")
    ok = True
    for nbytes in sizes:
        x = np.full(nbytes // 4, r + 1, np.float32)
        check(acl.rt.memcpy(buf, nbytes, acl.util.numpy_to_ptr(x), nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE), "memcpy")
        check(hccl.all_reduce(buf, buf, nbytes // 4, hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_REDUCE_SUM, comm, stream),
              "all_reduce")
        check(acl.rt.synchronize_stream(stream), "synchronize_stream")
        check(acl.rt.memcpy(acl.util.numpy_to_ptr(x), nbytes, buf, nbytes, acl.ACL_MEMCPY_DEVICE_TO_HOST), "memcpy")
        ok = ok and bool(np.all(x == results["sum"]))
    results[r] = ok
    acl.rt.free(buf)
    acl.rt.destroy_stream(stream)
    acl.rt.reset_device(r)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--min", type=size, default=1 << 20)
    parser.add_argument("--max", type=size, default=16 << 20)
    parser.add_argument("--factor", type=int, default=4)
    args = parser.parse_args()
    sizes, n = [], args.min
    while n <= args.max:
        sizes.append(n)
        n *= max(2, args.factor)
    check(acl.init(), "init")
    ndev, ret = acl.rt.get_device_count()
    check(ret, "get_device_count")
    comms, ret = hccl.comm_init_all(ndev, list(range(ndev)))
    check(ret, "comm_init_all")
    results = {"sum": ndev * (ndev + 1) / 2}
    threads = [threading.Thread(target=rank, args=(r, comms[r], sizes, results)) for r in range(ndev)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in comms:
        check(hccl.comm_destroy(c), "comm_destroy")
    acl.finalize()
    if not all(results.get(r) for r in range(ndev)):
        print("hccl_allreduce_sizes: a rank's result differs from numpy's sum")
        return 1
    print(f"hccl_allreduce_sizes: {len(sizes)} sizes on {ndev} ranks, every result equals numpy's sum: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
