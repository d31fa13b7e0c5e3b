"""The CPU nonzero write pass, a C function of its bit widths: coordinates of a
block's non-zeros, from compacted positions (sparse runs) or from the elements
directly (dense runs)."""

import numpy as np
from numba import carray, types

from ..params import NONZERO_CPU as P
from .compiling import c_function, jit
from .indexmath import (
    _inline,
    advance,
    block_bounds,
    is_nonzero,
    next_row,
    offset,
    unravel,
    write_coordinates,
)
from .llvm import item_pointer
from .nonzero_count import COMPACT, _compact_row, _count_row

#: Compacted runs of at least ``DENSE_MIN`` elements, at least one in ``DENSE_OF`` of
#: them non-zero, are written by :func:`_write_dense`; sparser or shorter runs (a
#: call's fixed cost weighs on short rows of a non-contiguous input) by
#: :func:`_write_sparse` (docs/PERFORMANCE.md).
DENSE_OF = 4
DENSE_MIN = 128


@_inline
def _write_sparse(buf, c, k0, pos, coords, shape, strides, ndim, out, ob, rs, cs, row, W):
    """Write the coordinate rows of the ``c`` non-zero elements ``k0 + buf[:c]``,
    from row ``row``, moving the odometer ``coords`` (standing at element ``pos``)
    by each one's distance from the last (dividing only when a row wraps);
    return the next row and the odometer's element.  ``W``: the width."""
    last = ndim - 1
    n_last = shape[last]
    for i in range(c):
        e = k0 + buf[i]
        cl = coords[last] + (e - pos)
        if cl < n_last:
            coords[last] = cl
        else:  # a row wrapped: let the odometer carry
            advance(coords, shape, strides, ndim, e - pos, 0)
        pos = e
        write_coordinates(out, ob + row * rs, cs, coords, ndim, W, coords[last])
        row += 1
    return row, pos


@_inline
def _dense_rows(src, q, ust, mask, n, out, uob, urs, ucs, row, h0, h1, h2, head, c0, r, W):
    """The rows of ``n`` consecutive elements of one plane row (see :func:`_write_dense`):
    element ``j``'s row is written at ``out[uob + row * urs]`` (column ``i`` at
    ``+ i * ucs``) with outer columns ``h0``, ``h1``, ``h2`` (or ``head``, for widths
    past 4) and last column ``c0 + j``; the row advances where the element is
    non-zero.  ``r``, the next-to-last coordinate, is column ``W - 2``.  Inlined with
    literal ``W``, ``urs`` and ``ucs`` for packed rows: the column stores unrolled,
    the addresses constant steps."""
    if W == 2:
        h0 = r
    elif W == 3:
        h1 = r
    elif W == 4:
        h2 = r
    elif W > 4:
        head[W - 2] = r
    for j in range(n):
        ub = uob + np.uint64(row) * urs
        if W > 0:
            if W <= 4:
                if W > 1:
                    out[ub] = h0
                if W > 2:
                    out[ub + ucs] = h1
                if W > 3:
                    out[ub + np.uint64(2) * ucs] = h2
            else:
                for i in range(W - 1):
                    out[ub + np.uint64(i) * ucs] = head[i]
            out[ub + np.uint64(W - 1) * ucs] = c0 + j
        row += is_nonzero(src[q + np.uint64(j) * ust], mask)
    return row


