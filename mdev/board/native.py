"""Native Ascend C kernels on a device: their images and the kernel runners that run them.

    "load_native" request (an image's bytes) --> a runner loads it (memfd) --> the kernels it
        holds become functions of this device (NativeKernel)
    "native_kernel" task (the "kernel" op's course) --> each pointer argument translated (Launch._raw: the
        allocation it is in, checked as for Python kernels) to a segment, an offset and the
        bytes it reaches --> a runner runs the blocks --> printf text to the launching host,
        a fault or trap -> the vector-core exception (507035, as the CANN samples show it)
    a stop (stream abort, forced destroy, device reset, execute timeout) --> the runner
        running it is killed; the next launch gets a fresh one

A stream's launches are pipelined (Ahead): its worker hands each to the stream's runner and
goes to its next task, the runner runs them in order, and their replies complete them in
batches; any other task of the stream waits until they have ended.

The runner (csrc/kernel_runner.c) is a native process of this device process, compiled with
the system C compiler on first use into a per-user cache.  Device addresses live above 2^48,
which this CPU cannot map, so only pointer arguments are translated: an address a kernel reads
from device memory (a pointer inside a tiling struct) reaches nothing.  Runners are pooled: a
stream with launches out holds one, a launch run the plain way takes one, so stopping one
stream's launches never stops another's.
"""

from __future__ import annotations

import collections
import hashlib
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mdev import errors as E
from mdev.board import sanitize
from mdev.board.block import TIMEOUT_CODES, KernelFault, KernelStopped, Launch
from mdev.board import kernels
from mdev.board.kernels import per_device
from mdev.board.tasktable import TaskFault, op, request
from mdev.errors import AclError
from mdev.kernel import params
from mdev.kernel.api import Kernel

if TYPE_CHECKING:
    from mdev.board.device import Device
    from mdev.board.stream import DeviceStream

CSRC = Path(__file__).resolve().parent / "csrc"
ELF_MAGIC = b"\x7fELF"
REQ_LOAD, REQ_RUN, REQ_UNLOAD = 1, 2, 3
POLL_S = 0.05            # a stop reaches a thread waiting for its runner within this
STOP_GRACE_S = 0.2       # how long a stopped launch may still take to end by itself
READ_AHEAD = 65536       # what one receive of replies asks for
REPLY = struct.Struct("<8I3Q")   # a launch's reply, before its message and printf text
DONE_SKIPPED = 3         # the runner's status for a launch it skipped (Runner.skip)
_build_lock = threading.Lock()
_runner_path: Path | None = None


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = Path(base) / "mdev"
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        if os.access(path, os.W_OK):
            return path
    except OSError:
        pass
    path = Path(tempfile.gettempdir()) / f"mdev-cache-{os.getuid()}"
    path.mkdir(exist_ok=True, mode=0o700)
    return path


def runner_path() -> Path:
    """The kernel runner executable, compiled once per source version."""
    global _runner_path
    with _build_lock:
        if _runner_path is not None:
            return _runner_path
        sources = [CSRC / "kernel_runner.c", CSRC / "mdev_ascendc_abi.h"]
        digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
        path = _cache_dir() / f"mdev-kernel-runner-{digest}"
        if not path.exists():
            cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
            if not cc:
                raise AclError(E.ACL_ERROR_RT_INTERNAL_ERROR, "no C compiler (gcc / cc) to build the kernel runner")
            tmp = path.with_name(f".{path.name}.{os.getpid()}")
            result = subprocess.run([cc, "-std=gnu11", "-O2", "-Wall", "-pthread", f"-I{CSRC}", str(sources[0]),
                                     "-o", str(tmp), "-ldl"], capture_output=True, text=True)
            if result.returncode != 0:
                tmp.unlink(missing_ok=True)
                raise AclError(E.ACL_ERROR_RT_INTERNAL_ERROR, f"cannot build the kernel runner: {result.stderr[-2000:]}")
            os.replace(tmp, path)
        _runner_path = path
        return path


class RunnerDied(Exception):
    pass


