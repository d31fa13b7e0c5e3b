"""Host side of the CUDA target: reading callers' arrays, their streams, and new
arrays from the caller's own allocator.

- **Reading.** A :class:`DeviceView` describes any CUDA array (PyTorch, CuPy,
  numba, anything exporting ``__cuda_array_interface__``) by pointer, shape, byte
  strides and dtype.  PyTorch's and CuPy's arrays are read through their
  attributes, not their (slow) interface properties.
- **Streams.** ``stream=None`` means the input library's current stream:
  ``torch.cuda.current_stream(device)`` for PyTorch tensors, CuPy's current
  stream for CuPy arrays, the legacy default stream otherwise.
- **New arrays.** Outputs are of the input's library and come from its
  allocator, on the call's stream: PyTorch's caching allocator, CuPy's memory
  pool, and for numba device arrays (and NumPy inputs sent to the GPU) the
  device's stream-ordered memory pool (``cudaMallocAsync``, through cuda.core).
  numba's process-wide memory manager is never replaced.

(Not named ``cuda_arrays``: numba-cuda 0.30's import redirector claims every
module whose dotted name contains ``numba.cuda``, ``dmlnumba.cuda_arrays`` included,
and recurses on it.)
"""

import functools
import operator

import numpy as np
from numba import config as _nbconfig
from numba import cuda

from .arrays import is_cuda_array, library
from .caches import Bounded
from .layout import c_strides, extent
from .validation import NONZERO_DTYPES, uint_of_size

#: numba's CUDA simulator: device arrays wrap host arrays and kernels run in Python.
SIM = bool(getattr(_nbconfig, "ENABLE_CUDASIM", False))


class DeviceView:
    """A NumPy-like description of a device array (or of a NumPy array to upload)."""

    __slots__ = (
        "obj",
        "shape",
        "strides",
        "dtype",
        "ptr",
        "readonly",
        "ndim",
        "size",
        "itemsize",
        "device",
        "host",
        "_span",
    )

    def __init__(self, obj, shape, strides, dtype, ptr, readonly, device=None, host=None):
        self.obj = obj
        self.shape = shape
        self.dtype = dtype
        self.itemsize = dtype.itemsize
        self.strides = strides
        self.ptr = ptr
        self.readonly = readonly
        self.ndim = len(shape)
        n = 1
        for s in shape:
            n *= s
        self.size = n
        self.device = device
        self.host = host
        self._span = None

    def span(self):
        """``(first, end)``: the byte addresses from its lowest element to past its highest."""
        if self._span is None:
            low, n, _, _ = extent(self.shape, self.strides, self.itemsize)
            self._span = (self.ptr + low, self.ptr + low + n * self.itemsize)
        return self._span


# ---------------------------------------------------------------------------- reading


def _cai(obj):
    """``obj.__cuda_array_interface__``; under the simulator, whose device arrays wrap
    host arrays and export no CAI, the wrapped array's interface (host pointers
    play the part of device pointers there)."""
    try:
        return obj.__cuda_array_interface__
    except AttributeError:
        if SIM and hasattr(obj, "_ary"):
            ai = obj._ary.__array_interface__
            return {
                "shape": ai["shape"],
                "strides": ai["strides"],
                "typestr": ai["typestr"],
                "data": ai["data"],
                "version": 3,
            }
        raise


def _read_cai(obj):
    """``(ptr, shape, byte strides, dtype, readonly)`` from the CUDA array interface."""
    cai = _cai(obj)
    shape = tuple(cai["shape"])
    dtype = np.dtype(cai["typestr"])
    strides = cai.get("strides")
    if strides is None:
        strides = tuple(s * dtype.itemsize for s in c_strides(shape))
    ptr, readonly = cai["data"]
    return ptr, shape, tuple(strides), dtype, bool(readonly)


def _read_cupy(a):
    # What cupy.ndarray.__cuda_array_interface__ says, without building its dict.
    return a.data.ptr, a.shape, a.strides, a.dtype, False


