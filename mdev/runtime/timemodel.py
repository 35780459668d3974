"""Modelled time of a trace: what the recorded tasks would take on the board's links.

Computed from the task records when a trace is written (``MDEV_TRACE``), so every task
carries a wall and a modelled start/end, and ``mdev whatif`` can compare topologies by a
makespan that depends on them (wall time on the emulator mostly does not).

    copy / copy2d / reduce   latency of its path + bytes / bottleneck bandwidth of the path
                             (on one device: bytes / d2d_gbps; pinned host <-> device: the
                             device's host path; peer copy: path(a, b))
    memset / value_write     like a copy from the executing device to the target (on the
                             device: bytes / hbm_gbps)
    kernel                   measured wall time x MDEV_MODEL_KERNEL_FACTOR (default 1.0)
    host callback            measured wall time (the host function ran for real)
    event / notify waits     end when the record that released them ends (modelled), never
                             before the wait's stream reached them
    records, resets, other   0

A task starts when its stream's previous task ended (modelled), a slot of its engine is
free (2 DMA slots per device; kernels of one engine kind run one at a time), and every
link channel of its path is free (transfers sharing a channel one after another: the
same total throughput as sharing the bandwidth).  Tasks are taken in order of their wall
start times, a wait only once the record it waited for is placed.  Host-side ordering
(a synchronisation, then more work) is not in the records; it is inferred: a task that
reached an idle stream (first task, or >= 100 us after the stream's previous one ended, wall)
was submitted by the host then, so it starts no earlier (modelled) than every task that had
ended (wall) before it started.  Value waits are not modelled (0).  Event timestamps
(``event_elapsed_time``) stay wall-clock.
"""

from __future__ import annotations

import heapq
import os

DMA_SLOTS = 2
IDLE_GAP_NS = 100_000     # a stream idle this long before a task: the host submitted it then
COPIES = {"copy", "copy2d", "reduce", "memset", "value_write"}
ZERO = {"record_event", "reset_event", "record_notify", "value_wait", "update_graph"}


def kernel_factor() -> float:
    try:
        return float(os.environ.get("MDEV_MODEL_KERNEL_FACTOR", "1.0"))
    except ValueError:
        return 1.0


def _duration_ns(r: tuple, meta: dict) -> float:
    dev, kind, nbytes, route, path = r[0], r[3], r[4], r[5], r[6]
    if kind in COPIES:
        if not path:
            devices = meta.get("device_bw", [])
            hbm, d2d = devices[dev] if dev < len(devices) else (1600.0, 800.0)
            gbps = hbm if kind in ("memset", "value_write") else d2d
            return nbytes / gbps if gbps else 0.0          # GB/s = bytes per ns
        links = meta.get("links", {})
        gbps = min((links.get(l, {}).get("gbps") or 0.0) for l, _ in path) or 0.0
        latency_ns = sum((links.get(l, {}).get("latency_us") or 0.0) for l, _ in path) * 1000.0
        return latency_ns + (nbytes / gbps if gbps else 0.0)
    if kind == "kernel":
        return (r[8] - r[7]) * kernel_factor()
    if kind in ("host_callback", "run_graph"):
        return float(r[8] - r[7])
    return 0.0


def model(records: list, meta: dict, sources: dict[int, int]) -> list[tuple[float, float]]:
    """Modelled (start, end) in ns from the first task, per record (``records`` sorted by
    wall start); ``sources`` maps a wait's index to the index of the record that released it."""
    n = len(records)
    result: list[tuple[float, float] | None] = [None] * n
    queues: dict[tuple[int, int], list[int]] = {}
    for i, r in enumerate(records):
        queues.setdefault((r[0], r[1]), []).append(i)
    heads = {k: 0 for k in queues}
    stream_t: dict[tuple[int, int], float] = {k: 0.0 for k in queues}
    engine_t: dict[tuple[int, str], list[float]] = {}
    channel_t: dict[tuple[str, bool], float] = {}
    known: list[tuple[int, float]] = []      # heap of (wall end, modelled end) of placed tasks
    host_t = 0.0                              # latest modelled end the host could have waited for
    wall_prev: dict[tuple[int, int], int] = {}
    placed = 0
    while placed < n:
        ready = []
        for key, h in heads.items():
            q = queues[key]
            if h >= len(q):
                continue
            i = q[h]
            src = sources.get(i)
            if src is None or result[src] is not None:
                ready.append(i)
        if not ready:          # a cycle cannot happen in a real run; place the earliest anyway
            ready = [queues[k][h] for k, h in heads.items() if h < len(queues[k])]
            forced = True
        else:
            forced = False
        i = min(ready, key=lambda j: records[j][7])
        r = records[i]
        key = (r[0], r[1])
        start = stream_t[key]
        while known and known[0][0] <= r[7]:
            host_t = max(host_t, heapq.heappop(known)[1])
        if key not in wall_prev or wall_prev[key] <= r[7] - IDLE_GAP_NS:
            # the stream was idle: the host submitted this task then, possibly after waiting
            # for everything that had finished by that time
            start = max(start, host_t)
        wall_prev[key] = r[8]
        src = sources.get(i)
        if src is not None and result[src] is not None and not forced:
            start = max(start, result[src][1])
        slots = None
        if r[2] is not None:
            slots = engine_t.setdefault((r[0], r[2]), [0.0] * (DMA_SLOTS if r[2] == "dma" else 1))
            slot = min(range(len(slots)), key=lambda s: slots[s])
            start = max(start, slots[slot])
        for ch in r[6]:
            start = max(start, channel_t.get(tuple(ch), 0.0))
        end = start + _duration_ns(r, meta)
        if slots is not None:
            slots[slot] = end
        for ch in r[6]:
            channel_t[tuple(ch)] = end
        stream_t[key] = end
        result[i] = (start, end)
        heapq.heappush(known, (r[8], end))
        heads[key] += 1
        placed += 1
    return result  # type: ignore[return-value]
