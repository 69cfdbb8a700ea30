"""Parameter server beside all-reduce: the same data-parallel logistic regression as
data_parallel_sgd.py, but the gradients are reduced to one rank (the "server"), which updates the
weights and broadcasts them back. Both variants run here and print their measured training time;
both are checked against a single-process run.

A reduce plus a broadcast moves the data through one rank; an all-reduce spreads that work over
all of them, which is why frameworks prefer it as models grow.

    python3 examples/parameter_server_sgd.py
"""

import numpy as np

from common import (LEARNING_RATE, NRANKS, SAMPLES, STEPS, Timer, braid, check_close,
                    classification_data, logistic_gradient_sum, shard, train_single_process)
from data_parallel_sgd import train as train_all_reduce

SERVER = 0


def train_parameter_server(comm, x, y):
    x_local, y_local = shard(x, comm.rank, comm.size), shard(y, comm.rank, comm.size)
    w = np.zeros(x.shape[1])
    grad = np.empty_like(w)
    comm.all_reduce(np.zeros(1))  # warm-up
    with Timer() as t:
        for _ in range(STEPS):
            grad[:] = logistic_gradient_sum(w, x_local, y_local)
            comm.reduce(grad, op=braid.SUM, root=SERVER)  # the server's grad becomes the sum
            if comm.rank == SERVER:
                w -= LEARNING_RATE * grad / SAMPLES
            comm.broadcast(w, root=SERVER)  # everyone continues from the server's weights
    return w, t.seconds


def main():
    x, y = classification_data()
    reference = train_single_process(x, y)
    timings = {}
    for name, fn in (("parameter server (reduce + broadcast)", train_parameter_server),
                     ("all-reduce", train_all_reduce)):
        results = braid.launch(NRANKS, fn, x, y)
        for w, _ in results[1:]:
            assert np.array_equal(w, results[0][0]), f"{name}: ranks disagree on the weights"
        check_close(f"{name} weights", results[0][0], reference)
        timings[name] = max(s for _, s in results)
    print(f"{NRANKS} ranks, {STEPS} steps of {x.shape[1]} float64 gradients:")
    for name, seconds in timings.items():
        print(f"  {name:40s} {seconds * 1e3:8.1f} ms  ({seconds / STEPS * 1e6:.0f} us/step)")


if __name__ == "__main__":
    main()
