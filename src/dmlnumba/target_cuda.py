"""The CUDA target: ``__cuda_array_interface__`` arrays in, kernels on a stream, device arrays out.

Arguments arrive validated (see :mod:`dmlnumba.api`).  Inputs are read in place
through their CUDA array interface, whatever their strides; nothing is copied
and nothing waits for the GPU.  The CAI ``stream`` field of foreign arrays is
not synchronized on: the work is ordered on ``stream=`` (default: the legacy
default stream, which is also what PyTorch and CuPy use unless told otherwise).
NumPy inputs are copied to the device first.
"""

import contextlib

import numpy as np
from numba import cuda

from . import config
from . import kernels_cuda as K
from .layout import c_strides, extent, slice_geometry
from .validation import nonzero_mask, uint_of_size

name = "cuda"

# numba warns on every launch of a small grid; for small inputs that is expected,
# and the warning machinery costs more than the launch.  Respect an explicit setting.
if "NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS" not in __import__("os").environ:
    from numba import config as _nbconfig
    _nbconfig.CUDA_LOW_OCCUPANCY_WARNINGS = 0
_masks = {}
_streams = {}
_scratch = {}


class DeviceView:
    """A NumPy-like description of a device array (or of a NumPy array to upload)."""

    __slots__ = ("obj", "shape", "strides", "dtype", "ptr", "readonly", "ndim", "size",
                 "itemsize", "device", "host")

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


def _cai(obj):
    """``obj.__cuda_array_interface__``; under the simulator, whose device arrays wrap
    host arrays and export no CAI, the wrapped array's interface (host pointers
    play the part of device pointers there)."""
    try:
        return obj.__cuda_array_interface__
    except AttributeError:
        if K.SIM and hasattr(obj, "_ary"):
            ai = obj._ary.__array_interface__
            return {"shape": ai["shape"], "strides": ai["strides"], "typestr": ai["typestr"],
                    "data": ai["data"], "version": 3}
        raise


def _view_of(obj, device=None):
    cai = _cai(obj)
    shape = tuple(cai["shape"])
    dtype = np.dtype(cai["typestr"])
    strides = cai.get("strides")
    if strides is None:
        strides = tuple(s * dtype.itemsize for s in c_strides(shape))
    ptr, readonly = cai["data"]
    return DeviceView(obj, shape, tuple(strides), dtype, ptr, bool(readonly), device)


class _Flat:
    """A 1-d CAI exporter over ``span`` items starting at ``ptr`` (keeps ``owner`` alive)."""

    __slots__ = ("__cuda_array_interface__", "_owner")

    def __init__(self, owner, ptr, span, dtype):
        self._owner = owner
        self.__cuda_array_interface__ = {"shape": (span,), "strides": None, "typestr": dtype.str,
                                         "data": (ptr, False), "version": 3, "stream": None}


def is_array(a):
    return hasattr(a, "__cuda_array_interface__") or (K.SIM and type(a).__name__ == "FakeCUDAArray")


def _arg(f):
    """A flat view as a kernel argument: its raw device address on a GPU (the
    kernels take pointers, which launch without per-call conversion); under the
    simulator, a NumPy view of the (host) memory it describes."""
    if not K.SIM:
        return f.__cuda_array_interface__["data"][0]
    holder = _HostView()
    cai = f.__cuda_array_interface__
    holder.__array_interface__ = {"shape": cai["shape"], "typestr": cai["typestr"],
                                  "data": cai["data"], "version": 3}
    holder._owner = f
    return np.asarray(holder)


class _HostView:
    pass


def _device_array(f):
    return cuda.as_cuda_array(f) if not K.SIM else cuda.to_device(_arg(f))


def describe(a, name, func):
    if isinstance(a, DeviceView):
        return a
    if not is_array(a):
        raise TypeError(f"{func}(): {name} must be a CUDA array (CuPy, PyTorch, Numba), "
                        f"not {type(a).__name__}")
    return _view_of(a)


def is_writeable(v):
    return not v.readonly


def as_device_array(x, device, func, name):
    """The input as a :class:`DeviceView`; a NumPy input is staged for upload after
    validation (nothing is copied before the checks pass)."""
    if isinstance(x, np.ndarray):
        return DeviceView(x, x.shape, x.strides, x.dtype, None, False, device, host=x)
    return _view_of(x, device)


