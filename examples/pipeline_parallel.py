"""Model parallelism, pipeline style: a two-layer network split into two stages on two ranks.

Stage 0 holds the first layer (tanh(x W1 + b1)), stage 1 the second (h W2 + b2) and the loss.
Each step the batch is cut into micro-batches: stage 0 sends each micro-batch's activations to
stage 1 as soon as they are computed, stage 1 answers with the gradient of those activations,
and stage 0 back-propagates it into its layer (a GPipe-style schedule with point-to-point
send/recv). Gradients are accumulated over the micro-batches, so the result equals one
full-batch step on one process; the script checks the weights against that to rounding.

    python3 examples/pipeline_parallel.py
"""

import numpy as np

from common import Timer, braid, check_close

INPUT, HIDDEN = 16, 32
BATCH, MICRO_BATCHES = 256, 4
STEPS, LEARNING_RATE = 50, 0.05


def data(seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH, INPUT))
    y = np.sin(x[:, :1]) + 0.1 * rng.standard_normal((BATCH, 1))
    return x, y


def initial_weights(seed=2):
    rng = np.random.default_rng(seed)
    return {"w1": rng.standard_normal((INPUT, HIDDEN)) / np.sqrt(INPUT),
            "b1": np.zeros(HIDDEN),
            "w2": rng.standard_normal((HIDDEN, 1)) / np.sqrt(HIDDEN),
            "b2": np.zeros(1)}


def stage0(comm, x, p):
    """First layer: forward every micro-batch, then back-propagate the returned gradients."""
    micro = np.split(x, MICRO_BATCHES)
    for _ in range(STEPS):
        hidden = []
        for xm in micro:
            h = np.tanh(xm @ p["w1"] + p["b1"])
            comm.send(h, peer=1)  # activations to the next stage
            hidden.append(h)
        g_w1, g_b1 = np.zeros_like(p["w1"]), np.zeros_like(p["b1"])
        grad_h = np.empty((len(micro[0]), HIDDEN))
        for xm, h in zip(micro, hidden):
            comm.recv(grad_h, peer=1)  # dLoss/dh of this micro-batch
            g_pre = grad_h * (1.0 - h * h)
            g_w1 += xm.T @ g_pre
            g_b1 += g_pre.sum(axis=0)
        p["w1"] -= LEARNING_RATE * g_w1
        p["b1"] -= LEARNING_RATE * g_b1
    return p["w1"], p["b1"]


def stage1(comm, y, p):
    """Second layer and loss: answers each micro-batch with the gradient of its input."""
    micro_y = np.split(y, MICRO_BATCHES)
    h = np.empty((len(micro_y[0]), HIDDEN))
    for _ in range(STEPS):
        g_w2, g_b2 = np.zeros_like(p["w2"]), np.zeros_like(p["b2"])
        for ym in micro_y:
            comm.recv(h, peer=0)
            out = h @ p["w2"] + p["b2"]
            g_out = (out - ym) / BATCH  # d(0.5 * mean squared error)/d(out)
            g_w2 += h.T @ g_out
            g_b2 += g_out.sum(axis=0)
            comm.send(g_out @ p["w2"].T, peer=0)
        p["w2"] -= LEARNING_RATE * g_w2
        p["b2"] -= LEARNING_RATE * g_b2
    return p["w2"], p["b2"]


def run_stage(comm, x, y):
    p = initial_weights()
    with Timer() as t:
        weights = stage0(comm, x, p) if comm.rank == 0 else stage1(comm, y, p)
    return weights, t.seconds


def single_process(x, y):
    p = initial_weights()
    for _ in range(STEPS):
        h = np.tanh(x @ p["w1"] + p["b1"])
        g_out = (h @ p["w2"] + p["b2"] - y) / BATCH
        g_pre = (g_out @ p["w2"].T) * (1.0 - h * h)
        p["w2"] -= LEARNING_RATE * h.T @ g_out
        p["b2"] -= LEARNING_RATE * g_out.sum(axis=0)
        p["w1"] -= LEARNING_RATE * x.T @ g_pre
        p["b1"] -= LEARNING_RATE * g_pre.sum(axis=0)
    return p


def main():
    x, y = data()
    results = braid.launch(2, run_stage, x, y)
    (w1, b1), t0 = results[0]
    (w2, b2), t1 = results[1]
    ref = single_process(x, y)
    loss = 0.5 * np.mean((np.tanh(x @ w1 + b1) @ w2 + b2 - y) ** 2)
    print(f"pipeline, 2 stages x {MICRO_BATCHES} micro-batches, {STEPS} steps: loss {loss:.4f}, "
          f"{max(t0, t1) * 1e3:.1f} ms")
    for name, got in (("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2)):
        check_close(f"stage {0 if name[1] == '1' else 1} {name}", got, ref[name])


if __name__ == "__main__":
    main()
