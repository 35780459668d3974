"""The CANN samples with Ascend C kernels build with their own CMakeLists.txt (through
``mdev cann-home``'s ascendc.cmake) and run with their own run.sh, unchanged, and print their
success lines (../shared/cann-samples/README.md lists them).

    shared/cann-samples/example --copied--> tmp/example      (run.sh builds in place)
    MDEV_BOARD = a 4-device board (notify/0_ipc_notify_withpid uses devices 2 and 3)
    bash run.sh  -->  cmake (kernels rewritten, compiled into device images), make, the
                      program(s)  -->  success line

Each project builds its own kernel images (run.sh removes build/ first).  The two model_ri
samples compute with aclnn operators (libopapi.so, the per-op headers aclnnop/aclnn_add.h,
aclnn_mul.h) inside model run instances.

12_cross_server_physical_memory_sharing_withoutpid (A3 only) runs as on two servers of a
supernode: its run_server.sh with MDEV_NODE=0 and its run_client.sh with MDEV_NODE=1, on a
2-node x 2-device A3 board (cloudmatrix384 cut down), their prompts answered on stdin (a free
port; 127.0.0.1 and the port); the FABRIC handle travels over UDP between them.
"""

from __future__ import annotations

import re
import socket
import subprocess
import time

import pytest

from capi_helpers import board_env
from helpers import extra_board, small_supernode
from test_capi_samples import examples  # noqa: F401 (the fixture: a writable copy of example/)

# sample -> regular expressions its output (stdout, then stderr) must match, in order
SAMPLES = {
    "1_basic_features/device/1_device_multi_thread":
        [r"Result: hostDst\[9\]: 18\.0+ Expected value: 18\.0+", r"\[INFO\]  Run the device_multi_thread sample successfully\."],
    "1_basic_features/event/0_event_status": [r"\[INFO\]  The answer is 1\.", r"\[INFO\]  Resource cleanup completed\."],
    "1_basic_features/event/1_event_timestamp":
        [r"\[INFO\]  After completing the long task, the answer is 1\.", r"\[INFO\]  Resource cleanup completed\."],
    # 1, 2, 5, 6, 10 and 11 launch ReadDo and at once destroy its stream with
    # aclrtDestroyStreamForce: the kernel at the stream's head ends first, as on an NPU (5 also
    # copies with aclrtMemcpy right after launching WriteDo: the copy comes after the kernel)
    "1_basic_features/memory/1_h2d_sync_memory_copy": [r"Destination data: 123\n", r"\[SUCCESS\] Memory copy successfully\. .*: 123"],
    "1_basic_features/memory/2_h2d_async_memory_copy": [r"Destination data: 123\n", r"\[SUCCESS\] Memory copy successfully\. .*: 123"],
    "1_basic_features/memory/3_d2h_sync_memory_copy": [r"\[SUCCESS\] Memory copy successfully\. .*: 123"],
    "1_basic_features/memory/4_d2h_async_memory_copy": [r"\[SUCCESS\] Memory copy successfully\. .*: 123"],
    "1_basic_features/memory/5_d2d_sync_memory_copy": [r"Destination data: 123\n", r"\[SUCCESS\] Memory copy successfully\. .*: 123"],
    "1_basic_features/memory/6_d2d_async_memory_copy": [r"Destination data: 123\n", r"\[SUCCESS\] Memory copy successfully\. .*: 123"],
    "1_basic_features/memory/7_physical_memory_sharing_withpid": [r"\[SUCCESS\] Memory sharing successfully\. .*: 123"],
    "1_basic_features/memory/8_physical_memory_sharing_withoutpid": [r"\[SUCCESS\] Memory sharing successfully\. .*: 123"],
    "1_basic_features/memory/10_ipc_memory_withpid": [r"\[SUCCESS\] IPC memory sharing successfully\. .*: 123"],
    "1_basic_features/memory/11_ipc_memory_withoutpid": [r"\[SUCCESS\] IPC memory sharing successfully\. .*: 123"],
    "1_basic_features/stream/0_simple_stream": [r"\[INFO\]  After loop, the current result is: 3002\."],
    "1_basic_features/stream/1_stream_with_failure_mode":
        [r"aclrtSynchronizeStream\(stream\) returned error code 507035", r"Without failure mode, the result is 2\.",
         r"aclrtSynchronizeStream\(stream\) returned error code 507035", r"the current result is: 1\.",
         r"aclrtSynchronizeStream\(after abort\) returned 507035",
         r"\[INFO\]  Run the stream_with_failure_mode sample successfully\."],
    "2_advanced_features/callback/0_simple_callback":
        [r"\[INFO\]  This callback after task and loop five times, result: user data is: 520\.",
         r"\[INFO\]  After assigning the task, the current int is: 1\."],
    "2_advanced_features/callback/1_callback_hostfunc":
        [r"\[INFO\]  Hostfunc callback!!!", r"the current result is: 1\.", r"\[INFO\]  Resource cleanup completed\."],
    "2_advanced_features/kernel/0_launch_kernel":
        [r"\[INFO\]  Run the launch_kernel sample successfully\.", r"\[SUCCESS\] result correct"],
    "2_advanced_features/kernel/1_launch_kernel_with_reslimit":
        [r"(?:Hello World\n){8}", r"\[SUCCESS\]: Launch kernels under resource limits successfully\."],
    "2_advanced_features/notify/0_ipc_notify_withpid":
        [r"Destination data: 123", r"\[SUCCESS\] IPC notify .* equal: 123\n"],
    # a built model: H2D copies from pageable memory, aclnnAdd, aclrtSwitchStream / aclrtActiveStream
    "2_advanced_features/model_ri/2_model_switch":
        [r"After executing, print data1\.\n.*is: (?:3\.4000  ){8}\n", r"print data2\.\n.*is: (?:0\.0000  ){8}\n",
         r"print data3\.\n.*is: (?:5\.4000  ){8}\n", r"After second execution, print data1\.\n.*is: (?:3\.4000  ){8}\n",
         r"print data2\.\n.*is: (?:4\.4000  ){8}\n"],
    # conditional tasks; ASSIGN_DEFAULT resets each condition to 0 at every execution, so the IF
    # runs its false branch and the SWITCH case 0 each time (the README's figures); its WHILE
    # body never runs: the README's figures for it are the IF's, left in reused device memory
    "2_advanced_features/model_ri/3_cond_model":
        [r"IF true branch result:\n.*is: 1\.2500  2\.5000  3\.7500  5\.0000  6\.2500  7\.5000  8\.7500  10\.0000",
         r"IF false branch result:\n.*is: 1\.2500  2\.5000 ", r"IF condition PASSED", r"WHILE condition PASSED",
         r"SWITCH case 0 result:\n.*is: 1\.5000  3\.0000  4\.5000  6\.0000  7\.5000  9\.0000  10\.5000  12\.0000",
         r"SWITCH case 2 result:\n.*is: 1\.5000  3\.0000 ", r"SWITCH condition PASSED", r"All tests PASSED"],
    "3_memory_advanced/managed_memory/0_uvm_allocate":
        [r"\[INFO\]  Run the uvm_allocate sample successfully\.", r"\[SUCCESS\] result correct"],
}

