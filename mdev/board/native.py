"""Native Ascend C kernels on a device: their images and the kernel runners that run them.

    "load_native" request (an image's bytes) --> a runner loads it (memfd) --> the kernels it
        holds become functions of this device (NativeKernel)
    "native_kernel" task (the "kernel" op's course) --> each pointer argument translated (Launch._raw: the
        allocation it is in, checked as for Python kernels) to a segment, an offset and the
        bytes it reaches --> a runner runs the blocks --> printf text to the launching host,
        a fault or trap -> the vector-core exception (507035, as the CANN samples show it)
    a stop (stream abort, forced destroy, device reset, execute timeout) --> the runner
        running it is killed; the next launch gets a fresh one

The runner (csrc/kernel_runner.c) is a native process of this device process, compiled with
the system C compiler on first use into a per-user cache.  Device addresses live above 2^48,
which this CPU cannot map, so only pointer arguments are translated: an address a kernel reads
from device memory (a pointer inside a tiling struct) reaches nothing.  Runners are pooled,
one per launch running at once, so stopping one launch never stops another.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from mdev import errors as E
from mdev.board import sanitize
from mdev.board.block import KernelFault, KernelStopped
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
READ_AHEAD = 4096        # what one receive of a reply asks for
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
    """One kernel runner process and the images it has loaded."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.proc = subprocess.Popen([str(runner_path()), str(theirs.fileno())], pass_fds=[theirs.fileno()],
                                         stdin=subprocess.DEVNULL, close_fds=True)
        finally:
            theirs.close()
        self.sock = ours
        self.sock.settimeout(POLL_S)
        self.loaded: set[int] = set()
        self._got = b""          # bytes of the reply received beyond what was read so far

    def send(self, kind: int, payload: bytes, fds: list[int] = ()) -> None:
        header = struct.pack("<II", kind, len(payload))
        try:
            if fds:
                socket.send_fds(self.sock, [header], list(fds))
                self.sock.sendall(payload)
            else:
                self.sock.sendall(header + payload)
        except OSError as exc:
            raise RunnerDied(f"the kernel runner is gone ({exc})") from None

    def read(self, n: int) -> bytes:
        """n bytes of the reply, waiting in POLL_S steps (a stop interrupts between them).
        A receive takes what is there, up to READ_AHEAD (the runner writes a short reply
        at once): the rest of the reply is then read without another call."""
        while len(self._got) < n:
            try:
                chunk = self.sock.recv(max(n - len(self._got), READ_AHEAD))
            except socket.timeout:
                continue
            except OSError as exc:
                raise RunnerDied(f"the kernel runner is gone ({exc})") from None
            if not chunk:
                code = self.proc.poll()
                raise RunnerDied(f"the kernel runner ended (exit status {code})")
            self._got += chunk       # kept at once: a stop may interrupt, finish() reads on
        got, self._got = self._got[:n], self._got[n:]
        return got

    def reply(self) -> tuple[int, bytes]:
        status, length = struct.unpack("<II", self.read(8))
        return status, self.read(length)

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
        if self._got:
            return self._done()
        self.sock.settimeout(grace_s)
        try:
            ready = self.sock.recv(1, socket.MSG_PEEK)
        except OSError:
            return None
        finally:
            self.sock.settimeout(POLL_S)
        return self._done() if ready else None

    def run(self, image: "Image", index: int, blocks: int, slots: list[int], maps: list) -> tuple:
        self.load(image)
        payload = [struct.pack("<5I", image.id, index, blocks, len(slots), len(maps)),
                   struct.pack(f"<{len(slots)}Q", *slots)]
        for slot, name, offset, extent in maps:
            raw = name.encode()
            payload.append(struct.pack("<IIQQ", slot, len(raw), offset, extent) + raw)
        self.send(REQ_RUN, b"".join(payload))
        return self._done()

    def _done(self) -> tuple:
        status, block, lo, hi, mlen, olen, cut, _, bad, bad_bytes = struct.unpack("<8I2Q", self.read(48))
        message = self.read(mlen).decode(errors="replace")
        output = self.read(olen).decode(errors="replace")
        return status, block, lo | hi << 32, message, output, bool(cut), (bad, bad_bytes)

    def unload(self, image_id: int) -> None:
        self.send(REQ_UNLOAD, struct.pack("<I", image_id))
        self.reply()
        self.loaded.discard(image_id)

    def kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass
        self.proc.wait()
        self.sock.close()


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
        maps = []
        for i, value in enumerate(slots):
            if value and self.pointers >> i & 1:
                maps.append((i, *self._translate(launch, value)))
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
        status, block, _, message, output, cut, (bad, bad_bytes) = reply
        if output:
            launch.print(output + ("[mdev: kernel printf output cut at 4 MiB]\n" if cut else ""))
        if stop is not None:
            raise stop
        if status:
            if bad and launch.accesses is not None and launch.fault is None:     # memcheck's report
                launch.fault = (bad, bad_bytes, f"a {bad_bytes}-byte GlobalTensor access of kernel {self.name}")
            raise KernelFault(f"kernel {self.name} block {block}: {message}", self.core)

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


@op()
def native_kernel(device: "Device", stream: "DeviceStream", fid: int, num_blocks: int, args_kind: str, args,
                  placeholders: list, limit: int, pinned: tuple, timeout_s: float) -> None:
    """A launch of a native kernel: the "kernel" op's course (waves, faults, stops, timeouts,
    the sanitizer's report) with a NativeKernel, whose one call runs every block."""
    if not isinstance(device.kernels.get(fid), NativeKernel):
        raise TaskFault(E.ACL_ERROR_RT_KERNEL_LOOKUP, f"function {fid} is not a native kernel of device {device.index}")
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
