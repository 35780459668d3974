"""Task records of a device process, for timeline traces (``MDEV_TRACE``) and modelled time.

    host: trace_start(client) --> device.trace = Recorder (clients being traced / modelled)
    Device.run_task --> Recorder.begin(stream, op, args, start_ns)    before the task runs
                    --> Recorder.record(stream, op, args, start_ns, end_ns, code)   after
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
A value wait carries ("v", device, stream, start_ns): the record of the task that wrote
the value it saw.  Before a task that writes device memory runs (its op's target operand,
mdev.taskspec; a kernel, whose writes are unknown, as "any memory"), ``begin`` stamps
its range, record identity and -- once placed -- modelled end into the ``writes`` ring of
this device's control page (mdev.status); a released value wait reads the rings of
every device and takes the newest write covering its word whose value passes the wait's
test (a kernel newer than that write if no write does).  A kernel's ``flow`` is
("k", kernel name, blocks) instead; a whole collective's ("c", its leader's device, the
leader's run words, operation number, modelled duration): the records of one operation's
ranks share it (mdev.timemodel starts them together).
"""

from __future__ import annotations

import itertools
import struct
import threading
import time
from typing import TYPE_CHECKING, Callable

import numpy as np

from mdev import status as S
from mdev.board.tasktable import own_client, request
from mdev.taskspec import PRESCRIBED, SPECS

if TYPE_CHECKING:
    from mdev.board.device import Device

FIELDS = ("device", "stream", "engine", "kind", "bytes", "route", "path", "start", "end", "code", "flow",
          "modelled_start", "modelled_end",        # None unless time is modelled
          "seq")                                   # the task's number on its stream (None in a graph replay)
MAX_RECORDS = 2_000_000            # per client: a runaway program cannot eat the device's RAM
# a released wait waits this long at most for the modelled end of the write / notify record
# that released it (placed a moment after its effect; a notify record of an untraced
# process never is)
WRITER_WAIT_S, NOTIFY_WAIT_S = 2.0, 0.2
_WORD, _ROW = struct.Struct("<Q"), struct.Struct(f"<{S.W_END + 1}Q")     # a row of the writes ring
_ROW_TAIL = struct.Struct(f"<{S.W_END}Q")                                # ... after its seq
# rows of this process's (= this device's) rings in its control page
_write_rows, _transfer_rows = itertools.count(1), itertools.count(1)


def _seq(stream) -> int | None:
    """Number (on its stream) of the task ``stream`` is running: host-side records name the
    tasks submitted after them by it (mdev.runtime.trace.host_op)."""
    task = getattr(stream, "running_task", None)
    return task[0] if task else None


