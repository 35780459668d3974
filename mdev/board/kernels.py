"""Running a kernel launch inside a device process.

    "kernel" task --> decode arguments --> waves of at most ``limit`` blocks
                      (each wave holds that many cores of its engine; its blocks run on the
                       stream's thread and the device's block threads, all at once when
                       they wait on each other, see _Wave)

The limit is the stream / device / hardware core limit in force when the launch was
submitted.  A block that raises, or touches memory outside the allocations it was given,
faults the launch with its core's exception (vector 507035, cube 507015), a block that
executes ``ctx.trap()`` with its core's trap exception (507036 / 507016); the other blocks
still finish.  A launch running past its execute timeout is stopped (mdev.board.watchdog)
and fails with its core's timeout (507034 / 507014).  With the stream's overflow switch on, the blocks report floating-point
overflows (mdev.board.overflow).
"""

from __future__ import annotations

import concurrent.futures
import itertools
import pickle
import threading
import time
import traceback
from typing import TYPE_CHECKING, Callable

from mdev import errors as E
from mdev.board import overflow, sanitize
from mdev.board.tasktable import TaskFault, op, request
from mdev.errors import AclError
from mdev.kernel.api import Kernel
from mdev.kernel import params
from mdev.board.block import TIMEOUT_CODES, BlockContext, KernelFault, KernelStopped, KernelTrap, Launch
from mdev.memory import address

if TYPE_CHECKING:
    from mdev.board.device import Device
    from mdev.board.stream import DeviceStream

_pool_lock = threading.Lock()


def per_device(device: "Device", name: str, make: Callable[[], object]):
    """The device's helper object ``name``, made by ``make()`` on first use."""
    with _pool_lock:
        helper = getattr(device, name, None)
        if helper is None:
            helper = make()
            setattr(device, name, helper)
        return helper


def _minder(device: "Device") -> "_Minder":
    return per_device(device, "wave_minder", _Minder)


def _pool(device: "Device") -> concurrent.futures.ThreadPoolExecutor:
    return per_device(device, "block_pool", lambda: concurrent.futures.ThreadPoolExecutor(
        # every running block holds a core: enough helpers for all cores of all kinds
        sum(e.slots for name, e in device.engines.items() if name != "dma"), "block"))


def arguments(device: "Device", stream: "DeviceStream", kernel, args_kind: str, args, placeholders: list,
               scratch: list) -> list:
    if args_kind == "values":
        return list(args)
    if args_kind == "objects":    # shipped by value by the host, like the kernel itself
        values, objects = args
        values = list(values)
        for i, value in pickle.loads(objects).items():
            values[i] = value
        return values
    if args_kind == "loc":
        dev, offset, size = args
        block = bytearray(device.memory.view(("d", dev, offset), size, stream).tobytes())
    else:
        block = bytearray(args)
    for addr_offset, data in placeholders:
        # runtime-owned device memory for the placeholder's data, alive for the launch
        offset = device.memory.hold(data)
        scratch.append(offset)
        block[addr_offset:addr_offset + 8] = (address.device_base(device.index) + offset).to_bytes(8, "little")
    return params.decode(kernel.types, bytes(block))


@request
def register_cpu_func(device: "Device", conn, bin_id: int, func_name: str, kernel_name: str) -> int:
    """aclrtRegisterCpuFunc: a function of a loaded binary as an AI CPU kernel of its own."""
    with device.lock:
        found = next((device.kernels[f] for f in device.binaries.get(bin_id, ()) if device.kernels[f].name == func_name),
                     None)
        if found is None:
            raise AclError(E.ACL_ERROR_RT_KERNEL_LOOKUP, f"the binary has no function {func_name!r}")
        fid = device.new_fid()
        device.kernels[fid] = Kernel(found.fn, core="aicpu", vectorized=found.vectorized, name=kernel_name)
        device.binaries[bin_id].append(fid)
    return fid


@request
def function_core(device: "Device", conn, fid: int) -> str:
    """The core a loaded function runs on (its entry addresses follow from it)."""
    kernel = device.kernels.get(fid)
    if kernel is None:
        raise AclError(E.ACL_ERROR_RT_KERNEL_LOOKUP, f"function {fid} is not loaded on device {device.index}")
    return kernel.core


