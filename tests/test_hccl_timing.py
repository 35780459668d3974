"""Modelled time of collectives between processes (MDEV_MODEL_TIME=1): every rank's
operation ends no earlier than the transfer from the last peer to enter it.

A 2-rank reduce into rank 0, a process per rank, on laptop2 (one HCCS link): the root
times its reduce with events.  Whether the root enters first (its peer does modelled work
before it sends) or last (it does that work itself, and its peer has sent by then), the
root's time includes the transfer of the buffer over the link -- HCCL begins every
operation with a handshake, so data never counts as sent into a rank that had not entered.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import mdev.hccl as hccl
from helpers import attached, extra_board

MiB = 1 << 20
NBYTES, DELAY = 4 * MiB, 32 * MiB          # the reduced buffer; an on-device copy that takes modelled time

RANK = """
    import json, sys
    rank, late, nbytes, delay = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    import mdev.acl as acl
    import mdev.hccl as hccl
    with open(sys.argv[5], "rb") as f:
        root = f.read()
    assert acl.init() == 0 and acl.rt.set_device(rank) == 0
    comm, ret = hccl.comm_init_root_info(2, root, rank)
    assert ret == 0, acl.get_recent_err_msg()
    s, _ = acl.rt.create_stream()
    send, _ = acl.rt.malloc(nbytes, 0); recv, _ = acl.rt.malloc(nbytes, 0)
    a, _ = acl.rt.malloc(delay, 0); b, _ = acl.rt.malloc(delay, 0)
    e0, _ = acl.rt.create_event(); e1, _ = acl.rt.create_event()
    assert hccl.barrier(comm, s) == 0 and acl.rt.synchronize_stream(s) == 0     # the clocks meet
    if rank == late:          # modelled work before this rank enters the reduce
        assert acl.rt.memcpy_async(b, delay, a, delay, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, s) == 0
    assert acl.rt.record_event(e0, s) == 0
    assert hccl.reduce(send, recv, nbytes // 4, hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_REDUCE_SUM, 0, comm, s) == 0
    assert acl.rt.record_event(e1, s) == 0
    assert acl.rt.synchronize_stream(s) == 0, acl.get_recent_err_msg()
    print(json.dumps({"ms": acl.rt.event_elapsed_time(e0, e1)[0]}))
    hccl.comm_destroy(comm)
    acl.finalize()
"""


def _root_ms(name: str, late: int, tmp_path) -> float:
    root, ret = hccl.get_root_info()
    assert ret == 0
    (tmp_path / "root").write_bytes(root)
    env = dict(os.environ, MDEV_BOARD=name, MDEV_AUTOSTART="0", MDEV_MODEL_TIME="1")
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(RANK), str(r), str(late), str(NBYTES),
                               str(DELAY), str(tmp_path / "root")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for r in range(2)]
    try:
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    return json.loads(outs[0][0].splitlines()[-1])["ms"]


@pytest.mark.parametrize("late", [1, 0], ids=["root enters first", "root enters last"])
def test_a_reduce_roots_modelled_time_includes_the_transfer(late, tmp_path, monkeypatch):
    from mdev.board import launcher
    topo = launcher.resolve_topology("laptop2")
    link = topo.path(0, 1)
    transfer_ms = (link.latency_us * 1000 + NBYTES / link.bottleneck_gbps) / 1e6
    delay_ms = DELAY / topo.device(1).d2d_gbps / 1e6
    with extra_board("hccl-timing", "laptop2", hbm=160 * MiB) as name, attached(monkeypatch, name):
        ms = _root_ms(name, late, tmp_path)
    assert ms >= transfer_ms * 0.99, (ms, transfer_ms)
    if late == 1:            # the peer sent only after its work: the root waited for that too
        assert ms >= (delay_ms + transfer_ms) * 0.99, (ms, delay_ms, transfer_ms)
