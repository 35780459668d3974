"""Modelled time of a trace: what the recorded tasks would take on the board's links.

Computed from the task records when a trace is written (``MDEV_TRACE``), so every task
carries a wall and a modelled start/end, and ``mdev whatif`` can compare topologies by a
makespan that depends on them (wall time on the emulator mostly does not).

By the time kind of a task's op (mdev.taskspec):

    TRANSFER (copy, copy2d,  latency of its path + bytes / bottleneck bandwidth of the path
    copy_strided, reduce)    (on one device: bytes / d2d_gbps; pinned host <-> device: the
                             device's host path; peer copy: path(a, b))
    FILL (memset, fill32,    like a copy from the executing device to the target (on the
    value_write)             device: bytes / hbm_gbps)
    host memcpy / memset     synchronous operations of the host process (device HOST, see
                             mdev.runtime.trace.host_op): as a copy / memset of the device
                             they ran for; host to host: measured wall time
    KERNEL                   measured wall time x MDEV_MODEL_KERNEL_FACTOR (default 1.0)
    MEASURED                 measured wall time (a host callback: the host function ran
                             for real; a model's execution)
    host synchronize         0, ending when the tasks it waited for ended
    WAIT (event / notify /   end when the record that released them ends (modelled), never
    value waits)             before the wait's stream reached them
    PRESCRIBED (coll_run)    the duration its flow carries (HCCL's formula); the records of
                             one operation's ranks (same flow key) start together, when the
                             last of them could (the handshake a collective starts with)
    INSTANT (records, ...)   0

A task starts when its stream's previous task ended (modelled) and a slot of its engine is
free (the board file's ``dma_engines`` DMA slots per device, default 2; kernels of one
engine kind run one at a time).  Host-side
records form one stream of their own (the host does one thing after another) and use no
engine.  Slots go to tasks in order of their wall start times, a wait only after the record
it waited for.  Host ordering is what the program did, never guessed from wall-clock gaps
(a host that is slow to submit is no synchronisation): a "synchronize" host record (a
synchronisation, or a query that found work done) ends when the tasks it names ended, and
a host-side operation (a synchronous copy or memset) starts after the previous record of
its host thread (each thread is a host stream of its own).  A task a thread submitted
after one of its host records starts after it: device records carry the task's number on
its stream (``seq``), and the trace's ``holds`` mark where each thread's records fall in
each stream (see mdev.runtime.trace).

Concurrent transfers share bandwidth (a fluid model): a copy first waits its path's
latency, then moves its bytes; while it does, each link channel (a link direction, see
topology Path.channels) of its path is split equally between the copies moving bytes over
it, and the copy moves at the smallest share along its path.  Rates change only when a copy
starts or stops moving bytes, so ``model`` is a short event loop over those moments.  Two
equal copies sharing one channel both end at latency + 2 x bytes / bandwidth.

A value wait ends when the write it saw ends (its flow key names that record: a
value_write, memset, copy or kernel of any device, see mdev.board.trace); a wait that saw
no traced write (the host wrote the word) takes 0.

Event timestamps (``event_elapsed_time``) stay wall-clock, except under
``MDEV_MODEL_TIME=1``: mdev.board.trace.DeviceModel keeps per-device clocks with these
rules while the program runs, sharing bandwidth through ``share`` (the same fluid rules,
over the transfers known when a transfer is placed).
"""

from __future__ import annotations

import bisect
import heapq
import os

from mdev.taskspec import FILL, KERNEL, MEASURED, MOVES, PRESCRIBED, SPECS, TRANSFER

DMA_SLOTS = 2             # DMA slots of a device the metadata does not describe
HOST = -1                 # device of host-side records (mdev.runtime.trace.HOST)
SYNC = "synchronize"      # kind of a host record of a synchronisation
# record kind -> time kind: a device task's op (mdev.taskspec), a host-side operation's
# (mdev.runtime.trace.host_op: its "memset" is like the device's)
TIME = {name: spec.time for name, spec in SPECS.items()} | {"memcpy": TRANSFER}


