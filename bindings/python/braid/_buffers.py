"""Turns array-like objects into (pointer, element count, datatype, device) for the C API.

Accepted, in this order of preference:
  - __cuda_array_interface__ (CuPy, Numba, PyTorch CUDA tensors): device memory,
  - __array_interface__ (NumPy and friends): host memory,
  - __dlpack__ (PyTorch, JAX, NumPy >= 1.22, ...): host or CUDA memory per its device,
  - the Python buffer protocol (bytearray, array.array, memoryview), through NumPy.
Buffers must be C-contiguous; a buffer that a call writes must be writable.
"""

import ctypes

from ._library import DataType

# __array_interface__ type strings (byte order '<' or '|': Braid reduces native little-endian).
_TYPESTR = {
    "i1": DataType.INT8, "u1": DataType.UINT8, "i4": DataType.INT32, "u4": DataType.UINT32,
    "i8": DataType.INT64, "u8": DataType.UINT64, "f2": DataType.FLOAT16,
    "f4": DataType.FLOAT32, "f8": DataType.FLOAT64,
}
_ITEMSIZE = {
    DataType.INT8: 1, DataType.UINT8: 1, DataType.INT32: 4, DataType.UINT32: 4,
    DataType.INT64: 8, DataType.UINT64: 8, DataType.FLOAT16: 2, DataType.FLOAT32: 4,
    DataType.FLOAT64: 8, DataType.BFLOAT16: 2,
}

# DLPack (dlpack.h): device types and type codes.
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT = 0, 1, 2, 4
_DLPACK_TYPES = {
    (_DL_INT, 8): DataType.INT8, (_DL_UINT, 8): DataType.UINT8, (_DL_INT, 32): DataType.INT32,
    (_DL_UINT, 32): DataType.UINT32, (_DL_INT, 64): DataType.INT64,
    (_DL_UINT, 64): DataType.UINT64, (_DL_FLOAT, 16): DataType.FLOAT16,
    (_DL_FLOAT, 32): DataType.FLOAT32, (_DL_FLOAT, 64): DataType.FLOAT64,
    (_DL_BFLOAT, 16): DataType.BFLOAT16,
}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64),
    ]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class Buffer:
    """A contiguous array's address and shape as a Braid call needs them."""

    __slots__ = ("ptr", "count", "datatype", "device", "readonly", "stream", "keepalive")

    def __init__(self, ptr, count, datatype, device, readonly, stream=None, keepalive=None):
        self.ptr = ptr
        self.count = count
        self.datatype = datatype
        self.device = device
        self.readonly = readonly
        self.stream = stream  # the producer's CUDA stream (__cuda_array_interface__ v3)
        self.keepalive = keepalive  # what must live while the pointer is used


def _product(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _c_contiguous(shape, strides, itemsize):
    """strides in bytes; None means C-contiguous. Dimensions of extent 1 may have any stride."""
    if strides is None:
        return True
    expected = itemsize
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


def _from_interface(obj, iface, device):
    typestr = iface["typestr"]
    if typestr[0] == ">" and typestr[1:] not in ("i1", "u1"):
        raise TypeError(f"big-endian arrays ({typestr}) are not supported")
    datatype = _TYPESTR.get(typestr[1:])
    if datatype is None:
        raise TypeError(f"array element type {typestr!r} has no Braid datatype")
    shape = tuple(iface["shape"])
    if not _c_contiguous(shape, iface.get("strides"), _ITEMSIZE[datatype]):
        raise ValueError("the array is not C-contiguous; pass a contiguous copy")
    if iface.get("mask") is not None:
        raise TypeError("masked arrays are not supported")
    ptr, readonly = iface["data"]
    offset = iface.get("offset", 0) if not device else 0
    stream = iface.get("stream") if device else None
    return Buffer((ptr or 0) + offset, _product(shape), datatype, device, bool(readonly), stream,
                  keepalive=obj)


def _from_dlpack(obj):
    device_type = None
    if hasattr(obj, "__dlpack_device__"):
        device_type = int(obj.__dlpack_device__()[0])
    if device_type in (_DL_CUDA, _DL_CUDA_MANAGED):
        # The producer orders its own stream before the capsule is made (stream=None: the
        # default stream, the safe choice when the consumer's stream is not known).
        capsule = obj.__dlpack__(stream=None)
    else:
        capsule = obj.__dlpack__()
    address = _capsule_pointer(capsule, b"dltensor")
    tensor = _DLTensor.from_address(address)  # DLManagedTensor starts with its DLTensor
    code, bits, lanes = tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes
    datatype = _DLPACK_TYPES.get((code, bits))
    if datatype is None or lanes != 1:
        raise TypeError(f"DLPack type (code {code}, {bits} bits, {lanes} lanes) has no Braid "
                        "datatype")
    if tensor.device.device_type not in (_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED):
        raise TypeError(f"DLPack device type {tensor.device.device_type} is neither host "
                        "nor CUDA memory")
    shape = [tensor.shape[i] for i in range(tensor.ndim)]
    itemsize = _ITEMSIZE[datatype]
    strides = None
    if tensor.strides:
        strides = [tensor.strides[i] * itemsize for i in range(tensor.ndim)]
    if not _c_contiguous(shape, strides, itemsize):
        raise ValueError("the tensor is not C-contiguous; pass a contiguous copy")
    device = tensor.device.device_type in (_DL_CUDA, _DL_CUDA_MANAGED)
    ptr = (tensor.data or 0) + tensor.byte_offset
    # The capsule keeps the producer's memory alive; its destructor frees the DLManagedTensor.
    return Buffer(ptr, _product(shape), datatype, device, False, keepalive=(obj, capsule))


def as_buffer(obj, writable=False, name="buffer"):
    """The Buffer behind obj; raises TypeError/ValueError for what Braid cannot use."""
    if isinstance(obj, Buffer):
        buf = obj
    elif hasattr(obj, "__cuda_array_interface__"):
        buf = _from_interface(obj, obj.__cuda_array_interface__, device=True)
    elif hasattr(obj, "__array_interface__"):
        buf = _from_interface(obj, obj.__array_interface__, device=False)
    elif hasattr(obj, "__dlpack__"):
        buf = _from_dlpack(obj)
    else:
        try:
            import numpy
        except ImportError:
            raise TypeError(f"{name}: {type(obj).__name__} exposes no array interface, and "
                            "NumPy (needed for the buffer protocol) is not installed") from None
        try:
            view = memoryview(obj)
        except TypeError:
            raise TypeError(f"{name}: {type(obj).__name__} is not an array (no "
                            "__array_interface__, __cuda_array_interface__, __dlpack__ or "
                            "buffer protocol)") from None
        array = numpy.asarray(view)
        buf = _from_interface((obj, array), array.__array_interface__, device=False)
    if writable and buf.readonly:
        raise ValueError(f"{name} is read-only but the call writes into it")
    return buf


def itemsize(datatype):
    return _ITEMSIZE[DataType(datatype)]
