"""The CPU nonzero write pass, a C function of its bit widths and layout kind:
coordinates of a block's non-zeros, from compacted positions (sparse runs) or from
the elements directly (dense runs: the dense write, a C function of each width
class, which the write pass calls by address)."""

import numpy as np
from numba import carray, types

from ..params import MAXD
from ..params import NONZERO_CPU as P
from ..params import NONZERO_PASS as A
from .compiling import c_function
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
from .llvm import UINTS, call_int64, data_pointer, item_pointer, pointer, stack_array
from .nonzero_count import (
    ARGS,
    COMPACT,
    _compact_contiguous,
    _compact_strided,
    _count_contiguous,
    _count_strided,
)

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


def _dense_writer(wclass):
    """:func:`_write_dense` for one width class (:func:`~.nonzero.dense_class`).  ``wclass`` is a
    closure constant: numba prunes the other classes' branches before it types the
    body, so a call compiles only the loop it takes, and its disk cache (keyed by the
    closure) keeps the classes apart."""

    def _write_dense(sp, sn, p, st, m, cp, shp, ndim, op, on, ob, rs, cs, row, hp, W, bits):
        """Write the coordinate rows of the non-zero elements among the ``m`` elements
        ``src[p + k * st]`` that follow the odometer ``coords`` (which moves past them),
        from row ``row``; the ``m``-th element is non-zero.

        Every element's row is written, and the row advances past it only where the
        element is non-zero: no branch on the data, and a zero's row is overwritten by
        the next non-zero's, which ends the run (so nothing is left past the count).
        Packed rows of widths 1 to 4 (classes 1 to 4) take a row loop with the width
        and strides as constants (the column stores unrolled, the addresses constant
        steps), which makes 2- and 3-column writes faster; class 0 takes any layout
        and width.  Compiled without reference counting (``_nrt=False``: it allocates
        nothing, and its caller holds its arrays), since the atomic counts of its five
        arrays around each call (a run of up to ``COMPACT`` elements) slowed the
        3-column write (docs/PERFORMANCE.md, "Specialised paths").  ``head`` (at least
        ``W - 1`` entries) holds a row's outer coordinates.  The rows of a plane (the
        coordinates before the next-to-last fixed) follow each other with the
        next-to-last coordinate in a local: the odometer carries once a plane, not
        once a row, which shortens calls on short rows (docs/PERFORMANCE.md).  The
        arrays arrive as pointers and sizes (``src``, ``coords``, ``shape``, ``out``,
        ``head``), the mask as its bits."""
        src = carray(sp, sn)
        coords = carray(cp, ndim)
        shape = carray(shp, ndim)
        out = carray(op, on)
        head = carray(hp, max(W - 1, 1))
        mask = src.dtype.type(bits)
        last = ndim - 1
        first = ndim - W
        n_last = shape[last]
        # Positions in unsigned (modular) arithmetic, which spares every access numba's
        # negative-index fix-up; negative strides wrap around to the same positions.
        uob = np.uint64(ob)
        urs = np.uint64(rs)
        ucs = np.uint64(cs)
        ust = np.uint64(st)
        pen = last - 1  # the next-to-last dimension: column W - 2, kept in a local
        n_pen = shape[pen] if ndim > 1 else 1
        k = 0
        while k < m:
            c0 = coords[last]
            r = coords[pen] if ndim > 1 else 0
            for i in range(W - 1):
                head[i] = coords[first + i]
            # Up to three outer columns in locals: out may alias head for all numba
            # tells LLVM, which then reloads head after every store
            # (docs/PERFORMANCE.md, "Specialised paths").
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
                if wclass:  # packed rows: the width and both strides constants
                    wr, wc, w = np.uint64(wclass), one, wclass
                else:  # any other layout, and widths 0 and 5 to 8
                    wr, wc, w = urs, ucs, W
                row = _dense_rows(
                    src, q, ust, mask, n, out, uob, wr, wc, row, h0, h1, h2, head, c0, r, w
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

    return _write_dense


def dense_function(bits, out_bits, wclass):
    """The address of the dense write (:func:`_dense_writer`) of width class ``wclass``
    for ``bits``-bit inputs and ``out_bits``-bit coordinates as a C function, which
    the write pass calls by the address in its parameter block (``dense``): a call
    compiles the class it writes, not all five (docs/PERFORMANCE.md, "Startup and
    compile time")."""
    i = types.int64
    src, out, ip = item_pointer(bits), item_pointer(out_bits), types.CPointer(types.int64)
    sig = types.int64(src, i, i, i, i, ip, ip, i, out, i, i, i, i, i, out, i, i)
    return c_function(sig, _dense_writer(wclass))


@_inline
def _kept(at, nblocks, keep, b, count, buf):
    """``(positions, how many)`` that block ``b``'s count pass kept, where they are
    all of its ``count`` non-zeros (:func:`~.nonzero_count._keep_positions`; ``at``:
    the address of every block's number kept, then of their positions); else
    ``(buf, -1)``."""
    if carray(pointer(at, np.int64), nblocks)[b] != count:
        return buf, -1
    return carray(pointer(at + 8 * (nblocks + keep * b), np.int64), keep), count


@_inline
def _kept_run(kept, ki, nk, start, m, buf):
    """The kept positions ``kept[ki:nk]`` of a run of ``m`` elements from ``start``
    (both from the block's first element) into ``buf``, from the run's start:
    ``(how many, the next one's index)``."""
    c = 0
    while ki < nk and kept[ki] < start + m:
        buf[c] = kept[ki] - start
        c += 1
        ki += 1
    return c, ki


def _write_pass(item, out_item, kind):
    """The write pass (:mod:`.blocks`) from ``item`` inputs into ``out_item`` coordinates
    (unsigned NumPy types), inputs of layout ``kind``
    (:func:`~.nonzero_launch.layout_kind`: the pass compiles the loops of its kind
    alone): closure constants, pruned before numba types the body, and keyed apart
    in its disk cache. Its arguments are a :data:`~dmlnumba.params.NONZERO_PASS`
    block: block ``b`` writes its coordinates into rows ``rows[b]`` to
    ``rows[b + 1]`` (those below the limit), in element order, and returns the row
    after the last one written.

    Runs of elements consecutive in memory (the rest of the block where the input is
    C-contiguous, else the rest of a row), ``COMPACT`` elements at a time, are dense
    or sparse.  A dense run is written element by element without a branch (the C
    function at the block's ``dense`` address, of the call's width class:
    :func:`_dense_writer`); a sparse one is compacted (its non-zeros' positions,
    found without branches) and written from the positions (:func:`_write_sparse`).
    A run after a dense one is counted first, which costs less than compacting and
    is all a dense run needs; a run after a sparse one is compacted at once.  The runs
    of a block whose count pass kept every position (``kept``,
    :func:`~.nonzero_count._keep_positions`) take their positions from them instead."""

    contiguous, unit = kind == "contiguous", kind != "strided"

    def write_pass(ap, b):
        a = carray(ap, ARGS)
        sp, sn = pointer(a[A.src], item), a[A.src_n]
        op, on = pointer(a[A.out], out_item), a[A.out_n]
        src, out = carray(sp, sn), carray(op, on)
        p = carray(pointer(a[A.p], np.int64), a[A.p_n])
        rows = carray(pointer(a[A.rows], np.int64), p[P.nblocks] + 1)
        row, row_end = min(rows[b], p[P.limit]), min(rows[b + 1], p[P.limit])
        sb = p[P.src_base]
        mask = src.dtype.type(p[P.mask])
        ndim = p[P.ndim]
        shape = p[P.shape : P.shape + ndim]
        strides = p[P.strides : P.strides + ndim]
        lo, hi = block_bounds(b, p[P.block], p[P.n])
        lo += p[P.first]
        hi += p[P.first]
        ob, rs, cs, width = p[P.out_base], p[P.rs], p[P.cs], p[P.width]
        dense, bits = p[P.dense], p[P.mask]
        if row == row_end:
            return row
        coords = stack_array(p, MAXD)  # (ndim <= MAXD)
        buf = stack_array(p, COMPACT)
        head = stack_array(out, MAXD)  # a dense row's outer coordinates (width - 1)
        # The dense write's pointers: arrays on this frame's stack and a view of p,
        # none of them freed before the pass returns (numba frees an allocated array
        # after its last use, which a pointer is not).
        cp, shp, hp = data_pointer(coords), data_pointer(shape), data_pointer(head)
        unravel(lo, shape, ndim, coords)
        # A block whose count pass kept every position (a C-contiguous input's): its
        # runs take their positions from them (``ki``: the next), reading no element.
        kept, nk = buf, -1  # (none kept: never read)
        if contiguous and p[P.keep] > 0 and a[A.kept] != 0:
            kept, nk = _kept(a[A.kept], p[P.nblocks], p[P.keep], b, rows[b + 1] - rows[b], buf)
        ki = 0
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
                at = sb + k0
                st = 1
            else:
                m = min(COMPACT, hi - k0, n_last - coords[last])
                at = sb + offset(coords, strides, ndim)
                st = strides[last]
            room = row_end - row
            e = 0  # a dense run's end: just past its last non-zero that gets a row
            c = -1  # its non-zeros, where known
            if guess_dense and m >= DENSE_MIN and nk < 0:
                # Likely dense: count first (a vectorized loop, faster than compacting)
                # and, where the run is dense and fits, find its end.
                if unit:
                    c = _count_contiguous(src, at, m, mask)
                else:
                    c = _count_strided(src, at, st, m, mask)
                if c * DENSE_OF >= m and c <= room:
                    e = m
                    while not is_nonzero(src[at + (e - 1) * st], mask):
                        e -= 1
            if e == 0 and c != 0:
                if nk >= 0:  # the run's kept positions, from its start
                    c, ki = _kept_run(kept, ki, nk, k0 - lo, m, buf)
                    c = min(c, room)
                elif unit:
                    c = min(_compact_contiguous(src, at, m, mask, buf), room)
                else:
                    c = min(_compact_strided(src, at, st, m, mask, buf), room)
                if c > 0 and c * DENSE_OF >= m and m >= DENSE_MIN:
                    e = buf[c - 1] + 1  # up to the c-th non-zero: the run ends on its row
            guess_dense = c * DENSE_OF >= m
            if e > 0:
                args = (sp, sn, at, st, e, cp, shp, ndim, op, on, ob, rs, cs, row, hp, width)
                row = call_int64(dense, *args, bits)
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

    return write_pass


def write_function(bits, out_bits, kind):
    """The address of the write pass (:func:`_write_pass`) for ``bits``-bit inputs of
    layout ``kind`` (:func:`~.nonzero_launch.layout_kind`) and ``out_bits``-bit
    coordinates as a C function (see :func:`~.nonzero_count.count_function`)."""
    i = types.int64
    body = _write_pass(UINTS[bits], UINTS[out_bits], kind)
    return c_function(types.int64(types.CPointer(i), i), body)