class Runner:
    """One kernel runner process and the images it has loaded.  Its socket is non-blocking:
    what the runner wrote is pulled into ``_got`` whenever it is there (replies of launches
    sent ahead pile up in it), and a send that would block pulls meanwhile, so neither side
    can wait on the other with full buffers."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.proc = subprocess.Popen([str(runner_path()), str(theirs.fileno())], pass_fds=[theirs.fileno()],
                                         stdin=subprocess.DEVNULL, close_fds=True)
        finally:
            theirs.close()
        self.sock = ours
        self.sock.setblocking(False)
        self._poll = select.poll()
        self._poll.register(ours, select.POLLIN)
        self.loaded: set[int] = set()
        self.skipping = False     # told to skip the launches it has not started: retired after them
        self._got = bytearray()   # bytes the runner wrote, not parsed yet

    def send(self, kind: int, payload: bytes, fds: list[int] = ()) -> None:
        header = struct.pack("<II", kind, len(payload))
        if not fds:
            return self.send_requests(header + payload)
        try:
            self._wait_writable()
            socket.send_fds(self.sock, [header], list(fds))
        except OSError as exc:
            raise RunnerDied(f"the kernel runner is gone ({exc})") from None
        self.send_requests(payload)

    def send_requests(self, requests: bytes) -> None:
        """Bytes of whole requests (several at once: one wake-up of the runner for them)."""
        data = memoryview(requests)
        try:
            while data:
                try:
                    data = data[self.sock.send(data):]
                except BlockingIOError:
                    self._wait_writable()
        except OSError as exc:
            raise RunnerDied(f"the kernel runner is gone ({exc})") from None

    def _wait_writable(self) -> None:
        """Until the socket takes more, pulling the runner's replies (it may wait to write them)."""
        poll = select.poll()
        poll.register(self.sock, select.POLLIN | select.POLLOUT)
        while not any(ev & select.POLLOUT for _, ev in poll.poll(POLL_S * 1000)):
            self.pull(0)

    def pull(self, wait_s: float) -> bool:
        """Take in what the runner wrote, waiting up to ``wait_s`` for it; False if nothing came."""
        if wait_s and not self._poll.poll(wait_s * 1000):
            return False
        try:
            chunk = self.sock.recv(READ_AHEAD)
        except BlockingIOError:
            return False
        except OSError as exc:
            raise RunnerDied(f"the kernel runner is gone ({exc})") from None
        if not chunk:
            code = self.proc.poll()
            raise RunnerDied(f"the kernel runner ended (exit status {code})")
        self._got += chunk       # kept at once: a stop may interrupt, finish() reads on
        return True

    def _take(self, n: int) -> bytes:
        got = bytes(self._got[:n])
        del self._got[:n]
        return got

    def reply(self) -> tuple[int, bytes]:
        """The reply of a load or unload, waiting in POLL_S steps (a stop interrupts between them)."""
        while len(self._got) < 8 or len(self._got) < 8 + struct.unpack_from("<I", self._got, 4)[0]:
            self.pull(POLL_S)
        status, length = struct.unpack("<II", self._take(8))
        return status, self._take(length)

    def load(self, image: "Image") -> None:
        if image.id in self.loaded:
            return
        fd = os.memfd_create(f"mdev-image-{image.id}", os.MFD_CLOEXEC)
        try:
            os.write(fd, image.data)
            self.send(REQ_LOAD, struct.pack("<I", image.id), [fd])
        finally:
            os.close(fd)
        status, text = self.reply()
        if status:
            raise AclError(E.ACL_ERROR_INVALID_PARAM, f"cannot load {image.filename}: {text.decode(errors='replace')}")
        self.loaded.add(image.id)
        image.kernels = [(name, int(n), int(mask)) for name, n, mask in
                         (line.split("\t") for line in text.decode(errors="replace").splitlines())]

    def finish(self, grace_s: float) -> tuple | None:
        """The reply of the launch running, if it comes within ``grace_s``; None if not."""
        deadline = time.monotonic() + grace_s
        while (reply := self.launch_reply()) is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                self.pull(min(left, POLL_S))
            except RunnerDied:
                return None
        return reply

    def run(self, image: "Image", index: int, blocks: int, slots: list[int], maps: list) -> tuple:
        self.load(image)
        self.send_requests(run_request(image, index, blocks, slots, maps))
        while (reply := self.launch_reply()) is None:
            self.pull(POLL_S)
        return reply

    def launch_reply(self) -> tuple | None:
        """The next launch reply if all of it is in: (status, block, ns, message, printf text,
        cut, (bad address, bytes), when it ended (time.monotonic)); None if not yet."""
        got = self._got
        if len(got) < REPLY.size:
            return None
        status, block, lo, hi, mlen, olen, cut, _, bad, bad_bytes, ended = REPLY.unpack_from(got)
        end = REPLY.size + mlen + olen
        if len(got) < end:
            return None
        message = got[REPLY.size:REPLY.size + mlen].decode(errors="replace") if mlen else ""
        output = got[REPLY.size + mlen:end].decode(errors="replace") if olen else ""
        del got[:end]
        return status, block, lo | hi << 32, message, output, bool(cut), (bad, bad_bytes), ended / 1e9

    def unload(self, image_id: int) -> None:
        self.send(REQ_UNLOAD, struct.pack("<I", image_id))
        self.reply()
        self.loaded.discard(image_id)

    def skip(self) -> None:
        """Skip the launches behind the one running, or else the next (SIGUSR1): each is
        answered DONE_SKIPPED.  Before its first reply (a load's) the runner may not handle
        the signal yet, and it has no launch to skip."""
        if not self.skipping:
            self.skipping = True
            if not self.loaded:
                return
            try:
                self.proc.send_signal(signal.SIGUSR1)
            except OSError:
                pass

    def kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass
        self.proc.wait()
        self.sock.close()


