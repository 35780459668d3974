"""Timeline traces of this process's tasks (``MDEV_TRACE=file.json``, ``mdev run --trace``).

    attach (MDEV_TRACE set) --> trace_start(client) on every device of the board
    memops.memcpy / memcpy2d / memset --> host_op --> host-side records (this process)
    streams: a synchronisation (or a query finding work done) --> synced --> host-side record
    streams.submit --> before_submit: the host clock for the device's modelled clocks
    finalize / detach / exit --> trace_collect(client) from every device
                             + the host-side records --> Chrome trace JSON

The file is the Chrome trace / Perfetto JSON format (opens in https://ui.perfetto.dev and
chrome://tracing): one process per device (and one for the host), one track per stream
(``stream N``) and per engine slot (``dma 0``, ``dma 1``, ``aic 0``, ...), an "X"
(complete) event per task with its bytes, route (H2D / D2H / D2D / P2P / H2H) and link path
in ``args``, and flow arrows from an event or notify record, or from the write a value
wait saw, to the wait it released.  The top-level ``mdev`` key holds what ``mdev trace
summary`` needs: the board's links (bandwidth, latency) and its peer pairs.

Synchronous copies and memsets (``memcpy``, ``memcpy2d``, ``memset``) run in this process,
not on a device: while tracing, mdev.runtime.memory.memops hands them to ``host_op``, which times
them and keeps a host-side record (device ``HOST``, stream = the host thread's track, kind
memcpy / memset, bytes, route and path from the board's topology as a device would record
them, wall start / end, flow ("h", executing device, ())); they are collected with the
devices' records and drawn on a "host" track per thread.  A synchronisation
(``synchronize_stream`` / ``_device`` / ``_event``, a query that found the work done) leaves
a "synchronize" record whose flow names the tasks it waited for ("h", None, ((device,
stream id, seq), ...)).  A task a thread submits after one of its host records carries a
mark (device, stream id, seq, the record's track and wall start; the trace's
``mdev.holds``): the model starts it after that record.  Host ordering is what each thread
did, never guessed from wall-clock gaps (a slow host is no synchronisation), and one
thread's synchronisation does not hold back another thread's work (ranks driven by a
thread each must not wait for each other through the host).

Under MDEV_MODEL_TIME each thread keeps a host clock: it moves on to the modelled end of
what a synchronisation waited for and by the link time of each synchronous copy; a task
submitted after it moved starts no earlier (``before_submit`` tells the task's device).

The profiling API (mdev.runtime.profiling: aclprofStart / aclprofStop) records the same
way into a file it names (``record_into`` / ``stop_recording``), for the devices of its
configuration, while MDEV_TRACE is not recording.

Records of several init / finalize cycles of one process accumulate; the file is rewritten
at each collection.  A child process (fork, multiprocessing) that traces too writes
``file.<pid>.json`` next to it instead of overwriting its parent's file.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import sys
import threading
import time
from typing import Callable

from mdev import timemodel
from mdev import status as S
from mdev import errors as E
from mdev.errors import AclError
from mdev.runtime import hooks
from mdev.runtime.core import RUNTIME as rt

OWNER_ENV = "MDEV_TRACE_OWNER"
WAITS = {"wait_event", "wait_remote_event", "wait_event_flag", "wait_notify", "value_wait", "host_callback"}
SOURCES = {"record_event", "record_notify"}
SINKS = {"wait_event", "wait_remote_event", "wait_event_flag", "wait_notify"}
FLOW_NAMES = {"e": "event", "n": "notify", "v": "value"}

HOST = -1                 # the "device" of host-side records
HOST_PID = 999            # their process in the Chrome trace

_lock = threading.Lock()
_records: list = []
_holds: list = []         # the marks of _records (see before_submit)
_collectives: list = []   # the HCCL operations among _records (see collective)
_host: list = []          # host-side records since the last collection
_meta: dict = {}
_dropped = 0
_registered = False
_topology = None
host_on = False           # True while synchronous memory operations are recorded or modelled
_keep = False             # ... recorded (MDEV_TRACE)
_clock: dict | None = None   # ... modelled (MDEV_MODEL_TIME): origin and client (clocks: _HostThread)
_profile: tuple[str, list] | None = None   # (file, board devices) the profiling API records into


def _forget_after_fork() -> None:
    """A forked child traces (if at all) its own tasks, into its own file."""
    global _records, _host, _marks, _holds, _collectives, _dropped, _lock, host_on, _keep, _clock, _thread, _profile
    _records, _host, _marks, _holds, _collectives, _dropped, _lock = [], [], [], [], [], 0, threading.Lock()
    _profile = None
    host_on, _keep, _clock, _thread = False, False, None, _HostThread()


os.register_at_fork(after_in_child=_forget_after_fork)


def target() -> str | None:
    """The file this process writes its trace to, or None when tracing is off."""
    if _profile is not None:
        return _profile[0]
    path = os.environ.get("MDEV_TRACE")
    if not path:
        return None
    owner = os.environ.setdefault(OWNER_ENV, str(os.getpid()))
    if owner != str(os.getpid()):
        root, ext = os.path.splitext(path)
        path = f"{root}.{os.getpid()}{ext or '.json'}"
    return path


def modelling() -> bool:
    """MDEV_MODEL_TIME=1: the devices keep modelled clocks (event timestamps in modelled time)."""
    return os.environ.get("MDEV_MODEL_TIME", "0") not in ("", "0")


def on_attach(board) -> None:
    """Called once the process attached to a board: ask every device to record this process's
    tasks (MDEV_TRACE) and/or keep modelled clocks for them (MDEV_MODEL_TIME=1)."""
    keep = target() is not None
    origin = time.monotonic_ns() if modelling() else None
    if not keep and origin is None:
        return
    try:
        _start(board, board.devices, keep, origin)   # this process's tasks run on its node's devices only
    except Exception as exc:   # tracing must never stop the program
        print(f"mdev: MDEV_TRACE / MDEV_MODEL_TIME: cannot start: {exc}", file=sys.stderr)


def record_into(path: str, board, devices: list[int]) -> None:
    """Record this process's tasks on board ``devices`` from now on, into ``path`` (the
    profiling API's aclprofStart), until :func:`stop_recording`."""
    global _profile
    if _keep:
        raise AclError(E.ACL_ERROR_PROF_API_CONFLICT, f"this process's tasks are already recorded into "
                       f"{target()} (MDEV_TRACE or an aclprofStart not stopped)")
    _profile = (path, list(devices))
    try:
        _start(board, devices, True, None)
    except Exception:
        _profile = None
        raise


