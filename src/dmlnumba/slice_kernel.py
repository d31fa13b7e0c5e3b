"""The CUDA slice1 kernel: a strided copy, the same for every rank and layout.

The copy is tiled as (``nrows`` consecutive rows of the outer dimensions,
segment of ``seg`` elements of the inner one).  ``blockDim.y`` tiles per block,
``blockDim.x`` threads across a row segment: consecutive threads copy
consecutive elements.  A tile locates its first row by division once, then
steps to the next rows with an odometer.  Each thread issues ``LOADS`` loads
before it stores any, so that many are in flight (one body; ``LOADS`` is a
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
        last = ndim - 1
        inner = shape[last]
        ss = sst[last]
        ds = dstr[last]
        bx = cuda.blockDim.x
        tile = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
        step = cuda.gridDim.x * cuda.blockDim.y
        while tile < ntiles:
            group = tile // nseg
            j0 = (tile - group * nseg) * seg + cuda.threadIdx.x
            end = min((tile - group * nseg) * seg + seg, inner)
            r = group * nrows
            r_end = min(r + nrows, rows)
            unravel(r, shape, last, coords)
            while r < r_end:
                s = src_base + offset(coords, sst, last)
                d = dst_base + offset(coords, dstr, last)
                j = j0
                while j + (LOADS - 1) * bx < end:
                    for u in range(LOADS):
                        v[u] = src[s + (j + u * bx) * ss]
                    for u in range(LOADS):
                        dst[d + (j + u * bx) * ds] = v[u]
                    j += LOADS * bx
                while j < end:
                    dst[d + j * ds] = src[s + j * ss]
                    j += bx
                next_row(coords, shape, ndim)
                r += 1
            tile += step

    return slice_copy
