"""Timeline traces (MDEV_TRACE / mdev run --trace), mdev trace summary|plot, mdev whatif, mdev bench.

The traced program is examples/topology_whatif_trace.py run through ``mdev run --trace`` in
a subprocess on a laptop2 board of this test process (H2D, event record -> wait, D2D, a P2P
copy over the HCCS link, D2H); a second program, traced through MDEV_TRACE directly, hands
a notify from device 0 to device 1.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mdev import topology
from conftest import PREFIX
from helpers import extra_board, shm_entries

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "topology_whatif_trace.py"
MiB = 1 << 20


def mdev(*args: str, env: dict | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mdev", *args], env=dict(os.environ, **(env or {})),
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def laptop_board():
    with extra_board("trace", "laptop2", hbm=64 * MiB) as name:
        yield name


@pytest.fixture(scope="module")
def traced(laptop_board, tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "run.json"
    proc = mdev("run", "--board", laptop_board, "--trace", str(path), str(EXAMPLE), env={"MDEV_AUTOSTART": "0"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "device 0 -> device 1 (P2P), verified: OK" in proc.stdout
    return path


def _tasks(data, **match):
    return [e for e in data["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "task"
            and all(e["args"].get(k) == v for k, v in match.items())]


def test_trace_is_chrome_json_with_copies_paths_and_flows(traced):
    data = json.loads(traced.read_text())
    assert data["displayTimeUnit"] == "ns" and data["mdev"]["topology"] == "laptop2"
    events = data["traceEvents"]
    for e in events:
        assert e["ph"] in ("X", "M", "s", "f") and isinstance(e["pid"], int) and "tid" in e
    h2d = _tasks(data, kind="copy", route="H2D")
    assert len(h2d) == 1 and h2d[0]["args"]["bytes"] == 8 * MiB and h2d[0]["pid"] == 0
    assert h2d[0]["args"]["path"] == ["rc0-numa0", "npu0-rc0"] and h2d[0]["args"]["dir"] == "<<"
    assert h2d[0]["dur"] > 0 and h2d[0]["args"]["engine"] == "dma"
    p2p = _tasks(data, route="P2P")
    assert len(p2p) == 1 and p2p[0]["args"]["bytes"] == 8 * MiB
    (link,) = p2p[0]["args"]["path"]
    assert data["mdev"]["links"][link]["type"] == "hccs" and data["mdev"]["links"][link]["gbps"] > 0
    assert len(_tasks(data, route="D2D")) == 1
    d2h = _tasks(data, route="D2H")
    assert len(d2h) == 1 and d2h[0]["pid"] == 1
    # one track per stream and engine, named
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert names[(0, h2d[0]["tid"])].startswith("stream ")
    engine_copies = [e for e in events if e.get("cat") == "engine" and e["pid"] == 0]
    assert len(engine_copies) == 3 and all(names[(0, e["tid"])].startswith("dma ") for e in engine_copies)
    processes = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
    host = next(n for n in processes if n.startswith("host (pid "))     # its synchronous memset
    assert processes == {"device 0 (Ascend910B1)", "device 1 (Ascend910B1)", "device 0 (modelled time)",
                     "device 1 (modelled time)", host, "host (modelled time)"}
    # event record -> wait: a flow arrow from the record's stream to the waiting stream
    record = _tasks(data, kind="record_event")[0]
    wait = _tasks(data, kind="wait_event")[0]
    starts = [e for e in events if e["ph"] == "s"]
    finishes = [e for e in events if e["ph"] == "f"]
    assert len(starts) == len(finishes) == 1 and starts[0]["id"] == finishes[0]["id"]
    assert (starts[0]["pid"], starts[0]["tid"]) == (0, record["tid"])
    assert (finishes[0]["pid"], finishes[0]["tid"]) == (0, wait["tid"]) and wait["tid"] != record["tid"]
    assert starts[0]["ts"] <= finishes[0]["ts"] <= wait["ts"] + wait["dur"]
    # the D2D copy waited for the record (stream order + event)
    assert _tasks(data, route="D2D")[0]["ts"] >= record["ts"]


def test_modelled_time_from_link_bandwidths(traced):
    data = json.loads(traced.read_text())
    links = data["mdev"]["links"]

    def modelled(e):
        return e["args"]["modelled_start_ns"], e["args"]["modelled_end_ns"]

    (h2d,), (d2d,), (p2p,), (d2h,) = (_tasks(data, route=r) for r in ("H2D", "D2D", "P2P", "D2H"))
    for copy in (h2d, p2p, d2h):
        path = copy["args"]["path"]
        expect = sum(links[l]["latency_us"] for l in path) * 1000 + 8 * MiB / min(links[l]["gbps"] for l in path)
        start, end = modelled(copy)
        assert abs((end - start) - expect) <= 2, (copy["name"], end - start, expect)
    # stream order, the event and the host's synchronisation carry over to modelled time
    assert modelled(h2d)[0] == 0
    assert modelled(d2d)[0] >= modelled(h2d)[1] and modelled(p2p)[0] >= modelled(d2d)[1]
    assert modelled(d2h)[0] >= modelled(p2p)[1]
    assert data["mdev"]["modelled_makespan_ns"] == modelled(d2h)[1]
    modelled_events = [e for e in data["traceEvents"] if e.get("cat") == "modelled"]
    assert len(modelled_events) == len(_tasks(data)) and {e["pid"] for e in modelled_events} == {1000, 1001, 1999}


def test_summary(traced):
    proc = mdev("trace", "summary", str(traced))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "topology laptop2" in out and "1 flow arrows" in out and "modelled makespan" in out
    assert re.search(r"^\s+0\s+\d+\s+[\d.]+ m?s", out, re.M), out
    hccs = f"{next(l for l in topology.resolve('laptop2').links if l.type == 'hccs').effective_gbps:.1f}"
    assert re.search(rf"^npu0-npu1\s+hccs\s+{re.escape(hccs)}\s+8\.0 MiB\s+0 B\s+[\d.]+%", out, re.M), out
    assert "P2P 8.0 MiB" in out and "H2D 8.0 MiB" in out
    bad = mdev("trace", "summary", str(traced.parent / "missing.json"))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr        # a bad argument


def test_plot(traced, tmp_path):
    png = tmp_path / "timeline.png"
    proc = mdev("trace", "plot", str(traced), "-o", str(png))
    assert proc.returncode == 0, proc.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    proc = mdev("trace", "plot", str(traced), "-o", str(tmp_path / "modelled.png"), "--modelled")
    assert proc.returncode == 0 and (tmp_path / "modelled.png").read_bytes()[:4] == b"\x89PNG", proc.stderr


def test_plot_rows_are_labelled_per_track_or_per_device(traced, tmp_path):
    """Host rows say host and its pid (they said "dev 999: host 3"); a collective's trace gets
    a row per device unless asked for tracks; flows only on request; a time window."""
    pytest.importorskip("matplotlib")
    from mdev.cli.trace import plot
    data = json.loads(traced.read_text())
    host = f"host (pid {data['mdev']['pid']})"
    labels = plot(data, str(tmp_path / "t.png"))                          # few tracks: a row per track
    assert labels[0] == host and {"dev 0: dma 0", "dev 1: dma 0"} <= set(labels)
    assert all(re.fullmatch(r"dev [01]: (stream \d+|dma \d)", label) for label in labels[1:]), labels
    assert plot(data, str(tmp_path / "d.png"), rows="device", flows=True) == [host, "dev 0", "dev 1"]
    assert plot(data, str(tmp_path / "m.png"), modelled=True, rows="device") == [host, "dev 0", "dev 1"]
    # a rank's host thread has a track of its own; a trace naming collectives gets device rows
    events = data["traceEvents"] + [
        {"ph": "M", "name": "thread_name", "pid": 999, "tid": 3, "args": {"name": "host 3"}},
        {"ph": "X", "name": "memcpy", "cat": "task", "pid": 999, "tid": 3, "ts": 1.0, "dur": 2.0,
         "args": {"device": -1, "kind": "memcpy"}}]
    labels = plot(dict(data, traceEvents=events), str(tmp_path / "h.png"), rows="track")
    assert labels[:2] == [host, f"{host}: host 3"]
    collective = dict(data, traceEvents=events, mdev=dict(data["mdev"], collectives=[[0, 14, 1, 2, "all_reduce",
                                                                                        64, 2, "mesh", 0]]))
    assert plot(collective, str(tmp_path / "c.png")) == [host, "dev 0", "dev 1"]
    span_ms = max(e["ts"] + e["dur"] for e in events if e.get("ph") == "X") / 1000
    assert plot(data, str(tmp_path / "w.png"), window=(span_ms + 1, None)) == []
    proc = mdev("trace", "plot", str(traced), "-o", str(tmp_path / "cli.png"), "--rows", "device", "--flows",
                "--window", "0:")
    assert proc.returncode == 0, proc.stderr
    proc = mdev("trace", "plot", str(traced), "-o", str(tmp_path / "x.png"), "--window", "soon")
    assert proc.returncode == 2 and "START:END" in proc.stderr and "Traceback" not in proc.stderr


def test_plot_without_matplotlib(traced, tmp_path):
    """Where matplotlib is missing (it is only in the [plot] and [test] extras) the command
    says how to get it."""
    hide = tmp_path / "no_matplotlib"
    (hide / "matplotlib").mkdir(parents=True)
    (hide / "matplotlib" / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    path = os.pathsep.join([str(hide), os.environ.get("PYTHONPATH", "")])
    proc = mdev("trace", "plot", str(traced), "-o", str(tmp_path / "x.png"), env={"PYTHONPATH": path})
    assert proc.returncode == 1 and "pip install 'mdev[plot]'" in proc.stderr and "Traceback" not in proc.stderr


NOTIFY_PROGRAM = """
    import numpy as np
    import mdev.acl as acl
    assert acl.init() == 0
    acl.rt.set_device(1)
    notify, ret = acl.rt.create_notify(0); assert ret == 0
    s1, ret = acl.rt.create_stream(); assert ret == 0
    buf1, ret = acl.rt.malloc(1 << 16, 0); assert ret == 0
    acl.rt.set_device(0)
    s0, ret = acl.rt.create_stream(); assert ret == 0
    buf0, ret = acl.rt.malloc(1 << 16, 0); assert ret == 0
    assert acl.rt.memset_async(buf0, 1 << 16, 7, 1 << 16, s0) == 0
    assert acl.rt.record_notify(notify, s0) == 0
    acl.rt.set_device(1)
    assert acl.rt.wait_and_reset_notify(notify, s1, 30) == 0
    assert acl.rt.memset_async(buf1, 1 << 16, 9, 1 << 16, s1) == 0
    assert acl.rt.synchronize_stream(s1) == 0
    print("done")