def stop_recording(board) -> str | None:
    """Collect what :func:`record_into` recorded and write its file (modelled clocks go on);
    the file, or None when nothing was recording."""
    global _profile, _keep, host_on, _marks, _host
    if _profile is None:
        return None
    path, devices = _profile
    with _lock:
        collected, _host, _keep, host_on = _host, [], False, _clock is not None
        marks, _marks = _marks, []
    dropped = 0
    try:
        if board is not None and getattr(board, "tracing", False):
            for device in devices:
                reply = board.link(device).request("trace_collect", board.client_id, True, True, timeout=30)
                collected += reply["records"]
                dropped += reply["dropped"]
            board.tracing = _clock is not None
        _add(collected, dropped, marks)
    finally:
        _profile = None
    return path


def _start(board, devices: list[int], keep: bool, origin: int | None) -> None:
    """Ask ``devices`` to record this process's tasks (``keep``) and/or keep modelled clocks
    for them from host time ``origin``."""
    global _registered
    for device in devices:
        board.link(device).request("trace_start", board.client_id, keep, origin)
    global _topology, host_on, _keep, _clock
    with _lock:
        topo = _topology = board.topology
        host_on, _keep = keep or origin is not None or _clock is not None, keep
        if origin is not None:
            _clock = {"origin": origin, "client": board.client_id}
        _meta.update(board=board.paths.name, topology=topo.name, devices=topo.device_count,
                     node=board.node.index,
                     links={l.id: {"type": l.type, "a": l.a, "b": l.b, "gbps": l.effective_gbps,
                                   "latency_us": l.latency_us} for l in topo.links},
                     peers=[[a, b] for a in board.devices for b in board.devices if topo.can_access_peer(a, b)],
                     socs=[d.soc_name for d in topo.devices],
                     device_bw=[(d.hbm_gbps, d.d2d_gbps) for d in topo.devices],
                     dma_slots=[d.dma_engines for d in topo.devices])
        if not _registered:
            _registered = True
            atexit.register(_at_exit)
    board.tracing = True


def on_detach(board) -> None:
    """Before the process lets go of a board: collect its records and write the file."""
    global host_on, _host, _keep, _clock
    if not getattr(board, "tracing", False):
        return
    board.tracing = False
    global _marks
    with _lock:
        collected, dropped, _host, host_on, _keep, _clock = _host, 0, [], False, False, None
        marks, _marks = _marks, []
    for device in board.devices:
        try:
            reply = board.link(device).request("trace_collect", board.client_id, True, timeout=30)
        except Exception:
            continue            # a device that is gone has nothing more to say
        collected += reply["records"]
        dropped += reply["dropped"]
    _add(collected, dropped, marks)


