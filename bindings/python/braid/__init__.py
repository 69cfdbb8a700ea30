"""Python bindings for Braid, a collective-communication library (include/braid.h).

    import numpy as np, braid

    def work(comm):
        x = np.full(4, comm.rank, dtype=np.float32)
        return comm.all_reduce(x)          # in place: x becomes the sum over ranks

    print(braid.launch(4, work))           # 4 local processes, results in rank order

Buffers are NumPy arrays or anything exposing __array_interface__, __cuda_array_interface__,
__dlpack__ or the buffer protocol. Host memory works in every build; device buffers are passed
to the library as pointers (on the CUDA default stream unless a stream is given) and need a CUDA
build of Braid, which otherwise reports UNHANDLED_CUDA_ERROR. Failures raise BraidError with
Braid's message. braid.shared_empty(shape, dtype) makes arrays in memory the ranks of a host
read from one another in place (braidMemAlloc), which is faster still.
"""

import ctypes as _ctypes

from ._library import BraidError, DataType, ReduceOp, Result
from ._library import library as _load_library
from .communicator import Communicator, UniqueId, group
from .launch import LaunchError, launch
from .memory import shared_empty

__all__ = [
    "BraidError", "Communicator", "DataType", "LaunchError", "ReduceOp", "Result", "UniqueId",
    "group", "launch", "library_path", "shared_empty", "version",
]

SUM, PROD, MAX, MIN, AVG = ReduceOp.SUM, ReduceOp.PROD, ReduceOp.MAX, ReduceOp.MIN, ReduceOp.AVG


def version():
    """The loaded library's version as (major, minor, patch)."""
    code = _ctypes.c_int()
    _load_library().braidGetVersion(_ctypes.byref(code))
    return (code.value // 10000, code.value // 100 % 100, code.value % 100)


def library_path():
    """The path of the libbraid this package loaded."""
    return _load_library().path
