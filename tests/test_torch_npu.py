"""torch_npu on mdev: unmodified PyTorch programs loading the CANN tree of ``mdev cann-home``
and training on a board, compared with the same programs on the CPU (same seed).

Each program runs in its own process (torch_npu does not import mdev: it loads the tree's
libraries, whose calls go to the program's host agent) with the environment the tree's
set_env.sh gives.  Without torch_npu the torch tests skip with one reason, except under CI
(CI=true), which installs it (pip install '.[torch]') and fails instead.  The loading-surface
test needs no torch.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import math
import os
import struct
import subprocess
import sys
import textwrap

import pytest

from mdev.capi import opapi
from mdev.operators import OPERATORS

os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")     # torch_npu is for the programs, not for here
HAVE_TORCH_NPU = importlib.util.find_spec("torch_npu") is not None
needs_torch_npu = pytest.mark.skipif(not HAVE_TORCH_NPU and os.environ.get("CI") != "true",
                                     reason="torch_npu is not installed (pip install '.[torch]')")

# what torch_npu 2.13 names in NEEDED or dlopens and looks names up in (research: torch_npu_needs.md)
NEEDED = ("libascendcl.so", "libhccl.so", "libacl_op_compiler.so", "libge_runner.so", "libgraph.so",
          "libacl_tdt_channel.so", "libatb.so", "libopapi.so", "libnnopbase.so")
LOOKED_UP = {
    "libacl_op_compiler.so": ("aclCreateGraphDumpOpt", "aclDestroyGraphDumpOpt", "aclGenGraphAndDumpForOp",
                              "aclGetCompileopt", "aclGetCompileoptSize", "aclSetCompileopt",
                              "aclopCompileAndExecuteV2", "aclrtCtxSetSysParamOpt", "aclrtGetSysParamOpt",
                              "aclrtSetSysParamOpt"),
    "libnnopbase.so": ("aclDestroyAclOpExecutor", "aclCreateTensor", "aclCreateScalar", "aclCreateIntArray",
                       "aclCreateFloatArray", "aclCreateBoolArray", "aclCreateTensorList", "aclCreateScalarList",
                       "aclSetAclOpExecutorRepeatable"),
    "libopapi.so": ("aclnnReselectStaticKernel", "aclnnReselectStaticKernelWithPath", "aclnnSilentCheck",
                    "aclnnSilentCheckV2", "aclnnAdd", "aclnnAddGetWorkspaceSize"),
    # what torch_npu's libop_plugin_atb.so links: ATB's C++ entry points
    "libatb.so": ("_ZN3atb13CreateContextEPPNS_7ContextE", "_ZN3atb14DestroyContextEPNS_7ContextE",
                  "_ZN3atb16DestroyOperationEPNS_9OperationE", "_ZN3atb5Utils13GetTensorSizeERKNS_6TensorE",
                  *(f"_ZN3atb15CreateOperationINS_5infer{len(p)}{p}EEEiRKT_PPNS_9OperationE"
                    for p in ("LinearParam", "ElewiseParam", "RmsNormParam", "GroupTopkParam", "SelfAttentionParam",
                              "PagedAttentionParam", "ReshapeAndCacheParam", "RopeParam"))),
    # link-time imports that CANN's libascendcl.so reaches through libprofapi.so and libruntime.so
    "libascendcl.so": ("MsprofSysCycleTime", "MsprofReportApi", "rtKernelLaunch", "rtGetC2cCtrlAddr",
                       "aclCreateTensorDesc", "aclopSetAttrListListInt"),
}


def test_the_tree_has_what_torch_npu_loads(cann_home):
    """Every library torch_npu needs loads, and each name it looks up through a library's
    handle is found there (its dependencies included, as dlsym searches them)."""
    lib = cann_home / "lib64"
    for name in NEEDED:
        ctypes.CDLL(str(lib / name))
    for name, symbols in LOOKED_UP.items():
        handle = ctypes.CDLL(str(lib / name))
        for symbol in symbols:
            assert hasattr(handle, symbol), f"{symbol} is not found through {name}"
    ops = ctypes.CDLL(str(lib / "libopapi.so"))
    for name in (*OPERATORS, *opapi.missing()):
        assert hasattr(ops, f"aclnn{name}") and hasattr(ops, f"aclnn{name}GetWorkspaceSize"), name
    for folder in ("opp", "runtime", "compiler"):
        assert (cann_home / folder).is_dir()
    assert "ASCEND_OPP_PATH" in (cann_home / "bin" / "setenv.bash").read_text()


@pytest.fixture(scope="module")
def npu_env(cann_home, board):
    """The environment set_env.sh gives, attached to the test board."""
    if not HAVE_TORCH_NPU:
        pytest.fail("CI=true and torch_npu is not installed: CI installs '.[torch]'")
    dump = subprocess.run(["bash", "-c", f". {cann_home / 'set_env.sh'} >/dev/null && env -0"],
                          env=dict(os.environ, MDEV_BOARD=board, MDEV_AUTOSTART="0"),
                          capture_output=True, timeout=120, check=True).stdout
    env = dict(item.split("=", 1) for item in dump.decode().split("\0") if "=" in item)
    return env


def run_torch(env: dict, code: str, tmp_path, timeout: float = 240) -> dict:
    """Run ``code`` (a program printing one JSON line last) under ``env``; its JSON."""
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(code))
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


TRAINING = """
import json, torch, torch_npu

