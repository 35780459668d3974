"""Device side of the sanitizer (MDEV_SANITIZE): what a kernel launch touched.

    host: sanitize_start(client) --> device.sanitized (clients whose launches are watched)
    kernel task --> Launch.memory logs (location, view, snapshot) of each ctx.gm view, and
                    hands the kernel a Tracked view that notes the bytes written through it
                --> report(): bytes read; ranges written (noted, or view != snapshot); first fault
                --> ("sanitize", {...}) on the client's task socket, before the task completes

Copies, memsets and the other stream tasks need nothing from here: the host knows their
bytes from their arguments.  Only kernels choose their addresses while they run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mdev.board.tasks import request

try:
    from numpy.lib.array_utils import byte_bounds
except ImportError:                      # numpy < 2
    from numpy import byte_bounds

if TYPE_CHECKING:
    from mdev.board.device import Device
    from mdev.kernel.context import Launch

MAX_WRITE_RANGES = 64      # per view; a scattered write beyond that is sent as its bounding range


@request
def sanitize_start(device: "Device", conn, client: int) -> None:
    with device.lock:
        watched = getattr(device, "sanitized", set())
        device.sanitized = {c for c in watched if c in device.clients} | {client}


@request
def sanitize_stop(device: "Device", conn, client: int) -> None:
    with device.lock:
        device.sanitized = getattr(device, "sanitized", set()) - {client}


class Root:
    """One ctx.gm view's bytes [lo, hi) (addresses) and the ranges written into them."""

    def __init__(self, view: np.ndarray) -> None:
        self.lo, self.hi = byte_bounds(view)
        self.writes: list[tuple[int, int]] = []

    def note(self, array: np.ndarray) -> None:
        lo, hi = byte_bounds(array)
        if self.lo <= lo and hi <= self.hi:        # a copy made from the view is not the view
            self.writes.append((lo - self.lo, hi - self.lo))


_WRITERS = {np.copyto, np.put, np.putmask, np.place}


class Tracked(np.ndarray):
    """A kernel's view of device memory that notes what is written through it.

    Comparing bytes before and after misses a write of the value already there (zeros into
    fresh memory), which would make an output look like an unwritten input."""

    _root: Root | None = None

    def __array_finalize__(self, obj) -> None:
        self._root = getattr(obj, "_root", None)

    def _wrote(self, array=None) -> None:
        if self._root is not None:
            self._root.note(self if array is None else array)

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        target = self[(key if isinstance(key, tuple) else (key,)) + (Ellipsis,)]
        self._wrote(target if isinstance(target, np.ndarray) and target.base is not None else None)

    def fill(self, value) -> None:
        super().fill(value)
        self._wrote()

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        plain = [x.view(np.ndarray) if isinstance(x, Tracked) else x for x in inputs]
        if out is not None:
            kwargs["out"] = tuple(o.view(np.ndarray) if isinstance(o, Tracked) else o for o in out)
        result = getattr(ufunc, method)(*plain, **kwargs)
        written = list(out or ()) + ([inputs[0]] if method == "at" else [])
        for o in written:
            if isinstance(o, Tracked):
                o._wrote()
        if out is not None:        # in-place operators rebind the name: keep it tracked
            return out[0] if len(out) == 1 else out
        return result

    def __array_function__(self, func, types, args, kwargs):
        result = super().__array_function__(func, types, args, kwargs)
        if func in _WRITERS and isinstance(args[0], Tracked):
            args[0]._wrote()
        return result


def tracked(raw: np.ndarray) -> tuple[np.ndarray, Root]:
    view = raw.view(Tracked)
    view._root = Root(raw)
    return view, view._root


def watching(device: "Device", client: int) -> bool:
    return client in getattr(device, "sanitized", ())


def _written(view: np.ndarray, snapshot: np.ndarray) -> list[tuple[int, int]]:
    changed = np.flatnonzero(view != snapshot)
    if not len(changed):
        return []
    breaks = np.flatnonzero(np.diff(changed) > 1)
    starts = np.concatenate(([changed[0]], changed[breaks + 1]))
    ends = np.concatenate((changed[breaks], [changed[-1]])) + 1
    return [(int(a), int(b)) for a, b in zip(starts, ends)]


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    if len(out) > MAX_WRITE_RANGES:
        return [(out[0][0], out[-1][1])]
    return [(lo, hi) for lo, hi in out]


def report(device: "Device", stream, launch: "Launch") -> None:
    conn = device.main_conns.get(stream.client)
    if conn is None or stream.running_task is None:
        return
    # words a kernel that spins or adds atomically touches are its flags: synchronisation
    accesses = [(loc, len(view), _merge(root.writes + _written(view, snapshot)),
                 launch.synchronises and len(view) <= 8)
                for loc, view, snapshot, root in launch.accesses]
    conn.send(("sanitize", {"slot": stream.slot, "seq": stream.running_task[0], "accesses": accesses,
                            "fault": launch.fault, "inner": getattr(stream, "position", None)}))
