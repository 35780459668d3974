"""mdev's CANN C headers (mdev/capi/include: acl/ and hccl/): they compile, agree with mdev's
Python constants, error codes and HCCL types, match functions.tsv, and build the CANN runtime
samples.

Needs gcc and g++; no board is started.  The CANN samples and HCCL's examples are external
corpora (tests/corpora.py says where they are found), compiled from where they are with
``-fsyntax-only`` and never copied.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

import corpora
from mdev import hccl_types as py_hccl_types
from mdev.capi import functions_tsv, include_dir, inventory

try:  # the ground-floor modules (being moved there); mdev.acl keeps them until then
    from mdev import constants as py_constants
except ImportError:
    from mdev.acl import constants as py_constants
try:
    from mdev import errors as py_errors
except ImportError:
    from mdev.acl import errors as py_errors

GCC, GXX = shutil.which("gcc"), shutil.which("g++")
pytestmark = pytest.mark.skipif(not (GCC and GXX), reason="gcc and g++ are needed to compile the headers")

INCLUDE = include_dir()
C11 = ["-std=c11", "-Wall", "-Wextra", "-Werror"]
CXX17 = ["-std=c++17", "-D_GLIBCXX_USE_CXX11_ABI=0", "-Wall", "-Werror"]  # the samples' flags
PEDANTIC = ["-Wextra", "-Wpedantic"]


def compile_ok(compiler: str, flags: list[str], source: Path, *extra: str, cwd: Path | None = None) -> None:
    result = subprocess.run([compiler, *flags, f"-I{INCLUDE}", *extra, str(source)],
                            capture_output=True, text=True, cwd=cwd)
    assert result.returncode == 0 and not result.stderr, result.stderr


# --- the headers compile cleanly ------------------------------------------------------

# Typed function pointers: each line fails to compile if a prototype drifts.
USES = """
#include "acl/acl.h"
#include "acl/acl_rt_allocator.h"
#include "acl/acl_prof.h"
#include "hccl/hccl.h"

aclError (*use_malloc)(void**, size_t, aclrtMemMallocPolicy) = aclrtMalloc;
aclError (*use_memcpy_async)(void*, size_t, const void*, size_t, aclrtMemcpyKind, aclrtStream) = aclrtMemcpyAsync;
aclError (*use_query)(aclrtEvent, aclrtEventRecordedStatus*) = aclrtQueryEventStatus;
aclError (*use_launch)(aclrtFuncHandle, uint32_t, const void*, size_t, aclrtStream) = aclrtLaunchKernel;
aclError (*use_ipc)(aclrtEvent, aclrtIpcEventHandle*) = aclrtIpcGetEventHandle;
aclError (*use_capture)(aclrtStream, aclmdlRI*) = aclmdlRICaptureEnd;
aclError (*use_alloc)(aclrtStream, aclrtAllocatorDesc) = aclrtAllocatorRegister;
aclrtAllocatorDesc (*use_desc)(void) = aclrtAllocatorCreateDesc;
const char* (*use_soc)(void) = aclrtGetSocName;
void (*use_log)(aclLogLevel, const char*, const char*, uint32_t, const char*, ...) = aclAppLog;
HcclResult (*use_all_reduce)(void*, void*, uint64_t, HcclDataType, HcclReduceOp, HcclComm, aclrtStream) = HcclAllReduce;
HcclResult (*use_init)(uint32_t, const HcclRootInfo*, uint32_t, HcclComm*) = HcclCommInitRootInfo;
HcclResult (*use_init_all)(uint32_t, int32_t*, HcclComm*) = HcclCommInitAll;
const char* (*use_error_string)(HcclResult) = HcclGetErrorString;
HcclResult (*use_init_config)(uint32_t, const HcclRootInfo*, uint32_t, const HcclCommConfig*, HcclComm*) =
    HcclCommInitRootInfoConfig;
HcclResult (*use_sub_comm)(HcclComm*, uint32_t, uint32_t*, uint64_t, uint32_t, HcclCommConfig*, HcclComm*) =
    HcclCreateSubCommConfig;
HcclResult (*use_set_config)(HcclConfig, HcclConfigValue) = HcclSetConfig;
uint32_t (*use_capability)(void) = HcclGetCommConfigCapability;
void (*use_config_init)(HcclCommConfig*) = HcclCommConfigInit;
aclprofConfig* (*use_prof_config)(uint32_t*, uint32_t, aclprofAicoreMetrics, const aclprofAicoreEvents*, uint64_t) =
    aclprofCreateConfig;