"""


def test_env_trace_notify_flow_written_at_exit(laptop_board, tmp_path):
    """MDEV_TRACE without mdev run; no finalize: the file is written at interpreter exit."""
    path = tmp_path / "notify.json"
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(NOTIFY_PROGRAM)], capture_output=True,
                          text=True, timeout=120,
                          env=dict(os.environ, MDEV_BOARD=laptop_board, MDEV_AUTOSTART="0", MDEV_TRACE=str(path)))
    assert proc.returncode == 0 and "done" in proc.stdout, proc.stderr
    data = json.loads(path.read_text())
    memsets = _tasks(data, kind="memset")
    assert sorted(e["pid"] for e in memsets) == [0, 1] and all(e["args"]["route"] == "D2D" for e in memsets)
    record, wait = _tasks(data, kind="record_notify")[0], _tasks(data, kind="wait_notify")[0]
    flows = {e["ph"]: e for e in data["traceEvents"] if e.get("cat") == "flow"}
    assert flows["s"]["name"] == "notify" and (flows["s"]["pid"], flows["s"]["tid"]) == (0, record["tid"])
    assert (flows["f"]["pid"], flows["f"]["tid"]) == (1, wait["tid"])


VALUE_PROGRAM = """
    import mdev.acl as acl
    n = 8 << 20
    assert acl.init() == 0
    acl.rt.set_device(1)
    s1, _ = acl.rt.create_stream()
    flag, _ = acl.rt.malloc(64, 0)
    out, _ = acl.rt.malloc(1 << 16, 0)
    assert acl.rt.memset(flag, 64, 0, 64) == 0
    e0, _ = acl.rt.create_event(); e1, _ = acl.rt.create_event()
    acl.rt.set_device(0)
    assert acl.rt.device_enable_peer_access(1, 0) == 0
    s0, _ = acl.rt.create_stream()
    d, _ = acl.rt.malloc(n, 0); h, _ = acl.rt.malloc_host(n)
    acl.rt.set_device(1)        # the waiter first: it waits (wall) for the writer of device 0
    assert acl.rt.record_event(e0, s1) == 0
    assert acl.rt.value_wait(flag, 1, 0, s1) == 0
    assert acl.rt.memset_async(out, 1 << 16, 5, 1 << 16, s1) == 0
    assert acl.rt.record_event(e1, s1) == 0
    acl.rt.set_device(0)
    assert acl.rt.memcpy_async(d, n, h, n, 1, s0) == 0
    assert acl.rt.value_write(flag, 1, 0, s0) == 0
    acl.rt.set_device(1)
    assert acl.rt.synchronize_stream(s1) == 0
    ms, ret = acl.rt.event_elapsed_time(e0, e1)
    assert ret == 0
    print(repr(ms))
    acl.finalize()
