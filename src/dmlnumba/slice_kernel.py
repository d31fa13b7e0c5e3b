"""The CUDA slice1 kernel: a strided copy, the same for every rank and layout.

The copy is tiled as (``nrows`` consecutive rows of the outer dimensions,
segment of ``seg`` elements of the inner one).  ``blockDim.y`` tiles per block,
``blockDim.x`` threads across a row segment: consecutive threads copy
consecutive elements.  A tile locates its first row by division once, then
steps to the next rows with an odometer.  Each thread issues ``LOADS`` loads
before it stores any, along its row segment and on into the next rows, so that
many are in flight whatever the rows' length (one body; ``LOADS`` is a
compile-time constant, so the loops unroll into registers).
"""

from numba import cuda, int64

from .indexmath_gpu import next_row, offset, read_row, unravel
from .params import MAXD
from .params import SLICE_CUDA as P

#: Loads each thread has in flight (docs/PERFORMANCE.md, "slice1 loads in flight").
LOADS = 8


def make_slice(item):
    """The slice kernel for elements of numba type ``item`` (an unsigned integer
    type of the element's width): ``(src, dst, p)``, ``p`` a :data:`SLICE_CUDA`
    block."""

    def slice_copy(src, dst, p):
        src_base = p[P.src_base]
        dst_base = p[P.dst_base]
        ndim = p[P.ndim]
        seg = p[P.seg]
        nseg = p[P.nseg]
        rows = p[P.rows]
        nrows = p[P.nrows]
        ntiles = p[P.ntiles]
        shape = cuda.local.array(MAXD, int64)
        read_row(p, P.shape, ndim, shape)
        sst = cuda.local.array(MAXD, int64)
        read_row(p, P.src_strides, ndim, sst)
        dstr = cuda.local.array(MAXD, int64)
        read_row(p, P.dst_strides, ndim, dstr)
        coords = cuda.local.array(MAXD, int64)
        v = cuda.local.array(LOADS, item)
        sa = cuda.local.array(LOADS, int64)
        da = cuda.local.array(LOADS, int64)
        last = ndim - 1
        inner = shape[last]
        ss = sst[last]
        ds = dstr[last]
        s_outer = sst[last - 1] if last > 0 else 0  # one row on in the next-to-last dimension
        d_outer = dstr[last - 1] if last > 0 else 0
        bx = cuda.blockDim.x
        tile = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
        step = cuda.gridDim.x * cuda.blockDim.y
        while tile < ntiles:
            group = tile // nseg
            j0 = (tile - group * nseg) * seg + cuda.threadIdx.x
            end = min((tile - group * nseg) * seg + seg, inner)
            r = group * nrows
            r_end = min(r + nrows, rows) if j0 < end else r  # else: no element of the row
            unravel(r, shape, last, coords)
            s = src_base + offset(coords, sst, last)
            d = dst_base + offset(coords, dstr, last)
            j = j0
            while r < r_end:
                # The next LOADS elements of this thread, along its row segment and on
                # into the next rows: their addresses first, then all the loads, then
                # the stores, so that short rows keep as many loads in flight as long
                # ones.
                n = 0
                for u in range(LOADS):
                    if r < r_end:
                        sa[u] = s + j * ss
                        da[u] = d + j * ds
                        n = u + 1
                        j += bx
                        if j >= end:  # the next row
                            j = j0
                            r += 1
                            if last > 0 and coords[last - 1] + 1 < shape[last - 1]:
                                coords[last - 1] += 1  # the usual step: no odometer
                                s += s_outer
                                d += d_outer
                            else:
                                next_row(coords, shape, ndim)
                                s = src_base + offset(coords, sst, last)
                                d = dst_base + offset(coords, dstr, last)
                for u in range(LOADS):
                    if u < n:
                        v[u] = src[sa[u]]
                for u in range(LOADS):
                    if u < n:
                        dst[da[u]] = v[u]
            tile += step

    return slice_copy
