"""The CPU slice1 kernel: strided rows copied chunk by chunk (gathered, reversed or
plain), with software prefetch of the rows ahead.  The chunk copy is one body
compiled for each bit width and kind of rows (:mod:`.slice_kinds`), the driver one
body compiled serial and ``parallel=True``."""

import numpy as np
from numba import carray, prange, types
from numba import config as _nbconfig
from numba.core import cgutils
from numba.extending import intrinsic

from ..params import MAXD
from .compiling import c_function, jit
from .indexmath import _inline, block_bounds, next_row, offset, unravel
from .llvm import call_void, data_pointer, item_pointer, stack_array
from .llvm import prefetch as _prefetch
from .slice_kinds import KINDS, LINE, TILE

#: Rows prefetched ahead of the one being copied, and the widest source row
#: (in bytes, first to last element) that is prefetched at all: a wider row
#: would not stay in cache until its turn.
PREFETCH_ROWS = 2
PREFETCH_SPAN = 8192
#: Contiguous rows of at least this many bytes are copied by ``memcpy``.
MEMCPY_BYTES = 256


@intrinsic
def _item_bytes(typingctx, arr):
    """The item size of ``arr`` as a compile-time constant (numba reads
    ``arr.itemsize`` at run time): branches on it fold away in each bit width's
    kernel, so that code for one width is compiled only there."""
    n = arr.dtype.bitwidth // 8

    def codegen(context, builder, signature, args):
        return context.get_constant(types.int64, n)

    return types.int64(arr), codegen