@op()
def kernel(device: "Device", stream: "DeviceStream", fid: int, num_blocks: int, args_kind: str, args,
           placeholders: list, limit: int, pinned: tuple, timeout_s: float) -> None:
    kernel = device.kernels.get(fid)
    if kernel is None:
        raise TaskFault(E.ACL_ERROR_RT_KERNEL_LOOKUP, f"kernel {fid} is not loaded on device {device.index}")
    scratch: list[int] = []
    deadline = time.monotonic() + timeout_s if timeout_s else None
    launch = None
    try:
        try:
            values = arguments(device, stream, kernel, args_kind, args, placeholders, scratch)
        except ValueError as exc:
            raise KernelFault(f"kernel {kernel.name}: {exc}", kernel.core) from None
        launch = Launch(device, stream, num_blocks, pinned, stream.client, kernel.name, deadline,
                        watch=sanitize.watching(device, stream.client), core=kernel.core, scratch=scratch)
        launch.start(values)
        if timeout_s:     # the op execute timeout: stopped when it runs longer
            launch.stop_after(timeout_s, TIMEOUT_CODES[kernel.core],
                              f"kernel {kernel.name} ran longer than its {timeout_s} s execute timeout")
        if stream.ending is not None:   # a forced destroy came first (after start(): it or this sees the other)
            launch.stop_after(*stream.ending)
        engine = device.engines[kernel.engine]
        width = max(1, min(num_blocks, limit, engine.slots))
        if kernel.vectorized:
            _wave(device, engine, stream, kernel, launch, values, [None], width)
        else:
            for start in range(0, num_blocks, width):
                if launch.stopped is not None:
                    break
                blocks = list(range(start, min(num_blocks, start + width)))
                _wave(device, engine, stream, kernel, launch, values, blocks, len(blocks))
    except TaskFault:
        if launch is None or launch.stopped is None:
            raise
        if launch.stopped[0]:
            raise TaskFault(*launch.stopped) from None     # whatever its blocks did after the stop
    finally:
        if launch is not None:
            if launch.accesses is not None:
                sanitize.report(device, stream, launch.accesses, launch.fault)
            launch.close()
        device.memory.drop(scratch)
        device.wake()
    if launch.stopped is not None and launch.stopped[0]:
        raise TaskFault(*launch.stopped)


def _wave(device, engine, stream, kernel, launch, values, blocks, cores) -> None:
    engine.acquire(stream.priority, cores)
    try:
        faults = _Wave(device, kernel, launch, values, blocks).run()
    finally:
        engine.release(cores)
    fault = next((faults[i] for i in sorted(faults)), None)
    if fault is not None:
        raise fault


# how long a wave runs on the stream's thread alone before it gets helpers
HELPERS_AFTER_S = 0.0005


class _Minder:
    """Gives a wave helpers once it has run HELPERS_AFTER_S: the blocks of an ordinary
    launch are all done by then in the stream's thread (a helper woken for each wave would
    cost more than its blocks), while blocks that wait for each other, sleep or run long
    get the rest of the wave beside them.  One thread per device, awake only while waves run.
    """

    def __init__(self) -> None:
        self._waves: dict["_Wave", float] = {}
        self._lock = threading.Lock()
        self._busy = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, wave: "_Wave") -> None:
        with self._lock:
            self._waves[wave] = time.monotonic()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="wave-minder", daemon=True)
                self._thread.start()
            if not self._busy.is_set():
                self._busy.set()

    def remove(self, wave: "_Wave") -> None:
        with self._lock:
            self._waves.pop(wave, None)

    def _run(self) -> None:
        while True:
            self._busy.wait()
            time.sleep(HELPERS_AFTER_S)
            with self._lock:
                now = time.monotonic()
                due = [w for w, start in self._waves.items() if now - start >= HELPERS_AFTER_S]
                for wave in due:
                    del self._waves[wave]
                if not self._waves:
                    self._busy.clear()
            for wave in due:
                wave.spawn()


