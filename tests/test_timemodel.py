"""Modelled time (mdev.timemodel.model) on hand-built task records, checked against
hand-computed cases: concurrent transfers on a link channel share its bandwidth, a value
wait follows the write it saw; then the same cases run on boards with MDEV_MODEL_TIME=1,
where event_elapsed_time (the devices' live clocks) must give the hand-computed figures
and every task's live modelled time must match the trace's."""

from __future__ import annotations

import pytest

from mdev import topology
from mdev import timemodel
from mdev.runtime.trace import _sources

MiB, GiB = 1 << 20, 1 << 30


def meta_of(topo) -> dict:
    return {"links": {l.id: {"gbps": l.effective_gbps, "latency_us": l.latency_us} for l in topo.links},
            "device_bw": [(d.hbm_gbps, d.d2d_gbps) for d in topo.devices]}


def route(topo, src: tuple, dst: tuple) -> tuple[str, tuple]:
    """(route, path) as mdev.board.trace.Recorder writes them: src / dst ("p", None) or ("d", index)."""
    if src[0] == "p":          # host -> device: the host path backwards
        return "H2D", tuple((link, not fwd) for link, fwd in reversed(topo.host_path(dst[1]).channels()))
    if dst[0] == "p":
        return "D2H", tuple(topo.host_path(src[1]).channels())
    return "P2P", tuple(topo.path(src[1], dst[1]).channels())


def copy(dev, stream, src, dst, nbytes, wall, topo, seq=None):
    kind, path = route(topo, src, dst)
    return (dev, stream, "dma", "copy", nbytes, kind, path, wall[0], wall[1], 0, None, None, None, seq)


def synchronize(at, waited):
    """A host record of a synchronisation (host thread 0) at wall time ``at`` of the tasks
    ``waited`` ((device, stream, seq), ...)."""
    return (-1, 0, None, "synchronize", 0, "", (), at, at, 0, ("h", None, waited))


def after(meta, host_record, *tasks):
    """``meta`` with marks: each (device, stream, seq) of ``tasks`` was submitted after
    ``host_record`` by its thread."""
    return dict(meta, holds=[[dev, stream, seq, host_record[1], host_record[7]] for dev, stream, seq in tasks])


def model(records, meta):
    records = sorted(records, key=lambda r: r[7])
    return records, timemodel.model(records, meta, _sources(records))


def test_single_copy_over_one_hccs_link():
    topo = topology.resolve("hccs8")
    (rec,) = [copy(0, 0, ("d", 0), ("d", 1), GiB, (0, 10**6), topo)]
    assert rec[5] == "P2P" and len(rec[6]) == 1
    link = topo.links[[l.id for l in topo.links].index(rec[6][0][0])]
    assert link.effective_gbps == 56.0
    _, [(start, end)] = model([rec], meta_of(topo))
    expect = link.latency_us * 1000 + GiB / 56.0          # GB/s = bytes per ns
    assert start == 0 and end == pytest.approx(expect, abs=1e-3)


def test_two_concurrent_h2d_copies_share_the_pcie_switch_uplink():
    topo = topology.resolve("pcie4")
    a = copy(0, 0, ("p", None), ("d", 0), 256 * MiB, (0, 10**6), topo)
    b = copy(1, 0, ("p", None), ("d", 1), 256 * MiB, (1000, 10**6 + 1000), topo)
    shared = {tuple(c) for c in a[6]} & {tuple(c) for c in b[6]}
    assert {l for l, _ in shared} == {"sw0-rc0", "rc0-numa0"}       # the uplink (31.5 GB/s) and the host link
    latency_ns = sum(topo.links[[l.id for l in topo.links].index(l)].latency_us for l, _ in a[6]) * 1000
    _, modelled = model([a, b], meta_of(topo))
    expect = latency_ns + 2 * 256 * MiB / 31.5
    for start, end in modelled:
        assert start == 0 and end == pytest.approx(expect, abs=1e-3)
    # one copy alone: the full 31.5 GB/s
    _, [(_, alone)] = model([a], meta_of(topo))
    assert alone == pytest.approx(latency_ns + 256 * MiB / 31.5, abs=1e-3)