class _HostThread(threading.local):
    """A host thread as the model sees it: its host-side records' track, its host clock
    (MDEV_MODEL_TIME) and its latest host record (the tasks it submits next come after it)."""
    def __init__(self) -> None:
        self.track: int | None = None
        self.end = 0.0
        self.last: tuple[int, int] | None = None          # (track, wall start) of its latest host record


_thread = _HostThread()
_tracks = itertools.count()
_marks: list = []        # (device, stream id, seq, host record) -- since the last collection


def _me() -> _HostThread:
    if _thread.track is None:
        _thread.track = next(_tracks)
    return _thread


def host_op(kind: str, dst, src, nbytes: int, run: Callable[[], None]) -> None:
    """Run a synchronous memory operation of this thread (``run``) and record it: ``dst`` /
    ``src`` are its validated operands (mdev.runtime.memtable.Operand; ``src`` None for a
    memset)."""
    executing = rt.current_context().device
    start = time.monotonic_ns()
    run()
    end = time.monotonic_ns()
    try:
        route, path = _host_route(executing, dst.parts()[0], src.parts()[0] if src is not None else None)
    except Exception:                       # a record must never fail the operation
        route, path = "", ()
    me = _me()
    rec = (HOST, me.track, None, kind, nbytes, route, path, start, end, 0, ("h", executing, ()))
    modelled = (None, None)
    if _clock is not None:                  # the thread's clock runs on by the operation's link time
        begin = me.end
        me.end = begin + timemodel.duration_ns(rec, _meta)
        modelled = (begin, me.end)
    _keep_host(me, rec + modelled + (None,))


def synced(targets: list) -> None:
    """This thread waited for (stream, seq) ``targets`` (a synchronisation, or a query that
    found them done): what it submits from now on starts after them.  Modelled, its host
    clock moves on to their modelled ends (``stream_mt`` of their devices); traced, a
    host-side "synchronize" record names them, and the trace's model holds back the tasks
    the thread submits after it the same way."""
    if not host_on:
        return
    now = time.monotonic_ns()
    me = _me()
    done = tuple((s.device, s.stream_id, seq) for s, seq in targets if seq)
    rec = (HOST, me.track, None, "synchronize", 0, "", (), now, now, 0, ("h", None, done))
    modelled = (None, None)
    if _clock is not None:
        for s, seq in targets:
            try:
                placed_seq, end = rt.link(s.device).control.stream_mt[s.slot]
            except AclError:
                continue                    # a lost device has nothing to say
            if seq and placed_seq >= seq:
                me.end = max(me.end, float(end))
        modelled = (me.end, me.end)         # takes no time, ends with what it waited for
    _keep_host(me, rec + modelled + (None,))


def _keep_host(me: _HostThread, rec: tuple) -> None:
    me.last = (rec[1], rec[7])
    if _keep:
        with _lock:
            _host.append(rec)


def before_submit(stream) -> None:
    """Before this thread gives ``stream`` a task: if the thread synchronised or copied since it
    last did, the task comes after that.  Modelled, the stream's device gets a ``host_floor``
    row numbered for the task (mdev.board.trace.DeviceModel._after_host) when the thread's
    clock is ahead of the stream's; traced, a mark ties the task's seq to the host record."""
    me = _me()
    if _clock is not None and stream.host_floor < me.end:
        floor = stream.host_floor = me.end
        row = rt.link(stream.device).control.host_floor[stream.slot, stream.floor_rows % S.HOST_OPS]
        stream.floor_rows += 1
        row[S.F_CLIENT] = 0                 # devices skip the row while it is rewritten
        row[S.F_SEQ:] = (stream.seq + 1, time.monotonic_ns(), floor)
        row[S.F_CLIENT] = _clock["client"]
    if _keep and me.last is not None and stream.host_marks.get(me.track) != me.last:
        stream.host_marks[me.track] = me.last
        with _lock:
            _marks.append((stream.device, stream.stream_id, stream.seq + 1, me.last))


def collective(stream, first: int, last: int, op: str, nbytes: int, nranks: int, algorithm: str,
               number: int) -> None:
    """A collective of one rank took tasks ``first`` .. ``last`` of the caller's ``stream``
    (its ``number``-th on the communicator; ``nbytes`` the size nccl-tests names): the trace's
    ``mdev.collectives`` lists it, so that ``mdev trace summary`` and ``mdev whatif`` can say
    how long each operation took in modelled time."""
    if _keep and first <= last:
        with _lock:
            _collectives.append([stream.device, stream.stream_id, first, last, op, nbytes, nranks, algorithm,
                                 number])


