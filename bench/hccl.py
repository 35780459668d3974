"""Collectives, as hccl_test / nccl-tests measure them: ``python -m bench.hccl`` or
``mdev bench hccl --op all_reduce -b 8K -e 1G -f 2 --topology hccs8``.

A board of the topology, one rank per device driven by a thread of this process
(comm_init_all).  Per size (the buffer nccl-tests names: all_reduce's buffer, all_gather's
output, reduce_scatter's input): one warm-up, then ``--iters`` operations back to back on
every rank, timed from the moment every rank starts until every rank has synchronised
(wall; a pass without modelled time, which costs the devices ~3x) and between events
around them on each rank's stream (modelled: a second pass with MDEV_MODEL_TIME=1; the
slowest rank).  Printed per size:

    time         wall and modelled, per operation
    algbw        size / time;  busbw = algbw x nccl-tests' factor (all_reduce 2(p-1)/p,
                 all_gather and reduce_scatter (p-1)/p, broadcast 1)
    formula      HCCL's alpha-beta-gamma time of the algorithm the communicator chose
                 (mdev.runtime.collectives.cost), and modelled / formula
    numpy        the same reduction in this process: one thread adding the p ranks' arrays
                 (p-1 adds of the size) and copying the result out to p-1 more -- what the
                 emulator's wall time is made of, measured in the same run once the rank
                 threads are done (they would take turns with it), the best of several
                 tries; wall/numpy is how many times numpy's time the wall time is (1 = as
                 fast as numpy)
    tasks        device tasks per device per operation (the devices' task counters over
                 the timed operations, the two event records left out)

The suite run (``python -m bench``) takes the default sizes (8 KiB .. 8 MiB on hccs8) and
reports two figures: modelled / formula at the largest size (target: within 10%) and the
wall-clock throughput of the largest all-reduce against numpy's (no target: the emulator's
ranks share this machine's cores).

Big sizes on request, within this machine: a size S on p ranks needs p x (2 S + the HCCL
buffer) of /dev/shm (each rank's send and receive buffers and landing slots, touched) and
that plus 2 p S of RAM (numpy's arrays), -e 1G on hccs8 about 18 GiB of /dev/shm and 34 GiB
in all.  Before a board starts, the sweep is capped at the largest size that fits in 90% of
MemAvailable and of /dev/shm's free space, saying which sizes it left out and why; if not
even the smallest fits, nothing runs and the command exits with that reason.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import threading
import time

import numpy as np

from bench.common import MiB, Result, dedicated_board, print_table

BUSBW = {"all_reduce": lambda p: 2 * (p - 1) / p, "all_gather": lambda p: (p - 1) / p,
         "reduce_scatter": lambda p: (p - 1) / p, "broadcast": lambda p: 1.0}
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size_arg(text: str) -> int:
    text = text.strip().upper().rstrip("B")
    return int(float(text[:-1]) * UNITS[text[-1]]) if text and text[-1] in UNITS else int(text)


def sizes(begin: int, end: int, factor: int) -> list[int]:
    out, n = [], begin
    while n <= end:
        out.append(n)
        n *= factor
    return out


DEVICE_OVERHEAD, HOST_OVERHEAD = 64 * MiB, 512 * MiB     # a device process; this process and the supervisor
FIT = 0.9                                                # of what the machine has free


def memory_needed(nbytes: int, p: int, buffsize: int) -> tuple[int, int]:
    """(bytes of /dev/shm, bytes of RAM in all) a sweep up to ``nbytes`` on ``p`` ranks needs."""
    shm = p * (2 * nbytes + buffsize)
    return shm, shm + 2 * p * nbytes + p * DEVICE_OVERHEAD + HOST_OVERHEAD


def machine_free() -> tuple[int, int]:
    """(free bytes of /dev/shm, MemAvailable in bytes)."""
    fs = os.statvfs("/dev/shm")
    with open("/proc/meminfo", encoding="ascii") as f:
        available = next(int(line.split()[1]) << 10 for line in f if line.startswith("MemAvailable:"))
    return fs.f_bavail * fs.f_frsize, available


def fitting(size_list: list[int], p: int, buffsize: int, free: tuple[int, int]) -> tuple[list[int], str]:
    """The sizes that fit this machine (``free``: machine_free()), and what was left out and
    why ("" if nothing)."""
    shm_free, ram_free = free
    # the sweep ascends and its need with it: the sizes that fit are a prefix
    fit = list(itertools.takewhile(
        lambda n: all(need <= FIT * have for need, have in zip(memory_needed(n, p, buffsize), free)), size_list))
    if len(fit) == len(size_list):
        return fit, ""
    first = size_list[len(fit)]
    shm, ram = memory_needed(first, p, buffsize)
    left_out = "every size" if not fit else f"sizes above {_bytes(fit[-1])}"
    return fit, (f"{left_out} left out: {_bytes(first)} on {p} ranks needs {_gib(shm)} of /dev/shm "
                 f"({_gib(shm_free)} free) and {_gib(ram)} of memory in all (MemAvailable {_gib(ram_free)}); "
                 f"a sweep uses at most {FIT:.0%} of each")


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB"


def _call(hccl, op: str, send: int, recv: int, nbytes: int, p: int, comm: int, stream: int) -> int:
    count = nbytes // 4
    if op == "all_reduce":
        return hccl.all_reduce(send, recv, count, hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_REDUCE_SUM, comm, stream)
    if op == "all_gather":
        return hccl.all_gather(send, recv, count // p, hccl.HCCL_DATA_TYPE_FP32, comm, stream)
    if op == "reduce_scatter":
        return hccl.reduce_scatter(send, recv, count // p, hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_REDUCE_SUM, comm,
                                   stream)
    return hccl.broadcast(send, count, hccl.HCCL_DATA_TYPE_FP32, 0, comm, stream)


def numpy_same_work(op: str, nbytes: int, p: int) -> float:
    """Seconds for one thread to do what the ranks compute (see the module docstring)."""
    n = nbytes // 4
    xs = [np.full(n, r + 1, np.float32) for r in range(p)]
    outs = [np.empty(n, np.float32) for _ in range(p)]
    best = float("inf")
    for _ in range(10 if nbytes <= 64 * MiB else 3):
        t0 = time.perf_counter()
        if op in ("all_reduce", "reduce_scatter"):
            np.copyto(outs[0], xs[0])
            for x in xs[1:]:
                np.add(outs[0], x, out=outs[0])
        if op in ("all_reduce", "all_gather", "broadcast"):
            for out in outs[1:]:
                np.copyto(out, outs[0])
        best = min(best, time.perf_counter() - t0)
    return best


def measure(acl, hccl, op: str, size_list: list[int], iters: int) -> list[dict]:
    """One row per size (see the module docstring)."""
    from mdev import status as S
    from mdev.runtime.collectives import cost, select
    from mdev.runtime.core import RUNTIME as rt
    from mdev.runtime.collectives.comm import held as comm_state

    p = acl.rt.get_device_count()[0]
    comms, ret = hccl.comm_init_all(p, list(range(p)))
    if ret:
        raise RuntimeError(f"comm_init_all: {ret} {acl.get_recent_err_msg()}")
    big = max(size_list)
    state: dict = {}
    counted: dict = {}
    # a rank that fails breaks the barriers (their timeout) instead of leaving the bench waiting
    go, done = threading.Barrier(p + 1, timeout=600), threading.Barrier(p + 1, timeout=600)
    rows = []

    def rank(r: int) -> None:
        acl.rt.set_device(r)
        s, _ = acl.rt.create_stream()
        send, _ = acl.rt.malloc(big, 0)
        recv, _ = acl.rt.malloc(big, 0)
        e0, _ = acl.rt.create_event()
        e1, _ = acl.rt.create_event()
        tasks_page = rt.link(r).control.header       # its H_TASKS_DONE counts the device's tasks
        for nbytes in size_list:
            assert _call(hccl, op, send, recv, nbytes, p, comms[r], s) == 0        # warm-up
            assert hccl.barrier(comms[r], s) == 0 and acl.rt.synchronize_stream(s) == 0
            go.wait()
            before = int(tasks_page[S.H_TASKS_DONE])
            acl.rt.record_event(e0, s)
            for _ in range(iters):
                assert _call(hccl, op, send, recv, nbytes, p, comms[r], s) == 0, acl.get_recent_err_msg()
            acl.rt.record_event(e1, s)
            assert acl.rt.synchronize_stream(s) == 0, acl.get_recent_err_msg()
            state[r] = acl.rt.event_elapsed_time(e0, e1)[0] / iters
            counted[r] = int(tasks_page[S.H_TASKS_DONE]) - before - 2       # the event records left out
            done.wait()
        for ptr in (send, recv):
            acl.rt.free(ptr)
        acl.rt.destroy_stream(s)

    threads = [threading.Thread(target=rank, args=(r,), daemon=True) for r in range(p)]
    for t in threads:
        t.start()
    comm = comm_state.comms[comms[0]]
    lay = select.layout(comm.levels, comm.choice, op.replace("_", ""), 0, p)
    topo = rt.attach().topology
    for nbytes in size_list:
        go.wait()
        t0 = time.perf_counter()
        done.wait()
        wall = (time.perf_counter() - t0) / iters
        tasks = sum(counted.values()) / p / iters
        modelled = max(state.values()) / 1e3          # ms -> s
        formula = cost.predict(topo, comm.devices, lay, op, nbytes) / 1e9
        rows.append({"size": nbytes, "wall": wall, "modelled": modelled, "formula": formula,
                     "algorithm": lay.algorithm, "p": p, "tasks": tasks})
    for t in threads:
        t.join()
    for row in rows:
        row["numpy"] = numpy_same_work(op, row["size"], p)
    for c in comms:
        hccl.comm_destroy(c)
    return rows


def print_rows(op: str, topology: str, rows: list[dict]) -> None:
    p = rows[0]["p"]
    factor = BUSBW[op](p)
    print(f"\n== hccl {op} on {topology} ({p} ranks, {rows[0]['algorithm']}); GB/s = 1e9 bytes/s")
    head = ("size", "wall us", "algbw", "busbw", "modelled us", "algbw", "busbw", "formula us", "ratio",
            "numpy us", "wall/numpy", "tasks")
    print("".join(f"{h:>12}" for h in head))
    for r in rows:
        n = r["size"]
        cells = (_bytes(n), f"{r['wall'] * 1e6:.1f}", f"{n / r['wall'] / 1e9:.3f}",
                 f"{n / r['wall'] / 1e9 * factor:.3f}", f"{r['modelled'] * 1e6:.2f}",
                 f"{n / r['modelled'] / 1e9:.2f}", f"{n / r['modelled'] / 1e9 * factor:.2f}",
                 f"{r['formula'] * 1e6:.2f}", f"{r['modelled'] / r['formula']:.3f}", f"{r['numpy'] * 1e6:.1f}",
                 f"{r['wall'] / r['numpy']:.2f}", f"{r['tasks']:.0f}")
        print("".join(f"{c:>12}" for c in cells))


def _bytes(n: int) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def run(op: str, topology: str, size_list: list[int], iters: int) -> list[dict]:
    """Both passes on one board: wall times unmodelled, then modelled times."""
    import mdev.acl as acl
    import mdev.hccl as hccl
    from mdev.runtime.devices.lifecycle import detach

    saved = os.environ.pop("MDEV_MODEL_TIME", None)
    hbm = 2 * max(size_list) + 512 * MiB
    try:
        with dedicated_board(f"hccl-{op}", topology, hbm=hbm):
            acl.init()
            wall = measure(acl, hccl, op, size_list, iters)
            detach()
            os.environ["MDEV_MODEL_TIME"] = "1"       # before attaching: devices keep modelled clocks
            acl.init()
            modelled = measure(acl, hccl, op, size_list, iters)
            acl.finalize()
    finally:
        os.environ.pop("MDEV_MODEL_TIME", None)
        if saved is not None:
            os.environ["MDEV_MODEL_TIME"] = saved
    for w, m in zip(wall, modelled):
        w.update(modelled=m["modelled"])
    return wall


def main(argv: list[str] | None = None) -> list[Result]:
    """The suite's figures (default sizes); with ``argv``, the command line's table only."""
    parser = argparse.ArgumentParser(prog="mdev bench hccl", description=__doc__.split("\n\n")[0])
    parser.add_argument("--op", default="all_reduce", choices=sorted(BUSBW))
    parser.add_argument("-b", "--minbytes", type=size_arg, default=8 << 10)
    parser.add_argument("-e", "--maxbytes", type=size_arg, default=8 << 20)
    parser.add_argument("-f", "--stepfactor", type=int, default=4)
    parser.add_argument("-n", "--iters", type=int, default=5)
    parser.add_argument("--topology", default="hccs8")
    args = parser.parse_args(argv if argv is not None else [])
    from mdev.board import launcher
    from mdev.runtime.collectives.comm import buffsize

    p = launcher.resolve_topology(args.topology).device_count
    os.environ.setdefault("HCCL_BUFFSIZE", "200")     # HCCL's default buffer
    size_list, left_out = fitting(sizes(args.minbytes, args.maxbytes, max(2, args.stepfactor)), p,
                                  buffsize(1 << 62), machine_free())
    if left_out:
        print(f"mdev bench hccl: {left_out}", file=sys.stderr)
    if not size_list:
        sys.exit(1)
    rows = run(args.op, args.topology, size_list, args.iters)
    print_rows(args.op, args.topology, rows)
    last = rows[-1]
    results = [
        Result(f"{args.op} {_bytes(last['size'])} modelled / HCCL formula ({last['algorithm']}, {args.topology})",
               last["modelled"] / last["formula"], "x", target=("value", "<=", 1.10),
               note="within 10% of HCCL's alpha-beta-gamma time (above it: the emulator adds work)"),
        Result(f"{args.op} {_bytes(last['size'])} wall, {last['p']} ranks", last["size"] / last["wall"] / 1e9, "GB/s",
               baseline=last["size"] / last["numpy"] / 1e9, baseline_unit="GB/s",
               baseline_name="numpy, same reduction, 1 thread", ratio=last["numpy"] / last["wall"]),
    ]
    if argv is None:
        print_table("Collectives (mdev.hccl)", results)
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