def run_request(image: "Image", index: int, blocks: int, slots: list[int], maps: list) -> bytes:
    """A launch as the runner reads it: kernel, blocks, argument slots, pointer translations."""
    payload = [struct.pack("<5I", image.id, index, blocks, len(slots), len(maps)),
               struct.pack(f"<{len(slots)}Q", *slots)]
    for slot, name, offset, extent in maps:
        raw = name.encode()
        payload.append(struct.pack("<IIQQ", slot, len(raw), offset, extent) + raw)
    body = b"".join(payload)
    return struct.pack("<II", REQ_RUN, len(body)) + body


class Runners:
    """The runners of one device: idle ones are kept for the next launch; an image unloaded
    from the device is unloaded from each runner when it is idle (its id is remembered only
    while a runner still holds it)."""

    def __init__(self) -> None:
        self._idle: list[Runner] = []
        self._live: set[Runner] = set()     # idle or running a launch
        self._gone: set[int] = set()        # ids of images unloaded from the device, still in a live runner
        self._lock = threading.Lock()

    def take(self) -> Runner:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        try:
            runner = Runner()
        except OSError as exc:
            raise RunnerDied(f"cannot start a kernel runner: {exc}") from None
        with self._lock:
            self._live.add(runner)
        return runner

    def give(self, runner: Runner) -> None:
        with self._lock:
            stale = runner.loaded & self._gone
        try:
            for image_id in stale:
                runner.unload(image_id)
        except RunnerDied:
            self.drop(runner)
            return
        with self._lock:
            self._idle.append(runner)
            self._forget_unheld()

    def drop(self, runner: Runner) -> None:
        """A runner that died, or was stopped with its launch: killed, and gone from the pool."""
        runner.kill()
        with self._lock:
            self._live.discard(runner)
            self._forget_unheld()

    def _forget_unheld(self) -> None:
        """(with the lock) Forget unloaded images no live runner holds any more."""
        if self._gone:
            self._gone &= set().union(*(r.loaded for r in self._live))

    def forget(self, image_id: int) -> None:
        with self._lock:
            self._gone.add(image_id)
            idle, self._idle = self._idle, []
        for runner in idle:
            self.give(runner)


def runners(device: "Device") -> Runners:
    return per_device(device, "native_runners", Runners)


class Image:
    """A device image's bytes (loaded into each runner that runs one of its kernels)."""

    def __init__(self, image_id: int, data: bytes, filename: str) -> None:
        self.id, self.data, self.filename = image_id, data, filename
        self.kernels: list[tuple[str, int, int]] = []     # (name, parameters, pointer mask)


