"""Denial of service by another user (issue 28, section 3), drilled with two real OS users.

Each drill makes two temporary users (useradd, removed by userdel at the end): a victim,
who runs mdev in processes of its own uid, and an attacker, who sees what any user sees
(the names in /dev/shm and /tmp) and takes names first.  Neither is root: root could
remove or open anything, which is not the case to test.

    victim   setpriv --reuid victim ... python -c SCRIPT   (it starts its own board; it and the
             test talk in JSON lines over its stdin and stdout)
    attacker a child forked from this test process that switched to the attacker's uid

The test's Python may live where other users cannot reach it (under root's home), so the
victim keeps one capability, CAP_DAC_READ_SEARCH (read and search any file and
directory): it still cannot write, remove or take another user's files, which is all the
drills are about.  They need root to make users and skip, saying why, where that is
impossible.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from conftest import PREFIX
from mdev import naming
from mdev.memory.segment import Segment

REPO = str(Path(__file__).resolve().parent.parent)
DRILL_TIMEOUT = 90.0
NOBODY = 65534


def _why_no_users() -> str | None:
    if os.getuid() != 0:
        return "making OS users needs root"
    for tool in ("useradd", "userdel", "setpriv"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


needs_users = pytest.mark.skipif(_why_no_users() is not None, reason=str(_why_no_users()))


class User:
    """A temporary OS user with a private home (0700) in /tmp."""

    def __init__(self, login: str) -> None:
        self.login = login
        self.home = Path(tempfile.mkdtemp(prefix=f"mdev-test-{login}-", dir="/tmp"))
        proc = subprocess.run(["useradd", "-M", "-U", "-d", str(self.home), "-s", "/usr/sbin/nologin", login],
                              capture_output=True, text=True, timeout=30)
        if proc.returncode != 0:
            shutil.rmtree(self.home)
            pytest.skip(f"cannot make a user: useradd: {proc.stderr.strip()}")
        entry = pwd.getpwnam(login)
        self.uid, self.gid = entry.pw_uid, entry.pw_gid
        os.chown(self.home, self.uid, self.gid)
        os.chmod(self.home, 0o700)

    def remove(self) -> None:
        """End what runs as this user (all of it started by this test), remove everything of
        it in /dev/shm and /tmp, then the user."""
        for proc in psutil.process_iter(["uids"]):
            if proc.info["uids"] and proc.info["uids"].real == self.uid:
                try:
                    proc.kill()
                except psutil.NoSuchProcess:
                    pass
        psutil.wait_procs([p for p in psutil.process_iter(["uids"])
                           if p.info["uids"] and p.info["uids"].real == self.uid], timeout=10)
        for entry in os.listdir("/dev/shm"):
            path = f"/dev/shm/{entry}"
            try:
                if os.lstat(path).st_uid == self.uid:
                    shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.unlink(path)
            except FileNotFoundError:
                pass
        shutil.rmtree(f"/tmp/mdev-{self.uid}", ignore_errors=True)
        shutil.rmtree(self.home, ignore_errors=True)
        subprocess.run(["userdel", self.login], capture_output=True, timeout=30)

    def shm_entries(self, prefix: str) -> list[str]:
        """This user's /dev/shm entries whose names start with ``prefix``."""
        found = []
        for entry in os.listdir("/dev/shm"):
            try:
                if entry.startswith(prefix) and os.lstat(f"/dev/shm/{entry}").st_uid == self.uid:
                    found.append(entry)
            except FileNotFoundError:
                pass
        return sorted(found)


@pytest.fixture
def users():
    """(victim, attacker): two fresh users, gone after the test."""
    tag = f"{os.getpid() % 100000}{int(time.monotonic() * 1000) % 1000}"
    made = []
    try:
        made.append(User(f"mdv{tag}v"))
        made.append(User(f"mdv{tag}a"))
        yield made[0], made[1]
    finally:
        for user in made:
            user.remove()