"""


@pytest.mark.parametrize("compiler, flags, suffix", [
    ("gcc", C11, ".c"),
    ("gcc", C11 + ["-Wpedantic", "-Wstrict-prototypes", "-Wmissing-prototypes"], ".c"),
    ("g++", CXX17, ".cpp"),
    ("g++", CXX17 + PEDANTIC, ".cpp"),
], ids=["c11", "c11-pedantic", "c++17", "c++17-pedantic"])
def test_headers_compile_warning_free(tmp_path, compiler, flags, suffix):
    source = tmp_path / f"uses{suffix}"
    source.write_text(USES + "int main(void) { ACL_APP_LOG(ACL_INFO, \"%d\", 1); return 0; }\n")
    compile_ok(compiler, flags, source, "-c", "-o", str(tmp_path / "uses.o"))


def test_cxx_sees_c_linkage_and_dim3_defaults(tmp_path):
    source = tmp_path / "linkage.cpp"
    source.write_text('#include "acl/acl.h"\n#include <type_traits>\n'
                      "static_assert(std::is_same<decltype(&aclrtSetDevice), aclError (*)(int32_t)>::value, \"\");\n"
                      "constexpr dim3 grid(4);\n"
                      "static_assert(grid.x == 4 && grid.y == 1 && grid.z == 1, \"dim3 defaults\");\n"
                      'extern "C" aclError aclrtSetDevice(int32_t deviceId);  // same C function\n')
    compile_ok("g++", CXX17, source, "-fsyntax-only")


# --- values: compiled, then compared with the Python side and the published layouts -----

# sizeof on LP64 (x86-64, aarch64), as laid out by the published CANN headers.
SIZES = {
    "aclError": 4, "aclFloat16": 2, "aclrtStream": 8, "aclDataType": 4, "aclrtMemcpyKind": 4,
    "aclrtMemLocation": 8, "aclrtPtrAttributes": 28, "aclrtMemUsageInfo": 112, "aclrtPhysicalMemProp": 32,
    "aclrtMemFabricHandle": 128, "aclrtMemAccessDesc": 24, "aclrtMemcpyBatchAttr": 32,
    "aclrtMallocAttribute": 12, "aclrtMallocConfig": 16, "aclrtServerPid": 24, "aclrtStreamConfigHandle": 32,
    "aclrtStreamAttrValue": 16, "aclrtUtilizationInfo": 24, "aclrtUuid": 16, "aclrtIpcEventHandle": 64,
    "aclrtCntNotifyRecordInfo": 8, "aclrtCntNotifyWaitInfo": 16, "aclrtBarrierTaskInfo": 56,
    "aclrtMemUceInfo": 128, "aclrtErrorInfo": 2576, "aclrtBinaryLoadOption": 20, "aclrtBinaryLoadOptions": 16,
    "dim3": 12, "aclrtLaunchKernelAttrValue": 16, "aclrtLaunchKernelAttr": 20, "aclrtLaunchKernelCfg": 16,
    "aclrtRandomParaInfo": 16, "aclrtRandomNumFuncParaInfo": 36, "aclrtRandomNumTaskInfo": 104,
    "aclrtTaskUpdateInfo": 48, "aclmdlRIKernelTaskParams": 88, "aclmdlRITaskParams": 200,
    "aclmdlRICondTaskParams": 24, "aclCANNPackageVersion": 512, "aclrtSnapShotBackupArgs": 64,
    "HcclResult": 4, "HcclComm": 8, "HcclDataType": 4, "HcclRootInfo": 4108, "HcclSendRecvItem": 32,
    "HcclCommConfig": 2240, "HcclConfigValue": 4, "HcclCommSymWindow": 8,
}
OFFSETS = {
    ("aclrtRandomNumTaskInfo", "randomParaAddr"): 40, ("aclrtRandomNumTaskInfo", "randomSeed"): 64,
    ("aclrtRandomNumTaskInfo", "randomNum"): 80, ("aclmdlRITaskParams", "taskGrp"): 16,
    ("aclmdlRITaskParams", "kernelTaskParams"): 72, ("aclrtErrorInfo", "detail"): 8,
    ("HcclSendRecvItem", "buf"): 8, ("HcclSendRecvItem", "count"): 16, ("HcclSendRecvItem", "dataType"): 24,
    ("HcclSendRecvItem", "remoteRank"): 28,
    # hcomm's hccl_types.h: 24 header bytes, then the fields in order (hccl_test writes several)
    ("HcclCommConfig", "hcclBufferSize"): 24, ("HcclCommConfig", "hcclCommName"): 32,
    ("HcclCommConfig", "hcclOpExpansionMode"): 288, ("HcclCommConfig", "hcclWorldRankID"): 300,
    ("HcclCommConfig", "hcclJobID"): 304, ("HcclCommConfig", "aclGraphZeroCopyEnable"): 312,
    ("HcclCommConfig", "hcclExecTimeOut"): 316, ("HcclCommConfig", "hcclAlgo"): 320,
    ("HcclCommConfig", "hcclBufferName"): 2098, ("HcclCommConfig", "hcclQos"): 2228,
    ("HcclCommConfig", "hcclSymWinMaxMemSizePerRank"): 2232,
}
# Names that must be defined by both the headers and mdev's Python modules (so the
# cross-check below cannot pass by comparing nothing).
KEY_NAMES = """
ACL_SUCCESS ACL_ERROR_INVALID_PARAM ACL_ERROR_UNINITIALIZE ACL_ERROR_BAD_ALLOC ACL_ERROR_INVALID_DEVICE
ACL_ERROR_FEATURE_UNSUPPORTED ACL_ERROR_INTERNAL_ERROR ACL_ERROR_RT_PARAM_INVALID ACL_ERROR_RT_INVALID_HANDLE
ACL_ERROR_RT_WAIT_TIMEOUT ACL_ERROR_RT_STREAM_NOT_CAPTURED ACL_ERROR_RT_FEATURE_NOT_SUPPORT
ACL_ERROR_RT_MEMORY_ALLOCATION ACL_ERROR_RT_NO_PERMISSION ACL_ERROR_RT_INTERNAL_ERROR ACL_ERROR_RT_EVENT_NOT_COMPLETE
ACL_ERROR_RT_AICORE_EXCEPTION ACL_ERROR_RT_STREAM_SYNC_TIMEOUT ACL_ERROR_RT_CCU_EXCEPTION
ACL_MAJOR_VERSION ACL_MINOR_VERSION ACL_EVENT_SYNC ACL_EVENT_TIME_LINE ACL_EVENT_IPC ACL_STREAM_FAST_LAUNCH
ACL_STOP_ON_FAILURE ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION
ACL_HOST_REG_PINNED ACL_IPC_EVENT_HANDLE_SIZE ACL_RT_DEVS_TOPOLOGY_HCCS ACL_RT_BINARY_MAGIC_ELF_AICORE
ACL_MEMCPY_DEVICE_TO_DEVICE ACL_MEMCPY_DEFAULT ACL_MEM_MALLOC_HUGE_FIRST ACL_MEM_MALLOC_NORMAL_ONLY_P2P
ACL_STREAM_STATUS_COMPLETE ACL_EVENT_RECORDED_STATUS_COMPLETE ACL_EVENT_WAIT_STATUS_RESERVED ACL_HBM_MEM_HUGE
ACL_MEM_LOCATION_TYPE_DEVICE ACL_MEM_HANDLE_TYPE_POSIX ACL_DEV_ATTR_AICORE_CORE_NUM ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE
ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US ACL_MODEL_RI_CAPTURE_MODE_RELAXED ACL_MODEL_RI_TASK_VALUE_WAIT
ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM ACL_RT_CNT_NOTIFY_RECORD_BIT_AND_MODE ACL_RT_ATOMIC_CAPABILITY_VECTOR32X4
ACL_FLOAT16 ACL_BF16 ACL_DT_UNDEFINED ACL_FORMAT_ND
HCCL_SUCCESS HCCL_E_PARA HCCL_E_PTR HCCL_E_NOT_SUPPORT HCCL_E_TIMEOUT HCCL_E_REMOTE HCCL_REDUCE_SUM HCCL_REDUCE_MIN
HCCL_DATA_TYPE_INT8 HCCL_DATA_TYPE_FP32 HCCL_DATA_TYPE_BFP16 HCCL_DATA_TYPE_FP64 HCCL_SEND HCCL_RECV
HCCL_ROOT_INFO_BYTES
""".split()

_CONSTANT = re.compile(
    r"^#define\s+([A-Z][A-Z0-9_]*)\s+\(?-?(?:0[xX][0-9A-Fa-f]+|\d+)[uUlL]*\)?\s*$"  # #define NAME 0x10U
    r"|^static const \w+ ([A-Z][A-Z0-9_]*) ="                                       # static const int NAME =
    r"|^\s+([A-Z][A-Z0-9_]*)(?: ACL_DEPRECATED_MESSAGE\(\"[^\"]*\"\))? =",          # enumerator: NAME = v
    re.M)


def header_constant_names() -> list[str]:
    names = []
    for header in sorted(INCLUDE.rglob("*.h")):
        for match in _CONSTANT.finditer(header.read_text()):
            names.append(next(group for group in match.groups() if group))
    return sorted(set(names))


def python_values() -> dict[str, int]:
    values = {}
    for module in (py_constants, py_errors, py_hccl_types):
        values.update({k: v for k, v in vars(module).items() if k.isupper() and type(v) is int})
    return values


@pytest.fixture(scope="module")
def compiled_values(tmp_path_factory) -> dict[str, int]:
    """Every constant name of the headers, plus sizeof/offsetof probes, as the C compiler sees them."""
    work = tmp_path_factory.mktemp("capi-values")
    probes = [f'P("{name}", {name});' for name in header_constant_names()]
    probes += [f'P("sizeof {t}", sizeof({t}));' for t in SIZES]
    probes += [f'P("offsetof {t}.{f}", offsetof({t}, {f}));' for t, f in OFFSETS]
    source = work / "values.c"
    source.write_text('#include "acl/acl.h"\n#include "acl/acl_rt_allocator.h"\n#include "hccl/hccl.h"\n'
                      '#include "acl/acl_op_compiler.h"\n#include "aclnn/acl_meta.h"\n#include "acl/acl_prof.h"\n'
                      '#include <stdio.h>\n'
                      '#define P(name, value) printf("%s=%lld\\n", name, (long long)(value))\n'
                      "int main(void) {\n" + "\n".join(probes) + "\nreturn 0;\n}\n")
    compile_ok("gcc", C11 + ["-Wno-deprecated-declarations"], source, "-o", str(work / "values"))
    out = subprocess.run([str(work / "values")], capture_output=True, text=True, check=True).stdout
    return {name: int(value) for name, value in (line.split("=") for line in out.splitlines())}


@pytest.mark.skipif(struct.calcsize("P") != 8, reason="layouts are checked for LP64 targets")
def test_struct_layouts(compiled_values):
    sizes = {t: compiled_values[f"sizeof {t}"] for t in SIZES}
    assert sizes == SIZES
    offsets = {(t, f): compiled_values[f"offsetof {t}.{f}"] for t, f in OFFSETS}
    assert offsets == OFFSETS


def test_key_names_defined_on_both_sides(compiled_values):
    python = python_values()
    assert [n for n in KEY_NAMES if n not in compiled_values] == []
    assert [n for n in KEY_NAMES if n not in python] == []


def test_every_hccl_header_constant_is_a_python_one(compiled_values):
    """What a C program of HCCL can name, mdev.hccl names too, with the header's value (the
    enums' end markers included: HCCL_E_IN_STATUS, HCCL_REDUCE_RESERVED, ...)."""
    names = sorted({next(g for g in m.groups() if g) for h in sorted((INCLUDE / "hccl").rglob("*.h"))
                    for m in _CONSTANT.finditer(h.read_text())})
    assert len(names) > 40
    assert {n: compiled_values[n] for n in names if getattr(py_hccl_types, n, None) != compiled_values[n]} == {}