_torch_dtypes: dict = {}  # torch dtype -> NumPy dtype
_torch_of: dict = {}  # NumPy dtype -> torch dtype


def _torch():
    import torch

    if not _torch_dtypes:
        for d in NONZERO_DTYPES:  # DirectML's dtypes and bool
            if hasattr(torch, d.name):
                _torch_dtypes[getattr(torch, d.name)] = d
                _torch_of[d] = getattr(torch, d.name)
    return torch


def _read_torch(t):
    # What torch.Tensor.__cuda_array_interface__ says, without its Python property
    # (tens of microseconds).  Anything unusual goes through that property, so that
    # PyTorch's own errors (a tensor that requires grad, a sparse one) come out.
    if not _torch_dtypes:
        _torch()
    dtype = _torch_dtypes.get(t.dtype)
    if dtype is None or t.requires_grad or not t.is_cuda or t.is_sparse:
        return _read_cai(t)
    isz = dtype.itemsize
    return t.data_ptr(), tuple(t.shape), tuple(s * isz for s in t.stride()), dtype, False


_readers = {"torch": _read_torch, "cupy": _read_cupy}


def view_of(obj, device=None):
    """A :class:`DeviceView` of a CUDA array."""
    ptr, shape, strides, dtype, readonly = _readers.get(library(obj), _read_cai)(obj)
    return DeviceView(obj, shape, strides, dtype, ptr, readonly, device)


def describe(a, name, func):
    if isinstance(a, DeviceView):
        return a
    if not is_cuda_array(a):
        raise TypeError(
            f"{func}(): {name} must be a CUDA array (CuPy, PyTorch, Numba), not {type(a).__name__}"
        )
    return view_of(a)


def staged(x, device):
    """A NumPy input as a view to upload after validation (nothing is copied before
    the checks pass)."""
    return DeviceView(x, x.shape, x.strides, x.dtype, None, False, device, host=x)


class Flat:
    """A 1-d CAI exporter over ``span`` items starting at ``ptr`` (keeps ``owner`` alive)."""

    __slots__ = ("__cuda_array_interface__", "_owner")

    def __init__(self, owner, ptr, span, dtype):
        self._owner = owner
        self.__cuda_array_interface__ = {
            "shape": (span,),
            "strides": None,
            "typestr": dtype.str,
            "data": (ptr, False),
            "version": 3,
            "stream": None,
        }


class _HostView:
    pass


def host_view(f):
    """Under the simulator: a NumPy view of the (host) memory a :class:`Flat` describes."""
    holder = _HostView()
    cai = f.__cuda_array_interface__
    holder.__array_interface__ = {
        "shape": cai["shape"],
        "typestr": cai["typestr"],
        "data": cai["data"],
        "version": 3,
    }
    holder._owner = f
    return np.asarray(holder)


def numba_array(f):
    """A numba device array over a :class:`Flat`."""
    return cuda.as_cuda_array(f) if not SIM else cuda.to_device(host_view(f))


def flat(v):
    """``(ptr, span, base, element strides)`` of a non-empty device array: the
    address of its lowest-addressed element, the items from there to its highest,
    the index of element 0 among them, and its strides in items."""
    low, span, base, es = extent(v.shape, v.strides, v.itemsize)
    return v.ptr + low, span, base, es


def to_host(obj):
    """A CUDA array as a NumPy array with the same strides (a copy of the bytes it spans)."""
    v = view_of(obj)
    if v.size == 0:
        return np.empty(v.shape, v.dtype)
    p, span, base, _ = flat(v)
    buf = numba_array(Flat(obj, p, span, uint_of_size(v.itemsize))).copy_to_host().view(v.dtype)
    return np.lib.stride_tricks.as_strided(buf[base:], v.shape, v.strides)


# ---------------------------------------------------------------------------- streams

_streams = Bounded()  # handle -> numba stream


