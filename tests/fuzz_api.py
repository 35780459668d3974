"""Random calls of every public function of a face with hostile arguments, run as a script in
a host process of its own (``python fuzz_api.py FACE SEED CALLS``, FACE ``acl`` -- the
functions of ``acl``, ``acl.rt`` and ``acl.mdl`` -- or ``hccl``) so that the process-wide
settings the calls change (timeouts, limits, modes) touch no other test.  ``acl.util`` is
not fuzzed: as pyACL's, its functions raise for a bad argument.

Each call gets arguments drawn by ``random.Random(SEED)`` from hostile values (wrong types,
negative / huge ints, containers, objects, deep nestings, long strings, damaged root infos
and send/recv items) and live handles of this process (a device allocation, a stream, an
event, a communicator).  Each call must return what the binding documents: an error code,
or a tuple whose last item is one.  Counted as failures:

    escape     an exception out of the API (the value-returning functions, which have no
               error code as in pyACL, may raise TypeError for an argument of the wrong type,
               as pyACL's argument parser does)
    internal   ACL_ERROR_RT_INTERNAL_ERROR (507000, but a stopped stream's) / 500000 /
               507899, or HCCL_E_INTERNAL: bad input must get a parameter error
    hang       a call running longer than HANG_S: the watchdog prints every thread's stack
               and ends the process (status 3)

The script prints ``<calls> calls of <functions> functions, <n> escapes, <n> internal``,
then one line per distinct failure (function, kind, first message), and exits 1 if any.
"""

from __future__ import annotations

import faulthandler
import inspect
import json
import os
import random
import reprlib
import shutil
import sys
import tempfile
import threading
import time

import mdev.acl as acl
import mdev.hccl as hccl

HANG_S = 20.0
# Calls that would end the process's use of the board, or block without a time limit on
# work a random sequence can leave waiting for ever (a wait on an event never recorded).
EXCLUDED = {"finalize", "finalize_reference", "process_report", "synchronize_device", "synchronize_stream",
            "synchronize_event", "reset_device", "reset_device_force", "app_log"}
# Value-returning functions (no error code in their result), whose wrong-type argument is a TypeError.
VALUE_FUNCTIONS = {"data_type_size", "float16_to_float", "float_to_float16", "get_soc_name", "get_recent_err_msg",
                   "get_version", "comm_config_init"}
ENDS = ("free", "destroy", "release", "unmap", "unregister", "comm_destroy", "set_device", "set_context",
        "set_current_context", "create_context", "stream_abort", "stream_stop")
PINNING = {"malloc_host", "malloc_host_with_cfg"}      # page-locked: a size they grant costs that much RAM
MAX_PINNED = 64 << 20
STRING_FUNCTIONS = {"get_error_string"}       # a string for any argument, as HCCL's
# Calls that make the fuzz's stream wait on something a random sequence may never provide:
# later copies with pageable memory, which drain the stream first, would wait for ever
# (as on real hardware); only hostile arguments reach them.
WAITS = {"value_wait", "stream_wait_event", "stream_wait_event_with_flag", "stream_wait_event_with_timeout",
         "wait_and_reset_notify", "wait_notify", "wait_cnt_notify", "stream_wait_value", "launch_host_func",
         "subscribe_report", "launch_callback"}
ACL_INTERNAL = {500000, 507000, 507899}
HCCL_INTERNAL = {hccl.HCCL_E_INTERNAL}
MAKERS = {"comm_init_all", "comm_init_root_info", "comm_init_cluster_info"}


class _Repr(reprlib.Repr):
    """A bounded description of any argument (an int of 5000 digits has no repr)."""
    def repr_int(self, x: int, level: int) -> str:
        return repr(x) if x.bit_length() < 200 else f"<int of {x.bit_length()} bits>"


_REPR = _Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 300, 300


def _functions(modules) -> dict:
    found = {}
    for module in modules:
        for name in dir(module):
            fn = getattr(module, name)
            if (name.startswith("_") or name in EXCLUDED or not callable(fn) or inspect.isclass(fn)
                    or inspect.ismodule(fn) or not getattr(fn, "__module__", "").startswith(("mdev.acl", "mdev.hccl"))
                    and not hasattr(fn, "__wrapped__")):
                continue
            try:
                params = list(inspect.signature(fn).parameters)
            except (TypeError, ValueError):
                params = ["a", "b", "c"]
            found[f"{module.__name__}.{name}"] = (fn, params)
    return found


def _nested(depth: int):
    value: object = 0
    for _ in range(depth):
        value = [value]
    return value


# files no API may block on or read whole (the fifo is made in the run's directory)
PATHS = ["/dev/zero", "/dev/null", "fifo", ".", "/nonexistent/x", "/proc/self/mem"]
# built once: deep nestings (past the recursion limit too), long strings, an int of 5000 digits
HUGE = [_nested(d) for d in (1, 20, 33, 900, 2999)] + ["y" * 4000, "y" * 9000, 10 ** 5000, -10 ** 5000]


