"""Host memory that ranks on one host read from one another in place (braidMemAlloc)."""
import ctypes
import weakref

from ._library import check, library


def shared_empty(shape, dtype="float32"):
    """A zero-filled C-contiguous NumPy array in braidMemAlloc memory.

    Collectives on this host whose buffers lie in such arrays hand them to the peers to read in
    place instead of copying them through shared-memory FIFOs: each byte is copied once rather
    than twice. The memory goes back to the system when the last array using it is gone.
    """
    import numpy as np

    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    count = 1
    for n in shape:
        if n < 0:
            raise ValueError(f"shared_empty: negative dimension in {shape}")
        count *= n
    nbytes = max(count * dtype.itemsize, 1)
    lib = library()
    ptr = ctypes.c_void_p()
    check(lib.braidMemAlloc(ctypes.byref(ptr), nbytes), "braidMemAlloc")
    raw = (ctypes.c_char * nbytes).from_address(ptr.value)
    # Every array made from it keeps `raw` alive; once it goes, so does the memory.
    weakref.finalize(raw, lib.braidMemFree, ptr.value)
    return np.frombuffer(raw, dtype=np.uint8, count=count * dtype.itemsize).view(
        dtype).reshape(shape)