class NativeKernel(Kernel):
    """A kernel of a device image: all its blocks run in one runner call."""

    def __init__(self, device: "Device", image: Image, index: int) -> None:
        name, count, self.pointers = image.kernels[index]
        super().__init__(self._launch, core="vector", vectorized=True, name=name)
        self.types = [params.uint64] * count
        self.device, self.image, self.index = device, image, index

    def release(self) -> None:
        """Its binary was unloaded: the runners let go of its image (the first kernel of the
        image to go tells them)."""
        runners(self.device).forget(self.image.id)

    def _launch(self, ctx, *slots) -> None:
        launch = ctx._launch
        maps = self.maps(launch, slots)
        pool = runners(self.device)
        runner = stop = None
        try:     # a stop may come at any instruction: a runner taken is given back or dropped
            runner = pool.take()
            try:
                reply = runner.run(self.image, self.index, ctx.block_num, list(slots), maps)
            except KernelStopped as exc:
                # a stop: a launch about to end still ends (as a kernel already running on a
                # core does), then the stop stands; a longer one goes with its runner
                stop = exc
                reply = runner.finish(STOP_GRACE_S)
        except RunnerDied as exc:
            if runner is not None:
                pool.drop(runner)
            raise KernelFault(f"kernel {self.name}: {exc}", self.core) from None
        except BaseException:
            if runner is not None:
                pool.drop(runner)
            raise
        if reply is None:
            pool.drop(runner)
            raise stop
        pool.give(runner)
        fault = self.report(launch, reply)
        if stop is not None:
            raise stop
        if fault is not None:
            raise fault

    def report(self, launch: Launch, reply: tuple) -> KernelFault | None:
        """A launch's reply: its printf text to the launching host, its fault if it had one
        (and a bad GlobalTensor access for memcheck)."""
        status, block, _, message, output, cut, (bad, bad_bytes), _ = reply
        if output:
            launch.print(output + ("[mdev: kernel printf output cut at 4 MiB]\n" if cut else ""))
        if not status or status == DONE_SKIPPED:
            return None
        if bad and launch.accesses is not None and launch.fault is None:     # memcheck's report
            launch.fault = (bad, bad_bytes, f"a {bad_bytes}-byte GlobalTensor access of kernel {self.name}")
        return KernelFault(f"kernel {self.name} block {block}: {message}", self.core)

    def maps(self, launch: Launch, slots) -> list[tuple]:
        """(slot, segment, offset, bytes reachable) of each pointer argument."""
        return [(i, *self._translate(launch, value)) for i, value in enumerate(slots)
                if value and self.pointers >> i & 1]

    def _translate(self, launch, value: int) -> tuple[str, int, int]:
        """(segment, offset, bytes reachable) of a pointer argument, as this launch may use it."""
        location, raw = launch._raw(value, 0, True)
        if launch.accesses is not None:
            _, root = sanitize.tracked(raw, launch.spinning)
            launch.accesses.append((location, raw, raw.copy(), root))
        kind, key, offset = location
        if kind == "p":
            return key, offset, len(raw)
        if key == self.device.index:     # checked by _raw (placeholder memory belongs to no process)
            return self.device.memory.hbm.name, offset, len(raw)
        seg = self.device.memory.locate(location, len(raw), launch.client)
        return seg.name, offset, seg.size - offset      # a peer's HBM: its allocations are not known here


class _Handed(Launch):
    """A launch handed to its stream's runner ahead of its end (Ahead).  A stop other than its
    execute timeout drops the stream's launches behind it, which have not started: the
    runner skips them.  Its execute timeout counts from when the launch before it ended
    (armed once it is the first launch out; ``timeout`` is set then)."""

    ahead: "Ahead"
    timeout: tuple = ()
    stopped_at = 0.0

    def stop(self, code: int, why: str) -> None:
        first = self.stopped is None
        super().stop(code, why)
        if first and self.stopped is not None:
            self.stopped_at = time.monotonic()
            if self.stopped != self.timeout:
                self.ahead.skip()

    def stop_after(self, seconds: float, code: int, why: str) -> None:
        """A forced destroy: this launch runs on until ``seconds`` after it started, the ones
        behind it are dropped at once."""
        super().stop_after(seconds, code, why)
        self.ahead.skip()

    def time_out(self, seconds: float, core: str, started: float) -> None:
        """The execute timeout stops it ``seconds`` after it ``started`` (time.monotonic)."""
        self.started = started
        self.timeout = (TIMEOUT_CODES[core], f"kernel {self.name} ran longer than its {seconds} s execute timeout")
        Launch.stop_after(self, seconds, *self.timeout)


