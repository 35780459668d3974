"""What a kernel sees while it runs on a device: its block, device memory, helpers.

    def add_custom(ctx, x, y, z, n):
        per = n // ctx.block_num
        lo = ctx.block_idx * per
        a = ctx.gm(x, np.float32, n)[lo:lo + per]     # a numpy view of device memory
        ...

``gm`` is bounds-checked against the allocation the pointer is in, and reached through the
launch's own mappings (mdev.board.windows), so a teardown can cut a running launch off
memory; the allocations it touches are not handed out again before it ends.  Touching anything
else is a device fault: the launch's stream reports, at its next synchronisation, a
Vector Core exception (507035) for a vector kernel or an AI Core exception (507015) for a
cube kernel; ``trap()`` executes a trap (507036 / 507016).  ``spin_until`` waits on memory
without burning the device's cores.
"""

from __future__ import annotations

import ctypes
import threading
import time
from typing import TYPE_CHECKING, Callable

import numpy as np

from mdev import errors as E
from mdev.board import sanitize, watchdog
from mdev.board.tasktable import TaskFault
from mdev.board.windows import LaunchWindows
from mdev.memory import address

if TYPE_CHECKING:
    from mdev.board.device import Device
    from mdev.board.stream import DeviceStream


# the core a kernel runs on -> (code of a fault, code of a trap), as the task scheduler
# reports them for AIV and AIC kernel tasks
FAULT_CODES = {
    "vector": (E.ACL_ERROR_RT_VECTOR_CORE_EXCEPTION, E.ACL_ERROR_RT_VECTOR_CORE_TRAP_EXCEPTION),
    "cube": (E.ACL_ERROR_RT_AICORE_EXCEPTION, E.ACL_ERROR_RT_AICORE_TRAP_EXCEPTION),
    "aicpu": (E.ACL_ERROR_RT_AICPU_EXCEPTION, E.ACL_ERROR_RT_AICPU_EXCEPTION),     # a CPU has no trap code
}


TIMEOUT_CODES = {"vector": E.ACL_ERROR_RT_VECTOR_CORE_TIMEOUT, "cube": E.ACL_ERROR_RT_AICORE_TIMEOUT,
                 "aicpu": E.ACL_ERROR_RT_AICPU_TIMEOUT}


class KernelFault(TaskFault):
    def __init__(self, message: str, core: str = "vector", trap: bool = False) -> None:
        super().__init__(FAULT_CODES[core][trap], message)


class KernelTrap(Exception):
    """Raised by ``ctx.trap()``: the block executed a trap instruction."""


class KernelStopped(BaseException):
    """Raised in a block's thread (asynchronously, at its next Python instruction) when a
    teardown stops its launch: a BaseException, so that kernel code catching Exception
    cannot swallow it."""


_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
_set_async_exc.argtypes = [ctypes.c_ulong, ctypes.c_void_p]     # the exception, or NULL: withdraw it
_STOP = id(KernelStopped)


class BlockContext:
    """One block of a launch (or, for a vectorised kernel, all of them at once)."""

    def __init__(self, launch: "Launch", block_idx: int | None) -> None:
        self._launch = launch
        self.block_idx = block_idx
        self.block_num = launch.num_blocks

    @property
    def blocks(self) -> range:
        """The block indices this call covers (all of them for a vectorised kernel)."""
        if self.block_idx is None:
            return range(self.block_num)
        return range(self.block_idx, self.block_idx + 1)

    def gm(self, ptr: int, dtype=np.uint8, count: int | tuple | None = None) -> np.ndarray:
        """A numpy view of global memory at ``ptr``: ``count`` elements (or a shape) of ``dtype``."""
        return self._launch.memory(int(ptr), np.dtype(dtype), count)

    def print(self, *values, sep: str = " ", end: str = "\n") -> None:
        """printf from the device: appears on the launching process's stdout."""
        self._launch.print(sep.join(str(v) for v in values) + end)

    def spin_until(self, ready: Callable[[], bool], timeout: float | None = None) -> None:
        """Wait until ``ready()`` holds, re-checking whenever device memory is written."""
        self._launch.spin_until(ready, timeout)

    def atomic_add(self, ptr: int, value, dtype=np.int64):
        """Atomically add to a device-memory word; returns the old value."""
        return self._launch.atomic_add(int(ptr), value, np.dtype(dtype))

    def trap(self) -> None:
        """Execute a trap (``asm("trap")``): the block stops, the launch fails with the trap
        exception of its core type."""
        raise KernelTrap(f"kernel {self._launch.name} block {self.block_idx} executed a trap")


