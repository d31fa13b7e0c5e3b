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

from collections.abc import Callable
from typing import Any

import numpy as np
from numba import cuda

from ..arrays import is_cuda_array, library
from ..layout import c_strides, extent
from ..validation import uint_of_size
from .devices import on, pointer_device
from .memory import numba_context, pool_buffer
from .sim import SIM
from .streams import (
    cupy_device,
    numba_stream,
    refuse_capture,
    torch_current_stream,
    torch_device,
    torch_dtypes,
    torch_module,
    torch_of,
    torch_stream,
)


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
        "home",
        "lib",
        "_span",
    )

    def __init__(
        self, obj, shape, strides, dtype, ptr, readonly, device=None, host=None, lib=None, home=None
    ):
        self.obj = obj
        self.lib = lib  # the array's library, as the API's door found it (None: numba, NumPy)
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
        # The device the call runs on (an ordinal; None only for a layout without an
        # array); ``home``: where the data is, when it must be copied there first.
        self.device = device
        self.host = host
        self.home = home
        self._span = None

    def span(self):
        """``(first, end)``: the byte addresses from its lowest element to past its highest."""
        if self._span is None:
            low, n, _, _ = extent(self.shape, self.strides, self.itemsize)
            self._span = (self.ptr + low, self.ptr + low + n * self.itemsize)
        return self._span


def strided_view(v, lows, spacing, shape):
    """The view of ``v`` of ``shape`` from index ``lows``, ``spacing`` elements apart."""
    ptr = v.ptr + sum(lo * s for lo, s in zip(lows, v.strides))
    strides = tuple(k * s for k, s in zip(spacing, v.strides))
    return DeviceView(v.obj, tuple(shape), strides, v.dtype, ptr, v.readonly, v.device, lib=v.lib)


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


def _read_torch(t):
    # What torch.Tensor.__cuda_array_interface__ says, without its Python property
    # (which builds the whole interface dict on every read: host time that small
    # calls notice).  A tensor that requires grad is read as its data (the
    # results never require grad, as torch.nonzero's).  Anything unusual goes through
    # that property, so that PyTorch's own errors (a sparse tensor) come out.
    if not torch_dtypes:
        torch_module()
    dtype = torch_dtypes.get(t.dtype)
    if dtype is None or not t.is_cuda or t.is_sparse:
        return _read_cai(t.detach())
    isz = dtype.itemsize
    return t.data_ptr(), tuple(t.shape), tuple(s * isz for s in t.stride()), dtype, False


# Keyed by library(), which is None for anything not PyTorch, CuPy or JAX.
_readers: dict[str | None, Callable[[Any], tuple]] = {"torch": _read_torch, "cupy": _read_cupy}


def device_of(obj, lib, ptr):
    """The ordinal of the device holding array ``obj`` of library ``lib`` (its first
    element at ``ptr``): PyTorch's and CuPy's own answer, else the driver's for the
    address (numba's arrays too: one wrapping foreign memory carries the context
    current when it was wrapped, not necessarily its memory's)."""
    if SIM:
        return 0
    if lib == "torch":
        return obj.get_device()
    if lib == "cupy":
        return obj.data.device_id
    return pointer_device(ptr)


def view_of(obj, lib=None):
    """A :class:`DeviceView` of a CUDA array of library ``lib`` (:func:`~dmlnumba.arrays.library`'s
    answer, which the caller has), on the device its memory is on."""
    ptr, shape, strides, dtype, readonly = _readers.get(lib, _read_cai)(obj)
    return DeviceView(obj, shape, strides, dtype, ptr, readonly, device_of(obj, lib, ptr), lib=lib)


def elsewhere(v, device):
    """``v``, an input on another device than ``device``, staged to be copied there
    after validation (as a NumPy input is staged for upload)."""
    return DeviceView(
        v.obj, v.shape, v.strides, v.dtype, v.ptr, v.readonly, device, lib=v.lib, home=v.device
    )