def test_every_shared_name_has_the_same_value(compiled_values):
    python = python_values()
    shared = sorted(set(python) & {n for n in compiled_values if " " not in n})
    assert len(shared) > 500
    mismatches = {n: (compiled_values[n], python[n]) for n in shared if compiled_values[n] != python[n]}
    assert mismatches == {}, "name: (header value, Python value)"


def test_status_polarity_differs():
    # The one place intuition misleads: stream COMPLETE is 0, event-recorded COMPLETE is 1.
    assert (py_constants.ACL_STREAM_STATUS_COMPLETE, py_constants.ACL_EVENT_RECORDED_STATUS_COMPLETE) == (0, 1)


# --- functions.tsv ---------------------------------------------------------------------

def test_inventory_is_up_to_date():
    assert functions_tsv().read_text() == inventory.render(inventory.declared_functions())


def test_inventory_counts_and_shape():
    rows = [line.split("\t") for line in functions_tsv().read_text().splitlines()]
    assert all(len(row) == 4 for row in rows)
    names = [row[0] for row in rows]
    assert len(names) == len(set(names))
    per_header = {}
    for row in rows:
        per_header[row[3]] = per_header.get(row[3], 0) + 1
    assert per_header == {"acl/acl_base.h": 10, "acl/acl_base_rt.h": 14, "acl/acl_op.h": 11,
                          "acl/acl_op_compiler.h": 8, "acl/acl_prof.h": 6, "acl/acl_rt.h": 373,
                          "acl/acl_rt_allocator.h": 10, "aclnn/acl_meta.h": 16, "hccl/hccl.h": 14,
                          "hccl/hccl_comm.h": 32}


