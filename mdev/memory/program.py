"""The program's own (pageable) memory, reached by the kernel's cross-process copy.

    runtime copy / memset / kernel arguments on pageable memory
        --> ProgramMemory(pid).read_into / write / read_rows / write_rows
        --> process_vm_readv / process_vm_writev on the program's pid

The host runtime serves one program: the process it runs in (a Python program), or a C
program whose calls a host agent serves from another process (mdev.capi.agent, which
calls :func:`serve`).  Either way the program's pageable memory is copied by the kernel,
which checks every page at the moment of the copy: an address the program unmapped or
made read-only after the runtime first saw it is EFAULT, an error code for the caller,
never a SIGSEGV of the process (a look at the maps file could be stale by then).
"""

from __future__ import annotations

import ctypes
import os

import numpy as np

from mdev import errors as E
from mdev.errors import AclError
from mdev.memory.segment import map_private

_libc = ctypes.CDLL(None, use_errno=True)
_IOV_MAX = 1024


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


for _fn in (_libc.process_vm_readv, _libc.process_vm_writev):
    _fn.restype = ctypes.c_ssize_t
    _fn.argtypes = [ctypes.c_int, ctypes.POINTER(_Iovec), ctypes.c_ulong, ctypes.POINTER(_Iovec), ctypes.c_ulong,
                    ctypes.c_ulong]


def _address(buffer) -> int:
    """The address of a writable or readable contiguous buffer (numpy array, bytes, bytearray)."""
    if isinstance(buffer, np.ndarray):
        return buffer.ctypes.data
    if isinstance(buffer, bytes):
        return ctypes.cast(ctypes.c_char_p(buffer), ctypes.c_void_p).value or 0
    return ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer))


class ProgramMemory:
    """The memory of process ``pid``, the program the runtime serves."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    @property
    def maps(self) -> str:
        """Its memory map, as /proc shows it."""
        return f"/proc/{self.pid}/maps"

    def _transfer(self, write: bool, local: int, remote: list[tuple[int, int]], what: str) -> None:
        """Copy between one local buffer at ``local`` and the program's ranges ``remote``
        (address, length), in order; AclError 107000 if any byte is not reachable."""
        call = _libc.process_vm_writev if write else _libc.process_vm_readv
        for k in range(0, len(remote), _IOV_MAX):
            chunk = remote[k:k + _IOV_MAX]
            total = sum(n for _, n in chunk)
            if not total:
                continue
            rv = (_Iovec * len(chunk))(*(_Iovec(a, n) for a, n in chunk))
            lv = _Iovec(local, total)
            done = call(self.pid, ctypes.byref(lv), 1, rv, len(chunk), 0)
            if done != total:
                err = ctypes.get_errno() if done < 0 else 0
                start = chunk[0][0]
                raise AclError(E.ACL_ERROR_RT_PARAM_INVALID,
                               f"{what} {start:#x} (+{total} bytes) is not {'writable' if write else 'readable'} "
                               f"host memory of the program" + (f" ({os.strerror(err)})" if err else ""))
            local += total

    def read_into(self, address: int, buffer: np.ndarray, what: str = "pointer") -> None:
        """The program's bytes at ``address`` into ``buffer`` (contiguous, as long as wanted)."""
        self._transfer(False, _address(buffer), [(address, buffer.nbytes)], what)

    def read(self, address: int, nbytes: int, what: str = "pointer") -> bytes:
        data = bytearray(nbytes)
        if nbytes:
            self._transfer(False, _address(data), [(address, nbytes)], what)
        return bytes(data)

    def gather(self, ranges: list[tuple[int, int]], what: str = "pointer") -> list[bytes]:
        """The program's bytes of each (address, length), read together (one system call per
        1024 ranges: a caller's many small structures cost one round into the kernel)."""
        data = bytearray(sum(n for _, n in ranges))
        if data:
            self._transfer(False, _address(data), ranges, what)
        view, out, at = bytes(data), [], 0
        for _, n in ranges:
            out.append(view[at:at + n])
            at += n
        return out

    def write(self, address: int, data, what: str = "pointer") -> None:
        """``data`` (bytes, or a contiguous numpy array) into the program's memory at ``address``."""
        if isinstance(data, np.ndarray):
            data = np.ascontiguousarray(data)
        elif isinstance(data, memoryview):
            data = data.tobytes()       # kept alive here while its address is copied from
        nbytes = data.nbytes if isinstance(data, np.ndarray) else len(data)
        if nbytes:
            self._transfer(True, _address(data), [(address, nbytes)], what)

    def fill(self, address: int, nbytes: int, value: int, what: str = "pointer") -> None:
        self.write(address, np.full(nbytes, value & 0xFF, np.uint8), what)

    # -- pinned memory: a segment the program and the devices share
    def share(self, seg) -> int:
        """Where the program sees segment ``seg`` (mapped here: where this process has it)."""
        return seg.address

    def unshare(self, address: int, size: int) -> None:
        """The program lets go of a segment :meth:`share` placed (here: ``seg.close`` does)."""

    def map_over(self, seg, address: int) -> None:
        """``seg`` takes the place of the program's pages at ``address`` (registration)."""
        seg.map_over(address)

    def unmap_over(self, seg, address: int, size: int) -> None:
        """The pages at ``address`` become private ones again, with the segment's contents."""
        data = seg.array.copy()
        map_private(address, size)
        self.write(address, data)

    def read_rows(self, address: int, pitch: int, width: int, height: int, what: str = "pointer") -> np.ndarray:
        """``height`` rows of ``width`` bytes, ``pitch`` apart, as a (height, width) array."""
        out = np.empty((height, width), np.uint8)
        self._transfer(False, out.ctypes.data, [(address + r * pitch, width) for r in range(height)], what)
        return out

    def write_rows(self, address: int, pitch: int, rows: np.ndarray, what: str = "pointer") -> None:
        """A (height, width) array into rows ``pitch`` apart (the bytes between rows untouched)."""
        rows = np.ascontiguousarray(rows)
        height, width = rows.shape
        self._transfer(True, rows.ctypes.data, [(address + r * pitch, width) for r in range(height)], what)


_serving = ProgramMemory(os.getpid())


def program() -> ProgramMemory:
    """The program whose memory this runtime serves (this process, unless :func:`serve` said)."""
    if _serving.pid != os.getpid() and not _remote:
        _serving.pid = os.getpid()          # a forked child serves itself
    return _serving


_remote = False


def serve(memory: ProgramMemory) -> None:
    """From now on the runtime serves another process's memory (a host agent's client)."""
    global _remote, _serving
    _remote = True
    _serving = memory
