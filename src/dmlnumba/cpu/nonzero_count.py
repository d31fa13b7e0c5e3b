"""The CPU nonzero count pass, a C function of each bit width and layout (a block's
non-zeros counted), and the row helpers it shares with the write pass: non-zeros of
a row or a range of elements counted, and their positions gathered into a buffer."""

import numpy as np
from numba import carray, types

from ..params import KEEP_OF, KEEP_SLACK, MAXD, size
from ..params import NONZERO_CPU as P
from ..params import NONZERO_PASS as A
from .compiling import c_function
from .indexmath import _inline, block_bounds, is_nonzero, next_row, offset, unravel
from .llvm import UINTS, leading_zeros, pointer, popcount, stack_array, trailing_zeros

#: Elements compacted at a time by the write pass (the size of its index buffer).
COMPACT = 1024
#: Elements a sparse compaction (:func:`_compact_groups`) reads at a time (one 64-bit
#: mask); a group with at most ``SPARSE_BITS`` non-zeros is written one set bit at a
#: time.
GROUP = 64
SPARSE_BITS = 16
#: The slots of a pass's argument block.
ARGS = size(A)


@_inline
def _count_contiguous(src, p, n, mask):
    """Non-zero elements among ``src[p : p + n]``.  An unsigned position spares the
    loop numba's negative-index handling, so it vectorizes."""
    c = 0
    up = np.uint64(p)
    for k in range(n):
        c += is_nonzero(src[up + np.uint64(k)], mask)
    return c


@_inline
def _count_strided(src, p, st, n, mask):
    """Non-zero elements among ``src[p], src[p + st], ...`` (``n`` of them), with
    positions in unsigned (modular) arithmetic: a negative ``st`` wraps around to
    the same positions."""
    c = 0
    up = np.uint64(p)
    ust = np.uint64(st)
    for k in range(n):
        c += is_nonzero(src[up + np.uint64(k) * ust], mask)
    return c


@_inline
def _count_row(src, p, st, n, mask):
    """Non-zero elements among ``src[p], src[p + st], ...`` (``n`` of them).

    Each loop sits in a helper of its own, and no helper makes a view (a slice):
    an inlined helper that branches between loops, or slices, keeps an atomic
    incref and decref of its array arguments around every call (numba's reference
    counting is pruned only in simpler shapes), a cost paid once per row of a
    non-contiguous input."""
    if st == 1:
        return _count_contiguous(src, p, n, mask)
    return _count_strided(src, p, st, n, mask)


@_inline
def _compact_from(src, up, k0, n, mask, out, c):
    """Write the positions ``k`` (k0 <= k < k0 + n) of the non-zero elements among
    ``src[up + k]`` into ``out`` from ``out[c]``, in order, without a branch; return
    the position after the last one written.  Every element's position is written
    (a zero's is overwritten by the next non-zero's), so ``out`` needs room for
    ``n`` from ``c``, and one more where the last element is zero.  ``out`` is
    indexed unsigned: a signed ``c`` of unknown sign costs each store numba's
    negative-index fix-up."""
    for k in range(k0, k0 + n):
        out[np.uint64(c)] = k
        c += is_nonzero(src[up + np.uint64(k)], mask)
    return c


@_inline
def _group_bits(src, up, g, n, mask):
    """A uint64 with bit ``j`` set where element ``g + j`` (of ``n``, read at
    ``src[up + g + j]``) is non-zero: 64 elements, fewer at the end.  The loop
    vectorizes."""
    b = up + np.uint64(g)
    m = np.uint64(0)
    if g + GROUP <= n:
        for j in range(GROUP):
            m |= np.uint64(is_nonzero(src[b + np.uint64(j)], mask)) << np.uint64(j)
    else:
        for j in range(n - g):
            m |= np.uint64(is_nonzero(src[b + np.uint64(j)], mask)) << np.uint64(j)
    return m


@_inline
def _compact_groups(src, up, n, mask, out, c):
    """Write the positions ``k`` (0 <= k < n) of the non-zero elements among
    ``src[up + k]`` into ``out`` from ``out[c]``, in order, and nothing past them;
    return the position after the last one written.  64 elements at a time, the
    non-zero ones as a bit mask (:func:`_group_bits`): a group with none is skipped,
    one with at most ``SPARSE_BITS`` is written one set bit at a time, a denser one
    by the branchless loop (:func:`_compact_from`) up to its last set bit, so
    sparse runs skip most of the work of one store an element."""
    one = np.uint64(1)
    for g in range(0, n, GROUP):
        m = _group_bits(src, up, g, n, mask)
        if popcount(m) <= SPARSE_BITS:
            while m:
                out[np.uint64(c)] = g + trailing_zeros(m)
                c += 1
                m &= m - one
        else:
            c = _compact_from(src, up, g, GROUP - leading_zeros(m), mask, out, c)
    return c


