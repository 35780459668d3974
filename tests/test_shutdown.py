"""API calls while the interpreter shuts down (issue 18, item 5).

acllite and ascendfly release their resources from ``__del__`` of objects that live until
the interpreter exits: module-level objects of ``__main__`` (freed after ``sys.modules``
was emptied, when nothing can be imported any more and ``open`` has left the builtins) and
singletons kept in a class attribute (freed by the last garbage collection).  Every call
made then returns its code, finalize runs, and the board is left as it was: no attached
process, no HBM in use, no stream.  Each program runs as a process of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import extra_board, wait_until
from mdev.board import launcher

ACLLITE = """
    import numpy as np
    import mdev.acl as acl
    from mdev.kernel import kernel, ptr

    @kernel
    def add_one(ctx, out: ptr):
        ctx.gm(out, np.uint32, 1)[0] += 1

    class Memory:                       # acllite's AclLiteImage: released by itself or by the resource
        def __init__(self, resource, size):
            self.ptr, ret = acl.rt.malloc(size, 0)
            assert ret == 0
            resource.register(self)
        def destroy(self):
            if self.ptr:
                print("free", acl.rt.free(self.ptr), flush=True)
                self.ptr = None
        def __del__(self):
            self.destroy()

    class Resource:                     # acllite's AclLiteResource
        def __init__(self):
            assert acl.init() == 0 and acl.rt.set_device(0) == 0
            self.resources = []
            self.context, _ = acl.rt.create_context(0)
            self.stream, _ = acl.rt.create_stream()
            self.out, _ = acl.rt.malloc(4096, 0)
            acl.rt.memset(self.out, 4096, 0, 4096)
            for _ in range(20):         # still queued when the interpreter exits
                add_one[1, self.stream](self.out)
        def register(self, resource):
            self.resources.append(resource)
        def __del__(self):
            for resource in self.resources:     # what it holds goes first
                resource.destroy()
            print("synchronize_stream", acl.rt.synchronize_stream(self.stream), flush=True)
            print("free", acl.rt.free(self.out), flush=True)
            print("unsupported", acl.mdl.unload(1), acl.op.execute_v2(0), flush=True)
            print("destroy_stream", acl.rt.destroy_stream(self.stream), flush=True)
            print("destroy_context", acl.rt.destroy_context(self.context), flush=True)
            print("reset_device", acl.rt.reset_device(0), flush=True)
            print("finalize", acl.finalize(), flush=True)
            print("after finalize", acl.rt.malloc(64, 0)[1], flush=True)

    resource = Resource()
    image = Memory(resource, 1 << 20)
    print("main done", flush=True)
"""

ASCENDFLY_CONTEXT = """
    import mdev.acl as acl

    class Context:
        \"\"\"ascendfly's resource.Context: one instance, kept by the class.\"\"\"
        def __new__(cls, *args):
            if not hasattr(cls, "_inst"):
                cls._inst = super().__new__(cls)
            return cls._inst

        def __init__(self, devices):
            assert acl.init() == 0
            self.contexts = {}
            for device in devices:
                assert acl.rt.set_device(device) == 0
                self.contexts[device], _ = acl.rt.create_context(device)
            self.buffer, _ = acl.rt.malloc(1 << 20, 0)

        def __del__(self):
            print("free", acl.rt.free(self.buffer), flush=True)
            for device, context in self.contexts.items():
                print("destroy_context", acl.rt.destroy_context(context), flush=True)
                print("reset_device", acl.rt.reset_device(device), flush=True)
            print("finalize", acl.finalize(), flush=True)
"""

ASCENDFLY = """
    from fly.context import Context
    Context([0, 1])
    print("main done", flush=True)
"""


LATE_PRINT = """
    import time
    import mdev.acl as acl
    from mdev.kernel import kernel

    @kernel
    def late_print(ctx):
        time.sleep(1.0)                 # prints once the interpreter is finalising
        ctx.print("late")

    class Resource:
        def __init__(self):
            assert acl.init() == 0 and acl.rt.set_device(0) == 0
            self.stream, _ = acl.rt.create_stream()
            late_print[1, self.stream]()
        def __del__(self):
            start = time.monotonic()
            print("synchronize_stream", acl.rt.synchronize_stream(self.stream), flush=True)
            print("destroy_stream", acl.rt.destroy_stream(self.stream), flush=True)
            print("reset_device", acl.rt.reset_device(0), flush=True)
            print("finalize", acl.finalize(), flush=True)
            print(f"released in {time.monotonic() - start:.1f} s", flush=True)

    resource = Resource()
    print("main done", flush=True)
"""


AFTER_EXIT_FUNCTIONS = """
    import atexit, threading

    def late():                         # registered before mdev's: runs after them
        import numpy as np
        from mdev import ops
        flushers = [t for t in threading.enumerate() if t.name.endswith("-flusher") and t.is_alive()]
        print("flushers", len(flushers), flush=True)
        for k in range(40):             # gathered: no flusher sends them, the synchronisation does
            ops.fill[1, stream](out, float(k), 1024)
        print("synchronize_stream", acl.rt.synchronize_stream(stream), flush=True)
        host = np.empty(1024, np.float32)
        acl.rt.memcpy(acl.util.numpy_to_ptr(host), 4096, out, 4096, 2)
        print("last fill", int(host.min()), int(host.max()), flush=True)
        print("free", acl.rt.free(out), flush=True)
        print("reset_device", acl.rt.reset_device(0), flush=True)
        print("finalize", acl.finalize(), flush=True)

    atexit.register(late)
    import mdev.acl as acl
    from mdev import ops
    assert acl.init() == 0 and acl.rt.set_device(0) == 0
    stream, _ = acl.rt.create_stream()
    out, _ = acl.rt.malloc(4096, 0)
    for k in range(40):                 # a burst: the flusher thread sends it
        ops.fill[1, stream](out, -1.0, 1024)
    print("main done", flush=True)