def test_partly_overlapping_copies_share_while_both_run():
    topo = topology.resolve("pcie4")
    meta = meta_of(topo)
    a = copy(0, 0, ("p", None), ("d", 0), 256 * MiB, (0, 10**6), topo, seq=1)
    c = copy(1, 0, ("p", None), ("d", 1), 64 * MiB, (1000, 10**6 + 1000), topo, seq=1)
    # the host synchronised on the first, then submitted the second: it starts at the first's
    # modelled end, so nothing is shared
    sync = synchronize(15 * 10**5, ((0, 0, 1),))
    later = c[:7] + (2 * 10**6, 3 * 10**6) + c[9:]
    records, modelled = model([a, sync, later], after(meta, sync, (1, 0, 1)))
    at = {r[3] if r[0] < 0 else r[0]: m for r, m in zip(records, modelled)}
    (_, end_a), (start_c, end_c) = at[0], at[1]
    assert at["synchronize"] == (pytest.approx(end_a), pytest.approx(end_a))
    assert start_c == end_a
    # the same copy without the synchronisation: a host slow to submit is no synchronisation,
    # the two share the uplink while both run
    _, [(_, end_a), (start_c, end_c)] = model([a, later], meta)
    assert start_c == 0 and end_a > 256 * MiB / 31.5 + 1000
    # both submitted at once: c shares the uplink (half rate) until it is done, a then runs alone
    _, [(_, end_a), (_, end_c)] = model([a, c], meta)
    latency_ns = sum(meta["links"][l]["latency_us"] for l, _ in a[6]) * 1000   # 0.5 + 0.5 + 0.2 us
    assert end_c == pytest.approx(latency_ns + 2 * 64 * MiB / 31.5, abs=1e-3)
    assert end_a == pytest.approx(latency_ns + (256 + 64) * MiB / 31.5, abs=1e-3)


def test_pipeline_over_four_devices():
    topo = topology.resolve("hccs8")
    meta = meta_of(topo)
    records, hops = [], []
    t = 0
    for dev in range(3):
        wall = (t + 10, t + 1000)
        if dev:             # wait for the previous hop's record on this device's stream
            records.append((dev, 0, None, "wait_event", 0, "", (), dev, t + 1000, 0, ("e", dev - 1, 0, 1)))
            wall = (t + 1000, t + 2000)
        records.append(copy(dev, 0, ("d", dev), ("d", dev + 1), 64 * MiB, wall, topo))
        records.append((dev, 0, None, "record_event", 0, "", (), wall[1], wall[1] + 1, 0, ("e", dev, 0, 1)))
        t = wall[1]
        path = records[-2][6]
        hops.append(sum(meta["links"][l]["latency_us"] for l, _ in path) * 1000
                    + 64 * MiB / min(meta["links"][l]["gbps"] for l, _ in path))
    records, modelled = model(records, meta)
    ends = {(r[0], r[3]): m for r, m in zip(records, modelled)}
    assert ends[(0, "copy")][0] == 0
    for dev in (1, 2):
        assert ends[(dev, "copy")][0] == pytest.approx(ends[(dev - 1, "copy")][1], abs=1e-6)
    assert max(e for _, e in modelled) == pytest.approx(sum(hops), abs=1e-3)


def test_share_is_the_fluid_model_of_transfers_placed_at_once():
    """timemodel.share (the live clocks' sharing) gives model()'s ends for the uplink cases."""
    topo = topology.resolve("pcie4")
    meta = meta_of(topo)
    a = copy(0, 0, ("p", None), ("d", 0), 256 * MiB, (0, 10**6), topo)
    b = copy(1, 0, ("p", None), ("d", 1), 64 * MiB, (0, 10**6), topo)
    latency_ns = sum(meta["links"][l]["latency_us"] for l, _ in a[6]) * 1000
    capacity = {ch: meta["links"][ch[0]]["gbps"] for r in (a, b) for ch in r[6]}
    ends = timemodel.share([(0.0, latency_ns, r[4], r[6]) for r in (a, b)], capacity)
    assert ends == [pytest.approx(latency_ns + (256 + 64) * MiB / 31.5, abs=1e-3),
                    pytest.approx(latency_ns + 2 * 64 * MiB / 31.5, abs=1e-3)]
    assert ends == [pytest.approx(e, abs=1e-3) for _, e in model([a, b], meta)[1]]


def test_value_wait_starts_its_successor_after_the_write_it_saw():
    topo = topology.resolve("pcie4")
    meta = meta_of(topo)
    h2d = copy(0, 0, ("p", None), ("d", 0), 64 * MiB, (0, 10**6), topo)
    write = (0, 0, None, "value_write", 8, "D2D", (), 10**6, 10**6 + 10, 0, None)
    # device 1 waits (wall) from the start; its memset follows the wait on the same stream
    wait = (1, 3, None, "value_wait", 0, "", (), 500, 10**6 + 20, 0, ("v", 0, 0, 10**6))
    memset = (1, 3, "dma", "memset", 4096, "D2D", (), 10**6 + 30, 10**6 + 40, 0, None)
    records, modelled = model([h2d, write, wait, memset], meta)
    at = {r[3]: m for r, m in zip(records, modelled)}
    latency_ns = sum(meta["links"][l]["latency_us"] for l, _ in h2d[6]) * 1000
    written = latency_ns + 64 * MiB / 31.5 + 8 / topo.devices[0].hbm_gbps
    assert at["value_write"][1] == pytest.approx(written, abs=1e-3)
    assert at["value_wait"] == pytest.approx((written, written), abs=1e-3)
    assert at["memset"][0] == pytest.approx(written, abs=1e-3)
    # a wait that saw no traced write (the host wrote the word) takes 0 and depends on nothing
    records, modelled = model([h2d, wait[:10] + (None,), memset], meta)
    assert [m for r, m in zip(records, modelled) if r[3] == "value_wait"] == [(0.0, 0.0)]