def _root_infos(live_root: bytes) -> list:
    """Root info blobs damaged in the ways a caller (or an attacker) can damage them."""
    magic, size = live_root[:9], hccl.HCCL_ROOT_INFO_BYTES
    board = json.loads(live_root[9:].rstrip(b"\0"))["board"]

    def blob(body: bytes) -> bytes:
        return (magic + body).ljust(size, b"\0")[:size]
    return [
        blob(json.dumps({"board": board, "id": "a" * 4000}).encode()),          # a too long rendezvous id
        blob(b"[" * 2000 + b"]" * 2000),                                         # nested 2000 deep
        blob(json.dumps({"board": board, "id": _nested(900)}).encode()),
        blob(json.dumps({"board": _nested(900), "id": "ab"}).encode()),
        blob(json.dumps([board, "ab"]).encode()), blob(b"\xff\xfe"), blob(json.dumps({"board": board}).encode()),
        blob(json.dumps({"board": board, "id": "../../x"}).encode()), blob(json.dumps({"board": board, "id": 7}).encode()),
        blob(json.dumps({"board": board, "id": ""}).encode()), live_root[:100], live_root + b"x",
    ]


def _items() -> list:
    """batch_send_recv item lists: fields missing, extra, of the wrong type."""
    good = {"sendRecvType": 0, "buf": 0, "count": 0, "dataType": 3, "remoteRank": 0}
    return [[{k: v for k, v in good.items() if k != drop}] for drop in good] + [
        [good], [dict(good, extra=1)], [(0, 0, 0)], [(0, 0, 0, 3, 0, 9)], [1], [None], ["abcde"], [[good]],
        [{1: 2}], [dict(good, count="x")], [dict(good, sendRecvType=[1])], [dict(good, remoteRank=2**70)],
    ]


