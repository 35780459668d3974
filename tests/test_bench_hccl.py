"""`mdev bench hccl` checks the memory a sweep needs against what the machine has before any
board starts: it caps the sweep at the largest size that fits, and refuses a sweep of which
nothing fits, saying why (an -e 1G sweep on hccs8 needs about 34 GiB in all).  bench.meeting,
the floor under a 2-rank all-reduce, gives both of its processes the sum."""

from __future__ import annotations

import subprocess
import sys

from bench import hccl as bench_hccl

GiB, MiB = 1 << 30, 1 << 20


def test_a_sweep_is_capped_at_what_the_machine_holds():
    sweep = bench_hccl.sizes(8 << 10, GiB, 2)
    need_1g = bench_hccl.memory_needed(GiB, 8, 200 * MiB)
    assert need_1g == (8 * (2 * GiB + 200 * MiB), 8 * (2 * GiB + 200 * MiB) + 16 * GiB + 8 * 64 * MiB + 512 * MiB)
    fit, why = bench_hccl.fitting(sweep, 8, 200 * MiB, (32 * GiB, 22 * GiB))        # 32 GiB shm, 22 GiB RAM
    assert fit == sweep[:sweep.index(512 * MiB) + 1]
    assert why.startswith("sizes above 512M left out: 1G on 8 ranks needs 17.6 GiB of /dev/shm (32.0 GiB free) "
                          "and 34.6 GiB of memory in all (MemAvailable 22.0 GiB)")
    fit, why = bench_hccl.fitting(sweep, 8, 200 * MiB, (4 * GiB, 64 * GiB))          # /dev/shm the limit
    assert fit[-1] == 128 * MiB and why.startswith("sizes above 128M left out: 256M")
    assert bench_hccl.fitting(sweep, 8, 200 * MiB, (1 << 50, 1 << 50)) == (sweep, "")


def test_a_sweep_that_cannot_fit_is_refused_before_a_board_starts():
    proc = subprocess.run([sys.executable, "-m", "bench.hccl", "--op", "all_reduce", "-b", "4096G", "-e", "4096G",
                           "--topology", "hccs8"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("mdev bench hccl: every size left out: 4096G on 8 ranks needs "), proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_meeting_floor_gives_both_ranks_the_sum():
    """bench.meeting's two processes meet 200 times; both outputs hold the sum (it raises
    otherwise), and the times it reports are real."""
    from bench import meeting
    per_op, add = meeting.measure(200)
    assert 0 < add < per_op < 1.0
