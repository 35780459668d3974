"""Dispatch speed: each figure beside the raw OS primitive it rides on, in the same run.

    small tasks     TASKS ``memset_async`` of 4 bytes on one stream, then one sync, beside
                    64-byte ``os.write`` messages to a pipe that another process reads
    round trip      ``memset_async`` + ``synchronize_stream`` (median), beside a one-byte
                    ping-pong over two pipes between two processes (median)
    kernel blocks   an empty kernel launched with 48 blocks, beside the same with 1 block
    stream churn    ``create_stream`` + ``destroy_stream`` pairs/s, beside the small-task rate
    threads         4 host threads on 4 devices, each TASKS / 4 small tasks then a sync,
                    beside 1 thread on 1 device doing all TASKS (total tasks/s); its note
                    gives the CPU a task cost the host threads and the device processes,
                    and the ceiling that split sets: the host threads share one GIL and
                    every process shares the machine's CPUs, so 4 threads reach at most
                    min(1 / host, CPUs / (host + device)) tasks/s

Targets (issue 21): small tasks >= 0.15 of the pipe message rate; round trip <= 4x the
pipe ping-pong; 48 blocks >= 0.5 of 1 block; stream churn >= 0.25 of the task rate;
4 threads >= 1.5x one thread.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

from bench.common import Result, board_name, check, device_and_stream, latency, print_table
from bench.kernels import _rate

TASKS = 50_000
PIPE_MESSAGES = 200_000
PINGS = 5_000
LAUNCHES = 3_000
CHURN = 10_000
THREADS = 4
TAG = "dispatch"


# ---------------------------------------------------------------------------- raw primitives
def pipe_message_rate(messages: int = PIPE_MESSAGES, size: int = 64) -> float:
    """64-byte ``os.write`` calls per second into a pipe drained by a forked reader, until
    the reader has seen every byte (it answers on a second pipe)."""
    data_r, data_w = os.pipe()
    ack_r, ack_w = os.pipe()
    total = messages * size
    pid = os.fork()
    if pid == 0:        # the reader: count bytes, answer once all arrived
        try:
            os.close(data_w)
            os.close(ack_r)
            seen = 0
            while seen < total:
                chunk = os.read(data_r, 1 << 16)
                if not chunk:
                    break
                seen += len(chunk)
            os.write(ack_w, b"k")
        finally:
            os._exit(0)
    os.close(data_r)
    os.close(ack_w)
    try:
        msg = b"m" * size
        write = os.write
        t0 = time.perf_counter()
        for _ in range(messages):
            write(data_w, msg)
        os.read(ack_r, 1)
        return messages / (time.perf_counter() - t0)
    finally:
        os.close(data_w)
        os.close(ack_r)
        os.waitpid(pid, 0)


def pipe_ping_pong(pings: int = PINGS) -> float:
    """Median seconds of a one-byte ping-pong over two pipes with a forked echo process."""
    to_child_r, to_child_w = os.pipe()
    to_parent_r, to_parent_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(to_child_w)
            os.close(to_parent_r)
            while True:
                b = os.read(to_child_r, 1)
                if not b or b == b"q":
                    break
                os.write(to_parent_w, b)
        finally:
            os._exit(0)
    os.close(to_child_r)
    os.close(to_parent_w)
    try:
        read, write = os.read, os.write
        return latency(lambda: (write(to_child_w, b"p"), read(to_parent_r, 1)), pings, warmup=500)
    finally:
        os.write(to_child_w, b"q")
        os.close(to_child_w)
        os.close(to_parent_r)
        os.waitpid(pid, 0)


# ---------------------------------------------------------------------------- mdev figures
def _task_rate(acl, dev: int, stream: int, tasks: int, repeats: int = 3) -> float:
    """Best tasks/s of ``tasks`` memset_async(4 B) followed by one synchronize_stream."""
    memset_async = acl.rt.memset_async
    best = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        for i in range(tasks):
            memset_async(dev, 4, i & 0xFF, 4, stream)
        check(acl.rt.synchronize_stream(stream), "synchronize_stream")
        best = max(best, tasks / (time.perf_counter() - t0))
    return best


@dataclass
class Threaded:
    """Total tasks/s of one thread per device, and the CPU a task cost each side (us)."""
    rate: float
    host_us: float       # the submitting threads' own CPU time (thread_time)
    device_us: float     # the device processes' CPU time (user + system)

    def ceiling(self, cpus: int) -> float:
        """The most tasks/s this split of work allows: the host threads share one GIL (at
        most one submits at a time), and every host and device process shares ``cpus``."""
        return min(1e6 / self.host_us, cpus * 1e6 / (self.host_us + self.device_us))


def _device_cpu(pids: list[int]) -> float:
    """CPU seconds the processes ``pids`` have used so far."""
    import psutil
    times = [psutil.Process(pid).cpu_times() for pid in pids]
    return sum(t.user + t.system for t in times)


def _threaded_rate(acl, board: str, devices: list[int], tasks: int, repeats: int = 3) -> Threaded:
    """Best total tasks/s of one thread per device of ``board``, each ``tasks`` small tasks then
    a sync (streams and buffers made beforehand; the clock runs from a common start to the last end),
    with the CPU a task cost the host threads and the device processes over every round."""
    from mdev.board import launcher

    setup = []
    for device in devices:
        check(acl.rt.set_device(device), "set_device")
        ctx, ret = acl.rt.get_context()
        check(ret, "get_context")
        stream, ret = acl.rt.create_stream()
        check(ret, "create_stream")
        dev, ret = acl.rt.malloc(4096, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        check(ret, "malloc")
        setup.append((ctx, stream, dev))
    errors: list[str] = []
    host_cpu: list[float] = []
    pids = [d["pid"] for d in launcher.status(board)["devices"] if d["id"] in devices]

    def work(ctx, stream, dev, start: threading.Barrier) -> None:
        if acl.rt.set_context(ctx) != 0:
            errors.append("set_context")
        start.wait()
        t0 = time.thread_time()
        for i in range(tasks):
            acl.rt.memset_async(dev, 4, i & 0xFF, 4, stream)
        if acl.rt.synchronize_stream(stream) != 0:
            errors.append("synchronize_stream")
        host_cpu.append(time.thread_time() - t0)

    def one_round() -> float:
        start = threading.Barrier(len(devices) + 1)
        threads = [threading.Thread(target=work, args=(*s, start)) for s in setup]
        for t in threads:
            t.start()
        start.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        return tasks * len(devices) / (time.perf_counter() - t0)

    one_round()                                  # warms every stream up; neither timed nor counted
    host_cpu.clear()
    device_cpu = _device_cpu(pids)
    best = max(one_round() for _ in range(repeats))
    device_cpu = _device_cpu(pids) - device_cpu
    if errors:
        raise RuntimeError(f"threaded tasks failed: {errors}")
    for (ctx, stream, dev), device in zip(setup, devices):
        check(acl.rt.set_context(ctx), "set_context")
        check(acl.rt.free(dev), "free")
        check(acl.rt.destroy_stream(stream), "destroy_stream")
        check(acl.rt.reset_device(device), "reset_device")
    counted = tasks * len(devices) * repeats
    return Threaded(best, sum(host_cpu) / counted * 1e6, device_cpu / counted * 1e6)


def run() -> list[Result]:
    import mdev.acl as acl

    results: list[Result] = []
    with device_and_stream(TAG, "pcie4", hbm=256 << 20) as (stream, dev, sync, empty):
        _task_rate(acl, dev, stream, 2_000, repeats=1)        # warm-up: the stream's worker

        # ---- small tasks vs pipe messages
        pipe_rate = pipe_message_rate()
        rate = _task_rate(acl, dev, stream, TASKS)
        pipe_rate = max(pipe_rate, pipe_message_rate())       # on both sides of the figure
        results.append(Result(f"{TASKS // 1000}k memset_async(4 B) + 1 sync", rate, "tasks/s",
                              pipe_rate, "msgs/s", "64 B os.write to a pipe, other process",
                              rate / pipe_rate, ("ratio", ">=", 0.15), note="best of 3"))

        # ---- round trip vs pipe ping-pong
        def round_trip():
            acl.rt.memset_async(dev, 4, 0, 4, stream)
            acl.rt.synchronize_stream(stream)
        ping = pipe_ping_pong()
        trip = latency(round_trip, 3_000)
        ping = min(ping, pipe_ping_pong())
        results.append(Result("memset_async + synchronize_stream (median)", trip * 1e6, "us",
                              ping * 1e6, "us", "pipe ping-pong, 2 processes", trip / ping,
                              ("ratio", "<=", 4.0)))

        # ---- kernel blocks
        for blocks in (1, 48):
            for _ in range(200):
                check(empty[blocks, stream](), "launch")
            sync()
        one, _ = _rate(empty[1, stream], sync, LAUNCHES)
        many, _ = _rate(empty[48, stream], sync, LAUNCHES)
        results.append(Result("empty kernel, 48 blocks", many, "launches/s", one, "launches/s",
                              "same kernel, 1 block", many / one, ("ratio", ">=", 0.5),
                              note=f"{(1 / many - 1 / one) / 47 * 1e6:.2f} us per extra block"))

        # ---- stream creation and destruction vs tasks
        def churn() -> float:
            t0 = time.perf_counter()
            for _ in range(CHURN):
                s, r = acl.rt.create_stream()
                check(r, "create_stream")
                check(acl.rt.destroy_stream(s), "destroy_stream")
            return CHURN / (time.perf_counter() - t0)
        churn()
        pairs = max(churn() for _ in range(3))
        results.append(Result("create_stream + destroy_stream", pairs, "pairs/s", rate, "tasks/s",
                              "small tasks above", pairs / rate, ("ratio", ">=", 0.25)))

        check(acl.rt.free(dev), "free")
        check(acl.rt.destroy_stream(stream), "destroy_stream")
        check(acl.rt.reset_device(0), "reset_device")

        # ---- several threads on several devices
        single = _threaded_rate(acl, board_name(TAG), [0], TASKS)
        multi = _threaded_rate(acl, board_name(TAG), list(range(THREADS)), TASKS // THREADS)
        cpus = len(os.sched_getaffinity(0))
        ceiling = multi.ceiling(cpus)
        results.append(Result(f"{THREADS} threads on {THREADS} devices, small tasks", multi.rate, "tasks/s",
                              single.rate, "tasks/s", "1 thread on 1 device", multi.rate / single.rate,
                              ("ratio", ">=", 1.5),
                              note=f"{cpus} CPUs; a task cost {multi.host_us:.1f} us of host CPU and "
                                   f"{multi.device_us:.1f} us of device CPU (one thread: {single.host_us:.1f} "
                                   f"and {single.device_us:.1f}), so one GIL and {cpus} CPUs allow at most "
                                   f"{ceiling:,.0f} tasks/s, {ceiling / single.rate:.2f}x one thread; "
                                   f"reached {multi.rate / ceiling:.2f} of it"))
    return results


def main() -> list[Result]:
    results = run()
    print_table("Dispatch: small tasks, round trips, kernel blocks, stream churn, threads "
                "(each beside its OS primitive)", results)
    return results


if __name__ == "__main__":
    main()