"""


@pytest.fixture(scope="module")
def shutdown_board():
    with extra_board("shutdown", hbm=128 << 20) as name:
        yield name


def run_program(tmp_path: Path, board: str, source: str, *mdev_run: str) -> subprocess.CompletedProcess:
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(source))
    env = dict(os.environ, MDEV_BOARD=board, MDEV_AUTOSTART="0",
               PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    command = [sys.executable, "-m", "mdev", "run", "--board", board, *mdev_run] if mdev_run else [sys.executable]
    return subprocess.run([*command, str(prog)], env=env, capture_output=True, text=True, timeout=120)


def codes(proc: subprocess.CompletedProcess) -> dict[str, list[str]]:
    """Each printed call -> the codes it printed (in order)."""
    out: dict[str, list[str]] = {}
    for line in proc.stdout.splitlines():
        words = line.split()
        name = " ".join(w for w in words if not w.isdigit())
        out.setdefault(name, []).extend(w for w in words if w.isdigit())
    return out


def assert_clean(board: str) -> None:
    def clean():
        info = launcher.status(board)
        return not info["clients"] and all(d["hbm_used"] == 0 and d["streams"] == 0 for d in info["devices"])
    assert wait_until(clean, timeout=30), launcher.status(board)


def assert_quiet(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, proc.stderr
    for sign in ("Traceback", "Exception ignored", "Error"):
        assert sign not in proc.stderr, proc.stderr


def test_acllite_module_level_objects(tmp_path, shutdown_board):
    proc = run_program(tmp_path, shutdown_board, ACLLITE)
    assert_quiet(proc)
    got = codes(proc)
    assert "main done" in got
    assert got["free"] == ["0", "0"]
    for call in ("synchronize_stream", "destroy_stream", "destroy_context", "reset_device", "finalize"):
        assert got[call] == ["0"], proc.stdout
    assert got["unsupported"] == ["200001", "200001"]
    assert got["after finalize"] != ["0"]
    assert_clean(shutdown_board)


def test_ascendfly_singleton_released_by_the_last_collection(tmp_path, shutdown_board):
    (tmp_path / "fly").mkdir()
    (tmp_path / "fly" / "__init__.py").write_text("")
    (tmp_path / "fly" / "context.py").write_text(textwrap.dedent(ASCENDFLY_CONTEXT))
    proc = run_program(tmp_path, shutdown_board, ASCENDFLY)
    assert_quiet(proc)
    got = codes(proc)
    assert got["free"] == ["0"] and got["finalize"] == ["0"]
    assert got["destroy_context"] == got["reset_device"] == ["0", "0"]
    assert_clean(shutdown_board)


def test_a_device_message_that_comes_while_the_interpreter_finalises_costs_no_wait(tmp_path, shutdown_board):
    """A kernel's print that reaches the program after its atexit functions ran: the reader
    thread (a daemon) can no longer handle it, so the synchronisations in ``__del__`` do not
    wait for it -- each waited out a 10 s timeout (the sanitizer's launch reports made
    test_pyacl_program_under_mdev_run_with_the_sanitizer outlive its 120 s under load)."""
    proc = run_program(tmp_path, shutdown_board, LATE_PRINT)
    assert_quiet(proc)
    got = codes(proc)
    assert got["synchronize_stream"] == got["destroy_stream"] == got["reset_device"] == got["finalize"] == ["0"]
    released = next(line for line in proc.stdout.splitlines() if line.startswith("released in"))
    assert float(released.split()[2]) < 5.0, proc.stdout
    assert_clean(shutdown_board)


def test_flusher_threads_end_with_the_exit_functions(tmp_path, shutdown_board):
    """Each device link's flusher thread (a daemon) ends at exit before the interpreter
    finalises -- stopped dead in the middle of a write it would keep its link's lock, and a
    later call would wait for ever; tasks queued after it go out with the synchronisation."""
    proc = run_program(tmp_path, shutdown_board, AFTER_EXIT_FUNCTIONS)
    assert_quiet(proc)
    got = codes(proc)
    assert got["flushers"] == ["0"], proc.stdout
    assert got["synchronize_stream"] == got["free"] == got["reset_device"] == got["finalize"] == ["0"]
    assert got["last fill"] == ["39", "39"], proc.stdout
    assert_clean(shutdown_board)


def test_pyacl_program_under_mdev_run_with_the_sanitizer(tmp_path, shutdown_board):
    """The same release through ``import acl`` in ``mdev run``, memcheck watching."""
    proc = run_program(tmp_path, shutdown_board, ACLLITE.replace("import mdev.acl as acl", "import acl"),
                       "--sanitize", "memcheck")
    assert_quiet(proc)
    assert codes(proc)["finalize"] == ["0"]
    assert "ERROR SUMMARY: 0 error(s)" in proc.stdout + proc.stderr
    assert_clean(shutdown_board)
