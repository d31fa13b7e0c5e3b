"""The CUDA target: ``__cuda_array_interface__`` arrays in, kernels on a stream, device arrays out.

Arguments arrive validated (see :mod:`dmlnumba.api`).  Inputs are read in place
through their CUDA array interface, whatever their strides; nothing is copied
and nothing waits for the GPU.  The CAI ``stream`` field of foreign arrays is
not synchronized on: the work is ordered on ``stream=`` (default: the legacy
default stream, which is also what PyTorch and CuPy use unless told otherwise).
NumPy inputs are copied to the device first.
"""

import contextlib
import threading

import numpy as np
from numba import cuda

from . import config
from . import kernels_cuda as K
from .dispatch import _is_cuda_array
from .layout import c_strides, extent, slice_geometry
from .validation import nonzero_mask, uint_of_size
from .validation import shares_memory as shares_memory_exact

name = "cuda"
#: Largest nonzero input: the look-back status words count to 2**VALUE_BITS - 1.
MAX_ELEMENTS = (1 << K.VALUE_BITS) - 1

# numba warns on every launch of a small grid; for small inputs that is expected,
# and the warning machinery costs more than the launch.  Respect an explicit setting.
if "NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS" not in __import__("os").environ:
    from numba import config as _nbconfig
    _nbconfig.CUDA_LOW_OCCUPANCY_WARNINGS = 0
_streams = {}
_scratch = {}


class DeviceView:
    """A NumPy-like description of a device array (or of a NumPy array to upload)."""

    __slots__ = ("obj", "shape", "strides", "dtype", "ptr", "readonly", "ndim", "size",
                 "itemsize", "device", "host", "_span")

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


_torch_dtypes = None


def _read_torch(t):
    # What torch.Tensor.__cuda_array_interface__ says, without its Python property
    # (tens of microseconds).  Anything unusual goes through that property, so that
    # PyTorch's own errors (a tensor that requires grad, a sparse one) come out.
    global _torch_dtypes
    if _torch_dtypes is None:
        import torch
        _torch_dtypes = {getattr(torch, n): np.dtype(n) for n in (
            "float64", "float32", "float16", "int64", "int32", "int16", "int8",
            "uint64", "uint32", "uint16", "uint8", "bool") if hasattr(torch, n)}
    dtype = _torch_dtypes.get(t.dtype)
    if dtype is None or t.requires_grad or not t.is_cuda or t.is_sparse:
        return _read_cai(t)
    isz = dtype.itemsize
    return t.data_ptr(), tuple(t.shape), tuple(s * isz for s in t.stride()), dtype, False


_readers = {}


def _reader(tp):
    r = _readers.get(tp)
    if r is None:
        mod = getattr(tp, "__module__", "") or ""
        if tp.__name__ == "ndarray" and mod.split(".")[0] == "cupy":
            r = _read_cupy
        elif tp.__name__ == "Tensor" and mod.split(".")[0] == "torch":
            r = _read_torch
        else:
            r = _read_cai
        _readers[tp] = r
    return r


def _view_of(obj, device=None):
    ptr, shape, strides, dtype, readonly = _reader(type(obj))(obj)
    return DeviceView(obj, shape, strides, dtype, ptr, readonly, device)


class _Flat:
    """A 1-d CAI exporter over ``span`` items starting at ``ptr`` (keeps ``owner`` alive)."""

    __slots__ = ("__cuda_array_interface__", "_owner")

    def __init__(self, owner, ptr, span, dtype):
        self._owner = owner
        self.__cuda_array_interface__ = {"shape": (span,), "strides": None, "typestr": dtype.str,
                                         "data": (ptr, False), "version": 3, "stream": None}


is_array = _is_cuda_array


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
    """``(ptr, span, base, element strides)`` of a non-empty device array: the
    address of its lowest-addressed element, the items from there to its highest,
    the index of element 0 among them, and its strides in items."""
    low, span, base, es = extent(v.shape, v.strides, v.itemsize)
    return v.ptr + low, span, base, es


