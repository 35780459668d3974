"""What /proc says: whether another process is gone, how much memory the machine has, and
how many of its cores a process may run on.

Hosts ask it of device processes (is a link's device dead?), the supervisor of the device
processes it forked (can a dead one be restarted?).  A process that was killed shows as a
zombie as soon as its main thread has exited, before it can be reaped.  Pinning host memory
asks how much RAM is left to pin.  Whole collectives share work among, and let waiting
ranks spin on, as many ranks as there are cores.
"""

from __future__ import annotations

import os


def process_gone(pid: int) -> bool:
    """Process ``pid`` has exited or is a zombie.  Read from /proc with os calls only: API
    calls from ``__del__`` while the interpreter shuts down get here after sys.modules was
    emptied (psutil can no longer find itself) and ``open`` left the builtins."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return True
    try:
        fields = os.read(fd, 4096)
    finally:
        os.close(fd)
    return fields[fields.rindex(b")") + 2:][:1] in (b"Z", b"X")      # state follows "(comm) "


def cores() -> int:
    """The CPUs this process may run on (its affinity, which a container or taskset narrows)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def memory_available() -> int | None:
    """Bytes of RAM the kernel can give without swapping (MemAvailable), None if unknown."""
    try:
        with open("/proc/meminfo", "rb") as meminfo:
            for line in meminfo:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
