"""Security drills: what another local user, or a hostile file, can make mdev do.

Attacks that need a second OS user run the attacker as uid 65534 (``nobody``); they need
root to switch users and skip only when the suite does not run as root.
"""

from __future__ import annotations

import os
import struct
import shutil
import tempfile
import stat
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import pytest

from mdev.board import launcher
from mdev import naming
from mdev.naming import BoardPaths, UnsafeRuntimeDir
from mdev.runtime.core import RUNTIME as rt

NOBODY = 65534
as_root = pytest.mark.skipif(os.getuid() != 0, reason="switching to a second OS user needs root")


def _as_nobody(script: str) -> None:
    subprocess.run(["sh", "-c", script], check=True,
                   preexec_fn=lambda: (os.setgid(NOBODY), os.setuid(NOBODY)))


@pytest.fixture
def shared_tmp():
    """A world-writable sticky directory in /tmp, as /tmp itself is (pytest's tmp_path is
    closed to other users)."""
    shared = Path(tempfile.mkdtemp(prefix="mdev-test-shared-", dir="/tmp"))
    os.chmod(shared, 0o1777)
    yield shared
    shutil.rmtree(shared)


@as_root
def test_a_runtime_directory_made_by_another_user_is_refused(shared_tmp, monkeypatch):
    """The attacker makes the victim's runtime directory first and plants a secret and a
    listening socket in it; the victim's attach refuses the directory (a clear error, code
    507899), and the attacker's socket is never connected to."""
    squat = shared_tmp / "mdev-victim"
    _as_nobody(f"mkdir -m 0700 {squat} && printf 00ff > {squat}/default.key && chmod 600 {squat}/default.key")
    code = textwrap.dedent(f"""
        import json, mdev.acl as acl
        ret = acl.rt.set_device(0)
        print(json.dumps({{"ret": ret, "msg": acl.get_recent_err_msg()}}))
    """)
    env = dict(os.environ, MDEV_RUNTIME_DIR=str(squat), MDEV_BOARD="default")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.strip().splitlines()[-1]
    assert '"ret": 507899' in out and str(squat) in out and "not private" in out, out
    assert sorted(os.listdir(squat)) == ["default.key"]          # nothing started, nothing written there