def kernel_factor() -> float:
    try:
        return float(os.environ.get("MDEV_MODEL_KERNEL_FACTOR", "1.0"))
    except ValueError:
        return 1.0


def duration_ns(r: tuple, meta: dict) -> float:
    """How long the task of trace record ``r`` takes alone, in ns: a copy over its path's links
    (``meta``: their GB/s and latency, and each device's HBM bandwidth), a kernel or host
    work as long as it ran (kernels scaled by MDEV_MODEL_KERNEL_FACTOR), anything else 0."""
    dev, kind, nbytes, route, path = r[0], r[3], r[4], r[5], r[6]
    if dev == HOST:
        if kind == SYNC:
            return 0.0
        if route == "H2H" or r[10] is None:
            return float(r[8] - r[7])
        dev = r[10][1]                                      # the device it ran for
    time = TIME.get(kind)
    if time in MOVES:
        if not path:
            devices = meta.get("device_bw", [])
            hbm, d2d = devices[dev] if dev < len(devices) else (1600.0, 800.0)
            gbps = hbm if time == FILL else d2d
            return nbytes / gbps if gbps else 0.0          # GB/s = bytes per ns
        links = meta.get("links", {})
        gbps = min((links.get(l, {}).get("gbps") or 0.0) for l, _ in path) or 0.0
        latency_ns = sum((links.get(l, {}).get("latency_us") or 0.0) for l, _ in path) * 1000.0
        return latency_ns + (nbytes / gbps if gbps else 0.0)
    if time == KERNEL:
        return (r[8] - r[7]) * kernel_factor()
    if time == MEASURED:
        return float(r[8] - r[7])
    if time == PRESCRIBED and r[10] is not None:
        return float(r[10][-1])
    return 0.0


def share(transfers: list[tuple[float, float, float, tuple]], capacity: dict) -> list[float]:
    """Ends of transfers (start, latency ns, bytes, channels) that share their channels
    (capacity: GB/s per channel) under ``model``'s fluid rules, none of them waiting for
    another."""
    end = [0.0] * len(transfers)
    timers = [(s + latency, i) for i, (s, latency, _, _) in enumerate(transfers)]
    heapq.heapify(timers)
    active: dict[int, float] = {}
    now = timers[0][0] if timers else 0.0
    while timers or active:
        users: dict = {}
        for i in active:
            for ch in transfers[i][3]:
                users[ch] = users.get(ch, 0) + 1
        rate = {i: min((capacity[ch] / users[ch] for ch in transfers[i][3] if capacity.get(ch)), default=0.0)
                for i in active}
        stalled = [i for i in active if rate[i] <= 0]      # no usable bandwidth: latency only
        for i in stalled:
            end[i] = now
            del active[i]
        t = min([now + left / rate[i] for i, left in active.items()] + ([timers[0][0]] if timers else []),
                default=now)
        dt, now = t - now, t
        for i in sorted(active):
            active[i] -= rate[i] * dt
            if active[i] <= 1e-6 * rate[i]:     # within a femtosecond of done
                del active[i]
                end[i] = now
        while timers and timers[0][0] <= now:
            _, i = heapq.heappop(timers)
            if transfers[i][2] > 0:
                active[i] = float(transfers[i][2])
            else:
                end[i] = now
    return end


def _joins(records: list) -> dict[int, list[int]]:
    """Per host synchronisation record: the indices of the tasks it waited for (its flow names
    them by (device, stream, seq); device records carry their seq as field 13)."""
    by_seq = {(r[0], r[1], r[13]): i for i, r in enumerate(records) if len(r) > 13 and r[13] is not None}
    joins: dict[int, list[int]] = {}
    for i, r in enumerate(records):
        if r[0] == HOST and r[3] == SYNC and r[10] is not None and len(r[10]) > 2:
            joins[i] = [by_seq[t] for t in map(tuple, r[10][2]) if t in by_seq]
    return joins


