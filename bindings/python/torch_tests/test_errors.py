"""Bad input on backend "braid" ends in a Python exception on every rank, never a hang."""

import os
import time

import pytest
import torch
import torch.distributed as dist

import braid
import ranks


def _raises(fn):
    """The text of the exception fn() raises (AssertionError when it does not)."""
    try:
        fn()
    except Exception as err:  # noqa: BLE001 (the point is which one)
        return f"{type(err).__name__}: {err}"
    raise AssertionError("no exception")


def _unsupported(rank, n):
    messages = [
        _raises(lambda: dist.all_reduce(torch.ones(2, dtype=torch.int32), op=dist.ReduceOp.BAND)),
        _raises(lambda: dist.all_reduce(torch.ones(2, dtype=torch.complex64),
                                        op=dist.ReduceOp.MAX)),
        _raises(lambda: dist.all_reduce(torch.ones(2).to_sparse())),
        _raises(lambda: dist.all_gather_into_tensor(torch.zeros(3), torch.ones(2))),
        _raises(lambda: dist.all_to_all_single(torch.zeros(4), torch.ones(4),
                                               input_split_sizes=[3, 3])),
        _raises(lambda: dist.recv(torch.zeros(1))),
    ]
    # None of it reached the communicator: it still works.
    t = torch.ones(1)
    dist.all_reduce(t)
    assert t.item() == n
    return messages


def test_unsupported_input_is_refused_on_every_rank():
    for messages in ranks.run(2, _unsupported):
        band, complex_max, sparse, gather, split, anysource = messages
        assert "BAND is not supported" in band
        assert "complex" in complex_max  # torch refuses it before the backend could
        assert "dense" in sparse
        assert "needs 2 x 2" in gather
        assert "split sizes" in split
        assert "any source" in anysource


def _mismatched(rank, n):
    # Rank 0 reduces 4 elements, the others 5.
    first = _raises(lambda: dist.all_reduce(torch.ones(4 if rank == 0 else 5)))
    # The communicator is unusable afterwards; later calls fail at once.
    later = _raises(lambda: dist.broadcast(torch.ones(1), src=0))
    return first, later


@pytest.mark.parametrize("nranks", [2, 3])
def test_mismatched_shapes_fail_on_every_rank(nranks):
    start = time.monotonic()
    for first, later in ranks.run(nranks, _mismatched, deadline=60, group_timeout=20):
        assert "BraidError" in first and ("INVALID_USAGE" in first or "REMOTE_ERROR" in first)
        assert "unusable" in later
    # Found by Braid's call check, not by the 20 s timeout.
    assert time.monotonic() - start < 15


def _dead_rank(rank, n):
    if rank == n - 1:
        os._exit(3)  # dies without a word, before the collective
    time.sleep(0.2)
    return _raises(lambda: dist.all_reduce(torch.ones(1000)))


def test_a_dead_rank_fails_the_survivors():
    start = time.monotonic()
    values, failures = ranks.run(3, _dead_rank, deadline=60, group_timeout=20,
                                 allow_failures=True)
    assert sorted(values) == [0, 1] and list(failures) == [2]
    for text in values.values():
        # Found dead (exited, or a zombie not reaped yet), not by the 20 s timeout.
        assert "BraidError" in text and "REMOTE_ERROR" in text and "exited" in text, text
    assert time.monotonic() - start < 15


def test_errors_are_runtime_errors():
    # What torch users catch.
    assert issubclass(braid.BraidError, RuntimeError)
