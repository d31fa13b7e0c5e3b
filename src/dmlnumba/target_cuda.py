"""The CUDA target: validated views in, kernels launched on a stream.

Arguments arrive validated (see :mod:`dmlnumba.api`) and described by
:class:`~dmlnumba.device_arrays.DeviceView`.  Inputs are read in place, whatever
their strides; nothing is copied and nothing waits for the GPU.  The CAI
``stream`` field of foreign arrays is not synchronized on: the work is ordered on
the call's stream (see :func:`~dmlnumba.device_arrays.call_stream`).  NumPy inputs
are copied to the device first.
"""

import contextlib
import threading

import numpy as np
from numba import cuda

from . import config, launch
from . import tile_status as ts
from .caches import Bounded
from .device_arrays import (  # noqa: F401
    DeviceView,
    Flat,
    call_stream,
    check_stream,
    describe,
    flat,
    host_view,
    library_io,
    new_array,
    numba_array,
    staged,
    stream_of,
    to_host,
    view_of,
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
_scratch = Bounded()  # (context, stream) -> the look-back scratch


def _arg(f):
    """A flat view as a kernel argument: its raw device address on a GPU (the
    kernels take pointers, which launch without per-call conversion); under the
    simulator, a NumPy view of the (host) memory it describes."""
    if not SIM:
        return f.__cuda_array_interface__["data"][0]
    return host_view(f)


def is_writeable(v):
    return not v.readonly


def as_device_array(x, device, func, name):
    """The input as a :class:`DeviceView`; a NumPy input is staged for upload after
    validation (nothing is copied before the checks pass)."""
    if isinstance(x, np.ndarray):
        return staged(x, device)
    return view_of(x, device)


def _context(v):
    if v.device is None:
        return contextlib.nullcontext()
    return cuda.gpus[v.device]


def _materialize(v, s):
    """Upload a staged NumPy input."""
    if v.host is None:
        return v
    h = np.ascontiguousarray(v.host)
    if any(st < 0 for st in h.strides):  # contiguous, but a reversed size-1 dimension,
        h = h.copy()  # which numba's to_device rejects
    d = cuda.to_device(h, stream=s)
    w = view_of(d, v.device)
    return w


def empty(shape, dtype, stream, like, lib=None):
    """A new output of library ``lib`` (see :func:`~dmlnumba.device_arrays.new_array`)."""
    with _context(like):
        return new_array(lib, shape, dtype, stream, like)


def _flat_arg(v, ptr, span, itemsize=None):
    """A flat view of ``span`` items of ``v`` from ``ptr`` as a kernel argument (see
    :func:`_arg`); ``itemsize``: read as items of that size instead (whole ones)."""
    if not SIM:
        return ptr
    isz = itemsize or v.itemsize
    return _arg(Flat(v.obj, ptr, span * v.itemsize // isz, uint_of_size(isz)))


_geoms = Bounded()
_geoms_lock = threading.Lock()


def _where(s):
    """A cache key for (current context, stream): device buffers cached for one
    context must never reach another."""
    if SIM:
        return (0, id(s))
    ctx = _current_context()
    if not ctx:  # none yet: numba makes the device's primary context current
        cuda.current_context()
        ctx = _current_context()
    return (ctx, int(s))


def _current_context():
    """The current context's handle as an int (0 where none is current).  The first
    call picks the query and puts it in this function's place, so that later calls
    (one a repeated call) run no checks: ``cuCtxGetCurrent`` through cuda.bindings
    (0.3 us), or numba's slower view of the same with older bindings."""
    global _current_context
    try:
        from cuda.bindings.driver import cuCtxGetCurrent

        def query():
            return int(cuCtxGetCurrent()[1])

    except ImportError:

        def query():
            return cuda.current_context().handle.value

    _current_context = query
    return query()


def _geometry(block, values, s, where):
    """A parameter block (``block`` of :mod:`dmlnumba.params` with ``values``, a tuple
    of (field, value) pairs) as a kernel argument: ``(keep, arg)``.  On a GPU ``arg``
    is the address of a cached device copy (one per context and stream, uploaded on
    that stream the first time) and ``keep`` that copy: the caller holds it until its
    launch is queued, so that the memory cannot be freed in between (another thread
    may clear the cache; numba frees a dropped array at its next deallocation flush,
    which does not wait for launches not yet made).  The copy holds only layout
    integers (shapes, strides, offsets relative to the arrays' starts), so repeated
    calls over arrays of one layout reuse it.  One upload per key: threads making the
    same first call at once share the first thread's copy (each uploading its own and
    replacing the other's in the cache freed a copy still about to be launched)."""
    if SIM:
        return None, pack(block, **dict(values))

    def upload():
        d = cuda.to_device(pack(block, **dict(values)), stream=s)
        return d, d.__cuda_array_interface__["data"][0]

    key = (where, type(block).__name__, values)
    g = _geoms.get(key)
    if g is None:  # the first call of this layout here: the lock makes one upload
        with _geoms_lock:
            g = _geoms.get_or_make(key, upload)
    return g


class _Scratch:
    """The look-back scratch of one (context, stream): a tile counter that runs on
    across calls, then one status word per tile.  Calls on one stream run in
    order, so they share it; each call tags its words with a new epoch, so the
    words need no zeroing between calls (only when the epochs wrap)."""

    __slots__ = ("buf", "words", "arg", "counter", "epoch")

    def __init__(self, words, s):
        self.buf = cuda.device_array(words, np.uint64, stream=s)
        self.words = words
        # As the kernel's status argument: numba's array ABI, flat, on a GPU.
        ptr = 0 if SIM else self.buf.__cuda_array_interface__["data"][0]
        self.arg = (self.buf,) if SIM else launch.array_arg(ptr, words, 8)
        self.reset(s)

    def reset(self, s):
        """Zero the words (when made, and when the epochs wrap: every 4 million calls)."""
        self.buf.copy_to_device(np.zeros(self.words, np.uint64), stream=s)
        self.counter = 0
        self.epoch = 0


#: Held from reserving a call's tiles to its launch, so that threads sharing a
#: stream launch in the order of their reservations.
_lock = threading.Lock()


def _reserve(ntiles, s, where):
    """``(scratch, epoch, tile_base)`` for a launch of ``ntiles`` tiles (hold ``_lock``)."""
    sc = _scratch.get(where)
    if sc is None or sc.words < ntiles + 1:
        sc = _scratch.put(where, _Scratch(max(2 * (ntiles + 1), 1024), s))
    if sc.epoch >= (1 << ts.EPOCH_BITS) - 1:
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


def _overlaps(a, b):
    if a.size == 0 or b.size == 0:
        return False
    a0, a1 = a.span()
    b0, b1 = b.span()
    return a0 < b1 and b0 < a1


_plans = Bounded()


def _slice_plan(x, starts, steps, out):
    """The launch of a slice1 of this layout: ``(src low, src span, dst low, dst span,
    narrow, wide)``, each of the last two ``(bits, grid, block, values, pos32)``
    (``pos32``: the kernel that keeps positions in 32 bits); ``wide`` (or None)
    copies 8-byte words where the inner dimension is contiguous in both arrays and
    every row starts on a multiple of 8 bytes."""
    slo, sspan, sbase, sstr = extent(x.shape, x.strides, x.itemsize)
    dlo, dspan, dbase, dstr = extent(out.shape, out.strides, out.itemsize)
    geom, off = slice_geometry(out.shape, starts, steps, sstr, dstr)
    shape, ss, ds = (tuple(int(v) for v in r) for r in geom)
    sb, db = sbase + off, dbase
    narrow = _slice_launch(8 * x.itemsize, shape, ss, ds, sb, db)
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
        wide = _slice_launch(
            64,
            shape[:-1] + (shape[-1] // k,),
            tuple(v // k for v in ss[:-1]) + (1,),
            tuple(v // k for v in ds[:-1]) + (1,),
            sb // k,
            db // k,
        )
    return slo, sspan, dlo, dspan, narrow, wide


def _slice_launch(bits, shape, ss, ds, sb, db):
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
    # (the word copy of contiguous rows), which spill under that kernel's register
    # cap and ran 2.5% slower (docs/PERFORMANCE.md).
    top = max(sb + extent(shape, ss, 1)[1], db + extent(shape, ds, 1)[1], ntiles)
    pos32 = bits < 64 and top < config.CUDA_SLICE_32BIT_BELOW
    values = (
        ("shape", shape),
        ("src_strides", ss),
        ("dst_strides", ds),
        ("src_base", sb),
        ("dst_base", db),
        ("ndim", len(shape)),
        ("seg", seg),
        ("nseg", nseg),
        ("rows", rows),
        ("nrows", nrows),
        ("ntiles", ntiles),
    )
    return (bits, blocks, (tx, ty), values, pos32)


def slice1(x, starts, steps, out, stream, fresh=False):
    s = stream_of(stream)
    with _context(x):
        x = _materialize(x, s)
        if not fresh and _overlaps(x, out):
            tmp = view_of(new_array(None, out.shape, out.dtype, stream, x), x.device)
            slice1(x, starts, steps, tmp, stream)
            slice1(tmp, (0,) * out.ndim, (1,) * out.ndim, out, stream)
            return
        key = (
            "slice",
            x.shape,
            x.strides,
            x.itemsize,
            out.shape,
            out.strides,
            starts,
            steps,
            config.CUDA_THREADS,
            config.CUDA_SLICE_ITEMS,
            config.CUDA_SLICE_ROWS,
            config.CUDA_SLICE_TILES,
            config.CUDA_SLICE_32BIT_BELOW,
        )
        slo, sspan, dlo, dspan, narrow, wide = _plans.get_or_make(
            key, lambda: _slice_plan(x, starts, steps, out)
        )
        _slice_launch_on(s, (slo, sspan, dlo, dspan, narrow, wide), x, x.ptr, out, out.ptr)


def _slice_launch_on(s, plan, x, xp, out, op):
    """Launch a planned slice1 from address ``xp`` (of ``x``) to ``op`` (of ``out``) on
    ``s``."""
    slo, sspan, dlo, dspan, narrow, wide = plan
    sp, dp = xp + slo, op + dlo
    bits, keep, g, go = _slice_copy(_slice_state(s, _where(s), plan), wide, sp, dp)
    go(_flat_arg(x, sp, sspan, bits // 8), _flat_arg(out, dp, dspan, bits // 8), g)


def _slice_copy(state, wide, sp, dp):
    """Of a :func:`_slice_state`, the copy for a source at ``sp`` and a destination at
    ``dp``: the 8-byte word copy where the plan has one (``wide``) and both start on
    8 bytes, else the item copy."""
    return state[1] if wide and not (sp | dp) & 7 else state[0]


def _slice_state(s, where, plan):
    """What launching ``plan`` on ``s`` takes beyond addresses: for the narrow and the
    wide copy (None where there is none), ``(bits, keep, geometry, launcher)`` (see
    :func:`_geometry` for ``keep``, :func:`~dmlnumba.launch.launcher`)."""
    copies = []
    for spec in plan[4:6]:
        if spec is not None:
            bits, blocks, block, values, pos32 = spec
            keep, g = _geometry(SLICE_CUDA, values, s, where)
            k = launch.kernel("slice", bits, 0, (pos32, 0))
            spec = (bits, keep, g, launch.launcher(k, blocks, block, s, where[0]))
        copies.append(spec)
    return copies[0], copies[1]


def _nonzero_plan(x, width, count, coords, limit):
    """``(src low, span, values, ntiles, threads, mask, count low, out low, out span,
    first, variant, src bits)``: ``values`` the :data:`~dmlnumba.params.NONZERO_CUDA` block's,
    ``first`` the byte offset of element 0 where the input may take 16-byte loads
    (else None), ``variant`` the kernel's ``(narrow, staged)``, ``staged`` 0 or the
    width of a staged kernel (see :func:`~dmlnumba.nonzero_kernel.make_nonzero`)."""
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
    # An input that fits one tile takes only the steps it fills, in multiples of 4:
    # 1000 elements 4 steps a warp, not 16 (docs/PERFORMANCE.md).
    items = min(items, max(4, -(-x.size // (4 * threads)) * 4))
    ntiles = -(-x.size // (threads * items))
    values = (
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
    # 16-byte loads in the count pass: a C-contiguous input (element i at flat
    # position sbase + i) whose first element is 16-byte aligned (checked per call).
    cs_ = c_strides(tuple(x.shape))
    vec = all(n == 1 or a == b for n, a, b in zip(x.shape, sstr, cs_))
    first = slo + sbase * x.itemsize if vec else None
    # 32-bit coordinates of several columns in contiguous rows are staged in shared
    # memory (a ring of RING rows a warp) and stored in whole sectors.
    staged = count.itemsize == 4 and width > 1 and cs == 1 and rs == width
    staged = staged and threads // 32 * RING * width <= STAGE_WORDS
    # Rows of one column (positions in 32 bits) are expanded 32 mask words at a time
    # in shared memory and stored coalesced: the width-1 kernel.
    expand = narrow and width == 1 and threads // 32 * EXPAND_WARP <= EXPAND_WORDS
    variant = (narrow, width if staged else (1 if expand else 0))
    bits = 8 * x.itemsize
    return slo, sspan, values, ntiles, threads, mask, clo, olo, ospan, first, variant, bits


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
            f = Flat(count.obj, cp, span, uint_of_size(count.itemsize))
            if SIM:
                _arg(f)[cbase] = 0
            else:
                zero = np.zeros(1, uint_of_size(count.itemsize))
                cuda.as_cuda_array(f)[cbase : cbase + 1].copy_to_device(zero, stream=s)
            return
        key = (
            "nonzero",
            x.shape,
            x.strides,
            x.dtype,
            width,
            count.shape,
            count.strides,
            count.itemsize,
            coords.shape,
            coords.strides,
            limit,
            config.CUDA_THREADS,
            config.CUDA_NONZERO_ITEMS,
            config.CUDA_NONZERO_MIN_ITEMS,
            config.CUDA_NONZERO_TILES,
            config.CUDA_NONZERO_32BIT_BELOW,
        )
        plan = _plans.get_or_make(key, lambda: _nonzero_plan(x, width, count, coords, limit))
        out = coords if width else count
        _nonzero_launch_on(s, plan, x, x.ptr, out, out.ptr, count, count.ptr)


def _nonzero_launch_on(s, plan, x, xp, out, op, count, cp):
    """Launch a planned nonzero of ``x`` at address ``xp`` on ``s``, writing ``out``
    (the coordinates, or the count where none are written) at ``op`` and ``count``
    at ``cp``."""
    slo, sspan, mask, clo, olo, ospan, first = plan[:2] + plan[5:10]
    state = _nonzero_state(s, _where(s), plan, count.itemsize)
    src_arg = _flat_arg(x, xp + slo, sspan)
    out_arg = _flat_arg(out, op + olo, ospan)
    cnt_arg = _flat_arg(count, cp + clo, 1)
    _launch_nonzero(s, state, plan[3], src_arg, mask, out_arg, cnt_arg, _vec(first, xp))


def _vec(first, xp):
    """The kernel's ``vec``: 1 where the input at ``xp`` may take 16-byte loads (its
    plan's ``first``, the byte offset of element 0 where its layout allows them, lands
    on 16 bytes), else 0."""
    return 0 if first is None or (xp + first) & 15 else 1


def _launch_nonzero(s, state, ntiles, src, mask, out, count, vec):
    """Launch ``ntiles`` tiles of a nonzero kernel on ``s`` (``state``: its
    :func:`_nonzero_state`), the tiles reserved in the stream's look-back scratch."""
    where, keep, g, go = state
    with _lock:
        try:
            sc, epoch, base = _reserve(ntiles, s, where)
            go(src, mask, g, *sc.arg, out, count, epoch, base, vec)
        except BaseException:
            # Reserved tiles may never have been taken (a failed launch, an interrupt
            # anywhere from the reservation on): the device's tile counter would then
            # lag this one, and the next call's blocks would wait on tiles that never
            # come.  Start the scratch afresh, ordered on the stream after anything
            # already launched (always safe, so also where nothing was reserved).
            sc = _scratch.get(where)
            if sc is not None:
                sc.reset(s)
            raise


def _nonzero_state(s, where, plan, count_itemsize):
    """What launching ``plan`` on ``s`` takes beyond addresses: ``(where, keep,
    geometry, launcher)`` (see :func:`_geometry` for ``keep``,
    :func:`~dmlnumba.launch.launcher`)."""
    values, ntiles, threads, variant, src_bits = plan[2], plan[3], plan[4], plan[10], plan[11]
    keep, g = _geometry(NONZERO_CUDA, values, s, where)
    k = launch.kernel("nonzero", src_bits, 8 * count_itemsize, variant)
    return (where, keep, g, launch.launcher(k, ntiles, threads, s, where[0]))


# ------------------------------------------------------------------ repeated default calls


def _new_view(shape, dtype):
    """A view of a new C-contiguous array (pointer filled in per call)."""
    strides = tuple(v * dtype.itemsize for v in c_strides(shape))
    return DeviceView(None, shape, strides, dtype, 0, False)


def _fast_ok(x, lib):
    return not SIM and x.host is None and x.device is None and x.size and lib in ("torch", "cupy")


def _layout(x):
    """``x`` without its array (a runner must not keep its first input alive)."""
    return DeviceView(None, x.shape, x.strides, x.dtype, 0, False)


def _states(make):
    """A runner's launch states: a function of a stream handle that gives ``(numba
    stream, state)`` for it on the current context, the state made by ``make(stream,
    where)`` (see :func:`_where`) the first time and kept, so that a repeated call
    skips the stream's conversion and the cache lookups of its parameter block and
    kernel (several microseconds a call, docs/PERFORMANCE.md).  Where no context is
    current yet, nothing is kept (the first launch makes one current)."""
    states = Bounded(64)

    def state(handle):
        ctx = _current_context()
        st = states.get((ctx, handle))
        if st is None:
            s = stream_of(handle or None)
            st = (s, make(s, _where(s)))
            if ctx:
                states.put((ctx, handle), st)
        return st

    return state


def nonzero_runner(x, width, dtype, rows, lib):
    """A repeated default nonzero call on inputs of ``x``'s library and layout: new
    outputs from the library's allocator, one launch on its current stream.  None
    where the call has no kernel to run (empty input, no rows or columns).  The
    launch arguments are worked out here, without the simulator's flat views
    (:func:`_fast_ok`: never under the simulator)."""
    if not (_fast_ok(x, lib) and width and rows):
        return None
    ptr_of, handle, alloc = library_io(lib, x)
    new_count, new_coords = alloc((1,), dtype), alloc((rows, width), dtype)
    x = _layout(x)
    count, coords = _new_view((1,), dtype), _new_view((rows, width), dtype)
    plan = _nonzero_plan(x, width, count, coords, rows)
    slo, ntiles, mask, clo, olo, first = (plan[i] for i in (0, 3, 5, 6, 7, 9))
    state = _states(lambda s, where: _nonzero_state(s, where, plan, count.itemsize))

    def run(obj):
        s, st = state(handle())
        c, xs = new_count(), new_coords()
        xp = ptr_of(obj)
        vec = _vec(first, xp)
        _launch_nonzero(s, st, ntiles, xp + slo, mask, ptr_of(xs) + olo, ptr_of(c) + clo, vec)
        return c, xs

    return run


def slice1_runner(x, starts, steps, out_shape, lib):
    """A repeated default slice1 call (see :func:`nonzero_runner`)."""
    if not _fast_ok(x, lib) or not all(out_shape):
        return None
    ptr_of, handle, alloc = library_io(lib, x)
    new_out = alloc(tuple(out_shape), x.dtype)
    x = _layout(x)
    out = _new_view(tuple(out_shape), x.dtype)
    plan = _slice_plan(x, starts, steps, out)
    slo, dlo, wide = plan[0], plan[2], plan[5]
    state = _states(lambda s, where: _slice_state(s, where, plan))

    def run(obj):
        s, st = state(handle())
        o = new_out()
        sp, dp = ptr_of(obj) + slo, ptr_of(o) + dlo
        bits, keep, g, go = _slice_copy(st, wide, sp, dp)
        go(sp, dp, g)
        return o

    return run


def read_count(count, stream):
    """The value of a 1-element count array (a DeviceView), read back: waits for the stream."""
    s = stream_of(stream)
    p, _, _, _ = flat(count)
    h = numba_array(Flat(count.obj, p, 1, uint_of_size(count.itemsize))).copy_to_host(stream=s)
    s.synchronize()
    return int(h[0])