class Ahead:
    """A stream's native launches handed to one kernel runner ahead of their ends.

    The stream's worker hands a launch on and goes to its next task: a run of launches
    streams into the runner, which runs them in order (those behind a running one are sent
    BATCH at a time), and their replies complete them (DeviceStream.finish) as the worker
    comes by: every BATCH launches for the replies in, the next one when it has nothing else
    to do (``idle``), all of them before any other task of the stream (``settle``).  The run
    holds its runner and its engine's cores until it is settled.
    A stop drops the launches not started (the runner skips them); a runner lost with a
    launch running (stopped past its grace, or died) takes that launch with it and the ones
    behind it are sent again to a fresh runner, unless they were dropped."""

    DEPTH = 64       # launches out at once: the rest wait for the oldest
    BATCH = 16       # launches out before a look for replies while more come (one receive, one completion)

    def __init__(self, device: "Device", stream: "DeviceStream") -> None:
        self.device, self.stream = device, stream
        self.runner: Runner | None = None
        self.flight: collections.deque = collections.deque()    # (seq, launch, kernel, timeout_s, run)
        self.handed = 0           # seq of the last launch handed on
        self.outbox: list[bytes] = []     # requests of launches in flight not sent yet
        self.ended = 0.0                  # when the last launch taken ended (time.monotonic)
        self.engine = None
        self.cores = 0

    def __len__(self) -> int:
        return len(self.flight)

    @property
    def busy(self) -> bool:
        """Launches out, or a runner and cores still held for the next."""
        return self.runner is not None or bool(self.flight)

    def skip(self) -> None:
        runner = self.runner
        if runner is not None:
            runner.skip()

    def hand(self, seq: int, kernel: NativeKernel, num_blocks: int, values: list, limit: int, pinned: tuple,
             timeout_s: float) -> None:
        device, stream = self.device, self.stream
        engine = device.engines[kernel.engine]
        width = max(1, min(num_blocks, limit, engine.slots))
        runner = self.runner
        behind = bool(self.flight)
        if runner is not None and (runner.skipping or engine is not self.engine or width > self.cores
                                   or engine.waiters):
            self.settle()        # (a stream waiting for the cores gets them between runs)
        elif len(self.flight) >= self.DEPTH:
            self.collect(self.DEPTH - 1)
        if behind and seq <= stream.drop_upto:
            return               # an abort or forced destroy dropped it while it waited its turn
        if self.runner is None:
            engine.acquire(stream.priority, width)
            self.engine, self.cores = engine, width
            try:
                self.runner = runners(device).take()
            except RunnerDied as exc:
                self._release(None)
                raise KernelFault(f"kernel {kernel.name}: {exc}", kernel.core) from None
        launch = _Handed(device, stream, num_blocks, pinned, stream.client, kernel.name, None, core=kernel.core)
        launch.ahead = self
        launch.start(values)
        try:
            request = run_request(kernel.image, kernel.index, num_blocks, list(values), kernel.maps(launch, values))
            if kernel.image.id not in self.runner.loaded:
                self.collect(0)          # (its reply would come behind theirs)
                self.runner.load(kernel.image)
            if not self.flight:          # the runner is idle: it starts at once
                launch.time_out(timeout_s, kernel.core, time.monotonic())
                self.runner.send_requests(request)
            else:
                self.outbox.append(request)
                if len(self.outbox) >= self.BATCH:
                    self.flush()
        except RunnerDied as exc:
            launch.close()
            self.collect(0)              # (lost with the runner, or sent again to a fresh one)
            self._release(self.runner)
            raise KernelFault(f"kernel {kernel.name}: {exc}", kernel.core) from None
        except BaseException:
            launch.close()
            self.collect(0)              # the launches out end before this one's failure counts
            raise
        self.flight.append((seq, launch, kernel, timeout_s, request))
        self.handed = seq
        if len(self.flight) >= self.BATCH:
            self.collect(1, wait=False)

    def collect(self, keep: int, wait: bool = True) -> None:
        """Complete launches in order while over ``keep`` are out: those whose replies are in,
        and with ``wait`` the ones still running too.  (A launch just handed on is left for a
        later look: the completion of a run's last launch, made when nothing else of the
        stream is left, counts the tasks an abort discarded behind it.)"""
        if wait:
            self.flush()
        done, ran = 0, 0          # completions not told yet: the last one's seq, how many
        completed = False
        while len(self.flight) > keep:
            runner = self.runner
            try:
                reply = runner.launch_reply()
                if reply is None:
                    if not wait:
                        if runner.pull(0):
                            continue
                        break
                    self._arm()
                    head = self.flight[0][1]
                    if head.stopped is not None and time.monotonic() >= head.stopped_at + STOP_GRACE_S:
                        reply = runner
                    else:
                        runner.pull(POLL_S)
                        continue
            except RunnerDied as exc:
                reply = exc
            if not isinstance(reply, tuple):     # the runner goes (stopped past its grace, or died)
                if ran:
                    self.stream.finish(done, 0, "", ran)
                    done, ran = 0, 0
                self._lose(reply if isinstance(reply, RunnerDied) else None)
                continue
            seq, code, message = self._complete(reply)
            completed = True
            if code:
                if ran:
                    self.stream.finish(done, 0, "", ran)
                    done, ran = 0, 0
                self.stream.finish(seq, code, message)
            else:
                done, ran = seq, ran + 1
        if ran:
            self.stream.finish(done, 0, "", ran)
        if completed:
            self._arm()
            self.device.wake()

    def _complete(self, reply: tuple) -> tuple[int, int, str]:
        """A launch's reply taken: its (seq, code, message); the next launch runs from its end."""
        seq, launch, kernel, _, _ = self.flight.popleft()
        fault = kernel.report(launch, reply)
        if reply[0] == DONE_SKIPPED:
            code, message = 0, ""                    # dropped by a stop before it started
        elif launch.stopped is not None:
            code, message = launch.stopped if launch.stopped[0] else (0, "")
        else:
            code, message = (fault.code, fault.message) if fault is not None else (0, "")
        launch.close()
        self.ended = reply[-1]
        return seq, code, message

    def _arm(self) -> None:
        """The execute timeout of the launch now at the head, from the end of the one before
        (armed once the replies in are taken: not for launches that have ended already)."""
        if self.flight and not self.flight[0][1].timeout:
            _, head, kernel, timeout_s, _ = self.flight[0]
            head.time_out(timeout_s, kernel.core, max(head.started, self.ended))

    def flush(self) -> None:
        """Send the launches held back (the runner is busy with those before them)."""
        if self.outbox:
            requests, self.outbox = b"".join(self.outbox), []
            self.runner.send_requests(requests)

    def idle(self) -> None:
        """The stream has no other task: launches held back go, and the next reply is waited
        for (the worker then looks at its queue again); with none out, the runner and the
        cores go back."""
        if self.flight:
            self.collect(len(self.flight) - 1)
        else:
            self.settle()

    def _lose(self, died: RunnerDied | None) -> None:
        """The runner goes with the launch it runs (stopped past its grace, or the runner died);
        the launches behind it are dropped if a stop skipped them, else sent to a fresh runner."""
        runner, self.runner = self.runner, None
        runners(self.device).drop(runner)
        self.outbox = []                 # (each launch out keeps its request)
        seq, launch, kernel, _, _ = self.flight.popleft()
        if died is not None and launch.stopped is None:
            fault = KernelFault(f"kernel {kernel.name}: {died}", kernel.core)
            code, message = fault.code, fault.message
        else:
            code, message = launch.stopped if launch.stopped[0] else (0, "")
        launch.close()
        behind, self.flight = self.flight, collections.deque()
        if behind and not runner.skipping:
            try:
                self.runner = runners(self.device).take()
                for image in {id(r[2].image): r[2].image for r in behind}.values():
                    self.runner.load(image)
                self.runner.send_requests(b"".join(entry[4] for entry in behind))
                behind[0][1].time_out(behind[0][3], behind[0][2].core, time.monotonic())
                self.flight = behind
                behind = collections.deque()
            except RunnerDied as exc:
                died = exc
        self.stream.finish(seq, code, message)
        for seq, launch, kernel, _, _ in behind:     # dropped, or no runner to run them
            launch.close()
            if runner.skipping or died is None:
                self.stream.finish(seq, 0, "")
            else:
                fault = KernelFault(f"kernel {kernel.name}: {died}", kernel.core)
                self.stream.finish(seq, fault.code, fault.message)
        if self.runner is None:
            self._release(None)      # no run left: its cores go back (the stream is not busy now)

    def settle(self) -> None:
        """Every launch out done and completed; the runner and the cores given back."""
        while self.flight:
            self.collect(0)
        self._release(self.runner if self.runner is not None and self.runner.skipping else None)

    def _release(self, lost: Runner | None) -> None:
        """Give the runner back (drop it if it is ``lost``: dead, or skipping) and the cores."""
        runner, self.runner = self.runner, None
        if runner is lost and runner is not None:
            runners(self.device).drop(runner)
        elif runner is not None:
            runners(self.device).give(runner)
        if self.cores:
            self.engine.release(self.cores)
            self.cores = 0


