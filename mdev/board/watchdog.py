"""Operator execution timeouts inside a device: a kernel launch still running at its deadline
is stopped (as a teardown stops it) and fails with its core's timeout code.

    kernel task --arm(launch, deadline)--> heap of deadlines <--one thread per device--
    launch ends --disarm-->                                     sleeps until the earliest

One thread serves every launch of the device, so a deadline costs a heap push, not a timer
thread per launch (every launch has one: the process's op execute timeout, 1091 s unless set).
A forced stream destroy gives its running launch a deadline the same way (mdev.board.stream).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from typing import Callable


_made = threading.Lock()


def of(device) -> "Watchdog":
    """The device's watchdog, made on first use."""
    with _made:
        dog = getattr(device, "watchdog", None)
        if dog is None:
            dog = device.watchdog = Watchdog()
        return dog


class Watchdog:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._live: set[int] = set()
        self._ids = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def arm(self, deadline: float, expire: Callable[[], None]) -> int:
        """Call ``expire`` at ``deadline`` (time.monotonic) unless disarmed first."""
        with self._cond:
            ticket = next(self._ids)
            self._live.add(ticket)
            heapq.heappush(self._heap, (deadline, ticket, expire))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="watchdog", daemon=True)
                self._thread.start()
            elif self._heap[0][1] == ticket:
                self._cond.notify()          # a new earliest deadline
        return ticket

    def disarm(self, ticket: int) -> None:
        with self._cond:
            self._live.discard(ticket)
            # a disarmed deadline leaves the heap only when it comes to the top, and every
            # launch arms one 1091 s ahead: without this the heap held every launch of the
            # last 18 minutes
            if len(self._heap) > 2 * len(self._live) + 64:
                self._heap = [entry for entry in self._heap if entry[1] in self._live]
                heapq.heapify(self._heap)

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._heap and self._heap[0][1] not in self._live:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                deadline, ticket, expire = self._heap[0]
                wait = deadline - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)
                self._live.discard(ticket)
            expire()