def to_jax(a, device):
    """A new result ``a`` (a CUDA array on ``device``) as a JAX array, through DLPack,
    once the call's work is done: JAX reads on streams of its own, and a JAX input's
    call runs on the legacy default stream."""
    import jax
    from cuda.core.utils import StridedMemoryView

    with on(device):
        numba_stream(0).synchronize()
    return jax.dlpack.from_dlpack(StridedMemoryView.from_cuda_array_interface(a, -1))


def describe(a, name, func):
    if isinstance(a, DeviceView):
        return a
    if not is_cuda_array(a):
        raise TypeError(
            f"{func}(): {name} must be a CUDA array (CuPy, PyTorch, Numba), not {type(a).__name__}"
        )
    return check_aligned(view_of(a, lib=library(a)), name, func)  # an output: its own library


def check_aligned(v, name, func):
    """``v``, a caller's CUDA array, where its first element's address is a multiple
    of its item size (so is every element's: its strides are, ``check_strides``);
    else a ValueError.  A view at a byte offset into other memory is not: the GPU
    faults on its loads and stores (``misaligned address``), as it does in CuPy's
    own kernels, and every later CUDA call of the process then fails too."""
    if v.size and v.ptr % v.itemsize:
        raise ValueError(
            f"{func}(): {name} starts at address {v.ptr:#x}, not a multiple of its item "
            f"size {v.itemsize}: the GPU cannot load or store its items there; pass a copy "
            f"in new memory"
        )
    return v


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
    # Set by host_view (annotations only: no class attributes).
    __array_interface__: dict[str, Any]
    _owner: Flat


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
    v = view_of(obj, lib=library(obj))
    if v.size == 0:
        return np.empty(v.shape, v.dtype)
    p, span, base, _ = flat(v)
    with on(v.device):
        f = Flat(obj, p, span, uint_of_size(v.itemsize))
        buf = numba_array(f).copy_to_host().view(v.dtype)
    return np.lib.stride_tricks.as_strided(buf[base:], v.shape, v.strides)


def numba_over(buf, shape, dtype, device):
    """A C-contiguous numba device array over the cuda.core buffer ``buf`` (which it
    keeps alive): numba's array built directly (``_internals.numba_device_array``),
    not through ``cuda.from_cuda_array_interface``, whose checks cost more than a
    small call's launch."""
    from .._internals import numba_device_array

    return numba_device_array(numba_context(device), int(buf.handle), tuple(shape), dtype, buf)


def _pool_array(shape, dtype, handle, device, func="dmlnumba"):
    """A numba device array from the device's stream-ordered memory pool, allocated
    on stream ``handle`` and freed on it when the array is garbage."""
    if SIM:
        return cuda.device_array(shape, dtype)
    n = dtype.itemsize
    for d in shape:
        n *= d
    return numba_over(pool_buffer(n, handle, device, func), shape, dtype, device)


def new_array(lib, shape, dtype, handle, like, func="dmlnumba"):
    """A new C-contiguous array of library ``lib`` (None: numba), on ``like``'s
    device, allocated for use on stream ``handle`` (the library's allocator
    hands out blocks whose earlier users ran on that stream only)."""
    shape = tuple(shape)
    if lib == "torch":
        torch = torch_module()
        dev = torch_device(like)
        if handle == torch_current_stream(torch)(dev):
            return torch.empty(shape, dtype=torch_of[dtype], device=dev)
        with torch.cuda.stream(torch_stream(torch, handle, dev)):
            return torch.empty(shape, dtype=torch_of[dtype], device=dev)
    if lib == "cupy":
        import cupy

        with cupy.cuda.Device(cupy_device(like)):
            if handle == cupy.cuda.get_current_stream().ptr:
                return cupy.empty(shape, dtype)
            with cupy.cuda.ExternalStream(handle):  # CuPy's pool keeps its free blocks per stream
                return cupy.empty(shape, dtype)
    refuse_capture(handle, func, "allocates new numba device arrays (pass out= arrays)")
    return _pool_array(shape, dtype, handle, like.device, func)