def test_every_inventoried_function_is_declared(tmp_path):
    names = [line.split("\t")[0] for line in functions_tsv().read_text().splitlines()]
    source = tmp_path / "all.c"
    source.write_text('#include "acl/acl.h"\n#include "acl/acl_rt_allocator.h"\n#include "hccl/hccl.h"\n'
                      '#include "acl/acl_op_compiler.h"\n#include "aclnn/acl_meta.h"\n#include "acl/acl_prof.h"\n'
                      "void probe(const void* p);\nvoid all(void) {\n"
                      + "".join(f"    probe((const void*)(size_t)&{n});\n" for n in names) + "}\n")
    compile_ok("gcc", C11 + ["-Wno-deprecated-declarations"], source, "-fsyntax-only")


# --- upstream programs build against mdev's headers ------------------------------------

def compile_upstream(source: Path, std: str, *includes: str, cwd: Path) -> subprocess.CompletedProcess:
    """``g++ -fsyntax-only`` of an upstream source: -Wall but not -Werror (its own warnings,
    unused variables, are not ours), while a warning or error located in mdev's headers fails."""
    result = subprocess.run(["g++", f"-std={std}", "-D_GLIBCXX_USE_CXX11_ABI=0", "-Wall", f"-I{INCLUDE}", *includes,
                             "-fsyntax-only", str(source)], capture_output=True, text=True, cwd=cwd)
    assert str(INCLUDE) not in result.stderr, result.stderr
    return result


