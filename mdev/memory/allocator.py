"""Page-granular first-fit allocator for one device's HBM.

Runs inside the device process (the only writer of its HBM map of allocations).  Every
allocation starts on a boundary of its page size and occupies whole pages, so IPC
export checks and ``get_mem_info`` agree with the documented geometry.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field


@dataclass
class Block:
    offset: int
    size: int          # bytes the user asked for (bounds checks use this)
    reserved: int      # whole pages actually taken
    page: int
    owner: int         # client id (-1 once its owner freed it while it was still imported)
    policy: int
    importers: set = field(default_factory=set)    # clients that imported it over IPC
    grants: list = field(default_factory=list)     # (pid, start, end, row, importer or None):
                                                   # ranges others may touch (mdev.status)
    users: int = 0     # running tasks that use it: it is not handed out again before they end
    freed: bool = False    # released while in use: goes back to the free list with its last user


class OutOfMemory(Exception):
    pass


class Allocator:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.free: list[list[int]] = [[0, capacity]]   # sorted [offset, length] holes
        self.blocks: dict[int, Block] = {}
        self._starts: list[int] = []                    # sorted offsets of live blocks
        self.used = 0
        self._last: Block | None = None                 # find's last answer: bursts of tasks
                                                        # name the same allocation over and over

    def allocate(self, size: int, reserved: int, page: int, owner: int, policy: int) -> Block:
        for i, (start, length) in enumerate(self.free):
            aligned = -(-start // page) * page
            waste = aligned - start
            if length - waste >= reserved:
                self._carve(i, aligned, reserved)
                block = Block(aligned, size, reserved, page, owner, policy)
                self.blocks[aligned] = block
                bisect.insort(self._starts, aligned)
                self.used += reserved
                return block
        raise OutOfMemory(f"no hole of {reserved} bytes (used {self.used} of {self.capacity})")

    def _carve(self, i: int, start: int, size: int) -> None:
        hole_start, hole_len = self.free[i]
        pieces = []
        if start > hole_start:
            pieces.append([hole_start, start - hole_start])
        end, hole_end = start + size, hole_start + hole_len
        if hole_end > end:
            pieces.append([end, hole_end - end])
        self.free[i:i + 1] = pieces

    def release(self, offset: int) -> Block:
        block = self.blocks.pop(offset)
        if block is self._last:
            self._last = None
        del self._starts[bisect.bisect_left(self._starts, offset)]
        self.used -= block.reserved
        return_hole(self.free, block.offset, block.reserved)
        return block

    def find(self, offset: int) -> Block | None:
        """The live block containing ``offset``."""
        block = self._last
        if block is not None and block.offset <= offset < block.offset + block.reserved:
            return block
        i = bisect.bisect_right(self._starts, offset) - 1
        if i < 0:
            return None
        block = self.blocks[self._starts[i]]
        if offset < block.offset + block.reserved:
            self._last = block
            if self.blocks.get(block.offset) is not block:
                self._last = None    # released meanwhile by another thread: never cache a freed block
            return block
        return None

    def owned_by(self, owner: int) -> list[Block]:
        return [b for b in self.blocks.values() if b.owner == owner]


def return_hole(holes: list[list[int]], start: int, size: int) -> None:
    """Give [start, start+size) back to a sorted list of [start, size] holes, merging it
    with the hole on its right, then the one on its left."""
    i = bisect.bisect_left(holes, [start, 0])
    holes.insert(i, [start, size])
    if i + 1 < len(holes) and start + size == holes[i + 1][0]:
        holes[i][1] += holes.pop(i + 1)[1]
    if i > 0 and holes[i - 1][0] + holes[i - 1][1] == start:
        holes[i - 1][1] += holes.pop(i)[1]
