"""Model parallelism, tensor style: one MLP layer y = tanh(x W1) W2 split over 4 ranks.

W1 is split by columns and W2 by rows, so rank r computes its slice of the hidden layer and a
partial output that the other ranks' partials complete by summation. Activations travel sharded
by tokens (rows), as in sequence-parallel transformer layers:

  forward:  x = all_gather(x_r)          every rank needs every token for its W1 columns
            h_r = tanh(x W1_r)           [tokens x hidden/4]
            y_r = reduce_scatter(h_r W2_r)   sum of the partial outputs, each rank keeping its
                                             own tokens
  backward: dy = all_gather(dy_r), then dW2_r = h_r^T dy, dh_r = dy W2_r^T (1 - h_r^2),
            dW1_r = x^T dh_r and dx_r = reduce_scatter(dh_r W1_r^T)

The script trains the layer for a few steps and checks the output, every gradient and the final
weights against the unsplit layer on one process.

    python3 examples/tensor_parallel.py
"""

import numpy as np

from common import Timer, braid, check_close

RANKS = 4
TOKENS, MODEL, HIDDEN = 64, 16, 64
STEPS, LEARNING_RATE = 20, 0.1


def problem(seed=3):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((TOKENS, MODEL)),
            "target": rng.standard_normal((TOKENS, MODEL)),
            "w1": rng.standard_normal((MODEL, HIDDEN)) / np.sqrt(MODEL),
            "w2": rng.standard_normal((HIDDEN, MODEL)) / np.sqrt(HIDDEN)}


def layer_step(comm, p):
    r, n = comm.rank, comm.size
    tok = slice(r * TOKENS // n, (r + 1) * TOKENS // n)  # this rank's tokens
    hid = slice(r * HIDDEN // n, (r + 1) * HIDDEN // n)  # this rank's hidden units
    x_r, target_r = p["x"][tok].copy(), p["target"][tok]
    w1_r, w2_r = p["w1"][:, hid].copy(), p["w2"][hid].copy()  # only the shards are kept
    first = {}
    with Timer() as t:
        for step in range(STEPS):
            x = comm.all_gather(x_r, np.empty((TOKENS, MODEL)))
            h_r = np.tanh(x @ w1_r)
            y_r = comm.reduce_scatter(h_r @ w2_r, np.empty_like(x_r))
            dy_r = (y_r - target_r) / TOKENS  # d(0.5 * mean over tokens of |y - target|^2)/dy
            dy = comm.all_gather(dy_r, np.empty((TOKENS, MODEL)))
            dw2_r = h_r.T @ dy
            dh_r = (dy @ w2_r.T) * (1.0 - h_r * h_r)
            dw1_r = x.T @ dh_r
            dx_r = comm.reduce_scatter(dh_r @ w1_r.T, np.empty_like(x_r))
            if step == 0:
                first = {"y": y_r, "dw1": dw1_r, "dw2": dw2_r, "dx": dx_r}
            w1_r -= LEARNING_RATE * dw1_r
            w2_r -= LEARNING_RATE * dw2_r
    return {"first": first, "w1": w1_r, "w2": w2_r, "seconds": t.seconds}


def single_process(p):
    w1, w2, x = p["w1"].copy(), p["w2"].copy(), p["x"]
    first = {}
    for step in range(STEPS):
        h = np.tanh(x @ w1)
        y = h @ w2
        dy = (y - p["target"]) / TOKENS
        dw2 = h.T @ dy
        dh = (dy @ w2.T) * (1.0 - h * h)
        dw1 = x.T @ dh
        if step == 0:
            first = {"y": y, "dw1": dw1, "dw2": dw2, "dx": dh @ w1.T}
        w1 -= LEARNING_RATE * dw1
        w2 -= LEARNING_RATE * dw2
    return first, w1, w2


def main():
    p = problem()
    results = braid.launch(RANKS, layer_step, p)
    ref_first, ref_w1, ref_w2 = single_process(p)
    # Reassemble: outputs and dx by tokens (rows), W1 and dW1 by columns, W2 and dW2 by rows.
    y = np.concatenate([res["first"]["y"] for res in results])
    dx = np.concatenate([res["first"]["dx"] for res in results])
    dw1 = np.concatenate([res["first"]["dw1"] for res in results], axis=1)
    dw2 = np.concatenate([res["first"]["dw2"] for res in results])
    w1 = np.concatenate([res["w1"] for res in results], axis=1)
    w2 = np.concatenate([res["w2"] for res in results])
    print(f"tensor parallel layer on {RANKS} ranks, {STEPS} steps "
          f"(all-gather + reduce-scatter each way): "
          f"{max(res['seconds'] for res in results) * 1e3:.1f} ms")
    check_close("output y", y, ref_first["y"])
    check_close("gradient dx", dx, ref_first["dx"])
    check_close("gradient dW1", dw1, ref_first["dw1"])
    check_close("gradient dW2", dw2, ref_first["dw2"])
    check_close("trained W1", w1, ref_w1)
    check_close("trained W2", w2, ref_w2)


if __name__ == "__main__":
    main()