def _order(records: list, sources: dict[int, int], joins: dict[int, list[int]]):
    """The placement order (by wall start, a wait only once the record it waited for is
    placed, a synchronisation once its tasks are) and per task: its stream's previous task
    and the record that released it."""
    n = len(records)
    queues: dict[tuple[int, int], list[int]] = {}
    for i, r in enumerate(records):
        queues.setdefault((r[0], r[1]), []).append(i)
    heads = {k: 0 for k in queues}
    placed = [False] * n
    order, prev, src = [], [None] * n, [None] * n
    for _ in range(n):
        heads_now = [queues[k][h] for k, h in heads.items() if h < len(queues[k])]
        ready = [i for i in heads_now if (sources.get(i) is None or placed[sources[i]])
                 and all(placed[j] for j in joins.get(i, ()))]
        forced = not ready     # a cycle cannot happen in a real run; place the earliest anyway
        i = min(ready or heads_now, key=lambda j: records[j][7])
        key = (records[i][0], records[i][1])
        if heads[key]:
            prev[i] = queues[key][heads[key] - 1]
        if not forced and sources.get(i) is not None:
            src[i] = sources[i]
        heads[key] += 1
        placed[i] = True
        order.append(i)
    return order, prev, src


def _held_back(records: list, holds: list) -> list[list[int]]:
    """Per task: the host records it was submitted after.  ``holds`` are the trace's marks
    (device, stream, seq, host track, host record's wall start): the tasks of that stream from
    seq on were submitted by that host thread after that record (mdev.runtime.trace); a task
    follows each thread's latest mark at or before its seq."""
    host = {(r[1], r[7]): j for j, r in enumerate(records) if r[0] == HOST}
    marks: dict[tuple[int, int], dict[int, tuple[list[int], list[int]]]] = {}   # stream -> track -> (seqs, records)
    for dev, stream, seq, track, start in sorted(holds, key=lambda h: h[2]):
        j = host.get((track, start))
        if j is not None:
            seqs, recs = marks.setdefault((dev, stream), {}).setdefault(track, ([], []))
            seqs.append(seq)
            recs.append(j)
    hold: list[list[int]] = [[] for _ in records]
    for i, r in enumerate(records):
        by_track = marks.get((r[0], r[1])) if len(r) > 13 and r[13] is not None else None
        for seqs, recs in (by_track or {}).values():
            k = bisect.bisect_right(seqs, r[13])
            if k:
                hold[i].append(recs[k - 1])
    return hold


