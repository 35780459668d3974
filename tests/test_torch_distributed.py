"""torch.distributed with the ``hccl`` backend on an mdev board: torch_npu's own ProcessGroupHCCL
over the CANN tree's libhccl.so, one device of the test board per rank process.

The rank processes are started the three ways users start them: torch.multiprocessing.spawn,
torchrun (``python -m torch.distributed.run``) and by hand with MASTER_ADDR/RANK/WORLD_SIZE.
Each rank writes what it got to a JSON file; collectives are checked against numpy, and
DistributedDataParallel's parameters against one CPU process training on the whole batch.
Without torch_npu the tests skip with one reason (CI=true: they fail instead).
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable

import numpy as np
import pytest
from test_torch_npu import needs_torch_npu, npu_env  # noqa: F401  (npu_env: the fixture of set_env.sh's environment)

# what the rank programs train: an MLP and its batch, 3 steps of an optimizer
MLP_TRAINING = """
import json, os, sys
import torch, torch_npu
import torch.distributed as dist
import torch.multiprocessing as mp


def mlp_and_batch():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    return model, torch.randn(16, 8), torch.randn(16, 4)


def train3(model, x, y, optimizer=torch.optim.SGD, lr=0.1):
    opt = optimizer(model.parameters(), lr=lr)
    for _ in range(3):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    return loss.detach()
"""

RANKS = MLP_TRAINING + """
from torch.nn.parallel import DistributedDataParallel as DDP

OUT = sys.argv[1]


def work(rank, world):
    torch.npu.set_device(rank)
    dev = f"npu:{rank}"
    dist.init_process_group("hccl", rank=rank, world_size=world)
    got = {}
    x = torch.arange(6, dtype=torch.float32, device=dev) + rank
    dist.all_reduce(x)
    got["all_reduce"] = x.cpu().tolist()
    m = torch.tensor([rank, -rank, 5], dtype=torch.float32, device=dev)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    got["all_reduce_max"] = m.cpu().tolist()
    b = torch.full((4,), float(rank + 1), device=dev)
    dist.broadcast(b, src=world - 1)
    got["broadcast"] = b.cpu().tolist()
    g = torch.empty(world * 3, device=dev)
    dist.all_gather_into_tensor(g, torch.full((3,), float(rank), device=dev))
    got["all_gather_into_tensor"] = g.cpu().tolist()
    parts = [torch.empty(2, device=dev) for _ in range(world)]
    dist.all_gather(parts, torch.tensor([rank, 10 + rank], dtype=torch.float32, device=dev))
    got["all_gather"] = [p.cpu().tolist() for p in parts]
    s = torch.empty(2, device=dev)
    dist.reduce_scatter_tensor(s, torch.arange(world * 2, dtype=torch.float32, device=dev) * (rank + 1))
    got["reduce_scatter_tensor"] = s.cpu().tolist()
    r = torch.empty(2, device=dev)
    dist.reduce_scatter(r, [torch.full((2,), float(j * (rank + 1)), device=dev) for j in range(world)])
    got["reduce_scatter"] = r.cpu().tolist()
    for dtype in ("float16", "bfloat16", "int32", "int64"):
        t = torch.tensor([rank + 1, 2, 3], device=dev).to(getattr(torch, dtype))
        dist.all_reduce(t)
        got[f"sum_{dtype}"] = t.cpu().float().tolist()
    for op in ("MIN", "PRODUCT", "AVG"):
        t = torch.tensor([rank + 1, 2, 3], dtype=torch.float32, device=dev)
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        got[op.lower()] = t.cpu().tolist()
    t = torch.tensor([rank + 1.0], device=dev)
    pending = dist.all_reduce(t, async_op=True)
    pending.wait()
    got["async"] = t.cpu().tolist()
    t = torch.tensor([rank + 1.0], device=dev)
    dist.reduce(t, dst=0)
    got["reduce"] = t.cpu().tolist()
    a = torch.empty(world, device=dev)
    dist.all_to_all_single(a, torch.arange(world, dtype=torch.float32, device=dev) + 10 * rank)
    got["all_to_all_single"] = a.cpu().tolist()
    a = torch.empty(world * (rank + 1), device=dev)  # to rank k: k + 1 values 10 rank + k
    dist.all_to_all_single(a, torch.cat([torch.full((k + 1,), 10.0 * rank + k, device=dev) for k in range(world)]),
                           [rank + 1] * world, [k + 1 for k in range(world)])
    got["all_to_all_uneven"] = a.cpu().tolist()
    t = torch.tensor([rank + 1.0], device=dev)
    into = [torch.empty(1, device=dev) for _ in range(world)] if rank == 0 else None
    dist.gather(t, into, dst=0)
    if rank == 0:
        got["gather"] = [x.cpu().item() for x in into]
    t = torch.empty(1, device=dev)
    dist.scatter(t, [torch.tensor([float(k)], device=dev) for k in range(world)] if rank == 0 else None, src=0)
    got["scatter"] = t.cpu().tolist()
    objects = [None] * world
    dist.all_gather_object(objects, {"rank": rank})
    got["all_gather_object"] = objects
    objects = [5 * rank]
    dist.broadcast_object_list(objects, src=world - 1)
    got["broadcast_object_list"] = objects
    dist.barrier()
    ring = torch.empty(3, device=dev)            # each rank sends to the next, receives from the previous
    ops = [dist.P2POp(dist.isend, torch.full((3,), 100.0 + rank, device=dev), (rank + 1) % world),
           dist.P2POp(dist.irecv, ring, (rank - 1) % world)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    got["ring"] = ring.cpu().tolist()
    if rank == 0:
        dist.send(torch.full((2,), 7.0, device=dev), dst=world - 1)
    elif rank == world - 1:
        back = torch.empty(2, device=dev)
        dist.recv(back, src=0)
        got["recv"] = back.cpu().tolist()
    odd = dist.new_group([k for k in range(world) if k % 2])
    if rank % 2:
        o = torch.full((2,), float(rank), device=dev)
        dist.all_reduce(o, group=odd)
        got["odd_all_reduce"] = o.cpu().tolist()
    model, bx, by = mlp_and_batch()              # DDP: each rank its slice of the batch
    ddp = DDP(model.to(dev), device_ids=[rank])
    n = bx.shape[0] // world
    loss = train3(ddp, bx[rank * n:(rank + 1) * n].to(dev), by[rank * n:(rank + 1) * n].to(dev))
    dist.all_reduce(loss)
    got["ddp_loss"] = float(loss.cpu()) / world
    got["ddp_params"] = [p.detach().cpu().flatten().tolist() for p in ddp.module.parameters()]
    dist.destroy_process_group()
    if rank == 0:                                # the reference: one process, the whole batch, the CPU
        model, bx, by = mlp_and_batch()
        got["cpu_loss"] = float(train3(model, bx, by))
        got["cpu_params"] = [p.detach().flatten().tolist() for p in model.parameters()]
    with open(os.path.join(OUT, f"rank{rank}.json"), "w") as f:
        json.dump(got, f)


if __name__ == "__main__":
    if "RANK" in os.environ:                     # torchrun
        work(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    else:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2])
        mp.spawn(work, args=(int(sys.argv[3]),), nprocs=int(sys.argv[3]))