class Launch:
    """State shared by the blocks of one kernel launch on a device."""

    def __init__(self, device: "Device", stream: "DeviceStream", num_blocks: int, pinned: tuple,
                 client: int, name: str, deadline: float | None, watch: bool = False, core: str = "vector",
                 scratch: list = ()) -> None:
        self.device = device
        self.stream = stream
        self.num_blocks = num_blocks
        self.pinned = pinned          # (host base, size, segment) of the launching process, and
                                      # (VMM address, size, device location) of its mappings
        self.client = client
        self.scratch = scratch        # offsets of the runtime's memory for its placeholder arguments
        self.name = name
        self.core = core
        self.deadline = deadline
        # MDEV_SANITIZE: (location, view, snapshot) of every gm view, and the first bad access
        self.accesses: list | None = [] if watch else None
        self.fault: tuple | None = None
        self.spinning = threading.local()   # .on while a block of this launch spins (sanitizer)
        self.windows = LaunchWindows(device.memory.hbm_windows)
        self.used: dict[int, object] = {}    # offset -> block of this HBM it touched (pinned)
        self._using = threading.Lock()
        self.stopped: tuple[int, str] | None = None     # (code, why) once a teardown cut it off
        self.started = time.monotonic()
        self.closed = False
        self._alarms: list[int] = []          # its watchdog deadlines (stop_after)
        self._threads: set[int] = set()       # threads running a block of it right now
        self._threads_lock = threading.Lock()

    def start(self, values: list) -> None:
        """Before the first block: the allocations its pointer arguments name are in use."""
        own = self.device.index
        offsets = [split[1] for split in (address.split(v) for v in values
                                          if isinstance(v, int) and not isinstance(v, bool))
                   if split is not None and split[0] == own]
        for block in self.device.memory.pin(offsets):
            if block.freed:
                self.device.memory.unpin([block])
            else:
                self.used[block.offset] = block
        self.started = time.monotonic()
        self.stream.launches.add(self)

    def stop(self, code: int, why: str) -> None:
        """Teardown: from now on the launch writes nowhere (its mappings are cut off), its
        next access faults and its blocks are interrupted at their next Python instruction
        (a block inside one long numpy call or sleep stops when that returns)."""
        with self._threads_lock:
            if self.stopped is not None or self.closed:    # closed: its mappings serve another launch
                return
            self.stopped = (code, why)
            self.windows.revoke()
            for ident in self._threads:
                _set_async_exc(ident, _STOP)

    def stop_after(self, seconds: float, code: int, why: str) -> None:
        """Stop the launch once it has run ``seconds`` since it started (at once if it has)."""
        with self._threads_lock:
            if not self.closed:
                self._alarms.append(watchdog.of(self.device).arm(self.started + seconds, lambda: self.stop(code, why)))

    def entering(self) -> bool:
        """A thread starts a block; False if the launch was stopped already."""
        with self._threads_lock:
            if self.stopped is not None:
                return False
            self._threads.add(threading.get_ident())
            return True

    def leaving(self) -> None:
        """The thread's block is over: no stop may interrupt it any more (a pending one is
        withdrawn, under the lock stop() sends them with)."""
        ident = threading.get_ident()
        with self._threads_lock:
            self._threads.discard(ident)
            _set_async_exc(ident, None)

    def close(self) -> None:
        with self._threads_lock:
            self.closed = True
            alarms, self._alarms = self._alarms, []
        for alarm in alarms:
            watchdog.of(self.device).disarm(alarm)
        self.stream.launches.discard(self)
        self.windows.close()
        self.device.memory.unpin(list(self.used.values()))

    def memory(self, ptr: int, dtype: np.dtype, count) -> np.ndarray:
        shape = (count,) if isinstance(count, (int, np.integer)) else tuple(count) if count else None
        nbytes = dtype.itemsize * int(np.prod(shape)) if shape else 0
        try:
            location, raw = self._raw(ptr, nbytes, shape is None)
        except TaskFault:
            if self.accesses is not None and self.fault is None:
                self.fault = (ptr, nbytes, f"a {nbytes}-byte access of kernel {self.name}")
            raise
        if self.accesses is not None:
            view, root = sanitize.tracked(raw, self.spinning)
            self.accesses.append((location, raw, raw.copy(), root))
            raw = view
        view = raw[:len(raw) // dtype.itemsize * dtype.itemsize].view(dtype)
        return view.reshape(shape) if shape else view

    def _raw(self, ptr: int, nbytes: int, whole: bool) -> tuple[tuple, np.ndarray]:
        if self.stopped is not None:
            raise TaskFault(*self.stopped)
        split = address.split(ptr)
        if split is not None:
            device, offset = split
            if device == self.device.index:
                block = self._use(offset)
                if block is None:
                    raise self.fault_of(f"kernel {self.name}: {ptr:#x} is not in a live allocation of device {device}")
                end = block.offset + block.size
                if whole:
                    nbytes = end - offset        # no count: the rest of the allocation
                if offset + nbytes > end:
                    raise self.fault_of(f"kernel {self.name}: {nbytes} bytes at {ptr:#x} overrun the "
                                      f"{block.size}-byte allocation at offset {block.offset:#x} "
                                      f"by {offset + nbytes - end} bytes")
                if not self.device.memory.may_use(self.client, block, offset, nbytes) and block.offset not in self.scratch:
                    raise self.fault_of(f"kernel {self.name}: {ptr:#x} is not memory of its process")
                return ("d", device, offset), self.windows.hbm.array[offset:offset + nbytes]
            location = ("d", device, offset)
            return location, self._mapped(location, nbytes)
        for base, size, target in self.pinned:
            if base <= ptr < base + size:
                if whole:
                    nbytes = base + size - ptr
                if ptr + nbytes > base + size:
                    what = "a pinned buffer" if isinstance(target, str) else "its VMM mapping"
                    raise self.fault_of(f"kernel {self.name}: {nbytes} bytes at {ptr:#x} overrun {what}")
                if isinstance(target, str):         # a pinned buffer: its segment
                    location = ("p", target, ptr - base)
                else:                               # a VMM mapping: the device memory behind it
                    kind, key, offset = target
                    location = (kind, key, offset + ptr - base)
                try:
                    return location, self._mapped(location, nbytes)
                except TaskFault as fault:
                    raise self.fault_of(f"kernel {self.name}: VMM address {ptr:#x}: {fault.message}") from None
        raise self.fault_of(f"kernel {self.name}: {ptr:#x} is neither device memory, pinned host memory nor "
                          f"a mapped VMM address")

    def _use(self, offset: int):
        """The live block of this HBM holding ``offset``, in use by the launch from now on
        (a block freed before the launch touched it is not live)."""
        with self._using:
            for block in self.used.values():
                if block.offset <= offset < block.offset + block.reserved:
                    return block
            pinned = self.device.memory.pin([offset])
            if not pinned:
                return None
            if pinned[0].freed:
                self.device.memory.unpin(pinned)
                return None
            self.used[pinned[0].offset] = pinned[0]
            return pinned[0]

    def _mapped(self, location: tuple, nbytes: int) -> np.ndarray:
        """The bytes at a checked location, through this launch's mapping of its segment."""
        seg = self.device.memory.locate(location, nbytes, self.client)
        try:
            window = self.windows.hbm if seg is self.device.memory.hbm else self.windows.segment(seg.name)
        except Exception as exc:
            raise self.fault_of(f"kernel {self.name}: cannot map {seg.name}: {exc}") from None
        return window.array[location[2]:location[2] + nbytes]

    def fault_of(self, message: str) -> KernelFault:
        return KernelFault(message, self.core)

    def print(self, text: str) -> None:
        conn = self.device.main_conns.get(self.client)
        if conn is not None:
            conn.send(("print", text))

    def spin_until(self, ready: Callable[[], bool], timeout: float | None) -> None:
        self.spinning.on = True       # what the condition reads is a flag, not data
        try:
            self.device.wait_until(self.stream, ready, timeout or 0, f"kernel {self.name}")
        finally:
            self.spinning.on = False

    def atomic_add(self, ptr: int, value, dtype: np.dtype):
        word = self.memory(ptr, dtype, 1)
        if getattr(word, "_root", None) is not None:
            word._root.flag = True    # an atomic word is synchronisation, not data
        with self.device.lock:
            old = word[0].item()
            word[0] = old + value
        self.device.wake()
        return old
