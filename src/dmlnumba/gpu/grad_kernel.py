"""The CUDA slice_grad kernel: every element of a C-contiguous output written once,
row after row, with the gradient's element where the window holds it and zero
elsewhere.

Zeros and the window written apart (a memset or zeroed boxes, then a SLICE1 copy)
write the output in two interleaved passes, which write rows a fraction of the
DRAM's speed where the window takes every other row (docs/PERFORMANCE.md); here a
work item writes ``group`` consecutive rows, a segment of ``seg`` elements of each,
its threads across the segment, each with ``loads`` elements in flight.  A work item
locates its first row by division once, then steps to the next rows by counting:
the window's index along the next-to-last dimension and its phase between two of
the window's indices (dividing again only where that dimension wraps)."""

from numba import cuda, int32, int64

from ..params import GRAD_CUDA as G
from ..params import MAXD, rows_copier
from .warp import agent

#: The parameter block's rows into shared memory (see :mod:`dmlnumba.gpu.slice_kernel`).
copy_rows = cuda.jit(device=True)(rows_copier(G))

#: Elements each thread has in flight.
GRAD_LOADS = 8


@agent
def locate(r, last, shape, lows, spacing, counts, gsteps):
    """Row ``r`` of the outer dimensions: ``(inside, src, e)``: whether the window
    holds it in every dimension before the next-to-last, the gradient's offset of
    those dimensions' window indices, and the next-to-last dimension's index less the
    window's first (``e``; 0 where ``last`` is 0: a 1-d output has one row)."""
    inside = True
    src = int64(0)
    e = int64(0)
    for i in range(last):
        d = last - 1 - i
        n = shape[d]
        q = r // n
        c = r - q * n
        r = q
        if d == last - 1:
            e = c - lows[d]
        else:
            f = c - lows[d]
            k = f // spacing[d]
            if f < 0 or f != k * spacing[d] or k >= counts[d]:
                inside = False
            else:
                src += k * gsteps[d]
    return inside, src, e


def make_grad(item, loads=GRAD_LOADS):
    """The slice_grad kernel for elements of numba type ``item``: ``(p, src, dst)``,
    ``p`` a :data:`~dmlnumba.params.GRAD_CUDA` block passed by value, ``src`` the
    flat gradient, ``dst`` the flat output (C-contiguous from ``out_base``)."""

    def grad(params, src, dst):
        p = params
        ndim = p[G.ndim]
        shape = cuda.shared.array(MAXD, int64)
        lows = cuda.shared.array(MAXD, int64)
        spacing = cuda.shared.array(MAXD, int64)
        counts = cuda.shared.array(MAXD, int64)
        gsteps = cuda.shared.array(MAXD, int64)
        if cuda.threadIdx.x == 0:
            copy_rows(params, shape, lows, spacing, counts, gsteps)
        cuda.syncthreads()
        v = cuda.local.array(loads, item)
        last = ndim - 1
        inner = int32(shape[last])
        low = int32(lows[last])
        step = int32(spacing[last])
        reach = int32(counts[last] * spacing[last])  # past the window's last index, less low
        gs = int64(gsteps[last])
        nl = last - 1 if last > 0 else 0  # the next-to-last dimension (its values unused
        n_outer = int64(shape[nl]) if last > 0 else int64(1)  # where the output is 1-d)
        sp_n = int64(spacing[nl]) if last > 0 else int64(1)
        cnt_n = int64(counts[nl]) if last > 0 else int64(1)
        gs_n = int64(gsteps[nl]) if last > 0 else int64(0)
        low_n = int64(lows[nl]) if last > 0 else int64(0)
        g_base = int64(p[G.g_base])
        out_base = int64(p[G.out_base])
        rows = int64(p[G.rows])
        group = int64(p[G.group])
        seg = int64(p[G.seg])
        nseg = int64(p[G.nseg])
        items = int64(p[G.items])
        bx = int32(cuda.blockDim.x)
        w = int64(cuda.blockIdx.x)
        while w < items:
            grp = w // nseg
            j0 = int32((w - grp * nseg) * seg + cuda.threadIdx.x)
            r = grp * group
            r_end = min(r + group, rows)
            inside, src_outer, e = locate(r, last, shape, lows, spacing, counts, gsteps)
            c = e + low_n  # the next-to-last coordinate
            k = e // sp_n if e >= 0 else int64(-1)  # the window's index there, and the
            ph = e - k * sp_n if e >= 0 else int64(-1)  # rows past it (-1: before it)
            while r < r_end:
                o = out_base + r * inner
                if inside and ph == 0 and k < cnt_n:  # a row of the window: read it
                    srow = g_base + src_outer + k * gs_n
                    for u in range(loads):
                        f = int32(j0 + u * bx - low)
                        x = item(0)
                        if f >= 0 and f < reach:
                            if step == 1:
                                x = src[srow + f * gs]
                            else:
                                q = f // step
                                if f == q * step:
                                    x = src[srow + q * gs]
                        v[u] = x
                    for u in range(loads):
                        j = j0 + u * bx
                        if j < inner:
                            dst[o + j] = v[u]
                else:  # zeros only
                    for u in range(loads):
                        j = j0 + u * bx
                        if j < inner:
                            dst[o + j] = item(0)
                r += 1
                c += 1
                if c >= n_outer:  # the next-to-last dimension wraps: divide again
                    if r < r_end:
                        inside, src_outer, e = locate(r, last, shape, lows, spacing, counts, gsteps)
                        c = e + low_n
                        k = e // sp_n if e >= 0 else int64(-1)
                        ph = e - k * sp_n if e >= 0 else int64(-1)
                elif c == low_n:
                    k = int64(0)
                    ph = int64(0)
                elif c > low_n:
                    ph += 1
                    if ph == sp_n:
                        ph = int64(0)
                        k += 1
            w += cuda.gridDim.x

    return grad
