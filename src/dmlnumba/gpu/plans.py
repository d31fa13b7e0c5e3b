"""Plans of the CUDA kernels, in the manner of cuda.compute's algorithm objects: a
:class:`NonzeroPlan`, :class:`SlicePlan` or :class:`GradPlan` is made once per call shape (the
layouts, the dtype, the width, the settings) and holds the kernel variant, the
geometry (:mod:`.geometry`) and the parameter block (passed by value); its
``launch`` binds the addresses of one call.  Launchers are kept per (context,
stream)."""

import numpy as np
from numba import cuda

from .. import config
from .._internals import array_arg
from ..caches import Bounded
from ..layout import c_strides, divisor, divisor32, extent, scatter_window, slice_geometry
from ..params import MAXD, NONZERO_CUDA, SLICE_GRAD_CUDA, pack
from ..validation import nonzero_mask, uint_of_size
from . import launch
from .geometry import gather_grid, nonzero_tiling, slice_spec, slice_tiles
from .grad_kernel import CHUNK, MOST_PAIRS, ROWS, pairs_of
from .memory import current_context, zero
from .policy import EXPAND_WARP, EXPAND_WORDS, RING, STAGE_WORDS
from .sim import SIM
from .slice_kernel import gather_loads
from .views import Flat, host_view