@as_root
def test_the_default_directory_in_tmp_squatted_by_another_user_is_refused(tmp_path):
    """The attack as reported, on the default path: no MDEV_RUNTIME_DIR, no XDG_RUNTIME_DIR,
    so the victim's directory is /tmp/mdev-<uid>, which the attacker makes first with a
    secret of its own.  The victim is this root process acting as a uid nobody runs here
    (os.getuid answers it), whose home is not its own either: the fallback under it is
    refused too, and the message names both (the fallback that works is drilled with real
    users in test_multiuser.py)."""
    victim = 60000 + os.getpid() % 5000
    squat = Path(f"/tmp/mdev-{victim}")
    _as_nobody(f"mkdir -m 0700 {squat} && printf 00ff > {squat}/default.key && chmod 600 {squat}/default.key")
    code = textwrap.dedent(f"""
        import json, os
        os.getuid = lambda: {victim}
        import mdev.acl as acl
        ret = acl.rt.set_device(0)
        print(json.dumps({{"ret": ret, "msg": acl.get_recent_err_msg()}}))
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("MDEV_RUNTIME_DIR", "XDG_RUNTIME_DIR")}
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                              env=dict(env, MDEV_BOARD="default", MDEV_AUTOSTART="0", HOME=str(tmp_path)))
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout.strip().splitlines()[-1]
        assert '"ret": 507899' in out and str(squat) in out and "not private" in out, out
        assert str(tmp_path / ".cache" / "mdev") in out and "MDEV_RUNTIME_DIR" in out, out
        assert sorted(os.listdir(squat)) == ["default.key"]
    finally:
        shutil.rmtree(squat)


@as_root
def test_a_secret_file_of_another_user_is_never_trusted(tmp_path, monkeypatch):
    """Inside the user's own directory, a key owned by someone else is refused."""
    monkeypatch.setenv("MDEV_RUNTIME_DIR", str(tmp_path / "rt"))
    paths = BoardPaths("planted")
    paths.key.write_text("00ff")
    os.chmod(paths.key, 0o600)
    os.chown(paths.key, NOBODY, NOBODY)
    with pytest.raises(UnsafeRuntimeDir, match="not this user's private file"):
        launcher.read_key(paths)
    with pytest.raises(UnsafeRuntimeDir):
        launcher.connect(paths)


def test_the_runtime_directory_must_be_private(tmp_path, monkeypatch):
    """mdev makes its directory 0700 and refuses one that is open to others, a symlink to
    a directory, or a key file that is not 0600 / is a symlink."""
    made = tmp_path / "made"
    monkeypatch.setenv("MDEV_RUNTIME_DIR", str(made))
    assert naming.runtime_dir() == made and stat.S_IMODE(os.lstat(made).st_mode) == 0o700
    os.chmod(made, 0o755)
    with pytest.raises(UnsafeRuntimeDir, match="mode 0755"):
        naming.runtime_dir()
    os.chmod(made, 0o700)
    link = tmp_path / "link"
    link.symlink_to(made)
    monkeypatch.setenv("MDEV_RUNTIME_DIR", str(link))
    with pytest.raises(UnsafeRuntimeDir, match="a symlink"):
        naming.runtime_dir()
    monkeypatch.setenv("MDEV_RUNTIME_DIR", str(made))
    paths = BoardPaths("loose")
    paths.key.write_text("00ff")
    os.chmod(paths.key, 0o644)
    with pytest.raises(UnsafeRuntimeDir, match="mode 0644"):
        launcher.read_key(paths)
    paths.key.unlink()
    elsewhere = tmp_path / "secret"
    elsewhere.write_text("00ff")
    os.chmod(elsewhere, 0o600)
    paths.key.symlink_to(elsewhere)
    with pytest.raises(OSError):                 # O_NOFOLLOW: ELOOP
        naming.read_private(paths.key)
    with pytest.raises(launcher.BoardError):     # a symlinked key is no key: "not running"
        launcher.read_key(paths)


def test_the_command_line_says_why_it_refuses(tmp_path, monkeypatch):
    open_dir = tmp_path / "open"
    open_dir.mkdir(mode=0o755)
    os.chmod(open_dir, 0o755)
    proc = subprocess.run([sys.executable, "-m", "mdev.cli.main", "board", "status"], capture_output=True, text=True,
                          env=dict(os.environ, MDEV_RUNTIME_DIR=str(open_dir)), timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"runtime directory {open_dir} is not private" in proc.stderr


def test_xdg_runtime_dir_is_preferred_when_it_is_private(tmp_path, monkeypatch):
    monkeypatch.delenv("MDEV_RUNTIME_DIR", raising=False)
    xdg = tmp_path / "xdg"
    xdg.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(xdg))
    assert naming.runtime_dir() == xdg / "mdev"
    os.chmod(xdg, 0o777)                     # not a private session directory: not used
    assert naming.runtime_dir() == Path(f"/tmp/mdev-{os.getuid()}")


# ---------------------------------------------------------------------------- hostile frames
def _frame(obj) -> bytes:
    import pickle
    import struct
    data = pickle.dumps(obj)
    return struct.pack("<I", len(data)) + data


HOSTILE = [("r",), 5, ("t", 1), ("r", 0, 7, ()), ("r", 0, "status", 3), ("hello", 1), ("cbdone",), (),
           # well-shaped messages whose arguments are not what the handler takes
           ("r", 1, "malloc", ("lots", None)), ("r", 1, "ipc_attach", (b"\x00" * 9,)),
           ("r", 1, "no_such_request", ()),
           # tasks get no reply: one naming no stream of the client is dropped, one of the wrong
           # shape closes the connection; either way the device serves on
           ("t", 0, 1, "memset", ("x",)), ("t", 10 ** 9, 1, "copy", (1, 2, 3)), ("t", -1, "1", "kernel", None)]

TASKS = {_frame(m) for m in HOSTILE if type(m) is tuple and len(m) == 5 and m[0] == "t"}

# Where a frame that smuggles a call would leave its mark, were it ever unpickled.
MARK = Path(tempfile.gettempdir()) / f"mdev-test-unpickled-{os.getpid()}"


class _Smuggle:
    """Pickles to a call of ``os.mkdir(MARK)``: what a hostile peer would send."""
    def __reduce__(self):
        return os.mkdir, (str(MARK),)


OBJECTS = {"call-os.mkdir": ("r", 0, "status", (_Smuggle(),)),
           "class-instance": ("r", 0, "status", (Fraction(1, 3),))}


def test_a_frame_decodes_to_plain_data_only():
    """The decoder refuses any frame naming a class or a function, before it runs it."""
    from mdev import protocol
    assert list(protocol.Decoder().feed(_frame(("r", 1, 0, [b"x", {"k": 1.5}, None])))) == \
        [("r", 1, 0, [b"x", {"k": 1.5}, None])]
    for message in OBJECTS.values():
        with pytest.raises(protocol.FrameError, match="data only"):
            list(protocol.Decoder().feed(_frame(message)))
    assert not MARK.exists()


# compact task frames (mdev.protocol.COMPACT): an op code past the table, a memset's code with a
# frame of the wrong size
COMPACT_BAD = [struct.pack("<IBIQ", 13 | 1 << 31, 200, 0, 1),
               struct.pack("<IBIQq", 21 | 1 << 31, 0, 0, 1, 5)]


@pytest.mark.parametrize("frame", [_frame(m) for m in HOSTILE] + [b"\xff\xff\xff\xff" + b"x" * 64,
                                                                   b"\x08\x00\x00\x00garbage!"]
                         + COMPACT_BAD + [_frame(m) for m in OBJECTS.values()],
                         ids=[repr(m) for m in HOSTILE] + ["4GiB-length", "undecodable", "compact-unknown-op",
                                                           "compact-wrong-size"] + list(OBJECTS))
def test_a_malformed_frame_closes_its_connection_and_nothing_else(frame, acl, board):
    """Frames no client sends, after a successful handshake, to the supervisor and to a
    device: each closes the connection it came on; the supervisor and the device keep
    serving everybody else (a full copy round trip afterwards).  A frame that would call
    a function when unpickled is refused unrun."""
    from mdev import protocol
    paths = BoardPaths(board)
    key = launcher.read_key(paths)
    assert acl.rt.set_device(1) == 0          # device 1's process is up
    attached = rt.attach()                    # a device hears only a client id sealed for its pid
    targets = [(paths.socket, ("hello", os.getpid(), "hostile")),
               (paths.device_socket(1), ("hello", attached.client_id, attached.seal, "aux", "hostile"))]
    for path, hello in targets:
        channel = protocol.connect(path, key, hello)
        channel.sock.sendall(frame)
        try:                                 # an error reply, or the connection closed
            reply = channel.recv(timeout=1 if frame in TASKS else 10)
            assert reply[0] == "r" and reply[2] != 0, reply
        except protocol.ChannelClosed:
            pass
        except TimeoutError:                 # silence is a task's answer, never a request's
            assert frame in TASKS
        channel.close()
    assert launcher.status(board)["board"] == board
    ptr, ret = acl.rt.malloc(64, 0)
    assert ret == 0 and acl.rt.memset(ptr, 64, 9, 64) == 0
    host = bytearray(64)
    assert acl.rt.memcpy(acl.util.bytes_to_ptr(host), 64, ptr, 64, 2) == 0 and host == bytes([9]) * 64
    assert acl.rt.free(ptr) == 0 and acl.rt.reset_device(1) == 0
    assert all(d["state"] == "ok" for d in launcher.status(board)["devices"] if d.get("pid"))
    assert not MARK.exists()


# ---------------------------------------------------------------------------- idle clients
def test_idle_unauthenticated_connections_hold_up_no_one(acl, board):
    """Ten connections to the supervisor and ten to a device that never answer the
    challenge: a normal client attaches and does a copy round trip meanwhile, at its usual
    speed (handshakes run beside the serving loop), and the idle ones are closed once the
    handshake time limit has passed."""
    import socket
    import time
    from mdev import protocol
    paths = BoardPaths(board)
    idle = []
    for path in [paths.socket] * 10 + [paths.device_socket(0)] * 10:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        idle.append(sock)
    start = time.monotonic()
    assert acl.rt.set_device(0) == 0
    ptr, ret = acl.rt.malloc(64, 0)
    assert ret == 0 and acl.rt.memset(ptr, 64, 7, 64) == 0
    host = bytearray(64)
    assert acl.rt.memcpy(acl.util.bytes_to_ptr(host), 64, ptr, 64, 2) == 0 and host == bytes([7]) * 64
    elapsed = time.monotonic() - start
    assert acl.rt.free(ptr) == 0 and acl.rt.reset_device(0) == 0
    assert elapsed < 2.0, f"attach and round trip took {elapsed:.1f} s beside idle connections"
    deadline = time.monotonic() + protocol.HANDSHAKE_TIMEOUT + 5
    for sock in idle:
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        while sock.recv(4096):     # the challenge, then the close
            pass
        sock.close()
    assert time.monotonic() < deadline


# ---------------------------------------------------------------------------- both ends prove the secret
def test_a_listener_that_cannot_prove_the_secret_gets_no_message(tmp_path):
    """The handshake is mutual: a listener at the board's socket that takes the host's proof
    (as one that does not check it would) but cannot give its own -- it does not hold the
    secret -- is refused before the host sends anything: no hello reaches it, none of its
    frames is read (here a smuggled call and a well-formed attach reply), and the host's
    set_device says 507899 instead of taking the listener for its board."""
    import socket
    import threading
    from multiprocessing import AuthenticationError
    from multiprocessing.connection import Connection, answer_challenge, deliver_challenge
    from mdev import protocol
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    env = dict(os.environ, MDEV_RUNTIME_DIR=str(runtime), MDEV_BOARD="impostor", MDEV_AUTOSTART="0")
    key = os.urandom(32)
    naming.write_private(runtime / "impostor.key", key.hex())
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(runtime / "impostor.sock"))
    listener.listen(1)
    seen = {}

    def impostor():
        sock, _ = listener.accept()
        conn = Connection(sock.fileno())
        try:
            deliver_challenge(conn, key)              # the host's proof, accepted
            try:
                answer_challenge(conn, os.urandom(32))    # its own: it has no secret to give
                seen["own proof"] = "accepted"
            except AuthenticationError:
                seen["own proof"] = "refused"
            sock.sendall(protocol.encode(OBJECTS["call-os.mkdir"])
                         + protocol.encode(("r", 0, 0, {"client": 1, "seal": "0" * 64})))
            sock.settimeout(10)
            received = b""
            while chunk := sock.recv(4096):
                received += chunk
            seen["after"] = received
        except OSError as exc:
            seen.setdefault("after", b"")
            seen["error"] = repr(exc)
        finally:
            conn._handle = None
            sock.close()

    thread = threading.Thread(target=impostor, daemon=True)
    thread.start()
    code = textwrap.dedent("""
        import json, mdev.acl as acl
        ret = acl.rt.set_device(0)
        print(json.dumps({"ret": ret, "msg": acl.get_recent_err_msg()}))
    """)
    try:
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        thread.join(20)
    finally:
        listener.close()
    assert proc.returncode == 0, proc.stderr
    assert '"ret": 507899' in proc.stdout, proc.stdout
    assert seen.get("own proof") == "refused" and seen.get("after") == b"", seen
    assert not MARK.exists()
    assert sorted(os.listdir(runtime)) == ["impostor.key", "impostor.sock"]     # nothing started there


