"""The CUDA slice1 kernel: a strided copy, the same for every rank and layout.

The copy is tiled as (``nrows`` consecutive rows of the outer dimensions,
segment of ``seg`` elements of the inner one).  ``blockDim.y`` tiles per block,
``blockDim.x`` threads across a row segment: consecutive threads copy
consecutive elements.  A tile locates its first row by division once, then
steps to the next rows by adding strides (dividing again only where
the next-to-last dimension wraps).  Each thread issues ``LOADS`` loads
before it stores any, along its row segment and on into the next rows, so that
many are in flight whatever the rows' length (one body; ``LOADS`` is a
compile-time constant, so the loops unroll into registers).
"""

from numba import cuda, int32, int64

from ..params import MAXD, copier, size
from ..params import SLICE_CUDA as P
from .indexmath import row_start

#: Slots of the parameter block.
PSIZE = size(P)
copy_params = cuda.jit(device=True)(copier(P))

#: Loads each thread has in flight (docs/PERFORMANCE.md, "slice1 loads in flight").
LOADS = 8


def make_slice(item, narrow=False):
    """The slice kernel for elements of numba type ``item`` (an unsigned integer
    type of the element's width): ``(p, src, dst)``, ``p`` a :data:`SLICE_CUDA`
    block passed by value (a tuple of kernel parameters).  ``narrow``: every
    element position of both arrays is below 2**31, and the positions a thread
    keeps in flight are 32-bit."""
    I = int32 if narrow else int64  # noqa: E741

    def slice_copy(params, src, dst):
        # The parameter block, from the kernel's parameters into shared memory:
        # every read of it after that is a plain shared load.
        p = cuda.shared.array(PSIZE, int64)
        t = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x
        if t == 0:
            copy_params(params, p)
        cuda.syncthreads()
        src_base = I(p[P.src_base])
        dst_base = I(p[P.dst_base])
        ndim = p[P.ndim]
        seg = I(p[P.seg])
        nseg = I(p[P.nseg])
        rows = I(p[P.rows])
        nrows = I(p[P.nrows])
        ntiles = I(p[P.ntiles])
        # The layout, one copy per block in shared memory, and no coordinates array:
        # numba zero-fills every cuda.local.array at kernel entry, which cost each
        # thread 256 bytes of local-memory stores (docs/PERFORMANCE.md).
        shape = cuda.shared.array(MAXD, int64)
        sst = cuda.shared.array(MAXD, int64)
        dstr = cuda.shared.array(MAXD, int64)
        t = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x
        if t < ndim:
            shape[t] = p[P.shape + t]
            sst[t] = p[P.src_strides + t]
            dstr[t] = p[P.dst_strides + t]
        cuda.syncthreads()
        v = cuda.local.array(LOADS, item)
        sa = cuda.local.array(LOADS, I)
        da = cuda.local.array(LOADS, I)
        last = ndim - 1
        inner = I(shape[last])
        ss = I(sst[last])
        ds = I(dstr[last])
        # One row on in the next-to-last dimension, and that dimension's size.
        s_outer = I(sst[last - 1] if last > 0 else 0)
        d_outer = I(dstr[last - 1] if last > 0 else 0)
        n_outer = I(shape[last - 1] if last > 0 else 1)
        bx = I(cuda.blockDim.x)
        tile = I(cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y)
        step = I(cuda.gridDim.x * cuda.blockDim.y)
        while tile < ntiles:
            group = I(tile // nseg)
            j0 = I((tile - group * nseg) * seg + cuda.threadIdx.x)
            end = I(min((tile - group * nseg) * seg + seg, inner))
            r = I(group * nrows)
            r_end = I(min(r + nrows, rows) if j0 < end else r)  # else: no element of the row
            s, d, c = row_start(r, shape, last, sst, dstr)
            s = I(s + src_base)
            d = I(d + dst_base)
            c = I(c)
            j = j0
            while r < r_end:
                # The next LOADS elements of this thread, along its row segment and on
                # into the next rows: their addresses first, then all the loads, then
                # the stores, so that short rows keep as many loads in flight as long
                # ones.  A row step adds strides; where the next-to-last dimension
                # wraps, the batch ends there and the next row's start is divided out
                # after it, outside the unrolled loop (which keeps its arrays in
                # registers that way).
                n = 0
                wrapped = False
                for u in range(LOADS):
                    if r < r_end and not wrapped:
                        sa[u] = I(s + j * ss)
                        da[u] = I(d + j * ds)
                        n = u + 1
                        j = I(j + bx)
                        if j >= end:  # the next row
                            j = j0
                            r = I(r + 1)
                            if c + 1 < n_outer:  # the usual step: no division
                                c = I(c + 1)
                                s = I(s + s_outer)
                                d = I(d + d_outer)
                            else:
                                wrapped = True
                for u in range(LOADS):
                    if u < n:
                        v[u] = src[sa[u]]
                for u in range(LOADS):
                    if u < n:
                        dst[da[u]] = v[u]
                if wrapped:
                    s, d, c = row_start(r, shape, last, sst, dstr)
                    s = I(s + src_base)
                    d = I(d + dst_base)
                    c = I(c)
            tile = I(tile + step)

    return slice_copy
