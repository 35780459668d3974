"""torch_npu on mdev: small-op dispatch, training steps and DDP, beside torch's CPU in the same run.

    small op     OPS x ``x.add_(1)`` on a 4-element float32 tensor, then one
                 torch.npu.synchronize(): ops/s through torch_npu (default task queue,
                 libopapi.so, one operator task each) beside the same loop on the CPU
    MLP step     an MLP 64-256-256-10 (ReLU), batch 64, MSE + SGD: forward, backward and step,
                 ms per step (after warm-up, synchronised) beside the CPU's
    matmul step  4 Linear layers 1024x1024 (ReLU between), batch 256, MSE, with SGD and with
                 AdamW: the same, beside the CPU's (CPU and NPU runs alternate, best of ROUNDS)
    DDP step     the MLP under DistributedDataParallel (mp.spawn, hccl backend), each rank a
                 batch of 64 (weak scaling): ms per step on 2 and 8 ranks beside 1 rank's

The torch programs run in their own processes with the environment of a fresh ``mdev
cann-home`` tree's set_env.sh, on a dedicated 8-device board (single-device figures on device
0).  Targets (issue 30): >= 10,000 ops/s for the small op; the MLP step within 10x of the
CPU's, the matmul-bound step within 2x.  The DDP figures have no target: the 8 rank processes
and their 8 device processes share this machine's cores.  Skipped (no figures) when torch_npu
is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from bench.common import Result, dedicated_board, print_table

OPS, STEPS, MATMUL_STEPS, ROUNDS, DDP_STEPS = 2_000, 20, 3, 2, 20
DDP_WORLDS = (1, 2, 8)

PROGRAM = """
import json, sys, time, torch, torch_npu
ops, steps, matmul_steps, rounds = (int(a) for a in sys.argv[1:5])

def small_op(dev):
    x = torch.zeros(4, device=dev)
    for _ in range(200):
        x.add_(1)
    sync = torch.npu.synchronize if dev != "cpu" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    for _ in range(ops):
        x.add_(1)
    sync()
    return ops / (time.perf_counter() - t0)

def step_time(dev, widths, batch, optimizer, steps):
    # seconds a training step of an MLP takes (ReLU between its Linear layers, MSE loss), after 2 warm-up steps
    torch.manual_seed(0)
    nn = torch.nn
    layers = []
    for a, b in zip(widths, widths[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    model = nn.Sequential(*layers[:-1]).to(dev)
    opt = getattr(torch.optim, optimizer)(model.parameters(), lr=1e-3)
    x, y = torch.randn(batch, widths[0], device=dev), torch.randn(batch, widths[-1], device=dev)
    sync = torch.npu.synchronize if dev != "cpu" else (lambda: None)
    def step():
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    for _ in range(2):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return (time.perf_counter() - t0) / steps

MLP, MATMUL = (64, 256, 256, 10), (1024,) * 5

got = {"npu_ops": small_op("npu:0"), "cpu_ops": small_op("cpu"),
       "npu_step": step_time("npu:0", MLP, 64, "SGD", steps), "cpu_step": step_time("cpu", MLP, 64, "SGD", steps)}
for optimizer in ("SGD", "AdamW"):
    cpu, npu = [], []
    for _ in range(rounds):                  # alternating, so both see the same load
        cpu.append(step_time("cpu", MATMUL, 256, optimizer, matmul_steps))
        npu.append(step_time("npu:0", MATMUL, 256, optimizer, matmul_steps))
    got[f"cpu_{optimizer}"], got[f"npu_{optimizer}"] = min(cpu), min(npu)
print(json.dumps(got))
"""

DDP_PROGRAM = """
import json, os, sys, time, torch, torch_npu
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

def work(rank, world, steps, out):
    torch.npu.set_device(rank)
    dev = f"npu:{rank}"
    dist.init_process_group("hccl", rank=rank, world_size=world)
    torch.manual_seed(0)
    nn = torch.nn
    model = DDP(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                              nn.Linear(256, 10)).to(dev), device_ids=[rank])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 64, device=dev), torch.randn(64, 10, device=dev)
    def step():
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    for _ in range(3):
        step()
    torch.npu.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.npu.synchronize()
    took = torch.tensor([(time.perf_counter() - t0) / steps], device=dev)
    dist.all_reduce(took, op=dist.ReduceOp.MAX)      # the step is as slow as its slowest rank
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"step": took.item()}, f)
    dist.destroy_process_group()