class Recorder:
    def __init__(self, device: "Device") -> None:
        self.device = device
        self.records: dict[int, list] = {}     # client -> record tuples
        self.models: dict[int, "DeviceModel"] = {}   # client -> its modelled clocks (MDEV_MODEL_TIME)
        self.dropped: dict[int, int] = {}
        self._routes: dict = {}
        self._lock = threading.Lock()
        # per running task (id of its stream): its row in the writes ring / the write that
        # released its value wait, from begin / note_release to record
        self._writing: dict[int, tuple[int, int]] = {}
        self._released: dict[int, tuple] = {}
        self._writes_buf = device.control.writes.data.cast("B")     # stamped with struct: cheaper than numpy

    def _traced(self, client: int) -> bool:
        return client in self.records or client in self.models

    # ------------------------------------------------------------------ recording
    def begin(self, stream, op: str, args: tuple, start_ns: int) -> None:
        """Before a task runs: stamp the memory it writes, and (time modelled) enter its link
        transfer in the ledger other devices share bandwidth by."""
        if not self._traced(stream.client):
            return
        try:
            self._stamp_write(stream, op, args, start_ns)
            model = self.models.get(stream.client)
            if model is not None and SPECS[op].moves:
                _, nbytes, _, path, _ = self._describe(op, args)
                if path:
                    model.begin(stream, nbytes, path)
        except Exception:                        # a record must never fail a task
            pass

    def _stamp_write(self, stream, op: str, args: tuple, start_ns: int) -> None:
        spec = SPECS[op]
        target = spec.target()
        if spec.reported:
            mem, lo, hi, value, flags = S.W_ANY, 0, 0, 0, S.W_KERNEL
        elif target is not None and args[target.at][0] == "d":          # value words are device memory
            (location, nbytes), = target.pieces(args)
            mem, lo = location[1] + 1, location[2]
            hi, value, flags = lo + nbytes, 0, 0
            if target.word is not None:
                value, flags = args[target.word], S.W_VALUE_KNOWN
            elif target.fill is not None:
                value, flags = (args[target.fill] & 0xFF) * 0x0101010101010101, S.W_VALUE_KNOWN
        else:
            return
        seq = next(_write_rows)
        at = (seq % S.WRITES) * _ROW.size
        buf = self._writes_buf
        _WORD.pack_into(buf, at, 0)              # readers skip the row while it is rewritten
        _ROW_TAIL.pack_into(buf, at + _WORD.size, stream.client, mem, lo, hi, stream.stream_id, start_ns, value,
                            flags, S.W_PENDING)
        _WORD.pack_into(buf, at, seq)
        self._writing[id(stream)] = (seq % S.WRITES, seq)

    def note_release(self, stream, src: tuple, test: Callable[[int], bool]) -> None:
        """A value wait on ``src`` was released: remember the write it saw (see the docstring)."""
        if not self._traced(stream.client):
            return
        try:
            found = self._releaser(stream.client, src, test)
        except Exception:
            found = None
        if found is not None:
            self._released[id(stream)] = found

    def _releaser(self, client: int, src: tuple, test: Callable[[int], bool]) -> tuple | None:
        mem, off = src[1] + 1, src[2]
        newest: dict[bool, tuple] = {}           # is a kernel -> (start, device, row index, row)
        for d in self.device.node_devices:
            rows = self.device.memory.peer_control(d).writes.copy()
            live = (rows[:, S.W_SEQ] != 0) & (rows[:, S.W_CLIENT] == client)
            exact = live & (rows[:, S.W_MEM] == mem) & (rows[:, S.W_LO] <= off) & (rows[:, S.W_HI] > off)
            for kernel, mask in ((False, exact), (True, live & (rows[:, S.W_MEM] == S.W_ANY))):
                idx = np.flatnonzero(mask)
                if idx.size:
                    i = int(idx[np.argmax(rows[idx, S.W_START])])
                    if kernel not in newest or int(rows[i, S.W_START]) > newest[kernel][0]:
                        newest[kernel] = (int(rows[i, S.W_START]), d, i, rows[i])
        write, kernel = newest.get(False), newest.get(True)
        if write is not None and (not int(write[3][S.W_FLAGS]) & S.W_VALUE_KNOWN or test(int(write[3][S.W_VALUE]))):
            pick = write
        elif kernel is not None and (write is None or kernel[0] > write[0]):
            pick = kernel
        else:
            return None                          # written by the host, or before tracing began
        start, d, i, row = pick
        return ("v", d, int(row[S.W_STREAM]), start), d, i, int(row[S.W_SEQ]), bool(int(row[S.W_FLAGS]) & S.W_KERNEL)

    def _writer_end(self, released: tuple) -> float | None:
        """Modelled end of the write that released a value wait; its record may be a moment
        behind (it is made after the task returns), so wait for it -- not for a kernel,
        which may have written the word long before it returns."""
        _, d, i, seq, kernel = released
        row = self.device.memory.peer_control(d).writes[i]
        deadline = time.monotonic() + (0.0 if kernel else WRITER_WAIT_S)
        while int(row[S.W_SEQ]) == seq:
            end = int(row[S.W_END])
            if end == S.W_NO_MODEL:
                return None
            if end != S.W_PENDING:
                return end - 1.0
            if time.monotonic() >= deadline:
                return None
            time.sleep(20e-6)
        return None                              # the ring moved on

    def _finish_write(self, wrote: tuple[int, int], end: float | None) -> None:
        row = self.device.control.writes[wrote[0]]
        if int(row[S.W_SEQ]) == wrote[1]:
            row[S.W_END] = S.W_NO_MODEL if end is None else round(end) + 1

    def record(self, stream, op: str, args: tuple, start_ns: int, end_ns: int, code: int) -> None:
        wrote = self._writing.pop(id(stream), None)
        released = self._released.pop(id(stream), None) if op == "value_wait" else None
        records = self.records.get(stream.client)
        model = self.models.get(stream.client)
        placed = None
        try:
            if records is None and model is None:
                return                              # this client is not traced
            full = records is not None and len(records) >= MAX_RECORDS
            if full:
                self.dropped[stream.client] = self.dropped.get(stream.client, 0) + 1
                if model is None:
                    return                          # (modelled clocks go on: waits rely on them)
            try:
                engine, nbytes, route, path, flow = self._describe(op, args)
            except Exception:                        # a record must never fail a task
                engine, nbytes, route, path, flow = getattr(SPECS.get(op), "engine", None), 0, "", (), None
            if released is not None:
                flow = released[0]
            elif SPECS[op].time == PRESCRIBED:      # a whole collective: its operation, and how long it takes
                flow = ("c", *stream.meeting[1], args[SPECS[op].args.index("model_ns")])
            rec = (self.device.index, stream.stream_id, engine, op, nbytes, route, path, start_ns, end_ns, code, flow)
            if model is not None:
                try:
                    after = self._writer_end(released) if released is not None else model.released_at(rec, args)
                    placed = model.place(stream, rec, args, after)
                except Exception:
                    placed = None
            rec += (placed or (None, None)) + (_seq(stream),)
            if records is not None and not full:
                records.append(rec)
        finally:
            if wrote is not None:
                self._finish_write(wrote, placed[1] if placed else None)
            if model is not None and placed is None:
                model.drop(stream)

    def _describe(self, op: str, args: tuple):
        dev = self.device
        spec = SPECS[op]
        engine = spec.engine
        if spec.moves:
            source, target = spec.source(), spec.target()
            return (engine, target.moved(args)) + \
                self.route(args[source.at] if source is not None else None, args[target.at]) + (None,)
        if spec.reported:                # "flow" of a kernel: ("k", its name, blocks)
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
            page = dev.memory.peer_control(args[0])
            return engine, 0, "", (), ("n", args[0], args[1], int(page.notify_rec[args[1]]))
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
                self.models[client] = DeviceModel(self.device, client, model_origin_ns)

    def collect(self, client: int, stop: bool, keep_model: bool = False) -> dict:
        with self._lock:
            records = self.records.pop(client, []) if stop else self.records.get(client, [])
            if not stop:
                self.records[client] = []
            elif not keep_model:
                self.models.pop(client, None)
            dropped = self.dropped.pop(client, 0)
        return {"device": self.device.index, "records": records, "dropped": dropped}