def test_host_side_copies_block_the_host_and_share_links():
    topo = topology.resolve("pcie4")
    meta = meta_of(topo)
    kind, path = route(topo, ("p", None), ("d", 0))
    sync = (-1, 0, None, "memcpy", 64 * MiB, kind, path, 0, 5 * 10**6, 0, ("h", 0, ()))     # host record
    later = copy(1, 0, ("p", None), ("d", 1), 64 * MiB, (6 * 10**6, 7 * 10**6), topo, seq=1)  # submitted after it
    latency_ns = sum(meta["links"][l]["latency_us"] for l, _ in path) * 1000
    alone = latency_ns + 64 * MiB / 31.5
    _, [(s0, e0), (s1, e1)] = model([sync, later], after(meta, sync, (1, 0, 1)))
    assert (s0, e0) == (0, pytest.approx(alone, abs=1e-3))
    assert s1 == pytest.approx(e0) and e1 == pytest.approx(e0 + alone, abs=1e-3)
    # a device copy already running when the host copies: they share the switch uplink
    running = copy(1, 0, ("p", None), ("d", 1), 64 * MiB, (0, 8 * 10**6), topo, seq=1)
    _, modelled = model([sync, running], meta)
    assert [e for _, e in modelled] == [pytest.approx(latency_ns + 2 * 64 * MiB / 31.5, abs=1e-3)] * 2
    # a host-to-host copy takes its measured time
    h2h = (-1, 0, None, "memcpy", 64 * MiB, "H2H", (), 0, 12345, 0, ("h", 0))
    _, [(_, end)] = model([h2h], meta)
    assert end == 12345


def test_task_queued_behind_a_busy_stream_waits_for_an_earlier_host_copy():
    """The host copies synchronously while device 0's stream is still busy (wall), then
    queues a copy on it: that copy starts at the host copy's modelled end, not at its
    stream predecessor's (its seq 2 is marked as submitted after the host copy)."""
    topo = topology.resolve("pcie4")
    meta = meta_of(topo)
    kind, path = route(topo, ("p", None), ("d", 1))
    first = (0, 0, "dma", "copy", 8 * MiB, "D2D", (), 0, 10 * 10**6, 0, None, None, None, 1)
    sync = (-1, 0, None, "memcpy", 64 * MiB, kind, path, 10**6, 5 * 10**6, 0, ("h", 1, ()))
    second = first[:7] + (10 * 10**6, 11 * 10**6) + first[9:13] + (2,)     # reached a busy stream
    meta = after(meta, sync, (0, 0, 2))                    # the host submitted the stream's task 2 after it
    records, modelled = model([first, sync, second], meta)
    at = {(r[0], r[13] if len(r) > 13 else None): m for r, m in zip(records, modelled)}
    d2d = 8 * MiB / 600.0                                  # Ascend910B4 d2d_gbps: 600 GB/s
    host = (0.5 + 0.5 + 0.2) * 1000 + 64 * MiB / 31.5      # npu1-sw0, sw0-rc0 (31.5 GB/s), rc0-numa0
    assert topo.devices[0].d2d_gbps == 600.0
    assert at[(0, 1)] == (0, pytest.approx(d2d, rel=0.01))
    assert at[(-1, None)] == (0, pytest.approx(host, rel=0.01))
    assert at[(0, 2)] == (pytest.approx(host, rel=0.01), pytest.approx(host + d2d, rel=0.01))
    # a task the stream had been given before the host copy ended is not held back
    early = second[:13] + (1,)
    records, modelled = model([first[:13] + (0,), sync, early], meta)
    assert [m for r, m in zip(records, modelled) if r[7] == 10 * 10**6] == [(pytest.approx(d2d), pytest.approx(2 * d2d))]