def _ahead(device: "Device", stream: "DeviceStream", placeholders: list) -> Ahead | None:
    """The stream's Ahead if this launch may be handed on: run by the stream's worker as its
    task (not a graph's lane), with nothing that needs the launch's own course (placeholder
    memory, tracing, memcheck, a forced destroy or abort under way, a context that stops on
    the first failure, which must not let the next launch start)."""
    task = stream.running_task
    if (task is None or task[1] != "native_kernel" or not stream.on_worker() or placeholders
            or device.trace is not None or stream.ending is not None or stream.aborting
            or stream.context.stop_on_failure or sanitize.watching(device, stream.client)):
        return None
    if stream.ahead is None:
        stream.ahead = Ahead(device, stream)
    return stream.ahead


@op()
def native_kernel(device: "Device", stream: "DeviceStream", fid: int, num_blocks: int, args_kind: str, args,
                  placeholders: list, limit: int, pinned: tuple, timeout_s: float) -> None:
    """A launch of a native kernel: handed to the stream's runner ahead of its end (Ahead), or
    else the "kernel" op's course (waves, faults, stops, timeouts, the sanitizer's report)
    with a NativeKernel, whose one call runs every block."""
    kernel = device.kernels.get(fid)
    if not isinstance(kernel, NativeKernel):
        raise TaskFault(E.ACL_ERROR_RT_KERNEL_LOOKUP, f"function {fid} is not a native kernel of device {device.index}")
    ahead = _ahead(device, stream, placeholders)
    if ahead is not None:
        try:
            values = kernels.arguments(device, stream, kernel, args_kind, args, [], [])
        except ValueError as exc:
            ahead.collect(0)        # the launches out end before this one's failure counts
            raise KernelFault(f"kernel {kernel.name}: {exc}", kernel.core) from None
        ahead.hand(stream.running_task[0], kernel, num_blocks, values, limit, pinned, timeout_s)
        return
    if getattr(stream, "ahead", None) is not None and stream.ahead.busy:
        stream.ahead.settle()
    kernels.kernel(device, stream, fid, num_blocks, args_kind, args, placeholders, limit, pinned, timeout_s)


