"""Where an access lands: the allocation (region) behind a device-side location.

Tasks name memory as device processes do -- ``("d", device, offset)`` in a device's HBM,
``("p", segment, offset)`` in a pinned buffer -- and the checkers keep their state per
region: the allocation holding those bytes, with its size and the program site that
allocated it.  Memory this process did not allocate (VMM physical memory, allocations
made before the sanitizer started) falls into 1 MiB chunks with no name and counts as
initialised.  Freed allocations are remembered (a bounded history) so that a stale
pointer is reported as a use after free of *that* allocation.
"""

from __future__ import annotations

import bisect
import collections
from dataclasses import dataclass, field

from mdev.memory import address
from mdev.runtime.memtable import DEVICE, Allocation

CHUNK = 1 << 20
FREED_HISTORY = 4096


@dataclass(eq=False)
class Region:
    space: tuple                  # ("d", device) or ("p", segment name)
    lo: int                       # [lo, hi) in the space's offsets
    hi: int
    alloc: Allocation | None
    site: str = ""                # where it was allocated
    written: list | None = None   # initcheck: sorted disjoint [lo, hi) pieces; None = all initialised
    accesses: list = field(default_factory=list)   # racecheck history

    def name(self) -> str:
        a = self.alloc
        if a is None:
            return f"memory at {self.space[0]}:{self.space[1]} offset {self.lo:#x} (not allocated by this process)"
        kind = f"device {a.device} memory" if a.kind == DEVICE else "pinned host memory"
        where = f", allocated at {self.site}" if self.site else ""
        return f"allocation {a.ptr:#x} ({a.size} bytes of {kind}{where})"

    def address(self, offset: int) -> int:
        """The pointer a user knows for byte ``offset`` of the space."""
        return self.alloc.ptr + offset - self.lo if self.alloc is not None else offset


@dataclass
class Freed:
    alloc: Allocation
    site: str
    freed_at: str


class Regions:
    def __init__(self, runtime) -> None:
        self.runtime = runtime                  # its MemoryTable is new after each finalize
        self.live: dict[int, Region] = {}       # allocation ptr -> region
        self._chunks: dict[tuple, Region] = {}
        self._freed: collections.OrderedDict[int, Freed] = collections.OrderedDict()
        self._freed_starts: list[int] = []

    # ------------------------------------------------------------------ lifetime
    def allocated(self, alloc: Allocation, site: str) -> None:
        space, lo = _space_of(alloc)
        # imported memory was written by its exporter: it counts as initialised
        written = [] if alloc.ipc_key is None and alloc.kind == DEVICE else None
        self.live[alloc.ptr] = Region(space, lo, lo + alloc.size, alloc, site, written)

    def freed(self, alloc: Allocation, site: str) -> Region | None:
        region = self.live.pop(alloc.ptr, None)
        self._freed[alloc.ptr] = Freed(alloc, region.site if region else "", site)
        self._freed.move_to_end(alloc.ptr)
        while len(self._freed) > FREED_HISTORY:
            self._freed.popitem(last=False)
        self._freed_starts = sorted(self._freed)
        return region

    def freed_containing(self, ptr: int) -> Freed | None:
        i = bisect.bisect_right(self._freed_starts, ptr) - 1
        if i >= 0:
            f = self._freed[self._freed_starts[i]]
            if ptr < f.alloc.ptr + max(f.alloc.size, 1):
                return f
        return None

    def nearest(self, ptr: int) -> Region | None:
        """The live allocation closest to a pointer that is in none (for out-of-bounds reports)."""
        same = [r for r in self.live.values() if r.alloc.kind == DEVICE and
                address.split(r.alloc.ptr)[0] == (address.split(ptr) or (None,))[0]]
        return min(same, key=lambda r: min(abs(ptr - r.alloc.ptr), abs(ptr - r.alloc.end)), default=None)

    # ------------------------------------------------------------------ lookup
    def pieces(self, location: tuple, nbytes: int):
        """(region, lo, hi) for the bytes [offset, offset + nbytes) of a location."""
        kind, key, offset = location
        end = offset + nbytes
        while offset < end:
            region = self._region(kind, key, offset)
            hi = min(end, region.hi)
            yield region, offset, hi
            offset = hi

    def of(self, alloc: Allocation) -> Region:
        region = self.live.get(alloc.ptr)
        if region is None:      # allocated before the sanitizer started
            space, lo = _space_of(alloc)
            region = self.live[alloc.ptr] = Region(space, lo, lo + alloc.size, alloc)
        return region

    def _region(self, kind: str, key, offset: int) -> Region:
        if kind == "d":
            alloc = self.runtime.memory.containing(address.device_base(key) + offset)
        else:
            alloc = next((self.runtime.memory.get(base) for base, size, name in self.runtime.memory.pinned_map()
                          if name == key and 0 <= offset < size), None)
        if alloc is not None:
            return self.of(alloc)
        chunk = (kind, key, offset // CHUNK)
        region = self._chunks.get(chunk)
        if region is None:
            lo = offset // CHUNK * CHUNK
            region = self._chunks[chunk] = Region((kind, key), lo, lo + CHUNK, None)
        return region

    def all(self):
        yield from self.live.values()
        yield from self._chunks.values()


def _space_of(alloc: Allocation) -> tuple[tuple, int]:
    if alloc.kind == DEVICE:
        return ("d", alloc.device), alloc.ptr - address.device_base(alloc.device)
    return ("p", alloc.segment.name), 0