def _context(v):
    if v.device is None:
        return contextlib.nullcontext()
    return cuda.gpus[v.device]


def stream_of(stream):
    """A numba stream for ``stream=``: None (the legacy default stream), a numba
    stream, or a foreign stream (PyTorch's ``cuda_stream``, CuPy's ``ptr``, a raw handle)."""
    if stream is None:
        s = _streams.get(None)
        if s is None:
            s = _streams[None] = cuda.legacy_default_stream()
        return s
    if hasattr(stream, "handle") and hasattr(stream, "synchronize") and hasattr(stream, "auto_synchronize"):
        return stream  # already a numba stream
    handle = getattr(stream, "cuda_stream", None)
    if handle is None:
        handle = getattr(stream, "ptr", None)
    if handle is None and isinstance(stream, int) and not isinstance(stream, bool):
        handle = stream
    if handle is None:
        raise TypeError(f"stream must be a numba, PyTorch or CuPy stream or a stream handle, "
                        f"not {type(stream).__name__}")
    s = _streams.get(handle)
    if s is None:
        s = _streams[handle] = cuda.external_stream(handle) if handle else cuda.legacy_default_stream()
    return s


def _materialize(v, s):
    """Upload a staged NumPy input."""
    if v.host is None:
        return v
    h = np.ascontiguousarray(v.host)
    if any(st < 0 for st in h.strides):  # contiguous, but a reversed size-1 dimension,
        h = h.copy()                     # which numba's to_device rejects
    d = cuda.to_device(h, stream=s)
    w = _view_of(d, v.device)
    return w


def empty(shape, dtype, stream, like):
    with _context(like):
        return cuda.device_array(shape, dtype, stream=stream_of(stream))


def flat(v):
    """``(flat CAI view, base, element strides)`` of a non-empty device array."""
    low, span, base, es = extent(v.shape, v.strides, v.itemsize)
    return _Flat(v.obj, v.ptr + low, span, uint_of_size(v.itemsize)), base, es


_geoms = {}


def _where(s):
    """A cache key for (current context, stream): device buffers cached for one
    context must never reach another."""
    if K.SIM:
        return (0, id(s))
    try:
        from cuda.bindings import driver as _drv
        err, ctx = _drv.cuCtxGetCurrent()
        ctx = int(ctx)
    except Exception:  # older bindings: numba's (slower) view of the same
        ctx = cuda.current_context().handle.value
    return (ctx, int(s))


def _geometry(packed, s, where):
    """A parameter block as a kernel argument: on a GPU a cached device copy (one per
    context and stream, uploaded on that stream the first time), passed by address.
    It holds only layout integers (shapes, strides, offsets relative to the arrays'
    starts), so repeated calls over arrays of one layout reuse it."""
    if K.SIM:
        return packed
    key = (where, packed.tobytes())
    d = _geoms.get(key)
    if d is None:
        if len(_geoms) >= 4096:
            _geoms.clear()
        d = _geoms[key] = cuda.to_device(packed, stream=s)
    return d.__cuda_array_interface__["data"][0]


def _zeroed_scratch(n, s, key):
    """The per-(context, stream) look-back scratch, its first ``n`` words zeroed on
    ``s``.  Calls on one stream run in order, so they can share it."""
    buf = _scratch.get(key)
    if buf is None or buf.shape[0] < n:
        buf = _scratch[key] = cuda.device_array(max(n, 1024), np.uint64, stream=s)
    if K.SIM:
        buf.copy_to_device(np.zeros(buf.shape[0], np.uint64))
    else:
        from numba.cuda.cudadrv.driver import device_memset
        device_memset(buf, 0, n * 8, stream=s)
    return buf


def _overlaps(a, b):
    if a.size == 0 or b.size == 0:
        return False
    la, sa, _, _ = extent(a.shape, a.strides, a.itemsize)
    lb, sb, _, _ = extent(b.shape, b.strides, b.itemsize)
    a0, b0 = a.ptr + la, b.ptr + lb
    return a0 < b0 + sb * b.itemsize and b0 < a0 + sa * a.itemsize


