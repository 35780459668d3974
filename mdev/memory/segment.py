"""POSIX shared-memory segments mapped into this process.

A segment is the unit every process of a board shares memory through: a device's HBM,
its control page (see ``mdev.board.status``), a host process's pinned buffers.  Creating
a segment only sets its size (tmpfs is sparse), so a 32 GiB HBM costs nothing until
pages are touched.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import posix_ipc

_FLOCK = "hhqqixxxx"      # struct flock: type, whence, start, len, pid (Linux, LP64)


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
        self._lock_fd = -1

    @contextmanager
    def locked(self, start: int, length: int) -> Iterator[None]:
        """Hold an exclusive lock on bytes [start, start+length) against every other
        process's ``locked`` of them (an open-file-description lock: it belongs to this
        mapping, so closing another descriptor of the file never drops it).  Threads of one
        process do not exclude each other through it."""
        if self._lock_fd < 0:
            self._lock_fd = os.open(f"/dev/shm{self.name}", os.O_RDWR | os.O_CLOEXEC)
        fcntl.fcntl(self._lock_fd, fcntl.F_OFD_SETLKW, struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, start, length, 0))
        try:
            yield
        finally:
            fcntl.fcntl(self._lock_fd, fcntl.F_OFD_SETLKW, struct.pack(_FLOCK, fcntl.F_UNLCK, os.SEEK_SET, start, length, 0))

    def release(self, start: int, length: int) -> None:
        """Give the pages of [start, start+length) back to the OS; they read as zero again."""
        page = mmap.PAGESIZE
        lo = -(-start // page) * page
        hi = (start + length) // page * page
        if hi > lo:
            self._mmap.madvise(mmap.MADV_REMOVE, lo, hi - lo)

    def close(self) -> None:
        """Unmap.  Views handed out to users keep the mapping alive until they die."""
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1
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
