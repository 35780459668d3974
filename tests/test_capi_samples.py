"""The 12 CANN runtime samples build with their own CMakeLists.txt and run with their own
run.sh, unchanged, against a ``mdev cann-home`` tree, and print their success lines.

    shared/cann-samples/example --copied--> tmp/example      (run.sh builds in place)
    ASCEND_HOME_PATH = ASCEND_INSTALL_PATH = the tree; MDEV_BOARD = a 2-device board with
    peer access (laptop2: device_P2P needs two devices that reach each other)
    bash run.sh  -->  cmake, make, ./build/main (ipcevent: two processes)  -->  success line

The samples are never copied into the project: they are an external corpus (tests/corpora.py
says where they are found).  Without them the tests skip, saying where to get them; under CI
they fail.
"""

from __future__ import annotations

import re
import shutil
import stat
import subprocess

import pytest

import corpora
from capi_helpers import board_env
from helpers import extra_board

# sample -> its success line (the samples' README lists them), as a regular expression
SAMPLES = {
    "0_quickstart/1_error_handling": r"After diagnostics are consumed once: peekErr=0, lastErr=0",
    "0_quickstart/2_system_info": r"Data type size: ACL_FLOAT=4, ACL_FLOAT16=2, ACL_INT64=8",
    "0_quickstart/3_cross_version/0_runtime_compatibility":
        r"\[SUCCESS\] Runtime compatibility sample completed successfully",
    "1_basic_features/context/0_context_query": r"\[SUCCESS\] Context query sample completed successfully",
    "1_basic_features/device/2_device_P2P": r"Run the device_P2P sample successfully\.",
    "1_basic_features/memory/0_h2h_memory_copy": r"Destination data: 123",
    "2_advanced_features/built_in_task/0_reduce_task": r"Sample Run Successfully\.",
    "2_advanced_features/built_in_task/1_random_num_task": r"Sample Run Successfully\.",
    "2_advanced_features/ipcevent/0_ipcevent": r"\[SUCCESS\] IPC event synchronization works correctly\.",
    "2_advanced_features/label/0_simple_label": r"Run the simple_label sample successfully\.",
    # the README writes "allocCount=2, freeCount=2"; main.cpp prints no comma
    "3_memory_advanced/allocator/0_custom_allocator": r"allocCount=2,? freeCount=2",
    "4_reliability/overflow_detection/0_overflow_detection": r"Overflow detection sample finished successfully\.",
}


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    """A writable copy of the samples' example/ folder."""
    source = corpora.require("cann-samples")
    copy = tmp_path_factory.mktemp("samples") / "example"
    shutil.copytree(source / "example", copy)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return copy


@pytest.fixture(scope="module")
def sample_board():
    with extra_board("samples", "laptop2") as name:
        yield name


def run_script(script: str, cwd, home, board: str) -> subprocess.CompletedProcess:
    env = board_env(board, ASCEND_HOME_PATH=str(home), ASCEND_INSTALL_PATH=str(home))
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("sample", list(SAMPLES))
def test_sample_runs_unchanged(sample, examples, sample_board, cann_home):
    proc = run_script("bash run.sh", examples / sample, cann_home, sample_board)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:]
    assert re.search(SAMPLES[sample], proc.stdout), output[-6000:]


def test_sample_env_script_finds_the_tree(examples, sample_board, cann_home):
    """example/set_sample_env.sh builds tools/get_soc_version with -lacl_rt, runs it (an API
    call before aclInit) and finds ascendc.cmake: what the kernel samples source first."""
    proc = run_script('source ./set_sample_env.sh && echo "soc=$SOC_VERSION cmake=$ASCENDC_CMAKE_DIR"',
                      examples, cann_home, sample_board)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"soc=Ascend910B1 cmake={cann_home}/tikcpp/ascendc_kernel_cmake" in proc.stdout


def test_ascendc_rewrite_stops_with_file_and_line(tmp_path, cann_home):
    """What the kernel source rewrite cannot parse stops the build, naming the file and line."""
    (tmp_path / "k.cpp").write_text('#include "kernel_operator.h"\n'
                                    'extern "C" __global__ __aicore__ void K(GM_ADDR x) { }\n'
                                    'void Do(void* s) { K<<<1, nullptr,\n s>>>(nullptr); }\n')
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(kernel_sample CXX)\n"
        f"include({cann_home}/tikcpp/ascendc_kernel_cmake/ascendc.cmake)\n"
        "ascendc_library(kernels STATIC k.cpp)\n")
    build = tmp_path / "build"
    proc = subprocess.run(["cmake", "-S", str(tmp_path), "-B", str(build)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = subprocess.run(["cmake", "--build", str(build)], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert f"{tmp_path / 'k.cpp'}:3: cannot parse this <<<>>> launch" in proc.stdout + proc.stderr
