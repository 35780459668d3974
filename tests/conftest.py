"""Shared fixtures: every test process gets its own boards, and nothing may leak.

    board        a 4-device board (small HBM) for this test process, started once
    acl          mdev.acl attached to ``board``; finalized after each test, so every test
                 starts with no device set, no streams and no allocations
    dev          ``acl`` with device 0 set
    board8       the full 8-device HCCS preset (small HBM), for the few tests that need it
    islands_board  an islands8 board (two HCCS quads joined through the host), per module
    run_py       runs a Python snippet in a separate host process attached to a board
    cann_home    a CANN toolkit tree (mdev cann-home) for the C and C++ tests

Board names start with ``pytest-<pid>-`` so parallel workers (pytest -n 2) never share
one; at the end of the session no /dev/shm segment and no runtime file (socket, key,
lock, log, ...) of those boards may remain.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from mdev.board import launcher
from mdev.naming import BoardPaths, runtime_dir

PREFIX = f"pytest-{os.getpid()}-"
SMALL_HBM = 256 << 20


def _start(name: str, preset: str, devices: int | None = None) -> str:
    topo = launcher.resolve_topology(preset, devices=devices, hbm=SMALL_HBM)
    launcher.start(name, topo, owner_pid=os.getpid())
    return name


@pytest.fixture(scope="session", autouse=True)
def _no_leaks():
    yield
    for name in _started:
        launcher.stop(name)
    leaked = [e for e in os.listdir("/dev/shm") if e.startswith(f"mdev.{os.getuid()}.{PREFIX}")]
    assert not leaked, f"segments left in /dev/shm: {leaked}"
    left = [e for e in os.listdir(runtime_dir()) if e.startswith(PREFIX)]
    assert not left, f"files left in {runtime_dir()}: {left}"


_started: list[str] = []


@pytest.fixture(scope="session")
def board() -> str:
    name = _start(PREFIX + "b4", "pcie4")
    _started.append(name)
    return name


@pytest.fixture(scope="session")
def board8() -> str:
    name = _start(PREFIX + "b8", "hccs8")
    _started.append(name)
    return name


def _attach(monkeypatch, name: str):
    import mdev.acl as acl
    from mdev.runtime.devices.lifecycle import detach
    detach()
    monkeypatch.setenv("MDEV_BOARD", name)
    monkeypatch.setenv("MDEV_AUTOSTART", "0")
    yield acl
    detach()


@pytest.fixture
def acl(board, monkeypatch):
    yield from _attach(monkeypatch, board)


@pytest.fixture
def acl8(board8, monkeypatch):
    yield from _attach(monkeypatch, board8)


@pytest.fixture
def dev(acl):
    assert acl.rt.set_device(0) == acl.ACL_SUCCESS, acl.get_recent_err_msg()
    return acl


@pytest.fixture(scope="module")
def islands_board() -> str:
    name = PREFIX + "isl8"
    launcher.start(name, launcher.resolve_topology("islands8", hbm=SMALL_HBM))
    yield name
    launcher.stop(name)


@pytest.fixture
def run_py():
    """Run ``code`` in a fresh interpreter attached to board ``name``; returns CompletedProcess."""
    def run(code: str, name: str, timeout: float = 60, check: bool = True, env: dict | None = None):
        full_env = dict(os.environ, MDEV_BOARD=name, MDEV_AUTOSTART="0", **(env or {}))
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                              capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"subprocess failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc
    return run


def board_paths(name: str) -> BoardPaths:
    return BoardPaths(name)


@pytest.fixture(scope="session")
def cann_home(tmp_path_factory):
    """A CANN tree built by ``mdev cann-home DIR`` for this test process (C/C++ tests)."""
    home = tmp_path_factory.mktemp("cann")
    proc = subprocess.run([sys.executable, "-m", "mdev.cli.main", "cann-home", str(home)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == str(home.resolve())
    return home.resolve()
