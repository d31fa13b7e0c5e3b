"""The CUDA target: plans made once per call shape, bound per call.

Arguments arrive validated (see :mod:`dmlnumba.api`) and described by
:class:`~dmlnumba.device_arrays.DeviceView`; the stream arrives as its raw
handle (:func:`~dmlnumba.device_arrays.call_stream`).  Inputs are read in place,
whatever their strides; nothing waits for the GPU.  NumPy inputs are copied to
the device first.

A plan (:class:`NonzeroPlan`, :class:`SlicePlan`) holds everything a call of one
shape needs beyond addresses: the kernel variant, the launch geometry and the
parameter block, which is passed by value.  A launch is therefore
self-contained on its stream: nothing is allocated for it but what the
caller's allocator gives, nothing it reads is host state that a CUDA graph's
replay would repeat, and the nonzero look-back buffer is zeroed by a memset on
the same stream (as CUB initialises its tile status per call).  Calls on
different streams share nothing but the plans (no lock).
"""

import contextlib
import threading

import numpy as np
from numba import cuda

from . import config, launch
from . import tile_status as ts
from ._internals import array_arg
from .caches import Bounded
from .device_arrays import (  # noqa: F401  (the target's interface)
    DeviceView,
    Flat,
    call_stream,
    capturing,
    check_stream,
    core_stream,
    current_context,
    describe,
    flat,
    host_view,
    library_io,
    new_array,
    numba_stream,
    refuse_capture,
    scratch,
    staged,
    to_host,
    upload,
    view_of,
    zero,
)
from .layout import c_strides, divisor, divisor32, extent, slice_geometry
from .nonzero_kernel import EXPAND_WARP, EXPAND_WORDS, MAX_MASKS, RING, STAGE_WORDS
from .params import NONZERO_CUDA, SLICE_CUDA, pack
from .validation import nonzero_mask, uint_of_size
from .validation import shares_memory as shares_memory_exact
from .warp import SIM

name = "cuda"
#: Largest nonzero input: the look-back status words count to 2**VALUE_BITS - 1.
MAX_ELEMENTS = (1 << ts.VALUE_BITS) - 1
#: The status argument of a launch of one tile (which never reads it).
_NO_STATUS = array_arg(0, 0, 8)


def device_count():
    return len(cuda.gpus)


def is_writeable(v):
    return not v.readonly


def as_device_array(x, device, func, name):
    """The input as a :class:`DeviceView`; a NumPy input is staged for upload after
    validation (nothing is copied before the checks pass)."""
    if isinstance(x, np.ndarray):
        return staged(x, device)
    return view_of(x, device)


_NO_CONTEXT = contextlib.nullcontext()  # reusable: one for every call


def _context(v):
    return _NO_CONTEXT if v.device is None else cuda.gpus[v.device]


def empty(shape, dtype, stream, like, lib=None, func="dmlnumba"):
    """A new output of library ``lib`` for use on stream handle ``stream`` (see
    :func:`~dmlnumba.device_arrays.new_array`)."""
    with _context(like):
        return new_array(lib, shape, dtype, stream, like, func)


def _materialize(v, handle, func):
    """Upload a staged NumPy input: ``(view, buffer)`` (the buffer, or None, to free
    on the stream after the launch)."""
    if v.host is None:
        return v, None
    refuse_capture(handle, func, "copies a NumPy input to the GPU")
    h = np.ascontiguousarray(v.host)
    if SIM:
        d = cuda.to_device(h if all(st >= 0 for st in h.strides) else h.copy())
        return view_of(d, v.device), None
    buf, ptr = upload(h, handle, v.device)
    strides = tuple(st * h.itemsize for st in c_strides(h.shape))
    return DeviceView(buf, h.shape, strides, h.dtype, ptr, False, v.device), buf


def _release(buf, handle):
    if buf is not None:
        buf.close(core_stream(handle))


def _arg(ptr, span, itemsize):
    """A flat array of ``span`` items of ``itemsize`` bytes from address ``ptr`` as a
    kernel argument: the address on a GPU; under the simulator (host pointers), a
    NumPy view of that memory."""
    if not SIM:
        return ptr
    return host_view(Flat(None, ptr, span, uint_of_size(itemsize)))