def stream_of(stream):
    """A numba stream for ``stream=``: None (the legacy default stream), a numba
    stream, or a foreign stream (PyTorch's ``cuda_stream``, CuPy's ``ptr``, a raw handle)."""
    if stream is None:
        s = _streams.get(None)
        if s is None:
            s = _streams[None] = cuda.legacy_default_stream()
        return s
    if _is_numba_stream(stream):
        return stream
    handle = _handle(stream)
    s = _streams.get(handle)
    if s is None:
        s = _streams.put(
            handle, cuda.external_stream(handle) if handle else cuda.legacy_default_stream()
        )
    return s


def _is_numba_stream(stream):
    return (
        hasattr(stream, "handle")
        and hasattr(stream, "synchronize")
        and hasattr(stream, "auto_synchronize")
    )


def _handle(stream, func="dmlnumba"):
    """The raw handle of a PyTorch (``cuda_stream``), CuPy (``ptr``) or numba stream,
    or of a raw integer handle; TypeError naming ``func`` for anything else."""
    handle = getattr(stream, "cuda_stream", None)
    if handle is None:
        handle = getattr(stream, "ptr", None)
    if handle is None and isinstance(stream, int) and not isinstance(stream, bool):
        handle = stream
    if handle is None and _is_numba_stream(stream):
        handle = int(stream)
    if not isinstance(handle, int) or isinstance(handle, bool):
        raise TypeError(
            f"{func}(): stream must be a numba, PyTorch or CuPy stream or a stream handle, "
            f"not {type(stream).__name__}"
        )
    return handle


def check_stream(stream, func):
    """TypeError naming ``func`` where ``stream=`` is no stream this target takes."""
    if stream is not None and not _is_numba_stream(stream):
        _handle(stream, func)


def _torch_device(v):
    """The PyTorch device index of the call reading ``v``."""
    if v.device is not None:
        return v.device
    if library(v.obj) == "torch" and v.host is None:
        return v.obj.get_device()
    return _torch().cuda.current_device()


def _cupy_device(v):
    if v.device is not None:
        return v.device
    if library(v.obj) == "cupy":
        return v.obj.device.id
    import cupy

    return cupy.cuda.runtime.getDevice()


def torch_current_stream(torch):
    """A function of a device index giving the raw handle of PyTorch's current
    stream there: ``torch._C._cuda_getCurrentRawStream`` where PyTorch has it (the
    query Triton's launcher makes; 0.2 us against 6 us for
    ``torch.cuda.current_stream(i).cuda_stream``, which builds a Stream object, on
    the H100 host), else that public query (``tests/test_frameworks.py`` checks
    that both agree, inside ``torch.cuda.stream`` blocks too)."""
    raw = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    current = torch.cuda.current_stream
    return lambda i: current(i).cuda_stream


def call_stream(lib, stream, v):
    """What ``stream=`` means for a call of library ``lib`` reading ``v``: the
    caller's stream, else that library's current stream on ``v``'s device (None:
    the legacy default stream)."""
    if stream is not None or lib is None:
        return stream
    if lib == "torch":
        return torch_current_stream(_torch())(_torch_device(v)) or None
    import cupy

    with cupy.cuda.Device(_cupy_device(v)):
        return cupy.cuda.get_current_stream().ptr or None


