"""Shared by the examples: importing braid from this source tree, a small synthetic data set and a
logistic-regression model trained by full-batch gradient descent."""

import os
import sys
import time

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
try:
    import braid  # noqa: F401  (installed, or on PYTHONPATH)
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "bindings", "python"))
    import braid  # noqa: F401

NRANKS = 4
SAMPLES, FEATURES = 4096, 32
STEPS, LEARNING_RATE = 200, 0.5


def classification_data(seed=0):
    """Linearly separable-ish data: labels from a hidden weight vector plus noise."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((SAMPLES, FEATURES))
    hidden = rng.standard_normal(FEATURES)
    y = (x @ hidden + 0.5 * rng.standard_normal(SAMPLES) > 0).astype(np.float64)
    return x, y


def shard(array, rank, nranks):
    """Rank's contiguous block of rows (the data set divides evenly here)."""
    rows = len(array) // nranks
    return array[rank * rows:(rank + 1) * rows]


def logistic_gradient_sum(w, x, y):
    """Sum over the rows of x of the log-loss gradient (not the mean: sums add across ranks)."""
    p = 1.0 / (1.0 + np.exp(-(x @ w)))
    return x.T @ (p - y)


def log_loss(w, x, y):
    z = x @ w
    return float(np.mean(np.logaddexp(0.0, z) - y * z))


def train_single_process(x, y):
    """The reference: the same steps on one process."""
    w = np.zeros(FEATURES)
    for _ in range(STEPS):
        w -= LEARNING_RATE * logistic_gradient_sum(w, x, y) / SAMPLES
    return w


def check_close(name, got, want, rtol=1e-10):
    """Prints the largest difference and exits non-zero when got and want differ by more than
    rounding."""
    diff = float(np.max(np.abs(got - want)))
    ok = np.allclose(got, want, rtol=rtol, atol=rtol)
    print(f"{name}: max |difference| vs single process = {diff:.3e} "
          f"({'matches to rounding' if ok else 'MISMATCH'})")
    if not ok:
        sys.exit(1)


class Timer:
    """Wall time of a block, in seconds."""

    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start
        return False
