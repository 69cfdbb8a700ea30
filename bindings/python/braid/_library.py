"""Loads libbraid and declares the C API's prototypes (include/braid.h) for ctypes.

The library is found, in order, at:
  1. $BRAID_LIBRARY (a path to libbraid.so*),
  2. next to this package (a libbraid.so* copied beside __init__.py, or in its parent folder),
  3. the build folders of the source tree this package sits in (build*/libbraid.so.0, newest),
  4. the system's library path (an installed libbraid.so.0).
"""

import ctypes
import ctypes.util
import enum
import glob
import os
import threading

UNIQUE_ID_BYTES = 128


class Result(enum.IntEnum):
    """braidResult_t."""

    SUCCESS = 0
    UNHANDLED_CUDA_ERROR = 1
    SYSTEM_ERROR = 2
    INTERNAL_ERROR = 3
    INVALID_ARGUMENT = 4
    INVALID_USAGE = 5
    REMOTE_ERROR = 6
    IN_PROGRESS = 7
    TIMEOUT = 8


class DataType(enum.IntEnum):
    """braidDataType_t."""

    INT8 = 0
    UINT8 = 1
    INT32 = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    FLOAT32 = 7
    FLOAT64 = 8
    BFLOAT16 = 9


class ReduceOp(enum.IntEnum):
    """braidRedOp_t. Avg is Sum divided by the number of ranks (integers truncate)."""

    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4


class UniqueIdStruct(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


class ConfigStruct(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("settings", ctypes.POINTER(ctypes.c_char_p))]


class BraidError(RuntimeError):
    """A Braid call failed. `code` is the Result, `message` Braid's detail (braidGetLastError)."""

    def __init__(self, code, message, call=""):
        self.code = Result(code) if code in Result._value2member_map_ else code
        self.message = message
        self.call = call
        name = self.code.name if isinstance(self.code, Result) else str(code)
        prefix = f"{call}: " if call else ""
        super().__init__(f"{prefix}{name}: {message}" if message else f"{prefix}{name}")


def _candidates():
    env = os.environ.get("BRAID_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    found = []
    for folder in (here, os.path.dirname(here)):
        found += sorted(glob.glob(os.path.join(folder, "libbraid.so*")))
    # bindings/python/braid -> the source root, whose build folders hold libbraid.so.0.
    root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    built = [p for p in glob.glob(os.path.join(root, "build*", "libbraid.so.0"))
             if os.path.exists(p)]  # a half-built folder may hold a dangling link
    found += sorted(built, key=os.path.getmtime, reverse=True)
    system = ctypes.util.find_library("braid")
    if system:
        found.append(system)
    return found


_lock = threading.Lock()
_lib = None


def _declare(lib):
    c_int_p = ctypes.POINTER(ctypes.c_int)
    comm = ctypes.c_void_p
    stream = ctypes.c_void_p
    size = ctypes.c_size_t
    size_p = ctypes.POINTER(ctypes.c_size_t)
    ptr = ctypes.c_void_p
    res = ctypes.c_int
    protos = {
        "braidGetVersion": (res, [c_int_p]),
        "braidGetErrorString": (ctypes.c_char_p, [ctypes.c_int]),
        "braidGetLastError": (ctypes.c_char_p, [comm]),
        "braidGetUniqueId": (res, [ctypes.POINTER(UniqueIdStruct)]),
        "braidCommInitRank": (res, [ctypes.POINTER(comm), ctypes.c_int, UniqueIdStruct,
                                    ctypes.c_int]),
        "braidCommInitRankConfig": (res, [ctypes.POINTER(comm), ctypes.c_int, UniqueIdStruct,
                                          ctypes.c_int, ctypes.POINTER(ConfigStruct)]),
        "braidCommInitAllConfig": (res, [ctypes.POINTER(comm), ctypes.c_int, c_int_p,
                                         ctypes.POINTER(ConfigStruct)]),
        "braidCommSplit": (res, [comm, ctypes.c_int, ctypes.c_int, ctypes.POINTER(comm)]),
        "braidCommDestroy": (res, [comm]),
        "braidCommAbort": (res, [comm]),
        "braidCommGetAsyncError": (res, [comm, c_int_p]),
        "braidCommCount": (res, [comm, c_int_p]),
        "braidCommUserRank": (res, [comm, c_int_p]),
        "braidCommCuDevice": (res, [comm, c_int_p]),
        "braidAllReduce": (res, [ptr, ptr, size, ctypes.c_int, ctypes.c_int, comm, stream]),
        "braidBroadcast": (res, [ptr, ptr, size, ctypes.c_int, ctypes.c_int, comm, stream]),
        "braidReduce": (res, [ptr, ptr, size, ctypes.c_int, ctypes.c_int, ctypes.c_int, comm,
                              stream]),
        "braidAllGather": (res, [ptr, ptr, size, ctypes.c_int, comm, stream]),
        "braidReduceScatter": (res, [ptr, ptr, size, ctypes.c_int, ctypes.c_int, comm, stream]),
        "braidAllToAll": (res, [ptr, ptr, size, ctypes.c_int, comm, stream]),
        "braidSend": (res, [ptr, size, ctypes.c_int, ctypes.c_int, comm, stream]),
        "braidRecv": (res, [ptr, size, ctypes.c_int, ctypes.c_int, comm, stream]),
        "braidGather": (res, [ptr, ptr, size, ctypes.c_int, ctypes.c_int, comm, stream]),
        "braidScatter": (res, [ptr, ptr, size, ctypes.c_int, ctypes.c_int, comm, stream]),
        "braidAllToAllv": (res, [ptr, size_p, size_p, ptr, size_p, size_p, ctypes.c_int, comm,
                                 stream]),
        "braidBarrier": (res, [comm]),
        "braidGroupStart": (res, []),
        "braidGroupEnd": (res, []),
        "braidDataTypeSize": (size, [ctypes.c_int]),
        "braidMemAlloc": (res, [ctypes.POINTER(ptr), size]),
        "braidMemFree": (res, [ptr]),
        "braidCommShrink": (res, [comm, c_int_p, ctypes.c_int, ctypes.POINTER(comm)]),
    }
    for name, (restype, argtypes) in protos.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


def library():
    """The loaded libbraid (a ctypes.CDLL with prototypes), loading it on first use."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for path in _candidates():
            try:
                lib = ctypes.CDLL(path)
            except OSError as err:
                tried.append(f"{path} ({err})")
                continue
            _declare(lib)
            lib.path = path
            _lib = lib
            return _lib
        raise OSError("libbraid not found; set BRAID_LIBRARY to its path. Tried: " +
                      ("; ".join(tried) if tried else "nothing (no candidate found)"))


def last_error(comm=None):
    """Braid's detail of the last failure on comm (or on this thread)."""
    text = library().braidGetLastError(comm)
    return text.decode("utf-8", "replace") if text else ""


def check(result, call, comm=None):
    """Raises BraidError for a failed call, with Braid's message."""
    if result != Result.SUCCESS:
        # The thread's message is set by every failure, the comm's only by calls on it.
        message = last_error(None) or last_error(comm)
        raise BraidError(result, message, call)