CONCURRENT_H2D = """
    import mdev.acl as acl
    SIZE = 32 << 20
    assert acl.init() == 0
    host, ret = acl.rt.malloc_host(SIZE); assert ret == 0
    streams, bufs, gates = [], [], []
    for dev in (0, 1):
        assert acl.rt.set_device(dev) == 0
        s, ret = acl.rt.create_stream(); assert ret == 0
        b, ret = acl.rt.malloc(SIZE, 0); assert ret == 0
        g, ret = acl.rt.malloc(8, 0); assert ret == 0
        assert acl.rt.memset(g, 8, 0, 8) == 0
        streams.append(s); bufs.append(b); gates.append(g)
    for dev in (0, 1):            # both copies wait behind a gate until both are queued
        assert acl.rt.set_device(dev) == 0
        assert acl.rt.value_wait(gates[dev], 1, acl.ACL_STREAM_WAIT_VALUE_EQ, streams[dev]) == 0
        assert acl.rt.memcpy_async(bufs[dev], SIZE, host, SIZE, 1, streams[dev]) == 0
    for dev in (0, 1):            # the host opens the gates: the copies run at the same time
        assert acl.rt.set_device(dev) == 0
        assert acl.rt.memset(gates[dev], 8, 1, 1) == 0
    for dev in (0, 1):
        assert acl.rt.set_device(dev) == 0
        assert acl.rt.synchronize_stream(streams[dev]) == 0
    print("done")
"""


