"""Slots of the device's control-page tables (streams, events, notifies): which are free,
and which a host process holds.

    Lender (streams, events):  free SlotPool --lend(client, want)--> the client's slots
                                    ^                                   | the host makes and
                                    +--take_back(free ones) / release --+ destroys in them

    SlotPool (notifies): take() --> a slot the device fills itself --> give(slot)

A freed slot is handed out again only after every other was used: a stale handle of a
host names a slot that stays free as long as the table allows (the slot's generation on
the control page, which the device moves on, tells it apart after that).  The device (mdev.board.device) keeps one of these per table under its lock;
this module knows neither the device nor the control page.
"""

from __future__ import annotations

import collections


class SlotPool:
    """Free slots of a control-page table, the longest-free first: a slot comes back only
    after every other was used.  Never-used slots are a count, not a list: a device's fixed
    memory should not hold 65536 integers (a 1024-device board has 1024 devices)."""

    def __init__(self, size: int) -> None:
        self.size, self.fresh, self.freed = size, 0, collections.deque()

    def __bool__(self) -> bool:
        return self.fresh < self.size or bool(self.freed)

    def take(self) -> int:
        if self.fresh < self.size:
            self.fresh += 1
            return self.fresh - 1
        return self.freed.popleft()

    def give(self, slot: int) -> None:
        self.freed.append(slot)


class Lender:
    """The slots of one control-page table (streams, events) lent to host processes in
    blocks: a host makes and destroys its streams and events in the slots it holds without
    asking, telling the device in its task stream (the device checks each slot is the
    sender's).  At most ``limit`` slots are lent at once, so a device's limit counts the
    slots its hosts hold in reserve as taken."""

    def __init__(self, size: int, limit: int) -> None:
        self.pool = SlotPool(size)
        self.limit = limit
        self.count = 0
        self.of: dict[int, set[int]] = {}        # client -> the slots it holds

    def lend(self, client: int, want: int) -> list[int]:
        n = min(want, self.limit - self.count)
        slots = [self.pool.take() for _ in range(max(n, 0))]
        self.of.setdefault(client, set()).update(slots)
        self.count += len(slots)
        return slots

    def holds(self, client: int, slot: int) -> bool:
        return slot in self.of.get(client, ())

    def take_back(self, client: int, slots: list, live) -> None:
        """The client returns free slots of its lease (ones still in use stay its)."""
        held = self.of.get(client, set())
        for slot in slots:
            if slot in held and slot not in live:
                held.discard(slot)
                self.pool.give(slot)
                self.count -= 1

    def release(self, client: int) -> list[int]:
        """Every slot the client held comes back (it detached); returns them."""
        slots = list(self.of.pop(client, ()))
        for slot in slots:
            self.pool.give(slot)
        self.count -= len(slots)
        return slots
