"""Runs a function on n local processes that joined one torch.distributed group on backend
"braid", with a deadline: a rank that hangs fails the test instead of the suite."""

import multiprocessing
import os
import queue as queue_module
import tempfile
import time
import traceback

import torch.distributed as dist

import braid.torch  # noqa: F401 (registers the backend)


class RankFailures(AssertionError):
    """Ranks that raised, died or ran past the deadline; `failures` maps rank -> text."""

    def __init__(self, failures, values):
        self.failures = dict(sorted(failures.items()))
        self.values = values
        text = "\n".join(f"--- rank {r} ---\n{t}" for r, t in self.failures.items())
        super().__init__(f"{len(self.failures)} rank(s) failed\n{text}")


def _report(results, item):
    """Puts item and waits until it is written: os._exit would drop what the queue's feeder
    thread has not sent yet."""
    results.put(item)
    results.close()
    results.join_thread()


def _rank_main(rank, nranks, store_path, fn, args, results, timeout_s):
    try:
        import datetime
        device = os.environ.get("BRAID_TORCH_TEST_DEVICE", "cpu")
        if device != "cpu":
            # The same tests on device tensors (PyTorch 2.x; every rank on the same GPU): what
            # they make is made there, and the backend enqueues on the current stream.
            import torch
            torch.set_default_device(device)
        dist.init_process_group("braid", init_method=f"file://{store_path}", rank=rank,
                                world_size=nranks,
                                timeout=datetime.timedelta(seconds=timeout_s))
        value = fn(rank, nranks, *args)
        dist.destroy_process_group()
        _report(results, (rank, True, value))
    except BaseException as err:  # reported to the parent
        _report(results, (rank, False, f"{type(err).__name__}: {err}\n{traceback.format_exc()}"))
    # Leave at once, without the interpreter's exit handlers (torch's and Braid's threads).
    os._exit(0)


def run(nranks, fn, *args, deadline=60.0, group_timeout=30, allow_failures=False):
    """fn(rank, nranks, *args) on nranks forked processes; returns the values in rank order
    (plain Python values: tensors would cross the queue as shared memory of exiting processes).
    Raises RankFailures when a rank fails (with allow_failures: returns (values, failures))."""
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="braid-torch-") as tmp:
        store = os.path.join(tmp, "store")
        procs = [ctx.Process(target=_rank_main,
                             args=(r, nranks, store, fn, args, results, group_timeout))
                 for r in range(nranks)]
        for p in procs:
            p.start()
        values, failures = {}, {}
        end = time.monotonic() + deadline
        while len(values) + len(failures) < nranks:
            left = end - time.monotonic()
            if left <= 0:
                for r in range(nranks):
                    if r not in values and r not in failures:
                        failures[r] = f"no result within {deadline} s (hung?)"
                break
            try:
                rank, ok, value = results.get(timeout=min(left, 0.2))
            except queue_module.Empty:
                for r, p in enumerate(procs):
                    if r not in values and r not in failures and p.exitcode is not None \
                            and results.empty():
                        failures[r] = f"exited with code {p.exitcode} without a result"
                continue
            (values if ok else failures)[rank] = value
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
    if allow_failures:
        return values, failures
    if failures:
        raise RankFailures(failures, values)
    return [values[r] for r in range(nranks)]
