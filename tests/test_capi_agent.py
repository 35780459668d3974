"""The C face's host agent (MDEV_CAPI=agent): the C library never borrows the caller's Python.

    worker.c    a library whose run_worker() joins a pthread calling the API: loaded by a
                Python program through ctypes.PyDLL (the GIL held while joining) it returns;
                through ctypes.CDLL the program then exits normally
    gil_host.cpp  a C++ program embedding Python holds the GIL while joining a std::thread
                that calls the API
    fork.c      the child of fork() has a session of its own; the parent carries on
    linger.c    an exit that goes on after the library's exit function: no "agent is gone"
    lost.c      a device SIGKILLed under the program: 507901 from then on; then the
                supervisor: failures, and a normal exit (no SIGPIPE)
    stale.c     host memory unmapped or made read-only after a first copy: 107000
    register.c  the program's own pages registered (aclrtHostRegister) and unregistered
    async.c     asynchronous calls the agent lets return before it runs them: order (another
                thread's included) and every error code as the synchronous runtime gives it
    drill.c     the C-ABI drill: NULL outputs (18), destroyed and garbage handles, two
                threads synchronising a stream a third destroys
                (these four through the agent and the embedded library alike)
    aclnn_async.c  aclnn runs queued on their executors' grants, GetWorkspaceSize of a known
                signature answered by the C side: they return with the agent stopped; used-up,
                destroyed and NULL executors get the runtime's codes (both ways); a stopped
                stop-on-failure context refuses a run with its failure code
    (Python)    the agent ends with the program; a killed agent fails calls at once
    basic.c     run with another Python environment's PYTHONPATH / PYTHONHOME / VIRTUAL_ENV
                and no board running: the agent starts one and the program works

Every program runs in a subprocess with a timeout: a hang fails the test, it never blocks
the suite.
"""

from __future__ import annotations

import importlib.util
import os
import queue
import signal
import subprocess
import sys
import sysconfig
import textwrap
import threading

import pytest

from capi_helpers import basic_on_demand, board_env, compile_c
from conftest import PREFIX
from helpers import extra_board
from mdev.board import launcher
from test_faults import device_pid, kill

AGENT = {"MDEV_CAPI": "agent"}
AGENT_OF = "mdev.capi import agent; agent.main().* %d "      # pgrep -f: its arguments are root, client pid, library


@pytest.fixture(scope="module")
def agent_board():
    with extra_board("agent", "laptop2") as name:
        yield name


def run(program, board: str, timeout: float = 120, **extra: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(program)], env=board_env(board, **AGENT, **extra), capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


WORKER = """
import ctypes, sys
lib = ctypes.{loader}(sys.argv[1])
print("worker", lib.run_worker(), flush=True)
"""