@_inline
def _keep_positions(src, p, n, mask, kept):
    """The positions (from 0) of the non-zeros among ``src[p : p + n]`` kept in
    ``kept``, 64 elements at a time (as a bit mask), while the non-zeros so far are
    at most one in ``KEEP_OF`` of the elements read, and ``KEEP_SLACK`` more: returns
    how many, and the elements read (the count pass counts the rest, a last group of
    fewer than 64 too; where it finds one, not all were kept)."""
    up = np.uint64(p)
    one = np.uint64(1)
    c = 0
    g = 0
    while g + GROUP <= n:
        b = up + np.uint64(g)
        m = np.uint64(0)
        for j in range(GROUP):
            m |= np.uint64(is_nonzero(src[b + np.uint64(j)], mask)) << np.uint64(j)
        if (c + popcount(m) - KEEP_SLACK) * KEEP_OF > g + GROUP:
            break
        while m:
            kept[np.uint64(c)] = g + trailing_zeros(m)
            c += 1
            m &= m - one
        g += GROUP
    return c, g


@_inline
def _compact_contiguous(src, p, n, mask, buf):
    """Write the positions ``k`` (0 <= k < n) of the non-zero elements among
    ``src[p : p + n]`` into ``buf``, in order (:func:`_compact_groups`); return how
    many."""
    return _compact_groups(src, np.uint64(p), n, mask, buf, 0)


@_inline
def _compact_strided(src, p, st, n, mask, buf):
    """:func:`_compact_contiguous` of ``src[p], src[p + st], ...`` (positions as in
    :func:`_count_strided`)."""
    c = 0
    up = np.uint64(p)
    ust = np.uint64(st)
    for k in range(n):
        buf[c] = k
        c += is_nonzero(src[up + np.uint64(k) * ust], mask)
    return c


@_inline
def _count_range(src, sb, mask, shape, strides, ndim, lo, hi):
    """Number of non-zero elements among elements ``[lo, hi)`` (row-major order)."""
    coords = stack_array(shape, MAXD)  # (ndim <= MAXD)
    unravel(lo, shape, ndim, coords)
    last = ndim - 1
    row = shape[last]
    st = strides[last]
    remaining = hi - lo
    c = 0
    while remaining > 0:
        n = min(row - coords[last], remaining)
        c += _count_row(src, sb + offset(coords, strides, ndim), st, n, mask)
        remaining -= n
        next_row(coords, shape, ndim)
    return c


def _count_pass(item, contiguous):
    """The count pass (:mod:`.blocks`) over inputs of ``item`` (the unsigned NumPy
    type of their bit width), C-contiguous or not (``contiguous``: the pass of a
    C-contiguous input compiles no strided loop); both closure constants, pruned
    before numba types the body, and keyed apart in its disk cache.  Its arguments
    are a :data:`~dmlnumba.params.NONZERO_PASS` block:
    the non-zero elements of block ``b`` of the nonzero of parameter block ``p`` (a
    :data:`~dmlnumba.params.NONZERO_CPU` block) over the flat input: elements ``first
    + [b*block, (b+1)*block)`` (clipped to ``first + n``) of the row-major order of
    its shape.  A C-contiguous input's block keeps its positions where the driver
    gave room (``kept``, :func:`_keep_positions`)."""

    def count_pass(ap, b):
        a = carray(ap, ARGS)
        src = carray(pointer(a[A.src], item), a[A.src_n])
        p = carray(pointer(a[A.p], np.int64), a[A.p_n])
        mask = src.dtype.type(p[P.mask])
        sb = p[P.src_base]
        first = p[P.first]
        lo, hi = block_bounds(b, p[P.block], p[P.n])
        lo += first
        hi += first
        if contiguous:
            keep = p[P.keep]
            c = g = 0
            if keep > 0 and a[A.kept] != 0:  # (kept: nblocks counts, then the positions)
                nb = p[P.nblocks]
                kept = carray(pointer(a[A.kept] + 8 * (nb + keep * b), np.int64), keep)
                c, g = _keep_positions(src, sb + lo, hi - lo, mask, kept)
            rest = _count_contiguous(src, sb + lo + g, hi - lo - g, mask)
            if keep > 0 and a[A.kept] != 0:  # how many kept, where they are all (else -1)
                carray(pointer(a[A.kept], np.int64), p[P.nblocks])[b] = c if rest == 0 else -1
            return c + rest
        ndim = p[P.ndim]
        shape = p[P.shape : P.shape + ndim]
        strides = p[P.strides : P.strides + ndim]
        return _count_range(src, sb, mask, shape, strides, ndim, lo, hi)

    return count_pass


def count_function(bits, contiguous):
    """The address of the count pass (:func:`_count_pass`) for ``bits``-bit inputs,
    C-contiguous or not (``contiguous``), as a C function (made, or loaded from
    numba's cache), which the drivers call; the target makes it once
    (``cpu.compiling.c_function_address``). As a jitted function its code was linked
    into every driver's, and LLVM optimized and compiled it again for each
    (docs/PERFORMANCE.md)."""
    i = types.int64
    return c_function(types.int64(types.CPointer(i), i), _count_pass(UINTS[bits], contiguous))
