#!/usr/bin/env python3
"""torch.distributed on backend "braid" beside "gloo", in one run: all_reduce of CPU tensors
from 8 B to 64 MiB and the step time of DistributedDataParallel training with ~25 MB of
gradients, at each rank count.

    PYTHONPATH=bindings/python BRAID_LIBRARY=build/libbraid.so.0 \\
        /usr/bin/python3 perf/peers/torch_backends.py --np 2,4

Each (backend, rank count) runs in fresh local processes that meet through a FileStore. An
all_reduce size is timed over as many calls as fill --seconds (at least 5, after 2 warm-up
calls); a rank's time per call is the median of its calls (--stat median, the default: a stall
of a shared host then shows in neither backend) or its elapsed time / calls (--stat mean), and
the table takes the slowest rank. busbw is nccl-tests' (algbw x 2(n-1)/n). The backends take
turns, one run each per round, and each keeps its fastest of --rounds rounds, so that a slow
spell of a shared host hits both alike.
Every result is checked (all-reduce of rank + 1). Rank processes run one torch thread each and
are bound one to a CPU (--bind core, the default, as braid-perf and mpirun --bind-to core do),
both backends alike.
"""

import argparse
import datetime
import json
import multiprocessing
import os
import sys
import tempfile
import time

SIZES = [8, 64, 512, 4 << 10, 32 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20,
         64 << 20]
# The DDP model: 25.6 MB of float32 gradients, most of them in an embedding table, so that the
# step measures the gradients' all-reduce more than the host's matrix products (Debian's PyTorch
# uses a generic BLAS: 2.8 GFLOP/s on one core of the 2-vCPU VM).
VOCAB, WIDTH, BATCH, BAG = 49_000, 128, 32, 16