if __name__ == "__main__":
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[1])
    world = int(sys.argv[2])
    mp.spawn(work, args=(world, int(sys.argv[3]), sys.argv[4]), nprocs=world)
"""


def _environment(home: Path, board: str) -> dict:
    dump = subprocess.run(["bash", "-c", f". {home / 'set_env.sh'} >/dev/null && env -0"],
                          env=dict(os.environ, MDEV_BOARD=board, MDEV_AUTOSTART="0"),
                          capture_output=True, timeout=120, check=True).stdout
    return dict(item.split("=", 1) for item in dump.decode().split("\0") if "=" in item)


def _run(script: Path, args: list, env: dict) -> str:
    proc = subprocess.run([sys.executable, str(script), *map(str, args)], env=env, capture_output=True, text=True,
                          timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"the torch_npu program {script.name} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return proc.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run() -> list[Result]:
    from mdev.capi.cann_home import make

    with tempfile.TemporaryDirectory(prefix="mdev-bench-torch-") as work, \
            dedicated_board("torch", "hccs8", hbm=1 << 30) as board:
        home = make(Path(work) / "cann", log=lambda line: None)
        env = dict(_environment(home, board), HCCL_BUFFSIZE="16")
        script, ddp = Path(work) / "prog.py", Path(work) / "ddp.py"
        script.write_text(textwrap.dedent(PROGRAM))
        ddp.write_text(textwrap.dedent(DDP_PROGRAM))
        r = json.loads(_run(script, [OPS, STEPS, MATMUL_STEPS, ROUNDS], env).strip().splitlines()[-1])
        ddp_step = {}
        for world in DDP_WORLDS:
            out = Path(work) / f"ddp{world}.json"
            _run(ddp, [_free_port(), world, DDP_STEPS, out], env)
            ddp_step[world] = json.loads(out.read_text())["step"]
    one = ddp_step[1]
    return [
        Result("x.add_(1), 4 floats, through torch_npu", r["npu_ops"], "ops/s", r["cpu_ops"], "ops/s",
               "torch CPU, same loop", r["npu_ops"] / r["cpu_ops"], ("value", ">=", 10_000.0),
               note=f"{1e6 / r['npu_ops']:.0f} us an op"),
        Result("MLP 64-256-256-10 step (batch 64, SGD)", r["npu_step"] * 1e3, "ms", r["cpu_step"] * 1e3, "ms",
               "torch CPU, same step", r["npu_step"] / r["cpu_step"], ("ratio", "<=", 10.0)),
        *[Result(f"4 x Linear 1024x1024 step (batch 256, {opt})", r[f"npu_{opt}"] * 1e3, "ms",
                 r[f"cpu_{opt}"] * 1e3, "ms", "torch CPU, same step", r[f"npu_{opt}"] / r[f"cpu_{opt}"],
                 ("ratio", "<=", 2.0), note=f"best of {ROUNDS}, alternating") for opt in ("SGD", "AdamW")],
        *[Result(f"DDP MLP step, {world} ranks (batch 64 each)", ddp_step[world] * 1e3, "ms", one * 1e3, "ms",
                 "1 rank, same program", ddp_step[world] / one, note="mp.spawn, hccl; slowest rank")
          for world in DDP_WORLDS if world != 1],
    ]


def main() -> list[Result]:
    if importlib.util.find_spec("torch_npu") is None:
        print("torch_npu: skipped (torch_npu is not installed: pip install '.[torch]')")
        return []
    results = run()
    print_table("torch_npu on mdev vs torch CPU (same run)", results)
    return results


if __name__ == "__main__":
    main()
