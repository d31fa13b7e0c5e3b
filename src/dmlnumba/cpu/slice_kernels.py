"""The CPU slice1 kernel: strided rows copied chunk by chunk (gathered, reversed or
plain), with software prefetch of the rows ahead; one body compiled serial and
``parallel=True``."""

import numpy as np
from numba import prange

from .compiling import jit
from .indexmath import _inline, block_bounds, next_row, offset, unravel
from .llvm import prefetch as _prefetch

#: A cache line, in bytes (the step between software prefetches).
LINE = 64
#: Rows prefetched ahead of the one being copied, and the widest source row
#: (in bytes, first to last element) that is prefetched at all: a wider row
#: would not stay in cache until its turn.
PREFETCH_ROWS = 2
PREFETCH_SPAN = 8192


@_inline
def _prefetch_row(src, p, st, n, line):
    """Prefetch the cache lines of ``src[p], src[p + st], ..., src[p + (n-1)*st]``
    (``st != 0``) when they span at most ``PREFETCH_SPAN`` bytes; ``line``: the
    elements of a cache line.

    No division: it runs once a row, and ``LINE // itemsize`` (numba reads the
    itemsize at run time) and a ``range`` with a runtime step (its trip count)
    divided twice a row, 12-30% of a strided copy's time with rows of 6 to 85
    elements (docs/PERFORMANCE.md).  One exit, like ``next_row``."""
    w = src.itemsize
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
def _gather_row(src, s, dst, d, n, st):
    """``dst[d + k] = src[s + k * st]`` for ``0 <= k < n``, with ``st >= 1``.

    Called with a literal ``st``: after inlining LLVM sees a constant stride and
    vectorizes the gather, which a runtime stride prevents (the loop is about
    twice as fast per core for stride 3).
    """
    seg = src[s : s + (n - 1) * st + 1]
    dv = dst[d : d + n]
    for k in range(n):
        dv[k] = seg[k * st]


@_inline
def _reverse_row(src, s, dst, d, n):
    """``dst[d + k] = src[s - k]`` for ``0 <= k < n``."""
    seg = src[s - (n - 1) : s + 1]
    dv = dst[d : d + n]
    last = n - 1
    for k in range(n):
        dv[k] = seg[last - k]


@_inline
def _copy_range(src, sb, dst, db, shape, sst, dstr, ndim, lo, hi):
    """Copy output elements ``[lo, hi)`` of a strided copy, a row at a time.

    Row starts move by one stride of the next-to-last dimension; the odometer
    (and a full offset computation) runs only when that dimension wraps.
    """
    coords = np.empty(ndim, np.int64)
    unravel(lo, shape, ndim, coords)
    line = LINE // src.itemsize  # elements a cache line
    last = ndim - 1
    row = shape[last]
    ss = sst[last]
    ds = dstr[last]
    s = sb + offset(coords, sst, ndim)
    d = db + offset(coords, dstr, ndim)
    remaining = hi - lo
    while remaining > 0:
        n = min(row - coords[last], remaining)
        if ss != 0 and ndim > 1 and coords[last - 1] + PREFETCH_ROWS < shape[last - 1]:
            # Rows are often short and far apart (a strided window), which
            # hardware prefetchers cannot follow across pages: ask for the
            # source row PREFETCH_ROWS ahead while this one is copied.
            _prefetch_row(src, s - coords[last] * ss + PREFETCH_ROWS * sst[last - 1], ss, row, line)
        if ss == 1 and ds == 1:
            # A loop over two slices: LLVM turns it into a vector copy, while a
            # slice assignment (overlap and broadcast handling) costs about 3 s
            # more to compile for each bit width.
            sv = src[s : s + n]
            dv = dst[d : d + n]
            for k in range(n):
                dv[k] = sv[k]
        elif ds == 1 and ss == 2:
            _gather_row(src, s, dst, d, n, 2)
        elif ds == 1 and ss == 3:
            _gather_row(src, s, dst, d, n, 3)
        elif ds == 1 and ss == 4:
            _gather_row(src, s, dst, d, n, 4)
        elif ds == 1 and ss == -1:
            _reverse_row(src, s, dst, d, n)
        else:
            # Any other strides (short rows, broadcast sources, outputs with gaps):
            # element by element.  The positions are never negative, and unsigned
            # indices tell numba so (no negative-index handling in the loop).
            for k in range(n):
                dst[np.uint64(d + k * ds)] = src[np.uint64(s + k * ss)]
        remaining -= n
        if remaining <= 0:
            break
        # Next row: back to column 0, one step in the next-to-last dimension.
        s -= coords[last] * ss
        d -= coords[last] * ds
        coords[last] = 0
        if ndim > 1 and coords[last - 1] + 1 < shape[last - 1]:
            coords[last - 1] += 1
            s += sst[last - 1]
            d += dstr[last - 1]
        else:
            next_row(coords, shape, ndim)
            s = sb + offset(coords, sst, ndim)
            d = db + offset(coords, dstr, ndim)


@jit
def _copy_chunk(src, src_base, dst, dst_base, geom, chunk, c):
    """Copy chunk ``c`` (output elements ``[c*chunk, (c+1)*chunk)``) of a strided
    copy: ``geom`` rows are sizes, source and destination strides.  The one body
    of both drivers below, called with the same argument types from both (so it
    compiles once per bit width)."""
    ndim = geom.shape[1]
    shape = geom[0]
    total = 1
    for d in range(ndim):
        total *= shape[d]
    lo, hi = block_bounds(c, chunk, total)
    _copy_range(src, src_base, dst, dst_base, shape, geom[1], geom[2], ndim, lo, hi)


def _slice_driver(parallel):
    """The slice driver, on numba's threads or (``parallel=False``) the calling one:
    one body, compiled twice.  ``loop`` is a closure variable that differs between
    the two, so that numba's disk cache (keyed by the function's code and closure)
    keeps them apart."""
    loop = prange if parallel else range

    def slice_copy(src, src_base, dst, dst_base, geom, chunk, nchunks):
        """Strided copy, chunk by chunk."""
        for c in loop(nchunks):
            _copy_chunk(src, src_base, dst, dst_base, geom, chunk, np.int64(c))

    return jit(parallel=parallel, nogil=True)(slice_copy)


slice_copy = _slice_driver(False)
slice_copy_parallel = _slice_driver(True)
