"""Tensors as Braid calls take them: element type, reduction, pointer, count and stream."""

import torch
import torch.distributed as dist

from .. import _library as L

# torch.bool travels as bytes: data movement, MIN and MAX (logical and / or) are exact.
_DATATYPES = {
    torch.int8: L.DataType.INT8, torch.uint8: L.DataType.UINT8, torch.bool: L.DataType.UINT8,
    torch.int32: L.DataType.INT32, torch.int64: L.DataType.INT64,
    torch.float16: L.DataType.FLOAT16, torch.float32: L.DataType.FLOAT32,
    torch.float64: L.DataType.FLOAT64, torch.bfloat16: L.DataType.BFLOAT16,
}

_RedOpType = dist.ReduceOp.RedOpType
_REDUCTIONS = {
    _RedOpType.SUM: L.ReduceOp.SUM, _RedOpType.PRODUCT: L.ReduceOp.PROD,
    _RedOpType.MIN: L.ReduceOp.MIN, _RedOpType.MAX: L.ReduceOp.MAX,
    _RedOpType.AVG: L.ReduceOp.AVG,
}
# Complex tensors reduce as pairs of reals only where that is the complex result.
_COMPLEX_SAFE = {_RedOpType.SUM, _RedOpType.AVG, _RedOpType.PREMUL_SUM}


class Reduction:
    """One torch ReduceOp as Braid runs it: a braidRedOp_t, and for PREMUL_SUM the factor that
    multiplies every rank's input before the sum (a number or a tensor)."""

    __slots__ = ("kind", "op", "factor")

    def __init__(self, kind, op, factor=None):
        self.kind = kind
        self.op = op
        self.factor = factor


_SUM = Reduction(_RedOpType.SUM, L.ReduceOp.SUM)
# One shared Reduction per op without a factor, found by the enum's value: hashing torch's enum
# and building a Reduction cost ~2 us of a small call's ~14 (a one-rank dist.all_reduce).
_BY_VALUE = {kind.value: Reduction(kind, op) for kind, op in _REDUCTIONS.items()}


def _premul_factor(reduce_op):
    """The factor of a ReduceOp made by torch.distributed._make_nccl_premul_sum."""
    # PyTorch 2 pickles a ReduceOp as (type, factor).
    state = reduce_op.__getstate__() if hasattr(reduce_op, "__getstate__") else None
    if isinstance(state, tuple) and len(state) == 2 and state[1] is not None:
        return state[1]
    # PyTorch 1.13 keeps it in C++ only: a small extension reads it (built where libtorch's
    # headers were found, next to libbraid).
    from . import _extension
    return _extension.premul_factor(reduce_op)


def reduction(reduce_op):
    """The Reduction for a torch ReduceOp (or RedOpType); ValueError for one Braid lacks."""
    if reduce_op is None:
        return _SUM
    kind = reduce_op.op if isinstance(reduce_op, dist.ReduceOp) else reduce_op
    known = _BY_VALUE.get(getattr(kind, "value", None))
    if known is not None:
        return known
    if kind == _RedOpType.PREMUL_SUM:
        return Reduction(kind, L.ReduceOp.SUM, _premul_factor(reduce_op))
    raise ValueError(f"braid backend: reduction {kind.name} is not supported (use SUM, PRODUCT, "
                     "MIN, MAX, AVG or PREMUL_SUM)")


def datatype(tensor, call):
    """The braidDataType_t of tensor."""
    dt = _DATATYPES.get(tensor.dtype)
    if dt is None:
        raise TypeError(f"braid backend: {call}: tensors of {tensor.dtype} are not supported")
    return dt


def flat(tensor, call, reduction_kind=None):
    """A contiguous real view (or copy) of tensor for a call: complex tensors become pairs of
    reals, where the reduction allows it."""
    if tensor.is_complex():
        if reduction_kind is not None and reduction_kind not in _COMPLEX_SAFE:
            raise ValueError(f"braid backend: {call}: {reduction_kind.name} is not defined on "
                             "complex tensors")
        tensor = torch.view_as_real(tensor)
    if tensor.layout != torch.strided:
        raise TypeError(f"braid backend: {call}: only dense tensors are supported, got "
                        f"{tensor.layout}")
    return tensor


def stream_of(tensor):
    """The stream argument for a call on tensor: NULL on the host, the current stream of the
    tensor's device for CUDA tensors (the call is then enqueued there)."""
    if tensor.device.type == "cpu":
        return None
    if tensor.device.type == "cuda":
        return torch.cuda.current_stream(tensor.device).cuda_stream
    raise TypeError(f"braid backend: tensors on {tensor.device} are not supported (CPU or CUDA)")


def same_device(call, tensors):
    """The one device every tensor of a call is on."""
    devices = {t.device for t in tensors}
    if len(devices) > 1:
        raise ValueError(f"braid backend: {call}: tensors on several devices "
                         f"({', '.join(sorted(str(d) for d in devices))})")
    return next(iter(devices))