def corpus_dirs(name: str, pattern: str, under: str) -> list:
    """One parameter per folder of corpus ``name`` holding ``pattern``; without the corpus, one
    parameter None, whose test skips (fails under CI) saying where to get it."""
    root = corpora.find(name)
    if root is None:
        return [pytest.param(None, id=f"{name}-missing")]
    return [pytest.param(path.parent, id=path.parent.relative_to(root / under).as_posix())
            for path in sorted((root / under).rglob(pattern))]


def cmake_include_dirs(sample: Path) -> list[str]:
    """The sample's include_directories(), with the CANN package replaced by mdev's tree."""
    cmake = (sample / "CMakeLists.txt").read_text(encoding="utf-8-sig")
    dirs = []
    for block in re.findall(r"include_directories\s*\(([^)]*)\)", cmake):
        for entry in block.split():
            entry = entry.replace("${ASCEND_CANN_PACKAGE_PATH}/include", str(INCLUDE))
            entry = entry.replace("${CMAKE_CURRENT_SOURCE_DIR}", str(sample))
            if "${" not in entry and Path(entry).is_dir():
                dirs.append(f"-I{Path(entry).resolve()}")
    return dirs


# Samples that include headers mdev does not provide (yet): sample -> the first one missing.
NEEDS_MISSING_HEADER = {
    "2_advanced_features/model_ri/2_model_switch": "aclnnop/aclnn_add.h",  # aclnn operators
    "2_advanced_features/model_ri/3_cond_model": "aclnnop/aclnn_add.h",
}


@pytest.mark.parametrize("sample", corpus_dirs("cann-samples", "CMakeLists.txt", "example"))
def test_sample_compiles(sample):
    """Every CANN runtime sample's host code (the kernel samples' too) with the samples' flags."""
    example = corpora.require("cann-samples") / "example"
    sources = sorted(sample.glob("*.cpp"))
    assert sources, f"no .cpp in {sample}"
    missing = NEEDS_MISSING_HEADER.get(sample.relative_to(example).as_posix())
    for source in sources:
        result = compile_upstream(source, "c++17", *cmake_include_dirs(sample), cwd=sample)
        if missing:
            assert result.returncode != 0, f"{source.name} compiles now: take it out of NEEDS_MISSING_HEADER"
            assert f"fatal error: {missing}: No such file" in result.stderr, result.stderr
            pytest.xfail(f"needs {missing}, a header mdev does not provide")
        assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("example", corpus_dirs("hccl-examples", "main.cc", "examples"))
def test_hccl_example_compiles(example):
    """HCCL's C++ examples with their Makefiles' standard (they link -lhccl -lascendcl)."""
    corpora.require("hccl-examples")
    result = compile_upstream(example / "main.cc", "c++14", cwd=example)
    assert result.returncode == 0, result.stderr
