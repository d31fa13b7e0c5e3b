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
import sys

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
    # (tens of microseconds).  A tensor that requires grad is read as its data (the
    # results never require grad, as torch.nonzero's).  Anything unusual goes through
    # that property, so that PyTorch's own errors (a sparse tensor) come out.
    if not _torch_dtypes:
        _torch()
    dtype = _torch_dtypes.get(t.dtype)
    if dtype is None or not t.is_cuda or t.is_sparse:
        return _read_cai(t.detach())
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
#
# A call's stream is one value from the API's door down: its raw handle, an int
# (0: the legacy default stream).  The conversions to the objects that numba,
# cuda.core and the array libraries want are made here, each once per handle.

_numba_streams = Bounded()  # handle -> numba stream
_core_streams = Bounded()  # handle -> cuda.core stream


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
        handle = 0 if SIM else int(stream)
    if not isinstance(handle, int) or isinstance(handle, bool):
        raise TypeError(
            f"{func}(): stream must be a numba, PyTorch or CuPy stream or a stream handle, "
            f"not {type(stream).__name__}"
        )
    return handle


def check_stream(stream, func):
    """TypeError naming ``func`` where ``stream=`` is no stream this target takes."""
    if stream is not None:
        _handle(stream, func)


def numba_stream(handle):
    """The numba stream of a raw handle (for numba's copies)."""
    s = _numba_streams.get(handle)
    if s is None:
        if SIM or not handle:
            s = cuda.legacy_default_stream()
        else:
            s = cuda.external_stream(handle)
        s = _numba_streams.put(handle, s)
    return s


def core_stream(handle):
    """The cuda.core stream of a raw handle (for launches and pool allocations)."""
    c = _core_streams.get(handle)
    if c is None:
        import cuda.core as cc

        if handle == 0:
            c = cc.LEGACY_DEFAULT_STREAM
        elif handle == 2:
            c = cc.PER_THREAD_DEFAULT_STREAM
        else:
            c = cc.Stream.from_handle(handle)
        c = _core_streams.put(handle, c)
    return c


def capturing(handle):
    """Whether work on the stream is being captured into a CUDA graph (also where
    the query itself fails, as it does on the legacy stream while another stream
    captures in the global mode: nothing unsafe then)."""
    if SIM:
        return False
    from cuda.bindings import driver

    err, status = driver.cuStreamIsCapturing(handle)
    return err != driver.CUresult.CUDA_SUCCESS or int(status) != 0


