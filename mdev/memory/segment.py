"""POSIX shared-memory segments mapped into this process.

A segment is the unit every process of a board shares memory through: a device's HBM,
its control page (see ``mdev.status``), a host process's pinned buffers.  Creating
a segment only sets its size (tmpfs is sparse), so a 32 GiB HBM costs nothing until
pages are touched.
"""

from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
import struct

import numpy as np
import posix_ipc

_FLOCK = "hhqqixxxx"      # struct flock: type, whence, start, len, pid (Linux, LP64)
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
MAP_FIXED, MAP_NORESERVE = 0x10, 0x4000


class Segment:
    """One mapped POSIX shm object; ``array`` is a uint8 numpy view of all of it."""

    def __init__(self, name: str, size: int = 0, create: bool = False) -> None:
        """Map segment ``name``: a new one of ``size`` bytes with ``create`` (FileExistsError
        if the name exists: it is left alone), else an existing one, which must be this
        user's (PermissionError otherwise: a segment another user made under an expected
        name is never mapped)."""
        shm = None
        try:
            shm = posix_ipc.SharedMemory(name, posix_ipc.O_CREX if create else 0, mode=0o600,
                                         size=size if create else 0)
            st = os.fstat(shm.fd)
            if not create and st.st_uid != os.geteuid():
                raise PermissionError(f"{name} is another user's segment")
            self._identity = (st.st_dev, st.st_ino)     # what a re-open by name must find
            self.size = shm.size
            self._mmap = mmap.mmap(shm.fd, shm.size)
        except posix_ipc.ExistentialError as exc:
            if create:          # someone else's name: left alone
                raise FileExistsError(f"{name} exists already") from exc
            raise
        except BaseException:
            if create:
                unlink(name)    # made here (perhaps before its sizing failed), and of no use
            raise
        finally:
            if shm is not None:
                shm.close_fd()
        self.name = name
        self.array = np.frombuffer(self._mmap, dtype=np.uint8)
        self.address = self.array.ctypes.data
        self._fd = -1            # a descriptor of the shm file, opened on first need
        # views of its bytes that a user makes once and looks up at every use (they go with it)
        self.views: dict = {}

    def _file(self) -> int:
        if self._fd < 0:
            self._fd = self.reopen(os.O_RDWR)
        return self._fd

    def reopen(self, flags: int) -> int:
        """A new descriptor of this segment, by its name (mappings hold no descriptor: a
        board maps thousands).  FileNotFoundError once the name is gone or names another
        file: after an unlink, anyone could have made a file of that name."""
        fd = os.open(f"/dev/shm{self.name}", flags | os.O_NOFOLLOW | os.O_CLOEXEC)
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != self._identity:
            os.close(fd)
            raise FileNotFoundError(f"{self.name} was removed (the name is another file now)")
        return fd

    def reserve(self, start: int, length: int) -> None:
        """Back the bytes [start, start+length) with pages now (the rest of the segment stays
        sparse): touching them later can no longer fail with SIGBUS.  OSError (ENOSPC) when
        /dev/shm cannot hold them; what it took by then is given back."""
        try:
            os.posix_fallocate(self._file(), start, length)
        except OSError:
            self.release(start, length)
            raise

    def locked(self, start: int, length: int) -> "RangeLock":
        """An exclusive lock on bytes [start, start+length), to hold in a ``with``, against every
        other process's ``locked`` of them (an open-file-description lock: it belongs to this
        mapping, so closing another descriptor of the file never drops it).  Threads of one
        process do not exclude each other through it."""
        return RangeLock(self._file(), start, length)

    def release(self, start: int, length: int) -> None:
        """Give the pages of [start, start+length) back to the OS; they read as zero again."""
        page = mmap.PAGESIZE
        lo = -(-start // page) * page
        hi = (start + length) // page * page
        if hi > lo:
            self._mmap.madvise(mmap.MADV_REMOVE, lo, hi - lo)

    def map_over(self, address: int) -> None:
        """Map this segment a second time, at ``address`` exactly, replacing what was mapped
        there (host memory registration: the user's pages become shared ones)."""
        fd = self.reopen(os.O_RDWR)
        try:
            _mmap_fixed(address, self.size, mmap.MAP_SHARED, fd, f"cannot map {self.name} at {address:#x}")
        finally:
            os.close(fd)

    def detach_writes(self) -> None:
        """From now on this mapping is a private copy-on-write one: readers through it still
        see the segment (until they write a page), writes stay in this process's pages and
        never reach the segment.  Atomic for other threads using the mapping (the kernel
        swaps it under its memory-map lock), so a writer mid-copy cannot fault."""
        flags = mmap.MAP_PRIVATE | MAP_NORESERVE
        try:
            fd = self.reopen(os.O_RDONLY)
        except OSError:          # unlinked: nothing to read through any more
            fd, flags = -1, flags | mmap.MAP_ANONYMOUS
        try:
            _mmap_fixed(self.address, self.size, flags, fd, f"cannot detach {self.name}")
        finally:
            if fd >= 0:
                os.close(fd)

    def close(self) -> None:
        """Unmap.  Views handed out to users keep the mapping alive until they die."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.array = None
        try:
            self._mmap.close()
        except BufferError:
            pass  # a user still holds a numpy view; the mapping goes with the last view

    def unlink(self) -> None:
        unlink(self.name)


def _mmap_fixed(address: int, size: int, flags: int, fd: int, what: str) -> None:
    """mmap(2) at exactly ``address`` (MAP_FIXED), read-write."""
    result = _libc.mmap(address, size, mmap.PROT_READ | mmap.PROT_WRITE, flags | MAP_FIXED, fd, 0)
    if result in (None, ctypes.c_void_p(-1).value):
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def map_private(address: int, size: int) -> None:
    """Give [address, address+size) fresh private memory of this process (zero pages)."""
    _mmap_fixed(address, size, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, f"cannot remap {address:#x}")


def unlink(name: str) -> None:
    """Remove segment ``name`` if it exists; PermissionError if it is another user's."""
    try:
        posix_ipc.unlink_shared_memory(name)
    except posix_ipc.ExistentialError:
        pass
    except posix_ipc.PermissionsError as exc:
        raise PermissionError(f"cannot remove {name}: {exc}") from exc


class RangeLock:
    """Segment.locked's lock (a class: a lock counted in at every collective costs less so
    than as a generator)."""

    __slots__ = ("fd", "start", "length")

    def __init__(self, fd: int, start: int, length: int) -> None:
        self.fd, self.start, self.length = fd, start, length

    def __enter__(self) -> None:
        fcntl.fcntl(self.fd, fcntl.F_OFD_SETLKW, struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, self.start,
                                                             self.length, 0))

    def __exit__(self, *exc) -> None:
        fcntl.fcntl(self.fd, fcntl.F_OFD_SETLKW, struct.pack(_FLOCK, fcntl.F_UNLCK, os.SEEK_SET, self.start,
                                                             self.length, 0))
