"""External corpora (not a test module): upstream programs the tests build or run against mdev
but the project does not hold (other repositories, other licences).  Where each is found, and
what its tests do when it is missing.

A corpus is found at ``$<its variable>``, else at ``shared/<name>`` beside the checkout or
beside the checkout's parent folder (a git worktree kept in a folder of worktrees).  Missing,
its tests skip with one reason line saying where to get it; under CI (``CI=true``) they
fail instead, so CI can never pass by skipping them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Corpus:
    name: str          # its folder under shared/
    variable: str      # the environment variable that points at it
    marker: str        # a path inside it that must exist
    origin: str        # where it comes from


CORPORA = {c.name: c for c in (
    Corpus("cann-samples", "MDEV_CANN_SAMPLES", "example",
           "the CANN runtime samples: https://github.com/hicann/runtime (also gitcode.com/cann/runtime), "
           "folder example/ at commit 681ef7610"),
    Corpus("hccl-examples", "MDEV_HCCL_EXAMPLES", "examples",
           "HCCL's examples: https://github.com/hicann/hccl, folders examples/01_point_to_point and "
           "examples/02_collectives at commit 09300b70df9a, kept under examples/"),
    Corpus("hccl-test", "MDEV_HCCL_TEST", "src/hccl_test/Makefile",
           "hccl_test (Apache-2.0): https://github.com/hicann/oam-tools, folder src/hccl_test at commit "
           "ea0ce91e3a32, kept under src/hccl_test"),
)}


def under_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1")


def find(name: str) -> Path | None:
    """The corpus's folder, or None."""
    corpus = CORPORA[name]
    candidates = [os.environ.get(corpus.variable)] + [str(base / "shared" / name) for base in ROOT.parents[:2]]
    for candidate in candidates:
        if candidate and (Path(candidate) / corpus.marker).exists():
            return Path(candidate)
    return None


def missing(name: str) -> str:
    """One line: which corpus is missing and how to get it."""
    corpus = CORPORA[name]
    return (f"{name} not found: set {corpus.variable} to a copy of {corpus.origin} "
            f"(or put it at shared/{name} beside the checkout)")


def require(name: str) -> Path:
    """The corpus's folder; missing, the calling test skips (fails under CI)."""
    path = find(name)
    if path is None:
        if under_ci():
            pytest.fail(f"{missing(name)}; under CI a missing corpus is a failure", pytrace=False)
        pytest.skip(missing(name))
    return path
