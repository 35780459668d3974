"""hccl_test (HCCL's nccl-tests, Apache-2.0; corpus ``hccl-test``) built unchanged against
``mdev cann-home`` with MPI from the ``mpich`` wheel (the ``test`` extra), run under
``mpirun`` on an 8-device hccs8 board:

    build      its Makefile as published, all 11 binaries, once per session (a copy in tmp)
    run        every binary at 2 and 8 ranks over 8 KiB .. 512 KiB (x8): every row of the
               root's table says ``success`` in check_result (a failing rank prints its own
               row "failed"; an HCCL error prints "hccl interface return err ..." and no table)
    options    -z 1 (zero copy: memory ranges, activated memory), -m 1 (symmetric windows),
               HCCL_TEST_PROFILING=1 (aclprof*: a trace file per rank that mdev trace reads)

Where MPI is: $MDEV_MPI_HOME, else the install's data root (where pip put the wheel's
include/ and lib/), else the folder above the ``mpicc`` on PATH.  Without it, or without
the corpus, the tests skip with one line (fail under CI=true).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import corpora

BINARIES = ("all_gather_test", "all_gatherv_test", "all_reduce_test", "alltoall_test", "alltoallv_test",
            "alltoallvc_test", "broadcast_test", "reduce_scatter_test", "reduce_scatterv_test", "reduce_test",
            "scatter_test")
SWEEP = ("-b", "8K", "-e", "512K", "-f", "8", "-w", "1", "-n", "1")      # 8K, 64K, 512K
ROW = re.compile(r"^\s*(\d+)\s+\|\s+([\d.]+)\s+\|\s+([\d.]+)\s+\|\s+(\w+)\s*$", re.M)


def mpi_home() -> Path | None:
    candidates = [os.environ.get("MDEV_MPI_HOME"), sysconfig.get_paths()["data"]]
    mpicc = shutil.which("mpicc")
    if mpicc:
        candidates.append(str(Path(mpicc).resolve().parent.parent))
    for candidate in candidates:
        if candidate and all((Path(candidate) / part).exists() for part in ("include/mpi.h", "bin/mpirun")):
            return Path(candidate)
    return None


@pytest.fixture(scope="module")
def mpi() -> Path:
    home = mpi_home()
    if home is None:
        why = "MPI not found: pip install mpich (the test extra), or set MDEV_MPI_HOME to a venv that has it"
        if corpora.under_ci():
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    return home


@pytest.fixture(scope="module")
def hccl_test(cann_home, mpi, tmp_path_factory) -> Path:
    """The folder of the 11 binaries, built by hccl_test's own Makefile."""
    source = corpora.require("hccl-test") / "src" / "hccl_test"
    work = tmp_path_factory.mktemp("hccl-test") / "hccl_test"
    shutil.copytree(source, work)
    proc = subprocess.run(["make", "-j2", f"ASCEND_DIR={cann_home}", f"MPI_HOME={mpi}"], cwd=work,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert sorted(p.name for p in (work / "bin").iterdir()) == sorted(BINARIES)
    return work


def run_env(cann_home: Path, mpi: Path, board: str, **extra: str) -> dict:
    env = dict(os.environ, MDEV_BOARD=board, MDEV_AUTOSTART="0", ASCEND_HOME_PATH=str(cann_home), **extra)
    env["PATH"] = f"{mpi / 'bin'}:{env.get('PATH', '')}"
    env["LD_LIBRARY_PATH"] = f"{cann_home / 'lib64'}:{mpi / 'lib'}:{env.get('LD_LIBRARY_PATH', '')}"
    return env


def mpirun(work: Path, env: dict, ranks: int, binary: str, *args: str) -> str:
    """The output of ``mpirun -n ranks bin/binary args``; one that hangs is killed with its
    whole process group (mpirun's proxies and ranks, which leave MPI's /dev/shm files else)."""
    proc = subprocess.Popen([str(Path(env["PATH"].split(":")[0]) / "mpirun"), "-n", str(ranks),
                             str(work / "bin" / binary), *args], cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        return proc.communicate(timeout=240)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        partial = proc.communicate(timeout=30)[0]
        raise AssertionError(f"{binary} on {ranks} ranks did not finish in 240 s:\n{partial[-4000:]}") from None


def check_rows(out: str, sizes: int = 3) -> list[tuple]:
    """The root's table: ``sizes`` rows, every one ``success``."""
    rows = ROW.findall(out)
    assert len(rows) == sizes and all(row[3] == "success" for row in rows), out[-4000:]
    assert "return err" not in out and "failed" not in out, out[-4000:]
    return rows


@pytest.mark.parametrize("ranks", [2, 8])
@pytest.mark.parametrize("binary", BINARIES)
def test_hccl_test_binary(hccl_test, cann_home, mpi, board8, binary, ranks):
    check_rows(mpirun(hccl_test, run_env(cann_home, mpi, board8), ranks, binary, *SWEEP))


@pytest.mark.parametrize("option", [("-z", "1"), ("-m", "1")], ids=["zero-copy", "symmetric-memory"])
def test_hccl_test_memory_options(hccl_test, cann_home, mpi, board8, option):
    """-z: HcclCommSetMemoryRange / ActivateCommMemory on VMM memory; -m: HcclCommInitRootInfoConfig
    with hcclSymWinMaxMemSizePerRank and HcclCommSymWinRegister / Deregister."""
    check_rows(mpirun(hccl_test, run_env(cann_home, mpi, board8), 2, "all_reduce_test", *SWEEP, *option))


def test_hccl_test_profiling(hccl_test, cann_home, mpi, board8, tmp_path):
    """HCCL_TEST_PROFILING=1: aclprofInit / CreateConfig / Start ... Stop / Finalize write a
    timeline trace per rank, with the collectives' tasks, that ``mdev trace summary`` reads."""
    out = mpirun(hccl_test, run_env(cann_home, mpi, board8, HCCL_TEST_PROFILING="1",
                                    HCCL_TEST_PROFILING_PATH=str(tmp_path)), 2, "all_reduce_test", *SWEEP)
    check_rows(out)
    traces = sorted(tmp_path.glob("mdev_trace_*.json"))
    assert len(traces) == 2, out
    for path in traces:
        data = json.loads(path.read_text())
        kinds = {e["args"]["kind"] for e in data["traceEvents"] if e.get("cat") == "task"}
        assert "coll_run" in kinds, kinds             # each rank's all_reduce, whole (one task)
        assert [c[4] for c in data["mdev"]["collectives"]].count("all_reduce") >= 3
        summary = subprocess.run([sys.executable, "-m", "mdev.cli.main", "trace", "summary", str(path)],
                                 capture_output=True, text=True, timeout=120)
        assert summary.returncode == 0 and "all_reduce" in summary.stdout, summary.stdout + summary.stderr