class _Wave:
    """The blocks of one wave, claimed one at a time by workers: the stream's own thread
    and, once the wave has run a while (_Minder), helpers from the device's block pool,
    each helper starting the next one.

    Blocks that wait (for memory another block writes, or in a sleep) leave their worker
    blocked, so the chain of helpers grows until every block of the wave runs at once;
    quick blocks are all run by the stream's thread, in a tight loop (one block context
    per worker, registered with the launch once for all its blocks): well under a
    microsecond per block and no thread hand-over.
    """

    def __init__(self, device, kernel, launch: Launch, values: list, blocks: list) -> None:
        self.device, self.kernel, self.launch, self.values, self.blocks = device, kernel, launch, values, blocks
        self.faults: dict[int, TaskFault] = {}      # position in blocks -> its fault (only the faulted)
        self._claims = itertools.count()            # next() is atomic: claiming takes no lock
        self._settled = itertools.count(1)          # ... and counting the blocks run
        self._lock = threading.Lock()
        self._workers = 1                           # started, or about to be
        self._exhausted = False                     # every block claimed: no more helpers
        self._over = threading.Lock()               # released when the wave is over
        self._over.acquire()
        self._finished = False

    def run(self) -> dict:
        minder = _minder(self.device) if len(self.blocks) > 1 else None
        if minder is not None:
            minder.add(self)
        try:
            self._work()
            self._over.acquire()
        finally:
            if minder is not None:
                minder.remove(self)
        return self.faults

    def _finish(self) -> None:
        with self._lock:
            if not self._finished:
                self._finished = True
                self._over.release()

    def spawn(self) -> None:
        """One more worker, unless every block is claimed or has one."""
        with self._lock:
            if self._exhausted or self._workers >= len(self.blocks):
                return
            self._workers += 1
        _pool(self.device).submit(self._helper)

    def _helper(self) -> None:
        self.spawn()
        self._work()

    def _work(self) -> None:
        """Run blocks until none is left to claim.  While the thread is registered with the
        launch a stop may interrupt it anywhere (KernelStopped, at most once per launch):
        the loop is then resumed, and with the launch stopped it only claims the remaining
        blocks as stopped.  The wave is over when every block has run, or, stopped, when its
        last worker has left: a block whose claim an interruption swallowed cannot hold it
        up (the launch's stop is its fault)."""
        launch = self.launch
        entered = launch.entering()
        finished = False
        while True:
            try:
                if not finished:
                    self._loop(entered)
                    finished = True
                if entered:
                    launch.leaving()
                    entered = False
                break
            except KernelStopped:
                continue
        with self._lock:
            self._workers -= 1
            over = not self._workers and self.launch.stopped is not None
        if over:
            self._finish()

    def _loop(self, entered: bool) -> None:
        kernel, launch, values, blocks, faults = self.kernel, self.launch, self.values, self.blocks, self.faults
        fn, claims, settled, count = kernel.fn, self._claims, self._settled, len(blocks)
        ctx = BlockContext(launch, None)
        with overflow.watching(launch.device, launch.stream):
            while True:
                i = next(claims)
                if i >= count:
                    self._exhausted = True
                    return
                if not entered or launch.stopped is not None:
                    faults[i] = TaskFault(*launch.stopped)
                    if next(settled) == count:
                        self._finish()
                    continue
                ctx.block_idx = blocks[i]
                try:
                    fn(ctx, *values)
                except KernelStopped:
                    faults[i] = TaskFault(*launch.stopped)
                except TaskFault as fault:
                    faults[i] = fault
                except KernelTrap as trap:
                    faults[i] = KernelFault(str(trap), kernel.core, trap=True)
                except Exception as exc:
                    where = traceback.extract_tb(exc.__traceback__)[-1]
                    faults[i] = KernelFault(f"kernel {kernel.name} block {blocks[i]} raised {exc!r} "
                                            f"at {where.filename}:{where.lineno}", kernel.core)
                except BaseException as exc:        # e.g. SystemExit raised by a kernel
                    faults[i] = KernelFault(f"kernel {kernel.name} block {blocks[i]} raised {exc!r}", kernel.core)
                if next(settled) == count:
                    self._finish()