@intrinsic
def _memcpy(typingctx, dst, d, src, s, n):
    """``dst[d : d + n] = src[s : s + n]`` by the C library's ``memcpy`` (LLVM's
    intrinsic of a runtime length): the arrays never overlap here.  For long rows
    (``MEMCPY_BYTES``): as fast as NumPy's copy where the data comes from memory,
    and free of the vector loop's stalls where source and destination lie a
    multiple of 4 KiB apart (docs/PERFORMANCE.md, "Specialised paths")."""

    def codegen(context, builder, signature, args):
        dty, _, sty, _, _ = signature.args
        da = context.make_array(dty)(context, builder, args[0])
        sa = context.make_array(sty)(context, builder, args[2])
        dp = cgutils.get_item_pointer(context, builder, dty, da, [args[1]], wraparound=False)
        sp = cgutils.get_item_pointer(context, builder, sty, sa, [args[3]], wraparound=False)
        width = context.get_constant(types.intp, dty.dtype.bitwidth // 8)
        cgutils.raw_memcpy(builder, dp, sp, args[4], width)
        return context.get_dummy_value()

    return types.void(dst, d, src, s, n), codegen


if getattr(_nbconfig, "DISABLE_JIT", 0):  # plain Python: an intrinsic cannot be called

    def _item_bytes(arr):  # type: ignore[misc]  # a plain function in the intrinsic's place
        return arr.itemsize

    def _memcpy(dst, d, src, s, n):  # type: ignore[misc]
        dst[d : d + n] = src[s : s + n]


@jit
def _prefetch_row(src, p, st, n, line):
    """Prefetch the cache lines of ``src[p], src[p + st], ..., src[p + (n-1)*st]``
    (``st != 0``) when they span at most ``PREFETCH_SPAN`` bytes; ``line``: the
    elements of a cache line.

    No division: it runs once a row, and ``LINE // itemsize`` (numba reads the
    itemsize at run time) and a ``range`` with a runtime step (its trip count)
    divide, and a division a row weighs on strided copies of short rows
    (docs/PERFORMANCE.md).  One exit, like ``next_row``."""
    w: int = _item_bytes(src)
    step = st if st > 0 else -st
    lo = p if st > 0 else p + (n - 1) * st
    span = (n - 1) * step
    if (span + 1) * w <= PREFETCH_SPAN:
        if step >= line:  # every element on a line of its own
            q = lo
            for _ in range(n):
                _prefetch(src, q)
                q += step
        else:  # every line between the ends holds an element
            q = lo
            while q <= lo + span:
                _prefetch(src, q)
                q += line
            _prefetch(src, lo + span)


@_inline
def _block(c, r, coords, ndim, row, nr, npl, plane, remaining, pf):
    """The next block from the odometer's column ``c`` and row ``r``: ``(n, nrows,
    nplanes, on, planes)``, ``nplanes`` planes of ``nrows`` rows of ``n`` elements:
    a partial row, whole rows up to the end of their plane, or (``planes``) whole
    planes up to the end of the third-to-last dimension; ``on``: prefetch rows
    (``pf``, never for a partial row)."""
    if c > 0 or remaining < row:  # a partial row
        return min(row - c, remaining), 1, 1, False, False
    if ndim > 2 and r == 0 and remaining >= plane:  # whole planes
        return row, nr, min(npl - coords[ndim - 3], remaining // plane), pf, True
    return row, min(nr - r, remaining // row), 1, pf, False  # whole rows


@_inline
def _rows(src, dst, s, d, ps, pd, rs, rd, ss, ds, pst, n, nrows, nplanes, on, line):
    """The block ``dst[d + q*pd + i*rd + k*ds] = src[s + q*ps + i*rs + k*ss]``, row by
    row: the one loop nest of every kind of row but ``memcpy``'s and the tiles'.  Each
    caller's branch passes what it knows as constants (``ss`` and ``ds`` 1 for plain
    rows, -1 and 1 for reversed ones, 2 to 4 and 1 for 1-byte gathers), so that each
    inlined copy is a nest of its own kind: positions never negative and unsigned
    (numba then adds no negative-index handling) and constant strides, which LLVM
    vectorizes.  ``on``: prefetch the row ``PREFETCH_ROWS`` ahead in the plane
    (:func:`_prefetch_row`, a call: inlined into each loop nest it multiplied the
    compile time), by the row stride ``pst`` (a literal where the caller knows it,
    which the prefetch specialises on; the 1-byte gathers pass the runtime stride)."""
    u = np.uint64
    for q in range(nplanes):
        a = s + q * ps
        b = d + q * pd
        for i in range(nrows):
            if on and i + PREFETCH_ROWS < nrows:
                _prefetch_row(src, a + PREFETCH_ROWS * rs, pst, n, line)
            for k in range(n):
                dst[u(b + k * ds)] = src[u(a + k * ss)]
            a += rs
            b += rd


@_inline
def _copy_plain_rows(src, dst, s, d, ps, pd, rs, rd, n, nrows, nplanes, on, line):
    """The block ``dst[d + q*pd + i*rd + k] = src[s + q*ps + i*rs + k]`` (contiguous
    rows into contiguous rows): long rows by ``memcpy``, short ones by the loop nest of
    :func:`_rows` with constant strides, so that they cost a few instructions each.
    ``on``: prefetch the row ``PREFETCH_ROWS`` ahead, by its stride as a constant."""
    if n * _item_bytes(src) >= MEMCPY_BYTES:
        for q in range(nplanes):
            a = s + q * ps
            b = d + q * pd
            for i in range(nrows):
                if on and i + PREFETCH_ROWS < nrows:
                    _prefetch_row(src, a + PREFETCH_ROWS * rs, 1, n, line)
                _memcpy(dst, b, src, a, n)
                a += rs
                b += rd
    else:
        _rows(src, dst, s, d, ps, pd, rs, rd, 1, 1, 1, n, nrows, nplanes, on, line)


@_inline
def _copy_tiles(src, dst, s, d, ps, pd, rs, rd, ss, n, nrows, nplanes):
    """The block ``dst[d + q*pd + i*rd + k] = src[s + q*ps + i*rs + k*ss]`` where every
    element of a row lies on a cache line of its own and the next rows' elements on the
    same lines (a transposed input): ``TILE`` rows at a time, column by column, so that
    each line read serves them all before it leaves the cache."""
    u = np.uint64
    for q in range(nplanes):
        a0 = s + q * ps
        b0 = d + q * pd
        for i0 in range(0, nrows, TILE):
            m = min(TILE, nrows - i0)
            a = a0 + i0 * rs
            b = b0 + i0 * rd
            for k in range(n):
                for i in range(m):
                    dst[u(b + i * rd + k)] = src[u(a + i * rs)]
                a += ss


def _chunk_copy(kind):
    """The chunk copy (:func:`copy_chunk` below) of one kind of rows
    (:data:`~dmlnumba.cpu.slice_kinds.KINDS`): a closure constant, which numba prunes
    before it types the body (so that a first call compiles its own kind's loop nest
    alone: docs/PERFORMANCE.md, "Startup and compile time"), and keyed apart in its
    disk cache."""
    if kind not in KINDS:
        raise ValueError(f"_chunk_copy: no kind of rows {kind!r}")
    plain, reverse, tiles, strided = (kind == k for k in ("plain", "reversed", "tiles", "strided"))
    gather = int(kind[-1]) if kind.startswith("gather") else 0

    def copy_chunk(sp, sn, sb, dp, dn, db, gp, gn, chunk, c):
        """Copy chunk ``c`` (output elements ``[c*chunk, (c+1)*chunk)``) of a strided
        copy from the ``sn`` items at ``sp`` to the ``dn`` at ``dp``: ``geom`` (``3 x
        gn`` at ``gp``) rows are sizes, source and destination strides (at most ``MAXD``
        dimensions: the odometer's room).  Compiled as a C function of each bit width
        and kind (:func:`chunk_function`), which both drivers below call through its
        address.

        Blocks of the largest shape that fits what is left (:func:`_block`), each the
        kind's loop nest (:func:`_copy_plain_rows`, :func:`_rows`, :func:`_copy_tiles`).
        The odometer (and a full offset computation) runs only where a block ends a run.
        """
        src = carray(sp, sn)
        dst = carray(dp, dn)
        geom = carray(gp, (3, gn))
        ndim = geom.shape[1]
        shape = geom[0]
        sst = geom[1]
        dstr = geom[2]
        total = 1
        for k in range(ndim):
            total *= shape[k]
        lo, hi = block_bounds(c, chunk, total)
        coords = stack_array(geom[0], MAXD)  # (ndim <= MAXD: DirectML's 8 dimensions)
        unravel(lo, shape, ndim, coords)
        line = LINE // _item_bytes(src)  # elements a cache line
        last = ndim - 1
        row = shape[last]
        ss = sst[last]
        ds = dstr[last]
        nr = shape[last - 1] if ndim > 1 else 1
        rs = sst[last - 1] if ndim > 1 else 0
        rd = dstr[last - 1] if ndim > 1 else 0
        npl = shape[last - 2] if ndim > 2 else 1
        ps = sst[last - 2] if ndim > 2 else 0
        pd = dstr[last - 2] if ndim > 2 else 0
        plane = nr * row
        # Rows are often short and far apart (a strided window), which hardware
        # prefetchers cannot follow across pages: ask for the source row
        # PREFETCH_ROWS ahead while one is copied.  Not where the rows leave no gap
        # of a cache line between them: the source is then read as one stream, which
        # the hardware follows, and a prefetch only adds work.  Nor for rows that
        # memcpy copies: the hardware follows a stream of lines, and a prefetch slows
        # their copy (docs/PERFORMANCE.md, "Specialised paths").
        step = rs if rs > 0 else -rs
        span = (row - 1) * (ss if ss > 0 else -ss) + 1
        memcpy_rows = ss == 1 and ds == 1 and row * _item_bytes(src) >= MEMCPY_BYTES
        pf = ss != 0 and ndim > 1 and step >= span + line and not memcpy_rows
        s = sb + offset(coords, sst, ndim)
        d = db + offset(coords, dstr, ndim)
        remaining = hi - lo
        while remaining > 0:
            c = coords[last]
            r = coords[last - 1] if ndim > 1 else 0
            n, nrows, nplanes, on, planes = _block(
                c, r, coords, ndim, row, nr, npl, plane, remaining, pf
            )
            if plain:  # ss == ds == 1
                _copy_plain_rows(src, dst, s, d, ps, pd, rs, rd, n, nrows, nplanes, on, line)
            elif reverse:  # ss == -1, ds == 1
                _rows(src, dst, s, d, ps, pd, rs, rd, -1, 1, -1, n, nrows, nplanes, on, line)
            elif gather == 2:  # ss == 2, ds == 1, 1-byte items
                _rows(src, dst, s, d, ps, pd, rs, rd, 2, 1, ss, n, nrows, nplanes, on, line)
            elif gather == 3:
                _rows(src, dst, s, d, ps, pd, rs, rd, 3, 1, ss, n, nrows, nplanes, on, line)
            elif gather == 4:
                _rows(src, dst, s, d, ps, pd, rs, rd, 4, 1, ss, n, nrows, nplanes, on, line)
            elif tiles:  # ds == 1
                _copy_tiles(src, dst, s, d, ps, pd, rs, rd, ss, n, nrows, nplanes)
            elif strided:  # ds == 1
                _rows(src, dst, s, d, ps, pd, rs, rd, ss, 1, ss, n, nrows, nplanes, on, line)
            else:  # general
                _rows(src, dst, s, d, ps, pd, rs, rd, ss, ds, ss, n, nrows, nplanes, on, line)
            remaining -= n * nrows * nplanes
            if remaining <= 0:
                break
            # On to column 0 of the next row (or plane).
            s -= c * ss
            d -= c * ds
            coords[last] = 0
            if planes:
                if coords[last - 2] + nplanes < npl:
                    coords[last - 2] += nplanes
                    s += nplanes * ps
                    d += nplanes * pd
                    continue
                coords[last - 2] = npl - 1
                coords[last - 1] = nr - 1
            elif ndim > 1 and r + nrows < nr:
                coords[last - 1] = r + nrows
                s += nrows * rs
                d += nrows * rd
                continue
            elif ndim > 1:
                coords[last - 1] = nr - 1
            next_row(coords, shape, ndim)
            s = sb + offset(coords, sst, ndim)
            d = db + offset(coords, dstr, ndim)

    return copy_chunk


def chunk_function(bits, kind):
    """The address of the chunk copy (:func:`_chunk_copy`) of ``kind`` for ``bits``-bit items as a
    C function (made, or loaded from numba's cache), which the drivers call; the target
    makes it once (``cpu.compiling.c_function_address``).  Called directly, as a jitted
    function, its code was linked into each driver's, and LLVM optimized and compiled
    it again for each (the parallel driver's parfor twice), which doubled a first
    parallel call's compile (docs/PERFORMANCE.md)."""
    p, i = item_pointer(bits), types.int64
    sig = types.void(p, i, i, p, i, i, types.CPointer(i), i, i, i)
    return c_function(sig, _chunk_copy(kind))


def _slice_driver(parallel):
    """The slice driver, on numba's threads or (``parallel=False``) the calling one:
    one body, compiled twice.  ``loop`` is a closure variable that differs between
    the two, so that numba's disk cache (keyed by the function's code and closure)
    keeps them apart.  ``f``: the address of the chunk copy of the arrays' bit width
    (:func:`chunk_function`)."""
    loop = prange if parallel else range

    def slice_copy(f, src, src_base, dst, dst_base, geom, chunk, nchunks):
        """Strided copy, chunk by chunk."""
        sp, sn, dp, dn = data_pointer(src), src.size, data_pointer(dst), dst.size
        gp, gn = data_pointer(geom), geom.shape[1]
        for c in loop(nchunks):
            call_void(f, sp, sn, src_base, dp, dn, dst_base, gp, gn, chunk, np.int64(c))

    return jit(parallel=parallel, nogil=True)(slice_copy)


slice_copy = _slice_driver(False)
slice_copy_parallel = _slice_driver(True)
