"""What a fresh clone on another machine needs: no absolute path of a particular machine
anywhere in the repository, and external corpora (tests/corpora.py) found relatively or through
their variable; missing, their tests skip with one reason line, or fail under CI."""

from __future__ import annotations

import os
import re

import pytest

import corpora
from corpora import ROOT

# a home or work folder of some machine; the patterns are built so as not to match themselves
MACHINE_PATH = re.compile(r"(?<![\w.~$/-])/(?:" + "|".join([
    "wor" + "k/",
    "roo" + "t/",
    r"(?:hom" + r"e|User" + r"s)/[A-Za-z_][\w.-]*/",
]) + ")")

SKIP_DIRS = {"__pycache__", "build", "dist"}     # and hidden files and folders (.git, .venv, ...) but .ci


def repository_files() -> list:
    files = []
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")
                   and (not d.startswith(".") or d == ".ci")]
        files += [os.path.join(folder, n) for n in names if not n.startswith(".")]
    return files


def test_no_absolute_machine_paths():
    hits = []
    for path in repository_files():
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue                     # not text
        for number, line in enumerate(text.splitlines(), 1):
            if MACHINE_PATH.search(line):
                hits.append(f"{os.path.relpath(path, ROOT)}:{number}: {line.strip()[:120]}")
    assert not hits, "absolute paths of a machine:\n" + "\n".join(hits)


# folders of the development machine's shared/ that the repository does not hold
UNSHIPPED = re.compile(r"(?<![\w/.-])(?:spe" + r"c|see" + r"d|resear" + r"ch)/[\w.-]+\.md")


def test_sources_cited_are_in_the_repository_or_public():
    """Topology presets and docs cite public documents, not notes of a folder a clone lacks."""
    hits = []
    for path in repository_files():
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except (UnicodeDecodeError, OSError):
            continue
        hits += [f"{os.path.relpath(path, ROOT)}:{n}: {line.strip()[:120]}" for n, line in enumerate(lines, 1)
                 if UNSHIPPED.search(line) and not (ROOT / UNSHIPPED.search(line).group()).exists()]
    assert not hits, "cites files that are not in the repository:\n" + "\n".join(hits)


def test_the_pattern_finds_machine_paths():
    for text in ("x = '/" + "work/shared/x'", "see /" + "root/.cache", "/" + "home/alice/src", '"/' + "Users/bob/a"):
        assert MACHINE_PATH.search(text), text
    # the negatives are built too: a checker of the repository reads them as paths otherwise
    for text in ("https://github.com/org/" + "work/x", "$HOME/src", "/" + "tmp/example", "~/" + "work/x",
                 "/" + "dev/shm/mdev.1"):
        assert not MACHINE_PATH.search(text), text


def test_a_corpus_is_found_through_its_variable_or_beside_the_checkout(tmp_path, monkeypatch):
    checkout = tmp_path / "worktrees" / "mdev"
    monkeypatch.setattr(corpora, "ROOT", checkout)
    monkeypatch.delenv("MDEV_HCCL_EXAMPLES", raising=False)
    assert corpora.find("hccl-examples") is None
    beside_parent = tmp_path / "shared" / "hccl-examples"
    (beside_parent / "examples").mkdir(parents=True)
    assert corpora.find("hccl-examples") == beside_parent
    beside = tmp_path / "worktrees" / "shared" / "hccl-examples"
    (beside / "examples").mkdir(parents=True)
    assert corpora.find("hccl-examples") == beside
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "examples").mkdir(parents=True)
    monkeypatch.setenv("MDEV_HCCL_EXAMPLES", str(elsewhere))
    assert corpora.find("hccl-examples") == elsewhere


@pytest.mark.parametrize("ci", ["", "true"])
def test_a_missing_corpus_skips_with_one_reason_or_fails_under_ci(ci, tmp_path, monkeypatch):
    monkeypatch.setattr(corpora, "ROOT", tmp_path / "a" / "b")
    monkeypatch.delenv("MDEV_CANN_SAMPLES", raising=False)
    monkeypatch.setenv("CI", ci)
    outcome = pytest.fail.Exception if ci else pytest.skip.Exception
    with pytest.raises(outcome) as caught:
        corpora.require("cann-samples")
    reason = str(caught.value)
    assert "\n" not in reason
    assert reason.startswith("cann-samples not found: set MDEV_CANN_SAMPLES to a copy of")
    assert "https://github.com/hicann/runtime" in reason and "681ef7610" in reason
    assert ("under CI a missing corpus is a failure" in reason) == bool(ci)