@request
def load_native(device: "Device", conn, data: bytes, filename: str) -> tuple[int, list]:
    """A device image of mdev's ascendc.cmake: its kernels become functions of this device."""
    if not isinstance(data, bytes) or not data.startswith(ELF_MAGIC):
        raise AclError(E.ACL_ERROR_INVALID_PARAM, f"{filename} is not a device image (an ELF shared object)")
    image = Image(device.new_fid(), data, filename)
    pool = runners(device)
    try:
        runner = pool.take()
    except RunnerDied as exc:
        raise AclError(E.ACL_ERROR_RT_INTERNAL_ERROR, f"cannot load {filename}: {exc}") from None
    try:
        runner.load(image)
    except RunnerDied as exc:
        pool.drop(runner)
        raise AclError(E.ACL_ERROR_RT_INTERNAL_ERROR, f"cannot load {filename}: {exc}") from None
    except BaseException:
        pool.give(runner)       # it refused the image (AclError) and serves on
        raise
    pool.give(runner)
    with device.lock:
        entries = []
        for index in range(len(image.kernels)):
            kernel = NativeKernel(device, image, index)
            fid = device.new_fid()
            device.kernels[fid] = kernel
            entries.append((kernel.name, fid, len(kernel.types)))
        device.binaries[image.id] = [fid for _, fid, _ in entries]
    return image.id, entries
