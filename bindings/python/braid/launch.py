"""braid.launch: run a function on n local ranks, one process each."""

import multiprocessing
import queue as queue_module
import time
import traceback

from .communicator import Communicator, UniqueId


# How long the other ranks get to finish once one has failed.
_GRACE_SECONDS = 10.0


class LaunchError(RuntimeError):
    """One or more ranks failed; `failures` maps rank -> the traceback (or reason) text."""

    def __init__(self, failures):
        self.failures = dict(sorted(failures.items()))
        lines = [f"{len(self.failures)} rank(s) failed"]
        for rank, text in self.failures.items():
            lines.append(f"--- rank {rank} ---\n{text.rstrip()}")
        super().__init__("\n".join(lines))


def _rank_main(rank, nranks, fn, args, kwargs, config, id_queue, results):
    try:
        if rank == 0:
            # The id (and its rendezvous listener) lives in rank 0, which outlives the init.
            uid = UniqueId.new()
            for _ in range(nranks - 1):
                id_queue.put(bytes(uid))
        else:
            uid = UniqueId(id_queue.get())
        with Communicator(nranks, uid, rank, config=config) as comm:
            value = fn(comm, *args, **kwargs)
        results.put((rank, True, value))
    except BaseException:  # reported to the parent, which raises LaunchError
        results.put((rank, False, traceback.format_exc()))


def launch(nranks, fn, *args, method="fork", timeout=300.0, config=None, **kwargs):
    """Runs fn(comm, *args, **kwargs) in nranks new local processes, each holding rank i of one
    fresh Communicator, and returns the n return values in rank order (they must be picklable).

    method: "fork" (fast; fn may be any callable) or "spawn"/"forkserver" (fn must be importable
    by name). timeout: seconds for the whole run; the ranks are then terminated. config: Braid
    settings for the communicator, as for Communicator. Raises LaunchError when a rank raises,
    dies or times out.
    """
    if nranks < 1:
        raise ValueError("nranks must be at least 1")
    ctx = multiprocessing.get_context(method)
    id_queue = ctx.Queue()
    results = ctx.Queue()
    procs = [ctx.Process(target=_rank_main, name=f"braid-rank-{r}",
                         args=(r, nranks, fn, args, kwargs, config, id_queue, results))
             for r in range(nranks)]
    for p in procs:
        p.start()
    values = {}
    failures = {}
    deadline = time.monotonic() + timeout
    reason = f"no result within {timeout} s"
    try:
        while len(values) + len(failures) < nranks:
            if failures and deadline > time.monotonic() + _GRACE_SECONDS:
                # Peers of a failed rank may wait on it until Braid's own timeout: stop them.
                deadline = time.monotonic() + _GRACE_SECONDS
                reason = "terminated after another rank failed"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                for r in range(nranks):
                    if r not in values and r not in failures:
                        failures[r] = reason
                break
            try:
                rank, ok, value = results.get(timeout=min(remaining, 0.2))
            except queue_module.Empty:
                # A rank that died without reporting (killed, crashed in C) never will.
                for r, p in enumerate(procs):
                    if (r not in values and r not in failures and not p.is_alive()
                            and p.exitcode not in (0, None)):
                        failures[r] = f"process exited with code {p.exitcode} without a result"
                continue
            if ok:
                values[rank] = value
            else:
                failures[rank] = value
    finally:
        for p in procs:
            p.join(timeout=5 if not failures else 1)
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
        id_queue.close()
        results.close()
    if failures:
        raise LaunchError(failures)
    return [values[r] for r in range(nranks)]
