"""initcheck: reads of device memory that nothing ever wrote.

A fresh device allocation holds garbage on real hardware; each region keeps the byte
ranges written since it was allocated (sorted, disjoint, merged), in the order the
happens-before model runs the tasks.  A read of bytes outside them is reported once,
after which they count as written so that a loop does not repeat the report.  While a
kernel's report of what it wrote is still on its way, a read of unwritten bytes waits for
it: the kernel may be the writer.  Memory
imported over IPC, or exported to other processes, counts as written: the writes of
another process are out of sight.
"""

from __future__ import annotations

import bisect

from mdev.sanitizer.regions import Region


def mark(region: Region, lo: int, hi: int) -> None:
    pieces = region.written
    if pieces is None or lo >= hi:
        return
    starts = [p[0] for p in pieces]
    i = bisect.bisect_left(starts, lo)
    if i and pieces[i - 1][1] >= lo:       # touches the piece before
        i -= 1
    j = i
    while j < len(pieces) and pieces[j][0] <= hi:
        lo, hi = min(lo, pieces[j][0]), max(hi, pieces[j][1])
        j += 1
    pieces[i:j] = [(lo, hi)]


def missing(region: Region, lo: int, hi: int) -> list[tuple[int, int]]:
    """The parts of [lo, hi) never written."""
    if region.written is None:
        return []
    out, pos = [], lo
    for a, b in region.written:
        if b <= pos:
            continue
        if a >= hi:
            break
        if a > pos:
            out.append((pos, a))
        pos = max(pos, b)
    if pos < hi:
        out.append((pos, hi))
    return out


def holes(region: Region, lo: int, hi: int) -> list[tuple[int, int]]:
    """The bytes of a read of [lo, hi) nothing wrote."""
    if region.alloc is not None and region.alloc.exports:
        return []   # exported over IPC: other processes write it where this one cannot see
    return missing(region, lo, hi)


def still_missing(region: Region, gaps: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return [piece for a, b in gaps for piece in missing(region, a, b)]


def report_read(region: Region, lo: int, hi: int, holes: list, who: str, key: tuple, report) -> None:
    n = sum(b - a for a, b in holes)
    first = holes[0][0]
    report("initcheck", "uninitialised read", [
        f"{n} of {hi - lo} bytes read at offset {first - region.lo} of {region.name()} "
        f"(address {region.address(first):#x}) were never written",
        f"by: {who}",
    ], dedupe=(region.lo, region.space, key))
    for a, b in holes:
        mark(region, a, b)
