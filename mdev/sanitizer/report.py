"""Sanitizer reports: what a checker found, printed as it is found and kept for the end.

    checker --Report--> Reports.add --> stderr (and MDEV_SANITIZE_LOG, if set)
                                    --> Reports.items (mdev.sanitizer.reports(); the summary)

A report is printed once: the same finding at the same program sites (a race inside a
loop, say) is counted, not repeated.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass

PREFIX = "========= "


@dataclass
class Report:
    checker: str            # memcheck / racecheck / initcheck / synccheck
    kind: str               # e.g. "out of bounds", "write-after-read hazard", "leak"
    lines: list[str]        # the first line says what; the rest name tasks, allocation, sites
    count: int = 1

    def text(self, pid: int) -> str:
        head = f"{PREFIX}mdev {self.checker} [{pid}]: {self.kind}: {self.lines[0]}"
        return "\n".join([head, *(f"{PREFIX}    {line}" for line in self.lines[1:])])


class Reports:
    def __init__(self) -> None:
        self.items: list[Report] = []
        self._seen: dict[tuple, Report] = {}
        self._lock = threading.Lock()
        self.log = os.environ.get("MDEV_SANITIZE_LOG") or None

    def add(self, checker: str, kind: str, lines: list[str], dedupe: tuple | None = None) -> None:
        key = (checker, kind, dedupe if dedupe is not None else tuple(lines))
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None:
                seen.count += 1
                return
            report = self._seen[key] = Report(checker, kind, lines)
            self.items.append(report)
        self._emit(report.text(os.getpid()))

    def finish(self) -> None:
        """At exit: the error summary, on stderr and in the log (``mdev run`` counts it)."""
        self._emit(self.summary())

    def summary(self) -> str:
        by = {}
        for r in self.items:
            by[r.checker] = by.get(r.checker, 0) + 1
        detail = ", ".join(f"{n} {c}" for c, n in sorted(by.items()))
        return f"{PREFIX}mdev sanitizer [{os.getpid()}]: ERROR SUMMARY: {len(self.items)} error(s)" + \
            (f" ({detail})" if detail else "")

    def _emit(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)
        if self.log:
            with open(self.log, "a") as f:
                f.write(text + "\n")