def _host_route(executing: int, dst, src) -> tuple[str, tuple]:
    """(route, link path) of a synchronous operation, as a device records its copies."""
    topo = _topology
    if src is None:                         # memset: the executing device writes device memory
        src_host, sdev = dst.is_host, executing
    else:
        src_host, sdev = src.is_host, src.device
    if src_host and dst.is_host:
        return "H2H", ()
    if src_host:                            # host -> device: the host path backwards
        return "H2D", tuple((link, not fwd) for link, fwd in reversed(topo.host_path(dst.device).channels()))
    if dst.is_host:
        return "D2H", tuple(topo.host_path(sdev).channels())
    if sdev == dst.device:
        return "D2D", ()
    return "P2P", tuple(topo.path(sdev, dst.device).channels())


def _add(records: list, dropped: int, marks: list) -> None:
    global _dropped
    path = target()
    with _lock:
        _records.extend(records)
        _holds.extend([dev, stream, seq, *host] for dev, stream, seq, host in marks)
        _dropped += dropped
        if path is not None:
            write(path, _records, dict(_meta, dropped=_dropped, pid=os.getpid(), holds=_holds,
                                       collectives=_collectives))


def _at_exit() -> None:
    board = rt.board
    if board is not None:
        try:
            on_detach(board)
        except Exception:
            pass


# ---------------------------------------------------------------------------- Chrome trace
def write(path: str, records: list, meta: dict) -> None:
    data = chrome_trace(records, meta)
    tmp = f"{path}.tmp{os.getpid()}"
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with open(tmp, "w") as f:
        f.write(json.dumps(data, separators=(",", ":")))   # one C-encoded string: much faster than dump
    os.replace(tmp, path)


def _lanes(items: list) -> list[int]:
    """Greedy lane per interval (sorted by start): overlapping tasks of an engine on separate lanes."""
    ends: list[int] = []
    lanes = []
    for start, end in items:
        for i, e in enumerate(ends):
            if e <= start:
                ends[i] = end
                lanes.append(i)
                break
        else:
            ends.append(end)
            lanes.append(len(ends) - 1)
    return lanes


ENGINE_TID = {"dma": 100_000, "aic": 200_000, "aiv": 300_000}


