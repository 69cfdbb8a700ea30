"""DistributedDataParallel, sub-groups and torchrun on backend "braid"."""

import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

import ranks

STEPS, BATCH, FEATURES = 4, 8, 6


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(FEATURES, 16), nn.Tanh(), nn.Linear(16, 3)).double()


def _batches(nranks):
    """Per step, the joined batch of every rank (rank r's part is rows r*BATCH...)."""
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(nranks * BATCH, FEATURES, generator=g, dtype=torch.float64),
             torch.randn(nranks * BATCH, 3, generator=g, dtype=torch.float64))
            for _ in range(STEPS)]


def _train(model, batches, part=None):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for x, y in batches:
        if part is not None:
            x, y = x[part], y[part]
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def _ddp(rank, n, bucket_mb):
    model = nn.parallel.DistributedDataParallel(_model(), bucket_cap_mb=bucket_mb)
    _train(model, _batches(n), part=slice(rank * BATCH, (rank + 1) * BATCH))
    # Plain lists: a tensor would cross the queue as shared memory of a process about to exit.
    return [p.detach().tolist() for p in model.module.parameters()]


@pytest.mark.parametrize("nranks,bucket_mb", [(2, 25), (3, 0.0005)])
def test_ddp_matches_one_process_on_the_joined_batches(nranks, bucket_mb):
    # A tiny bucket_cap_mb gives several buckets, hence several all-reduces per step.
    results = ranks.run(nranks, _ddp, bucket_mb)
    reference = _model()
    _train(reference, _batches(nranks))
    for params in results:
        for got, want in zip(params, reference.parameters()):
            torch.testing.assert_close(torch.tensor(got, dtype=torch.float64), want.detach(),
                                       rtol=1e-10, atol=1e-12)


def _sub_groups(rank, n):
    evens = dist.new_group([r for r in range(n) if r % 2 == 0], backend="braid")
    odds = dist.new_group([r for r in range(n) if r % 2 == 1], backend="braid")
    mine = evens if rank % 2 == 0 else odds
    members = [r for r in range(n) if r % 2 == rank % 2]
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, group=mine)
    assert t.item() == sum(members)
    # Group ranks are translated: broadcast from the last member, by its global rank.
    b = torch.tensor([rank])
    dist.broadcast(b, src=members[-1], group=mine)
    assert b.item() == members[-1]
    parts = [torch.zeros(1) for _ in members]
    dist.all_gather(parts, torch.tensor([float(rank)]), group=mine)
    assert [p.item() for p in parts] == members
    assert dist.get_world_size(mine) == len(members)
    # The world group still works after the sub-groups were made.
    w = torch.ones(1)
    dist.all_reduce(w)
    assert w.item() == n
    return dist.get_rank(mine)


def test_sub_groups():
    assert ranks.run(4, _sub_groups) == [0, 0, 1, 1]


TORCHRUN_SCRIPT = """
import torch, torch.distributed as dist, braid.torch
dist.init_process_group("braid")
rank, n = dist.get_rank(), dist.get_world_size()
t = torch.full((1000,), float(rank + 1))
dist.all_reduce(t)
assert (t == n * (n + 1) / 2).all(), t
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
model(torch.ones(3, 4)).sum().backward()
dist.barrier()
print(f"rank {rank} of {n} ok", flush=True)
dist.destroy_process_group()
"""


def test_torchrun_launches_the_backend(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TORCHRUN_SCRIPT)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    # Debian's torchrun 1.13 under Python 3.11 cannot parse its own default "--redirects 0"
    # (Python 3.11 no longer lists a Flag's zero member): name stderr (2) explicitly.
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
           "3", "--redirects", "2", "--tee", "2", str(script)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    for r in range(3):
        assert f"rank {r} of 3 ok" in done.stdout
