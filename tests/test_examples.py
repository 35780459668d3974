"""The guide's first programs in examples/ run as a user runs them and say what they should.

Each example runs in its own interpreter against one board of this test process, started
on demand by the first example (laptop2: two devices, enough for the tour) and stopped
at the end of the module.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PREFIX
from mdev.board import launcher

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# example -> a line its output must contain
EXPECTED = {
    "sanitizer_race": "sanitizer_race: racecheck named the missing event between the two copies, the fixed "
                      "program drew no report: OK",
    "memory_usage": "memory_usage: 16 float32 round-tripped through device 0, memset verified: OK",
    "pinned_async_copy": "pinned_async_copy: 4 MiB pinned -> device 0 -> pinned",
    "default_stream": "default_stream: memset_async + 2 memcpy_async on stream 0, synchronize_device, verified: OK",
    "multi_stream": "both buffers verified: OK",
    "tour": "tour: all steps OK",
    "vector_add_mixed": "vector_add_mixed: add_custom<<<8, nullptr, stream>>> on 16384 float32, verified: OK",
    "vector_add_binary": "vector_add_binary: add_custom and sub_custom from vector_add_kernel.py",
    "kernel_memory_sync": "kernel_memory_sync: a kernel on stream 1 waited for the flag, released by value_write "
                          "on stream 2: OK",
    "reduce": "reduce: SUM of {1,2,3,4} into a copy of itself = [2. 4. 6. 8.], MAX and MIN verified: OK",
    "random_numbers": "random_numbers: uniform and normal, 100000 values each, reproducible from seed and counter: OK",
    "resource_limit": "resource_limit: precedence stream (16) > process (8) > hardware (48), launches ran in waves: OK",
    "exception_callback": "exception_callback: Vector Core exception 507035 reported at sync and to the callback, "
                          "device still serving: OK",
    "ipc_memory": "ipc_memory: device 0 -> device 1, with and without PID validation: OK",
    "ipc_event": "ipc_event: device 1 stream waited for device 0's record in another process: OK",
    "ipc_notify": "ipc_notify: device 1 signalled device 0 across processes, with and without PID validation: OK",
    "ipc_producer_consumers": "ipc_producer_consumers: device 0 fed 4 consumer processes on devices 1..4 "
                              "from one buffer: OK",
    "vmm_sharing": "vmm_sharing: physical memory of device 0 mapped in two processes, with and without "
                   "PID validation: OK",
    "event_wait": "event_wait: 1 record on stream1, 2 streams waited on it, verified: OK",
    "event_timestamps": "event_timestamps: elapsed times and timestamps consistent: OK",
    "event_query_buffer_reuse": "event_query_buffer_reuse: 24 jobs, 4 buffers reused after query_event_status, "
                                "all results verified: OK",
    "notify_two_devices": "notify_two_devices: 6 chunks handed from device 0 to device 1, verified: OK",
    "value_write_wait": "value_write_wait: handshake, counter and memset release verified: OK",
    "host_callback": "host_callback: launch_host_func and report-thread callbacks verified: OK",
    "stream_priority": "stream_priority: high priority first, no pre-emption: OK",
    "stop_on_failure": "stop_on_failure: stop mode halted the context, continue mode ran on: OK",
    "graph_persistent_stream": "graph_persistent_stream: tasks stored on a persistent stream, model executed "
                               "twice, each run verified: OK",
    "graph_capture_add": "graph_capture_add: captured once, replayed 8 times, outputs 1.1 .. 8.8 as in the guide: OK",
    "graph_cross_stream": "graph_cross_stream: add captured on stream2 between fork and join, replayed 8 times: OK",
    "graph_task_update": "graph_task_update: alpha 1.1 -> 5.5, concurrent (external event) and sequential "
                         "updates verified: OK",
    "multi_device_info": "multi_device_info: 8 devices listed, 56 of 56 ordered pairs P2P-capable, "
                         "one task per device verified: OK",
    "thread_per_device": "thread_per_device: 8 threads, each drove its own device, 8 MiB per device verified: OK",
    "p2p_copy": "p2p_copy: device 0 <-> device 1 with peer access, sync and async copies verified: OK",
    "all_to_all_notify": "all_to_all_notify: 8 devices exchanged 56 blocks of 4 MiB, ordered by notifies, "
                         "verified: OK",
    "topology_whatif": "topology_whatif: same probe, hccs8 56 P2P pairs, islands8 24 "
                       "(cross-island pairs refused with 207000): OK",
    "hccl_data_parallel": "hccl_data_parallel: every replica identical, equal to numpy's full-batch step: OK",
    "hccl_pipeline": "hccl_pipeline: 6 micro-batches through 4 stages by send/recv, outputs equal numpy's: OK",
    "hccl_allreduce_sizes": "hccl_allreduce_sizes: 3 sizes on 2 ranks, every result equals numpy's sum: OK",
}
# examples that need more devices than laptop2 has: a board of that preset (named <board>-<preset>)
TOPOLOGY = {"ipc_producer_consumers": "hccs8", "multi_device_info": "hccs8", "thread_per_device": "hccs8",
            "p2p_copy": "hccs8", "all_to_all_notify": "hccs8", "topology_whatif": "hccs8",
            "hccl_data_parallel": "hccs8", "hccl_pipeline": "hccs8"}
# boards an example starts itself (named after the board it runs on); stopped here if it could not
WHATIF_BOARDS = ("-hccs8-whatif-hccs8", "-hccs8-whatif-islands8")


@pytest.fixture(scope="module")
def example_board():
    name = PREFIX + "ex"
    yield name
    launcher.stop(name)
    for preset in set(TOPOLOGY.values()):
        launcher.stop(f"{name}-{preset}")
    for suffix in WHATIF_BOARDS:
        launcher.stop(name + suffix)


def run_example(name: str, board: str, **extra_env: str) -> subprocess.CompletedProcess:
    topology = TOPOLOGY.get(name, "laptop2")
    if topology != "laptop2":
        board = f"{board}-{topology}"
    # the example imports the mdev of this checkout, not whichever one is installed
    path = os.pathsep.join(p for p in (str(EXAMPLES.parent), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, MDEV_BOARD=board, MDEV_TOPOLOGY=topology, MDEV_IDLE_TIMEOUT="1",
               MDEV_AUTOSTART="1", PYTHONPATH=path, **extra_env)
    return subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py")], env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example(name, example_board):
    proc = run_example(name, example_board)
    assert proc.returncode == 0, f"{name} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert EXPECTED[name] in proc.stdout, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr


def test_graph_capture_add_prints_as_the_guide(example_board):
    out = run_example("graph_capture_add", example_board).stdout
    values = [line.split()[1:] for line in out.splitlines() if line.startswith("[INFO]")]
    assert values == [[f"{i * 1.1:.6f}"] * 8 for i in range(1, 9)]


def test_tour_details(example_board):
    out = run_example("tour", example_board).stdout
    assert "[1] board: 2 x Ascend910B1" in out
    assert "ret = 107000" in out
    assert "ACL_ERROR_RT_PARAM_INVALID(107000)" in out
    assert out.count("back on the host identical") == 2


def test_topology_whatif_details(example_board):
    out = run_example("topology_whatif", example_board).stdout
    assert "hccs8: 56 of 56 ordered pairs can use peer access" in out
    assert "islands8: 24 of 56 ordered pairs can use peer access" in out
    assert "SYS/-207000" in out and "HCCS/P2P" in out
    # the what-if boards were the example's own: stopped when it finished
    from helpers import shm_entries
    for suffix in WHATIF_BOARDS:
        assert shm_entries(example_board + suffix) == []


# under MDEV_SANITIZE=all: examples the sanitizer must find clean (multi-stream, multi-device,
# IPC and kernel memory-semantic programs: no false alarm), and those whose deliberate bug it
# must name
SANITIZED_CLEAN = ("multi_stream", "event_wait", "notify_two_devices", "value_write_wait", "kernel_memory_sync",
                   "pinned_async_copy", "p2p_copy", "graph_cross_stream", "ipc_event", "reduce",
                   "random_numbers", "vector_add_mixed", "topology_whatif_trace", "hccl_data_parallel", "hccl_pipeline")
SANITIZED_FINDINGS = {"exception_callback": "mdev memcheck", "stream_priority": "write-after-write hazard",
                      "stop_on_failure": "mdev synccheck"}


@pytest.mark.parametrize("name", SANITIZED_CLEAN + tuple(SANITIZED_FINDINGS))
def test_example_under_the_sanitizer(name, example_board, tmp_path):
    proc = run_example(name, example_board, MDEV_SANITIZE="all", MDEV_SANITIZE_LOG=str(tmp_path / "log"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summaries = [line for line in proc.stderr.splitlines() if "ERROR SUMMARY" in line]
    assert summaries, proc.stderr
    if name in SANITIZED_CLEAN:
        assert all("ERROR SUMMARY: 0 error(s)" in line for line in summaries), proc.stderr
    else:
        assert SANITIZED_FINDINGS[name] in proc.stderr