class DeviceModel:
    """Modelled clocks of one client's tasks on this device (``MDEV_MODEL_TIME=1``).

    The rules are mdev.timemodel's, applied as tasks finish: a task starts (modelled)
    when its stream's previous task ended and an engine slot is free; an event wait (also
    on another device's IPC event: ``event_placed``) not before the event's record, a
    notify wait not before the record that released it (``notify_mt``), a value wait not
    before the write it saw (the ``writes`` rings), and any task not before the host clock
    at its submission (``host_floor`` rows, written by its host as it submits:
    mdev.runtime.trace -- the host clock advances when the host synchronises on tasks or
    copies synchronously).  Each waits (briefly) for the releasing record's placement,
    which comes a moment after its effect: reading the event timestamp then could give the
    record's wall time.  Nothing is inferred from wall-clock gaps: a host that is slow to
    submit (Python, a loaded machine) does not delay a task in modelled time.

    A placed task's end goes to ``stream_mt`` of its stream slot, where a host that
    synchronises on the stream reads it.

    Collectives: a notify record is found whichever process recorded it (the ranks of a
    communicator in several processes share one modelled clock, each started at its own
    origin as if together), and a collective's transfer does not start before its receiver
    entered the operation (``coll_enter``): a wait guarded for a communicator ends no
    earlier than that rank's entry plus the duration of the transfer the record announced
    (``notify_mt``'s transfer) -- HCCL's per-operation handshake, so a rank that enters
    after its peers sent still pays for the transfer.

    Bandwidth sharing: a transfer enters the ``transfers`` ring of its device when it starts
    (wall), at a provisional modelled start (its stream's and the host's time then).  When
    it is placed, its end is the fluid model's (timemodel.share) over this client's
    transfers of every device that are still running (wall; at their provisional start) or
    that end (modelled) after it starts.  This is exact when the transfers that share a
    link overlap in wall time -- equal copies submitted together, each placed seeing the
    other -- and an approximation otherwise: a transfer placed earlier keeps its end even
    if one placed later shares its link while it ran (modelled).

    A record writes its modelled time into the event's timestamp, so event_elapsed_time
    answers in modelled time.  Times: ns since ``origin`` (the host's clock when it asked
    for modelling; the same on every device); event timestamps stay "ns since this device
    booted".
    """

    def __init__(self, device: "Device", client: int, origin_ns: int) -> None:
        from mdev import timemodel
        self.timemodel = timemodel
        self.device = device
        self.client = client
        self.origin = origin_ns
        topo = device.topo
        self.meta = {"links": {l.id: {"gbps": l.effective_gbps, "latency_us": l.latency_us} for l in topo.links},
                     "device_bw": [(d.hbm_gbps, d.d2d_gbps) for d in topo.devices]}
        # link channel (link id, forward) <-> the number the transfers ring stores
        self.codes = {(l.id, fwd): 2 * i + fwd for i, l in enumerate(topo.links) for fwd in (False, True)}
        self.capacity = {code: self.meta["links"][link]["gbps"] for (link, _), code in self.codes.items()}
        self.stream_t: dict[int, float] = {}
        self.engines: dict[str, list[float]] = {}
        self.transfers: dict[int, tuple[int, int]] = {}     # id(stream) -> its running transfer's row
        self.event_mt: dict[tuple[int, int], tuple[int, float]] = {}   # (slot, uid) -> (records, latest end)
        self.spans: dict[int, float] = {}          # stream id -> duration of its last task if a transfer, else 0
        self.entered: dict[tuple, float] = {}      # a communicator's error word -> its latest coll_enter
        self.announced: dict[int, float] = {}      # stream id -> transfer of the record its wait just saw
        self.lock = threading.Lock()

    def base(self, index: int) -> int:
        """Event timestamp (ns since that device booted) of modelled time 0."""
        dev = self.device
        boot = dev.boot_ns if index == dev.index else int(dev.memory.peer_control(index).header[S.H_BOOT_NS])
        return self.origin - boot

    def _earliest(self, stream) -> float:
        """Modelled time the running task of ``stream`` may start: its stream's previous end
        and the host clock when it was submitted."""
        return max(self.stream_t.get(stream.stream_id, 0.0), self._after_host(stream))

    def _after_host(self, stream) -> float:
        """The host clock when the host submitted the running task of ``stream``: the latest
        of its stream slot's ``host_floor`` rows numbered for the task's seq or an earlier one."""
        seq = _seq(stream)
        rows = self.device.control.host_floor[stream.slot]
        mask = (rows[:, S.F_CLIENT] == self.client) & (rows[:, S.F_SEQ] <= (seq if seq is not None else -1))
        return float(rows[mask, S.F_END].max()) if mask.any() else 0.0

    def earliest(self, stream) -> float:
        """Modelled time the running task of ``stream`` may start (see _earliest)."""
        with self.lock:
            return self._earliest(stream)

    def begin(self, stream, nbytes: int, path: tuple) -> None:
        """A transfer starts (wall): enter it, at its provisional modelled start, in the ledger."""
        links = self.meta["links"]
        with self.lock:
            start = self._earliest(stream)
        seq = next(_transfer_rows)
        row = self.device.control.transfers[seq % S.TRANSFERS]
        row[S.X_SEQ] = 0
        codes = [self.codes[tuple(ch)] for ch in path][:S.MAX_PATH]
        row[S.X_CLIENT:S.X_CHANNELS + 1 + len(codes)] = (
            self.client, nbytes, sum(links[l]["latency_us"] for l, _ in path) * 1000.0, start, np.nan,
            len(codes), *codes)
        row[S.X_SEQ] = seq
        self.transfers[id(stream)] = (seq % S.TRANSFERS, seq)

    def drop(self, stream) -> None:
        """The stream's task was not placed: its transfer leaves the ledger."""
        transfer = self.transfers.pop(id(stream), None)
        if transfer is not None:
            row = self.device.control.transfers[transfer[0]]
            if row[S.X_SEQ] == transfer[1]:
                row[S.X_SEQ] = 0

    def released_at(self, rec: tuple, args: tuple) -> float | None:
        """Modelled time of the event or notify record that released a wait (``rec``); the
        record's own placement may be a moment behind its effect, so wait for it briefly."""
        if rec[3] == "wait_event":
            deadline = time.monotonic() + NOTIFY_WAIT_S
            while self.event_mt.get(args[:2], (0, 0.0))[0] < args[2]:
                if time.monotonic() >= deadline:
                    return None                  # place falls back to the event's timestamp
                time.sleep(20e-6)
            return self.event_mt[args[:2]][1]
        if rec[3] == "wait_remote_event":             # the owner's record, in this client's time
            page = self.device.memory.peer_control(args[0])
            deadline = time.monotonic() + NOTIFY_WAIT_S
            while int(page.event_placed[args[1]]) < args[2]:
                if time.monotonic() >= deadline:
                    return None                  # an untraced recorder: place reads event_ts
                time.sleep(20e-6)
            return int(page.event_ts[args[1]]) - self.base(args[0])
        if rec[3] != "wait_notify" or rec[10] is None:
            return None
        taken = rec[10][3]
        cells = self.device.control.notify_mt[rec[10][2]]
        deadline = time.monotonic() + NOTIFY_WAIT_S
        while True:          # any process's record (a rank of another process: see the class docstring)
            found = cells[cells[:, 1] >= taken]       # (taken >= 1: a row being written has count 0)
            if len(found):
                row = found[np.argmin(found[:, 1])]
                self.announced[rec[1]] = float(row[3])
                return float(row[2])
            if time.monotonic() >= deadline:
                return None
            time.sleep(20e-6)

    def place(self, stream, rec: tuple, args: tuple, after: float | None = None) -> tuple[float, float]:
        """Modelled (start, end) of a finished task; ``after``: the time of the record or
        write that released it (a notify or value wait)."""
        dev, tm = self.device, self.timemodel
        op, key = rec[3], rec[1]
        transfer = self.transfers.pop(id(stream), None)
        with self.lock:
            start = self._earliest(stream)
            if op == "wait_event_flag" or (op == "wait_event" and after is None):
                ts = int(dev.control.event_ts[args[0]])
                if ts:
                    start = max(start, ts - self.base(dev.index))
            elif op == "wait_remote_event" and after is None:
                ts = int(dev.memory.peer_control(args[0]).event_ts[args[1]])
                if ts:
                    start = max(start, ts - self.base(args[0]))
            if after is not None:
                start = max(start, after)
            spec = SPECS[op]
            if spec.time == PRESCRIBED:          # a whole collective: from the last rank's entry
                start = max(start, stream.meeting[0])
            announced = self.announced.pop(key, 0.0)
            guard = args[3] if op == "wait_notify" and len(args) > 3 else None
            if guard is not None:                                # a collective's wait: the handshake
                entered = self.entered.get(guard[3])
                if entered is not None:
                    start = max(start, entered + announced)
            slots, slot = None, 0
            if rec[2] is not None:
                slots = self.engines.setdefault(rec[2], [0.0] * (dev.spec.dma_engines if rec[2] == "dma" else 1))
                slot = min(range(len(slots)), key=lambda i: slots[i])
                start = max(start, slots[slot])
            end = self._shared_end(transfer, start) if transfer is not None else None
            if end is None:
                end = start + (args[spec.args.index("model_ns")] if spec.time == PRESCRIBED
                               else tm.duration_ns(rec, self.meta))
            if slots is not None:
                slots[slot] = end
            self.stream_t[key] = end
            before = self.spans.get(key, 0.0)            # the task before this one on its stream
            self.spans[key] = end - start if transfer is not None else 0.0
            if op == "coll_enter":
                self.entered[args[3]] = end
        seq = _seq(stream)
        if seq is not None:          # for a host synchronising on the stream
            dev.control.stream_mt[stream.slot] = (seq, end)
        if op == "record_event" and dev.events.get(args[0]) == args[1]:
            dev.control.event_ts[args[0]] = self.base(dev.index) + round(end)
            dev.control.event_placed[args[0]] = rec[10][3]      # after event_ts: IPC waiters read it then
            self.event_mt[args[:2]] = (rec[10][3], end)
        elif op == "record_notify" and rec[10] is not None:
            cell = dev.memory.peer_control(args[0]).notify_mt[args[1], rec[10][3] % S.NOTIFY_MT_RING]
            cell[1] = 0
            # a collective's record (guarded) announces the transfer just before it on its stream
            cell[0], cell[2], cell[3] = self.client, end, before if len(args) > 2 and args[2] is not None else 0.0
            cell[1] = rec[10][3]                                 # valid from here
        return start, end

    def _shared_end(self, transfer: tuple[int, int], start: float) -> float | None:
        """End of this device's running transfer (ledger row) starting at ``start``, sharing
        link channels with the client's other transfers (see the class docstring)."""
        index, seq = transfer
        mine = self.device.control.transfers[index]
        if mine[S.X_SEQ] != seq:
            return None                          # the ring moved on (cannot happen in practice)
        mine[S.X_START] = start
        others, me = [], None
        for d in self.device.node_devices:
            rows = self.device.memory.peer_control(d).transfers.copy()
            mask = (rows[:, S.X_SEQ] != 0) & (rows[:, S.X_CLIENT] == self.client) & \
                (np.isnan(rows[:, S.X_END]) | (rows[:, S.X_END] > start))
            for r in rows[mask]:
                if d == self.device.index and r[S.X_SEQ] == seq:
                    me = len(others)
                n = int(r[S.X_CHANNELS])
                others.append((float(r[S.X_START]), float(r[S.X_LATENCY]), float(r[S.X_BYTES]),
                               tuple(int(c) for c in r[S.X_CHANNELS + 1:S.X_CHANNELS + 1 + n])))
        if me is None:
            return None
        end = self.timemodel.share(others, self.capacity)[me]
        mine[S.X_END] = end
        return end


@request
def trace_start(device: "Device", conn, client: int, keep: bool = True, model_origin_ns: int | None = None) -> float:
    """Record the tasks of ``client`` from now on (``keep``), and/or model their time from
    ``model_origin_ns`` (host monotonic ns); returns the device's boot time (ns)."""
    own_client(conn, client)
    with device.lock:
        if device.trace is None:
            device.trace = Recorder(device)
        for table in (device.trace.records, device.trace.models):
            for gone in [c for c in table if c != client and c not in device.clients]:
                table.pop(gone, None)    # processes that left without collecting
        device.trace.start(client, keep, model_origin_ns)
    return device.boot_ns


@request
def trace_collect(device: "Device", conn, client: int, stop: bool = True, keep_model: bool = False) -> dict:
    """The records of ``client``'s tasks since trace_start (or the last collect); ``stop``
    ends the recording (and the modelled clocks, unless ``keep_model``)."""
    own_client(conn, client)
    recorder = device.trace
    if recorder is None:
        return {"device": device.index, "records": [], "dropped": 0}
    result = recorder.collect(client, stop, bool(keep_model))
    with device.lock:
        if stop and not recorder.records and not recorder.models:
            device.trace = None
    return result
