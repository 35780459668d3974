"""Engines of a device: a fixed number of slots that ready tasks compete for.

A stream worker acquires the engine its task needs (DMA for copies, compute for kernels)
before running it.  When a slot frees, the waiting task of the highest-priority stream
(smallest number) gets it, ties in arrival order; a running task is never pre-empted.
"""

from __future__ import annotations

import heapq
import itertools
import threading


class Engine:
    def __init__(self, name: str, slots: int) -> None:
        self.name = name
        self.slots = slots
        self._free = slots
        # the hot paths (try_acquire, release) take the plain lock: entering the Condition
        # is a Python-level call on every small task
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self.waiters: list[tuple[int, int, int]] = []    # a heap of (priority, ticket, slots)
        self._tickets = itertools.count()

    def acquire(self, priority: int, n: int = 1) -> None:
        """Take ``n`` slots (a kernel wave takes one per block)."""
        n = min(n, self.slots)
        with self._cond:
            if self._free >= n and not self.waiters:
                self._free -= n
                return
            entry = (priority, next(self._tickets), n)
            heapq.heappush(self.waiters, entry)
            while not (self._free >= n and self.waiters[0] == entry):
                self._cond.wait()
            heapq.heappop(self.waiters)
            self._free -= n
            if self._free and self.waiters:
                self._cond.notify_all()

    def try_acquire(self) -> bool:
        """Take a slot only if one is free and nobody waits (never jumps the priority queue)."""
        with self._lock:
            if self._free and not self.waiters:
                self._free -= 1
                return True
            return False

    def release(self, n: int = 1) -> None:
        with self._lock:
            self._free += min(n, self.slots)
            if self.waiters:
                self._cond.notify_all()

    @property
    def in_use(self) -> int:
        return self.slots - self._free

    @property
    def waiting(self) -> int:
        """Tasks queued for a slot."""
        return len(self.waiters)