def test_traced_concurrent_h2d_copies_share_the_uplink(pcie_board, tmp_path):
    import json
    import os
    import subprocess
    import sys
    import textwrap

    prog, trace = tmp_path / "h2d.py", tmp_path / "h2d.json"
    prog.write_text(textwrap.dedent(CONCURRENT_H2D))
    proc = subprocess.run([sys.executable, "-m", "mdev", "run", "--board", pcie_board, "--trace", str(trace), str(prog)],
                          env=dict(os.environ, MDEV_AUTOSTART="0"), capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0 and "done" in proc.stdout, proc.stdout + proc.stderr
    data = json.loads(trace.read_text())
    copies = [e for e in data["traceEvents"] if e.get("cat") == "task" and e["args"]["route"] == "H2D"]
    assert sorted(e["pid"] for e in copies) == [0, 1]
    links = data["mdev"]["links"]
    latency_ns = sum(links[l]["latency_us"] for l in copies[0]["args"]["path"]) * 1000
    for e in copies:
        assert e["args"]["modelled_start_ns"] == 0            # the gates' waits take no modelled time
        assert abs(e["args"]["modelled_end_ns"] - (latency_ns + 2 * (32 << 20) / 31.5)) <= 1, e["args"]


# ---------------------------------------------------------------------------- live clocks
# The same hand-computed cases measured by event_elapsed_time with MDEV_MODEL_TIME=1 (the
# devices' own clocks, mdev.board.trace.DeviceModel), traced too: every task's live
# modelled time (device_modelled_*) must agree with the trace's (timemodel.model).

def run_modelled(board: str, program: str, tmp_path) -> tuple[list[float], dict]:
    import json
    import os
    import subprocess
    import sys
    import textwrap

    trace = tmp_path / "live.json"
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(program)], capture_output=True, text=True,
                          timeout=180, env=dict(os.environ, MDEV_BOARD=board, MDEV_AUTOSTART="0",
                                                MDEV_MODEL_TIME="1", MDEV_TRACE=str(trace)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [float(x) for x in proc.stdout.split()], json.loads(trace.read_text())


def assert_live_agrees(data: dict) -> None:
    for e in (e for e in data["traceEvents"] if e.get("cat") == "task"):
        a = e["args"]
        for which in ("start", "end"):
            live, offline = a[f"device_modelled_{which}_ns"], a[f"modelled_{which}_ns"]
            assert live == pytest.approx(offline, rel=0.01, abs=2), (a["kind"], a["device"], which, live, offline)


@pytest.fixture(scope="module")
def hccs_board():
    from helpers import extra_board
    with extra_board("timemodel-hccs", "hccs8", hbm=GiB + 64 * MiB, devices=4) as board:
        yield board


@pytest.fixture(scope="module")
def pcie_board():
    from helpers import extra_board
    with extra_board("timemodel-pcie", "pcie4", hbm=320 * MiB, devices=2) as board:
        yield board


LIVE_HCCS_COPY = """
    import mdev.acl as acl
    assert acl.init() == 0
    acl.rt.set_device(1)
    dst, ret = acl.rt.malloc(1 << 30, 0); assert ret == 0
    acl.rt.set_device(0)
    assert acl.rt.device_enable_peer_access(1, 0) == 0
    src, ret = acl.rt.malloc(1 << 30, 0); assert ret == 0
    s, _ = acl.rt.create_stream()
    e0, _ = acl.rt.create_event(); e1, _ = acl.rt.create_event()
    assert acl.rt.record_event(e0, s) == 0
    assert acl.rt.memcpy_async(dst, 1 << 30, src, 1 << 30, 3, s) == 0
    assert acl.rt.record_event(e1, s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    print(acl.rt.event_elapsed_time(e0, e1)[0])
    acl.finalize()
"""


def test_live_single_copy_over_one_hccs_link(hccs_board, tmp_path):
    (ms,), data = run_modelled(hccs_board, LIVE_HCCS_COPY, tmp_path)
    expect_ms = (1.0 * 1000 + GiB / 56.0) / 1e6          # npu0-npu1: 56 GB/s, 1 us
    assert ms == pytest.approx(expect_ms, rel=0.01)
    assert_live_agrees(data)


LIVE_CONCURRENT_H2D = """
    import mdev.acl as acl
    SIZE = 256 << 20
    assert acl.init() == 0
    host, ret = acl.rt.malloc_host(SIZE); assert ret == 0
    streams, bufs, events, gates = [], [], [], []
    for dev in (0, 1):
        assert acl.rt.set_device(dev) == 0
        s, ret = acl.rt.create_stream(); assert ret == 0
        b, ret = acl.rt.malloc(SIZE, 0); assert ret == 0
        g, ret = acl.rt.malloc(8, 0); assert ret == 0
        assert acl.rt.memset(g, 8, 0, 8) == 0
        streams.append(s); bufs.append(b); gates.append(g)
        events.append([acl.rt.create_event()[0] for _ in range(2)])
    for dev in (0, 1):            # both copies wait behind a gate until both are queued
        assert acl.rt.set_device(dev) == 0
        assert acl.rt.value_wait(gates[dev], 1, acl.ACL_STREAM_WAIT_VALUE_EQ, streams[dev]) == 0
        assert acl.rt.record_event(events[dev][0], streams[dev]) == 0
        assert acl.rt.memcpy_async(bufs[dev], SIZE, host, SIZE, 1, streams[dev]) == 0
        assert acl.rt.record_event(events[dev][1], streams[dev]) == 0
    for dev in (0, 1):            # the host opens the gates: the copies run at the same time
        assert acl.rt.set_device(dev) == 0
        assert acl.rt.memset(gates[dev], 8, 1, 1) == 0
    for dev in (0, 1):
        assert acl.rt.set_device(dev) == 0
        assert acl.rt.synchronize_stream(streams[dev]) == 0
        print(acl.rt.event_elapsed_time(*events[dev])[0])
    acl.finalize()
"""


def test_live_concurrent_h2d_copies_share_the_uplink(pcie_board, tmp_path):
    elapsed, data = run_modelled(pcie_board, LIVE_CONCURRENT_H2D, tmp_path)
    copies = [e for e in data["traceEvents"] if e.get("cat") == "task" and e["args"]["route"] == "H2D"]
    links = data["mdev"]["links"]
    latency_ns = sum(links[l]["latency_us"] for l in copies[0]["args"]["path"]) * 1000
    expect_ms = (latency_ns + 2 * 256 * MiB / 31.5) / 1e6
    assert elapsed == [pytest.approx(expect_ms, rel=0.01)] * 2
    assert_live_agrees(data)


LIVE_PIPELINE = """
    import mdev.acl as acl
    SIZE = 64 << 20
    assert acl.init() == 0
    streams, bufs, notifies = [], [], [None]
    for dev in range(4):
        assert acl.rt.set_device(dev) == 0
        if dev < 3:
            assert acl.rt.device_enable_peer_access(dev + 1, 0) == 0
        s, _ = acl.rt.create_stream()
        b, ret = acl.rt.malloc(SIZE, 0); assert ret == 0
        streams.append(s); bufs.append(b)
        if dev:
            notifies.append(acl.rt.create_notify(0)[0])
    acl.rt.set_device(2)
    e0, _ = acl.rt.create_event(); e1, _ = acl.rt.create_event()
    assert acl.rt.record_event(e0, streams[2]) == 0
    for dev in range(3):          # hop dev -> dev + 1 on device dev's stream, after the previous hop
        assert acl.rt.set_device(dev) == 0
        if dev:
            assert acl.rt.wait_and_reset_notify(notifies[dev], streams[dev], 60) == 0
        assert acl.rt.memcpy_async(bufs[dev + 1], SIZE, bufs[dev], SIZE, 3, streams[dev]) == 0
        assert acl.rt.record_notify(notifies[dev + 1], streams[dev]) == 0
    acl.rt.set_device(2)
    assert acl.rt.record_event(e1, streams[2]) == 0
    assert acl.rt.synchronize_stream(streams[2]) == 0
    print(acl.rt.event_elapsed_time(e0, e1)[0])
    acl.finalize()
"""


def test_live_pipeline_over_four_devices(hccs_board, tmp_path):
    (ms,), data = run_modelled(hccs_board, LIVE_PIPELINE, tmp_path)
    hop_ns = 1.0 * 1000 + 64 * MiB / 56.0                 # each hop: one HCCS link
    assert ms == pytest.approx(3 * hop_ns / 1e6, rel=0.01)
    assert_live_agrees(data)


LIVE_SYNC_THEN_OTHER_DEVICE = """
    import mdev.acl as acl
    SIZE = 8 << 20
    assert acl.init() == 0
    host, _ = acl.rt.malloc_host(SIZE)
    streams, bufs = [], []
    for dev in (0, 1):
        assert acl.rt.set_device(dev) == 0
        streams.append(acl.rt.create_stream()[0]); bufs.append(acl.rt.malloc(SIZE, 0)[0])
    assert acl.rt.set_device(0) == 0
    assert acl.rt.memcpy_async(bufs[0], SIZE, host, SIZE, 1, streams[0]) == 0
    assert acl.rt.synchronize_stream(streams[0]) == 0
    assert acl.rt.set_device(1) == 0      # submitted after device 0's copy was done
    assert acl.rt.memcpy_async(bufs[1], SIZE, host, SIZE, 1, streams[1]) == 0
    assert acl.rt.synchronize_stream(streams[1]) == 0
    acl.finalize()
"""


def test_live_clock_sees_a_synchronisation_on_another_device(pcie_board, tmp_path):
    _, data = run_modelled(pcie_board, LIVE_SYNC_THEN_OTHER_DEVICE, tmp_path)
    tasks = [e for e in data["traceEvents"] if e.get("cat") == "task"]
    first, second = sorted((e for e in tasks if e["args"]["device"] >= 0), key=lambda e: e["ts"])
    assert (first["pid"], second["pid"]) == (0, 1)
    sync = [e for e in tasks if e["args"]["kind"] == "synchronize"][0]     # the host's record of it
    assert sync["args"]["device_modelled_end_ns"] == pytest.approx(first["args"]["modelled_end_ns"], abs=2)
    assert second["args"]["device_modelled_start_ns"] == pytest.approx(first["args"]["modelled_end_ns"], abs=2)
    assert_live_agrees(data)


LIVE_EVENT_WAIT = """
    import mdev.acl as acl
    SIZE = 8 << 20
    assert acl.init() == 0
    acl.rt.set_device(0)
    host, _ = acl.rt.malloc_host(SIZE)
    a, _ = acl.rt.create_stream(); b, _ = acl.rt.create_stream()
    d, _ = acl.rt.malloc(SIZE, 0); d2, _ = acl.rt.malloc(SIZE, 0)
    ev, _ = acl.rt.create_event(); e0, _ = acl.rt.create_event(); e1, _ = acl.rt.create_event()
    assert acl.rt.record_event(e0, b) == 0
    assert acl.rt.memcpy_async(d, SIZE, host, SIZE, 1, a) == 0
    assert acl.rt.record_event(ev, a) == 0
    assert acl.rt.stream_wait_event(b, ev) == 0
    assert acl.rt.memcpy_async(d2, SIZE, d, SIZE, 3, b) == 0
    assert acl.rt.record_event(e1, b) == 0
    assert acl.rt.synchronize_stream(b) == 0
    print(acl.rt.event_elapsed_time(e0, e1)[0])
    acl.finalize()
"""


def test_live_event_wait_across_streams(pcie_board, tmp_path):
    (ms,), data = run_modelled(pcie_board, LIVE_EVENT_WAIT, tmp_path)
    links = data["mdev"]["links"]
    (h2d,) = [e for e in data["traceEvents"] if e.get("cat") == "task" and e["args"]["route"] == "H2D"]
    h2d_ns = sum(links[l]["latency_us"] for l in h2d["args"]["path"]) * 1000 + 8 * MiB / 31.5
    d2d_ns = 8 * MiB / topology.resolve("pcie4").devices[0].d2d_gbps
    assert ms == pytest.approx((h2d_ns + d2d_ns) / 1e6, rel=0.01)
    assert_live_agrees(data)


LIVE_HOST_COPY_THEN_QUEUED = """
    import mdev.acl as acl
    SIZE = 8 << 20
    assert acl.init() == 0
    host, _ = acl.rt.malloc_host(SIZE)
    acl.rt.set_device(1)
    d1, _ = acl.rt.malloc(SIZE, 0)
    acl.rt.set_device(0)
    s, _ = acl.rt.create_stream()
    big, _ = acl.rt.malloc(64 << 20, 0); big2, _ = acl.rt.malloc(64 << 20, 0); d0, _ = acl.rt.malloc(SIZE, 0)
    e0, _ = acl.rt.create_event(); e1, _ = acl.rt.create_event()
    assert acl.rt.record_event(e0, s) == 0
    assert acl.rt.memcpy_async(big2, 64 << 20, big, 64 << 20, 3, s) == 0      # keeps the stream busy (wall)
    acl.rt.set_device(1)
    assert acl.rt.memcpy(d1, SIZE, host, SIZE, 1) == 0                        # the host copies meanwhile
    acl.rt.set_device(0)
    assert acl.rt.memcpy_async(d0, SIZE, host, SIZE, 1, s) == 0               # queued behind the D2D copy
    assert acl.rt.record_event(e1, s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    print(acl.rt.event_elapsed_time(e0, e1)[0])
    acl.finalize()
"""


def test_live_host_copy_holds_back_a_task_queued_after_it(pcie_board, tmp_path):
    """A synchronous H2D copy to device 1 moves the host's modelled clock: the H2D copy queued
    on device 0's stream after it starts at its end, whether or not the stream was still
    busy with its D2D copy (wall) when the task was submitted."""
    (ms,), data = run_modelled(pcie_board, LIVE_HOST_COPY_THEN_QUEUED, tmp_path)
    tasks = {(e["args"]["kind"], e["args"]["route"]): e["args"] for e in data["traceEvents"] if e.get("cat") == "task"}
    h2d = (0.5 + 0.5 + 0.2) * 1000 + 8 * MiB / 31.5       # npuN-sw0, sw0-rc0 (31.5 GB/s), rc0-numa0
    d2d = 64 * MiB / 600.0                                 # Ascend910B4 d2d_gbps
    # the host copy starts after the D2D copy only if that had ended (wall) when it started
    first, sync = tasks[("copy", "D2D")], tasks[("memcpy", "H2D")]
    before = d2d if first["wall_end_ns"] <= sync["wall_start_ns"] else 0.0
    assert sync["device_modelled_start_ns"] == pytest.approx(before, abs=2)
    assert sync["device_modelled_end_ns"] == pytest.approx(before + h2d, rel=0.01)
    assert ms == pytest.approx((before + 2 * h2d) / 1e6, rel=0.01)
    assert_live_agrees(data)


LIVE_REMOTE_EVENT_WAIT = """
    import mdev.acl as acl
    SIZE = 8 << 20
    assert acl.init() == 0
    host, _ = acl.rt.malloc_host(SIZE)
    acl.rt.set_device(1)
    b, _ = acl.rt.create_stream(); d1, _ = acl.rt.malloc(SIZE, 0)
    e0, _ = acl.rt.create_event(); e1, _ = acl.rt.create_event()
    acl.rt.set_device(0)
    a, _ = acl.rt.create_stream(); d0, _ = acl.rt.malloc(SIZE, 0)
    ev, ret = acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_IPC); assert ret == 0
    handle, ret = acl.rt.ipc_get_event_handle(ev); assert ret == 0
    acl.rt.set_device(1)
    opened, ret = acl.rt.ipc_open_event_handle(handle); assert ret == 0
    assert acl.rt.record_event(e0, b) == 0
    acl.rt.set_device(0)
    assert acl.rt.memcpy_async(d0, SIZE, host, SIZE, 1, a) == 0
    assert acl.rt.record_event(ev, a) == 0
    acl.rt.set_device(1)
    assert acl.rt.stream_wait_event(b, opened) == 0       # device 0's IPC event, waited on device 1
    assert acl.rt.memcpy_async(d1, SIZE, host, SIZE, 1, b) == 0
    assert acl.rt.record_event(e1, b) == 0
    assert acl.rt.synchronize_stream(b) == 0
    print(acl.rt.event_elapsed_time(e0, e1)[0])
    acl.finalize()
"""


def test_live_wait_on_another_devices_ipc_event(pcie_board, tmp_path):
    """A wait on device 0's IPC event ends at the record's modelled time (after the H2D copy
    before it), so device 1's H2D copy follows it: two copies one after another."""
    (ms,), data = run_modelled(pcie_board, LIVE_REMOTE_EVENT_WAIT, tmp_path)
    h2d = (0.5 + 0.5 + 0.2) * 1000 + 8 * MiB / 31.5       # npuN-sw0, sw0-rc0 (31.5 GB/s), rc0-numa0
    (wait,) = [e["args"] for e in data["traceEvents"] if e.get("cat") == "task" and e["args"]["kind"] == "wait_remote_event"]
    assert wait["device_modelled_end_ns"] == pytest.approx(h2d, rel=0.01)
    assert ms == pytest.approx(2 * h2d / 1e6, rel=0.01)
    assert_live_agrees(data)


# Issue 20, part 1: a ring AllReduce built only from the public API (per step a peer copy
# into the neighbour's scratch, a notify record, a wait on its own notify, reduce_async,
# a "free" notify back), submitted step by step by one host thread for every device, as a
# slow host does it.  Its modelled time is HCCL's ring formula
# 2(p-1)a + 2(p-1)/p n b + (p-1)/p n g (docs/zh/user_guide/coll_algo_intro/Ring.md of
# hicann/hccl), with a and b from the board's HCCS links and g from the reduce's d2d rate.
RING_FROM_THE_PUBLIC_API = """
    import numpy as np
    import mdev.acl as acl
    P, N = 4, 16 << 20
    C = N // P
    assert acl.init() == 0
    buf, scratch, stream, ready, free, gather, events = {}, {}, {}, {}, {}, {}, {}
    for r in range(P):
        assert acl.rt.set_device(r) == 0
        for q in range(P):
            if q != r:
                assert acl.rt.device_enable_peer_access(q, 0) == 0
        buf[r], _ = acl.rt.malloc(N, 0); scratch[r], _ = acl.rt.malloc(C, 0)
        assert acl.rt.memset(buf[r], N, 1, N) == 0              # every byte 1: each float the same
        stream[r], _ = acl.rt.create_stream()
        ready[r], _ = acl.rt.create_notify(0); free[r], _ = acl.rt.create_notify(0)
        for step in range(P - 1):                               # a notify per all-gather step
            gather[r, step], _ = acl.rt.create_notify(0)
        events[r] = [acl.rt.create_event()[0] for _ in range(2)]

    def schedule(r):      # rank r's tasks in stream order: (function, arguments before the stream, after)
        right, left = (r + 1) % P, (r - 1) % P
        yield acl.rt.record_event, (events[r][0],), ()
        for step in range(P - 1):                               # reduce-scatter
            if step:
                yield acl.rt.wait_and_reset_notify, (free[r],), (60,)
            src = buf[r] + (r - step) % P * C
            yield acl.rt.memcpy_async, (scratch[right], C, src, C, 3), ()
            yield acl.rt.record_notify, (ready[right],), ()
            yield acl.rt.wait_and_reset_notify, (ready[r],), (60,)
            dst = buf[r] + (r - step - 1) % P * C
            yield acl.rt.reduce_async, (dst, scratch[r], C, 10, 0), ()     # SUM of float32
            yield acl.rt.record_notify, (free[left],), ()
        yield acl.rt.wait_and_reset_notify, (free[r],), (60,)
        for step in range(P - 1):                               # all-gather
            at = (r + 1 - step) % P * C
            yield acl.rt.memcpy_async, (buf[right] + at, C, buf[r] + at, C, 3), ()
            yield acl.rt.record_notify, (gather[right, step],), ()
            yield acl.rt.wait_and_reset_notify, (gather[r, step],), (60,)
        yield acl.rt.record_event, (events[r][1],), ()

    for tasks in zip(*[list(schedule(r)) for r in range(P)]):   # step by step, device by device
        for r, (fn, before, after) in enumerate(tasks):
            assert acl.rt.set_device(r) == 0
            assert fn(*before, stream[r], *after) == 0
    for r in range(P):
        assert acl.rt.set_device(r) == 0
        assert acl.rt.synchronize_stream(stream[r]) == 0
    one = float(np.frombuffer(b"\\x01" * 4, np.float32)[0])
    out = np.empty(N // 4, np.float32)
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(out), N, buf[P - 1], N, 2) == 0
    assert np.all(out == np.float32(one) * P)
    for r in range(P):
        assert acl.rt.set_device(r) == 0
        print(acl.rt.event_elapsed_time(*events[r])[0])
    acl.finalize()
"""


def test_ring_allreduce_from_the_public_api_meets_hccls_ring_formula(hccs_board, tmp_path):
    ms, data = run_modelled(hccs_board, RING_FROM_THE_PUBLIC_API, tmp_path)
    topo = topology.resolve("hccs8")
    link = topo.path(0, 1).links[0]
    p, n = 4, 16 * MiB
    alpha, beta, gamma = link.latency_us * 1e3, 1 / link.effective_gbps, 1 / topo.devices[0].d2d_gbps   # ns, ns/B
    formula = 2 * (p - 1) * alpha + 2 * (p - 1) / p * n * beta + (p - 1) / p * n * gamma
    assert ms == [pytest.approx(formula / 1e6, rel=0.02)] * p
    assert_live_agrees(data)
