"""racecheck: bytes touched by two tasks that nothing orders, at least one of them writing.

Each region keeps the accesses that may still race with something.  A new access is
compared with every overlapping one of them; neither being ordered before the other
(``order.before``, both ways: a kernel's accesses arrive from the device after later
tasks were already checked) is a hazard.  The history stays short: an access is dropped
once a newer access of the same bytes is ordered after it and covers it (a write covers
anything, a read covers reads), and everything ordered before the host is dropped when
the host synchronises with nothing left in flight.
"""

from __future__ import annotations

from dataclasses import dataclass

from mdev.sanitizer.order import before
from mdev.sanitizer.regions import Region


@dataclass(eq=False)
class Access:
    lo: int
    hi: int
    write: bool
    comp: int
    epoch: int
    clock: dict
    who: str                # the task (or host call) that made it, for reports
    key: tuple              # (api, site): one report per pair of program sites and region
    serial: int             # submission order: the pair is named in the order the program made it
    fill: int | None = None     # a memset's byte (value waits read what it wrote)

    def ordered_before(self, other: "Access") -> bool:
        return before(self.comp, self.epoch, other.clock)


def _hazard(old: Access, new: Access) -> str:
    if old.write and new.write:
        return "write-after-write hazard"
    return "read-after-write hazard" if old.write else "write-after-read hazard"


def check(region: Region, new: Access, report, prune: bool) -> None:
    """Compare ``new`` with the region's history, report hazards, then add it."""
    kept = []
    for old in region.accesses:
        if old.lo < new.hi and new.lo < old.hi and (old.write or new.write) and old.comp != new.comp \
                and not old.ordered_before(new) and not new.ordered_before(old):
            lo, hi = max(old.lo, new.lo), min(old.hi, new.hi)
            first, second = (old, new) if old.serial < new.serial else (new, old)
            report("racecheck", _hazard(first, second), [
                f"{hi - lo} bytes at offset {lo - region.lo} of {region.name()} "
                f"(address {region.address(lo):#x}) are {'written' if first.write else 'read'} by one task "
                f"and {'written' if second.write else 'read'} by another with nothing ordering them",
                f"first:  {first.who}",
                f"second: {second.who}",
                "missing synchronisation: record an event (or notify, or value write) after the first and "
                "make the second's stream wait on it, or synchronise the first's stream from the host "
                "before the second is submitted",
            ], dedupe=(first.key, second.key, region.space, region.lo))
        if prune and new.lo <= old.lo and old.hi <= new.hi and (new.write or not old.write) \
                and old.ordered_before(new):
            continue            # whatever races with old races with new: it is reported there
        kept.append(old)
    kept.append(new)
    region.accesses = kept


def forget_before(regions, clock: dict) -> None:
    """Drop accesses ordered before ``clock`` (the host's, after a full synchronisation)."""
    for region in regions:
        if region.accesses:
            region.accesses = [a for a in region.accesses if not before(a.comp, a.epoch, clock)]