def _human(nbytes):
    for unit, shift in (("M", 20), ("K", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift}{unit}"
    return str(nbytes)


def _timed_all_reduce(torch, dist, nbytes, seconds, rank, n):
    t = torch.full((max(nbytes // 4, 1),), float(rank + 1))
    dist.all_reduce(t)
    if not bool((t == n * (n + 1) // 2).all()):
        raise RuntimeError(f"all_reduce of {nbytes} B gave a wrong sum")
    t.zero_()  # zeros stay zeros however many sums follow
    dist.all_reduce(t)
    # Calls that fill `seconds`, agreed by every rank (rank 0's estimate, broadcast).
    dist.barrier()
    start = time.perf_counter()
    dist.all_reduce(t)
    one = time.perf_counter() - start
    calls = torch.tensor([max(5, min(100000, int(seconds / max(one, 1e-7))))], dtype=torch.int64)
    dist.broadcast(calls, src=0)
    calls = int(calls.item())
    dist.barrier()
    times = []
    start = time.perf_counter()
    for _ in range(calls):
        begin = time.perf_counter()
        dist.all_reduce(t)
        times.append(time.perf_counter() - begin)
    mean = (time.perf_counter() - start) / calls
    return {"mean": mean, "median": sorted(times)[len(times) // 2]}


def _ddp_step_time(torch, dist, steps):
    import torch.nn as nn

    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(
        nn.EmbeddingBag(VOCAB, WIDTH, mode="mean"), nn.Linear(WIDTH, 256), nn.ReLU(),
        nn.Linear(256, 10)))
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    tokens = torch.randint(0, VOCAB, (BATCH, BAG))
    labels = torch.randint(0, 10, (BATCH,))
    times = []
    for step in range(steps + 2):
        dist.barrier()
        start = time.perf_counter()
        opt.zero_grad()
        nn.functional.cross_entropy(model(tokens), labels).backward()
        opt.step()
        if step >= 2:
            times.append(time.perf_counter() - start)
    return min(times), sorted(times)[len(times) // 2], grad_bytes


def _bind(rank):
    """Binds this rank process to the rank-th CPU it may use (modulo their number), as
    braid-perf's --bind core and mpirun --bind-to core do."""
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[rank % len(cpus)]})


def _rank_main(backend, rank, n, store, sizes, seconds, ddp_steps, bind, results):
    try:
        if bind:
            _bind(rank)
        os.environ["OMP_NUM_THREADS"] = "1"
        import torch
        import torch.distributed as dist

        import braid.torch  # noqa: F401 (registers "braid")

        torch.set_num_threads(1)
        dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=n,
                                timeout=datetime.timedelta(seconds=300))
        out = {"allreduce": {}}
        for nbytes in sizes:
            out["allreduce"][nbytes] = _timed_all_reduce(torch, dist, nbytes, seconds, rank, n)
        if ddp_steps:
            out["ddp"] = _ddp_step_time(torch, dist, ddp_steps)
        dist.barrier()
        dist.destroy_process_group()
        results.put((rank, out))
    except BaseException as err:  # reported to the parent
        import traceback

        results.put((rank, f"{type(err).__name__}: {err}\n{traceback.format_exc()}"))


def run_backend(backend, n, sizes, seconds, ddp_steps, bind, timeout):
    """One backend at n ranks: per size the slowest rank's time per call, and the DDP step."""
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="torch-backends-") as tmp:
        store = os.path.join(tmp, "store")
        procs = [ctx.Process(target=_rank_main,
                             args=(backend, r, n, store, sizes, seconds, ddp_steps, bind, results))
                 for r in range(n)]
        for p in procs:
            p.start()
        outs = {}
        try:
            for _ in range(n):
                rank, out = results.get(timeout=timeout)
                if isinstance(out, str):
                    raise RuntimeError(f"{backend} rank {rank} failed:\n{out}")
                outs[rank] = out
        finally:
            for p in procs:
                p.join(timeout=10)
                if p.is_alive():
                    p.kill()
    merged = {"allreduce": {s: {k: max(o["allreduce"][s][k] for o in outs.values())
                                for k in ("mean", "median")} for s in sizes}}
    if ddp_steps:
        merged["ddp"] = max(o["ddp"][0] for o in outs.values()), \
            max(o["ddp"][1] for o in outs.values()), outs[0]["ddp"][2]
    return merged


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--np", default="2,4", help="rank counts, comma-separated")
    parser.add_argument("--backends", default="braid,gloo")
    parser.add_argument("--max-bytes", type=int, default=64 << 20)
    parser.add_argument("--seconds", type=float, default=0.2,
                        help="time to fill per size and round (default 0.2)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--ddp-steps", type=int, default=5, help="0 skips DDP")
    parser.add_argument("--bind", choices=["core", "none"], default="core",
                        help="core (default): rank process p runs on the p-th CPU it may use, "
                        "for both backends; none: the scheduler places them")
    parser.add_argument("--stat", choices=["median", "mean"], default="median",
                        help="per size, the slowest rank's median call (default: robust to a "
                        "shared host's stalls) or its mean over the timed loop")
    parser.add_argument("--json", help="write every figure to this file")
    args = parser.parse_args()
    backends = args.backends.split(",")
    sizes = [s for s in SIZES if s <= args.max_bytes]
    report = {}
    for n in [int(x) for x in args.np.split(",")]:
        best = {b: None for b in backends}
        for round_ in range(args.rounds):
            for b in backends:
                got = run_backend(b, n, sizes, args.seconds,
                                  args.ddp_steps if round_ == 0 else 0, args.bind == "core",
                                  timeout=900)
                if best[b] is None:
                    best[b] = got
                else:
                    for s in sizes:
                        for k in ("mean", "median"):
                            best[b]["allreduce"][s][k] = min(best[b]["allreduce"][s][k],
                                                             got["allreduce"][s][k])
        report[n] = best
        factor = 2 * (n - 1) / n
        print(f"\n## all_reduce, {n} ranks, float32 CPU tensors ({args.stat} time per call us; "
              f"busbw GB/s; bind {args.bind})\n")
        head = " | ".join(f"{b} us | {b} GB/s" for b in backends)
        ratio = " | braid/gloo busbw" if backends[:2] == ["braid", "gloo"] else ""
        print(f"| size | {head}{ratio} |")
        print("| ---: " + "| ---: " * (2 * len(backends)) + ("| ---: " if ratio else "") + "|")
        for s in sizes:
            cells, bws = [], []
            for b in backends:
                t = best[b]["allreduce"][s][args.stat]
                bw = s / t * factor / 1e9
                bws.append(bw)
                cells.append(f"{t * 1e6:.1f} | {bw:.3f}")
            extra = f" | {bws[0] / bws[1]:.1f}x" if ratio else ""
            print(f"| {_human(s)} | " + " | ".join(cells) + extra + " |")
        if args.ddp_steps:
            print(f"\nDDP step, {n} ranks ({best[backends[0]]['ddp'][2] / 1e6:.1f} MB of "
                  f"gradients, batch {BATCH} per rank), fastest / median of "
                  f"{args.ddp_steps} steps, slowest rank:")
            for b in backends:
                fast, median, _ = best[b]["ddp"]
                print(f"- {b}: {fast * 1e3:.1f} / {median * 1e3:.1f} ms")
        sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({str(n): v for n, v in report.items()}, f, indent=1)


if __name__ == "__main__":
    main()