@pytest.fixture(scope="module")
def kernel_board():
    with extra_board("ascs", "pcie4") as name:
        yield name


def _script(home, script: str, board: str, node: int = 0, **popen) -> dict:
    """Popen/run arguments of ``bash script`` of a sample, on cluster node ``node`` of ``board``."""
    env = board_env(board, ASCEND_HOME_PATH=str(home), ASCEND_INSTALL_PATH=str(home), MDEV_NODE=str(node))
    return dict(args=["bash", "-c", f'source "{home}/set_env.sh" && bash {script}'], env=env, text=True, **popen)


def run_sample(sample: str, examples, home, board: str, args: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(**_script(home, f"run.sh {args}", board, cwd=examples / sample, capture_output=True,
                                    timeout=600, stdin=subprocess.DEVNULL))


def _check(proc: subprocess.CompletedProcess, patterns: list[str]) -> None:
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:]
    at = 0
    for pattern in patterns:
        found = re.compile(pattern).search(output, at)      # verify_result.py logs on stderr
        assert found, f"{pattern!r} not found after position {at}:\n{output[-6000:]}"
        at = found.end()


@pytest.mark.parametrize("sample", list(SAMPLES))
def test_kernel_sample_runs_unchanged(sample, examples, kernel_board, cann_home):
    _check(run_sample(sample, examples, cann_home, kernel_board), SAMPLES[sample])


def test_launch_kernel_sample_placeholder_mode(examples, kernel_board, cann_home):
    """bash run.sh -r placeholder: add_custom_tiling.cpp, its sizes in placeholder arguments."""
    _check(run_sample("2_advanced_features/kernel/0_launch_kernel", examples, cann_home, kernel_board, "-r placeholder"),
           SAMPLES["2_advanced_features/kernel/0_launch_kernel"])


CROSS_SERVER = "1_basic_features/memory/12_cross_server_physical_memory_sharing_withoutpid"


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _udp_bound(port: int) -> bool:
    """Some process listens on UDP ``port`` (/proc/net/udp: local address hex ip:port)."""
    with open("/proc/net/udp") as table:
        return any(line.split()[1].endswith(f":{port:04X}") for line in list(table)[1:])


def test_cross_server_sample_on_a3_supernode(examples, cann_home, tmp_path):
    """The server (node 0) exports a FABRIC handle and waits for the client's datagram; the
    client (node 1) is started once the server's UDP port is bound (a datagram sent earlier
    is lost, and the client would wait for ever)."""
    port = _free_udp_port()
    answers = tmp_path / "server_answers"                # its prompt: the port
    answers.write_text(f"{port}\n")
    with extra_board("a3x", topo=small_supernode()) as board, answers.open() as stdin:
        server = subprocess.Popen(**_script(cann_home, "run_server.sh", board, 0, cwd=examples / CROSS_SERVER,
                                            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
        try:
            deadline = time.monotonic() + 600                # it builds first
            while not _udp_bound(port):
                assert server.poll() is None, server.stdout.read()[-6000:]
                assert time.monotonic() < deadline, "the server never bound its port"
                time.sleep(0.5)
            client = subprocess.run(**_script(cann_home, "run_client.sh", board, 1, cwd=examples / CROSS_SERVER,
                                              input=f"127.0.0.1\n{port}\n", capture_output=True, timeout=600))
            served = server.communicate(timeout=120)[0]
        finally:
            if server.poll() is None:
                server.kill()
            server.wait()
            server.stdout.close()
    _check(subprocess.CompletedProcess(server.args, server.returncode, served, ""),
           [r"Server: export shareable handle successfully", r"Server: receive ipc message successfully, flag = 1",
            r"Server: released memory successfully", r"\[SUCCESS\] Server completed successfully\."])
    _check(client, [r"Client: import shareable handle successfully",
                    r"Client: map virtual memory address to physical memory handle",
                    r"Client: released memory successfully", r"\[SUCCESS\] Client completed successfully"])