def model(records: list, meta: dict, sources: dict[int, int]) -> list[tuple[float, float]]:
    """Modelled (start, end) in ns from the first task, per record (``records`` sorted by
    wall start); ``sources`` maps a wait's index to the index of the record that released it."""
    n = len(records)
    joins = _joins(records)
    order, prev, src = _order(records, sources, joins)
    links = meta.get("links", {})
    start: list[float | None] = [None] * n
    end: list[float | None] = [None] * n
    nxt = {p: i for i, p in enumerate(prev) if p is not None}
    released: dict[int, list[int]] = {}
    for i, s in enumerate(src):
        if s is not None:
            released.setdefault(s, []).append(i)
    for i, waited in joins.items():
        for j in waited:
            released.setdefault(j, []).append(i)
    hold = _held_back(records, meta.get("holds") or [])
    held: dict[int, list[int]] = {}
    for i, js in enumerate(hold):
        for j in js:
            held.setdefault(j, []).append(i)
    # engine slots, handed out in placement order: a slot goes to the next task of its engine
    # as soon as its holder ended; slot_t[i] is when i's slot became free
    fifo: dict[tuple[int, str], list[int]] = {}
    for i in order:
        if records[i][2] is not None:
            fifo.setdefault((records[i][0], records[i][2]), []).append(i)
    slots = meta.get("dma_slots") or []
    holders = {k: [None] * ((slots[k[0]] if 0 <= k[0] < len(slots) else DMA_SLOTS) if k[1] == "dma" else 1)
               for k in fifo}
    fifo_at = {k: 0 for k in fifo}
    slot_t: list[float | None] = [None] * n
    candidates: list[int] = []

    def book(k: tuple[int, str]) -> None:
        slots, q = holders[k], fifo[k]
        while fifo_at[k] < len(q):
            free = [(0.0 if h is None else end[h], s) for s, h in enumerate(slots) if h is None or end[h] is not None]
            if not free:
                return
            t, s = min(free)
            i = q[fifo_at[k]]
            fifo_at[k] += 1
            slots[s], slot_t[i] = i, t
            candidates.append(i)

    # a whole collective's records, by operation: they start together (see the docstring)
    meets: dict[tuple, list[int]] = {}
    for i, r in enumerate(records):
        if TIME.get(r[3]) == PRESCRIBED and r[10] is not None:
            meets.setdefault(tuple(r[10][1:-1]), []).append(i)
    meet_of = {i: group for group in meets.values() for i in group}

    def could_start(i: int) -> bool:
        return (start[i] is None and (prev[i] is None or end[prev[i]] is not None)
                and (src[i] is None or end[src[i]] is not None)
                and all(end[j] is not None for j in joins.get(i, ()))
                and all(end[j] is not None for j in hold[i])
                and (records[i][2] is None or slot_t[i] is not None))

    def ready(i: int) -> bool:
        return could_start(i) and all(could_start(j) for j in meet_of.get(i, ()))

    timers: list[tuple[float, int, bool]] = []   # (time, index, data phase begins (else: ends))
    active: dict[int, float] = {}                 # copies moving bytes -> bytes left
    now = 0.0

    def launch(i: int) -> None:
        r = records[i]
        start[i] = now
        gbps = min((links.get(l, {}).get("gbps") or 0.0) for l, _ in r[6]) if r[6] else 0.0
        if TIME.get(r[3]) in MOVES and gbps > 0:
            latency_ns = sum((links.get(l, {}).get("latency_us") or 0.0) for l, _ in r[6]) * 1000.0
            heapq.heappush(timers, (now + latency_ns, i, True))
        else:
            heapq.heappush(timers, (now + duration_ns(r, meta), i, False))

    def finish(i: int) -> None:
        end[i] = now
        if i in nxt:
            candidates.append(nxt[i])
        candidates.extend(released.get(i, ()))
        candidates.extend(held.get(i, ()))
        if records[i][2] is not None:
            book((records[i][0], records[i][2]))

    for k in fifo:
        book(k)
    candidates.extend(i for i in range(n) if prev[i] is None and src[i] is None)
    done = 0
    while done < n:
        for i in sorted(set(candidates)):
            if ready(i):
                for j in meet_of.get(i, (i,)):
                    launch(j)
        candidates.clear()
        # fluid sharing: a copy moves at the smallest share (capacity / copies on it) of its channels
        users: dict[tuple, int] = {}
        for i in active:
            for ch in records[i][6]:
                users[tuple(ch)] = users.get(tuple(ch), 0) + 1
        rate = {i: min(links[ch[0]]["gbps"] / users[tuple(ch)] for ch in records[i][6]) for i in active}
        t = min([now + left / rate[i] for i, left in active.items()] + ([timers[0][0]] if timers else []),
                default=None)
        if t is None:
            break              # nothing runs and nothing can start (cannot happen in a real run)
        dt, now = t - now, t
        for i in sorted(active):
            active[i] -= rate[i] * dt
            if active[i] <= 1e-6 * rate[i]:     # within a femtosecond of done
                del active[i]
                finish(i)
                done += 1
        while timers and timers[0][0] <= now:
            _, i, data = heapq.heappop(timers)
            if data:
                active[i] = float(records[i][4])
            else:
                finish(i)
                done += 1
    return [(s if s is not None else 0.0, e if e is not None else 0.0) for s, e in zip(start, end)]
