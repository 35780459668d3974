"""Load: 4 host processes x 4 threads x 8 devices issuing mixed work on one board.

Each thread visits every device in turn and runs a round of mixed work there: pinned and
pageable copies (sync and async, H2D / D2D / D2H), memsets, a kernel, value writes, events
between two streams, a peer copy to the next device.  Every result is checked byte for
byte against the same computation in numpy.  At the end the board's /dev/shm segments
are those it started with, device HBM use is back to its start, and the resident memory of
the device processes and of the host processes has not kept growing.

Bounded for the normal suite (``MDEV_SOAK_ROUNDS`` rounds per thread and device, default
8: about 10 s on 2 cores); set it higher for a longer soak.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import psutil
import pytest

from helpers import MiB, extra_board, shm_entries, wait_until
from mdev.board import launcher

ROUNDS = int(os.environ.get("MDEV_SOAK_ROUNDS", "8"))
HOSTS, THREADS = 4, 4

WORKER = r'''
import json, os, sys, threading
import numpy as np
import psutil
import mdev.acl as acl
from mdev import ops

ROUNDS, THREADS, SEED = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
N = 64 * 1024
failures = []
rss = {}

def ok(ret, what):
    if ret != 0:
        raise AssertionError(f"{what}: ret={ret} {acl.get_recent_err_msg()}")
    return ret

def val(result, what):
    *values, ret = result
    ok(ret, what)
    return values[0] if len(values) == 1 else values

peers, peers_lock = set(), threading.Lock()

def round_on(device, rng):
    ok(acl.rt.set_device(device), "set_device")
    s1, s2 = val(acl.rt.create_stream(), "create_stream"), val(acl.rt.create_stream(), "create_stream")
    a, b, c = (val(acl.rt.malloc(N, 0), "malloc") for _ in range(3))
    pin_in, pin_out = val(acl.rt.malloc_host(N), "malloc_host"), val(acl.rt.malloc_host(N), "malloc_host")
    src = rng.integers(0, 256, N, dtype=np.uint8)
    acl.util.ptr_to_numpy(pin_in, (N,), 2)[:] = src
    ev = val(acl.rt.create_event_ex_with_flag(acl.ACL_EVENT_SYNC), "create_event")
    # s1: H2D from pinned, partial memset, D2D; event; s2 waits, kernel fill, D2H to pinned
    ok(acl.rt.memcpy_async(a, N, pin_in, N, acl.ACL_MEMCPY_HOST_TO_DEVICE, s1), "h2d")
    lo = int(rng.integers(0, N // 2))
    ok(acl.rt.memset_async(a + lo, N - lo, 0xA5, 1024, s1), "memset")
    ok(acl.rt.memcpy_async(b, N, a, N, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, s1), "d2d")
    ok(acl.rt.record_event(ev, s1), "record")
    ok(acl.rt.stream_wait_event(s2, ev), "wait_event")
    ok(ops.fill[4, s2](c, float(device + 1), N // 4, acl.ACL_FLOAT), "kernel")
    ok(acl.rt.value_write(c, 0x1122334455667788 + device, 0, s2), "value_write")
    ok(acl.rt.memcpy_async(pin_out, N, b, N, acl.ACL_MEMCPY_DEVICE_TO_HOST, s2), "d2h")
    ok(acl.rt.synchronize_stream(s2), "sync s2")
    ok(acl.rt.synchronize_stream(s1), "sync s1")
    expect = src.copy()
    expect[lo:lo + 1024] = 0xA5
    got = acl.util.ptr_to_numpy(pin_out, (N,), 2).copy()
    if got.tobytes() != expect.tobytes():
        failures.append(f"device {device}: d2d/d2h mismatch at {np.flatnonzero(got != expect)[:5]}")
    # pageable, synchronous: the kernel's and value_write's output
    host = np.empty(N, np.uint8)
    ok(acl.rt.memcpy(acl.util.numpy_to_ptr(host), N, c, N, acl.ACL_MEMCPY_DEVICE_TO_HOST), "d2h sync")
    want = np.full(N // 4, device + 1, np.float32)
    want.view(np.uint64)[0] = 0x1122334455667788 + device
    if host.tobytes() != want.tobytes():
        failures.append(f"device {device}: kernel/value_write mismatch")
    # a peer copy to the next device (all-HCCS board: peer access allowed)
    peer = (device + 1) % 8
    with peers_lock:
        if (device, peer) not in peers:
            ok(acl.rt.device_enable_peer_access(peer, 0), "enable peer")
            peers.add((device, peer))
    ok(acl.rt.set_device(peer), "set peer")
    remote = val(acl.rt.malloc(N, 0), "malloc peer")
    ok(acl.rt.set_device(device), "set back")              # a second reference to device
    ok(acl.rt.memcpy(remote, N, b, N, acl.ACL_MEMCPY_DEVICE_TO_DEVICE), "peer copy")
    back = np.empty(N, np.uint8)
    ok(acl.rt.memcpy(acl.util.numpy_to_ptr(back), N, remote, N, acl.ACL_MEMCPY_DEVICE_TO_HOST), "peer read")
    if back.tobytes() != expect.tobytes():
        failures.append(f"device {device} -> {peer}: peer copy mismatch")
    ok(acl.rt.free(remote), "free peer")
    ok(acl.rt.reset_device(peer), "reset peer")
    for p in (a, b, c):
        ok(acl.rt.free(p), "free")
    for p in (pin_in, pin_out):
        ok(acl.rt.free_host(p), "free_host")
    ok(acl.rt.destroy_event(ev), "destroy_event")
    ok(acl.rt.destroy_stream(s1), "destroy_stream")
    ok(acl.rt.destroy_stream(s2), "destroy_stream")
    ok(acl.rt.reset_device(device), "reset_device")
    ok(acl.rt.reset_device(device), "reset_device")

def thread_main(index):
    rng = np.random.default_rng(SEED * 100 + index)
    try:
        for r in range(ROUNDS):
            for k in range(8):
                round_on((index * 2 + k) % 8, rng)
    except Exception as exc:
        failures.append(f"thread {index}: {exc!r}")

ok(acl.init(), "init")
thread_main(-1 % THREADS)            # warm-up: one thread's rounds, then the baseline RSS
rss["start"] = psutil.Process().memory_info().rss
threads = [threading.Thread(target=thread_main, args=(i,)) for i in range(THREADS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
rss["end"] = psutil.Process().memory_info().rss
ok(acl.finalize(), "finalize")
print(json.dumps({"failures": failures, "rss": rss}))
'''


def device_rss(name: str) -> list[int]:
    return [psutil.Process(d["pid"]).memory_info().rss for d in launcher.status(name)["devices"]]


def run_hosts(name: str, rounds: int) -> list[dict]:
    env = dict(os.environ, MDEV_BOARD=name, MDEV_AUTOSTART="0")
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(WORKER), str(rounds), str(THREADS), str(i)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(HOSTS)]
    results = []
    for proc in procs:
        try:
            stdout, stderr = proc.communicate(timeout=100)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise
        assert proc.returncode == 0, stderr[-3000:]
        results.append(json.loads(stdout.strip().splitlines()[-1]))
    return results


@pytest.mark.soak
def test_soak_mixed_work_from_many_processes_threads_and_devices():
    with extra_board("soak", "hccs8", hbm=64 * MiB) as name:
        segments = sorted(shm_entries(name))
        hbm = [d["hbm_used"] for d in launcher.status(name)["devices"]]
        run_hosts(name, 1)                                     # warm the devices up
        assert wait_until(lambda: [d["hbm_used"] for d in launcher.status(name)["devices"]] == hbm)
        rss_before = device_rss(name)
        results = run_hosts(name, ROUNDS)
        failures = [f for r in results for f in r["failures"]]
        assert not failures, failures[:10]
        # everything went back: segments, HBM, and no device or host kept growing
        assert wait_until(lambda: sorted(shm_entries(name)) == segments), shm_entries(name)
        assert wait_until(lambda: [d["hbm_used"] for d in launcher.status(name)["devices"]] == hbm)
        info = launcher.status(name)
        assert all(d["state"] == "ok" and d["streams"] == 0 for d in info["devices"]), info["devices"]
        assert not info["clients"]
        growth = [after - before for before, after in zip(rss_before, device_rss(name))]
        assert max(growth) < 32 * MiB, growth
        for r in results:
            assert r["rss"]["end"] - r["rss"]["start"] < 48 * MiB, r["rss"]
