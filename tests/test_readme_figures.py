"""README.md's figures that programs print are generated (docs/regen_readme.py), never typed:
this fails when a generated block no longer says what its program prints."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("regen_readme", ROOT / "docs" / "regen_readme.py")
regen_readme = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(regen_readme)


def test_readme_generated_blocks_match_the_programs():
    proc = subprocess.run([sys.executable, str(ROOT / "docs" / "regen_readme.py"), "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("row, same", [
    ("    wall makespan          67.116 ms                  30.279 ms", "    wall makespan  1.1 ms  2 ms"),
    ("    busiest link           npu0-npu7 (8.0 MiB, 0.2%)  x", "    busiest link  npu0-npu7 (8.0 MiB, 12.5%)  x"),
])
def test_the_check_ignores_only_this_runs_times(row, same):
    assert regen_readme.comparable(row) == regen_readme.comparable(same)
    assert regen_readme.comparable("    tasks traced           7                          11") != \
        regen_readme.comparable("    tasks traced           6                          10")