def step3(build, make_data, lossf, dev):
    torch.manual_seed(0)
    model, make_opt = build()
    model = model.to(dev)
    opt = make_opt(model.parameters())
    x, y = make_data()
    x, y = x.to(dev), y.to(dev)
    for _ in range(3):
        opt.zero_grad()
        loss = lossf(model(x), y)
        loss.backward()
        opt.step()
    return loss.item(), [t.detach().cpu().float() for t in (*model.parameters(), *model.buffers())]

nn, F = torch.nn, torch.nn.functional


class Block(nn.Module):
    def __init__(self, d, heads, drop):
        super().__init__()
        self.heads, self.drop = heads, drop
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(drop))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(d, 2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.drop if self.training else 0.0)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, drop=0.0, vocab=50, d=32, heads=4, layers=2, length=16):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(length, d)
        self.blocks = nn.Sequential(*[Block(d, heads, drop) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        return self.head(self.ln(self.blocks(x))).flatten(0, 1)


class Clipped(torch.optim.AdamW):
    def step(self):
        torch.nn.utils.clip_grad_norm_([p for g in self.param_groups for p in g["params"]], 1.0)
        return super().step()


def tokens():
    idx = torch.randint(0, 50, (4, 16))
    return idx[:, :-1], idx[:, 1:].flatten()


programs = {
    "mlp": (lambda: (nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)),
                     lambda p: torch.optim.SGD(p, lr=0.1)),
            lambda: (torch.randn(32, 8), torch.randn(32, 4)), F.mse_loss),
    "transformer": (lambda: (nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True),
                             lambda p: torch.optim.AdamW(p, lr=1e-3)),
                    lambda: (torch.randn(4, 10, 32), torch.randn(4, 10, 32)), F.mse_loss),
    "cnn": (lambda: (nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                                   nn.Flatten(), nn.Linear(8 * 4 * 4, 10)),
                     lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)),
            lambda: (torch.randn(8, 3, 8, 8), torch.randint(0, 10, (8,))), F.cross_entropy),
    "gpt": (lambda: (GPT(), lambda p: Clipped(p, lr=1e-3)), tokens, F.cross_entropy),
}
report = {}
for name, (build, data, lossf) in programs.items():
    cpu_loss, cpu = step3(build, data, lossf, "cpu")
    npu_loss, npu = step3(build, data, lossf, "npu:0")
    report[name] = {"loss": [cpu_loss, npu_loss], "worst": max(float((a - b).abs().max()) for a, b in zip(cpu, npu)),
                    "moved": max(float(a.abs().max()) for a in npu)}

