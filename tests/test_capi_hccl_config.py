"""torch_npu's HCCL needs from C (tests/c/hccl_config.c, one thread per rank on 3 and 4 devices):
configured communicators, sub-communicators, the capability and settings, AllGatherV, the
group calls found through libhcomm.so's handle and aclprof* through libascendcl.so's."""

from __future__ import annotations

import subprocess

import pytest

from capi_helpers import board_env, compile_c


@pytest.mark.parametrize("ranks", [3, 4])
def test_c_configured_communicators_and_sub_communicators(ranks, board, cann_home, tmp_path):
    binary = compile_c(cann_home, "hccl_config.c", tmp_path / "hccl_config", libs=("ascendcl", "hccl", "dl"))
    proc = subprocess.run([str(binary), str(ranks)], env=board_env(board, HCCL_BUFFSIZE="4", HCCL_EXEC_TIMEOUT="60"),
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    total = ranks * (ranks + 1) // 2
    lines = sorted(line for line in proc.stdout.splitlines() if line.startswith("rankId"))
    assert lines == [f"rankId: {r}, gathered {total}, sub {'yes' if r in (0, 2) else 'no'}" for r in range(ranks)]
    assert "0 failures" in proc.stdout