"""


@pytest.fixture
def dist_env(npu_env) -> dict:  # noqa: F811  (the imported fixture)
    """set_env.sh's environment with 16 MB HCCL buffers: the default 200 MB per communicator fills
    the test board's 256 MiB devices at the second one (a new_group's), HCCL_E_MEMORY as on a card;
    a rank that crashes prints where (faulthandler)."""
    return dict(npu_env, HCCL_BUFFSIZE="16", PYTHONFAULTHANDLER="1")


def failure(proc) -> str:
    """What a failed run printed last, and where a rank that crashed was (faulthandler's report)."""
    crash = proc.stderr.find("Fatal Python error")
    where = "\n--- crash:\n" + proc.stderr[crash:crash + 4000] if crash >= 0 else ""
    return proc.stdout[-2000:] + proc.stderr[-2000:] + where


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(env: dict, tmp_path, launch: Callable[[str, str], list[str]], world: int) -> list[dict]:
    """Run RANKS with the command ``launch(script, output folder)``; what each of the ``world`` ranks wrote."""
    script = tmp_path / "ranks.py"
    script.write_text(textwrap.dedent(RANKS))
    proc = subprocess.run(launch(str(script), str(tmp_path)), env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=240, check=False)
    assert proc.returncode == 0, failure(proc)
    return [json.loads((tmp_path / f"rank{k}.json").read_text()) for k in range(world)]


def check(ranks: list[dict]) -> None:
    """Each rank's results as numpy computes them from what every rank contributed."""
    world = len(ranks)
    total = world * (world + 1) // 2                           # sum over ranks of (rank + 1)
    odd = [k for k in range(world) if k % 2]
    for rank, got in enumerate(ranks):
        expect = {
            "all_reduce": sum(np.arange(6) + k for k in range(world)),
            "all_reduce_max": [world - 1, 0, 5],
            "broadcast": [world] * 4,
            "all_gather_into_tensor": np.repeat(np.arange(world), 3),
            "all_gather": [[k, 10 + k] for k in range(world)],
            "reduce_scatter_tensor": (np.arange(2 * world) * total)[2 * rank:2 * rank + 2],
            "reduce_scatter": [rank * total] * 2,
            "ring": [100 + (rank - 1) % world] * 3,
            **{f"sum_{dtype}": [total, 2 * world, 3 * world] for dtype in ("float16", "bfloat16", "int32", "int64")},
            "min": [1, 2, 3],
            "product": [math.factorial(world), 2 ** world, 3 ** world],
            "avg": [total / world, 2, 3],
            "async": [total],
            "all_to_all_single": [10 * k + rank for k in range(world)],
            "all_to_all_uneven": np.repeat([10 * k + rank for k in range(world)], rank + 1),
            "scatter": [rank],
        }
        if rank == 0:
            expect["reduce"] = [total]
            expect["gather"] = list(range(1, world + 1))
        if rank == world - 1:
            expect["recv"] = [7, 7]
        if rank % 2:
            expect["odd_all_reduce"] = [sum(odd)] * 2
        for name, value in expect.items():
            np.testing.assert_array_equal(np.asarray(got[name]), np.asarray(value, np.float32), err_msg=f"{rank}:{name}")
        assert got["all_gather_object"] == [{"rank": k} for k in range(world)]
        assert got["broadcast_object_list"] == [5 * (world - 1)]
    reference = ranks[0]
    for rank, got in enumerate(ranks):                         # DDP: as one CPU process on the whole batch
        assert abs(got["ddp_loss"] - reference["cpu_loss"]) <= 1e-5, (rank, got["ddp_loss"], reference["cpu_loss"])
        for mine, cpu in zip(got["ddp_params"], reference["cpu_params"]):
            np.testing.assert_allclose(mine, cpu, rtol=0, atol=1e-5, err_msg=f"rank {rank}")
    assert max(abs(v) for p in reference["ddp_params"] for v in p) > 0


@needs_torch_npu
def test_two_ranks_with_spawn(dist_env, tmp_path):
    """mp.spawn on 2 devices: all_reduce (sum in float32/float16/bfloat16/int32/int64, max, min,
    product, avg, async), reduce, broadcast, all_gather(_into_tensor), reduce_scatter(_tensor),
    all_to_all_single (even and uneven), gather, scatter, the object collectives, barrier,
    batched isend/irecv and send/recv, a new_group, and 3 DDP steps of an MLP equal to the
    single CPU process on the whole batch."""
    ranks = run_ranks(dist_env, tmp_path, lambda script, out: [sys.executable, script, out, str(free_port()), "2"], 2)
    check(ranks)


@needs_torch_npu
def test_four_ranks_with_torchrun(dist_env, tmp_path):
    """The same program under ``torchrun --standalone --nproc_per_node=4``."""
    ranks = run_ranks(dist_env, tmp_path, lambda script, out: [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4", script, out], 4)
    check(ranks)


FAULT_MID_STEP = """
import json, os, signal, time
import torch, torch_npu
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

rank = int(os.environ["RANK"])
torch.npu.set_device(rank)
dist.init_process_group("hccl")
torch.manual_seed(0)
model = DDP(torch.nn.Linear(8, 4).to(f"npu:{rank}"), device_ids=[rank])
x = torch.randn(4, 8).to(f"npu:{rank}")
start = None
try:
    for step in range(3):
        loss = model(x).square().mean()
        if step == 1:
            if rank == 1:                                  # mid-step, between forward and backward:
                if os.environ["FAULT"] == "killed":
                    os.kill(os.getpid(), signal.SIGKILL)
                time.sleep(120)                            # stalled: alive, never in the all_reduce
            start = time.monotonic()
        loss.backward()                                    # DDP's gradient all_reduce
        loss.item()
    outcome = "finished"
except Exception as exc:
    outcome = str(exc)
print(json.dumps({"outcome": outcome, "seconds": time.monotonic() - start}), flush=True)
os._exit(0)
"""


@needs_torch_npu
@pytest.mark.parametrize("fault, code, said", [("killed", "507057", "rank 1 (process"),
                                               ("stalled", "107020", "")])
def test_a_rank_killed_or_stalled_mid_step_makes_the_other_raise(dist_env, tmp_path, fault, code, said):
    """Rank 1 is SIGKILLed between forward and backward of a DDP step: rank 0's gradient
    all_reduce raises at once with ACL_ERROR_RT_SUSPECT_REMOTE_ERROR naming the rank.  Rank 1
    stalls there instead: rank 0 raises ACL_ERROR_RT_TASK_TIMEOUT after HCCL_EXEC_TIMEOUT (5 s).
    Never a hang."""
    script = tmp_path / "fault.py"
    script.write_text(textwrap.dedent(FAULT_MID_STEP))
    # torch_npu's watchdog, seeing the failure first, would take rank 0 down (SIGABRT) before its
    # step reports it -- a race of torch_npu's threads under load, not mdev's: it only watches
    env = dict(dist_env, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE="2", FAULT=fault,
               HCCL_EXEC_TIMEOUT="5", TORCH_HCCL_ASYNC_ERROR_HANDLING="0")
    procs = [subprocess.Popen([sys.executable, str(script)], env=dict(env, RANK=str(k), LOCAL_RANK=str(k)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(2)]
    try:
        first = procs[0].communicate(timeout=180)
        procs[1].kill()                                    # the stalled one; the killed one is gone
        procs[1].communicate(timeout=60)
    finally:
        for p in procs:
            p.kill()
    assert procs[0].returncode == 0, first[1][-3000:]
    got = json.loads(first[0].strip().splitlines()[-1])
    assert code in got["outcome"] and said in got["outcome"], got["outcome"][:2000]
    assert got["seconds"] < 30 and (fault == "killed" or got["seconds"] >= 4.5), got


FSDP2 = MLP_TRAINING + """
from torch.distributed.fsdp import fully_shard


def work(rank, world, out):
    torch.npu.set_device(rank)
    dev = f"npu:{rank}"
    dist.init_process_group("hccl", rank=rank, world_size=world)
    model, x, y = mlp_and_batch()
    model = model.to(dev)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    n = x.shape[0] // world
    loss = train3(model, x[rank * n:(rank + 1) * n].to(dev), y[rank * n:(rank + 1) * n].to(dev), torch.optim.AdamW,
                  0.01)
    dist.all_reduce(loss)
    got = {"loss": float(loss.cpu()) / world,
           "params": [p.full_tensor().detach().cpu().flatten().tolist() for p in model.parameters()],
           "shards": [list(p.to_local().shape) for p in model.parameters()]}
    dist.destroy_process_group()
    if rank == 0:                                # the reference: one process, the whole batch, the CPU
        model, x, y = mlp_and_batch()
        got["cpu_loss"] = float(train3(model, x, y, torch.optim.AdamW, 0.01))
        got["cpu_params"] = [p.detach().flatten().tolist() for p in model.parameters()]
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(got, f)


if __name__ == "__main__":
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2])
    mp.spawn(work, args=(2, sys.argv[1]), nprocs=2)
"""


@needs_torch_npu
def test_fsdp2_fully_shard_on_two_ranks_matches_the_cpu(dist_env, tmp_path):
    """FSDP2 (fully_shard per Linear and on the whole model) on 2 ranks, 3 AdamW steps, each
    rank half the batch: each rank holds half of each parameter (torch_npu's all-gather copy-in
    is aclnnForeachCopy, its reduce-scatter copy-in aclnnChunkCat), and the gathered parameters
    and the loss equal one CPU process on the whole batch."""
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            raise       # CI's torch (the pinned 2.13) has it: never pass there by skipping
        pytest.skip("this torch has no FSDP2 (torch.distributed.fsdp.fully_shard)")
    script = tmp_path / "fsdp2.py"
    script.write_text(textwrap.dedent(FSDP2))
    proc = subprocess.run([sys.executable, str(script), str(tmp_path), str(free_port())], env=dist_env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, failure(proc)
    ranks = [json.loads((tmp_path / f"rank{k}.json").read_text()) for k in range(2)]
    cpu = ranks[0]
    for rank, got in enumerate(ranks):
        assert got["shards"] == [[8, 8], [8], [2, 16], [2]], got["shards"]
        assert abs(got["loss"] - cpu["cpu_loss"]) <= 1e-5, (rank, got["loss"], cpu["cpu_loss"])
        for mine, ref in zip(got["params"], cpu["cpu_params"]):
            np.testing.assert_allclose(mine, ref, rtol=0, atol=1e-5, err_msg=f"rank {rank}")