class Fuzz:
    def __init__(self, face: str, seed: int) -> None:
        self.face, self.random = face, random.Random(seed)
        self.functions = _functions((acl, acl.rt, acl.mdl) if face == "acl" else (hccl,))
        self.names = sorted(self.functions)
        self.live: list = []
        self.special: list = []
        self.made: list = []           # ints the latest successful calls returned (handles, pointers)
        self.calls = self.escapes = self.internal = 0
        self.failures: dict[tuple[str, str], str] = {}
        self.current: tuple | None = None
        self.started = time.monotonic()

    def setup(self) -> None:
        assert acl.init() == 0 and acl.rt.set_device(0) == 0
        ptr, _ = acl.rt.malloc(4096, 0)
        stream, _ = acl.rt.create_stream()
        event, _ = acl.rt.create_event()
        self.live = [ptr, stream, event]
        if self.face == "hccl":
            comms, ret = hccl.comm_init_all(1, [0])
            assert ret == 0, ret
            self.comm = comms[0]
            root, ret = hccl.get_root_info()
            assert ret == 0, ret
            self.live += [self.comm, root]
            self.special = _root_infos(root) + _items() + [_nested(2000), "x" * 5000, {"a": _nested(50)}]

    def plausible(self, param: str):
        """A value that fits parameter ``param`` of a face, by its name: calls get past the
        first checks and reach the deeper ones."""
        r, ptr, stream, event = self.random, *self.live[:3]
        if param in ("comm",):
            return self.comm
        if "stream" in param:
            return r.choice([stream, 0])
        if "event" in param:
            return event
        if param in ("nranks", "ndev"):
            return 1 if param == "nranks" else r.choice([1, 2])   # a communicator of 1 is made at once
        if param == "devices":
            return r.choice([[0], [0, 1], [1]])
        if param in ("root_info_blob",):
            return r.choice(self.special[:12] + [self.live[4]])
        if param == "send_recv_info":
            return r.choice(self.special[12:])
        if param.endswith(("counts", "displs", "_list", "pids", "dsts", "srcs", "sizes", "maxs", "labels",
                           "notifies")):
            return [r.randrange(0, 64) for _ in range(r.randrange(3))]
        if param in ("cluster_info", "config_path", "bin_path", "path"):
            return r.choice(PATHS)
        if param.endswith(("ptr", "buf", "dst", "src", "addr")) or param in ("data", "p_host", "desc"):
            return ptr
        if param.endswith(("size", "size_", "count", "num", "len", "max", "width", "height", "pitch", "length")):
            return r.choice([0, 1, 4, 16, 64, 256, 1024, 4096])
        if param.endswith(("id", "rank", "root", "device")):
            return r.randrange(0, 3)
        if "timeout" in param:
            return r.choice([1, 10, 100])
        if self.made and r.random() < 0.5:
            return r.choice(self.made)           # a handle of its kind, maybe
        return r.randrange(0, 16)

    def value(self):
        r = self.random
        pick = r.randrange(17 if self.special else 16)
        if pick < 3:
            return r.randrange(-2**65, 2**65)
        if pick < 6:
            return r.choice([-1, 0, 1, 2, 3, 7, 4096, 1 << 40, 1 << 48, 2**63, 2**64])
        if pick < 9:
            return r.choice(self.live if pick < 8 or not self.made else self.made)
        if pick == 9:
            return r.choice([None, True, False, float("nan"), float("inf"), -0.5, 1.5, 1e300])
        if pick == 10:
            if r.random() < 0.2:
                return r.choice(PATHS)
            return "".join(r.choice("ab/.\0\u00e9 1") for _ in range(r.randrange(5)))
        if pick == 11:
            return bytes(r.randrange(256) for _ in range(r.randrange(17)))
        if pick == 12:
            return r.choice([[1], {}, (1, 2), [0, 0], {"a": 1}, object(), [None], range(3), b"", bytearray(8)])
        if pick == 13:
            return [self.value() for _ in range(r.randrange(4))]
        if pick == 14:
            return r.choice(HUGE)
        if pick == 15:
            return r.randrange(0, 64)
        return r.choice(self.special)

    def call(self) -> None:
        name = self.random.choice(self.names)
        fn, params = self.functions[name]
        short = name.rsplit(".", 1)[1]
        if self.random.random() < 0.5 and short not in WAITS and not short.startswith(ENDS):
            # near-valid: a few arguments spoilt (the fuzz's own handles are never ended)
            args = [self.value() if self.random.random() < 0.25 else self.plausible(p) for p in params]
        else:
            args = [self.value() for _ in params]
        if short == "comm_destroy" and args and args[0] == getattr(self, "comm", None):
            return                  # the fuzz's own communicator stays
        if "timeout" in params and type(args[params.index("timeout")]) is int \
                and not 0 <= args[params.index("timeout")] <= 1000:
            return      # a wait without a (short) time limit, on work a random sequence may block for ever
        if short in PINNING and args and type(args[0]) is int and args[0] > MAX_PINNED:
            return                  # granted if /dev/shm has room, and resident: not on a shared machine
        acl.get_recent_err_msg()
        self.calls += 1
        self.current = (name, time.monotonic(), args)
        try:
            result = fn(*args)
        except TypeError as exc:
            if short not in VALUE_FUNCTIONS:
                self._fail(name, "escape", exc, args)
            return
        except BaseException as exc:                                  # noqa: BLE001 (counted, not hidden)
            self._fail(name, "escape", exc, args)
            return
        finally:
            self.current = None
        if short in VALUE_FUNCTIONS:
            return
        if short in STRING_FUNCTIONS:
            if type(result) is not str:
                self._fail(name, "escape", f"returned {_REPR.repr(result)}", args)
            return
        code = result[-1] if isinstance(result, tuple) and result else result
        if type(code) is not int:
            self._fail(name, "escape", f"returned {_REPR.repr(result)}", args)
            return
        if code == 0 and isinstance(result, tuple):      # handles made: later calls use them
            self.made.extend(v for v in result[:-1] if type(v) is int and v)
            del self.made[:-64]
        if short in MAKERS and code == 0:
            for comm in result[0] if isinstance(result[0], list) else [result[0]]:
                hccl.comm_destroy(comm)
        internal = HCCL_INTERNAL if self.face == "hccl" else ACL_INTERNAL
        if code in internal:
            message = acl.get_recent_err_msg() or ""
            if "stopped" not in message:
                self._fail(name, "internal", f"{code}: {message}", args)

    def _fail(self, name: str, kind: str, what, args: list) -> None:
        if kind == "escape":
            self.escapes += 1
        else:
            self.internal += 1
        cause = type(what).__name__ if isinstance(what, BaseException) else what.partition("internal error ")[2][:20]
        key = (name, f"{kind} {cause}")
        if key not in self.failures:
            self.failures[key] = f"{_REPR.repr(what)} args {[_REPR.repr(a) for a in args]}"

    def watch(self) -> None:
        """The watchdog: a call longer than HANG_S is a hang."""
        while True:
            time.sleep(1)
            current = self.current
            if current is not None and time.monotonic() - current[1] > HANG_S:
                print(f"HANG: {current[0]}{tuple(_REPR.repr(a) for a in current[2])} ran over {HANG_S} s after "
                      f"{self.calls} calls", flush=True)
                faulthandler.dump_traceback(all_threads=True)
                shutil.rmtree(os.getcwd(), ignore_errors=True)
                os._exit(3)


def main(face: str, seed: int, calls: int) -> int:
    os.chdir(tempfile.mkdtemp(prefix="mdev-fuzz-"))    # files a call writes (a model dump) land here
    os.mkfifo("fifo")
    fuzz = Fuzz(face, seed)
    fuzz.setup()
    threading.Thread(target=fuzz.watch, daemon=True).start()
    while fuzz.calls < calls:
        fuzz.call()
    print(f"{fuzz.calls} calls of {len(fuzz.functions)} functions, {fuzz.escapes} escapes, {fuzz.internal} internal"
          f" (face {face}, seed {seed}, {time.monotonic() - fuzz.started:.1f} s)")
    for (name, kind), what in sorted(fuzz.failures.items()):
        print(f"  {name}: {kind}: {what}")
    sys.stdout.flush()
    shutil.rmtree(os.getcwd(), ignore_errors=True)
    return 1 if fuzz.failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
