"""Finding, starting and stopping a board from a host process or the CLI.

Starting runs the supervisor as a detached process (its own session, so the board
outlives the program that started it on demand) and waits until it is ready to serve.
A file lock makes concurrent starters of the same board agree on one supervisor.  The
board description goes by file (``BoardPaths.topology``, in the private runtime
directory): a big board's would not fit a command line, and attaching hosts read it there.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager

from mdev import protocol
from mdev.board.naming import BoardPaths, read_private
from mdev.memory import address

START_TIMEOUT = 60.0


class BoardError(Exception):
    pass


def resolve_topology(spec: str | None = None, devices: int | None = None, hbm: int | None = None):
    """A Topology from a file path or preset name (default: the 8-device preset), with overrides."""
    import topology

    topo = topology.resolve(spec or os.environ.get("MDEV_TOPOLOGY") or None)
    if devices is not None or hbm is not None:
        topo = topology.resized(topo, devices=devices, hbm_bytes=hbm)
    return topo


def read_key(paths: BoardPaths) -> bytes:
    """The board secret, trusted only from this user's own 0600 file."""
    try:
        return bytes.fromhex(read_private(paths.key).strip())
    except (OSError, ValueError) as exc:
        raise BoardError(f"board {paths.name!r} is not running (no secret at {paths.key})") from exc


def connect(paths: BoardPaths, command: str = "") -> protocol.Channel:
    """An authenticated channel to the supervisor of a running board."""
    try:
        return protocol.connect(paths.socket, read_key(paths), ("hello", os.getpid(), command))
    except (OSError, EOFError) as exc:
        raise BoardError(f"board {paths.name!r} is not running ({exc})") from exc


def request(channel: protocol.Channel, op: str, *args, timeout: float | None = 30.0):
    channel.send(("r", 0, op, args))
    _, _, code, value = channel.recv(timeout)
    if code:
        raise BoardError(f"supervisor: {op} failed: {value}")
    return value


def is_running(paths: BoardPaths) -> bool:
    try:
        channel = connect(paths)
    except BoardError:
        return False
    channel.close()
    return True


@contextmanager
def _start_lock(paths: BoardPaths):
    fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def start(name: str | None = None, topo=None, on_demand: bool = False,
          idle_timeout: float | None = None, owner_pid: int | None = None,
          eager: bool = False) -> tuple[BoardPaths, bool]:
    """Start board ``name`` unless it runs already; returns (paths, started_now).

    With ``owner_pid`` the board stops by itself once that process is gone (test suites:
    an interrupted run leaves no board behind).  A cluster board starts a node's devices
    when a host first attaches to the node, or all of them now with ``eager``."""
    paths = BoardPaths(name)
    with _start_lock(paths):
        if is_running(paths):
            return paths, False
        topo = topo or resolve_topology()
        _check_size(topo)
        if idle_timeout is None:
            idle_timeout = float(os.environ.get("MDEV_IDLE_TIMEOUT", "5"))
        write_topology(paths, topo)
        r, w = os.pipe()
        cmd = [sys.executable, "-m", "mdev.board.supervisor", "--name", paths.name,
               "--topology-file", str(paths.topology), "--ready-fd", str(w),
               "--idle-timeout", str(idle_timeout)]
        if on_demand:
            cmd.append("--on-demand")
        if owner_pid:
            cmd += ["--owner-pid", str(owner_pid)]
        if eager:
            cmd.append("--eager")
        log = open(paths.log, "ab")
        try:
            proc = subprocess.Popen(cmd, pass_fds=(w,), start_new_session=True,
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        finally:
            log.close()
            os.close(w)
        try:
            ready = _wait_readable(r, START_TIMEOUT) and os.read(r, 1)
        finally:
            os.close(r)
        if not ready:
            proc.kill()
            raise BoardError(f"board {paths.name!r} failed to start; see {paths.log}")
    return paths, True


def _check_size(topo) -> None:
    """What the emulated address space can hold (mdev.memory.address)."""
    if topo.device_count > address.MAX_DEVICES:
        raise BoardError(f"{topo.name}: {topo.device_count} devices; a board holds at most {address.MAX_DEVICES}")
    big = max(d.hbm_bytes for d in topo.devices)
    if big > address.DEVICE_SPAN:
        raise BoardError(f"{topo.name}: {big} bytes of HBM on a device; at most {address.DEVICE_SPAN}")


def write_topology(paths: BoardPaths, topo) -> None:
    """The board description, where the supervisor and attaching hosts read it (0600,
    replaced whole: a reader never sees half a file)."""
    tmp = paths.topology.with_name(f"{paths.topology.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(topo.to_dict(), f)
    os.replace(tmp, paths.topology)


def read_topology(paths: BoardPaths):
    """The Topology a running board was started with."""
    import topology

    try:
        text = paths.topology.read_text()
    except OSError as exc:
        raise BoardError(f"board {paths.name!r} is not running (no description at {paths.topology})") from exc
    return topology.from_dict(json.loads(text), f"<board {paths.name}>")


def _wait_readable(fd: int, timeout: float) -> bool:
    import select
    readable, _, _ = select.select([fd], [], [], timeout)
    return bool(readable)


def stop(name: str | None = None, timeout: float = 15.0) -> bool:
    """Stop a running board and wait until its segments are gone; False if it was not running."""
    paths = BoardPaths(name)
    try:
        channel = connect(paths)
    except BoardError:
        from mdev.board.supervisor import cleanup
        cleanup(paths)   # stale remains of a dead board
        return False
    try:
        request(channel, "stop")
        deadline = time.monotonic() + timeout
        # the supervisor closes our channel once it has shut down
        while time.monotonic() < deadline:
            try:
                channel.recv(timeout=0.2)
            except TimeoutError:
                continue
            except protocol.ChannelClosed:
                break
    finally:
        channel.close()
    deadline = time.monotonic() + timeout
    # the supervisor unlinks segments first, then its files: wait for both
    while (paths.segments() or paths.sockets() or paths.topology.exists()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return True


def status(name: str | None = None) -> dict:
    paths = BoardPaths(name)
    channel = connect(paths)
    try:
        return request(channel, "status")
    finally:
        channel.close()