def amp(dev):
    # autocast (float16) + GradScaler: 3 steps
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(dev)
    opt, scaler = torch.optim.SGD(model.parameters(), lr=0.1), torch.amp.GradScaler(dev.split(":")[0])
    x, y = torch.randn(8, 16).to(dev), torch.randn(8, 4).to(dev)
    for _ in range(3):
        opt.zero_grad()
        with torch.autocast(dev.split(":")[0], dtype=torch.float16):
            loss = F.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return loss.item(), [p.detach().cpu().float() for p in model.parameters()], scaler.get_scale()


(cpu_loss, cpu, cpu_scale), (npu_loss, npu, npu_scale) = amp("cpu"), amp("npu:0")
report["amp"] = {"loss": [cpu_loss, npu_loss], "worst": max(float((a - b).abs().max()) for a, b in zip(cpu, npu)),
                 "moved": max(float(a.abs().max()) for a in npu), "scale": [cpu_scale, npu_scale]}
torch.manual_seed(0)
model = GPT(drop=0.1).to("npu:0")                 # dropout: masks from a seeded generator
idx, target = (z.to("npu:0") for z in tokens())
loss = F.cross_entropy(model(idx), target)
loss.backward()
report["dropout"] = {"loss": loss.item(), "grad": float(model.tok.weight.grad.abs().sum().cpu())}
print(json.dumps(report))
"""


@needs_torch_npu
def test_three_training_steps_match_the_cpu(npu_env, tmp_path):
    """MLP (SGD), TransformerEncoderLayer (AdamW), Conv+BatchNorm+MaxPool (SGD momentum, cross
    entropy) and a small GPT decoder (embeddings, causal attention, LayerNorm, GELU, AdamW with
    gradient clipping): parameters and buffers after 3 steps as on the CPU, with torch_npu's
    default task queue; float16 autocast + GradScaler likewise (looser); the GPT with dropout
    trains (its masks are mdev's generator's, not the CPU's)."""
    report = run_torch(npu_env, TRAINING, tmp_path)
    dropout = report.pop("dropout")
    assert math.isfinite(dropout["loss"]) and dropout["grad"] > 0, dropout
    amp = report.pop("amp")
    assert amp["scale"][0] == amp["scale"][1], amp
    assert abs(amp["loss"][0] - amp["loss"][1]) <= 1e-2 and amp["worst"] <= 1e-2 and amp["moved"] > 0, amp
    assert set(report) == {"mlp", "transformer", "cnn", "gpt"}
    for name, result in report.items():
        cpu_loss, npu_loss = result["loss"]
        assert abs(cpu_loss - npu_loss) <= 1e-4 * max(1.0, abs(cpu_loss)), (name, result)
        assert result["worst"] <= 1e-3, (name, result)
        assert result["moved"] > 0, (name, result)


DEFAULTS = """
import json, torch, torch_npu
x = torch.arange(8, dtype=torch.float32).npu()
on1 = x.to("npu:1")                       # a copy between devices: a cross-device event wait
back = (on1 * 2).to("npu:0")
side = torch.npu.Stream()
with torch.npu.stream(side):
    z = x + 10
torch.npu.current_stream().wait_stream(side)
start, end = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
start.record()
m = torch.ones(64, 64).npu() @ torch.ones(64, 64).npu()
end.record()
torch.npu.synchronize()
free, total = torch.npu.mem_get_info()
props = torch.npu.get_device_properties(0)
try:
    torch.cumprod(x, 0)                   # aclnnCumprod: not in mdev's operator library
    missing = ""
except RuntimeError as exc:
    missing = str(exc)
print(json.dumps({"on1": [str(on1.device), on1.cpu().tolist()], "back": back.cpu().tolist(), "side": z.cpu().tolist(),
                  "mm": float(m.cpu()[0, 0]), "elapsed": start.elapsed_time(end), "free": free, "total": total,
                  "allocated": torch.npu.memory_allocated(), "name": props.name, "props_total": props.total_memory,
                  "count": torch.npu.device_count(), "missing": missing}))
"""


@needs_torch_npu
def test_devices_streams_events_memory_and_a_missing_op(npu_env, tmp_path, board):
    from conftest import SMALL_HBM

    from mdev.board.launcher import resolve_topology

    topology = resolve_topology("pcie4", hbm=SMALL_HBM)
    r = run_torch(npu_env, DEFAULTS, tmp_path)
    assert r["on1"] == ["npu:1", [float(i) for i in range(8)]]
    assert r["back"] == [2.0 * i for i in range(8)]
    assert r["side"] == [10.0 + i for i in range(8)]
    assert r["mm"] == 64.0
    assert r["elapsed"] > 0
    assert r["count"] == len(topology.devices)
    assert r["total"] == r["props_total"] == SMALL_HBM
    assert 0 < r["free"] < r["total"] and r["allocated"] > 0
    assert r["name"] == topology.devices[0].soc_name
    assert "aclnnCumprod" in r["missing"] and "no operator 'Cumprod'" in r["missing"], r["missing"]


def test_operator_library_from_c(acl, cann_home):
    """libnnopbase.so's descriptors and libopapi.so's two phases, called as C does (ctypes,
    this process's own mdev: libmdev_embed.so): a float32 add computed by the device; a bad
    dtype, a NULL output, a non-descriptor and a missing op refused at GetWorkspaceSize
    with their aclnnStatus codes and a message naming the op and the parameter."""
    if importlib.util.find_spec("torch") is None and os.environ.get("CI") != "true":
        pytest.skip("torch is not installed (pip install '.[torch]'): the operator library computes with it")
    import numpy as np

    c_int64p, vp = ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p
    ascendcl = ctypes.CDLL(str(cann_home / "lib64" / "libascendcl.so"))
    nnop = ctypes.CDLL(str(cann_home / "lib64" / "libnnopbase.so"))
    ops = ctypes.CDLL(str(cann_home / "lib64" / "libopapi.so"))
    nnop.aclCreateTensor.restype = nnop.aclCreateScalar.restype = vp
    nnop.aclCreateTensor.argtypes = [c_int64p, ctypes.c_uint64, ctypes.c_int, c_int64p, ctypes.c_int64, ctypes.c_int,
                                     c_int64p, ctypes.c_uint64, vp]
    nnop.aclCreateScalar.argtypes = [vp, ctypes.c_int]
    nnop.aclDestroyTensor.argtypes = nnop.aclDestroyScalar.argtypes = [vp]
    ops.aclnnAddGetWorkspaceSize.argtypes = [vp, vp, vp, vp, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(vp)]
    ops.aclnnAdd.argtypes = [vp, ctypes.c_uint64, vp, vp]
    ascendcl.aclGetRecentErrMsg.restype = ctypes.c_char_p
    ok_ = acl.ACL_SUCCESS
    assert acl.rt.set_device(0) == ok_
    stream, _ = acl.rt.create_stream()
    n = 6
    ptrs = [acl.rt.malloc(4 * n, 0)[0] for _ in range(3)]
    a, b = np.arange(n, dtype=np.float32), np.full(n, 0.5, np.float32)
    for ptr, host in zip(ptrs, (a, b)):
        assert acl.rt.memcpy(ptr, 4 * n, host.ctypes.data, 4 * n, 1) == ok_
    dims = (ctypes.c_int64 * 1)(n)

    def tensor(ptr, dtype=C_FLOAT):
        return nnop.aclCreateTensor(dims, 1, dtype, None, 0, 2, dims, 1, ptr)

    x, y, z = (tensor(p) for p in ptrs)
    alpha_value = ctypes.c_float(2.0)
    alpha = nnop.aclCreateScalar(ctypes.byref(alpha_value), C_FLOAT)
    ws, executor = ctypes.c_uint64(7), vp()
    assert ops.aclnnAddGetWorkspaceSize(x, y, alpha, z, ctypes.byref(ws), ctypes.byref(executor)) == 0
    assert ws.value == 0 and executor.value
    assert ops.aclnnAdd(None, 0, executor, stream) == 0
    assert acl.rt.synchronize_stream(stream) == ok_
    result = np.zeros(n, np.float32)
    assert acl.rt.memcpy(result.ctypes.data, 4 * n, ptrs[2], 4 * n, 2) == ok_
    assert (result == a + 2.0 * b).all()

    bad = tensor(ptrs[0], 99)                            # no aclDataType mdev computes in
    assert ops.aclnnAddGetWorkspaceSize(bad, y, alpha, z, ctypes.byref(ws), ctypes.byref(executor)) == 161002
    message = ascendcl.aclGetRecentErrMsg().decode()
    assert "aclnnAddGetWorkspaceSize" in message and "dataType" in message, message
    assert ops.aclnnAddGetWorkspaceSize(x, y, alpha, None, ctypes.byref(ws), ctypes.byref(executor)) == 161001
    assert "out is a null pointer" in ascendcl.aclGetRecentErrMsg().decode()
    assert ops.aclnnAddGetWorkspaceSize(alpha, y, alpha, z, ctypes.byref(ws), ctypes.byref(executor)) == 161002
    assert "self" in ascendcl.aclGetRecentErrMsg().decode()
    assert ops.aclnnCumprodGetWorkspaceSize() == 561003
    assert "no operator 'Cumprod'" in ascendcl.aclGetRecentErrMsg().decode()
    for t in (x, y, z, bad):
        assert nnop.aclDestroyTensor(t) == 0
    assert nnop.aclDestroyScalar(alpha) == 0 and nnop.aclDestroyTensor(None) == 0
    for ptr in ptrs:
        assert acl.rt.free(ptr) == ok_
    assert acl.rt.destroy_stream(stream) == ok_


C_FLOAT = 0


def test_descriptors_sent_with_a_call_are_checked():
    """What a C caller sends as its descriptors' copy is untrusted: cut short, or not a
    descriptor's magic, it is ACLNN_ERR_PARAM_INVALID naming the parameter, never an exception."""
    from mdev.capi import nnopbase
    from mdev.errors import AclError

    for blob in (b"\x00" * 5, b"\xff" * 232, b"\x4d\x44\x4e\x54" + b"\xff" * 228):
        with pytest.raises(AclError) as failure:
            nnopbase.unpack(blob, [(0x1000, "tensor", "aclnnAddGetWorkspaceSize: self")])
        assert failure.value.code == 161002
    scalar = struct.pack("<Ii8s", nnopbase.MAGICS["scalar"], 0, struct.pack("<f", 2.5))
    assert nnopbase.unpack(scalar, [(0, "tensor", "t"), (0x2000, "scalar", "alpha")])[1].value == 2.5


def test_compile_options_and_the_aclop_path(acl, cann_home):
    """libacl_op_compiler.so keeps compile options as CANN's op compiler does (torch_npu reads
    ACL_OP_JIT_COMPILE at start-up, and set_compile_mode sets it); compiling an aclop answers
    ACL_ERROR_API_NOT_SUPPORT saying why."""
    compiler = ctypes.CDLL(str(cann_home / "lib64" / "libacl_op_compiler.so"))
    compiler.aclGetCompileoptSize.restype = ctypes.c_size_t
    compiler.aclGetRecentErrMsg.restype = ctypes.c_char_p          # found through its dependency
    jit, precision, auto_tune = 10, 0, 2
    buffer = ctypes.create_string_buffer(256)
    assert compiler.aclGetCompileoptSize(jit) == 256
    assert compiler.aclGetCompileopt(jit, buffer, 256) == 0 and buffer.value == b"disable"
    assert compiler.aclSetCompileopt(jit, b"enable") == 0
    assert compiler.aclGetCompileopt(jit, buffer, 256) == 0 and buffer.value == b"enable"
    assert compiler.aclGetCompileoptSize(precision) == 0
    assert compiler.aclSetCompileopt(precision, b"allow_fp32_to_fp16") == 0
    assert compiler.aclGetCompileoptSize(precision) == len(b"allow_fp32_to_fp16") + 1
    assert compiler.aclGetCompileopt(precision, buffer, 256) == 200001            # as CANN: not readable
    assert compiler.aclSetCompileopt(auto_tune, b"ga") == 200006
    assert compiler.aclGetCompileopt(jit, buffer, 3) == 100000                   # too small a buffer
    assert compiler.aclSetCompileopt(jit, b"disable") == 0
    assert compiler.aclopCompileAndExecute(b"Add", 0, None, None, 0, None, None, None, 0, 0, None, None) == 200001
    assert b"through aclnn" in compiler.aclGetRecentErrMsg()