def chrome_trace(records: list, meta: dict) -> dict:
    """Records (mdev.board.trace.FIELDS tuples) -> the Chrome trace JSON object."""
    records = sorted(records, key=lambda r: r[7])
    t0 = records[0][7] if records else 0
    sources = _sources(records)
    # modelled time from the whole trace (it sees host ordering across devices, which a
    # device's own clock under MDEV_MODEL_TIME does not; those values are kept as device_modelled_*)
    modelled = timemodel.model(records, meta, sources)
    us = lambda ns: (ns - t0) / 1000.0          # noqa: E731
    events: list[dict] = []
    tracks: dict[tuple[int, int], str] = {}
    for dev in sorted({r[0] for r in records}):
        socs = meta.get("socs") or []
        name = f"device {dev}" + (f" ({socs[dev]})" if 0 <= dev < len(socs) else "")
        if dev == HOST:
            name = f"host (pid {meta.get('pid', '?')})"
        events.append({"ph": "M", "name": "process_name", "pid": _pid(dev), "tid": 0, "args": {"name": name}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": _pid(dev), "tid": 0,
                       "args": {"sort_index": dev}})
    # engine lanes: per device and engine, in start order
    engine_tid: dict[int, int] = {}
    by_engine: dict[tuple[int, str], list[int]] = {}
    for i, r in enumerate(records):
        if r[2] is not None:
            by_engine.setdefault((r[0], r[2]), []).append(i)
    for (dev, engine), idx in by_engine.items():
        for i, lane in zip(idx, _lanes([(records[i][7], records[i][8]) for i in idx])):
            tid = ENGINE_TID.get(engine, 400_000) + lane
            engine_tid[i] = tid
            tracks[(dev, tid)] = f"{engine} {lane}"
    for i, r in enumerate(records):
        dev, stream, engine, kind, nbytes, route, path, start, end, code, flow = r[:11]
        pid = _pid(dev)
        tracks.setdefault((pid, stream), (f"host {stream}" if stream else "host") if dev == HOST else f"stream {stream}")
        name = f"{kind} {route}" if route else kind
        args = {"device": dev, "stream": stream, "engine": engine, "kind": kind, "bytes": nbytes,
                "route": route, "path": [link for link, _ in path] if path else [],
                "dir": "".join([">" if fwd else "<" for _, fwd in path]) if path else "",
                "wall_start_ns": start - t0, "wall_end_ns": end - t0,
                "modelled_start_ns": round(modelled[i][0]), "modelled_end_ns": round(modelled[i][1]),
                "code": code}
        if flow is not None and flow[0] == "k":
            name = f"kernel {flow[1]}"
            args["kernel"], args["blocks"] = flow[1], flow[2]
        elif flow is not None and flow[0] == "h":       # a host-side operation, executed for this device
            args["executing_device"] = flow[1]
        elif flow is not None:
            args["flow"] = list(flow)
        if len(r) > 13 and r[13] is not None:
            args["seq"] = r[13]                         # the task's number on its stream
        if len(r) > 12 and r[11] is not None:
            args["device_modelled_start_ns"], args["device_modelled_end_ns"] = round(r[11]), round(r[12])
        ev = {"ph": "X", "name": name, "cat": "task", "pid": pid, "tid": stream, "ts": us(start),
              "dur": (end - start) / 1000.0, "args": args}
        events.append(ev)
        small = {"stream": stream, "kind": kind, "route": route, "bytes": nbytes}   # full args: stream track
        if i in engine_tid:
            events.append({"ph": "X", "name": name, "cat": "engine", "pid": dev, "tid": engine_tid[i],
                           "ts": ev["ts"], "dur": ev["dur"], "args": small})
        # the same task in modelled time: process "device N (modelled)", pid MODELLED_PID + N
        events.append({"ph": "X", "name": name, "cat": "modelled", "pid": MODELLED_PID + pid, "tid": stream,
                       "ts": modelled[i][0] / 1000.0, "dur": (modelled[i][1] - modelled[i][0]) / 1000.0,
                       "args": small})
        tracks.setdefault((MODELLED_PID + pid, stream), tracks[(pid, stream)])
    for dev in sorted({r[0] for r in records}):
        pid = MODELLED_PID + _pid(dev)
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                       "args": {"name": f"{'host' if dev == HOST else f'device {dev}'} (modelled time)"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                       "args": {"sort_index": MODELLED_PID + dev}})
    for (dev, tid), name in tracks.items():
        events.append({"ph": "M", "name": "thread_name", "pid": dev, "tid": tid, "args": {"name": name}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": dev, "tid": tid, "args": {"sort_index": tid}})
    events += _flows(records, sources, us)
    makespan = max((m[1] for m in modelled), default=0.0)
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "mdev": dict(meta, version=1, t0_ns=t0, tasks=len(records), modelled_makespan_ns=round(makespan),
                         kernel_factor=timemodel.kernel_factor())}


MODELLED_PID = 1000


def _pid(dev: int) -> int:
    return HOST_PID if dev == HOST else dev


def _sources(records: list) -> dict[int, int]:
    """Index of each wait -> index of the record that released it (same key, latest before it
    ended; for a value wait, the record its key names: device, stream, wall start)."""
    by_task = {(r[0], r[1], r[7]): i for i, r in enumerate(records)}
    by_key: dict[tuple, list[int]] = {}
    for i, r in enumerate(records):
        if r[3] in SOURCES and r[10] is not None:
            by_key.setdefault(tuple(r[10]), []).append(i)
    out = {}
    for i, r in enumerate(records):
        if r[3] == "value_wait" and r[10] is not None:
            j = by_task.get(tuple(r[10][1:]))
            if j is not None:
                out[i] = j
            continue
        if r[3] not in SINKS or r[10] is None:
            continue
        candidates = [j for j in by_key.get(tuple(r[10]), ()) if records[j][7] <= r[8]]
        if candidates:
            out[i] = candidates[-1]
    return out


def _flows(records: list, sources: dict[int, int], us) -> list[dict]:
    """Flow arrows: each wait from the record that released it."""
    out = []
    n = 0
    for i, j in sorted(sources.items()):
        r, src = records[i], records[j]
        n += 1
        name = FLOW_NAMES[r[10][0]]
        out.append({"ph": "s", "id": n, "name": name, "cat": "flow", "pid": _pid(src[0]), "tid": src[1],
                    "ts": us((src[7] + src[8]) // 2)})
        out.append({"ph": "f", "bp": "e", "id": n, "name": name, "cat": "flow", "pid": _pid(r[0]), "tid": r[1],
                    "ts": us(max(r[7], r[8] - 1))})     # where the wait ended
    return out


hooks.on_attach.append(on_attach)