@pytest.mark.parametrize("loader", ["PyDLL", "CDLL"])
def test_python_program_thread_calls_while_the_gil_is_held(loader, tmp_path, cann_home, agent_board):
    """PyDLL keeps the GIL while run_worker joins its API-calling pthread: the library must
    not need it (it hangs when the library runs Python in the caller).  Through CDLL the
    program must also exit afterwards (it hung at interpreter shutdown)."""
    library = compile_c(cann_home, "worker.c", tmp_path / "libworker.so", "-shared", "-fPIC")
    proc = subprocess.run([sys.executable, "-c", WORKER.format(loader=loader), str(library)],
                          env=board_env(agent_board, **AGENT), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "worker 0" in proc.stdout, proc.stdout + proc.stderr


def test_cpp_program_holding_its_own_gil_while_a_thread_calls(tmp_path, cann_home, agent_board):
    """A C++ program linked with libpython holds its GIL while joining a std::thread that calls
    the API (it hangs when the library runs Python in the caller)."""
    libdir = sysconfig.get_config_var("LIBDIR")
    version = sysconfig.get_config_var("LDVERSION") or sysconfig.get_config_var("VERSION")
    binary = compile_c(cann_home, "gil_host.cpp", tmp_path / "gil_host", f"-I{sysconfig.get_paths()['include']}",
                       f"-L{libdir}", f"-Wl,-rpath,{libdir}", libs=("ascendcl", f"python{version}"))
    assert "gil_host: 0 failures" in run(binary, agent_board, timeout=60).stdout


def test_fork_gives_the_child_its_own_session(tmp_path, cann_home, agent_board):
    out = run(compile_c(cann_home, "fork.c", tmp_path / "fork"), agent_board).stdout
    assert "child: 0 failures" in out and "parent: 0 failures" in out


def test_killed_device_and_supervisor_give_codes_and_a_normal_exit(tmp_path, cann_home):
    binary = compile_c(cann_home, "lost.c", tmp_path / "lost")
    with extra_board("agent-lost", "laptop2") as board:
        proc = subprocess.Popen([str(binary)], env=board_env(board, **AGENT), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().strip() == "ready"
            kill(device_pid(board, 0))
            supervisor = launcher.status(board)["pid"]
            proc.stdin.write("go\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == "again"
            kill(supervisor)
            out, err = proc.communicate("go\n", timeout=60)
        finally:
            proc.kill()
            proc.wait()
        assert proc.returncode == 0, f"exit {proc.returncode} (-{signal.SIGPIPE} is SIGPIPE)\n{out}{err}"
        assert "lost: 0 failures" in out


@pytest.mark.parametrize("mode", ["embedded", "agent"])
@pytest.mark.parametrize("program", ["stale", "register", "async", "drill"])
def test_program_both_ways(program, mode, tmp_path, cann_home, agent_board):
    binary = compile_c(cann_home, f"{program}.c", tmp_path / program)
    env = board_env(agent_board, MDEV_CAPI=mode)
    proc = subprocess.run([str(binary)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and f"{program}: 0 failures" in proc.stdout, proc.stdout + proc.stderr


def test_program_of_another_python_environment_starts_the_board(tmp_path, cann_home):
    """PYTHONPATH, PYTHONHOME and VIRTUAL_ENV of an unrelated environment, no board running:
    the agent runs with mdev's interpreter and starts the board on demand."""
    elsewhere = tmp_path / "venv"
    (elsewhere / "lib").mkdir(parents=True)
    env = dict(os.environ, **AGENT, PYTHONPATH=str(elsewhere / "lib"), PYTHONHOME=str(elsewhere),
               VIRTUAL_ENV=str(elsewhere))
    env.pop("MDEV_PYTHON", None)
    assert "0 failures" in basic_on_demand(cann_home, tmp_path, PREFIX + "agent-venv", env)


def test_agent_leaves_no_process_behind(tmp_path, cann_home, agent_board):
    """The program's exit ends its agent (the lifeline) before exit() returns."""
    code = textwrap.dedent("""
        import ctypes, os, subprocess, sys
        lib = ctypes.CDLL(sys.argv[1])
        count = ctypes.c_uint32()
        assert lib.aclrtGetDeviceCount(ctypes.byref(count)) == 0 and count.value == 2
        mine = subprocess.run(["pgrep", "-f", sys.argv[2] % os.getpid()], capture_output=True, text=True).stdout
        print(os.getpid(), len(mine.split()), flush=True)
    """)
    pattern = AGENT_OF
    proc = subprocess.run([sys.executable, "-c", code, str(cann_home / "lib64" / "libascendcl.so"), pattern],
                          env=board_env(agent_board, **AGENT), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pid, agents_then = map(int, proc.stdout.split())
    assert agents_then == 1
    agents = subprocess.run(["pgrep", "-f", pattern % pid], capture_output=True, text=True)
    assert agents.stdout == "", f"agent of {pid} still running: {agents.stdout}"


def test_exit_that_outlasts_the_agent_is_quiet(tmp_path, cann_home, agent_board):
    """linger.c: the program's exit goes on after the library's let the agent go (C++ static
    destructors do): no "host agent is gone" on stderr, which is for an agent lost mid-run."""
    proc = run(compile_c(cann_home, "linger.c", tmp_path / "linger"), agent_board)
    assert proc.stdout.split()[0] == "0"
    assert "is gone" not in proc.stderr, proc.stderr


def test_killed_agent_fails_calls_at_once(cann_home, agent_board):
    """The agent SIGKILLed: the program's calls return the library's internal error at once."""
    code = textwrap.dedent("""
        import ctypes, os, signal, subprocess, sys, time
        lib = ctypes.CDLL(sys.argv[1])
        count = ctypes.c_uint32()
        assert lib.aclrtGetDeviceCount(ctypes.byref(count)) == 0
        agent = subprocess.run(["pgrep", "-f", sys.argv[2] % os.getpid()], capture_output=True, text=True).stdout
        os.kill(int(agent), signal.SIGKILL)
        time.sleep(0.5)
        start = time.monotonic()
        print(lib.aclrtGetDeviceCount(ctypes.byref(count)), lib.aclrtSetDevice(0), time.monotonic() - start)
    """)
    proc = subprocess.run([sys.executable, "-c", code, str(cann_home / "lib64" / "libascendcl.so"), AGENT_OF],
                          env=board_env(agent_board, **AGENT), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    count_ret, set_ret, seconds = proc.stdout.split()
    assert (int(count_ret), int(set_ret)) == (507000, 507000) and float(seconds) < 5
    assert "host agent" in proc.stderr and "is gone" in proc.stderr


def test_agent_that_cannot_start_leaves_nothing_behind(cann_home, agent_board):
    """MDEV_PYTHON names no interpreter: the calls return the library's internal error, said
    once, and the failed start leaves no descriptor, shared area or address window behind."""
    code = textwrap.dedent("""
        import ctypes, os, sys
        def fds():
            return sorted(os.listdir("/proc/self/fd"))
        def maps():
            return [line for line in open("/proc/self/maps") if "mdev-agent" in line or line.split()[1] == "---p"
                    and int(line.split("-")[1].split()[0], 16) - int(line.split("-")[0], 16) >= 1 << 40]
        lib = ctypes.CDLL(sys.argv[1])
        before, mapped = fds(), maps()
        count = ctypes.c_uint32()
        print(lib.aclrtGetDeviceCount(ctypes.byref(count)), lib.aclrtSetDevice(0))
        print(fds() == before, maps() == mapped, flush=True)
    """)
    env = board_env(agent_board, **AGENT, MDEV_PYTHON="/nonexistent/python")
    proc = subprocess.run([sys.executable, "-c", code, str(cann_home / "lib64" / "libascendcl.so")], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.split() == ["507000", "507000", "True", "True"], proc.stdout + proc.stderr
    assert proc.stderr.count("cannot start the host agent") == 1, proc.stderr


def test_which_calls_keep_the_grants():
    """Operator library calls (a framework makes thousands a second) keep every thread's
    grants; a free or a destroy voids them."""
    from mdev.capi import asynchronous
    for name in ("aclnnAddGetWorkspaceSize", "aclnnAdd", "aclrtMemsetAsync", "aclrtSynchronizeStream"):
        assert asynchronous.harmless(name), name
    for name in ("aclrtFree", "aclrtDestroyStream", "aclrtDestroyEvent", "aclrtResetDevice", "aclDestroyTensor"):
        assert not asynchronous.harmless(name), name


OPERATOR_LIBS = ("ascendcl", "nnopbase", "opapi")


def needs_torch() -> None:
    if importlib.util.find_spec("torch") is None and os.environ.get("CI") != "true":
        pytest.skip("torch is not installed (pip install '.[torch]'): the operator library computes with it")


@pytest.mark.parametrize("failure_mode", ["continue", "stop"])
@pytest.mark.parametrize("mode", ["embedded", "agent"])
def test_aclnn_runs_answer_as_the_runtime(mode, failure_mode, tmp_path, cann_home, agent_board):
    """aclnn_async.c straight through: the sum of queued runs after the synchronisation, and
    used-up, destroyed, repeatable and NULL executors answered as the synchronous runtime does;
    on a stop-on-failure stream, a run on a stream granted before its context stopped is
    refused with the failure code (the C side reads the stream's failure word)."""
    needs_torch()
    binary = compile_c(cann_home, "aclnn_async.c", tmp_path / "aclnn_async", libs=OPERATOR_LIBS)
    proc = subprocess.run([str(binary), "-", failure_mode], env=board_env(agent_board, MDEV_CAPI=mode),
                          capture_output=True, check=False, text=True, timeout=120)
    assert proc.returncode == 0 and "aclnn_async: 0 failures" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize("failure_mode", ["continue", "stop"])
def test_aclnn_runs_return_before_the_agent_runs_them(failure_mode, tmp_path, cann_home, agent_board):
    """With the agent stopped (SIGSTOP) after GetWorkspaceSize made the executors (one on
    another thread), their runs still return ACLNN_SUCCESS: the C side queued them on the
    executor's and the stream's grants; so do GetWorkspaceSize calls of a signature the agent
    checked before and their runs (the C side answers them: mdev.capi.local); once the agent
    goes on, the sum is right.  Also on a stream that stops on failure (torch_npu's do)."""
    needs_torch()
    binary = compile_c(cann_home, "aclnn_async.c", tmp_path / "aclnn_async", libs=OPERATOR_LIBS)
    proc = subprocess.Popen([str(binary), "stopped", failure_mode], env=board_env(agent_board, **AGENT), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    agent = None
    try:
        assert lines.get(timeout=120) == "ready\n"
        found = subprocess.run(["pgrep", "-f", AGENT_OF % proc.pid], capture_output=True, text=True, check=True)
        agent = int(found.stdout)
        os.kill(agent, signal.SIGSTOP)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        try:
            launched = lines.get(timeout=30)
        except queue.Empty:
            launched = "the launches waited for the stopped agent"
        os.kill(agent, signal.SIGCONT)
        agent = None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.wait(timeout=120) == 0 and launched == "launched\n", (launched, proc.stderr.read())
        rest = []
        while not lines.empty():
            rest.append(lines.get())
        assert "aclnn_async: 0 failures\n" in rest, rest
    finally:
        if agent is not None:
            os.kill(agent, signal.SIGCONT)
        proc.kill()
        proc.wait()