class _Plan:
    """What every plan has: launchers per (context, stream), made on first use."""

    def __init__(self):
        self._launchers = Bounded(64)

    def _make(self, spec, handle, ctx):
        raise NotImplementedError

    def launcher(self, spec, handle):
        """The launcher of kernel ``spec`` on stream ``handle`` in the current context:
        ``cuda.core.launch`` with everything but the addresses bound, kept per
        (context, stream)."""
        ctx = current_context()
        if not ctx:  # a new thread (a dask worker's): numba makes the primary context current
            cuda.current_context()
            ctx = current_context()
        key = (ctx, handle, spec)
        go = self._launchers.get(key)
        if go is None:
            go = self._launchers.put(key, self._make(spec, handle, ctx))
        return go


class NonzeroPlan(_Plan):
    """A nonzero call of one shape: the input's layout and dtype, the outputs'
    layouts (``count``, and ``coords`` where ``width``), the rows written at most
    (``limit``), under the current settings."""

    def __init__(self, x, width, count, coords, limit):
        super().__init__()
        slo, sspan, sbase, sstr = extent(x.shape, x.strides, x.itemsize)
        clo, _, cbase, _ = extent(count.shape, count.strides, count.itemsize)
        if width:
            olo, ospan, obase, ostr = extent(coords.shape, coords.strides, coords.itemsize)
            rs, cs = ostr[-2], ostr[-1]
        else:  # no coordinates to write: the count's memory stands in
            olo, ospan, obase, rs, cs = clo, 1, cbase, 0, 0
        mask = int(nonzero_mask(x.dtype))
        if mask >= 1 << 63 and not SIM:  # launch arguments are signed 64-bit: the same bits
            mask -= 1 << 64
        # The write pass divides positions by the dimensions: in 32 bits where every
        # position fits (config.CUDA_NONZERO_32BIT_BELOW), else in 64.
        narrow = x.size < min(config.CUDA_NONZERO_32BIT_BELOW, 1 << 31)
        divs = [(divisor32 if narrow else divisor)(n) for n in x.shape]
        threads = config.CUDA_THREADS
        # Tiles: about CUDA_NONZERO_TILES where the input allows (enough to fill the
        # GPU, few enough that looking back stays short), each lane taking
        # CUDA_NONZERO_MIN_ITEMS to CUDA_NONZERO_ITEMS steps, in multiples of 4.
        items = min(config.CUDA_NONZERO_ITEMS, MAX_MASKS // (threads // 32))
        items = max(
            min(config.CUDA_NONZERO_MIN_ITEMS, items),
            min(items, x.size // (threads * config.CUDA_NONZERO_TILES) // 4 * 4),
        )
        # An input that fits one tile takes only the steps it fills, in multiples of 4
        # (1000 elements: 4 steps a warp, not 16).
        items = min(items, max(4, -(-x.size // (4 * threads)) * 4))
        self.ntiles = -(-x.size // (threads * items))
        self.values = (
            ("shape", tuple(x.shape)),
            ("strides", tuple(sstr)),
            ("magic", tuple(dv[0] for dv in divs)),
            ("shift", tuple(dv[1] for dv in divs)),
            ("src_base", sbase),
            ("ndim", x.ndim),
            ("total", x.size),
            ("items", items),
            ("out_base", obase),
            ("rs", rs),
            ("cs", cs),
            ("width", width),
            ("count_pos", cbase),
            ("limit", limit),
        )
        self.params = tuple(pack(NONZERO_CUDA, **dict(self.values)).tolist())
        # 16-byte loads in the count pass: a C-contiguous input (element i at flat
        # position sbase + i) whose first element is 16-byte aligned (checked per call).
        cs_ = c_strides(tuple(x.shape))
        vec = all(n == 1 or a == b for n, a, b in zip(x.shape, sstr, cs_))
        self.first = slo + sbase * x.itemsize if vec else None
        # 32-bit coordinates of several columns in contiguous rows are staged in shared
        # memory (a ring of RING rows a warp) and stored in whole sectors.
        staged = count.itemsize == 4 and width > 1 and cs == 1 and rs == width
        staged = staged and threads // 32 * RING * width <= STAGE_WORDS
        # Rows of one column (positions in 32 bits) are expanded 32 mask words at a time
        # in shared memory and stored coalesced: the width-1 kernel.
        expand = narrow and width == 1 and threads // 32 * EXPAND_WARP <= EXPAND_WORDS
        variant = (narrow, width if staged else (1 if expand else 0))
        self.kernel = (8 * x.itemsize, 8 * count.itemsize, variant)
        self.slo, self.sspan, self.clo, self.olo, self.ospan = slo, sspan, clo, olo, ospan
        self.mask, self.threads = mask, threads
        self.itemsizes = (x.itemsize, coords.itemsize if width else count.itemsize, count.itemsize)

    def _make(self, spec, handle, ctx):
        src_bits, out_bits, variant = self.kernel
        k = launch.kernel("nonzero", src_bits, out_bits, variant)
        return launch.launcher(k, self.ntiles, self.threads, handle, ctx, self.params)

    def launch(self, handle, xp, op, cp, scratch):
        """Launch on stream ``handle`` over the input at ``xp``, the coordinates (or
        the count, where none are written) at ``op`` and the count at ``cp``
        (addresses of the arrays' first elements' memory as described); ``scratch``
        is the library's ``(alloc, release)`` for the look-back buffer."""
        go = self.launcher(None, handle)
        vec = 0 if self.first is None or (xp + self.first) & 15 else 1
        keep = None
        if SIM:  # the simulator's atomics need an array
            status = (cuda.to_device(np.zeros(self.ntiles + 1, np.uint64)),)
        elif self.ntiles == 1:
            status = _NO_STATUS
        else:
            words = self.ntiles + 1
            ptr, keep = scratch[0](words, handle)
            zero(ptr, 8 * words, handle)
            status = array_arg(ptr, words, 8)
        if SIM:
            xi, oi, ci = self.itemsizes
            go(
                _arg(xp + self.slo, self.sspan, xi),
                self.mask,
                *status,
                _arg(op + self.olo, self.ospan, oi),
                _arg(cp + self.clo, 1, ci),
                vec,
            )
        else:
            go(xp + self.slo, self.mask, *status, op + self.olo, cp + self.clo, vec)
        if keep is not None:
            scratch[1](keep, handle)


class SlicePlan(_Plan):
    """A slice1 of one shape: the input's and the output's layouts, the window's
    starts and steps, under the current settings.  ``wide`` (or None) copies 8-byte
    words where the inner dimension is contiguous in both arrays and every row
    starts on a multiple of 8 bytes (chosen per call by the addresses)."""

    def __init__(self, x, starts, steps, out):
        super().__init__()
        slo, sspan, sbase, sstr = extent(x.shape, x.strides, x.itemsize)
        dlo, dspan, dbase, dstr = extent(out.shape, out.strides, out.itemsize)
        geom, off = slice_geometry(out.shape, starts, steps, sstr, dstr)
        shape, ss, ds = (tuple(int(v) for v in r) for r in geom)
        sb, db = sbase + off, dbase
        narrow = _slice_spec(8 * x.itemsize, shape, ss, ds, sb, db)
        wide = None
        k = 8 // x.itemsize
        if (
            k > 1
            and ss[-1] == 1
            and ds[-1] == 1
            and shape[-1] % k == 0
            and sb % k == 0
            and db % k == 0
            and all(v % k == 0 for v in ss[:-1] + ds[:-1])
        ):
            wide = _slice_spec(
                64,
                shape[:-1] + (shape[-1] // k,),
                tuple(v // k for v in ss[:-1]) + (1,),
                tuple(v // k for v in ds[:-1]) + (1,),
                sb // k,
                db // k,
            )
        self.slo, self.sspan, self.dlo, self.dspan = slo, sspan, dlo, dspan
        self.itemsize = x.itemsize
        self.specs = (narrow, wide)

    def _make(self, which, handle, ctx):
        bits, blocks, block, params, pos32 = self.specs[which]
        k = launch.kernel("slice", bits, 0, (pos32, 0))
        return launch.launcher(k, blocks, block, handle, ctx, params)

    def launch(self, handle, xp, op):
        """Copy from the input at ``xp`` to the output at ``op`` on stream ``handle``."""
        sp, dp = xp + self.slo, op + self.dlo
        which = 1 if self.specs[1] is not None and not (sp | dp) & 7 else 0
        go = self.launcher(which, handle)
        if SIM:
            isz = self.specs[which][0] // 8
            n = self.itemsize
            go(_arg(sp, self.sspan * n // isz, isz), _arg(dp, self.dspan * n // isz, isz))
        else:
            go(sp, dp)


def _slice_spec(bits, shape, ss, ds, sb, db):
    """``(bits, grid, block, params, pos32)`` of a copy of ``bits``-bit items."""
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
    # Positions in 32 bits where every one (and a tile's number) is below
    # CUDA_SLICE_32BIT_BELOW, 2**30, which leaves room for a thread's next position
    # and a tile's next: fewer registers, more threads an SM.  Not for 8-byte items
    # (the word copy of contiguous rows), which spill under that kernel's register cap.
    top = max(sb + extent(shape, ss, 1)[1], db + extent(shape, ds, 1)[1], ntiles)
    pos32 = bits < 64 and top < config.CUDA_SLICE_32BIT_BELOW
    params = pack(
        SLICE_CUDA,
        shape=shape,
        src_strides=ss,
        dst_strides=ds,
        src_base=sb,
        dst_base=db,
        ndim=len(shape),
        seg=seg,
        nseg=nseg,
        rows=rows,
        nrows=nrows,
        ntiles=ntiles,
    )
    return (bits, blocks, (tx, ty), tuple(params.tolist()), pos32)


# ------------------------------------------------------------------------- plans

_plans = Bounded()
_plans_lock = threading.Lock()


def _settings():
    return (
        config.CUDA_THREADS,
        config.CUDA_NONZERO_ITEMS,
        config.CUDA_NONZERO_MIN_ITEMS,
        config.CUDA_NONZERO_TILES,
        config.CUDA_NONZERO_32BIT_BELOW,
        config.CUDA_SLICE_ITEMS,
        config.CUDA_SLICE_ROWS,
        config.CUDA_SLICE_TILES,
        config.CUDA_SLICE_32BIT_BELOW,
    )


def _layout(v):
    return (v.shape, v.strides, v.dtype)


def nonzero_plan(x, width, count, coords, limit):
    """The plan of a nonzero of these layouts (kept per layouts and settings)."""
    key = ("nonzero", _layout(x), width, _layout(count), _layout(coords), limit, _settings())
    p = _plans.get(key)
    if p is None:
        p = _plans.put(key, NonzeroPlan(x, width, count, coords, limit))
    return p


def slice_plan(x, starts, steps, out):
    """The plan of a slice1 of these layouts (kept per layouts and settings)."""
    key = ("slice", _layout(x), _layout(out), starts, steps, _settings())
    p = _plans.get(key)
    if p is None:
        p = _plans.put(key, SlicePlan(x, starts, steps, out))
    return p


# --------------------------------------------------------------------- the general path


def slice1(x, starts, steps, out, stream, fresh=False, func="slice1"):
    with _context(x):
        x, buf = _materialize(x, stream, func)
        if not fresh and _overlaps(x, out):
            tmp = view_of(new_array(None, out.shape, out.dtype, stream, x, func), x.device)
            slice1(x, starts, steps, tmp, stream, func=func)
            slice1(tmp, (0,) * out.ndim, (1,) * out.ndim, out, stream, func=func)
        else:
            slice_plan(x, starts, steps, out).launch(stream, x.ptr, out.ptr)
        _release(buf, stream)


def nonzero(x, width, count, coords, stream, limit=None, func="nonzero_coordinates"):
    """``limit``: the rows to write at most (default: every element's)."""
    if limit is None:
        limit = x.size
    if not width or not coords.size or not limit:  # no coordinates to write
        width = limit = 0
    with _context(x):
        if x.size == 0:
            cp, _, cbase, _ = flat(count)
            if SIM:
                _arg(cp, cbase + 1, count.itemsize)[cbase] = 0
            else:
                zero(cp + cbase * count.itemsize, count.itemsize, stream)
            return
        x, buf = _materialize(x, stream, func)
        plan = nonzero_plan(x, width, count, coords, limit)
        out = coords if width else count
        plan.launch(stream, x.ptr, out.ptr, count.ptr, scratch(_lib_of(x), x))
        _release(buf, stream)


def _lib_of(v):
    from .arrays import library

    return library(v.obj)


def overlaps(a, b):
    """Whether ``a`` and ``b`` may share memory (their address ranges meet; a yes
    costs a copy).  A staged NumPy input is on the host, apart from any output."""
    if a.host is not None or b.host is not None:
        return False
    return _overlaps(a, b)


def _overlaps(a, b):
    if a.size == 0 or b.size == 0:
        return False
    a0, a1 = a.span()
    b0, b1 = b.span()
    return a0 < b1 and b0 < a1


def shares_memory(a, b):
    """Whether ``a`` and ``b`` share memory (exact)."""
    return shares_memory_exact(
        a.ptr, a.shape, a.strides, a.itemsize, b.ptr, b.shape, b.strides, b.itemsize
    )


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
    return DeviceView(
        coords.obj, shape, coords.strides, coords.dtype, coords.ptr, coords.readonly, coords.device
    )


def synchronize(stream):
    """Wait for the work queued on stream handle ``stream``."""
    numba_stream(stream).synchronize()


def read_count(count, stream, func="argwhere"):
    """The value of a 1-element count array (a DeviceView), read back: waits for the
    stream (refused inside a capture, which cannot read back)."""
    refuse_capture(stream, func, "reads the count back to the host")
    p, _, _, _ = flat(count)
    s = numba_stream(stream)
    f = Flat(count.obj, p, 1, uint_of_size(count.itemsize))
    arr = cuda.as_cuda_array(f) if not SIM else cuda.to_device(host_view(f))
    h = arr.copy_to_host(stream=s)
    s.synchronize()
    return int(h[0])


# ------------------------------------------------------------------ repeated default calls


def _new_view(shape, dtype):
    """A view of a new C-contiguous array (pointer filled in per call)."""
    strides = tuple(v * dtype.itemsize for v in c_strides(shape))
    return DeviceView(None, shape, strides, dtype, 0, False)


def _fast_ok(x, lib):
    return not SIM and x.device is None and x.size


def _bare(x):
    """``x`` without its array (a runner must not keep its first input alive)."""
    return DeviceView(None, x.shape, x.strides, x.dtype, 0, False)


def _source(x, ptr_of, func):
    """A runner's input: ``(layout, read)``, ``read(obj, handle)`` giving ``(address,
    buffer to free after the launch or None)``.  A NumPy input sent to the GPU is
    uploaded, C-contiguous, per call (refused inside a capture)."""
    if x.host is None:
        return x, lambda obj, handle: (ptr_of(obj), None)

    def read(obj, handle):
        refuse_capture(handle, func, "copies a NumPy input to the GPU")
        buf, ptr = upload(np.ascontiguousarray(obj), handle)
        return ptr, buf

    return _new_view(x.shape, x.dtype), read


def nonzero_runner(x, width, dtype, rows, lib):
    """A repeated default nonzero call on inputs of ``x``'s library and layout: new
    outputs from the library's allocator, one plan bound to the library's current
    stream.  None where the call has no kernel to run (empty input, no rows or
    columns)."""
    if not (_fast_ok(x, lib) and width and rows):
        return None
    ptr_of, handle, alloc, scr = library_io(lib, x)
    new_count, new_coords = alloc((1,), dtype), alloc((rows, width), dtype)
    count, coords = _new_view((1,), dtype), _new_view((rows, width), dtype)
    x, read = _source(x, ptr_of, "nonzero_coordinates")
    go = nonzero_plan(_bare(x), width, count, coords, rows).launch

    def run(obj):
        h = handle()
        xp, buf = read(obj, h)
        c, xs = new_count(), new_coords()
        go(h, xp, ptr_of(xs), ptr_of(c), scr)
        if buf is not None:
            _release(buf, h)
        return c, xs

    return run


def slice1_runner(x, starts, steps, out_shape, lib):
    """A repeated default slice1 call (see :func:`nonzero_runner`)."""
    if not _fast_ok(x, lib) or not all(out_shape):
        return None
    ptr_of, handle, alloc, _ = library_io(lib, x)
    new_out = alloc(tuple(out_shape), x.dtype)
    x, read = _source(x, ptr_of, "slice1")
    go = slice_plan(_bare(x), starts, steps, _new_view(tuple(out_shape), x.dtype)).launch

    def run(obj):
        h = handle()
        xp, buf = read(obj, h)
        o = new_out()
        go(h, xp, ptr_of(o))
        if buf is not None:
            _release(buf, h)
        return o

    return run
