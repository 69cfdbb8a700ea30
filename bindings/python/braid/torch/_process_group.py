"""ProcessGroupBraid: what torch.distributed and DDP call, on one Braid communicator.

Every collective runs when it is called: on CPU tensors the call returns with the result in
place, on CUDA tensors it is enqueued on the device's current stream. The Work it returns holds a
completed future whose value is the output tensors, so `async_op=True`, `work.wait()` and
`work.get_future()` (DDP's communication hooks) behave as torch expects. A failed call raises
braid.BraidError (a RuntimeError) with Braid's message on the rank that made it; a dead or
mismatched peer makes the call fail on every rank, and the communicator stays unusable after.
"""

import ctypes
import math
import os
import weakref

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future

from .. import _library as L
from ..communicator import Communicator, UniqueId
from . import _tensors as T

# Where rank 0 publishes the unique id in the store torch gives the group (a prefix store of
# its own per group).
UNIQUE_ID_KEY = "braid/unique_id"


def _join(store, rank, size, timeout):
    """A communicator for one torch process group: rank 0 makes the unique id and publishes
    it in the group's store; the others read it (store.get waits for it)."""
    if rank == 0:
        uid = UniqueId.new()
        store.set(UNIQUE_ID_KEY, bytes(uid))
    else:
        uid = UniqueId(store.get(UNIQUE_ID_KEY))
    config = None
    seconds = timeout.total_seconds() if timeout is not None else 0
    if "BRAID_TIMEOUT" not in os.environ and seconds > 0:
        # torch's timeout for the group bounds a stuck collective here too.
        config = {"BRAID_TIMEOUT": str(max(1, math.ceil(seconds)))}
    return Communicator(size, uid, rank, config=config)


def _release(comm):
    """Frees a communicator at garbage collection or exit; aborts a broken one, whose destroy
    could wait on a dead peer."""
    try:
        if comm._handle is not None and comm.async_error() != L.Result.SUCCESS:
            comm.abort()
        else:
            comm.destroy()
    except Exception:  # at exit nothing is left to report to
        pass


def _done(value, device):
    """A Work whose future already holds value."""
    fut = torch.futures.Future(devices=[device]) if device.type == "cuda" else \
        torch.futures.Future()
    fut.set_result(value)
    return _create_work_from_future(fut)