"""


def test_value_wait_follows_the_write_that_released_it(laptop_board, tmp_path, run_py):
    """A value wait on device 1 released by a value_write of device 0 (after an 8 MiB H2D):
    a "value" flow arrow from the write to the wait, and the wait's successor starts
    (modelled) when the write ended, in the trace and on the live clocks (MDEV_MODEL_TIME)."""
    path = tmp_path / "value.json"
    proc = run_py(VALUE_PROGRAM, laptop_board, env={"MDEV_TRACE": str(path), "MDEV_MODEL_TIME": "1"})
    data = json.loads(path.read_text())
    (write,), (wait,) = _tasks(data, kind="value_write"), _tasks(data, kind="value_wait")
    assert wait["args"]["flow"] == ["v", 0, write["args"]["stream"], write["args"]["wall_start_ns"] + data["mdev"]["t0_ns"]]
    flows = {e["ph"]: e for e in data["traceEvents"] if e.get("cat") == "flow" and e["name"] == "value"}
    assert (flows["s"]["pid"], flows["s"]["tid"]) == (0, write["tid"])
    assert (flows["f"]["pid"], flows["f"]["tid"]) == (1, wait["tid"])
    (h2d,) = _tasks(data, route="H2D")
    links = data["mdev"]["links"]
    copy_ns = sum(links[l]["latency_us"] for l in h2d["args"]["path"]) * 1000 + 8 * MiB / 31.5
    (memset,) = [e for e in _tasks(data, kind="memset") if e["pid"] == 1]
    written = write["args"]["modelled_end_ns"]
    assert written >= copy_ns - 1 and memset["args"]["modelled_start_ns"] >= written
    assert wait["args"]["modelled_end_ns"] == written
    # the live clocks agree: the wait ended when the write did, and so did the events' span
    assert wait["args"]["device_modelled_end_ns"] == pytest.approx(written, abs=2)
    assert float(proc.stdout) == pytest.approx(written / 1e6, rel=1e-3)


HOST_OPS_PROGRAM = """
    import numpy as np
    import mdev.acl as acl
    n = 4 << 20
    assert acl.init() == 0
    acl.rt.set_device(0)
    s, _ = acl.rt.create_stream()
    d, _ = acl.rt.malloc(n, 0)
    h = np.ones(n, np.uint8)
    hp = acl.util.numpy_to_ptr(h)
    assert acl.rt.memcpy(d, n, hp, n, 1) == 0                        # H2D, pageable
    assert acl.rt.memset(d, n, 7, n) == 0                            # on the device
    assert acl.rt.memcpy2d(hp, 2048, d, 4096, 2048, 1024, 2) == 0    # D2H, 2 MiB in rows
    assert acl.rt.memset_async(d, n, 9, n, s) == 0                   # after them (host order)
    assert acl.rt.synchronize_stream(s) == 0
    assert h[0] == 7
    print("done")
