"""mdev's C library from C programs (tests/c/, compiled with -std=c11 -Wall -Wextra -Werror
against a ``mdev cann-home`` tree) and from a Python program that loads it with ctypes.

    errors.c        real codes and messages: NULL outputs, wrong sizes, bad device pointers,
                    use before aclInit / without a device, the last error, an unsupported call
    threads.c       two threads on two devices at once, each with its own device and error; a
                    thread blocked in a synchronisation while the main thread releases it
    ipc_producer.c  + ipc_consumer.c: two executables share memory, an event and a notify;
                    the same producer with a Python (mdev.acl) consumer
    callback.c      a host function and a reported callback run and call the API
    kernel.c        a kernel binary (mdev/ops.py) loaded, looked up and launched from C, with
                    a launch configuration; a faulting kernel reaches an exception callback
    basic.c         a plain program on a board started on demand with the default preset

Each C program prints its failed checks and exits with their count.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap

import pytest

from capi_helpers import ROOT, basic_on_demand, board_env, compile_c
from conftest import PREFIX
from helpers import extra_board
from mdev import ops
from mdev.capi import adapter, build, failures, prototypes
from mdev.capi.cann_home import make
from mdev.runtime import registry


@pytest.fixture(scope="module")
def c_board():
    with extra_board("capi", "laptop2") as name:
        yield name


def run(program, board: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(program), *args], env=board_env(board), capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.mark.parametrize("program, args", [("errors", ()), ("threads", ()), ("callback", ()), ("basic", ()),
                                           ("kernel", (ops.__file__,))])
def test_c_program(program, args, tmp_path, cann_home, c_board):
    binary = compile_c(cann_home, f"{program}.c", tmp_path / program)
    assert "0 failures" in run(binary, c_board, *args).stdout


def test_ipc_between_two_executables(tmp_path, cann_home, c_board):
    producer = compile_c(cann_home, "ipc_producer.c", tmp_path / "producer")
    consumer = compile_c(cann_home, "ipc_consumer.c", tmp_path / "consumer")
    env = board_env(c_board)
    procs = [subprocess.Popen([str(p)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for p in (producer, consumer)]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(outputs)
    assert "producer: 0 failures" in outputs[0] and "consumer: 0 failures" in outputs[1]


# the consumer's side of tests/c/ipc_consumer.c, in Python (handles.bin: ipc.h's struct handles)
PYTHON_CONSUMER = """
import os, time
import numpy as np
import mdev.acl as acl
while not os.path.exists("handles.bin"):
    time.sleep(0.01)
