"""Data parallelism: logistic regression trained on 4 local ranks, each holding a quarter of the
data. Every step each rank computes the gradient of its shard and one all-reduce sums them, so
every rank applies the same update as a single process seeing all the data. The script checks
that the weights match a single-process run to rounding.

    python3 examples/data_parallel_sgd.py
"""

import numpy as np

from common import (LEARNING_RATE, NRANKS, SAMPLES, STEPS, Timer, braid, check_close,
                    classification_data, log_loss, logistic_gradient_sum, shard,
                    train_single_process)


def train(comm, x, y):
    x_local, y_local = shard(x, comm.rank, comm.size), shard(y, comm.rank, comm.size)
    w = np.zeros(x.shape[1])
    grad = np.empty_like(w)
    comm.all_reduce(np.zeros(1))  # warm-up: connections are made before the clock starts
    with Timer() as t:
        for _ in range(STEPS):
            grad[:] = logistic_gradient_sum(w, x_local, y_local)
            comm.all_reduce(grad, op=braid.SUM)  # in place: the sum over every shard
            w -= LEARNING_RATE * grad / SAMPLES
    return w, t.seconds


def main():
    x, y = classification_data()
    results = braid.launch(NRANKS, train, x, y)
    weights = [w for w, _ in results]
    for w in weights[1:]:
        assert np.array_equal(w, weights[0]), "ranks disagree on the weights"
    reference = train_single_process(x, y)
    print(f"data parallel, {NRANKS} ranks, {STEPS} steps: loss {log_loss(weights[0], x, y):.4f}, "
          f"all-reduce training took {max(s for _, s in results) * 1e3:.1f} ms")
    check_close("all-reduce weights", weights[0], reference)


if __name__ == "__main__":
    main()
