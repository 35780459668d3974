"""torch_npu on mdev: small-op dispatch and a training step, beside torch's CPU in the same run.

    small op     OPS x ``x.add_(1)`` on a 4-element float32 tensor, then one
                 torch.npu.synchronize(): ops/s through torch_npu (default task queue,
                 libopapi.so, one operator task each) beside the same loop on the CPU
    MLP step     an MLP 64-256-256-10 (ReLU), batch 64, MSE + SGD: forward, backward and step,
                 ms per step (after warm-up, synchronised) beside the CPU's

The torch program runs in its own process with the environment of a fresh ``mdev
cann-home`` tree's set_env.sh, on a dedicated 2-device board.  Targets (issue 30): >= 10,000
ops/s for the small op; the MLP step within 10x of the CPU's.  Skipped (no figures) when
torch_npu is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from bench.common import Result, dedicated_board, print_table

OPS, STEPS = 2_000, 20

PROGRAM = """
import json, sys, time, torch, torch_npu
ops, steps = int(sys.argv[1]), int(sys.argv[2])

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

def mlp_step(dev):
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 64, device=dev), torch.randn(64, 10, device=dev)
    sync = torch.npu.synchronize if dev != "cpu" else (lambda: None)
    def step():
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    for _ in range(3):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return (time.perf_counter() - t0) / steps

print(json.dumps({"npu_ops": small_op("npu:0"), "cpu_ops": small_op("cpu"),
                  "npu_step": mlp_step("npu:0"), "cpu_step": mlp_step("cpu")}))
"""


def _environment(home: Path, board: str) -> dict:
    dump = subprocess.run(["bash", "-c", f". {home / 'set_env.sh'} >/dev/null && env -0"],
                          env=dict(os.environ, MDEV_BOARD=board, MDEV_AUTOSTART="0"),
                          capture_output=True, timeout=120, check=True).stdout
    return dict(item.split("=", 1) for item in dump.decode().split("\0") if "=" in item)


def run() -> list[Result]:
    from mdev.capi.cann_home import make

    with tempfile.TemporaryDirectory(prefix="mdev-bench-torch-") as work, \
            dedicated_board("torch", "laptop2", hbm=1 << 30) as board:
        home = make(Path(work) / "cann", log=lambda line: None)
        script = Path(work) / "prog.py"
        script.write_text(textwrap.dedent(PROGRAM))
        proc = subprocess.run([sys.executable, str(script), str(OPS), str(STEPS)], env=_environment(home, board),
                              capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"the torch_npu program failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        r = json.loads(proc.stdout.strip().splitlines()[-1])
    return [
        Result("x.add_(1), 4 floats, through torch_npu", r["npu_ops"], "ops/s", r["cpu_ops"], "ops/s",
               "torch CPU, same loop", r["npu_ops"] / r["cpu_ops"], ("value", ">=", 10_000.0),
               note=f"{1e6 / r['npu_ops']:.0f} us an op"),
        Result("MLP 64-256-256-10 step (batch 64, SGD)", r["npu_step"] * 1e3, "ms", r["cpu_step"] * 1e3, "ms",
               "torch CPU, same step", r["npu_step"] / r["cpu_step"], ("ratio", "<=", 10.0)),
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