raw = open("handles.bin", "rb").read()
mem_key, notify_key = (raw[i:i + 128].split(b"\\0")[0].decode() for i in (0, 128))
assert acl.init() == 0 and acl.rt.set_device(0) == 0
stream, _ = acl.rt.create_stream()
dev, ret = acl.rt.ipc_mem_import_by_key(mem_key, 0)
event, ret2 = acl.rt.ipc_open_event_handle(raw[256:320])
notify, ret3 = acl.rt.notify_import_by_key(notify_key, 0)
assert (ret, ret2, ret3) == (0, 0, 0), acl.get_recent_err_msg()
assert acl.rt.stream_wait_event(stream, event) == 0 and acl.rt.synchronize_stream(stream) == 0
host = np.zeros(8192, np.uint8)
assert acl.rt.memcpy(acl.util.numpy_to_ptr(host), 8192, dev, 8192, acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
assert (host == 0xAB).all()
assert acl.rt.memset_async(dev, 8192, 0xCD, 8192, stream) == 0
assert acl.rt.record_notify(notify, stream) == 0 and acl.rt.synchronize_stream(stream) == 0
print("python consumer done")
"""


def test_ipc_between_a_c_and_a_python_program(tmp_path, cann_home, c_board):
    """The C producer's memory key, event handle and notify key open in a Python program
    (mdev.acl): both faces share one board's objects."""
    producer = compile_c(cann_home, "ipc_producer.c", tmp_path / "producer")
    env = board_env(c_board, PYTHONPATH=str(ROOT))         # this checkout's mdev, run from tmp_path
    procs = [subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
             for command in ([str(producer)], [sys.executable, "-c", PYTHON_CONSUMER])]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(outputs)
    assert "producer: 0 failures" in outputs[0] and "python consumer done" in outputs[1]


def test_default_board_started_on_demand(tmp_path, cann_home):
    """No board running, no topology named: the first call starts one with the default preset
    (under a name of this test's own, so a user's "default" board is left alone)."""
    out = basic_on_demand(cann_home, tmp_path, PREFIX + "capi-default", dict(os.environ))
    assert "basic: 8 devices of Ascend910B1, 0 failures" in out


def test_python_program_loads_the_library(cann_home, c_board):
    """A Python program that loads libascendcl.so with ctypes shares its interpreter and its
    runtime with the library: memory from mdev.acl is set by aclrtMemset, the C call's error
    is the Python thread's last error."""
    code = textwrap.dedent(f"""
        import ctypes
        import mdev.acl as acl
        lib = ctypes.CDLL({str(cann_home / 'lib64' / 'libacl_rt.so')!r})
        assert acl.init() == 0 and acl.rt.set_device(1) == 0
        ptr, ret = acl.rt.malloc(64, 0)
        assert lib.aclrtMemset(ctypes.c_void_p(ptr), ctypes.c_size_t(64), 7, ctypes.c_size_t(64)) == 0
        host = bytearray(64)
        assert acl.rt.memcpy(acl.util.bytes_to_ptr(host), 64, ptr, 64, acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
        assert host == bytes([7]) * 64
        device = ctypes.c_int32(-1)
        assert lib.aclrtGetDevice(ctypes.byref(device)) == 0 and device.value == 1
        assert lib.aclrtMalloc(None, ctypes.c_size_t(8), 0) == 100000
        assert acl.rt.get_last_error(0) == 100000
        # arrays of structures filled up to the caller's capacity, the count written back
        usage, count = (ctypes.c_char * (112 * 4))(), ctypes.c_size_t(99)
        assert lib.aclrtGetMemUsageInfo(1, usage, ctypes.c_size_t(4), ctypes.byref(count)) == 0
        assert 1 <= count.value <= 4 and usage.raw[:1] != b"\\0"
        assert lib.aclrtGetMemUsageInfo(1, usage, ctypes.c_size_t(4), None) == 100000
        assert lib.aclrtGetMemUsageInfo(1, None, ctypes.c_size_t(4), ctypes.byref(count)) == 100000
        uce = (ctypes.c_char * (128 * 2))()
        assert lib.aclrtGetMemUceInfo(1, uce, ctypes.c_size_t(2), ctypes.byref(count)) == 0 and count.value == 0
        assert lib.aclrtGetMemUceInfo(1, uce, ctypes.c_size_t(2), None) == 100000
        assert acl.rt.free(ptr) == 0 and acl.rt.reset_device(1) == 0 and acl.finalize() == 0
        print("shared")
    """)
    proc = subprocess.run([sys.executable, "-c", code], env=board_env(c_board), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "shared" in proc.stdout, proc.stdout + proc.stderr


def test_cann_home_refresh_is_quick_and_complete(tmp_path):
    home = make(tmp_path / "cann", log=lambda line: None)
    lines = []
    assert make(home, log=lines.append) == home
    assert "up to date" in lines[0]
    for name in ("libascendcl.so", "libacl_rt.so", "libacl_rt_impl.so"):
        assert (home / "lib64" / name).exists()
    assert (home / "include" / "acl" / "acl.h").exists()
    env = subprocess.run(["bash", "-c", f"source {home}/set_env.sh && echo $ASCEND_HOME_PATH:$LD_LIBRARY_PATH"
                          " && echo $MDEV_PYTHON"], capture_output=True, text=True, timeout=60).stdout
    assert env.startswith(f"{home}:{home}/lib64")
    assert env.splitlines()[-1] == sys.executable       # boards started from another Python: mdev's


# --- the adapter, from Python ------------------------------------------------------------

def test_every_declared_function_has_an_entry_point():
    """Each of the 426 functions of libascendcl.so and libacl_op_compiler.so either reaches an
    implementation or says it is unsupported; none is left unresolved, and the unsupported ones
    name themselves (libhccl.so's: tests/test_capi_hccl.py).  libnnopbase.so's executor functions
    reach the runtime (its descriptors are C: tests/test_torch_npu.py); libmsprofiler.so's six
    (acl/acl_prof.h) are all implemented."""
    entries = {fn.name: adapter.build(fn.name) for fn in prototypes.declared_in("acl")
               if fn.header != build.PROFILER}
    assert len(entries) == 426
    executors = [adapter.build(fn.name) for fn in prototypes.declared_in("aclnn") if "Executor" in fn.name]
    assert len(executors) == 2 and not any(hasattr(e, "mdev_unsupported") for e in executors)
    for name, entry in entries.items():
        message = getattr(entry, "mdev_unsupported", None)
        assert message is None or message.startswith(f"{name} is not supported by mdev ("), message
    profiler = {fn.name: adapter.build(fn.name) for fn in prototypes.functions() if fn.header == build.PROFILER}
    assert len(profiler) == 6 and not [n for n, e in profiler.items() if hasattr(e, "mdev_unsupported")]


def test_marshalled_outputs_match_the_implementations():
    """A prototype's output pointers are as many as the values its implementation returns,
    for every function marshalled from its prototype alone."""
    table = registry.c_table()
    for fn in prototypes.functions():
        impl = adapter.implementation(fn.name, table)
        if impl is None or fn.name in adapter.special.ADAPTERS or not failures.returns_status(fn):
            continue
        try:
            adapter.marshalled(fn, impl)
        except adapter.NotMarshallable as exc:
            assert "structure" in str(exc) or "callback" in str(exc) or "output" in str(exc), (fn.name, exc)


def test_adapter_structures_have_the_header_layouts():
    """The ctypes mirrors the adapter reads and writes agree with the headers' layouts (the
    sizes and offsets test_capi_headers checks against the compiler)."""
    from test_capi_headers import OFFSETS, SIZES
    from mdev.capi import structs as s

    mirrors = {"aclrtRandomNumTaskInfo": s.RandomNumTaskInfo, "aclrtRandomParaInfo": s.RandomPara,
               "aclrtErrorInfo": s.ErrorInfo, "aclrtUtilizationInfo": s.UtilizationInfo, "aclrtUuid": s.Uuid,
               "aclCANNPackageVersion": s.CANNPackageVersion, "aclrtPhysicalMemProp": s.PhysicalMemProp,
               "aclrtMemAccessDesc": s.MemAccessDesc, "aclrtMemLocation": s.MemLocation,
               "aclrtLaunchKernelAttr": s.Attribute, "aclrtBinaryLoadOption": s.Attribute,
               "aclrtLaunchKernelCfg": s.AttributeList, "aclrtBinaryLoadOptions": s.AttributeList,
               "aclrtMemUceInfo": s.MemUceInfo, "aclrtIpcEventHandle": s.IpcEventHandle,
               "aclrtMallocAttribute": s.MallocAttribute, "aclrtMallocConfig": s.AttributeList,
               "aclrtPtrAttributes": s.PtrAttributes, "aclrtMemcpyBatchAttr": s.MemcpyBatchAttr,
               "aclrtCntNotifyRecordInfo": s.CntNotifyRecordInfo, "aclrtCntNotifyWaitInfo": s.CntNotifyWaitInfo,
               "aclrtMemUsageInfo": s.MemUsageInfo, "HcclSendRecvItem": s.HcclSendRecvItem}
    assert {name: ctypes.sizeof(kind) for name, kind in mirrors.items()} == {name: SIZES[name] for name in mirrors}
    for (struct_name, field), offset in OFFSETS.items():
        if struct_name in mirrors:
            assert getattr(mirrors[struct_name], field).offset == offset, (struct_name, field)
