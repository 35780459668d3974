"""Device side of the sanitizer (MDEV_SANITIZE): what a kernel launch touched.

    host: sanitize_start(client) --> device.sanitized (clients whose launches are watched)
    kernel task --> Launch.memory logs (location, view, snapshot, root) of each ctx.gm view,
                    and hands the kernel a Tracked view that notes what is read and written
                    through it (into the root)
                --> report(): ranges read, ranges written (noted, or view != snapshot), flags,
                    first fault
                --> ("sanitize", {...}) on the client's task socket, before the task completes

Copies, memsets and the other stream tasks need nothing from here: the host knows their
bytes from their arguments.  Only kernels choose their addresses while they run.
A launch (mdev.board.block) makes its tracked views here, so this module knows no launch:
``report`` is handed the launch's log and its first fault.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import threading

import numpy as np

from mdev.board.tasktable import own_client, request

try:
    from numpy.lib.array_utils import byte_bounds
except ImportError:                      # numpy < 2
    from numpy import byte_bounds

if TYPE_CHECKING:
    from mdev.board.device import Device
    from mdev.board.stream import DeviceStream

MAX_WRITE_RANGES = 64      # per view; a scattered write beyond that is sent as its bounding range


@request
def sanitize_start(device: "Device", conn, client: int) -> None:
    own_client(conn, client)
    with device.lock:
        watched = getattr(device, "sanitized", set())
        device.sanitized = {c for c in watched if c in device.clients} | {client}


@request
def sanitize_stop(device: "Device", conn, client: int) -> None:
    own_client(conn, client)
    with device.lock:
        device.sanitized = getattr(device, "sanitized", set()) - {client}


class Root:
    """One ctx.gm view's bytes [lo, hi) (addresses), and the ranges read and written
    through it.  A read made while its block spins (``ctx.spin_until``), or a word updated
    with ``ctx.atomic_add``, makes the view a flag: synchronisation, not data."""

    def __init__(self, view: np.ndarray, spinning: threading.local) -> None:
        self.lo, self.hi = byte_bounds(view)
        self.reads: list[tuple[int, int]] = []
        self.writes: list[tuple[int, int]] = []
        self.flag = False
        self._spinning = spinning

    def note(self, array: np.ndarray, ranges: list) -> None:
        lo, hi = byte_bounds(array)
        if self.lo <= lo and hi <= self.hi:        # a copy made from the view is not the view
            ranges.append((lo - self.lo, hi - self.lo))
            if ranges is self.reads and getattr(self._spinning, "on", False):
                self.flag = True


_WRITERS = {np.copyto, np.put, np.putmask, np.place}


def _element(array: np.ndarray, key) -> np.ndarray:
    """The 0-d (or sub-array) view ``key`` selects, for its address."""
    return np.ndarray.__getitem__(array, (key if isinstance(key, tuple) else (key,)) + (Ellipsis,))


class Tracked(np.ndarray):
    """A kernel's view of device memory that notes what is read and written through it.

    Element reads, ufunc inputs, numpy functions and copying methods count as reads; item
    assignment, ufunc outputs, ``fill`` and numpy's writing functions as writes.  (Comparing
    bytes before and after would miss a write of the value already there, and counting a
    whole view as read would make two kernels filling halves of one buffer race.)"""

    _root: Root | None = None

    def __array_finalize__(self, obj) -> None:
        self._root = getattr(obj, "_root", None)

    def _read(self, array=None) -> None:
        if self._root is not None:
            self._root.note(self if array is None else array, self._root.reads)

    def _wrote(self, array=None) -> None:
        if self._root is not None:
            self._root.note(self if array is None else array, self._root.writes)

    def __getitem__(self, key):
        result = super().__getitem__(key)
        if not isinstance(result, np.ndarray):      # an element: read now
            try:
                self._read(_element(self, key))
            except (IndexError, TypeError, ValueError):
                self._read()
        return result

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        try:
            target = _element(self, key)
            self._wrote(target if target.base is not None else None)
        except (IndexError, TypeError, ValueError):     # fancy indexing: the whole view
            self._wrote()

    def fill(self, value) -> None:
        super().fill(value)
        self._wrote()

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        for x in inputs:
            if isinstance(x, Tracked):
                x._read()
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
        writer = func in _WRITERS
        for i, a in enumerate(args):
            if isinstance(a, Tracked) and not (writer and i == 0):
                a._read()
        result = super().__array_function__(func, types, args, kwargs)
        if writer and isinstance(args[0], Tracked):
            args[0]._wrote()
        return result


def _reading(name: str):
    """An ndarray method that reads the whole view first."""
    def method(self, *args, **kwargs):
        self._read()
        return getattr(np.ndarray, name)(self.view(np.ndarray), *args, **kwargs)
    method.__name__ = name
    return method


for _name in ("copy", "astype", "tobytes", "tolist", "item", "__iter__", "__float__", "__int__", "__bool__"):
    setattr(Tracked, _name, _reading(_name))
del _name


def tracked(raw: np.ndarray, spinning: threading.local) -> tuple[np.ndarray, Root]:
    view = raw.view(Tracked)
    view._root = Root(raw, spinning)
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


def report(device: "Device", stream: "DeviceStream", accesses: list, fault: tuple | None) -> None:
    """What a watched launch touched (``accesses``: Launch.memory's log) and its first bad
    access, to its client's task socket."""
    conn = device.main_conns.get(stream.client)
    if conn is None or stream.running_task is None:
        return
    touched = []
    for loc, view, snapshot, root in accesses:
        if root.reads or root.writes:
            reads, writes = _merge(root.reads), _merge(root.writes)
        else:    # used some way the view cannot see (np.asarray, a buffer): read whole, and
                 # written where its bytes changed (a concurrent writer would show up too)
            reads, writes = [(0, len(view))], _merge(_written(view, snapshot))
        touched.append((loc, reads, writes, root.flag))
    conn.send(("sanitize", {"slot": stream.slot, "seq": stream.running_task[0], "accesses": touched,
                            "fault": fault, "inner": getattr(stream, "position", None)}))