class Victim:
    """A Python process of the victim user running ``script`` (stdin/stdout: JSON lines)."""

    def __init__(self, user: User, script: str, env: dict) -> None:
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("MDEV_", "XDG_"))}
        env = dict(clean, PYTHONPATH=REPO, HOME=str(user.home), **env)
        self.proc = subprocess.Popen(
            ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups",
             "--inh-caps=-all,+dac_read_search", "--ambient-caps=+dac_read_search", "--",
             sys.executable, "-c", textwrap.dedent(script)],
            env=env, cwd=str(user.home), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        self.deadline = time.monotonic() + DRILL_TIMEOUT

    def read(self) -> dict:
        """The victim's next JSON line (AssertionError with its stderr if it ended first)."""
        import select
        while True:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                self.proc.kill()
                raise AssertionError(f"victim silent for {DRILL_TIMEOUT} s: {self.proc.stderr.read()}")
            line = self.proc.stdout.readline()
            if not line:
                self.proc.wait(10)
                raise AssertionError(f"victim ended ({self.proc.returncode}): {self.proc.stderr.read()}")
            if line.startswith("{"):
                return json.loads(line)

    def go(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self) -> str:
        """Its exit; returns its stderr."""
        try:
            _, err = self.proc.communicate(timeout=max(1.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("victim did not finish in time")
        assert self.proc.returncode == 0, err
        return err


# What every victim script starts with: its own board, on a small preset, gone with it.
VICTIM = """
    import json, os, sys
    import numpy as np
    import mdev.acl as acl
    from mdev.board import launcher
    from mdev.naming import BoardPaths

    NAME = os.environ["MDEV_BOARD"]

    def say(**what):
        print(json.dumps(what), flush=True)

    def wait_for_go():
        assert sys.stdin.readline().strip() == "go"

    def round_trip(device):
        if acl.rt.set_device(device) != 0:
            return acl.get_recent_err_msg()
        p, ret = acl.rt.malloc(4096, 0)
        if ret != 0:
            return acl.get_recent_err_msg()
        a = np.arange(4096, dtype=np.uint8); b = np.zeros(4096, np.uint8)
        rets = (acl.rt.memcpy(p, 4096, acl.util.numpy_to_ptr(a), 4096, 1),
                acl.rt.memcpy(acl.util.numpy_to_ptr(b), 4096, p, 4096, 2), acl.rt.free(p))
        return "ok" if rets == (0, 0, 0) and (a == b).all() else f"{rets} {acl.get_recent_err_msg()}"

    def own_segments():
        prefix = BoardPaths(NAME).board_prefix
        return sorted(e for e in os.listdir("/dev/shm")
                      if e.startswith(prefix) and os.lstat("/dev/shm/" + e).st_uid == os.getuid())

    launcher.start(NAME, launcher.resolve_topology("laptop2", hbm=64 << 20), owner_pid=os.getpid())
"""


def _attack(uid: int, gid: int, job, args: tuple, ready, result) -> None:
    """Child side of ``attacker``: become the user, then run ``job``."""
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    result.put(job(*args, ready))


def attacker(user: User, job, *args) -> tuple[multiprocessing.Process, multiprocessing.Event, multiprocessing.Queue]:
    """Run ``job(*args, ready)`` in a child forked from here as ``user``; it sets ``ready``
    once it is in position and puts what it did into the queue."""
    ctx = multiprocessing.get_context("fork")
    ready, result = ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=_attack, args=(user.uid, user.gid, job, args, ready, result), daemon=True)
    proc.start()
    return proc, ready, result


def _take(path: str) -> bool:
    """Create ``path`` exclusively, as shm_open(O_CREAT | O_EXCL) does; readable by all."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644))
        return True
    except OSError:
        return False


def _squat_when_freed(names: list[str], seconds: float, ready) -> list[str]:
    """Take each of ``names`` the moment it is gone from /dev/shm (for ``seconds``)."""
    todo = [f"/dev/shm/{n}" for n in names]
    taken = []
    ready.set()
    deadline = time.monotonic() + seconds
    while todo and time.monotonic() < deadline:
        for path in list(todo):
            if _take(path):
                todo.remove(path)
                taken.append(os.path.basename(path))
    return taken


def _squat_next(seen: list[str], count: int, ready) -> list[str]:
    """Take the names that follow each of ``seen``: its last part counted on (decimal, or
    hexadecimal of the same width)."""
    taken = []
    for name in seen:
        head, _, last = name.rpartition(".")
        if last.isdigit():
            nexts = [str(int(last) + k) for k in range(1, count + 1)]
        else:
            nexts = [f"{int(last, 16) + k:0{len(last)}x}" for k in range(1, count + 1)]
        taken += [f"{head}.{n}" for n in nexts if _take(f"/dev/shm/{head}.{n}")]
    ready.set()
    return taken


def _squat_dir(path: str, ready) -> list[str]:
    os.mkdir(path, 0o700)
    with open(os.path.join(path, "default.key"), "w") as f:
        f.write("00ff")
    os.chmod(os.path.join(path, "default.key"), 0o600)
    ready.set()
    return [path]


def _attacked(proc, ready, result, timeout: float = 30.0) -> list[str]:
    proc.join(timeout)
    assert proc.exitcode == 0, f"attacker failed ({proc.exitcode})"
    return result.get(timeout=5)


@needs_users
def test_a_device_restart_takes_no_name_another_user_can_squat(users):
    """Device 0 of the victim's board dies; an attacker watching /dev/shm takes the names of
    its segments the moment the restart unlinks them.  The restart still works (the new
    process names its segments afresh), and the victim's ``mdev board stop`` removes all of
    its own segments and files, says what another user left under its names, and leaves
    those alone."""
    victim, attacker_user = users
    name = PREFIX + "du-restart"
    script = VICTIM + """
    import signal, subprocess, time, psutil
    assert acl.rt.set_device(0) == 0
    pid = launcher.status(NAME)["devices"][0]["pid"]
    say(device0=pid, segments=own_segments())
    wait_for_go()
    os.kill(pid, signal.SIGKILL)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 10:          # dead: a zombie, or reaped by the supervisor
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.01)
    reset = acl.rt.reset_device_force(0)
    msg = acl.get_recent_err_msg()
    state = [d["state"] for d in launcher.status(NAME)["devices"]]
    trip = [round_trip(0), round_trip(1)]
    acl.rt.reset_device(0); acl.rt.reset_device(1); acl.finalize()
    stop = subprocess.run([sys.executable, "-m", "mdev", "board", "stop", "--name", NAME],
                          capture_output=True, text=True, timeout=30)
    left = own_segments()
    files = sorted(e for e in os.listdir(BoardPaths(NAME).dir) if e.startswith(NAME))
    say(reset=reset, msg=msg, state=state, trip=trip, stop=stop.stdout + stop.stderr, left=left, files=files)
    """
    run = Victim(victim, script, {"MDEV_BOARD": name, "MDEV_AUTOSTART": "0",
                                  "MDEV_RUNTIME_DIR": str(victim.home / "rt")})
    first = run.read()
    device0 = [s for s in first["segments"] if ".hbm0" in s or ".ctl0" in s]
    assert len(device0) == 2, first
    attack = attacker(attacker_user, _squat_when_freed, device0, 20.0)
    assert attack[1].wait(10)
    run.go()
    out = run.read()
    run.finish()
    squatted = _attacked(*attack)
    assert out["reset"] == 0, out["msg"]
    assert out["state"] == ["ok", "ok"] and out["trip"] == ["ok", "ok"], out
    assert sorted(squatted) == sorted(device0)          # the attacker did take the old names
    assert attacker_user.shm_entries(f"mdev.{victim.uid}.{name}.") == sorted(device0)    # left alone
    assert out["left"] == [] and out["files"] == [], out
    assert "stopped" in out["stop"] and all(f"/dev/shm/{n} was made by another user (uid {attacker_user.uid})"
                                            in out["stop"] for n in device0), out["stop"]


@needs_users
def test_pinned_buffer_names_cannot_be_taken_first(users):
    """The attacker sees the victim's first pinned segment and takes the names that would
    follow it; then it takes the very name the victim's next draw will give (the test fixes
    that draw).  Every malloc_host of the victim still succeeds, none with a traceback."""
    victim, attacker_user = users
    name = PREFIX + "du-pin"
    script = VICTIM + """
    from mdev import naming
    assert acl.rt.set_device(0) == 0
    first, ret = acl.rt.malloc_host(4096)
    assert ret == 0
    say(segments=[s for s in own_segments() if ".pin." in s], prefix=BoardPaths(NAME).pinned_prefix(os.getpid()))
    wait_for_go()
    rets, held = [], [first]
    for _ in range(20):
        p, ret = acl.rt.malloc_host(4096)
        rets.append(ret)
        held.append(p)
    # the next draw is a name the attacker holds: the collision is drawn again
    draws = iter(["ab" * 8])
    real = naming.fresh_tag
    naming.fresh_tag = lambda: next(draws, None) or real()
    p, ret = acl.rt.malloc_host(4096)
    rets.append(ret)
    held.append(p)
    naming.fresh_tag = real
    pins = [s for s in own_segments() if ".pin." in s]
    frees = [acl.rt.free_host(p) for p in held if p]
    acl.rt.reset_device(0); acl.finalize()
    launcher.stop(NAME)
    say(rets=rets, pins=pins, frees=frees, left=own_segments())
    """
    run = Victim(victim, script, {"MDEV_BOARD": name, "MDEV_AUTOSTART": "0",
                                  "MDEV_RUNTIME_DIR": str(victim.home / "rt")})
    first = run.read()
    assert len(first["segments"]) == 1, first
    fixed = first["prefix"].lstrip("/") + "ab" * 8
    attack = attacker(attacker_user, _squat_next, first["segments"], 40)
    assert attack[1].wait(10)
    assert _take_as(attacker_user, f"/dev/shm/{fixed}")
    run.go()
    out = run.read()
    err = run.finish()
    squatted = _attacked(*attack)
    assert len(squatted) == 40
    assert out["rets"] == [0] * 21 and "Traceback" not in err, (out, err)
    assert len(out["pins"]) == 22 and fixed not in out["pins"] and not set(squatted) & set(out["pins"]), out
    assert out["frees"] == [0] * 22 and out["left"] == [], out
    assert attacker_user.shm_entries(fixed) == [fixed]          # never opened nor removed


def _take_as(user: User, path: str) -> bool:
    proc, ready, result = attacker(user, lambda p, ready: _take(p), path)
    return _attacked(proc, ready, result)


@needs_users
def test_a_runtime_directory_taken_by_another_user_has_a_way_around(users):
    """The attacker makes the victim's default runtime directory (/tmp/mdev-<uid>) first,
    with a secret in it.  It is refused, never used: the victim's board files go to a
    private directory under its home instead, and mdev says where."""
    victim, attacker_user = users
    name = PREFIX + "du-dir"
    squat = f"/tmp/mdev-{victim.uid}"
    proc, ready, result = attacker(attacker_user, _squat_dir, squat)
    assert _attacked(proc, ready, result) == [squat]
    script = VICTIM + """
    say(trip=round_trip(0), dir=str(BoardPaths(NAME).dir))
    acl.rt.reset_device(0); acl.finalize()
    launcher.stop(NAME)
    """
    run = Victim(victim, script, {"MDEV_BOARD": name, "MDEV_AUTOSTART": "0"})
    out = run.read()
    err = run.finish()
    fallback = victim.home / ".cache" / "mdev"
    assert out["trip"] == "ok", (out, err)
    assert out["dir"].startswith(str(fallback)), out
    assert f"{squat} is not private to uid {victim.uid}" in err and f"board files go to {out['dir']}" in err, err
    assert sorted(os.listdir(squat)) == ["default.key"]            # nothing of the victim's there
    assert [e for e in os.listdir(out["dir"]) if e.startswith(name)] == []


@pytest.mark.skipif(os.getuid() != 0, reason="planting a segment of another user needs root")
def test_a_taken_name_is_drawn_again_and_left_alone(monkeypatch):
    """naming.create_fresh, what every segment of a board or host is made through: a name
    another user (uid 65534) holds is passed over for a new draw, never opened or removed."""
    owner = NOBODY
    squatted = f"/mdev-test-squat-{os.getpid()}-{'ab' * 8}"
    fd = os.open(f"/dev/shm{squatted}", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o666)
    os.close(fd)
    try:
        os.chown(f"/dev/shm{squatted}", owner, owner)
        draws = iter(["ab" * 8, "cd" * 8])
        monkeypatch.setattr(naming, "fresh_tag", lambda: next(draws))
        seg = naming.create_fresh(lambda tag: Segment(f"/mdev-test-squat-{os.getpid()}-{tag}", 4096, create=True),
                                  "test segment")
        try:
            assert seg.name.endswith("cd" * 8)
        finally:
            seg.close()
            seg.unlink()
        assert os.stat(f"/dev/shm{squatted}").st_uid == owner
        with pytest.raises(PermissionError, match="another user's segment"):
            Segment(squatted)                      # never mapped, even where its mode allows
    finally:
        os.unlink(f"/dev/shm{squatted}")


def test_a_name_made_again_after_an_unlink_is_never_reached_through_the_old_segment():
    """Once a segment is unlinked anyone may make a file of its name (its names are public):
    what re-opens a segment by name (a kernel's write cut-off, host registration, backing
    pages) must not reach that file.  Here the file is the test's own, with a mark in it."""
    name = f"/mdev-test-remade-{os.getpid()}"
    seg = Segment(name, 4096, create=True)
    try:
        seg.array[:] = 1
        seg.unlink()
        with open(f"/dev/shm{name}", "wb") as f:
            f.write(b"\xaa" * 4096)
        with pytest.raises(FileNotFoundError, match="another file"):
            seg.reserve(0, 4096)
        seg.detach_writes()             # its readers see nothing of the new file
        assert not (seg.array == 0xAA).any()
    finally:
        seg.close()
        os.unlink(f"/dev/shm{name}")
