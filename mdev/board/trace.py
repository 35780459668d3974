"""Task records of a device process, for timeline traces (``MDEV_TRACE``).

    host: trace_start(client) --> device.trace = Recorder (clients being traced)
    Device.run_task --> Recorder.record(stream, op, args, start_ns, end_ns, code)
    host: trace_collect(client) --> that client's records (and tracing of it stops)

Tracing is off unless a host asked for it: ``Device.trace`` is None and ``run_task`` pays
one attribute test.  A record is a compact tuple (see ``FIELDS``); times are
``time.monotonic_ns()`` (one clock for every device process of the machine).  ``path`` is
the route of the bytes as ((link id, forward), ...) from the board's topology:

    copy / copy2d / reduce                  pinned host <-> device: the device's host path
                                            device a -> device b: path(a, b) (P2P)
                                            inside one device: () (D2D)
    memset / value_write                    as a copy from the executing device to the target

``flow`` ties waits to the records that released them (flow arrows of the trace):
("e", device, slot, n) is the n-th record of an event slot, and a wait for that count
carries the same key; ("n", device, slot, n) likewise for notifies (n = records so far).
A kernel's ``flow`` is ("k", kernel name, blocks) instead.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from mdev.board import status as S
from mdev.board.tasks import OPS, request

if TYPE_CHECKING:
    from mdev.board.device import Device

FIELDS = ("device", "stream", "engine", "kind", "bytes", "route", "path", "start", "end", "code", "flow",
          "modelled_start", "modelled_end")        # the last two only while time is modelled
MAX_RECORDS = 2_000_000            # per client: a runaway program cannot eat the device's RAM


class Recorder:
    def __init__(self, device: "Device") -> None:
        self.device = device
        self.records: dict[int, list] = {}     # client -> record tuples
        self.models: dict[int, "DeviceModel"] = {}   # client -> its modelled clocks (MDEV_MODEL_TIME)
        self.dropped: dict[int, int] = {}
        self._routes: dict = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ recording
    def record(self, stream, op: str, args: tuple, start_ns: int, end_ns: int, code: int) -> None:
        records = self.records.get(stream.client)
        model = self.models.get(stream.client)
        if records is None and model is None:
            return                              # this client is not traced
        if records is not None and len(records) >= MAX_RECORDS:
            self.dropped[stream.client] = self.dropped.get(stream.client, 0) + 1
            return
        try:
            engine, nbytes, route, path, flow = self._describe(op, args)
        except Exception:                        # a record must never fail a task
            engine, nbytes, route, path, flow = getattr(OPS.get(op), "engine", None), 0, "", (), None
        rec = (self.device.index, stream.stream_id, engine, op, nbytes, route, path, start_ns, end_ns, code, flow)
        if model is not None:
            try:
                rec += model.place(rec, args)
            except Exception:
                rec += (None, None)
        if records is not None:
            records.append(rec)

    def _describe(self, op: str, args: tuple):
        dev = self.device
        engine = getattr(OPS.get(op), "engine", None)
        if op == "copy":
            return (engine, args[2]) + self.route(args[1], args[0]) + (None,)
        if op == "copy2d":
            return (engine, args[4] * args[5]) + self.route(args[2], args[0]) + (None,)
        if op == "reduce":
            return (engine, args[2]) + self.route(args[1], args[0]) + (None,)
        if op == "memset":
            return (engine, args[2]) + self.route(None, args[0]) + (None,)
        if op == "value_write":
            return (engine, 8) + self.route(None, args[0]) + (None,)
        if op == "kernel":               # "flow" of a kernel: ("k", its name, blocks)
            kernel = dev.kernels.get(args[0])
            if kernel is None:
                return "aic", 0, "", (), None
            return kernel.engine, 0, "", (), ("k", kernel.name, args[1])
        c = dev.control
        if op == "record_event":
            return engine, 0, "", (), ("e", dev.index, args[0], int(c.event_done[args[0]]))
        if op == "wait_event":
            return engine, 0, "", (), ("e", dev.index, args[0], args[2])
        if op == "wait_remote_event":
            return engine, 0, "", (), ("e", args[0], args[1], args[2])
        if op == "wait_event_flag":
            return engine, 0, "", (), ("e", dev.index, args[0], int(c.event_done[args[0]]))
        if op == "record_notify":
            page = dev.peer_control(args[0])
            return engine, 0, "", (), ("n", args[0], args[1], int(page.notify_rec[args[1]].sum()))
        if op == "wait_notify":
            return engine, 0, "", (), ("n", dev.index, args[0], int(c.notify_taken[args[0]]))
        return engine, 0, "", (), None

    def route(self, src: tuple | None, dst: tuple) -> tuple[str, tuple]:
        """(route kind, ((link id, forward), ...)) of bytes going from ``src`` to ``dst``."""
        key = (src[0] if src else None, src[1] if src and src[0] == "d" else None, dst[0],
               dst[1] if dst[0] == "d" else None)
        cached = self._routes.get(key)
        if cached is None:
            cached = self._routes[key] = self._compute(*key)
        return cached

    def _compute(self, skind, sdev, dkind, ddev) -> tuple[str, tuple]:
        topo = self.device.topo
        if skind is None:                       # memset / value write: this device writes the target
            skind, sdev = "d", self.device.index
        if skind == "p" and dkind == "p":
            return "H2H", ()
        if skind == "p":                        # host -> device: the host path backwards
            return "H2D", tuple((link, not fwd) for link, fwd in reversed(topo.host_path(ddev).channels()))
        if dkind == "p":
            return "D2H", tuple(topo.host_path(sdev).channels())
        if sdev == ddev:
            return "D2D", ()
        return "P2P", tuple(topo.path(sdev, ddev).channels())

    # ------------------------------------------------------------------ control
    def start(self, client: int, keep: bool = True, model_origin_ns: int | None = None) -> None:
        with self._lock:
            if keep:
                self.records.setdefault(client, [])
            if model_origin_ns is not None and client not in self.models:
                self.models[client] = DeviceModel(self.device, model_origin_ns)

    def collect(self, client: int, stop: bool) -> dict:
        with self._lock:
            records = self.records.pop(client, []) if stop else self.records.get(client, [])
            if not stop:
                self.records[client] = []
            else:
                self.models.pop(client, None)
            dropped = self.dropped.pop(client, 0)
        return {"device": self.device.index, "records": records, "dropped": dropped}


class DeviceModel:
    """Modelled clocks of one client's tasks on this device (``MDEV_MODEL_TIME=1``).

    The rules are mdev.runtime.timemodel's, applied as tasks finish (so without its bandwidth
    sharing): a task starts (modelled) when its stream's previous task ended, an engine slot
    and its path's link channels are free (transfers on a channel one after another), and
    -- on a stream that was idle, i.e. the host submitted it then -- after every task that
    had ended (wall) before it started; an event wait not before the event's
    record.  A record writes its modelled time into the event's timestamp, so
    event_elapsed_time answers in modelled time.  Times: ns since ``origin`` (the host's
    clock when it asked for modelling); event timestamps stay "ns since this device booted".
    """

    def __init__(self, device: "Device", origin_ns: int) -> None:
        from mdev.runtime import timemodel
        self.timemodel = timemodel
        self.device = device
        self.origin = origin_ns
        topo = device.topo
        self.meta = {"links": {l.id: {"gbps": l.effective_gbps, "latency_us": l.latency_us} for l in topo.links},
                     "device_bw": [(d.hbm_gbps, d.d2d_gbps) for d in topo.devices]}
        self.stream_t: dict[int, float] = {}
        self.wall_prev: dict[int, int] = {}
        self.engines: dict[str, list[float]] = {}
        self.channels: dict[tuple, float] = {}
        self.known: list[tuple[int, float]] = []
        self.host_t = 0.0
        self.lock = threading.Lock()

    def base(self, index: int) -> int:
        """Event timestamp (ns since that device booted) of modelled time 0."""
        dev = self.device
        boot = dev.boot_ns if index == dev.index else int(dev.peer_control(index).header[S.H_BOOT_NS])
        return self.origin - boot

    def place(self, rec: tuple, args: tuple) -> tuple[float, float]:
        import heapq
        dev, tm = self.device, self.timemodel
        op, key, start_ns, end_ns = rec[3], rec[1], rec[7], rec[8]
        with self.lock:
            start = self.stream_t.get(key, 0.0)
            while self.known and self.known[0][0] <= start_ns:
                self.host_t = max(self.host_t, heapq.heappop(self.known)[1])
            prev = self.wall_prev.get(key)
            if prev is None or prev <= start_ns - tm.IDLE_GAP_NS:
                start = max(start, self.host_t)
            self.wall_prev[key] = end_ns
            if op in ("wait_event", "wait_event_flag"):
                ts = int(dev.control.event_ts[args[0]])
                if ts:
                    start = max(start, ts - self.base(dev.index))
            elif op == "wait_remote_event":
                ts = int(dev.peer_control(args[0]).event_ts[args[1]])
                if ts:
                    start = max(start, ts - self.base(args[0]))
            slots, slot = None, 0
            if rec[2] is not None:
                slots = self.engines.setdefault(rec[2], [0.0] * (tm.DMA_SLOTS if rec[2] == "dma" else 1))
                slot = min(range(len(slots)), key=lambda i: slots[i])
                start = max(start, slots[slot])
            for ch in rec[6]:
                start = max(start, self.channels.get(tuple(ch), 0.0))
            end = start + tm._duration_ns(rec, self.meta)
            if slots is not None:
                slots[slot] = end
            for ch in rec[6]:
                self.channels[tuple(ch)] = end
            self.stream_t[key] = end
            heapq.heappush(self.known, (end_ns, end))
        if op == "record_event" and dev.events.get(args[0]) == args[1]:
            dev.control.event_ts[args[0]] = self.base(dev.index) + round(end)
        return start, end


@request
def trace_start(device: "Device", conn, client: int, keep: bool = True, model_origin_ns: int | None = None) -> float:
    """Record the tasks of ``client`` from now on (``keep``), and/or model their time from
    ``model_origin_ns`` (host monotonic ns); returns the device's boot time (ns)."""
    with device.lock:
        if device.trace is None:
            device.trace = Recorder(device)
        for table in (device.trace.records, device.trace.models):
            for gone in [c for c in table if c != client and c not in device.clients]:
                table.pop(gone, None)    # processes that left without collecting
        device.trace.start(client, keep, model_origin_ns)
    return device.boot_ns


@request
def trace_collect(device: "Device", conn, client: int, stop: bool = True) -> dict:
    """The records of ``client``'s tasks since trace_start (or the last collect)."""
    recorder = device.trace
    if recorder is None:
        return {"device": device.index, "records": [], "dropped": 0}
    result = recorder.collect(client, stop)
    with device.lock:
        if stop and not recorder.records and not recorder.models:
            device.trace = None
    return result
