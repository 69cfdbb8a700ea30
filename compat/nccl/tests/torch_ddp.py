#!/usr/bin/env python3
"""PyTorch's `nccl` backend on Braid's libnccl.so.2: collectives on CUDA tensors and DDP training.

Starts two rank processes on one GPU (a set-up NVIDIA's NCCL refuses) with the shim preloaded,
checks that the loaded libnccl.so.2 is the shim, runs torch.distributed's collectives with known
results, then trains a small model with DistributedDataParallel and compares its weights with a
single-process run on the union of the ranks' batches. Exit status 0 when every check passed.

With --two-hosts each rank gets a BRAID_HOSTID of its own, so the two ranks are two "hosts" and
every collective on CUDA tensors takes the device path across hosts (staged through pinned host
memory over TCP).

Usage: torch_ddp.py [--two-hosts] SHIM   (SHIM: path of Braid's libnccl.so.2)
"""
import os
import socket
import subprocess
import sys

WORLD = 2
STEPS = 5


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def model_and_batches(torch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    batches = [(torch.randn(16, 32), torch.randn(16, 1)) for _ in range(STEPS * WORLD)]
    return model, batches


def train(torch, model, batches_per_step, device):
    """SGD steps; each step's loss is the mean over every rank's batch of that step."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in batches_per_step:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
    return model


def rank_main(rank, failures):
    import torch
    import torch.distributed as dist

    def check(cond, what):
        if not cond:
            failures.append(what)
            print(f"rank {rank}: FAILED {what}", flush=True)

    device = torch.device("cuda:0")
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", rank=rank, world_size=WORLD)
    if rank == 0:
        # torch may map its own libnccl.so.2 as well; the preloaded shim comes first in the
        # lookup order, and its version line (NCCL_DEBUG=VERSION, checked by the parent) shows
        # that it served the communicator.
        loaded = sorted({line.split()[-1] for line in open("/proc/self/maps") if "libnccl" in line})
        print(f"torch {torch.__version__}, libnccl mapped: {loaded}", flush=True)

    n = 1 << 20
    t = torch.full((n,), float(rank + 1), device=device)
    dist.all_reduce(t)
    check(torch.all(t == 3.0).item(), "all_reduce sum")
    t = torch.full((n,), float(rank + 1), device=device)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    check(torch.all(t == 1.5).item(), "all_reduce avg")
    t = torch.full((1000,), float(rank * 7), device=device)
    dist.broadcast(t, src=1)
    check(torch.all(t == 7.0).item(), "broadcast")
    piece = torch.arange(1000, device=device, dtype=torch.float32) + 1000 * rank
    whole = torch.empty(2000, device=device)
    dist.all_gather_into_tensor(whole, piece)
    check(torch.equal(whole, torch.arange(2000, device=device, dtype=torch.float32)),
          "all_gather_into_tensor")
    full = torch.arange(2000, device=device, dtype=torch.float32)
    mine = torch.empty(1000, device=device)
    dist.reduce_scatter_tensor(mine, full)
    check(torch.equal(mine, 2 * torch.arange(1000, device=device, dtype=torch.float32)
                      + 2000 * rank), "reduce_scatter_tensor")
    if rank == 0:
        dist.send(torch.full((4096,), 42.0, device=device), dst=1)
    else:
        got = torch.zeros(4096, device=device)
        dist.recv(got, src=0)
        check(torch.all(got == 42.0).item(), "send/recv")
    dist.barrier()

    model, batches = model_and_batches(torch)
    ddp = torch.nn.parallel.DistributedDataParallel(model.to(device), device_ids=[0])
    train(torch, ddp, batches[rank::WORLD], device)
    weights = torch.cat([p.detach().flatten() for p in ddp.module.parameters()])
    gathered = torch.empty(WORLD * weights.numel(), device=device)
    dist.all_gather_into_tensor(gathered, weights)
    check(torch.equal(gathered[: weights.numel()], gathered[weights.numel():]),
          "DDP weights equal on both ranks")
    if rank == 0:
        # The reference: one process, each step's two batches as one batch of 32.
        ref, ref_batches = model_and_batches(torch)
        joined = [(torch.cat([a[0] for a in ref_batches[i:i + WORLD]]),
                   torch.cat([a[1] for a in ref_batches[i:i + WORLD]]))
                  for i in range(0, len(ref_batches), WORLD)]
        train(torch, ref.to(device), joined, device)
        expected = torch.cat([p.detach().flatten() for p in ref.parameters()])
        diff = (weights - expected).abs().max().item()
        print(f"DDP after {STEPS} steps: max |w - w_single| = {diff:.3g}", flush=True)
        check(diff < 1e-5, f"DDP weights match a single-process run (max diff {diff})")

    dist.destroy_process_group()


def main():
    args = sys.argv[1:]
    two_hosts = "--two-hosts" in args
    args = [a for a in args if a != "--two-hosts"]
    if len(args) != 1:
        sys.exit(__doc__)
    shim = args[0]
    if "BRAID_TORCH_DDP_RANK" in os.environ:
        failures = []
        rank_main(int(os.environ["BRAID_TORCH_DDP_RANK"]), failures)
        sys.exit(1 if failures else 0)
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               LD_PRELOAD=os.path.realpath(shim), NCCL_DEBUG="VERSION")

    def rank_env(r):
        extra = {"BRAID_TORCH_DDP_RANK": str(r)}
        if two_hosts:
            extra["BRAID_HOSTID"] = f"torch-ddp-host-{r}"
        return dict(env, **extra)

    ranks = [subprocess.Popen([sys.executable, __file__, shim], env=rank_env(r), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for r in range(WORLD)]
    codes, outputs = [], []
    for p in ranks:
        try:
            out, _ = p.communicate(timeout=240)
            codes.append(p.returncode)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            codes.append("timed out")
        outputs.append(out)
    for r, out in enumerate(outputs):
        print("".join(f"[rank {r}] {line}\n" for line in out.splitlines()), end="")
    served = "NCCL-compatible library" in outputs[0]
    print(f"torch_ddp{' (two hosts)' if two_hosts else ''}: rank exit codes {codes}; "
          f"Braid's libnccl.so.2 "
          f"{'served' if served else 'did NOT serve'} the process group")
    sys.exit(0 if served and all(c == 0 for c in codes) else 1)


if __name__ == "__main__":
    main()