def slice1(x, starts, steps, out, stream, fresh=False):
    s = stream_of(stream)
    with _context(x):
        x = _materialize(x, s)
        if not fresh and _overlaps(x, out):
            tmp = _view_of(cuda.device_array(out.shape, out.dtype, stream=s), x.device)
            slice1(x, starts, steps, tmp, stream)
            slice1(tmp, [0] * out.ndim, [1] * out.ndim, out, stream)
            return
        src, sbase, sstr = flat(x)
        dst, dbase, dstr = flat(out)
        geom, off = slice_geometry(out.shape, starts, steps, sstr, dstr)
        ndim = geom.shape[1]
        inner = int(geom[0, ndim - 1])
        threads = config.CUDA_THREADS
        tx = min(threads, 32 * -(-inner // 32))
        ty = max(1, threads // tx)
        seg = tx * config.CUDA_SLICE_ITEMS
        nseg = -(-inner // seg)
        rows = 1
        for n in geom[0, :ndim - 1]:
            rows *= int(n)
        nrows = config.CUDA_SLICE_ROWS
        ntiles = -(-rows // nrows) * nseg
        blocks = min(-(-ntiles // ty), 1 << 22)
        g = _geometry(K.pack_params((geom[0], geom[1], geom[2]),
                                    (sbase + off, dbase, ndim, seg, nseg, rows, nrows, ntiles)),
                      s, _where(s))
        K.launch(K.kernel("slice", 8 * x.itemsize), blocks, (tx, ty), s, (_arg(src), _arg(dst), g))


def nonzero(x, width, count, coords, stream):
    s = stream_of(stream)
    with _context(x):
        x = _materialize(x, s)
        cnt, cbase, _ = flat(count)
        if x.size == 0:
            zero = np.zeros(1, uint_of_size(count.itemsize))
            if K.SIM:
                _arg(cnt)[cbase] = 0
            else:
                cuda.as_cuda_array(cnt)[cbase:cbase + 1].copy_to_device(zero, stream=s)
            return
        src, sbase, sstr = flat(x)
        if width:
            out, obase, ostr = flat(coords)
            rs, cs = ostr[-2], ostr[-1]
        else:
            out, obase, rs, cs = cnt, cbase, 0, 0
        mask = _masks.get(x.dtype)
        if mask is None:
            mask = _masks[x.dtype] = uint_of_size(x.itemsize).type(nonzero_mask(x.dtype))
        threads = config.CUDA_THREADS
        # About 256 tiles where the input allows (enough to fill the GPU, few enough
        # that looking back stays short), each lane taking 4 to CUDA_NONZERO_ITEMS
        # steps, in multiples of 4 (the kernel's four-step path).
        items = min(config.CUDA_NONZERO_ITEMS, K.MAX_MASKS // (threads // 32))
        items = max(min(4, items), min(items, x.size // (threads * 256) // 4 * 4))
        ntiles = -(-x.size // (threads * items))
        where = _where(s)
        status = _zeroed_scratch(ntiles + 1, s, where)
        g = _geometry(K.pack_params((x.shape, sstr),
                                    (sbase, x.ndim, x.size, items, obase, rs, cs, width, cbase)),
                      s, where)
        K.launch(K.kernel("nonzero", 8 * x.itemsize, 8 * count.itemsize), ntiles, threads, s,
                 (_arg(src), mask, g, status, _arg(out), _arg(cnt)))


def read_count(count, stream):
    s = stream_of(stream)
    h = count.copy_to_host(stream=s)
    s.synchronize()
    return int(h.reshape(-1)[0])


def copy(a, stream):
    s = stream_of(stream)
    out = cuda.device_array(a.shape, a.dtype, stream=s)
    if a.size:
        out.copy_to_device(a, stream=s)
    return out


def to_host(obj):
    """A CUDA array as a NumPy array with the same strides (a copy of the bytes it spans)."""
    v = _view_of(obj)
    if v.size == 0:
        return np.empty(v.shape, v.dtype)
    f, base, _ = flat(v)
    buf = _device_array(f).copy_to_host().view(v.dtype)
    return np.lib.stride_tricks.as_strided(buf[base:], v.shape, v.strides)