def _library_capturing():
    """Whether PyTorch's or CuPy's current stream is being captured (work on the
    legacy stream then breaks a global-mode capture on any other stream, so this is
    asked before the driver's query, which such a capture may refuse)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        if torch.cuda.is_current_stream_capturing():
            return True
    cupy = sys.modules.get("cupy")
    return cupy is not None and cupy.cuda.get_current_stream().is_capturing()


def refuse_capture(handle, func, what):
    """ValueError naming ``func`` where a capture is under way (on the call's stream,
    or on PyTorch's or CuPy's current stream): ``what`` (for example "reads the
    count back") cannot be part of a CUDA graph."""
    if SIM:
        return
    if _library_capturing() or (handle and capturing(handle)):
        raise ValueError(
            f"{func}(): this call {what}, which a CUDA graph cannot capture; make it "
            f"outside the capture, or capture nonzero_coordinates / slice1 on device "
            f"arrays (PyTorch, CuPy) instead"
        )


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
    ``torch.cuda.current_stream(i).cuda_stream``, which builds a Stream object),
    else that public query (``tests/test_frameworks.py`` checks that both agree,
    inside ``torch.cuda.stream`` blocks too)."""
    raw = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    current = torch.cuda.current_stream
    return lambda i: current(i).cuda_stream


def call_stream(lib, stream, v):
    """The raw handle of the stream a call of library ``lib`` reading ``v`` runs
    on: the caller's ``stream=``, else that library's current stream on ``v``'s
    device (numba and NumPy: the legacy default stream, 0)."""
    if stream is not None:
        return _handle(stream)
    if lib == "torch":
        return torch_current_stream(_torch())(_torch_device(v))
    if lib == "cupy":
        import cupy

        with cupy.cuda.Device(_cupy_device(v)):
            return cupy.cuda.get_current_stream().ptr
    return 0


# ---------------------------------------------------------------------------- new arrays

_pools: dict = {}  # device -> cuda.core DeviceMemoryResource (stream-ordered pool)
_graph_pools: dict = {}  # device -> cuda.core GraphMemoryResource (inside a capture)
_contexts: dict = {}  # device -> numba context (for numba arrays over pool memory)


_device_ids: dict = {}  # current context handle -> its device's index


def _device_id(device):
    """``device``, or where it is None the current context's device (numba's
    query of it, 1-2 us, made once per context)."""
    if device is not None:
        return device
    ctx = current_context()
    dev = _device_ids.get(ctx)
    if dev is None:
        dev = cuda.get_current_device().id
        if ctx:
            _device_ids[ctx] = dev
    return dev


def pool_buffer(nbytes, handle, device=None, func=None):
    """A cuda.core buffer of ``nbytes`` from the device's stream-ordered memory pool,
    allocated on the stream.  Inside a capture (where the pool refuses), a graph
    allocation for a call's own scratch, freed in the graph by
    ``buffer.close(core_stream(handle))``; for an output (``func`` names the
    call), a ValueError: memory that a graph allocates is the graph's, and an
    array over it would outlive it."""
    dev = _device_id(device)
    try:
        return _pool(dev).allocate(max(nbytes, 1), stream=core_stream(handle))
    except RuntimeError:
        if not capturing(handle):
            raise
    if func is not None:
        refuse_capture(handle, func, "allocates new numba device arrays (pass out= arrays)")
    mr = _graph_pools.get(dev)
    if mr is None:
        from cuda.core import GraphMemoryResource

        mr = _graph_pools[dev] = GraphMemoryResource(dev)
    return mr.allocate(max(nbytes, 1), stream=core_stream(handle))


def _pool(dev):
    mr = _pools.get(dev)
    if mr is None:
        from cuda.core import DeviceMemoryResource

        mr = _pools[dev] = DeviceMemoryResource(dev)
    return mr


def _numba_context(dev):
    ctx = _contexts.get(dev)
    if ctx is None:
        ctx = _contexts[dev] = cuda.current_context()
    return ctx


def _context_query():
    """The query of the current context's handle as an int (0 where none is
    current): ``cuCtxGetCurrent`` through cuda.bindings (0.3 us), or numba's slower
    view of the same with older bindings; under the simulator, a constant."""
    if SIM:
        return lambda: 1
    try:
        from cuda.bindings.driver import cuCtxGetCurrent
    except ImportError:  # pragma: no cover
        return lambda: cuda.current_context().handle.value
    return lambda: int(cuCtxGetCurrent()[1])


current_context = _context_query()


def numba_over(buf, shape, dtype, device=None):
    """A C-contiguous numba device array over the cuda.core buffer ``buf`` (which it
    keeps alive): numba's array built directly (``_internals.numba_device_array``),
    not through ``cuda.from_cuda_array_interface``, whose checks cost 10 us."""
    from ._internals import numba_device_array

    return numba_device_array(
        _numba_context(_device_id(device)), int(buf.handle), tuple(shape), dtype, buf
    )


def _pool_array(shape, dtype, handle, device, func="dmlnumba"):
    """A numba device array from the device's stream-ordered memory pool, allocated
    on stream ``handle`` and freed on it when the array is garbage."""
    if SIM:
        return cuda.device_array(shape, dtype)
    n = dtype.itemsize
    for d in shape:
        n *= d
    return numba_over(pool_buffer(n, handle, device, func), shape, dtype, device)


def _torch_stream(torch, handle, device):
    return torch.cuda.ExternalStream(handle, device=device)


def new_array(lib, shape, dtype, handle, like, func="dmlnumba"):
    """A new C-contiguous array of library ``lib`` (None: numba), on ``like``'s
    device, allocated for use on stream ``handle`` (the library's allocator
    hands out blocks whose earlier users ran on that stream only)."""
    shape = tuple(shape)
    if lib == "torch":
        torch = _torch()
        dev = _torch_device(like)
        if handle == torch_current_stream(torch)(dev):
            return torch.empty(shape, dtype=_torch_of[dtype], device=dev)
        with torch.cuda.stream(_torch_stream(torch, handle, dev)):
            return torch.empty(shape, dtype=_torch_of[dtype], device=dev)
    if lib == "cupy":
        import cupy

        with cupy.cuda.Device(_cupy_device(like)):
            if handle == cupy.cuda.get_current_stream().ptr:
                return cupy.empty(shape, dtype)
            with cupy.cuda.ExternalStream(handle):  # CuPy's pool keeps its free blocks per stream
                return cupy.empty(shape, dtype)
    refuse_capture(handle, func, "allocates new numba device arrays (pass out= arrays)")
    return _pool_array(shape, dtype, handle, like.device, func)


def library_io(lib, v):
    """For repeated default calls of library ``lib`` (PyTorch, CuPy or numba) on
    inputs on ``v``'s device: ``(address of an input, the current stream's
    handle, allocator, scratch)``; ``allocator(shape, dtype)`` gives a function of
    no arguments that makes a new C-contiguous array of that shape and dtype, and
    ``scratch`` is :func:`scratch`'s ``(alloc, release)`` for the library.  The
    fast counterpart of :func:`call_stream` and :func:`new_array` with
    ``stream=None``: bound built-ins (a method, ``functools.partial``,
    ``operator.attrgetter``) where the library has them, so a call runs few
    Python frames of its own.  CuPy calls reach it only where the current device
    is the input's (see ``dmlnumba.api._fresh_key``)."""
    if lib == "torch":
        torch = _torch()
        dev = _torch_device(v)
        empty, dtypes = torch.empty, _torch_of

        def allocator(shape, dt):
            # new_empty of a template with no elements (and no memory), which gives the
            # dtype and device without keywords to parse; the sizes unpacked, which
            # PyTorch parses faster than a tuple.
            return functools.partial(empty(0, dtype=dtypes[dt], device=dev).new_empty, *shape)

        return (
            torch.Tensor.data_ptr,
            functools.partial(torch_current_stream(torch), dev),
            allocator,
            scratch("torch", v),
        )
    if lib == "cupy":
        import cupy

        get = cupy.cuda.get_current_stream
        return (
            operator.attrgetter("data.ptr"),
            (lambda: get().ptr),
            # The ndarray constructor, which cupy.empty calls from a Python frame.
            (lambda shape, dt: functools.partial(cupy.ndarray, shape, dt)),
            scratch("cupy", v),
        )

    def numba_alloc(shape, dt):
        # Bound once: the pool's allocation on the legacy stream, and numba's array
        # made by copying one made once (numba_array_maker).
        from ._internals import numba_array_maker

        dev = _device_id(None)
        n = dt.itemsize
        for d in shape:
            n *= d
        take = functools.partial(_pool(dev).allocate, max(n, 1), stream=core_stream(0))
        make = numba_array_maker(_numba_context(dev), tuple(shape), dt)

        def new():
            buf = take()
            return make(int(buf.handle), buf)

        return new

    from ._internals import numba_pointer

    return (
        numba_pointer,
        (lambda: 0),
        numba_alloc,
        scratch(None, v),
    )