@jit(_nrt=False)
def _write_dense(src, p, st, mask, m, coords, shape, ndim, out, ob, rs, cs, row, head, W):
    """Write the coordinate rows of the non-zero elements among the ``m`` elements
    ``src[p + k * st]`` that follow the odometer ``coords`` (which moves past them),
    from row ``row``; the ``m``-th element is non-zero.

    Every element's row is written, and the row advances past it only where the
    element is non-zero: no branch on the data, and a zero's row is overwritten by
    the next non-zero's, which ends the run (so nothing is left past the count).
    Packed rows (row stride ``W``, column stride 1: every default output) of widths
    1 to 4 take a row loop of their own with the width and strides as constants (the
    column stores unrolled, the addresses constant steps), which makes 2- and
    3-column writes faster.  The five loops are branches of this one compilation
    (five specialisations took about twice its compile time); it is compiled
    without reference counting (``_nrt=False``: it allocates nothing, and its caller
    holds its arrays), since the atomic counts of its five arrays around each call
    (a run of up to ``COMPACT`` elements) slowed the 3-column write
    (docs/PERFORMANCE.md, "Specialised paths").  ``head``
    (at least ``W - 1`` entries) holds a row's outer coordinates.  The rows of a
    plane (the coordinates before the next-to-last fixed) follow each other with
    the next-to-last coordinate in a local: the odometer carries once a plane, not
    once a row, which shortens calls on short rows (docs/PERFORMANCE.md)."""
    last = ndim - 1
    first = ndim - W
    n_last = shape[last]
    # Positions in unsigned (modular) arithmetic, which spares every access numba's
    # negative-index fix-up; negative strides wrap around to the same positions.
    uob = np.uint64(ob)
    urs = np.uint64(rs)
    ucs = np.uint64(cs)
    ust = np.uint64(st)
    packed = cs == 1 and rs == W and W <= 4
    pen = last - 1  # the next-to-last dimension: column W - 2, kept in a local
    n_pen = shape[pen] if ndim > 1 else 1
    k = 0
    while k < m:
        c0 = coords[last]
        r = coords[pen] if ndim > 1 else 0
        for i in range(W - 1):
            head[i] = coords[first + i]
        # Up to three outer columns in locals: out may alias head for all numba
        # tells LLVM, which then reloads head after every store (docs/PERFORMANCE.md,
        # "Specialised paths").
        h0 = head[0]
        h1 = head[1] if W > 2 else h0
        h2 = head[2] if W > 3 else h0
        # The rows of one plane (the outer coordinates fixed) one after another,
        # the next-to-last coordinate counted in ``r``: the odometer carries only
        # where that dimension wraps (rows of one element: a carry every element).
        while True:
            n = min(n_last - c0, m - k)
            q = np.uint64(p + k * st)
            one = np.uint64(1)
            u2, u3, u4 = np.uint64(2), np.uint64(3), np.uint64(4)
            if packed and W == 1:
                row = _dense_rows(
                    src, q, ust, mask, n, out, uob, one, one, row, h0, h1, h2, head, c0, r, 1
                )
            elif packed and W == 2:
                row = _dense_rows(
                    src, q, ust, mask, n, out, uob, u2, one, row, h0, h1, h2, head, c0, r, 2
                )
            elif packed and W == 3:
                row = _dense_rows(
                    src, q, ust, mask, n, out, uob, u3, one, row, h0, h1, h2, head, c0, r, 3
                )
            elif packed and W == 4:
                row = _dense_rows(
                    src, q, ust, mask, n, out, uob, u4, one, row, h0, h1, h2, head, c0, r, 4
                )
            else:  # any other layout, and widths 0 and 5 to 8
                row = _dense_rows(
                    src, q, ust, mask, n, out, uob, urs, ucs, row, h0, h1, h2, head, c0, r, W
                )
            k += n
            c0 += n
            if c0 < n_last or k >= m or r + 1 >= n_pen:
                break
            c0 = 0
            r += 1
        coords[last] = c0
        if ndim > 1:
            coords[pen] = r
        if c0 == n_last and k < m:
            next_row(coords, shape, ndim)
    return row


