"""The floor under a whole collective: two ranks meeting as mdev's ``coll_run`` has them meet,
in plain Python with no emulator around it (``python -m bench.meeting``).

    process 0 ----+                                         +---- process 1
                  | count itself in (a word, under an OFD lock of its bytes)
                  | the last in: OUT = a0 + a1, done = n, futex wake
                  | the other: futex wait on done
                  | both: OUT -> its own output
                  +---- next operation (OUT is written again only once both are in)

One shared memfd holds the words, both 1 MiB float32 inputs, OUT and both outputs.  What
it measures (the mean of OPERATIONS) is what a 2-rank 1 MiB all-reduce costs on this
machine before any task machinery -- dispatch, operand checks, completion -- is added;
``mdev bench hccl --topology laptop2 -b 1M -e 1M`` gives the emulator's, and the README's
"Collectives" section sets the two side by side.  Beside it, numpy's add of the two arrays
in this process (best of 50).  No target: it is the floor, not a goal.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct
import time

import numpy as np

from bench.common import MiB, Result, print_table
from mdev.memory import futex

OPERATIONS = 5_000
NBYTES = 1 * MiB
_FLOCK = "hhqqi"          # struct flock: type, whence, start, len, pid


def _tally(fd: int, words: np.ndarray) -> int:
    fcntl.fcntl(fd, fcntl.F_OFD_SETLKW, struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, 8, 0))
    try:
        count = int(words[0]) + 1
        words[0] = count
    finally:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLKW, struct.pack(_FLOCK, fcntl.F_UNLCK, os.SEEK_SET, 0, 8, 0))
    return count


def _rank(r: int, memfd: int, buf: np.ndarray, operations: int) -> float:
    """Seconds per operation of rank ``r``; its own descriptor of the memfd, so that the
    OFD lock excludes the other process (a descriptor shared by fork would not)."""
    fd = os.open(f"/proc/self/fd/{memfd}", os.O_RDWR)
    words, address = buf[:4096].view(np.uint64), buf.ctypes.data + 8
    inputs = [buf[4096 + i * NBYTES:4096 + (i + 1) * NBYTES].view(np.float32) for i in range(2)]
    out_area = buf[4096 + 2 * NBYTES:4096 + 3 * NBYTES].view(np.float32)
    mine = buf[4096 + (3 + r) * NBYTES:4096 + (4 + r) * NBYTES].view(np.float32)
    try:
        start = time.perf_counter()
        for n in range(1, operations + 1):
            if _tally(fd, words) == 2 * n:
                np.add(inputs[0], inputs[1], out=out_area)
                words[1] = n
                futex.wake(address)
            else:
                while int(words[1]) < n:
                    futex.wait(address, int(words[1]), 0.05)
            mine[:] = out_area
        return (time.perf_counter() - start) / operations
    finally:
        os.close(fd)


def measure(operations: int = OPERATIONS) -> tuple[float, float]:
    """(seconds per meeting, seconds of numpy's add of the two arrays)."""
    memfd = os.memfd_create("mdev-bench-meeting")
    try:
        size = 4096 + 5 * NBYTES
        os.ftruncate(memfd, size)
        with mmap.mmap(memfd, size) as mapping:
            buf = np.frombuffer(mapping, np.uint8)
            buf[4096:4096 + 2 * NBYTES].view(np.float32)[:] = np.random.default_rng(0).random(NBYTES // 2)
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    _rank(1, memfd, buf, operations)
                    code = 0
                finally:
                    os._exit(code)
            per_op = _rank(0, memfd, buf, operations)
            _, status = os.waitpid(pid, 0)
            if status:
                raise RuntimeError(f"the second rank failed ({status:#x})")
            a, b = buf[4096:4096 + NBYTES].view(np.float32), buf[4096 + NBYTES:4096 + 2 * NBYTES].view(np.float32)
            out = a + b
            for r in range(2):      # a meeting that got the sum wrong measured nothing
                if not np.array_equal(buf[4096 + (3 + r) * NBYTES:4096 + (4 + r) * NBYTES].view(np.float32), out):
                    raise RuntimeError(f"rank {r}'s output is not the sum")
            best = float("inf")
            for _ in range(50):
                t0 = time.perf_counter()
                np.add(a, b, out=out)
                best = min(best, time.perf_counter() - t0)
            del buf, a, b
    finally:
        os.close(memfd)
    return per_op, best


def main() -> list[Result]:
    if not futex.AVAILABLE:
        print("bench.meeting: no futex on this platform; skipped")
        return []
    per_op, add = measure()
    results = [Result("2 processes meet, 1 MiB fp32 all-reduce (plain Python)", per_op * 1e6, "us",
                      baseline=add * 1e6, baseline_unit="us", baseline_name="numpy add of the two",
                      ratio=per_op / add, note="the floor under mdev's 2 x 1M all-reduce (bench.hccl)")]
    print_table("A whole collective's meeting, without the emulator", results)
    return results


if __name__ == "__main__":
    main()
