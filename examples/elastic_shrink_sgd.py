"""Carrying on after a lost rank: data-parallel logistic regression on 4 local ranks, one of which
is killed (SIGKILL) part-way through training. The survivors' all-reduce fails naming it; they
shrink the communicator around it (braidCommShrink), agree on the last step every one of them
finished, split the whole data set among the three of them and finish the training. The script
checks that the weights match the same training run on 3 ranks from the start (and a single
process) to rounding: no step is lost or applied twice.

    python3 examples/elastic_shrink_sgd.py [--victim RANK]

The launcher here plays the part of an elastic agent (torchelastic, a Slurm step): it watches its
rank processes and tells the survivors which rank died.
"""

import argparse
import multiprocessing
import multiprocessing.connection
import os
import queue as queue_module
import signal
import sys
import time

import numpy as np

from common import (LEARNING_RATE, NRANKS, STEPS, braid, check_close, classification_data,
                    logistic_gradient_sum, train_single_process)

KILL_STEP = 60  # the victim dies as it reaches this step; the others wait on it in its all-reduce


def my_rows(array, rank, nranks):
    """Rank's contiguous block of rows; the blocks differ by at most one row when n does not
    divide the data."""
    return np.array_split(array, nranks)[rank]


def train(comm, x, y, victim=-1, lost_ranks=None, events=None):
    """Full-batch gradient descent, one all-reduce of the gradient per step. Returns the weights
    and a note of what happened."""
    rank = comm.rank
    x_mine, y_mine = my_rows(x, comm.rank, comm.size), my_rows(y, comm.rank, comm.size)
    w = np.zeros(x.shape[1])
    w_before_last_step = w.copy()
    step = 0
    note = ""
    while step < STEPS:
        if rank == victim and step == KILL_STEP:
            events["died_at"] = time.time()
            os.kill(os.getpid(), signal.SIGKILL)
        grad = logistic_gradient_sum(w, x_mine, y_mine)
        try:
            comm.all_reduce(grad, op=braid.SUM)
        except braid.BraidError as err:
            failed_at = time.time()
            if err.code != braid.Result.REMOTE_ERROR or lost_ranks is None:
                raise
            # Which ranks are gone: the launcher saw the process die (the message names it too).
            lost = lost_ranks.get(timeout=60)
            start = time.time()
            survivors = comm.shrink(lost)
            shrink_seconds = time.time() - start
            comm.abort()  # the failed communicator: freed without waiting for the dead rank
            comm = survivors
            # A survivor may have finished the step the others failed in (the dead rank had sent
            # it all it needed): everyone goes back to the last step all of them finished.
            done = np.array([step], np.int64)
            comm.all_reduce(done, op=braid.MIN)
            if int(done[0]) < step:
                w = w_before_last_step
                step = int(done[0])
            x_mine, y_mine = my_rows(x, comm.rank, comm.size), my_rows(y, comm.rank, comm.size)
            note = (f"old rank {rank}: lost rank(s) {lost} at step {step}, error "
                    f"{(failed_at - events['died_at']) * 1e3:.0f} ms after the death "
                    f"({err.message.splitlines()[0][:90]}...), shrunk to rank {comm.rank} of "
                    f"{comm.size} in {shrink_seconds * 1e3:.0f} ms")
            continue
        w_before_last_step = w.copy()
        w -= LEARNING_RATE * grad / len(x)
        step += 1
    if comm is not None:
        comm.destroy()
    return w, note


def rank_main(rank, uid, x, y, victim, lost_ranks, events, results):
    try:
        comm = braid.Communicator(NRANKS, uid, rank)
        results.put((rank, True, train(comm, x, y, victim, lost_ranks, events)))
    except BaseException as err:  # reported to the launcher
        results.put((rank, False, repr(err)))


def run_and_lose(x, y, victim):
    """NRANKS rank processes, rank `victim` killed at KILL_STEP; the survivors' results."""
    ctx = multiprocessing.get_context("fork")
    manager = ctx.Manager()
    events = manager.dict()
    results = ctx.Queue()
    lost_queues = [ctx.Queue() for _ in range(NRANKS)]
    uid = braid.UniqueId.new()
    procs = [ctx.Process(target=rank_main, name=f"braid-rank-{r}",
                         args=(r, uid, x, y, victim, lost_queues[r], events, results))
             for r in range(NRANKS)]
    for p in procs:
        p.start()
    outcomes = {}
    dead = []
    deadline = time.monotonic() + 120
    while len(outcomes) < NRANKS - len(dead) and time.monotonic() < deadline:
        # Tell the survivors of every rank process that died without a result.
        for r, p in enumerate(procs):
            if r not in dead and r not in outcomes and not p.is_alive() and p.exitcode != 0:
                dead.append(r)
                for q in lost_queues:
                    q.put(list(dead))
        try:
            r, ok, value = results.get(timeout=0.05)
            outcomes[r] = (ok, value)
        except queue_module.Empty:
            pass
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.terminate()
    manager.shutdown()
    if dead != [victim]:
        sys.exit(f"expected rank {victim} to die, lost {dead}")
    for r in range(NRANKS):
        if r == victim:
            continue
        ok, value = outcomes.get(r, (False, "no result within 120 s"))
        if not ok:
            sys.exit(f"rank {r} failed: {value}")
    return [outcomes[r][1] for r in range(NRANKS) if r != victim]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--victim", type=int, default=2, help="the rank that is killed")
    victim = parser.parse_args().victim
    x, y = classification_data()
    survivors = run_and_lose(x, y, victim)
    for _, note in survivors:
        print(note)
    weights = [w for w, _ in survivors]
    for w in weights[1:]:
        assert np.array_equal(w, weights[0]), "survivors disagree on the weights"
    # The same training on NRANKS - 1 ranks from the start, and in one process.
    at_n_minus_1 = braid.launch(NRANKS - 1, train, x, y, timeout=120)[0][0]
    print(f"{NRANKS} ranks, rank {victim} killed at step {KILL_STEP}, {NRANKS - 1} finished "
          f"{STEPS} steps")
    diff = float(np.max(np.abs(weights[0] - at_n_minus_1)))
    same = np.allclose(weights[0], at_n_minus_1, rtol=1e-10, atol=1e-10)
    print(f"weights: max |difference| vs the same run on {NRANKS - 1} ranks = {diff:.3e} "
          f"({'matches to rounding' if same else 'MISMATCH'})")
    if not same:
        sys.exit(1)
    check_close("weights vs a single process", weights[0], train_single_process(x, y))


if __name__ == "__main__":
    main()
