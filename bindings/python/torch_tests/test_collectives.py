"""Every torch.distributed collective on backend "braid", on 2 to 4 processes, against values
computed here."""

import pytest
import torch
import torch.distributed as dist

import ranks

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.uint8, torch.int8]


def _input(rank, dtype, n=7):
    return ((torch.arange(n) + rank) % 3 + 1).to(dtype)


def _premul_sum(factor):
    """PREMUL_SUM by a number or a tensor (PyTorch 1.13 takes a list of tensors, 2 one)."""
    try:
        return dist._make_nccl_premul_sum(factor)
    except TypeError:
        return dist._make_nccl_premul_sum([factor])


def _reductions(rank, n):
    everyone = torch.stack([_input(r, torch.float64) for r in range(n)])
    expected = {
        dist.ReduceOp.SUM: everyone.sum(0), dist.ReduceOp.PRODUCT: everyone.prod(0),
        dist.ReduceOp.MIN: everyone.min(0).values, dist.ReduceOp.MAX: everyone.max(0).values,
    }
    for dtype in DTYPES:
        for op, want in expected.items():
            t = _input(rank, dtype)
            dist.all_reduce(t, op=op)
            assert torch.equal(t, want.to(dtype)), (dtype, op, t)
    # AVG: floats divide, integers truncate as Braid's contract says.
    t = _input(rank, torch.float32)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    torch.testing.assert_close(t, (everyone.sum(0) / n).float())
    t = _input(rank, torch.int64)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    assert torch.equal(t, everyone.sum(0).long() // n)
    # PREMUL_SUM with a number and with a tensor factor.
    for factor, f in ((2.5, 2.5), (torch.tensor([0.5]), 0.5)):
        t = _input(rank, torch.float32)
        dist.all_reduce(t, op=_premul_sum(factor))
        torch.testing.assert_close(t, (everyone.sum(0) * f).float())
    # Non-contiguous and complex tensors, and a large one (several FIFO slots).
    t = torch.full((4, 6), float(rank + 1)).t()
    dist.all_reduce(t)
    assert not t.is_contiguous() and (t == n * (n + 1) / 2).all()
    c = torch.full((3,), complex(rank, 1))
    dist.all_reduce(c)
    assert (c == complex(n * (n - 1) / 2, n)).all()
    big = torch.full((3_000_001,), float(rank))
    dist.all_reduce(big)
    assert (big == n * (n - 1) / 2).all()
    # Coalesced: tensors of several shapes in one call.
    a, b = torch.full((3,), float(rank)), torch.full((5, 2), float(rank + 1))
    dist.all_reduce_coalesced([a, b])
    assert (a == n * (n - 1) / 2).all() and (b == n * (n + 1) // 2).all()
    x, y = torch.ones(2), torch.full((2, 2), 2.0)
    dist.all_reduce_coalesced([x, y], op=dist.ReduceOp.MAX)
    assert (x == 1).all() and (y == 2).all()
    # reduce to every root, with two ops.
    for root in range(n):
        t = _input(rank, torch.float32)
        dist.reduce(t, dst=root, op=dist.ReduceOp.MAX)
        if rank == root:
            assert torch.equal(t, expected[dist.ReduceOp.MAX].float())
        t = torch.full((4,), float(rank))
        dist.reduce(t, dst=root)
        if rank == root:
            assert (t == n * (n - 1) / 2).all()
    # reduce_scatter, list and tensor forms.
    out = torch.zeros(3)
    dist.reduce_scatter(out, [torch.full((3,), float(rank * 10 + p)) for p in range(n)])
    assert (out == sum(r * 10 + rank for r in range(n))).all()
    out = torch.zeros(2, 2, dtype=torch.int64)
    dist.reduce_scatter_tensor(out, torch.arange(4 * n).reshape(2 * n, 2) + rank)
    want = n * torch.arange(4 * rank, 4 * rank + 4).reshape(2, 2) + sum(range(n))
    assert torch.equal(out, want)
    out = torch.zeros(2)
    dist.reduce_scatter_tensor(out, torch.ones(2 * n), op=dist.ReduceOp.AVG)
    assert (out == 1).all()
    return True


def _data_movement(rank, n):
    # broadcast from every root, also bool and non-contiguous.
    for root in range(n):
        t = torch.full((5,), rank, dtype=torch.int64)
        dist.broadcast(t, src=root)
        assert (t == root).all()
    flags = torch.tensor([rank % 2 == 0, True])
    dist.broadcast(flags, src=n - 1)
    assert flags.tolist() == [(n - 1) % 2 == 0, True]
    t = torch.full((3, 4), float(rank)).t()
    dist.broadcast(t, src=1)
    assert (t == 1).all()
    # all_gather, list and tensor forms; the all_gather_object path uses both.
    parts = [torch.zeros(2, 3) for _ in range(n)]
    dist.all_gather(parts, torch.full((2, 3), float(rank)))
    assert all((p == r).all() for r, p in enumerate(parts))
    out = torch.zeros(n * 4, dtype=torch.int32)
    dist.all_gather_into_tensor(out, torch.arange(4, dtype=torch.int32) + 10 * rank)
    assert torch.equal(out, torch.cat([torch.arange(4, dtype=torch.int32) + 10 * r
                                       for r in range(n)]))
    objects = [None] * n
    dist.all_gather_object(objects, {"rank": rank})
    assert objects == [{"rank": r} for r in range(n)]
    # gather and scatter to and from every root.
    for root in range(n):
        got = [torch.zeros(3) for _ in range(n)] if rank == root else None
        dist.gather(torch.full((3,), float(rank)), gather_list=got, dst=root)
        if rank == root:
            assert all((g == r).all() for r, g in enumerate(got))
        mine = torch.zeros(2, dtype=torch.int64)
        sent = [torch.full((2,), 100 * root + p) for p in range(n)] if rank == root else None
        dist.scatter(mine, scatter_list=sent, src=root)
        assert (mine == 100 * root + rank).all()
    # all_to_all: list form, single form with equal and unequal splits.
    outs = [torch.zeros(2) for _ in range(n)]
    dist.all_to_all(outs, [torch.full((2,), float(10 * rank + p)) for p in range(n)])
    assert all((o == 10 * p + rank).all() for p, o in enumerate(outs))
    out = torch.zeros(2 * n, dtype=torch.int64)
    dist.all_to_all_single(out, torch.arange(2 * n) + 100 * rank)
    want = torch.cat([torch.arange(2 * rank, 2 * rank + 2) + 100 * p for p in range(n)])
    assert torch.equal(out, want)
    # Unequal: rank r sends p + 1 rows of 3 to rank p (so receives rank + 1 rows from each).
    send_sizes = [p + 1 for p in range(n)]
    recv_sizes = [rank + 1] * n
    rows = torch.cat([torch.full((p + 1, 3), float(100 * rank + p)) for p in range(n)])
    out = torch.zeros(sum(recv_sizes), 3)
    dist.all_to_all_single(out, rows, output_split_sizes=recv_sizes,
                           input_split_sizes=send_sizes)
    want = torch.cat([torch.full((rank + 1, 3), float(100 * p + rank)) for p in range(n)])
    assert torch.equal(out, want)
    # send/recv around a ring (even ranks send first), and batch_isend_irecv both ways.
    right, left = (rank + 1) % n, (rank - 1) % n
    got = torch.zeros(4)
    if rank % 2 == 0:
        dist.send(torch.full((4,), float(rank)), dst=right)
        dist.recv(got, src=left)
    else:
        dist.recv(got, src=left)
        dist.send(torch.full((4,), float(rank)), dst=right)
    assert (got == left).all()
    a, b = torch.zeros(1000), torch.zeros(1000)
    ops = [dist.P2POp(dist.isend, torch.full((1000,), float(rank)), right),
           dist.P2POp(dist.irecv, a, left),
           dist.P2POp(dist.isend, torch.full((1000,), float(-rank)), left),
           dist.P2POp(dist.irecv, b, right)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    assert (a == left).all() and (b == -right).all()
    dist.barrier()
    return True


def _async_and_futures(rank, n):
    t = torch.full((4,), float(rank))
    work = dist.all_reduce(t, async_op=True)
    assert work.wait()
    value = work.get_future().wait()
    assert value[0] is t or torch.equal(value[0], t)
    assert (t == n * (n - 1) / 2).all()
    chained = dist.all_reduce(torch.ones(2), async_op=True).get_future().then(
        lambda fut: fut.value()[0] * 2)
    assert (chained.wait() == 2 * n).all()
    works = [dist.broadcast(torch.full((2,), float(rank)), src=0, async_op=True)
             for _ in range(3)]
    assert all(w.wait() for w in works)
    assert dist.get_backend() == "braid"
    return True


@pytest.mark.parametrize("nranks", [2, 3, 4])
def test_reductions(nranks):
    assert ranks.run(nranks, _reductions) == [True] * nranks


@pytest.mark.parametrize("nranks", [2, 3, 4])
def test_data_movement(nranks):
    assert ranks.run(nranks, _data_movement) == [True] * nranks


def test_async_work_and_futures():
    assert ranks.run(2, _async_and_futures) == [True, True]


def _one_rank(rank, n):
    t = torch.arange(4.0)
    dist.all_reduce(t)
    out = torch.zeros(4)
    dist.all_gather_into_tensor(out, t)
    dist.barrier()
    return torch.equal(t, out)


def test_one_rank():
    assert ranks.run(1, _one_rank) == [True]
