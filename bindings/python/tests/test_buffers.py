"""Buffer conversion: every accepted protocol, and the refusals."""
import array
import os
import re
import subprocess

import numpy as np
import pytest

import braid
from braid._buffers import as_buffer
from braid._library import library


@pytest.mark.parametrize("dtype, expected", [
    (np.int8, braid.DataType.INT8), (np.uint8, braid.DataType.UINT8),
    (np.int32, braid.DataType.INT32), (np.uint32, braid.DataType.UINT32),
    (np.int64, braid.DataType.INT64), (np.uint64, braid.DataType.UINT64),
    (np.float16, braid.DataType.FLOAT16), (np.float32, braid.DataType.FLOAT32),
    (np.float64, braid.DataType.FLOAT64),
])
def test_numpy_types(dtype, expected):
    a = np.zeros((3, 5), dtype=dtype)
    b = as_buffer(a)
    assert b.datatype == expected
    assert b.count == 15
    assert b.ptr == a.ctypes.data
    assert not b.device


def test_views_offsets_and_contiguity():
    a = np.arange(20, dtype=np.float32)
    view = a[4:10]
    assert as_buffer(view).ptr == a.ctypes.data + 16
    with pytest.raises(ValueError, match="C-contiguous"):
        as_buffer(a[::2])
    assert as_buffer(np.zeros((4, 1), np.float32)[:, :1]).count == 4


def test_read_only_and_unsupported_types():
    a = np.zeros(4, np.float32)
    a.flags.writeable = False
    assert as_buffer(a).readonly
    with pytest.raises(ValueError, match="read-only"):
        as_buffer(a, writable=True)
    with pytest.raises(TypeError, match="no Braid datatype"):
        as_buffer(np.zeros(3, dtype=np.complex64))
    with pytest.raises(TypeError, match="not an array"):
        as_buffer(object())


class DLPackOnly:
    """Exposes an array through DLPack alone, as torch tensors or JAX arrays do."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, stream=None):
        return self._array.__dlpack__()

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_dlpack():
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    b = as_buffer(DLPackOnly(a))
    assert (b.ptr, b.count, b.datatype, b.device) == (a.ctypes.data, 12, braid.DataType.INT64,
                                                      False)
    with pytest.raises(ValueError, match="C-contiguous"):
        as_buffer(DLPackOnly(a[:, ::2]))


def test_buffer_protocol():
    b = as_buffer(bytearray(8))
    assert (b.count, b.datatype) == (8, braid.DataType.UINT8)
    d = as_buffer(array.array("d", [1.0, 2.0]))
    assert (d.count, d.datatype) == (2, braid.DataType.FLOAT64)
    with pytest.raises(ValueError, match="read-only"):
        as_buffer(b"abc", writable=True)


class FakeDeviceArray:
    """A __cuda_array_interface__ producer whose pointer no host code may touch."""

    def __init__(self, n):
        self.__cuda_array_interface__ = {
            "shape": (n,), "typestr": "<f4", "data": (0x7000_0000_0000, False), "version": 3,
            "strides": None, "stream": None}


def _library_has_cuda():
    # The build says so (Meson sets it); otherwise look for a CUDA runtime among the library's
    # dependencies.
    if os.environ.get("BRAID_BUILD_HAS_CUDA") in ("0", "1"):
        return os.environ["BRAID_BUILD_HAS_CUDA"] == "1"
    out = subprocess.run(["readelf", "-d", braid.library_path()], capture_output=True, text=True)
    return re.search(r"NEEDED.*(cuda|cudart)", out.stdout) is not None


def test_device_buffers_are_passed_as_pointers():
    b = as_buffer(FakeDeviceArray(6))
    assert b.device and b.ptr == 0x7000_0000_0000 and b.count == 6
    if _library_has_cuda():
        pytest.skip("a CUDA build would take the pointer as real device memory")
    uid = braid.UniqueId.new()
    with braid.Communicator(1, uid, 0) as comm:
        with pytest.raises(braid.BraidError) as err:
            comm.all_reduce(FakeDeviceArray(6))
        # Passed on CUDA's default stream: a host-only build refuses it instead of reading it.
        assert err.value.code == braid.Result.UNHANDLED_CUDA_ERROR
        assert "CUDA" in err.value.message
        with pytest.raises(ValueError, match="mix host and device"):
            comm.all_reduce(FakeDeviceArray(6), np.zeros(6, np.float32))


def test_library_and_version():
    assert braid.version() >= (0, 1, 0)
    assert "libbraid" in braid.library_path()
    assert library().braidDataTypeSize(braid.DataType.BFLOAT16) == 2
