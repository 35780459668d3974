"""Sleeping on a word of shared memory until another process changes it (Linux futex).

    host thread --wait(addr, seen, timeout)--> sleeps while the 32-bit word at addr == seen
    device      --store new value; wake(addr)--> every sleeper on the word wakes

The word lives in a shared mapping (a control page), so the futex is a shared one (no
FUTEX_PRIVATE_FLAG): the kernel keys it by the page, whatever address each process maps it
at.  A wake that races a sleeper going to sleep can be missed on weakly ordered stores, so
callers always sleep with a timeout and look again: a lost wake costs one timeout.  ctypes
releases the GIL for the call, so other threads run while one sleeps.

``AVAILABLE`` is False where the futex system call number is not known (the callers then
wait by other means).
"""

from __future__ import annotations

import ctypes
import platform

_SYS_FUTEX = {"x86_64": 202, "aarch64": 98, "riscv64": 98, "ppc64le": 221, "s390x": 238}.get(platform.machine())
FUTEX_WAIT, FUTEX_WAKE = 0, 1
_WAKE_ALL = 0x7FFFFFFF

AVAILABLE = _SYS_FUTEX is not None
_syscall = ctypes.CDLL(None, use_errno=True).syscall
_syscall.restype = ctypes.c_long


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def wait(address: int, seen: int, timeout_s: float) -> None:
    """Sleep while the 32-bit word at ``address`` holds ``seen`` (its low 32 bits), at most
    ``timeout_s``; returns early on a wake, a change, or a signal."""
    ts = _Timespec(int(timeout_s), int(timeout_s % 1 * 1e9))
    _syscall(_SYS_FUTEX, ctypes.c_void_p(address), FUTEX_WAIT, ctypes.c_uint32(seen & 0xFFFFFFFF),
             ctypes.byref(ts), None, 0)


def wake(address: int) -> None:
    """Wake every thread sleeping on the word at ``address`` (in any process)."""
    _syscall(_SYS_FUTEX, ctypes.c_void_p(address), FUTEX_WAKE, _WAKE_ALL, None, None, 0)

