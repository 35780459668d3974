"""No exception escapes the API, no bad input is an internal error, no call hangs (issue 16,
item 12; issue 28): the fuzz of fuzz_api.py for each face (acl: ``acl`` and ``acl.rt``;
hccl: ``mdev.hccl``) and seed, in a host process of its own on a board of its own;
afterwards every device process lives and the board's HBM and /dev/shm are back where they
started.

``MDEV_FUZZ_CALLS`` sets the calls per face and seed (default 200000: 10-25 s each on a
loaded 2-core machine), ``MDEV_FUZZ_SEEDS`` the seeds (default "1,2,3")."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import extra_board, shm_entries, wait_until
from mdev.board import launcher

CALLS = int(os.environ.get("MDEV_FUZZ_CALLS", "200000"))
SEEDS = [int(s) for s in os.environ.get("MDEV_FUZZ_SEEDS", "1,2,3").split(",")]


@pytest.fixture(scope="module")
def fuzz_board():
    with extra_board("fuzz", devices=2) as name:
        yield name


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("face", ["acl", "hccl"])
def test_random_calls_return_codes_and_break_nothing(fuzz_board, face, seed):
    name = fuzz_board
    before = launcher.status(name)
    segments = shm_entries(name)
    env = dict(os.environ, MDEV_BOARD=name, MDEV_AUTOSTART="0", HCCL_BUFFSIZE="4", HCCL_CONNECT_TIMEOUT="2")
    proc = subprocess.run([sys.executable, "-W", "ignore", str(Path(__file__).with_name("fuzz_api.py")), face,
                           str(seed), str(CALLS)], env=env, capture_output=True, text=True, timeout=600)
    summary = re.search(r"(\d+) calls of (\d+) functions, (\d+) escapes, (\d+) internal.*", proc.stdout)
    assert proc.returncode == 0 and summary, proc.stdout[-6000:] + proc.stderr[-6000:]      # 3: a hang
    print(summary.group(0), "(pytest -s shows it)")
    assert int(summary.group(1)) >= CALLS and summary.group(3) == summary.group(4) == "0"
    after = launcher.status(name)
    assert all(a["pid"] == b["pid"] for a, b in zip(after["devices"], before["devices"]) if b.get("pid"))
    assert all(d["state"] == "ok" for d in after["devices"] if d.get("pid")), after["devices"]
    assert wait_until(lambda: [d["hbm_used"] for d in launcher.status(name)["devices"]]
                      == [d["hbm_used"] for d in before["devices"]], timeout=5)
    assert shm_entries(name) == segments
