"""No exception escapes the API (issue 16, item 12): the hypothesis fuzz of fuzz_api.py, in
a host process of its own on a board of its own; afterwards every device process lives and
the board's HBM and /dev/shm are back where they started.

``MDEV_FUZZ_EXAMPLES`` sets the number of call sequences (default 1500, about 10k calls)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from helpers import extra_board, shm_entries, wait_until
from mdev.board import launcher

EXAMPLES = int(os.environ.get("MDEV_FUZZ_EXAMPLES", "1500"))


def test_random_calls_of_every_function_return_codes_and_break_nothing():
    with extra_board("fuzz", devices=2) as name:
        before = launcher.status(name)
        segments = shm_entries(name)
        env = dict(os.environ, MDEV_BOARD=name, MDEV_AUTOSTART="0")
        proc = subprocess.run([sys.executable, "-W", "ignore", str(Path(__file__).with_name("fuzz_api.py")),
                               str(EXAMPLES)], env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-8000:]
        summary = re.search(r"(\d+) calls of (\d+) functions", proc.stdout)
        print(summary.group(0), "(pytest -s shows it: the closing figures of issue 16)")
        calls = int(summary.group(1))
        assert calls >= EXAMPLES
        after = launcher.status(name)
        assert all(a["pid"] == b["pid"] for a, b in zip(after["devices"], before["devices"]) if b.get("pid"))
        assert all(d["state"] == "ok" for d in after["devices"] if d.get("pid")), after["devices"]
        assert wait_until(lambda: [d["hbm_used"] for d in launcher.status(name)["devices"]]
                          == [d["hbm_used"] for d in before["devices"]], timeout=5)
        assert shm_entries(name) == segments