"""


def test_synchronous_copies_and_memsets_are_host_records(laptop_board, tmp_path, run_py):
    path = tmp_path / "host.json"
    assert "done" in run_py(HOST_OPS_PROGRAM, laptop_board, env={"MDEV_TRACE": str(path)}).stdout
    data = json.loads(path.read_text())
    host = sorted(_tasks(data, device=-1), key=lambda e: e["ts"])
    (sync,) = [e for e in host if e["args"]["kind"] == "synchronize"]     # synchronize_stream, last
    assert host[-1] is sync and sync["dur"] == 0
    host = host[:-1]
    assert [(e["args"]["kind"], e["args"]["route"], e["args"]["bytes"]) for e in host] == \
        [("memcpy", "H2D", 4 * MiB), ("memset", "D2D", 4 * MiB), ("memcpy", "D2H", 2 * MiB)]
    pid = host[0]["pid"]
    assert all(e["pid"] == pid and e["tid"] == 0 and e["args"]["executing_device"] == 0 for e in host)
    meta = {(e["name"], e["pid"], e["tid"]): e["args"].get("name") for e in data["traceEvents"] if e["ph"] == "M"}
    assert meta[("thread_name", pid, 0)] == "host"
    assert meta[("process_name", pid, 0)] == f"host (pid {data['mdev']['pid']})"
    assert host[0]["args"]["path"] == ["rc0-numa0", "npu0-rc0"] and host[2]["args"]["path"] == ["npu0-rc0", "rc0-numa0"]
    for e in host:
        assert 0 < e["args"]["wall_end_ns"] - e["args"]["wall_start_ns"] == pytest.approx(e["dur"] * 1000, abs=1)
    # modelled: one after another (they block the host), each from the links, then the async memset
    links = data["mdev"]["links"]
    h2d = sum(links[l]["latency_us"] for l in host[0]["args"]["path"]) * 1000 + 4 * MiB / 31.5
    assert host[0]["args"]["modelled_start_ns"] == 0
    assert host[0]["args"]["modelled_end_ns"] == pytest.approx(h2d, abs=1)
    for a, b in zip(host, host[1:]):
        assert b["args"]["modelled_start_ns"] >= a["args"]["modelled_end_ns"]
    (memset,) = _tasks(data, kind="memset", device=0)
    assert memset["args"]["modelled_start_ns"] >= host[2]["args"]["modelled_end_ns"]
    assert sync["args"]["modelled_start_ns"] == sync["args"]["modelled_end_ns"] == memset["args"]["modelled_end_ns"]


ELAPSED_PROGRAM = """
    import mdev.acl as acl
    acl.init(); acl.rt.set_device(0)
    s, _ = acl.rt.create_stream()
    e0, _ = acl.rt.create_event(); e1, _ = acl.rt.create_event()
    n = 8 << 20
    d, _ = acl.rt.malloc(n, 0); h, _ = acl.rt.malloc_host(n)
    assert acl.rt.record_event(e0, s) == 0
    assert acl.rt.memcpy_async(d, n, h, n, 1, s) == 0
    assert acl.rt.memcpy_async(h, n, d, n, 2, s) == 0
    assert acl.rt.record_event(e1, s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    ms, ret = acl.rt.event_elapsed_time(e0, e1)
    assert ret == 0
    print(repr(ms))
    acl.finalize()
"""


def test_model_time_event_elapsed_is_modelled(laptop_board, run_py):
    """MDEV_MODEL_TIME=1: an 8 MiB H2D + D2H over laptop2's PCIe (31.5 GB/s, 0.7 us) between
    two events measures 2 x (0.7 us + 8 MiB / 31.5 GB/s), whatever the wall time was."""
    expect_ms = 2 * (700 + 8 * MiB / 31.5) / 1e6
    modelled = float(run_py(ELAPSED_PROGRAM, laptop_board, env={"MDEV_MODEL_TIME": "1"}).stdout)
    assert abs(modelled - expect_ms) < 1e-5, (modelled, expect_ms)
    wall = float(run_py(ELAPSED_PROGRAM, laptop_board).stdout)
    assert wall != pytest.approx(expect_ms, abs=1e-5)


def test_untraced_program_writes_nothing(laptop_board, tmp_path, run_py):
    run_py("import mdev.acl as acl; acl.init(); acl.rt.set_device(0); acl.finalize()", laptop_board)
    assert list(tmp_path.iterdir()) == []


def test_whatif_laptop2_vs_pcie4(tmp_path):
    proc = mdev("whatif", str(EXAMPLE), "--topology", "laptop2", "--topology", "pcie4", "--hbm", "64MiB",
                "--trace-dir", str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert out.count("verified: OK") == 2
    header = next(line for line in out.splitlines() if line.strip().startswith("laptop2"))
    assert "pcie4" in header
    rows = {line.split("  ")[0].strip(): line for line in out.splitlines() if "  " in line}
    assert "peer access usable" in rows and "1/1 pairs" in rows["peer access usable"]
    assert "6/6 pairs" in rows["peer access usable"]
    assert "wall makespan" in rows and "bytes P2P" in rows and "bytes over hccs links" in rows
    assert re.search(r"modelled makespan\s+[\d.]+ [mu]s\s+[\d.]+ [mu]s$", rows["modelled makespan"]), out
    assert sorted(os.listdir(tmp_path)) == ["0-laptop2.json", "1-pcie4.json"]
    for board in re.findall(r"\(board (whatif-[^)]+)\)", out):
        assert shm_entries(board) == [], f"{board} left segments behind"


def test_whatif_times_the_collectives():
    """A job of all-reduces on every device of the node: a row per operation, size and rank
    count, its modelled time and algorithm on each topology ("-" where it did not run)."""
    prog = ROOT / "examples" / "hccl_allreduce_sizes.py"
    proc = mdev("whatif", str(prog), "--topology", "laptop2", "--topology", "pcie4", "--hbm", "64MiB",
                "--args", "--min 256K --max 1M", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {cells[0]: cells[1:] for cells in (re.split(r"\s{2,}", line.strip()) for line in proc.stdout.splitlines()
                                              if line.startswith("all_reduce"))}
    assert sorted(rows) == ["all_reduce 1.0 MiB x2", "all_reduce 1.0 MiB x4", "all_reduce 256.0 KiB x2",
                            "all_reduce 256.0 KiB x4"], proc.stdout
    cell = re.compile(r"([\d.]+) us \((\w+)\)")
    for size in ("256.0 KiB", "1.0 MiB"):
        two, four = rows[f"all_reduce {size} x2"], rows[f"all_reduce {size} x4"]
        assert two[1] == four[0] == "-", proc.stdout
        assert cell.fullmatch(two[0]).group(2) == "mesh" and cell.fullmatch(four[1]).group(2) == "ring"
    small, big = (float(cell.fullmatch(rows[f"all_reduce {s} x4"][1]).group(1)) for s in ("256.0 KiB", "1.0 MiB"))
    assert 0 < small < big, proc.stdout


def test_bench_hccl_prints_nccl_tests_columns():
    """`mdev bench hccl`: per size wall and modelled time, algbw / busbw of each, HCCL's
    formula and modelled / formula (within 10%), numpy's time for the same work, how many
    times slower the wall time is (wall/numpy), and the device tasks of an operation."""
    proc = mdev("bench", "hccl", "--op", "all_gather", "-b", "64K", "-e", "256K", "-f", "4", "-n", "1",
                "--topology", "laptop2", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "== hccl all_gather on laptop2 (2 ranks, mesh)" in proc.stdout
    assert lines[lines.index(next(x for x in lines if x.startswith("=="))) + 1].split() == [
        "size", "wall", "us", "algbw", "busbw", "modelled", "us", "algbw", "busbw", "formula", "us", "ratio",
        "numpy", "us", "wall/numpy", "tasks"]
    rows = [line.split() for line in lines if line.split()[:1] in (["64K"], ["256K"])]
    assert [r[0] for r in rows] == ["64K", "256K"], proc.stdout
    for size, wall, algbw, busbw, modelled, m_algbw, m_busbw, formula, ratio, numpy_us, slower, tasks in rows:
        assert 0 < float(tasks) < 100, tasks                 # a 2-rank all_gather: about 20 a device
        assert float(busbw) == pytest.approx(float(algbw) / 2, abs=0.002)       # (p-1)/p of all_gather
        w, n = float(wall), float(numpy_us)       # printed to 0.1 us: the label's ratio within their rounding
        assert (w - 0.05) / (n + 0.05) - 0.005 <= float(slower) <= (w + 0.05) / max(n - 0.05, 1e-9) + 0.005
        assert float(modelled) / float(formula) == pytest.approx(float(ratio), abs=0.002)
        assert 0.9 <= float(ratio) <= 1.1 and float(numpy_us) > 0 and float(wall) > 0


def test_bench_dispatch_threads_measures_each_side(acl, board):
    """bench dispatch's thread figure: the rate of one thread per device, and the CPU a task
    cost the submitting threads and the device processes, which set the ceiling it prints."""
    sys.path.insert(0, str(ROOT))
    from bench.dispatch import Threaded, _threaded_rate
    assert acl.init() == 0
    try:
        two = _threaded_rate(acl, board, [0, 1], 20_000, repeats=1)   # device CPU is counted in 10 ms ticks
    finally:
        assert acl.finalize() == 0
    assert two.rate > 0 and two.host_us > 0 and two.device_us > 0, two
    assert Threaded(0, 2.0, 4.0).ceiling(2) == pytest.approx(1e6 / 3)      # the CPUs bound it
    assert Threaded(0, 4.0, 20.0).ceiling(8) == pytest.approx(1e6 / 4)     # the GIL does


def test_bench_cli_lists_every_group():
    sys.path.insert(0, str(ROOT))
    import bench
    proc = mdev("bench", "--list", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == list(bench.GROUPS)
    modules = {p.stem for p in (ROOT / "bench").glob("*.py")} - {"__init__", "__main__", "common"}
    assert modules <= set(bench.GROUPS), f"bench modules not registered in bench.GROUPS: {modules - set(bench.GROUPS)}"