# ---------------------------------------------------------------------------- a serving loop that fails
SERVE_FAILS = """
    import json, os, sys
    from mdev.board import launcher
    from mdev import residence
    from mdev.naming import BoardPaths
    from mdev.board.supervisor import Supervisor
    paths = BoardPaths(sys.argv[1])
    topo = launcher.resolve_topology("laptop2", hbm=64 << 20)
    lock = residence.take(paths)
    launcher.write_topology(paths, topo)
    sup = Supervisor(paths, topo, lock, on_demand=False, idle_timeout=60.0, owner_pid=os.getpid())
    sup.start()                       # as the supervisor's main(), then its loop breaks
    devices = [proc for _, proc in sup.fleet.running()]
    made = paths.segments()

    def broken():
        raise RuntimeError("the serving loop broke")

    sup._check_clients = broken       # runs once a second inside the loop
    try:
        sup.serve()
        outcome = "returned"
    except RuntimeError as exc:
        outcome = str(exc)
    # still in the supervisor's process: whatever broke its loop, the board is shut down
    print(json.dumps({"outcome": outcome, "devices": len(devices), "made": len(made),
                      "alive": [p.pid for p in devices if p.is_alive()],
                      "segments": paths.segments(), "files": [str(p) for p in paths.files()]}))
"""


def test_a_serving_loop_that_raises_still_shuts_the_board_down():
    """serve() ends in an exception (here a check of its loop raises): the supervisor still
    stops its device processes and removes the board's segments and files before the
    exception leaves it -- no orphan process, nothing left behind, the lock let go."""
    import json
    from conftest import PREFIX
    from helpers import shm_entries
    name = PREFIX + "servefail"
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(SERVE_FAILS), name], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["outcome"] == "the serving loop broke" and seen["devices"] == 2 and seen["made"] == 4, seen
    assert seen["alive"] == [] and seen["segments"] == [] and seen["files"] == [], seen
    assert shm_entries(name) == [] and not [e for e in os.listdir(naming.runtime_dir()) if e.startswith(name + ".")]
    assert not launcher.is_running(BoardPaths(name))