def library_io(lib, v):
    """For repeated default calls of library ``lib`` (PyTorch or CuPy) on inputs on
    ``v``'s device: ``(address of an input, the current stream's handle, allocator)``,
    ``allocator(shape, dtype)`` giving a function of no arguments that makes a new
    C-contiguous array of that shape and dtype.  The fast counterpart of
    :func:`call_stream` and :func:`new_array` with ``stream=None``: each is a bound
    built-in (a method, ``functools.partial``, ``operator.attrgetter``), so a call
    runs no Python frame of its own (0.1-0.3 us each on the H100 hosts,
    docs/PERFORMANCE.md).  CuPy calls reach it only where the current device is the
    input's (see ``dmlnumba.api._fresh_key``)."""
    if lib == "torch":
        torch = _torch()
        dev = _torch_device(v)
        empty, dtypes = torch.empty, _torch_of

        def allocator(shape, dt):
            # new_empty of a template with no elements (and no memory), which gives the
            # dtype and device without keywords to parse: 0.1-0.4 us less than
            # torch.empty(..., dtype=, device=) on the H100 hosts.  The sizes unpacked,
            # which PyTorch parses faster than a tuple (docs/PERFORMANCE.md).
            return functools.partial(empty(0, dtype=dtypes[dt], device=dev).new_empty, *shape)

        return torch.Tensor.data_ptr, functools.partial(torch_current_stream(torch), dev), allocator
    import cupy

    get = cupy.cuda.get_current_stream
    return (
        operator.attrgetter("data.ptr"),
        (lambda: get().ptr),
        # The ndarray constructor, which cupy.empty calls from a Python frame.
        (lambda shape, dt: functools.partial(cupy.ndarray, shape, dt)),
    )


# ---------------------------------------------------------------------------- new arrays

_pools: dict = {}
_core_streams = Bounded()  # handle -> numba stream


def core_stream(s):
    """A numba stream as a cuda.core stream (converted once per handle)."""
    key = int(s)
    c = _core_streams.get(key)
    if c is None:
        import cuda.core as cc

        if key == 0:
            c = cc.LEGACY_DEFAULT_STREAM
        elif key == 2:
            c = cc.PER_THREAD_DEFAULT_STREAM
        else:
            c = cc.Stream.from_handle(key)
        c = _core_streams.put(key, c)
    return c


def _pool_array(shape, dtype, s, device):
    """A numba device array from the device's stream-ordered memory pool, allocated
    on stream ``s`` and freed on it when the array is garbage."""
    if SIM:
        return cuda.device_array(shape, dtype, stream=s)
    if device is None:
        device = cuda.get_current_device().id
    mr = _pools.get(device)
    if mr is None:
        from cuda.core import DeviceMemoryResource

        mr = _pools[device] = DeviceMemoryResource(device)
    n = dtype.itemsize
    for d in shape:
        n *= d
    buf = mr.allocate(max(n, 1), stream=core_stream(s))
    desc = {
        "shape": shape,
        "strides": None,
        "typestr": dtype.str,
        "data": (int(buf.handle), False),
        "version": 3,
        "stream": None,
    }
    return cuda.from_cuda_array_interface(desc, owner=buf, sync=False)


def _torch_stream(torch, stream, device):
    if isinstance(stream, torch.cuda.Stream):
        return stream
    return torch.cuda.ExternalStream(_handle(stream), device=device)


def new_array(lib, shape, dtype, stream, like):
    """A new C-contiguous array of library ``lib`` (None: numba), on ``like``'s
    device, for use on the call's stream.  ``stream``: the caller's ``stream=``
    (None: the library's current stream)."""
    shape = tuple(shape)
    if lib == "torch":
        torch = _torch()
        dev = _torch_device(like)
        if stream is None:
            return torch.empty(shape, dtype=_torch_of[dtype], device=dev)
        # Allocated where it is used: PyTorch's allocator hands out blocks whose
        # earlier users ran on the allocating stream only.
        with torch.cuda.stream(_torch_stream(torch, stream, dev)):
            return torch.empty(shape, dtype=_torch_of[dtype], device=dev)
    if lib == "cupy":
        import cupy

        with cupy.cuda.Device(_cupy_device(like)):
            if stream is None:
                return cupy.empty(shape, dtype)
            cs = (
                stream
                if isinstance(stream, cupy.cuda.Stream)
                else cupy.cuda.ExternalStream(_handle(stream))
            )
            with cs:  # CuPy's pool keeps its free blocks per stream
                return cupy.empty(shape, dtype)
    return _pool_array(shape, dtype, stream_of(stream), like.device)