def _write_block(sp, sn, pp, pn, b, op, on, row, row_end):
    """Write block ``b``'s coordinates (see :func:`~.nonzero_count._count_block`) into rows ``[row,
    row_end)`` of the ``on`` items at ``op``, in element order; return the row after
    the last one written.  A C function of each pair of bit widths
    (:func:`write_function`).

    Runs of elements that are consecutive in memory (the rest of the block where
    the input is C-contiguous, else the rest of a row), ``COMPACT`` elements at a
    time, are either dense or sparse.  A dense run is written element by element
    without a branch (:func:`_write_dense`); a sparse one is compacted (the
    positions of its non-zeros, found without branches) and written row by row
    from the positions (:func:`_write_sparse`); either way never a row at or past
    ``row_end`` (below the block's count where ``max_count`` cut it).  A run after
    a dense one is counted first, which costs less than compacting and is all a
    dense run needs; a run after a sparse one is compacted straight away.  The
    dense write has a loop of its own for each of the widths 1 to 4 into packed
    rows (row stride the width, column stride 1: every default output), with the
    width and both strides as constants (:func:`_write_dense`).
    """
    src = carray(sp, sn)
    p = carray(pp, pn)
    out = carray(op, on)
    sb = p[P.src_base]
    mask = src.dtype.type(p[P.mask])
    ndim = p[P.ndim]
    shape = p[P.shape : P.shape + ndim]
    strides = p[P.strides : P.strides + ndim]
    lo, hi = block_bounds(b, p[P.block], p[P.n])
    lo += p[P.first]
    hi += p[P.first]
    ob, rs, cs, width = p[P.out_base], p[P.rs], p[P.cs], p[P.width]
    contiguous = p[P.contiguous] != 0
    if row == row_end:
        return row
    coords = np.empty(ndim, np.int64)
    buf = np.empty(COMPACT, np.int64)
    head = np.empty(max(width - 1, 1), out.dtype)  # a dense row's outer coordinates
    unravel(lo, shape, ndim, coords)
    last = ndim - 1
    n_last = shape[last]
    pos = lo  # the element the odometer stands at
    k0 = lo
    guess_dense = True  # the last run's density, the guess for this one's
    while k0 < hi:
        advance(coords, shape, strides, ndim, k0 - pos, 0)
        pos = k0
        if contiguous:
            m = min(COMPACT, hi - k0)
            p = sb + k0
            st = 1
        else:
            m = min(COMPACT, hi - k0, n_last - coords[last])
            p = sb + offset(coords, strides, ndim)
            st = strides[last]
        room = row_end - row
        e = 0  # a dense run's end: just past its last non-zero that gets a row
        c = -1  # its non-zeros, where known
        if guess_dense and m >= DENSE_MIN:
            # Likely dense: count first (a vectorized loop, faster than compacting)
            # and, where the run is dense and fits, find its end.
            c = _count_row(src, p, st, m, mask)
            if c * DENSE_OF >= m and c <= room:
                e = m
                while not is_nonzero(src[p + (e - 1) * st], mask):
                    e -= 1
        if e == 0 and c != 0:
            c = min(_compact_row(src, p, st, m, mask, buf), room)
            if c > 0 and c * DENSE_OF >= m and m >= DENSE_MIN:
                e = buf[c - 1] + 1  # up to the c-th non-zero: the run ends on its row
        guess_dense = c * DENSE_OF >= m
        if e > 0:
            # The arguments one by one: a tuple of them would hold references to the
            # arrays, counted (atomically) for every run.
            row = _write_dense(
                src, p, st, mask, e, coords, shape, ndim, out, ob, rs, cs, row, head, width
            )
            pos = k0 + e
        elif c > 0:
            row, pos = _write_sparse(
                buf, c, k0, pos, coords, shape, strides, ndim, out, ob, rs, cs, row, width
            )
        if row == row_end:
            return row
        k0 += m
        if not contiguous:
            # The run lay within a row: step the odometer to its end (the next row's
            # start where the row ended) without the division advance() would make.
            coords[last] += k0 - pos
            pos = k0
            if coords[last] == n_last and k0 < hi:
                next_row(coords, shape, ndim)
    return row


def write_function(bits, out_bits):
    """The address of :func:`_write_block` for ``bits``-bit inputs and ``out_bits``-bit
    coordinates as a C function (see :func:`~.nonzero_count.count_function`)."""
    i = types.int64
    src, out = item_pointer(bits), item_pointer(out_bits)
    return c_function(types.int64(src, i, types.CPointer(i), i, i, out, i, i, i), _write_block)
