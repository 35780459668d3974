"""HCCL's C++ examples (corpus ``hccl-examples``: send/recv, a batched ring, all-reduce,
broadcast, all-gather, reduce-scatter, all-to-all, all-to-all-vc) built by their own
Makefiles against ``mdev cann-home`` and run on an 8-device hccs8 board: the lines they print
("Found 8 NPU device(s) available", "rankId: r, output: [ ... ]") sorted, equal to those of
the sample output in their README_en.md.  (tests/test_capi_headers.py compiles them too.)

The examples sleep ``device`` seconds before printing, so each takes about 8 s; they are
built at once (a module fixture), then run one after another.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

import corpora

LINE = re.compile(r"^(Found \d+ NPU device\(s\) available|rankId: \d+, output: \[[^\]]*\])\s*$", re.M)


def examples() -> list:
    root = corpora.find("hccl-examples")
    if root is None:
        return [pytest.param(None, id="hccl-examples-missing")]
    base = root / "examples"
    return [pytest.param(p.parent.relative_to(base).as_posix(), id=p.parent.name)
            for p in sorted(base.glob("*/*/main.cc"))]


def target(folder) -> str:
    return re.search(r"^TARGET\s*=\s*(\S+)", (folder / "Makefile").read_text(), re.M).group(1)


@pytest.fixture(scope="module")
def built(cann_home, tmp_path_factory):
    """The examples' folder copied and built, every example by its Makefile at once."""
    source = corpora.require("hccl-examples") / "examples"
    work = tmp_path_factory.mktemp("hccl-examples")
    shutil.copytree(source, work / "examples")
    env = dict(os.environ, ASCEND_HOME_PATH=str(cann_home))
    makes = {m.parent: subprocess.Popen(["make"], cwd=m.parent, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
             for m in sorted((work / "examples").glob("*/*/Makefile"))}
    for folder, proc in makes.items():
        out = proc.communicate(timeout=600)[0]
        assert proc.returncode == 0, out[-3000:]
    return work / "examples"


@pytest.mark.parametrize("example", examples())
def test_hccl_example_prints_its_readme_output(built, cann_home, board8, example):
    folder = built / example
    expected = sorted(LINE.findall((folder / "README_en.md").read_text()))
    assert len(expected) >= 5, f"{example}: no sample output found in README_en.md"
    env = dict(os.environ, MDEV_BOARD=board8, MDEV_AUTOSTART="0", HCCL_EXEC_TIMEOUT="60",
               LD_LIBRARY_PATH=f"{cann_home / 'lib64'}:{os.environ.get('LD_LIBRARY_PATH', '')}")
    proc = subprocess.run([str(folder / target(folder))], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=180)
    assert "return err" not in proc.stdout, proc.stdout
    assert sorted(LINE.findall(proc.stdout)) == expected, proc.stdout + proc.stderr
