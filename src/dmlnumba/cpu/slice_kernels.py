"""The CPU slice1 kernel: strided rows copied chunk by chunk (the loop nests of
:mod:`.slice_rows`), a C function of each bit width and kind of row, and its two
drivers, serial and ``parallel=True`` (one body compiled twice)."""

import numpy as np
from numba import carray, prange, types

from .compiling import c_function, jit
from .indexmath import block_bounds, next_row, offset, unravel
from .llvm import call_void, data_pointer, item_pointer
from .slice_rows import (
    LINE,
    MEMCPY_BYTES,
    TILE,
    block,
    copy_strided_rows,
    copy_unit_rows,
    item_bytes,
)


def row_kind(geom):
    """The kind of chunk copy (:func:`chunk_function`) that copies the window's rows
    (the last column of ``geom``'s sizes, source and destination strides): ``"unit"``
    for rows contiguous or reversed into contiguous rows, else ``"any"`` (the copy of
    every kind of row)."""
    n = geom.shape[1]
    unit = n and geom[2, n - 1] == 1 and geom[1, n - 1] in (1, -1)
    return "unit" if unit else "any"


def _chunk_copy(kind):
    """The chunk copy of rows of ``kind`` (:func:`row_kind`).  ``any_rows`` is a
    closure constant, which numba prunes before it types the body and its disk cache
    keys: the copy of unit rows compiles their loop nests alone (a first call of a
    reversed or cropped window in about two thirds of the time).  The copy of any row
    keeps the unit rows' nests beside the strided ones: compiled without them, the
    strided nests ran 4-8% slower on short rows (docs/PERFORMANCE.md)."""
    any_rows = kind == "any"

    def _copy_chunk(sp, sn, sb, dp, dn, db, gp, gn, chunk, c):
        """Copy chunk ``c`` (output elements ``[c*chunk, (c+1)*chunk)``) of a strided
        copy from the ``sn`` items at ``sp`` to the ``dn`` at ``dp``: ``geom`` (``3 x
        gn`` at ``gp``) rows are sizes, source and destination strides.  Compiled as a C
        function of each bit width and kind (:func:`chunk_function`), which both
        drivers below call through its address.

        Blocks of the largest shape that fits what is left (:func:`block`), each one
        loop nest (:func:`copy_unit_rows`, :func:`copy_strided_rows`).  The odometer
        (and a full offset computation) runs only where a block ends a run.
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
        coords = np.empty(ndim, np.int64)
        unravel(lo, shape, ndim, coords)
        line = LINE // item_bytes(src)  # elements a cache line
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
        tiles = (ss if ss > 0 else -ss) >= line and step < line and row >= TILE and nr >= TILE
        span = (row - 1) * (ss if ss > 0 else -ss) + 1
        memcpy_rows = ss == 1 and ds == 1 and row * item_bytes(src) >= MEMCPY_BYTES
        pf = ss != 0 and ndim > 1 and step >= span + line and not memcpy_rows
        s = sb + offset(coords, sst, ndim)
        d = db + offset(coords, dstr, ndim)
        remaining = hi - lo
        while remaining > 0:
            c = coords[last]
            r = coords[last - 1] if ndim > 1 else 0
            n, nrows, nplanes, on, planes = block(
                c, r, coords, ndim, row, nr, npl, plane, remaining, pf
            )
            # (The test stays in the copy of unit rows, where it always holds: LLVM
            # compiled their loops 1.25x slower on rows of 4 int16 without it.)
            if ds == 1 and (ss == 1 or ss == -1):
                copy_unit_rows(src, dst, s, d, ps, pd, rs, rd, ss, n, nrows, nplanes, on, line)
            elif any_rows:
                copy_strided_rows(
                    src, dst, s, d, ps, pd, rs, rd, ss, ds, n, nrows, nplanes, on, line, tiles
                )
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

    return _copy_chunk


def chunk_function(bits, kind):
    """The address of the chunk copy of rows of ``kind`` (:func:`row_kind`) for
    ``bits``-bit items as a C function (made,
    or loaded from numba's cache), which the drivers call; the target makes it once
    (``cpu.compiling.c_function_address``).  Called directly, as a jitted function, its code was
    linked into each driver's, and LLVM optimized and compiled it again for each (the
    parallel driver's parfor twice), which doubled a first parallel call's compile
    (docs/PERFORMANCE.md)."""
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
