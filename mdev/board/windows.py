"""The mappings a kernel launch reaches memory through, so that its writes can be cut off.

    Launch --take()------> a mapping of this device's HBM from the device's pool (kept warm:
                           a mapping's page tables fill once, not at every launch)
           --segment()---> a mapping of another segment it touches (a peer's HBM, a pinned
                           host buffer), made for this launch
    teardown --revoke()--> every mapping of the launch becomes a private copy: the kernel
                           goes on reading, its writes stay in pages of its own and vanish
                           with them; a mapping revoked never returns to the pool

A Python kernel cannot be stopped from outside while it runs; revoking its mappings is what
ends its effects on memory the moment a stream, context or process is torn down (and its
next ``ctx.gm`` faults).  Memory that a running task uses is also not handed out again
before the task ends (``DeviceMemory.pin``, mdev.board.hbm), whoever frees it.
"""

from __future__ import annotations

import threading

from mdev.memory.segment import Segment


class WindowPool:
    """Spare mappings of one segment (a device's own HBM)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._spare: list[Segment] = []
        self._lock = threading.Lock()

    def take(self) -> Segment:
        with self._lock:
            if self._spare:
                return self._spare.pop()
        return Segment(self.name)

    def give(self, window: Segment) -> None:
        with self._lock:
            self._spare.append(window)


class LaunchWindows:
    """The mappings of one kernel launch."""

    def __init__(self, pool: WindowPool) -> None:
        self.pool = pool
        self.hbm = pool.take()
        self._others: dict[str, Segment] = {}
        self._lock = threading.Lock()
        self.revoked = False

    def segment(self, name: str) -> Segment:
        """This launch's own mapping of segment ``name`` (an OSError if it is gone)."""
        with self._lock:
            window = self._others.get(name)
            if window is None:
                if self.revoked:
                    raise OSError(f"{name}: the launch was stopped")
                window = self._others[name] = Segment(name)
        return window

    def revoke(self) -> None:
        """Cut the launch's writes off memory, now (see the module docstring)."""
        with self._lock:
            if self.revoked:
                return
            self.revoked = True
            windows = [self.hbm, *self._others.values()]
        for window in windows:
            window.detach_writes()

    def close(self) -> None:
        """The launch ended: its HBM mapping goes back to the pool (unless revoked)."""
        with self._lock:
            others, self._others = list(self._others.values()), {}
            revoked = self.revoked
        for window in others:
            window.close()
        if revoked:
            self.hbm.close()
        else:
            self.pool.give(self.hbm)