#: The status argument of a launch of one tile (which never reads it).
_NO_STATUS = array_arg(0, 0, 8)


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

    def launcher(self, spec, handle, ctx=0):
        """The launcher of kernel ``spec`` on stream ``handle`` in the current context
        (``ctx``: its handle, where the caller has asked): :func:`launch.launcher`'s
        ``cuLaunchKernel`` with everything but the addresses bound, kept per
        (context, stream)."""
        if not ctx:
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
        items, tposed, self.ntiles = nonzero_tiling(x.size, x.shape, sstr, x.itemsize, threads)
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
        # Rows of one column (positions in 32 bits) are expanded 32 mask words at a time
        # in shared memory and stored coalesced: the width-1 kernel.  Several columns in
        # contiguous rows take a staged kernel (a kernel per width): with positions in
        # 32 bits its tiles expand too (expand_coords; 16 words at a time in half the
        # space where the input is read transposed), for coordinates of either width;
        # with 64-bit positions 32-bit coordinates are staged in a ring of RING rows a
        # warp and stored in whole sectors.  Either way the warps' parts must fit.
        fits = threads // 32 * EXPAND_WARP <= EXPAND_WORDS
        staged = width > 1 and cs == 1 and rs == width
        if narrow:
            staged = staged and fits
        else:
            staged = staged and count.itemsize == 4
            staged = staged and threads // 32 * RING * width <= STAGE_WORDS
        expand = narrow and width == 1 and fits
        variant: tuple = (narrow, width if staged else (1 if expand else 0))
        if tposed:
            variant += (tposed,)
        self.kernel = (8 * x.itemsize, 8 * count.itemsize, variant)
        self.slo, self.sspan, self.clo, self.olo, self.ospan = slo, sspan, clo, olo, ospan
        self.mask, self.threads = mask, threads
        self.itemsizes = (x.itemsize, coords.itemsize if width else count.itemsize, count.itemsize)

    def _make(self, spec, handle, ctx):
        src_bits, out_bits, variant = self.kernel
        k = launch.kernel("nonzero", src_bits, out_bits, variant)
        return launch.launcher(k, self.ntiles, self.threads, handle, ctx, self.params)

    def launch(self, handle, xp, op, cp, scratch, ctx=0):
        """Launch on stream ``handle`` over the input at ``xp``, the coordinates (or
        the count, where none are written) at ``op`` and the count at ``cp``
        (addresses of the arrays' first elements' memory as described); ``scratch``
        is the library's ``(alloc, release)`` for the look-back buffer; ``ctx``: the
        current context's handle, where the caller has it."""
        go = self.launcher(None, handle, ctx)
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
    words where the inner dimension is contiguous in the output and contiguous or
    reversed in the input, and every row starts on a multiple of 8 bytes (chosen
    per call by the addresses); a reversed row's words have their items reversed
    in registers.  ``fill``: the output's elements zeroed instead (``x`` is the
    output; the tiles store and read nothing)."""

    def __init__(self, x, starts, steps, out, fill=False):
        super().__init__()
        slo, sspan, sbase, sstr = extent(x.shape, x.strides, x.itemsize)
        dlo, dspan, dbase, dstr = extent(out.shape, out.strides, out.itemsize)
        geom, off = slice_geometry(out.shape, starts, steps, sstr, dstr)
        shape, ss, ds = (tuple(int(v) for v in r) for r in geom)
        sb, db = sbase + off, dbase
        narrow = slice_spec(8 * x.itemsize, shape, ss, ds, sb, db, fill=fill)
        if (
            not fill
            and config.CUDA_SLICE_GATHER
            and narrow[1][0]  # every position in 32 bits
            and (x.itemsize >= 4 or ss[-1] not in (1, -1))
        ):
            # Items of 4 and 8 bytes, and rows read with a step: one element a thread
            # (make_gather), faster than the tiles on such windows; the tiles stay
            # faster on rows of 1- and 2-byte items read contiguously or reversed
            # (docs/PERFORMANCE.md, "Specialised paths").
            narrow = (8 * x.itemsize, "gather", config.CUDA_THREADS, narrow[3])
        wide = None
        k = 8 // x.itemsize
        # Rows contiguous in both arrays (``swap`` 0), or reversed in the input
        # (``swap`` the item's bits: each word's items are reversed in registers).
        step = ss[-1] if ds[-1] == 1 and ss[-1] in (1, -1) else 0
        first = sb if step == 1 else sb - (k - 1)  # the input's first word of row 0
        if (
            k > 1
            and step != 0
            and shape[-1] % k == 0
            and first % k == 0
            and db % k == 0
            and all(v % k == 0 for v in ss[:-1] + ds[:-1])
        ):
            wide = slice_spec(
                64,
                shape[:-1] + (shape[-1] // k,),
                tuple(v // k for v in ss[:-1]) + (step,),
                tuple(v // k for v in ds[:-1]) + (1,),
                first // k,
                db // k,
                0 if step == 1 else 8 * x.itemsize,
                fill,
            )
        self.slo, self.sspan, self.dlo, self.dspan = slo, sspan, dlo, dspan
        self.itemsize = x.itemsize
        self.specs = (narrow, wide)

    def _make(self, which, handle, ctx):
        spec = self.specs[which]
        assert spec is not None  # launch picks the word copy only where there is one
        bits, variant, block, geometry = spec
        if variant == "gather":
            blocks, params = gather_grid(geometry, block, gather_loads(bits))
            k = launch.kernel("gather", bits)
            return launch.launcher(k, blocks, block, handle, ctx, params)
        k = launch.kernel("slice", bits, 0, variant)
        # Blocks of one wave: the kernel's blocks an SM times the SMs.
        wave = 0 if SIM else launch.resident_blocks(k, ctx, block[0] * block[1])
        blocks, params = slice_tiles(geometry, block[1], wave * block[1])
        return launch.launcher(k, blocks, block, handle, ctx, params)

    def launch(self, handle, xp, op, ctx=0):
        """Copy from the input at ``xp`` to the output at ``op`` on stream ``handle``
        (``ctx``: the current context's handle, where the caller has it)."""
        sp, dp = xp + self.slo, op + self.dlo
        which = 1 if self.specs[1] is not None and not (sp | dp) & 7 else 0
        go = self.launcher(which, handle, ctx)
        if SIM:
            spec = self.specs[which]
            assert spec is not None
            isz = spec[0] // 8
            n = self.itemsize
            go(_arg(sp, self.sspan * n // isz, isz), _arg(dp, self.dspan * n // isz, isz))
        else:
            go(sp, dp)


class GradPlan(_Plan):
    """A one-pass slice_grad (:mod:`.grad_kernel`) of one shape: the gradient's and the
    output's layouts, the window's starts and steps (SLICE1's)."""

    def __init__(self, g, starts, steps, out):
        super().__init__()
        glo, gspan, src, gstr = extent(g.shape, g.strides, g.itemsize)
        dlo, dspan, dbase, dstr = extent(out.shape, out.strides, out.itemsize)
        lows, spacing, _, read_steps = scatter_window(starts, steps, g.shape)
        sst = []
        for n, st, t in zip(g.shape, gstr, read_steps):  # a reversed dimension read back
            if t < 0:
                src += (n - 1) * st
            sst.append(st * t)
        pad = MAXD - out.ndim  # the rows right-aligned, padded with dimensions of size 1
        shape = (1,) * pad + tuple(out.shape)
        spacing = (1,) * pad + tuple(spacing)
        divs = [divisor32(n) for n in shape]
        sdivs = [divisor32(k) for k in spacing]
        rows = 1
        for n in shape[:-1]:
            rows *= n
        # A row's lanes: the fewest (a power of two, at most 32) that take it a chunk each.
        lanes_log = min(5, (-(-shape[-1] // CHUNK) - 1).bit_length())
        # A segment: a pair of chunks a lane, MOST_PAIRS in long rows where a work item
        # has fewer than ROWS rows (its divisions would weigh on few elements).
        self.many = rows < ROWS and shape[-1] >= MOST_PAIRS * 2 * CHUNK * 32
        nseg = -(-shape[-1] // (pairs_of(self.many) * 2 * CHUNK << lanes_log))
        self.nwork = -(-rows // (ROWS * (32 >> lanes_log))) * nseg
        self.params = tuple(
            pack(
                SLICE_GRAD_CUDA,
                shape=shape,
                low=(0,) * pad + tuple(lows),
                spacing=spacing,
                count=(1,) * pad + tuple(g.shape),
                src_strides=(0,) * pad + tuple(sst),
                dst_strides=(0,) * pad + tuple(dstr),
                magic=[d[0] for d in divs],
                shift=[d[1] for d in divs],
                smagic=[d[0] for d in sdivs],
                sshift=[d[1] for d in sdivs],
                src_base=src,
                dst_base=dbase,
                rows=rows,
                inner=shape[-1],
                nseg=nseg,
                nwork=self.nwork,
                lanes_log=lanes_log,
            ).tolist()
        )
        self.bits, self.itemsize = 8 * g.itemsize, g.itemsize
        self.glo, self.gspan, self.dlo, self.dspan = glo, gspan, dlo, dspan

    def _make(self, spec, handle, ctx):
        k = launch.kernel("grad", self.bits, variant=(self.many, 0))
        threads = config.CUDA_THREADS
        # A few waves of resident blocks (each warp walks work items until none is left).
        most = 2 if SIM else 4 * launch.resident_blocks(k, ctx, threads)
        blocks = max(1, min(-(-self.nwork // (threads // 32)), most))
        return launch.launcher(k, blocks, threads, handle, ctx, self.params)

    def launch(self, handle, gp, op, ctx=0):
        """slice_grad from the gradient at ``gp`` into the output at ``op`` on stream
        ``handle`` (``ctx``: the current context's handle, where the caller has it)."""
        go = self.launcher(None, handle, ctx)
        sp, dp = gp + self.glo, op + self.dlo
        if SIM:
            go(_arg(sp, self.gspan, self.itemsize), _arg(dp, self.dspan, self.itemsize))
        else:
            go(sp, dp)


def one_pass(g, starts, steps, out):
    """Whether slice_grad of the gradient view ``g`` into the output view ``out`` takes
    the one-pass kernel (:class:`GradPlan`): a window whose rows are not whole (a step
    or a crop in the last dimension: a memset's sectors would be read back and written
    again by the window's writes) and every position below 2**31.  Whole rows keep a
    memset (or the complement's boxes) and one SLICE1 copy, which move no more bytes.
    So do windows where the memset runs faster than the kernel's steps through the
    zeros (docs/PERFORMANCE.md, "Specialised paths"): of 1- and 2-byte items, under
    half the output's elements (the kernel's cost is per element); of 8-byte items,
    in under half the output's rows."""
    lows, spacing, _, _ = scatter_window(starts, steps, g.shape)
    if spacing[-1] == 1 and g.shape[-1] == out.shape[-1]:
        return False
    if g.itemsize <= 2 and 2 * g.size < out.size:
        return False
    if g.itemsize == 8 and 2 * g.size * out.shape[-1] < out.size * g.shape[-1]:
        return False
    gspan = extent(g.shape, g.strides, g.itemsize)[1]
    dspan = extent(out.shape, out.strides, out.itemsize)[1]
    return max(gspan, dspan) < 1 << 31


# ------------------------------------------------------------------------- plans

_plans = Bounded()


def _layout(v):
    return (v.shape, v.strides, v.dtype)


def nonzero_plan(x, width, count, coords, limit):
    """The plan of a nonzero of these layouts (kept per layouts and settings generation)."""
    key = ("nonzero", _layout(x), width, _layout(count), _layout(coords), limit, config.GENERATION)
    p = _plans.get(key)
    if p is None:
        p = _plans.put(key, NonzeroPlan(x, width, count, coords, limit))
    return p


def slice_plan(x, starts, steps, out, fill=False):
    """The plan of a slice1 of these layouts (kept per layouts and settings generation);
    ``fill``: of zeroing ``out`` (``x`` is ``out``, see :class:`SlicePlan`)."""
    key = ("slice", _layout(x), _layout(out), starts, steps, fill, config.GENERATION)
    p = _plans.get(key)
    if p is None:
        p = _plans.put(key, SlicePlan(x, starts, steps, out, fill))
    return p


def grad_plan(g, starts, steps, out):
    """The one-pass slice_grad plan of these layouts (kept per layouts and settings
    generation)."""
    key = ("grad", _layout(g), _layout(out), starts, steps, config.GENERATION)
    p = _plans.get(key)
    if p is None:
        p = _plans.put(key, GradPlan(g, starts, steps, out))
    return p


def fill_plan(v):
    """The plan that zeroes every element of the view ``v`` (:class:`SlicePlan`'s
    ``fill``: the tiles store and read nothing); launched with ``v``'s address twice."""
    return slice_plan(v, (0,) * v.ndim, (1,) * v.ndim, v, True)
