"""Every collective on 4 (and 3) local ranks through braid.launch, checked against NumPy."""
import multiprocessing
import pickle
import threading

import numpy as np
import pytest

import braid

DTYPES = [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64, np.float16, np.float32,
          np.float64]


def _inputs(rank, n, dtype):
    return ((np.arange(n) + rank) % 3 + 1).astype(dtype)


def _reductions(comm):
    n, size = 37, comm.size
    allin = [_inputs(r, n, np.float64) for r in range(size)]
    want = {
        "sum": np.sum(allin, axis=0), "prod": np.prod(allin, axis=0),
        "max": np.max(allin, axis=0), "min": np.min(allin, axis=0),
    }
    for dtype in DTYPES:
        for op, expected in want.items():
            x = _inputs(comm.rank, n, dtype)
            out = np.empty_like(x)
            assert comm.all_reduce(x, out, op=op) is out
            np.testing.assert_array_equal(out, expected.astype(dtype), err_msg=f"{dtype} {op}")
            comm.all_reduce(x, op=op)  # in place
            np.testing.assert_array_equal(x, out)
        x = _inputs(comm.rank, n, dtype)
        comm.all_reduce(x, op=braid.AVG)
        mean = np.sum(allin, axis=0) / size
        expected = np.floor(mean) if np.issubdtype(dtype, np.integer) else mean
        np.testing.assert_allclose(x.astype(np.float64), expected, rtol=1e-3)
    return True


