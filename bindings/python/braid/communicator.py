"""Communicators, unique ids and groups over Braid's C API."""

import contextlib
import ctypes
import hashlib

from . import _library as L
from ._buffers import as_buffer

# cudaStreamLegacy: the default stream of CUDA's runtime, for device buffers given no stream
# (NULL would mean "host execution" to Braid).
_CUDA_STREAM_LEGACY = 1


class UniqueId:
    """The rendezvous address and secret of one communicator (128 bytes). Picklable: hand it to
    every rank (multiprocessing, a file, MPI...). The process that made it must stay alive until
    every rank has joined."""

    __slots__ = ("_raw",)

    def __init__(self, raw):
        raw = bytes(raw)
        if len(raw) != L.UNIQUE_ID_BYTES:
            raise ValueError(f"a unique id has {L.UNIQUE_ID_BYTES} bytes, got {len(raw)}")
        self._raw = raw

    @classmethod
    def new(cls):
        """Makes a new id (starts a rendezvous listener in this process)."""
        uid = L.UniqueIdStruct()
        L.check(L.library().braidGetUniqueId(ctypes.byref(uid)), "braidGetUniqueId")
        # Not uid.internal: a c_char array reads as bytes cut at the first NUL.
        return cls(ctypes.string_at(ctypes.addressof(uid), L.UNIQUE_ID_BYTES))

    def __bytes__(self):
        return self._raw

    def __eq__(self, other):
        return isinstance(other, UniqueId) and other._raw == self._raw

    def __hash__(self):
        return hash(self._raw)

    def __reduce__(self):
        return (UniqueId, (self._raw,))

    def __repr__(self):
        # The id carries a secret: show a digest, never the bytes.
        return f"UniqueId(sha256:{hashlib.sha256(self._raw).hexdigest()[:12]})"

    def _struct(self):
        uid = L.UniqueIdStruct()
        ctypes.memmove(ctypes.addressof(uid), self._raw, L.UNIQUE_ID_BYTES)
        return uid


def _config(config):
    """A braidConfig_t for settings given as {"BRAID_NAME": value} or ["BRAID_NAME=value"]."""
    if not config:
        return None, None
    if isinstance(config, dict):
        items = [f"{k}={v}" for k, v in config.items()]
    else:
        items = [str(s) for s in config]
    strings = (ctypes.c_char_p * (len(items) + 1))(*[s.encode() for s in items], None)
    cfg = L.ConfigStruct(ctypes.sizeof(L.ConfigStruct), strings)
    return cfg, strings  # the array must outlive the call


def _op(op):
    if isinstance(op, str):
        try:
            return L.ReduceOp[op.upper()]
        except KeyError:
            raise ValueError(f"unknown reduction {op!r}; use one of "
                             f"{[o.name.lower() for o in L.ReduceOp]}") from None
    return L.ReduceOp(op)


def _stream_handle(stream):
    if stream is None:
        return None
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr", "handle"):  # torch, cupy, cuda-python
        value = getattr(stream, attr, None)
        if isinstance(value, int):
            return value
    raise TypeError(f"cannot read a CUDA stream handle from {type(stream).__name__}")


def _call_stream(stream, *buffers):
    """The stream argument of one call: NULL for host buffers; for device buffers the given
    stream, else the producer's (__cuda_array_interface__), else CUDA's default stream."""
    used = [b for b in buffers if b is not None]
    devices = {b.device for b in used}
    if len(devices) > 1:
        raise ValueError("a call cannot mix host and device buffers")
    handle = _stream_handle(stream)
    if handle is not None or not any(devices):
        return handle
    for b in used:
        if b.stream is not None:
            return int(b.stream)
    return _CUDA_STREAM_LEGACY


@contextlib.contextmanager
def group():
    """Calls inside the block are queued and run together when it ends (braidGroupStart/End):
    matching sends and receives, or several ranks driven from one thread, cannot deadlock."""
    lib = L.library()
    L.check(lib.braidGroupStart(), "braidGroupStart")
    try:
        yield
    except BaseException:
        lib.braidGroupEnd()  # close the group; the block's exception is the one to report
        raise
    L.check(lib.braidGroupEnd(), "braidGroupEnd")


