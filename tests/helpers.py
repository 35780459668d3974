"""Small helpers shared by the foundation tests (not a test module).

    extra_board(...)     start a board with a unique name for one test/module, always stop it
    small_supernode()    an A3 supernode board of 2 servers x 2 devices (cloudmatrix384 cut down)
    attached(...)        mdev.acl attached to a given board (like the ``acl`` fixture)
    to_device / from_device   host numpy data <-> device memory through acl.rt.memcpy
    wait_until(pred)     poll a condition with a deadline
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time

import numpy as np

import mdev.acl  # noqa: F401  first: importing mdev.memory.address before mdev.acl is circular
from conftest import PREFIX, _attach
from mdev.board import launcher
from mdev.naming import BoardPaths
from mdev.topology import loader

MiB, GiB = 1 << 20, 1 << 30


def shm_entries(name: str) -> list[str]:
    """This user's entries of board ``name`` in /dev/shm right now, of every start of it
    (another user's are not the board's: tests plant some)."""
    prefix = BoardPaths(name).board_prefix
    return [e for e in os.listdir("/dev/shm") if e.startswith(prefix) and _mine(f"/dev/shm/{e}")]


def _mine(path: str) -> bool:
    try:
        return os.lstat(path).st_uid == os.getuid()
    except FileNotFoundError:
        return False


@contextlib.contextmanager
def extra_board(suffix: str, preset: str = "laptop2", hbm: int = 64 * MiB, devices: int | None = None,
                eager: bool = False, topo=None):
    """A board of its own, named ``PREFIX + suffix`` (of ``topo`` if given, else of the
    preset); stopped (and checked clean) on exit."""
    name = PREFIX + suffix
    topo = topo or launcher.resolve_topology(preset, devices=devices, hbm=hbm)
    launcher.start(name, topo, owner_pid=os.getpid(), eager=eager)      # gone with us if the run dies
    try:
        yield name
    finally:
        launcher.stop(name)
        assert shm_entries(name) == [], f"board {name} left {shm_entries(name)} in /dev/shm"


def small_supernode(nodes: int = 2, devices: int = 2, hbm: int = 64 * MiB):
    """cloudmatrix384 cut down: ``nodes`` servers of ``devices`` A3 dies each, on one UB fabric."""
    d = launcher.resolve_topology("cloudmatrix384").to_dict()
    cluster = d.pop("cluster")
    server = loader.resized(loader.from_dict(d, "cloudmatrix384 server"), devices=devices, hbm_bytes=hbm).to_dict()
    return loader.from_dict({**server, "cluster": {**cluster, "nodes": nodes}}, "small supernode")


@contextlib.contextmanager
def attached(monkeypatch, name: str):
    """mdev.acl attached to board ``name``; everything released on exit."""
    gen = _attach(monkeypatch, name)
    acl = next(gen)
    try:
        yield acl
    finally:
        next(gen, None)


def to_device(acl, ptr: int, data: np.ndarray) -> None:
    data = np.ascontiguousarray(data)
    ret = acl.rt.memcpy(ptr, data.nbytes, acl.util.numpy_to_ptr(data), data.nbytes,
                        acl.ACL_MEMCPY_HOST_TO_DEVICE)
    assert ret == acl.ACL_SUCCESS, acl.get_recent_err_msg()


def from_device(acl, ptr: int, nbytes: int, dtype=np.uint8) -> np.ndarray:
    out = np.empty(nbytes, np.uint8)
    ret = acl.rt.memcpy(acl.util.numpy_to_ptr(out), nbytes, ptr, nbytes, acl.ACL_MEMCPY_DEVICE_TO_HOST)
    assert ret == acl.ACL_SUCCESS, acl.get_recent_err_msg()
    return out.view(dtype)


def kill(pid: int) -> None:
    """SIGKILL ``pid`` and return once the kernel says it has exited (its pidfd readable):
    a device process has several threads, and its main thread is a zombie while the others
    still exit -- the runtime sees the death when the process has exited, not before."""
    pidfd = os.pidfd_open(pid)
    try:
        os.kill(pid, signal.SIGKILL)
        death = select.poll()
        death.register(pidfd, select.POLLIN)
        assert death.poll(10_000), f"process {pid} did not exit within 10 s of SIGKILL"
    finally:
        os.close(pidfd)


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def hbm_free(acl) -> int:
    """Free HBM of the calling thread's current device, from aclrtGetMemInfo."""
    free, total, ret = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
    assert ret == acl.ACL_SUCCESS
    return free


def stack_bytes(acl, device: int) -> int:
    """HBM the runtime takes at set_device for the AI Core stacks: the default
    aicore_stack_size (32 KiB) per AI Core (aclInit's StackSize, CANN Runtime API reference)."""
    cores, ret = acl.rt.get_device_info(device, acl.ACL_DEV_ATTR_AICORE_CORE_NUM)
    assert ret == 0
    return 32 * 1024 * cores