class ProcessGroupBraid(dist.ProcessGroup):
    """A torch.distributed process group on a Braid communicator (backend "braid")."""

    def __init__(self, store, rank, size, timeout=None):
        super().__init__(rank, size)
        self._comm = _join(store, rank, size, timeout)
        self._lib = L.library()
        self._handle = self._comm._handle
        self._nranks = size
        self._rank = rank
        self._pending = None  # (future, value) of calls queued while coalescing
        self._finalizer = weakref.finalize(self, _release, self._comm)

    # -- what torch asks of every group ----------------------------------------------------

    def getBackendName(self):  # noqa: N802 (the C++ name torch's trampoline calls)
        return "braid"

    @property
    def communicator(self):
        """The braid.Communicator under this group."""
        return self._comm

    def _check(self, result, call):
        if result != 0:
            L.check(result, call, self._handle)

    def _work(self, value, device):
        if self._pending is not None:
            fut = torch.futures.Future(devices=[device]) if device.type == "cuda" else \
                torch.futures.Future()
            self._pending.append((fut, value))
            return _create_work_from_future(fut)
        return _done(value, device)

    @staticmethod
    def _single(tensors, call):
        if len(tensors) != 1:
            raise ValueError(f"braid backend: {call} takes one tensor per process, got "
                             f"{len(tensors)}")
        return tensors[0]

    def _root(self, root, call):
        if not 0 <= root < self._nranks:
            raise ValueError(f"braid backend: {call}: root {root} is outside [0, {self._nranks})")
        return root

    # -- coalescing (batch_isend_irecv): one Braid group -----------------------------------

    def _start_coalescing(self):
        if self._pending is not None:
            raise RuntimeError("braid backend: coalescing is already under way")
        self._check(self._lib.braidGroupStart(), "braidGroupStart")
        self._pending = []

    def _end_coalescing(self, reqs=None):
        pending, self._pending = self._pending, None
        if pending is None:
            raise RuntimeError("braid backend: _end_coalescing without _start_coalescing")
        result = self._lib.braidGroupEnd()
        if result != 0:
            error = L.BraidError(result, L.last_error(None) or L.last_error(self._handle),
                                 "braidGroupEnd")
            for fut, _ in pending:
                fut.set_exception(error)
            raise error
        for fut, value in pending:
            fut.set_result(value)

    # -- reductions -------------------------------------------------------------------------

    def _premultiplied(self, buf, red):
        """buf times the PREMUL_SUM factor, in buf's type, on buf's device."""
        factor = red.factor
        if isinstance(factor, (list, tuple)):
            factor = factor[0]
        if isinstance(factor, torch.Tensor):
            factor = factor.to(buf.device)
        return torch.mul(buf, factor).to(buf.dtype)

    def _all_reduce_one(self, tensor, red, call="allreduce"):
        x = T.flat(tensor, call, red.kind)
        buf = x if x.is_contiguous() else x.contiguous()
        src = buf if red.factor is None else self._premultiplied(buf, red)
        self._check(self._lib.braidAllReduce(src.data_ptr(), buf.data_ptr(), buf.numel(),
                                             T.datatype(buf, call), red.op, self._handle,
                                             T.stream_of(buf)), "braidAllReduce")
        if buf is not x:
            x.copy_(buf)

    def allreduce(self, tensors, opts=None):
        tensor = self._single(tensors, "allreduce")
        red = T.reduction(opts.reduceOp if opts is not None else None)
        self._all_reduce_one(tensor, red)
        return self._work([tensor], tensor.device)

    def allreduce_coalesced(self, tensors, opts=None):
        red = T.reduction(opts.reduceOp if opts is not None else None)
        if not tensors:
            return self._work([], torch.device("cpu"))
        device = T.same_device("allreduce_coalesced", tensors)
        dtypes = {t.dtype for t in tensors}
        if len(dtypes) == 1 and all(not t.is_complex() for t in tensors):
            # One call on the tensors laid end to end: small tensors cost one call, not many.
            joined = torch.cat([t.reshape(-1) for t in tensors])
            self._all_reduce_one(joined, red, "allreduce_coalesced")
            offset = 0
            for t in tensors:
                n = t.numel()
                t.copy_(joined[offset:offset + n].view_as(t))
                offset += n
        else:
            for t in tensors:
                self._all_reduce_one(t, red, "allreduce_coalesced")
        return self._work(list(tensors), device)

    def reduce(self, tensors, opts=None):
        tensor = self._single(tensors, "reduce")
        red = T.reduction(opts.reduceOp if opts is not None else None)
        root = self._root(opts.rootRank if opts is not None else 0, "reduce")
        x = T.flat(tensor, "reduce", red.kind)
        buf = x if x.is_contiguous() else x.contiguous()
        src = buf if red.factor is None else self._premultiplied(buf, red)
        self._check(self._lib.braidReduce(src.data_ptr(), buf.data_ptr(), buf.numel(),
                                          T.datatype(buf, "reduce"), red.op, root, self._handle,
                                          T.stream_of(buf)), "braidReduce")
        if buf is not x and self._rank == root:
            x.copy_(buf)
        return self._work([tensor], tensor.device)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        output = self._single(output_tensors, "reduce_scatter")
        inputs = self._single(input_tensors, "reduce_scatter")
        if len(inputs) != self._nranks:
            raise ValueError(f"braid backend: reduce_scatter needs {self._nranks} input "
                             f"tensors, got {len(inputs)}")
        for t in inputs:
            self._same_shape("reduce_scatter", output, t)
        red = T.reduction(opts.reduceOp if opts is not None else None)
        joined = torch.cat([T.flat(t, "reduce_scatter", red.kind).reshape(-1) for t in inputs])
        self._reduce_scatter_flat(output, joined, red, "reduce_scatter")
        return self._work([output], output.device)

    def _reduce_scatter_base(self, output, input, opts=None):  # noqa: A002 (torch's name)
        red = T.reduction(opts.reduceOp if opts is not None else None)
        if input.dtype != output.dtype:
            raise TypeError(f"braid backend: reduce_scatter_tensor: input is {input.dtype}, "
                            f"output {output.dtype}")
        if input.numel() != output.numel() * self._nranks:
            raise ValueError(f"braid backend: reduce_scatter_tensor: input has {input.numel()} "
                             f"elements, needs {self._nranks} x {output.numel()}")
        x = T.flat(input, "reduce_scatter_tensor", red.kind)
        self._reduce_scatter_flat(output, x.contiguous().reshape(-1), red,
                                  "reduce_scatter_tensor")
        return self._work(output, output.device)

    def _reduce_scatter_flat(self, output, joined, red, call):
        out = T.flat(output, call, red.kind)
        buf = out if out.is_contiguous() else torch.empty_like(out, memory_format=torch.contiguous_format)
        src = joined if red.factor is None else self._premultiplied(joined, red)
        self._check(self._lib.braidReduceScatter(src.data_ptr(), buf.data_ptr(), buf.numel(),
                                                 T.datatype(buf, call), red.op, self._handle,
                                                 T.stream_of(buf)), "braidReduceScatter")
        if buf is not out:
            out.copy_(buf)

    # -- data movement ----------------------------------------------------------------------

    @staticmethod
    def _same_shape(call, reference, t):
        if t.dtype != reference.dtype or t.numel() != reference.numel():
            raise ValueError(f"braid backend: {call}: tensors of {t.dtype} x {t.numel()} and "
                             f"{reference.dtype} x {reference.numel()} do not match")

    def broadcast(self, tensors, opts=None):
        tensor = self._single(tensors, "broadcast")
        root = self._root(opts.rootRank if opts is not None else 0, "broadcast")
        x = T.flat(tensor, "broadcast")
        buf = x if x.is_contiguous() else x.contiguous()
        self._check(self._lib.braidBroadcast(buf.data_ptr(), buf.data_ptr(), buf.numel(),
                                             T.datatype(buf, "broadcast"), root, self._handle,
                                             T.stream_of(buf)), "braidBroadcast")
        if buf is not x:
            x.copy_(buf)
        return self._work([tensor], tensor.device)

    def _all_gather_flat(self, out, x, call):
        """out (contiguous, size x x's elements) = every rank's x in rank order."""
        src = x if x.is_contiguous() else x.contiguous()
        self._check(self._lib.braidAllGather(src.data_ptr(), out.data_ptr(), src.numel(),
                                             T.datatype(src, call), self._handle,
                                             T.stream_of(src)), "braidAllGather")

    def allgather(self, output_tensors, input_tensors, opts=None):
        outputs = self._single(output_tensors, "allgather")
        tensor = self._single(input_tensors, "allgather")
        if len(outputs) != self._nranks:
            raise ValueError(f"braid backend: all_gather needs {self._nranks} output tensors, "
                             f"got {len(outputs)}")
        for t in outputs:
            self._same_shape("all_gather", tensor, t)
        x = T.flat(tensor, "all_gather")
        joined = torch.empty((self._nranks,) + tuple(x.shape), dtype=x.dtype, device=x.device)
        self._all_gather_flat(joined, x, "all_gather")
        for t, part in zip(outputs, joined):
            T.flat(t, "all_gather").copy_(part)
        return self._work([outputs], tensor.device)

    def _allgather_base(self, output, input, opts=None):  # noqa: A002 (torch's name)
        if input.dtype != output.dtype:
            raise TypeError(f"braid backend: all_gather_into_tensor: input is {input.dtype}, "
                            f"output {output.dtype}")
        if output.numel() != input.numel() * self._nranks:
            raise ValueError(f"braid backend: all_gather_into_tensor: output has "
                             f"{output.numel()} elements, needs {self._nranks} x "
                             f"{input.numel()}")
        out = T.flat(output, "all_gather_into_tensor")
        buf = out if out.is_contiguous() else torch.empty_like(out, memory_format=torch.contiguous_format)
        self._all_gather_flat(buf, T.flat(input, "all_gather_into_tensor"),
                              "all_gather_into_tensor")
        if buf is not out:
            out.copy_(buf)
        return self._work(output, output.device)

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        if len(output_lists) != len(input_list):
            raise ValueError("braid backend: all_gather_coalesced: as many output lists as "
                             "inputs are needed")
        for outputs, tensor in zip(output_lists, input_list):
            self.allgather([outputs], [tensor])
        device = input_list[0].device if input_list else torch.device("cpu")
        return self._work(output_lists, device)

    # -- point to point and what is composed from it ----------------------------------------

    def _p2p(self, fn, tensor, peer, call):
        if not 0 <= peer < self._nranks:
            raise ValueError(f"braid backend: {call}: peer {peer} is outside "
                             f"[0, {self._nranks})")
        x = T.flat(tensor, call)
        if not x.is_contiguous():
            raise ValueError(f"braid backend: {call}: the tensor must be contiguous")
        self._check(fn(x.data_ptr(), x.numel(), T.datatype(x, call), peer, self._handle,
                       T.stream_of(x)), "braidSend" if fn is self._lib.braidSend else "braidRecv")

    def send(self, tensors, dst, tag=0):
        tensor = self._single(tensors, "send")
        self._p2p(self._lib.braidSend, tensor, dst, "send")
        return self._work([tensor], tensor.device)

    def recv(self, tensors, src, tag=0):
        tensor = self._single(tensors, "recv")
        self._p2p(self._lib.braidRecv, tensor, src, "recv")
        return self._work([tensor], tensor.device)

    def recv_anysource(self, tensors, tag=0):
        raise RuntimeError("braid backend: recv from any source is not supported; name the "
                           "sending rank")

    def _grouped(self, body):
        """Runs body() inside one Braid group, so its sends and receives cannot deadlock."""
        lib = self._lib
        self._check(lib.braidGroupStart(), "braidGroupStart")
        try:
            body()
        except BaseException:
            lib.braidGroupEnd()
            raise
        self._check(lib.braidGroupEnd(), "braidGroupEnd")

    def gather(self, output_tensors, input_tensors, opts=None):
        tensor = self._single(input_tensors, "gather")
        root = self._root(opts.rootRank if opts is not None else 0, "gather")
        x = T.flat(tensor, "gather").contiguous()
        joined = None
        if self._rank == root:
            outputs = self._single(output_tensors, "gather")
            if len(outputs) != self._nranks:
                raise ValueError(f"braid backend: gather needs {self._nranks} output tensors "
                                 f"on the root, got {len(outputs)}")
            for t in outputs:
                self._same_shape("gather", tensor, t)
            joined = torch.empty((self._nranks,) + tuple(x.shape), dtype=x.dtype,
                                 device=x.device)
        elif output_tensors and any(len(o) for o in output_tensors):
            raise ValueError("braid backend: gather takes output tensors on the root only")
        self._check(self._lib.braidGather(x.data_ptr(),
                                          joined.data_ptr() if joined is not None else None,
                                          x.numel(), T.datatype(x, "gather"), root,
                                          self._handle, T.stream_of(x)), "braidGather")
        if joined is not None:
            for t, part in zip(outputs, joined):
                T.flat(t, "gather").copy_(part)
        return self._work(output_tensors, tensor.device)

    def scatter(self, output_tensors, input_tensors, opts=None):
        tensor = self._single(output_tensors, "scatter")
        root = self._root(opts.rootRank if opts is not None else 0, "scatter")
        out = T.flat(tensor, "scatter")
        buf = out if out.is_contiguous() else out.contiguous()
        joined = None
        if self._rank == root:
            inputs = self._single(input_tensors, "scatter")
            if len(inputs) != self._nranks:
                raise ValueError(f"braid backend: scatter needs {self._nranks} input tensors "
                                 f"on the root, got {len(inputs)}")
            for t in inputs:
                self._same_shape("scatter", tensor, t)
            joined = torch.cat([T.flat(t, "scatter").reshape(-1) for t in inputs])
        elif input_tensors and any(len(i) for i in input_tensors):
            raise ValueError("braid backend: scatter takes input tensors on the root only")
        self._check(self._lib.braidScatter(joined.data_ptr() if joined is not None else None,
                                           buf.data_ptr(), buf.numel(),
                                           T.datatype(buf, "scatter"), root, self._handle,
                                           T.stream_of(buf)), "braidScatter")
        if buf is not out:
            out.copy_(buf)
        return self._work([tensor], tensor.device)

    def _exchange(self, sends, recvs, call):
        """sends[p] to rank p and recvs[p] from rank p, in one group; own block copied."""
        me = self._rank

        def body():
            for peer in range(self._nranks):
                if peer == me:
                    continue
                if recvs[peer].numel():
                    self._p2p(self._lib.braidRecv, recvs[peer], peer, call)
                if sends[peer].numel():
                    self._p2p(self._lib.braidSend, sends[peer], peer, call)
        self._grouped(body)
        recvs[me].copy_(sends[me])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes,  # noqa: A002
                      opts=None):
        call = "all_to_all_single"
        if input.dtype != output.dtype:
            raise TypeError(f"braid backend: {call}: input is {input.dtype}, output "
                            f"{output.dtype}")
        n = self._nranks
        x = T.flat(input, call).contiguous()
        out = T.flat(output, call)
        buf = out if out.is_contiguous() else out.contiguous()
        dt = T.datatype(x, call)
        if not output_split_sizes and not input_split_sizes:
            if x.numel() != buf.numel() or x.numel() % n:
                raise ValueError(f"braid backend: {call}: input and output need the same "
                                 f"number of elements, a multiple of {n} (got {x.numel()} and "
                                 f"{buf.numel()})")
            self._check(self._lib.braidAllToAll(x.data_ptr(), buf.data_ptr(), x.numel() // n,
                                                dt, self._handle, T.stream_of(x)),
                        "braidAllToAll")
        else:
            send_counts, send_displs = self._split_counts(x, input_split_sizes, "input", call)
            recv_counts, recv_displs = self._split_counts(buf, output_split_sizes, "output", call)
            self._check(self._lib.braidAllToAllv(x.data_ptr(), send_counts, send_displs,
                                                 buf.data_ptr(), recv_counts, recv_displs, dt,
                                                 self._handle, T.stream_of(x)),
                        "braidAllToAllv")
        if buf is not out:
            out.copy_(buf)
        return self._work(output, output.device)

    def _split_counts(self, t, sizes, what, call):
        """Element counts and offsets (size_t arrays) of t's dimension-0 blocks of the given
        sizes (equal ones when sizes is empty)."""
        n = self._nranks
        rows = t.shape[0] if t.dim() else 1
        if not sizes:
            if rows % n:
                raise ValueError(f"braid backend: {call}: the {what}'s first dimension {rows} "
                                 f"is not a multiple of {n}")
            sizes = [rows // n] * n
        if len(sizes) != n or any(s < 0 for s in sizes) or sum(sizes) != rows:
            raise ValueError(f"braid backend: {call}: {what} split sizes {list(sizes)} do not "
                             f"divide {rows} rows among {n} ranks")
        per_row = t.numel() // rows if rows else 0
        counts = (ctypes.c_size_t * n)(*[s * per_row for s in sizes])
        displs = (ctypes.c_size_t * n)()
        for p in range(1, n):
            displs[p] = displs[p - 1] + counts[p - 1]
        return counts, displs

    def alltoall(self, output_tensors, input_tensors, opts=None):
        call = "all_to_all"
        n = self._nranks
        if len(output_tensors) != n or len(input_tensors) != n:
            raise ValueError(f"braid backend: {call} needs {n} input and {n} output tensors")
        dtypes = {t.dtype for t in list(output_tensors) + list(input_tensors)}
        if len(dtypes) != 1:
            raise TypeError(f"braid backend: {call}: tensors of several types {dtypes}")
        sends = [T.flat(t, call).contiguous().reshape(-1) for t in input_tensors]
        outs = [T.flat(t, call) for t in output_tensors]
        recvs = [o if o.is_contiguous() else o.contiguous() for o in outs]
        self._exchange(sends, [r.reshape(-1) for r in recvs], call)
        for o, r in zip(outs, recvs):
            if r is not o:
                o.copy_(r)
        return self._work(output_tensors, output_tensors[0].device)

    def barrier(self, opts=None):
        self._check(self._lib.braidBarrier(self._handle), "braidBarrier")
        return self._work([], torch.device("cpu"))
