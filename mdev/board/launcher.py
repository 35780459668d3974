"""Finding, starting and stopping a board from a host process or the CLI.

Starting runs the supervisor as a detached process (its own session, so the board
outlives the program that started it on demand) and waits until it is ready to serve.
The board's lock (mdev.residence) makes it one supervisor per name: a starter
takes it, clears what a dead predecessor left, and hands it to the supervisor, which
holds it until it exits; a starter that finds it held waits for that board to answer and
never removes anything.  The board description goes by file (``BoardPaths.topology``, in
the private runtime directory): a big board's would not fit a command line, and
attaching hosts read it there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from mdev import protocol
from mdev import residence
from mdev.naming import BoardPaths, read_private
from mdev.memory import address

START_TIMEOUT = 60.0


class BoardError(Exception):
    pass


def resolve_topology(spec: str | None = None, devices: int | None = None, hbm: int | None = None):
    """A Topology from a file path or preset name (default: the 8-device preset), with overrides."""
    from mdev import topology

    topo = topology.resolve(spec or os.environ.get("MDEV_TOPOLOGY") or None)
    if devices is not None or hbm is not None:
        topo = topology.resized(topo, devices=devices, hbm_bytes=hbm)
    return topo


def read_key(paths: BoardPaths) -> bytes:
    """The board secret, trusted only from this user's own 0600 file."""
    try:
        return bytes.fromhex(read_private(paths.key).strip())
    except (OSError, ValueError) as exc:
        raise BoardError(f"{not_running(paths)} (no secret at {paths.key})") from exc


def connect(paths: BoardPaths, command: str = "") -> protocol.Channel:
    """An authenticated channel to the supervisor of a running board."""
    try:
        return protocol.connect(paths.socket, read_key(paths), ("hello", os.getpid(), command))
    except (OSError, EOFError) as exc:
        raise BoardError(f"{not_running(paths)} ({exc})") from exc


def not_running(paths: BoardPaths) -> str:
    """Why board ``paths`` gives no answer, decided by its lock."""
    if residence.held(paths):
        return (f"board {paths.name!r} is running but does not answer (supervisor pid "
                f"{residence.holder(paths)} stalled, or still starting)")
    left = residence.leftovers(paths)
    if left:
        return (f"board {paths.name!r} is dead (its supervisor is gone; {len(left)} segments and "
                "files left, which `mdev board stop` or the next start removes)")
    return f"board {paths.name!r} is not running"


def request(channel: protocol.Channel, op: str, *args, timeout: float | None = 30.0):
    channel.send(("r", 0, op, args))
    _, _, code, value = channel.recv(timeout)
    if code:
        raise BoardError(f"supervisor: {op} failed: {value}")
    return value


def is_running(paths: BoardPaths) -> bool:
    """A supervisor of the board lives (it may be stalled: see ``connect``)."""
    return residence.held(paths)


def _answers(paths: BoardPaths) -> bool:
    try:
        channel = connect(paths)
    except BoardError:
        return False
    channel.close()
    return True


def _take_or_find(paths: BoardPaths, timeout: float) -> int | None:
    """The board's lock (a descriptor) if no supervisor holds it, or None once the board
    that holds it answers.  A supervisor that holds it without answering (stalled, or being
    started by another process) is waited for, never replaced."""
    deadline = time.monotonic() + timeout
    while True:
        fd = residence.take(paths)
        if fd is not None:
            return fd
        if _answers(paths):
            return None
        if time.monotonic() > deadline:
            raise BoardError(not_running(paths))
        time.sleep(0.1)


def start(name: str | None = None, topo=None, on_demand: bool = False,
          idle_timeout: float | None = None, owner_pid: int | None = None,
          eager: bool = False) -> tuple[BoardPaths, bool]:
    """Start board ``name`` unless it runs already; returns (paths, started_now).

    With ``owner_pid`` the board stops by itself once that process is gone (test suites:
    an interrupted run leaves no board behind).  A cluster board starts a node's devices
    when a host first attaches to the node, or all of them now with ``eager``."""
    paths = BoardPaths(name)
    topo = topo or resolve_topology()
    _check_size(topo)
    if idle_timeout is None:
        idle_timeout = float(os.environ.get("MDEV_IDLE_TIMEOUT", "5"))
    lock = _take_or_find(paths, START_TIMEOUT)
    if lock is None:
        return paths, False
    try:
        residence.clear(paths)          # a dead board's remains: nobody else holds the lock
        write_topology(paths, topo)
        _run_supervisor(paths, lock, on_demand, idle_timeout, owner_pid, eager)
    except BaseException:
        residence.clear(paths)          # what the failed start made, the supervisor's log too
        residence.release(paths, lock, remove=True)
        raise
    os.close(lock)                      # the supervisor holds it now
    return paths, True


