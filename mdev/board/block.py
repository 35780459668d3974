"""What a kernel sees while it runs on a device: its block, device memory, helpers.

    def add_custom(ctx, x, y, z, n):
        per = n // ctx.block_num
        lo = ctx.block_idx * per
        a = ctx.gm(x, np.float32, n)[lo:lo + per]     # a numpy view of device memory
        ...

``gm`` is bounds-checked against the allocation the pointer is in; touching anything
else is a device fault: the launch's stream reports, at its next synchronisation, a
Vector Core exception (507035) for a vector kernel or an AI Core exception (507015) for a
cube kernel; ``trap()`` executes a trap (507036 / 507016).  ``spin_until`` waits on memory
without burning the device's cores.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable

import numpy as np

from mdev import errors as E
from mdev.board.tasks import TaskFault
from mdev.memory import address

if TYPE_CHECKING:
    from mdev.board.device import Device
    from mdev.board.stream import DeviceStream


# the core a kernel runs on -> (code of a fault, code of a trap), as the task scheduler
# reports them for AIV and AIC kernel tasks
FAULT_CODES = {
    "vector": (E.ACL_ERROR_RT_VECTOR_CORE_EXCEPTION, E.ACL_ERROR_RT_VECTOR_CORE_TRAP_EXCEPTION),
    "cube": (E.ACL_ERROR_RT_AICORE_EXCEPTION, E.ACL_ERROR_RT_AICORE_TRAP_EXCEPTION),
}


class KernelFault(TaskFault):
    def __init__(self, message: str, core: str = "vector", trap: bool = False) -> None:
        super().__init__(FAULT_CODES[core][trap], message)


class KernelTrap(Exception):
    """Raised by ``ctx.trap()``: the block executed a trap instruction."""


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
                 client: int, name: str, deadline: float | None, watch: bool = False, core: str = "vector") -> None:
        self.device = device
        self.stream = stream
        self.num_blocks = num_blocks
        self.pinned = pinned          # (host base, size, segment) of the launching process, and
                                      # (VMM address, size, device location) of its mappings
        self.client = client
        self.name = name
        self.core = core
        self.deadline = deadline
        # MDEV_SANITIZE: (location, view, snapshot) of every gm view, and the first bad access
        self.accesses: list | None = [] if watch else None
        self.fault: tuple | None = None
        self.spinning = threading.local()   # .on while a block of this launch spins (sanitizer)

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
            from mdev.board import sanitize
            view, root = sanitize.tracked(raw, self.spinning)
            self.accesses.append((location, raw, raw.copy(), root))
            raw = view
        view = raw[:len(raw) // dtype.itemsize * dtype.itemsize].view(dtype)
        return view.reshape(shape) if shape else view

    def _raw(self, ptr: int, nbytes: int, whole: bool) -> tuple[tuple, np.ndarray]:
        split = address.split(ptr)
        if split is not None:
            device, offset = split
            if device == self.device.index:
                block = self.device.allocator.find(offset)
                if block is None:
                    raise self.fault_of(f"kernel {self.name}: {ptr:#x} is not in a live allocation of device {device}")
                end = block.offset + block.size
                if whole:
                    nbytes = end - offset        # no count: the rest of the allocation
                if offset + nbytes > end:
                    raise self.fault_of(f"kernel {self.name}: {nbytes} bytes at {ptr:#x} overrun the "
                                      f"{block.size}-byte allocation at offset {block.offset:#x} "
                                      f"by {offset + nbytes - end} bytes")
                return ("d", device, offset), self.device.hbm.array[offset:offset + nbytes]
            return ("d", device, offset), self.device.view(("d", device, offset), nbytes, write=True)
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
                    return location, self.device.view(location, nbytes, write=True)
                except TaskFault as fault:
                    raise self.fault_of(f"kernel {self.name}: VMM address {ptr:#x}: {fault.message}") from None
        raise self.fault_of(f"kernel {self.name}: {ptr:#x} is neither device memory, pinned host memory nor "
                          f"a mapped VMM address")

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
