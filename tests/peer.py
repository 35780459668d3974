"""A second host process driven step by step from a test (not a test module).

    with Peer(board) as b:                       # a fresh interpreter attached to ``board``
        b.do("assert acl.rt.set_device(1) == 0")  # run statements there
        pid = b.ev("os.getpid()")                 # evaluate an expression there, get its value
        b.ev("acl.rt.ipc_mem_import_by_key(key, 0)", key=key)   # with values passed in
        b.kill()                                  # SIGKILL it (e.g. to test the board's cleanup)

Each call waits for the peer to finish the step, so the test decides the exact order in
which two processes act (record before wait, import before free, ...).  Values travel as
Python literals (ints, strings, bytes, tuples, lists, dicts).  The peer's stdout and
stderr go to a file whose tail is shown when a step fails.
"""

from __future__ import annotations

import ast
import os
import select
import signal
import subprocess
import sys
import tempfile
import textwrap

SERVER = r'''
import ast, os, sys, traceback
proto = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)                      # whatever the peer prints goes to the log, not the protocol
ns = {"__name__": "__peer__"}
exec(compile(PRELUDE, "<peer prelude>", "exec"), ns)
for line in sys.stdin:
    mode, values, code = ast.literal_eval(line)
    ns.update(values)
    try:
        if mode == "x":
            exec(compile(code, "<peer step>", "exec"), ns)
            out = ("ok", None)
        else:
            out = ("ok", eval(code, ns))
    except BaseException:
        out = ("err", traceback.format_exc())
    text = repr(out)
    try:
        ast.literal_eval(text)
    except Exception:
        text = repr(("ok", repr(out[1])))
    proto.write(text + "\n")
'''

PRELUDE = r'''
import os, sys, time
import numpy as np
import mdev.acl as acl

def ok(ret, what="call"):
    """Assert an aclError is ACL_SUCCESS, with the runtime's message when it is not."""
    assert ret == 0, f"{what} failed: ret={ret} {acl.get_recent_err_msg()}"

def put(ptr, data):
    """Host bytes -> device memory (synchronous H2D copy)."""
    data = np.ascontiguousarray(data)
    ok(acl.rt.memcpy(ptr, data.nbytes, acl.util.numpy_to_ptr(data), data.nbytes, 1), "memcpy H2D")

def get(ptr, nbytes, dtype=np.uint8):
    """Device memory -> host numpy array (synchronous D2H copy)."""
    out = np.empty(nbytes, np.uint8)
    ok(acl.rt.memcpy(acl.util.numpy_to_ptr(out), nbytes, ptr, nbytes, 2), "memcpy D2H")
    return out.view(dtype)
'''


class PeerError(AssertionError):
    pass


class Peer:
    def __init__(self, board: str, env: dict | None = None, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.log = tempfile.NamedTemporaryFile("w+", prefix="mdev-peer-", suffix=".log", delete=False)
        full_env = dict(os.environ, MDEV_BOARD=board, MDEV_AUTOSTART="0", **(env or {}))
        code = f"PRELUDE = {PRELUDE!r}\n" + textwrap.dedent(SERVER)
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, env=full_env, text=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _call(self, mode: str, code: str, values: dict):
        request = repr((mode, values, textwrap.dedent(code).strip()))
        try:
            self.proc.stdin.write(request + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise PeerError(f"peer {self.pid} is gone (exit {self.proc.poll()})\n{self.tail()}") from None
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        if not ready:
            raise PeerError(f"peer {self.pid} did not answer within {self.timeout} s: {code!r}\n{self.tail()}")
        line = self.proc.stdout.readline()
        if not line:
            raise PeerError(f"peer {self.pid} died (exit {self.proc.wait(10)}) running {code!r}\n{self.tail()}")
        status, value = ast.literal_eval(line)
        if status != "ok":
            raise PeerError(f"peer {self.pid} failed running:\n{code}\n{value}\n{self.tail()}")
        return value

    def do(self, code: str, **values) -> None:
        """Run statements in the peer (``values`` become its globals first)."""
        self._call("x", code, values)

    def ev(self, expr: str, **values):
        """Evaluate an expression in the peer and return its value."""
        return self._call("e", expr, values)

    def tail(self, n: int = 3000) -> str:
        self.log.flush()
        with open(self.log.name) as f:
            return "--- peer log ---\n" + f.read()[-n:]

    def kill(self) -> int:
        self.proc.send_signal(signal.SIGKILL)
        return self.proc.wait(30)

    def close(self) -> int:
        """Let the peer exit normally (end of its input); kill it if it does not."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self.proc.stdout.close()
        self.log.close()
        os.unlink(self.log.name)
        return self.proc.returncode

    def __enter__(self) -> "Peer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