def _run_supervisor(paths: BoardPaths, lock: int, on_demand: bool, idle_timeout: float,
                    owner_pid: int | None, eager: bool) -> None:
    """Run the board's supervisor, handing it the lock, and wait until it serves; BoardError
    with its reason if it does not."""
    python = supervisor_python()
    r, w = os.pipe()
    cmd = [python, "-m", "mdev.board.supervisor", "--name", paths.name,
           "--topology-file", str(paths.topology), "--ready-fd", str(w), "--lock-fd", str(lock),
           "--idle-timeout", str(idle_timeout)]
    if on_demand:
        cmd.append("--on-demand")
    if owner_pid:
        cmd += ["--owner-pid", str(owner_pid)]
    if eager:
        cmd.append("--eager")
    log = os.fdopen(os.open(paths.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                            0o600), "wb")
    try:
        proc = subprocess.Popen(cmd, pass_fds=(w, lock), start_new_session=True,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    except OSError as exc:
        os.close(r)
        raise BoardError(f"board {paths.name!r} failed to start: its supervisor's Python {python!r} "
                         f"cannot run ({exc.strerror}); check MDEV_PYTHON") from exc
    finally:
        log.close()
        os.close(w)
    answer = b""
    try:
        answer = os.read(r, 4096) if _wait_readable(r, START_TIMEOUT) else b""
    finally:
        os.close(r)
        if answer[:1] != b"1":          # whatever went wrong, no supervisor is left running
            proc.kill()
            proc.wait()
    if answer[:1] == b"1":
        return
    why = answer[1:].decode(errors="replace") or _last_line(paths.log) or "no reason given"
    raise BoardError(f"board {paths.name!r} failed to start: {why}")


def supervisor_python() -> str:
    """The interpreter a board's supervisor runs with: ``$MDEV_PYTHON`` (``mdev env`` sets it
    to mdev's own, for programs of another Python environment that start boards on demand),
    else this process's."""
    return os.environ.get("MDEV_PYTHON") or sys.executable


def _last_line(path) -> str:
    """The last line of the supervisor's log (a crash's exception)."""
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""


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
    from mdev import topology

    try:
        text = paths.topology.read_text()
    except OSError as exc:
        raise BoardError(f"board {paths.name!r} is not running (no description at {paths.topology})") from exc
    return topology.from_dict(json.loads(text), f"<board {paths.name}>")


def _wait_readable(fd: int, timeout: float) -> bool:
    import select
    readable, _, _ = select.select([fd], [], [], timeout)
    return bool(readable)


STOPPED, DEAD, NOT_RUNNING = "stopped", "dead", "not running"


def stop(name: str | None = None, timeout: float = 15.0) -> str:
    """Stop board ``name`` and wait until nothing of it is left: STOPPED; DEAD if its
    supervisor was gone and what it left was removed; NOT_RUNNING if there was nothing.
    A supervisor that holds the lock without answering is waited for up to ``timeout``."""
    paths = BoardPaths(name)
    lock = _take_or_find(paths, timeout)
    if lock is not None:
        dead = bool(residence.leftovers(paths))
        residence.clear(paths)
        residence.release(paths, lock, remove=True)
        return DEAD if dead else NOT_RUNNING
    channel = connect(paths)
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
    # it lets go of the lock once everything else of the board is gone
    deadline = time.monotonic() + timeout
    while residence.held(paths):
        if time.monotonic() > deadline:
            raise BoardError(f"board {paths.name!r}: supervisor pid {residence.holder(paths)} did not stop "
                             f"within {timeout} s")
        time.sleep(0.05)
    return STOPPED


def status(name: str | None = None, memory: bool = False) -> dict:
    """The board's status; ``memory``: each attached process's HBM per device too."""
    paths = BoardPaths(name)
    channel = connect(paths)
    try:
        return request(channel, "status", memory) if memory else request(channel, "status")
    finally:
        channel.close()