def _data_movement(comm):
    r, size = comm.rank, comm.size
    # broadcast, in place and out of place
    buf = np.full(10, r, np.int32)
    comm.broadcast(buf, root=size - 1)
    assert (buf == size - 1).all()
    out = np.zeros(10, np.int32)
    comm.broadcast(np.full(10, 7 * r, np.int32), root=1, recvbuf=out)
    assert (out == 7).all()
    # reduce to root 2
    res = comm.reduce(np.full(5, r + 1, np.int64), np.zeros(5, np.int64), op="sum", root=2)
    if r == 2:
        assert (res == size * (size + 1) // 2).all()
    else:
        assert res is None
    # all_gather and reduce_scatter
    gathered = comm.all_gather(np.full(3, r, np.float32), np.zeros(3 * size, np.float32))
    np.testing.assert_array_equal(gathered, np.repeat(np.arange(size), 3))
    send = np.arange(4 * size, dtype=np.float64)
    part = comm.reduce_scatter(send, np.zeros(4), op=braid.SUM)
    np.testing.assert_array_equal(part, size * np.arange(4 * r, 4 * r + 4))
    # all_to_all: block p carries 100 r + p
    a2a = comm.all_to_all(np.repeat(100 * r + np.arange(size), 2).astype(np.int32),
                          np.zeros(2 * size, np.int32))
    np.testing.assert_array_equal(a2a, np.repeat(100 * np.arange(size) + r, 2))
    # send/recv around a ring in a group
    right, left = (r + 1) % size, (r - 1) % size
    got = np.zeros(6, np.float32)
    with braid.group():
        comm.send(np.full(6, r, np.float32), right)
        comm.recv(got, left)
    assert (got == left).all()
    return r


def _split(comm):
    # 2 colors by parity, reversed by key; sub-communicator all-reduce of old ranks.
    sub = comm.split(comm.rank % 2, key=-comm.rank)
    with sub:
        members = [q for q in range(comm.size) if q % 2 == comm.rank % 2]
        assert sub.size == len(members)
        assert sub.rank == sorted(members, reverse=True).index(comm.rank)
        total = sub.all_reduce(np.array([comm.rank], np.int64))
        assert total[0] == sum(members)
    # Rank 0 opts out (color None); the others form one communicator without it.
    rest = comm.split(None if comm.rank == 0 else 0)
    if comm.rank == 0:
        assert rest is None
    else:
        with rest:
            assert rest.size == comm.size - 1 and rest.rank == comm.rank - 1
    return sub.size


def _errors(comm):
    with pytest.raises(braid.BraidError) as err:
        comm.broadcast(np.zeros(4, np.float32), root=comm.size)
    assert err.value.code == braid.Result.INVALID_ARGUMENT
    assert "root" in err.value.message
    with pytest.raises(ValueError, match="recvbuf needs"):
        comm.all_gather(np.zeros(3, np.float32), np.zeros(3, np.float32))
    with pytest.raises(TypeError, match="element type"):
        comm.all_reduce(np.zeros(3, np.float32), np.zeros(3, np.float64))
    with pytest.raises(ValueError, match="unknown reduction"):
        comm.all_reduce(np.zeros(3, np.float32), op="median")
    assert comm.async_error() == braid.Result.SUCCESS
    return True


@pytest.mark.parametrize("nranks", [4, 3])
def test_reductions(nranks):
    assert braid.launch(nranks, _reductions, timeout=120) == [True] * nranks


def test_data_movement():
    assert braid.launch(4, _data_movement, timeout=120) == [0, 1, 2, 3]


def _shared_arrays(comm):
    # Large enough to be lent: every rank reads its peers' inputs where they lie.
    x = braid.shared_empty((3, 100000), np.float32)
    x[:] = comm.rank + 1
    out = braid.shared_empty(x.shape, np.float32)
    comm.all_reduce(x, out)
    assert (out == comm.size * (comm.size + 1) / 2).all()
    assert (x == comm.rank + 1).all()  # the input as it was
    gathered = braid.shared_empty(x.size * comm.size, np.float32)
    comm.all_gather(x, gathered)
    np.testing.assert_array_equal(gathered, np.repeat(np.arange(comm.size) + 1.0, x.size))
    return out.ctypes.data % 4096


def test_shared_arrays_work_in_collectives():
    assert braid.launch(3, _shared_arrays, timeout=120) == [0, 0, 0]


def test_shared_empty_shapes_and_errors():
    a = braid.shared_empty(5, np.int64)
    assert a.shape == (5,) and a.dtype == np.int64 and (a == 0).all()
    assert braid.shared_empty((2, 0)).size == 0
    with pytest.raises(ValueError, match="negative"):
        braid.shared_empty((-1, 2))


def test_split():
    assert braid.launch(4, _split, timeout=120) == [2, 2, 2, 2]


def _shrink(comm):
    # Rank 1 leaves; the other three carry on in their old order.
    if comm.rank == 1:
        return None
    with comm.shrink([1]) as rest:
        total = rest.all_reduce(np.full(4, comm.rank, np.int64))
        return rest.rank, rest.size, int(total[0])


def test_shrink():
    assert braid.launch(4, _shrink, timeout=120) == [(0, 3, 5), None, (1, 3, 5), (2, 3, 5)]


def test_errors_carry_braid_messages():
    assert braid.launch(2, _errors, timeout=120) == [True, True]


def test_config_reaches_the_library():
    # A malformed setting is refused at init with Braid's message naming the variable.
    with pytest.raises(braid.BraidError) as err:
        braid.Communicator(1, braid.UniqueId.new(), 0, config={"BRAID_NSLOTS": "1"})
    assert err.value.code == braid.Result.INVALID_ARGUMENT
    assert "BRAID_NSLOTS" in err.value.message
    ok = braid.launch(2, lambda c: int(c.all_reduce(np.ones(3, np.int32))[0]),
                      config={"BRAID_ALGO": "allreduce:rhd"}, timeout=60)
    assert ok == [2, 2]


def _fails_on_rank_one(comm):
    if comm.rank == 1:
        raise KeyError("rank one gives up")
    return comm.rank


def test_launch_reports_a_failing_rank():
    with pytest.raises(braid.LaunchError) as err:
        braid.launch(2, _fails_on_rank_one, timeout=60)
    assert 1 in err.value.failures
    assert "rank one gives up" in err.value.failures[1]


def test_unique_id_pickles():
    uid = braid.UniqueId.new()
    copy = pickle.loads(pickle.dumps(uid))
    assert copy == uid and bytes(copy) == bytes(uid)
    assert "sha256" in repr(uid) and bytes(uid).hex() not in repr(uid)
    with pytest.raises(ValueError):
        braid.UniqueId(b"short")


def _spawned_rank(uid, rank, nranks, results):
    # Runs in a fresh interpreter: the id arrived pickled.
    with braid.Communicator(nranks, uid, rank) as comm:
        results.put((rank, int(comm.all_reduce(np.array([rank + 1], np.int64))[0])))


def test_unique_id_through_multiprocessing_spawn():
    ctx = multiprocessing.get_context("spawn")
    uid = braid.UniqueId.new()  # this process holds the rendezvous until all have joined
    results = ctx.Queue()
    procs = [ctx.Process(target=_spawned_rank, args=(uid, r, 2, results)) for r in range(2)]
    for p in procs:
        p.start()
    got = sorted(results.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(timeout=30)
    assert got == [(0, 3), (1, 3)]


def _sum_ranks(comm):
    return int(comm.all_reduce(np.array([comm.rank], np.int64))[0])


def test_launch_with_spawn():
    assert braid.launch(2, _sum_ranks, method="spawn", timeout=120) == [1, 1]


def test_init_all_from_threads_and_from_one_thread():
    comms = braid.Communicator.init_all(3)
    try:
        assert [c.rank for c in comms] == [0, 1, 2]
        outs = [np.zeros(2, np.float32) for _ in comms]
        # One thread per rank ...
        threads = [threading.Thread(target=c.all_reduce, args=(np.full(2, i, np.float32), o))
                   for i, (c, o) in enumerate(zip(comms, outs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert all((o == 3).all() for o in outs)
        # ... or every rank from this thread inside a group.
        with braid.group():
            for i, (c, o) in enumerate(zip(comms, outs)):
                c.broadcast(np.full(2, 10 + i, np.float32), root=2, recvbuf=o)
        assert all((o == 12).all() for o in outs)
    finally:
        for c in comms:
            c.destroy()
    with pytest.raises(braid.BraidError) as err:
        comms[0].all_reduce(np.zeros(1))
    assert err.value.code == braid.Result.INVALID_USAGE