def _flat_arg(v, ptr, span, itemsize=None):
    """A flat view of ``span`` items of ``v`` from ``ptr`` as a kernel argument (see
    :func:`_arg`); ``itemsize``: read as items of that size instead (whole ones)."""
    if not K.SIM:
        return ptr
    isz = itemsize or v.itemsize
    return _arg(_Flat(v.obj, ptr, span * v.itemsize // isz, uint_of_size(isz)))


_geoms = {}


def _where(s):
    """A cache key for (current context, stream): device buffers cached for one
    context must never reach another."""
    if K.SIM:
        return (0, id(s))
    ctx = _current_context()
    if not ctx:  # none yet: numba makes the device's primary context current
        cuda.current_context()
        ctx = _current_context()
    return (ctx, int(s))


_drv = None


def _current_context():
    global _drv
    if _drv is None:
        try:
            from cuda.bindings import driver as _drv
        except ImportError:  # older bindings: numba's (slower) view of the same
            _drv = False
    if _drv:
        return int(_drv.cuCtxGetCurrent()[1])
    return cuda.current_context().handle.value


def _geometry(rows, scalars, s, where):
    """A parameter block (:func:`kernels_cuda.pack_params`) as a kernel argument: on
    a GPU a cached device copy (one per context and stream, uploaded on that stream
    the first time), passed by address.  It holds only layout integers (shapes,
    strides, offsets relative to the arrays' starts), so repeated calls over arrays
    of one layout reuse it."""
    if K.SIM:
        return K.pack_params(rows, scalars)
    key = (where, rows, scalars)
    d = _geoms.get(key)
    if d is None:
        if len(_geoms) >= 4096:
            _geoms.clear()
        d = cuda.to_device(K.pack_params(rows, scalars), stream=s)
        d = _geoms[key] = (d, d.__cuda_array_interface__["data"][0])
    return d[1]


class _Scratch:
    """The look-back scratch of one (context, stream): a tile counter that runs on
    across calls, then one status word per tile.  Calls on one stream run in
    order, so they share it; each call tags its words with a new epoch, so the
    words need no zeroing between calls (only when the epochs wrap)."""

    __slots__ = ("buf", "words", "ptr", "counter", "epoch")

    def __init__(self, words, s):
        self.buf = cuda.device_array(words, np.uint64, stream=s)
        self.words = words
        self.ptr = 0 if K.SIM else self.buf.__cuda_array_interface__["data"][0]
        self.reset(s)

    def reset(self, s):
        if K.SIM:
            self.buf.copy_to_device(np.zeros(self.words, np.uint64))
        else:
            from numba.cuda.cudadrv.driver import device_memset
            device_memset(self.buf, 0, self.words * 8, stream=s)
        self.counter = 0
        self.epoch = 0


#: Held from reserving a call's tiles to its launch, so that threads sharing a
#: stream launch in the order of their reservations.
_lock = threading.Lock()


def _reserve(ntiles, s, where):
    """``(scratch, epoch, tile_base)`` for a launch of ``ntiles`` tiles (hold ``_lock``)."""
    sc = _scratch.get(where)
    if sc is None or sc.words < ntiles + 1:
        sc = _scratch[where] = _Scratch(max(2 * (ntiles + 1), 1024), s)
    if sc.epoch >= (1 << K.EPOCH_BITS) - 1:
        sc.reset(s)
    sc.epoch += 1
    base = sc.counter
    sc.counter += ntiles
    return sc, sc.epoch, base


def device_count():
    return len(cuda.gpus)


def overlaps(a, b):
    """Whether ``a`` and ``b`` may share memory (their address ranges meet; a yes
    costs a copy).  A staged NumPy input is on the host, apart from any output."""
    if a.host is not None or b.host is not None:
        return False
    return _overlaps(a, b)


def shares_memory(a, b):
    """Whether ``a`` and ``b`` share memory (exact)."""
    return shares_memory_exact(a.ptr, a.shape, a.strides, a.itemsize,
                               b.ptr, b.shape, b.strides, b.itemsize)


def copy_into(src, dst, stream):
    """``dst[...] = src`` on the device, for views of the same number of elements
    (``src`` C-contiguous, as the call's own new arrays are)."""
    shape = tuple(dst.shape)
    strides = tuple(s * src.itemsize for s in c_strides(shape))
    v = DeviceView(src.obj, shape, strides, src.dtype, src.ptr, False, src.device)
    slice1(v, (0,) * len(shape), (1,) * len(shape), dst, stream)


def leading_rows(coords, n):
    """The first ``n`` rows of a coordinates matrix ((R, N) or DirectML's padded shapes)."""
    shape = tuple(coords.shape[:-2]) + (n, coords.shape[-1])
    return DeviceView(coords.obj, shape, coords.strides, coords.dtype, coords.ptr,
                      coords.readonly, coords.device)


def _overlaps(a, b):
    if a.size == 0 or b.size == 0:
        return False
    a0, a1 = a.span()
    b0, b1 = b.span()
    return a0 < b1 and b0 < a1


_plans = {}


def _plan(key, make):
    p = _plans.get(key)
    if p is None:
        if len(_plans) >= 4096:
            _plans.clear()
        p = _plans[key] = make()
    return p


def _slice_plan(x, starts, steps, out):
    """The launch of a slice1 of this layout: ``(src low, src span, dst low, dst span,
    narrow, wide)``, each of the last two ``(bits, grid, block, rows, scalars)``;
    ``wide`` (or None) copies 8-byte words where the inner dimension is contiguous
    in both arrays and every row starts on a multiple of 8 bytes."""
    slo, sspan, sbase, sstr = extent(x.shape, x.strides, x.itemsize)
    dlo, dspan, dbase, dstr = extent(out.shape, out.strides, out.itemsize)
    geom, off = slice_geometry(out.shape, starts, steps, sstr, dstr)
    shape, ss, ds = (tuple(int(v) for v in r) for r in geom)
    sb, db = sbase + off, dbase
    narrow = _slice_launch(8 * x.itemsize, shape, ss, ds, sb, db)
    wide = None
    k = 8 // x.itemsize
    if k > 1 and ss[-1] == 1 and ds[-1] == 1 and shape[-1] % k == 0 and sb % k == 0 \
            and db % k == 0 and all(v % k == 0 for v in ss[:-1] + ds[:-1]):
        wide = _slice_launch(64, shape[:-1] + (shape[-1] // k,), tuple(v // k for v in ss[:-1]) + (1,),
                             tuple(v // k for v in ds[:-1]) + (1,), sb // k, db // k)
    return slo, sspan, dlo, dspan, narrow, wide


def _slice_launch(bits, shape, ss, ds, sb, db):
    ndim = len(shape)
    inner = shape[-1]
    threads = config.CUDA_THREADS
    items = config.CUDA_SLICE_ITEMS
    # Enough threads across a row that each copies about ``items`` elements of it.
    tx = min(threads, max(32, 32 * -(-inner // (32 * items))))
    ty = max(1, threads // tx)
    seg = tx * items
    nseg = -(-inner // seg)
    rows = 1
    for n in shape[:-1]:
        rows *= n
    # Up to CUDA_SLICE_ROWS rows a tile, fewer where that leaves fewer than about
    # CUDA_SLICE_TILES tiles (too few to keep the GPU's memory system busy).
    nrows = max(1, min(config.CUDA_SLICE_ROWS, rows * nseg // config.CUDA_SLICE_TILES))
    ntiles = -(-rows // nrows) * nseg
    blocks = min(-(-ntiles // ty), 1 << 22)
    return (bits, blocks, (tx, ty), (shape, ss, ds),
            (sb, db, ndim, seg, nseg, rows, nrows, ntiles))


def slice1(x, starts, steps, out, stream, fresh=False):
    s = stream_of(stream)
    with _context(x):
        x = _materialize(x, s)
        if not fresh and _overlaps(x, out):
            tmp = _view_of(cuda.device_array(out.shape, out.dtype, stream=s), x.device)
            slice1(x, starts, steps, tmp, stream)
            slice1(tmp, (0,) * out.ndim, (1,) * out.ndim, out, stream)
            return
        key = ("slice", x.shape, x.strides, x.itemsize, out.shape, out.strides, starts, steps,
               config.CUDA_THREADS, config.CUDA_SLICE_ITEMS, config.CUDA_SLICE_ROWS,
               config.CUDA_SLICE_TILES)
        slo, sspan, dlo, dspan, narrow, wide = _plan(
            key, lambda: _slice_plan(x, starts, steps, out))
        sp, dp = x.ptr + slo, out.ptr + dlo
        how = wide if wide is not None and not (sp | dp) & 7 else narrow
        bits, blocks, block, rows, scalars = how
        where = _where(s)
        g = _geometry(rows, scalars, s, where)
        K.launch(K.kernel("slice", bits), blocks, block, s,
                 (_flat_arg(x, sp, sspan, bits // 8), _flat_arg(out, dp, dspan, bits // 8), g),
                 where[0])


def _nonzero_plan(x, width, count, coords, limit):
    """``(src low, span, rows, scalars, ntiles, threads, mask, count low, out low, out span)``."""
    slo, sspan, sbase, sstr = extent(x.shape, x.strides, x.itemsize)
    clo, _, cbase, _ = extent(count.shape, count.strides, count.itemsize)
    if width:
        olo, ospan, obase, ostr = extent(coords.shape, coords.strides, coords.itemsize)
        rs, cs = ostr[-2], ostr[-1]
    else:  # no coordinates to write: the count's memory stands in
        olo, ospan, obase, rs, cs = clo, 1, cbase, 0, 0
    mask = int(nonzero_mask(x.dtype))
    if mask >= 1 << 63 and not K.SIM:  # launch arguments are signed 64-bit: the same bits
        mask -= 1 << 64
    threads = config.CUDA_THREADS
    # Tiles: about CUDA_NONZERO_TILES where the input allows (enough to fill the
    # GPU, few enough that looking back stays short), each lane taking
    # CUDA_NONZERO_MIN_ITEMS to CUDA_NONZERO_ITEMS steps, in multiples of 4 (the
    # kernel's four-step path).
    items = min(config.CUDA_NONZERO_ITEMS, K.MAX_MASKS // (threads // 32))
    items = max(min(config.CUDA_NONZERO_MIN_ITEMS, items),
                min(items, x.size // (threads * config.CUDA_NONZERO_TILES) // 4 * 4))
    ntiles = -(-x.size // (threads * items))
    rows = (x.shape, sstr)
    scalars = (sbase, x.ndim, x.size, items, obase, rs, cs, width, cbase,
               config.CUDA_NONZERO_LOOKBACK, config.CUDA_NONZERO_BACKOFF, limit)
    # 16-byte loads in the count pass: a C-contiguous input (element i at flat
    # position sbase + i) whose first element is 16-byte aligned (checked per call).
    cs_ = c_strides(tuple(x.shape))
    vec = config.CUDA_NONZERO_VECTOR and all(
        n == 1 or a == b for n, a, b in zip(x.shape, sstr, cs_))
    first = slo + sbase * x.itemsize if vec else None
    return slo, sspan, rows, scalars, ntiles, threads, mask, clo, olo, ospan, first


def nonzero(x, width, count, coords, stream, limit=None):
    """``limit``: the rows to write at most (default: every element's)."""
    s = stream_of(stream)
    if limit is None:
        limit = x.size
    if not width or not coords.size or not limit:  # no coordinates to write
        width = limit = 0
    with _context(x):
        x = _materialize(x, s)
        if x.size == 0:
            cp, span, cbase, _ = flat(count)
            f = _Flat(count.obj, cp, span, uint_of_size(count.itemsize))
            if K.SIM:
                _arg(f)[cbase] = 0
            else:
                zero = np.zeros(1, uint_of_size(count.itemsize))
                cuda.as_cuda_array(f)[cbase:cbase + 1].copy_to_device(zero, stream=s)
            return
        key = ("nonzero", x.shape, x.strides, x.dtype, width, count.shape, count.strides,
               count.itemsize, coords.shape, coords.strides, limit, config.CUDA_THREADS,
               config.CUDA_NONZERO_ITEMS, config.CUDA_NONZERO_MIN_ITEMS, config.CUDA_NONZERO_TILES,
               config.CUDA_NONZERO_VECTOR,
               config.CUDA_NONZERO_LOOKBACK, config.CUDA_NONZERO_BACKOFF)
        slo, sspan, rows, scalars, ntiles, threads, mask, clo, olo, ospan, first = _plan(
            key, lambda: _nonzero_plan(x, width, count, coords, limit))
        vec = first is not None and (x.ptr + first) & 15 == 0
        where = _where(s)
        g = _geometry(rows, scalars, s, where)
        k = K.kernel("nonzero", 8 * x.itemsize, 8 * count.itemsize)
        out = coords if width else count
        src_arg = _flat_arg(x, x.ptr + slo, sspan)
        out_arg = _flat_arg(out, out.ptr + olo, ospan)
        cnt_arg = _flat_arg(count, count.ptr + clo, 1)
        with _lock:
            sc, epoch, base = _reserve(ntiles, s, where)
            status = (sc.buf,) if K.SIM else K.array_arg(sc.ptr, sc.words, 8)
            args = (src_arg, mask, g) + status + (out_arg, cnt_arg, epoch, base, int(vec))
            K.launch(k, ntiles, threads, s, args, where[0])


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
    p, span, base, _ = flat(v)
    buf = _device_array(_Flat(obj, p, span, uint_of_size(v.itemsize))).copy_to_host().view(v.dtype)
    return np.lib.stride_tricks.as_strided(buf[base:], v.shape, v.strides)