class Communicator:
    """One rank's membership in a group of ranks.

    Use it as a context manager: the communicator is destroyed at the end of the block, or
    aborted (so that peers are not left waiting) when the block raises.
    """

    def __init__(self, nranks, unique_id, rank, config=None):
        """Joins the communicator `unique_id` as `rank` of `nranks`; blocks until all joined.
        config: Braid settings that override the environment, {"BRAID_ALGO": "ring", ...}."""
        if not isinstance(unique_id, UniqueId):
            unique_id = UniqueId(unique_id)
        handle = ctypes.c_void_p()
        cfg, _keep = _config(config)
        lib = L.library()
        if cfg is None:
            result = lib.braidCommInitRank(ctypes.byref(handle), nranks, unique_id._struct(), rank)
        else:
            result = lib.braidCommInitRankConfig(ctypes.byref(handle), nranks,
                                                 unique_id._struct(), rank, ctypes.byref(cfg))
        L.check(result, "braidCommInitRank")
        self._handle = handle
        self._size = nranks
        self._rank = rank

    @classmethod
    def _adopt(cls, handle):
        comm = cls.__new__(cls)
        comm._handle = handle
        comm._size = None
        comm._rank = None
        return comm

    @classmethod
    def init_all(cls, nranks, config=None):
        """nranks communicators of one group in this process (rank i is element i). Drive them
        from one thread each, or from one thread inside `braid.group()`."""
        handles = (ctypes.c_void_p * nranks)()
        cfg, _keep = _config(config)
        L.check(L.library().braidCommInitAllConfig(handles, nranks, None,
                                                   ctypes.byref(cfg) if cfg else None),
                "braidCommInitAll")
        return [cls._adopt(ctypes.c_void_p(h)) for h in handles]

    # -- state ------------------------------------------------------------------------------

    def _live(self):
        if self._handle is None:
            raise L.BraidError(L.Result.INVALID_USAGE, "the communicator was destroyed")
        return self._handle

    def _query(self, fn, call):
        value = ctypes.c_int()
        handle = self._live()
        L.check(fn(handle, ctypes.byref(value)), call, handle)
        return value.value

    @property
    def rank(self):
        if self._rank is None:
            self._rank = self._query(L.library().braidCommUserRank, "braidCommUserRank")
        return self._rank

    @property
    def size(self):
        if self._size is None:
            self._size = self._query(L.library().braidCommCount, "braidCommCount")
        return self._size

    @property
    def device(self):
        """The CUDA device of the communicator; -1 when it runs on host memory."""
        return self._query(L.library().braidCommCuDevice, "braidCommCuDevice")

    @property
    def handle(self):
        """The braidComm_t, as an integer (for other ctypes or C code)."""
        return self._live().value

    def async_error(self):
        """The error that made the communicator unusable (Result.SUCCESS while healthy)."""
        return L.Result(self._query(L.library().braidCommGetAsyncError,
                                    "braidCommGetAsyncError"))

    def split(self, color, key=None):
        """Collective: ranks with the same color form a new communicator ordered by key (default
        the current rank). color None or negative: this rank takes no part and gets None."""
        child = ctypes.c_void_p()
        color = -1 if color is None or color < 0 else int(color)
        key = self.rank if key is None else int(key)
        handle = self._live()
        L.check(L.library().braidCommSplit(handle, color, key, ctypes.byref(child)),
                "braidCommSplit", handle)
        return Communicator._adopt(child) if child.value else None

    def shrink(self, exclude_ranks):
        """Collective over the ranks not in exclude_ranks (those do not call it): a new
        communicator of them, in their old order. Works after the communicator failed because
        ranks died (name those); this one stays as it was, to be aborted or destroyed."""
        excluded = sorted({int(r) for r in exclude_ranks})
        array = (ctypes.c_int * max(len(excluded), 1))(*excluded)
        child = ctypes.c_void_p()
        handle = self._live()
        L.check(L.library().braidCommShrink(handle, array, len(excluded), ctypes.byref(child)),
                "braidCommShrink", handle)
        return Communicator._adopt(child)

    def destroy(self):
        """Waits for queued work and frees the communicator (idempotent)."""
        if self._handle is not None:
            handle, self._handle = self._handle, None
            L.check(L.library().braidCommDestroy(handle), "braidCommDestroy")

    def abort(self):
        """Unblocks every call in progress on the communicator and frees it (idempotent)."""
        if self._handle is not None:
            handle, self._handle = self._handle, None
            L.check(L.library().braidCommAbort(handle), "braidCommAbort")

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.destroy()
        else:
            self.abort()
        return False

    def __repr__(self):
        if self._handle is None:
            return "Communicator(destroyed)"
        return f"Communicator(rank={self.rank}, size={self.size})"

    # -- collectives ------------------------------------------------------------------------

    def _run(self, call, result, handle):
        L.check(result, call, handle)

    @staticmethod
    def _same_type(a, b, call):
        if a.datatype != b.datatype:
            raise TypeError(f"{call}: send and receive buffers differ in element type "
                            f"({a.datatype.name} vs {b.datatype.name})")

    def all_reduce(self, sendbuf, recvbuf=None, op=L.ReduceOp.SUM, stream=None):
        """recvbuf = op over all ranks of sendbuf (in place when recvbuf is None). Returns the
        buffer holding the result."""
        out = sendbuf if recvbuf is None else recvbuf
        s = as_buffer(sendbuf, name="sendbuf")
        r = as_buffer(out, writable=True, name="recvbuf")
        self._same_type(s, r, "all_reduce")
        if r.count != s.count:
            raise ValueError(f"all_reduce: recvbuf has {r.count} elements, sendbuf {s.count}")
        h = self._live()
        self._run("braidAllReduce", L.library().braidAllReduce(
            s.ptr, r.ptr, s.count, s.datatype, _op(op), h, _call_stream(stream, s, r)), h)
        return out

    def broadcast(self, buf, root=0, recvbuf=None, stream=None):
        """Root's buf to every rank's recvbuf (buf itself when recvbuf is None). Returns the
        buffer holding the result."""
        out = buf if recvbuf is None else recvbuf
        r = as_buffer(out, writable=True, name="recvbuf")
        s = as_buffer(buf, name="buf") if recvbuf is not None else r
        self._same_type(s, r, "broadcast")
        if s.count != r.count:
            raise ValueError(f"broadcast: recvbuf has {r.count} elements, buf {s.count}")
        h = self._live()
        self._run("braidBroadcast", L.library().braidBroadcast(
            s.ptr, r.ptr, r.count, r.datatype, root, h, _call_stream(stream, s, r)), h)
        return out

    def reduce(self, sendbuf, recvbuf=None, op=L.ReduceOp.SUM, root=0, stream=None):
        """op over all ranks of sendbuf into root's recvbuf (sendbuf itself when None); other
        ranks' recvbuf is not touched. Returns the result buffer on root, None elsewhere."""
        s = as_buffer(sendbuf, name="sendbuf")
        r = None
        if self.rank == root:
            r = as_buffer(sendbuf if recvbuf is None else recvbuf, writable=True, name="recvbuf")
            self._same_type(s, r, "reduce")
            if r.count != s.count:
                raise ValueError(f"reduce: recvbuf has {r.count} elements, sendbuf {s.count}")
        h = self._live()
        self._run("braidReduce", L.library().braidReduce(
            s.ptr, r.ptr if r else None, s.count, s.datatype, _op(op), root, h,
            _call_stream(stream, s, r)), h)
        if self.rank != root:
            return None
        return sendbuf if recvbuf is None else recvbuf

    def all_gather(self, sendbuf, recvbuf, stream=None):
        """Every rank's sendbuf, concatenated in rank order, into recvbuf (size x as long)."""
        s = as_buffer(sendbuf, name="sendbuf")
        r = as_buffer(recvbuf, writable=True, name="recvbuf")
        self._same_type(s, r, "all_gather")
        if r.count != s.count * self.size:
            raise ValueError(f"all_gather: recvbuf needs {s.count * self.size} elements, has "
                             f"{r.count}")
        h = self._live()
        self._run("braidAllGather", L.library().braidAllGather(
            s.ptr, r.ptr, s.count, s.datatype, h, _call_stream(stream, s, r)), h)
        return recvbuf

    def reduce_scatter(self, sendbuf, recvbuf, op=L.ReduceOp.SUM, stream=None):
        """Block `rank` of the op over all ranks' sendbuf (size x recvbuf long) into recvbuf."""
        s = as_buffer(sendbuf, name="sendbuf")
        r = as_buffer(recvbuf, writable=True, name="recvbuf")
        self._same_type(s, r, "reduce_scatter")
        if s.count != r.count * self.size:
            raise ValueError(f"reduce_scatter: sendbuf needs {r.count * self.size} elements, "
                             f"has {s.count}")
        h = self._live()
        self._run("braidReduceScatter", L.library().braidReduceScatter(
            s.ptr, r.ptr, r.count, s.datatype, _op(op), h, _call_stream(stream, s, r)), h)
        return recvbuf

    def all_to_all(self, sendbuf, recvbuf, stream=None):
        """Block p of sendbuf to rank p; block p of recvbuf from rank p (equal blocks)."""
        s = as_buffer(sendbuf, name="sendbuf")
        r = as_buffer(recvbuf, writable=True, name="recvbuf")
        self._same_type(s, r, "all_to_all")
        if s.count != r.count or s.count % self.size != 0:
            raise ValueError(f"all_to_all: send and receive buffers need the same length, a "
                             f"multiple of {self.size} (got {s.count} and {r.count})")
        h = self._live()
        self._run("braidAllToAll", L.library().braidAllToAll(
            s.ptr, r.ptr, s.count // self.size, s.datatype, h, _call_stream(stream, s, r)), h)
        return recvbuf

    def send(self, buf, peer, stream=None):
        """Sends buf to peer (matched by peer's recv of the same length)."""
        s = as_buffer(buf, name="buf")
        h = self._live()
        self._run("braidSend", L.library().braidSend(
            s.ptr, s.count, s.datatype, peer, h, _call_stream(stream, s)), h)

    def recv(self, buf, peer, stream=None):
        """Receives into buf from peer. Returns buf."""
        r = as_buffer(buf, writable=True, name="buf")
        h = self._live()
        self._run("braidRecv", L.library().braidRecv(
            r.ptr, r.count, r.datatype, peer, h, _call_stream(stream, r)), h)
        return buf
