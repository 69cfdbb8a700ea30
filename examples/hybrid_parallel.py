"""Hybrid parallelism on a 2 x 2 grid of 4 ranks: data parallel x model (tensor) parallel.

    rank = 2 * dp + mp        dp: which half of the data,  mp: which half of the model

braidCommSplit makes two kinds of group from the world communicator:
  - model-parallel groups {0,1} and {2,3} (same dp): the ranks that share one data shard and
    hold the two halves of the network; the forward pass all-reduces their partial outputs;
  - data-parallel groups {0,2} and {1,3} (same mp): the ranks that hold the same half of the
    network on different data; the gradients of that half are all-reduced among them.

The network is out = tanh(x W1) W2 with W1 split by columns and W2 by rows over the mp group.
The script checks the trained weights against one process training the whole network on all
the data.

    python3 examples/hybrid_parallel.py
"""

import numpy as np

from common import Timer, braid, check_close

DP, MP = 2, 2
SAMPLES, INPUT, HIDDEN, OUTPUT = 512, 16, 32, 4
STEPS, LEARNING_RATE = 50, 0.1


def problem(seed=4):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((SAMPLES, INPUT))
    y = np.tanh(x @ rng.standard_normal((INPUT, OUTPUT)))
    return {"x": x, "y": y,
            "w1": rng.standard_normal((INPUT, HIDDEN)) / np.sqrt(INPUT),
            "w2": rng.standard_normal((HIDDEN, OUTPUT)) / np.sqrt(HIDDEN)}


def train(world, p):
    dp, mp = divmod(world.rank, MP)
    mp_group = world.split(color=dp, key=mp)  # same data shard, different model halves
    dp_group = world.split(color=mp, key=dp)  # same model half, different data shards
    assert (mp_group.size, mp_group.rank, dp_group.size, dp_group.rank) == (MP, mp, DP, dp)
    rows = slice(dp * SAMPLES // DP, (dp + 1) * SAMPLES // DP)
    hid = slice(mp * HIDDEN // MP, (mp + 1) * HIDDEN // MP)
    x, y = p["x"][rows], p["y"][rows]
    w1, w2 = p["w1"][:, hid].copy(), p["w2"][hid].copy()
    with mp_group, dp_group, Timer() as t:
        for _ in range(STEPS):
            h = np.tanh(x @ w1)
            out = mp_group.all_reduce(h @ w2)  # the two halves' partial outputs summed
            d_out = (out - y) / SAMPLES  # global batch: the mean is over every sample
            dw2 = h.T @ d_out
            dw1 = x.T @ ((d_out @ w2.T) * (1.0 - h * h))
            dp_group.all_reduce(dw1)  # sum over the data shards
            dp_group.all_reduce(dw2)
            w1 -= LEARNING_RATE * dw1
            w2 -= LEARNING_RATE * dw2
    return {"dp": dp, "mp": mp, "w1": w1, "w2": w2, "seconds": t.seconds}


def single_process(p):
    w1, w2, x = p["w1"].copy(), p["w2"].copy(), p["x"]
    for _ in range(STEPS):
        h = np.tanh(x @ w1)
        d_out = (h @ w2 - p["y"]) / SAMPLES
        dw2 = h.T @ d_out
        dw1 = x.T @ ((d_out @ w2.T) * (1.0 - h * h))
        w1 -= LEARNING_RATE * dw1
        w2 -= LEARNING_RATE * dw2
    return w1, w2


def main():
    p = problem()
    results = braid.launch(DP * MP, train, p)
    ref_w1, ref_w2 = single_process(p)
    print(f"hybrid {DP} (data) x {MP} (model) grid, {STEPS} steps: "
          f"{max(r['seconds'] for r in results) * 1e3:.1f} ms")
    for dp in range(DP):
        half = [r for r in results if r["dp"] == dp]
        w1 = np.concatenate([r["w1"] for r in half], axis=1)
        w2 = np.concatenate([r["w2"] for r in half])
        check_close(f"data-parallel replica {dp}: W1", w1, ref_w1)
        check_close(f"data-parallel replica {dp}: W2", w2, ref_w2)


if __name__ == "__main__":
    main()