def scratch(lib, like):
    """``(alloc, release)`` for a call's look-back buffer: ``alloc(words, handle)``
    gives ``(address, keep)`` of ``words`` uint64 on the device, for use on that
    stream, and ``release(keep, handle)`` gives it back after the launch.  A
    PyTorch input's buffer comes from PyTorch's caching allocator (inside
    ``torch.cuda.graph``, from the graph's own pool); any other from the device's
    stream-ordered pool, freed on the stream after the launch (inside a capture,
    a graph allocation freed in the graph)."""
    if lib == "torch":
        torch = _torch()
        dev = _torch_device(like)
        new_empty = torch.empty(0, dtype=torch.int64, device=dev).new_empty

        def alloc_torch(words, handle):
            if handle == torch_current_stream(torch)(dev):
                t = new_empty(words)
            else:
                with torch.cuda.stream(_torch_stream(torch, handle, dev)):
                    t = new_empty(words)
            return t.data_ptr(), t

        return alloc_torch, _keep_until_freed
    device = like.device

    def alloc_pool(words, handle):
        buf = pool_buffer(8 * words, handle, device)
        return int(buf.handle), buf

    return alloc_pool, _close_on


def _keep_until_freed(keep, handle):
    """A PyTorch buffer is freed when its tensor is: PyTorch's allocator reuses the
    block only for work ordered after this stream's."""


def _close_on(buf, handle):
    buf.close(core_stream(handle))


def zero(ptr, nbytes, handle):
    """Zero ``nbytes`` (a multiple of 4) at ``ptr`` on the stream: a memset, which a
    CUDA graph captures."""
    from cuda.bindings import driver

    (err,) = driver.cuMemsetD32Async(ptr, 0, nbytes // 4, handle)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuMemsetD32Async failed: {err}")


def upload(host, handle, device=None):
    """A C-contiguous NumPy array copied to a new pool buffer on the stream:
    ``(buffer, address)``.  The copy reads pageable memory, so the driver has taken
    the bytes when this returns."""
    from cuda.bindings import driver

    buf = pool_buffer(host.nbytes, handle, device)
    ptr = int(buf.handle)
    if host.nbytes:
        (err,) = driver.cuMemcpyHtoDAsync(ptr, host.ctypes.data, host.nbytes, handle)
        if err != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuMemcpyHtoDAsync failed: {err}")
    return buf, ptr
