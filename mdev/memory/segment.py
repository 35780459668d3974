"""POSIX shared-memory segments mapped into this process.

A segment is the unit every process of a board shares memory through: a device's HBM,
its control page (see ``mdev.board.status``), a host process's pinned buffers.  Creating
a segment only sets its size (tmpfs is sparse), so a 32 GiB HBM costs nothing until
pages are touched.
"""

from __future__ import annotations

import mmap

import numpy as np
import posix_ipc


class Segment:
    """One mapped POSIX shm object; ``array`` is a uint8 numpy view of all of it."""

    def __init__(self, name: str, size: int = 0, create: bool = False) -> None:
        flags = posix_ipc.O_CREX if create else 0
        shm = posix_ipc.SharedMemory(name, flags, mode=0o600, size=size if create else 0)
        try:
            self.size = shm.size
            self._mmap = mmap.mmap(shm.fd, shm.size)
        finally:
            shm.close_fd()
        self.name = name
        self.array = np.frombuffer(self._mmap, dtype=np.uint8)
        self.address = self.array.ctypes.data

    def release(self, start: int, length: int) -> None:
        """Give the pages of [start, start+length) back to the OS; they read as zero again."""
        page = mmap.PAGESIZE
        lo = -(-start // page) * page
        hi = (start + length) // page * page
        if hi > lo:
            self._mmap.madvise(mmap.MADV_REMOVE, lo, hi - lo)

    def close(self) -> None:
        """Unmap.  Views handed out to users keep the mapping alive until they die."""
        self.array = None
        try:
            self._mmap.close()
        except BufferError:
            pass  # a user still holds a numpy view; the mapping goes with the last view

    def unlink(self) -> None:
        unlink(self.name)


def unlink(name: str) -> None:
    try:
        posix_ipc.unlink_shared_memory(name)
    except posix_ipc.ExistentialError:
        pass
