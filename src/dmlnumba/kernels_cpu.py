"""CPU kernels: the shared index math compiled by ``numba.njit``, run on all cores.

Importing this module imports numba but compiles nothing: every kernel compiles
on its first call, once per bit width, and is cached on disk (``cache=True``).
Arrays arrive as flat unsigned-integer views (see :mod:`dmlnumba.layout`), so
one specialization serves every rank, layout and dtype of a bit width (a second
one, compiled on first use, read-only inputs such as broadcasts).  The
drivers release the GIL (``nogil=True``), so that calls from several threads (a
dask scheduler's, an application's) run at the same time.
"""

import numpy as np
from llvmlite import ir
from numba import config as _nbconfig
from numba import prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from . import indexmath as _im
from .compiling import jit
from .params import NONZERO_CPU as P

_inline = jit(inline="always")
unravel = _inline(_im.unravel)
offset = _inline(_im.offset)
next_row = _inline(_im.next_row)
is_nonzero = _inline(_im.is_nonzero)
write_coordinates = _inline(_im.write_coordinates)
block_bounds = _inline(_im.block_bounds)
advance = _inline(_im.advance)


#: A cache line, in bytes (the step between software prefetches).
LINE = 64
#: Rows prefetched ahead of the one being copied, and the widest source row
#: (in bytes, first to last element) that is prefetched at all: a wider row
#: would not stay in cache until its turn.
PREFETCH_ROWS = 2
PREFETCH_SPAN = 8192


@intrinsic
def _prefetch(typingctx, arr, idx):
    """Hint the CPU to load the cache line holding ``arr[idx]`` (``llvm.prefetch``,
    read, keep in all levels).  A hint only: it never faults and reads nothing
    into the program, so an address is not bounds-checked."""
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False)
        i8p = ir.IntType(8).as_pointer()
        if getattr(i8p, "is_opaque", False):  # opaque pointers (LLVM 15 and later)
            name = "llvm.prefetch.p0"
        else:
            name = "llvm.prefetch.p0i8"
        ptr = builder.bitcast(ptr, i8p)
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]), name
        )
        builder.call(fn, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


def _bit_count(op):
    """An intrinsic: llvmlite's ``op`` (``ctpop``, ``cttz`` or ``ctlz``) of a uint64,
    as an int64 (one instruction where the CPU has it)."""

    @intrinsic
    def count(typingctx, x):
        def codegen(context, builder, signature, args):
            if op == "ctpop":
                return builder.ctpop(args[0])
            return getattr(builder, op)(args[0], ir.Constant(ir.IntType(1), 0))

        return types.int64(types.uint64), codegen

    return count


#: Set bits, trailing zeros and leading zeros of a uint64 (64 where it is 0).
_popcount = _bit_count("ctpop")
_trailing_zeros = _bit_count("cttz")
_leading_zeros = _bit_count("ctlz")


if _nbconfig.DISABLE_JIT:  # plain Python (debugging): an intrinsic cannot be called there

    def _prefetch(arr, idx):
        pass

    def _popcount(x):
        return bin(int(x)).count("1")

    def _trailing_zeros(x):
        x = int(x)
        return (x & -x).bit_length() - 1 if x else 64

    def _leading_zeros(x):
        return 64 - int(x).bit_length()


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


#: Elements compacted at a time by the write pass (the size of its index buffer).
COMPACT = 1024


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
    counting is pruned only in simpler shapes), which cost 40-60 ns a call, once per
    row of a non-contiguous input (docs/PERFORMANCE.md)."""
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
    negative-index fix-up (about 10% of the loop)."""
    for k in range(k0, k0 + n):
        out[np.uint64(c)] = k
        c += is_nonzero(src[up + np.uint64(k)], mask)
    return c


@_inline
def _compact_contiguous(src, p, n, mask, buf):
    """Write the positions ``k`` (0 <= k < n) of the non-zero elements among
    ``src[p : p + n]`` into ``buf``, in order, without a branch; return how many."""
    return _compact_from(src, np.uint64(p), 0, n, mask, buf, 0)


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
def _compact_row(src, p, st, n, mask, buf):
    """The positions of the non-zero elements among ``src[p], src[p + st], ...``
    (``n`` of them) into ``buf``; return how many (see :func:`_count_row`).  The
    contiguous loop is about 10% faster at 1% density than the strided one with
    ``st == 1``."""
    if st == 1:
        return _compact_contiguous(src, p, n, mask, buf)
    return _compact_strided(src, p, st, n, mask, buf)


@_inline
def _count_range(src, sb, mask, shape, strides, ndim, lo, hi):
    """Number of non-zero elements among elements ``[lo, hi)`` (row-major order)."""
    coords = np.empty(ndim, np.int64)
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


@jit
def _write_dense(src, p, st, mask, m, coords, shape, ndim, out, ob, rs, cs, row, head, W):
    """Write the coordinate rows of the non-zero elements among the ``m`` elements
    ``src[p + k * st]`` that follow the odometer ``coords`` (which moves past them),
    from row ``row``; the ``m``-th element is non-zero.

    Every element's row is written, and the row advances past it only where the
    element is non-zero: no branch on the data, and a zero's row is overwritten by
    the next non-zero's, which ends the run (so nothing is left past the count).
    ``W``, the width, and the strides ``rs`` and ``cs`` are compiled in where they
    are literals (the column loop unrolled, the addresses constant steps); ``head``
    (at least ``W - 1`` entries) holds a row's outer coordinates.  The rows of a
    plane (the coordinates before the next-to-last fixed) follow each other with
    the next-to-last coordinate in a local: the odometer carries once a plane, not
    once a row, which took (1000, 1) from 3.1-4.2 to 2.6 us (docs/PERFORMANCE.md)."""
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
        # tells LLVM, which then reloads head after every store (10-20% of a
        # 3-column row's time, docs/PERFORMANCE.md).
        h0 = head[0]
        h1 = head[1] if W > 2 else h0
        h2 = head[2] if W > 3 else h0
        # The rows of one plane (the outer coordinates fixed) one after another,
        # the next-to-last coordinate counted in ``r``: the odometer carries only
        # where that dimension wraps (rows of one element: a carry every element).
        while True:
            n = min(n_last - c0, m - k)
            if W == 2:
                h0 = r
            elif W == 3:
                h1 = r
            elif W == 4:
                h2 = r
            elif W > 4:
                head[W - 2] = r
            q = np.uint64(p + k * st)
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


@_inline
def _write_range(src, sb, mask, shape, strides, ndim, lo, hi, out, w, row, row_end, contiguous):
    """Write the coordinates of the non-zero elements among ``[lo, hi)`` into rows
    ``[row, row_end)`` of ``out`` (``w``: out_base, row stride, column stride,
    width), in element order; return the row after the last one written.

    Runs of elements that are consecutive in memory (the rest of the range where
    the input is C-contiguous, else the rest of a row), ``COMPACT`` elements at a
    time, are either dense or sparse.  A dense run is written element by element
    without a branch (:func:`_write_dense`); a sparse one is compacted (the
    positions of its non-zeros, found without branches) and written row by row
    from the positions (:func:`_write_sparse`); either way never a row at or past
    ``row_end`` (below the block's count where ``max_count`` cut it).  A run after
    a dense one is counted first, which costs less than compacting and is all a
    dense run needs; a run after a sparse one is compacted straight away.  The
    dense write is compiled for each of the widths 1 to 4 into packed rows (row
    stride the width, column stride 1: every default output), with the width and
    both strides as constants, which takes a quarter to a third off a 2- or
    3-column write (docs/PERFORMANCE.md); other widths and layouts share one
    compilation.
    """
    if row == row_end:
        return row
    ob, rs, cs, width = w
    packed = rs == width and cs == 1
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
            # Likely dense: count first (a vectorized loop, about 2.5x faster than
            # compacting) and, where the run is dense and fits, find its end.
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
            if packed and width == 1:
                row = _write_dense(
                    src, p, st, mask, e, coords, shape, ndim, out, ob, 1, 1, row, head, 1
                )
            elif packed and width == 2:
                row = _write_dense(
                    src, p, st, mask, e, coords, shape, ndim, out, ob, 2, 1, row, head, 2
                )
            elif packed and width == 3:
                row = _write_dense(
                    src, p, st, mask, e, coords, shape, ndim, out, ob, 3, 1, row, head, 3
                )
            elif packed and width == 4:
                row = _write_dense(
                    src, p, st, mask, e, coords, shape, ndim, out, ob, 4, 1, row, head, 4
                )
            else:  # any other layout, and widths 0 and 5 to 8: one compilation
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


@jit
def _count_block(src, sb, mask, shape, strides, first, n, block, b, contiguous):
    """Non-zero elements of block ``b``: elements ``first + [b*block, (b+1)*block)``
    (clipped to ``first + n``) of the row-major order of ``shape``."""
    lo, hi = block_bounds(b, block, n)
    lo += first
    hi += first
    if contiguous:
        return _count_row(src, sb + lo, 1, hi - lo, mask)
    return _count_range(src, sb, mask, shape, strides, shape.shape[0], lo, hi)


@jit
def _write_block(
    src, sb, mask, shape, strides, first, n, block, b, out, w, row, row_end, contiguous
):
    """Write block ``b``'s coordinates into rows ``[row, row_end)`` (see
    :func:`_write_range`); return the row after the last one written."""
    lo, hi = block_bounds(b, block, n)
    return _write_range(
        src,
        sb,
        mask,
        shape,
        strides,
        shape.shape[0],
        lo + first,
        hi + first,
        out,
        w,
        row,
        row_end,
        contiguous,
    )


#: Elements a sparse pass of :func:`_positions` reads at a time (one 64-bit mask);
#: a group with at most ``SPARSE_BITS`` non-zeros is written one set bit at a time.
GROUP = 64
SPARSE_BITS = 16


@_inline
def _group_bits(src, up, g, n, mask):
    """A uint64 with bit ``j`` set where element ``g + j`` (of ``n``, read at
    ``src[up + g + j]``) is non-zero: 64 elements, fewer at the end.  The loop
    vectorizes (about 0.1 ns an element)."""
    b = up + np.uint64(g)
    m = np.uint64(0)
    if g + GROUP <= n:
        for j in range(GROUP):
            m |= np.uint64(is_nonzero(src[b + np.uint64(j)], mask)) << np.uint64(j)
    else:
        for j in range(n - g):
            m |= np.uint64(is_nonzero(src[b + np.uint64(j)], mask)) << np.uint64(j)
    return m


@jit
def _positions(src, p, n, mask, out):
    """Write the positions ``k`` of the non-zero elements among ``src[p : p + n]``
    into ``out``, in order, and nothing past them; return how many.  These are the
    one-column coordinates of a C-contiguous input of effective rank 1 (every
    dimension but the last of size 1).

    The first 64 elements choose the way (docs/PERFORMANCE.md):
    - a quarter or more of them non-zero: one branchless loop
      (:func:`_compact_from`) that ends on the last non-zero element, about half
      the time :func:`_write_range` takes for 1000 elements;
    - fewer: 64 elements at a time, the non-zero ones as a bit mask
      (:func:`_group_bits`).  A group with none is skipped, one with at most
      ``SPARSE_BITS`` is written one set bit at a time, a denser one by the
      branchless loop up to its last set bit.  1000 elements at 1% take about
      0.2 us of work instead of 0.45.
    """
    up = np.uint64(p)
    h = min(GROUP, n)
    if _count_contiguous(src, p, h, mask) * DENSE_OF >= h:
        e = n
        while e > 0 and not is_nonzero(src[up + np.uint64(e - 1)], mask):
            e -= 1
        return _compact_from(src, up, 0, e, mask, out, 0)
    c = 0
    one = np.uint64(1)
    for g in range(0, n, GROUP):
        m = _group_bits(src, up, g, n, mask)
        if _popcount(m) <= SPARSE_BITS:
            while m:
                out[np.uint64(c)] = g + _trailing_zeros(m)
                c += 1
                m &= m - one
        else:
            c = _compact_from(src, up, g, GROUP - _leading_zeros(m), mask, out, c)
    return c


@_inline
def _scan(rows, nblocks):
    """``rows[b + 1]`` holds block ``b``'s count: make ``rows[b]`` its first row."""
    rows[0] = 0
    for b in range(nblocks):
        rows[b + 1] += rows[b]


def _nonzero_driver(parallel):
    """The nonzero driver, on numba's threads or the calling one (see
    :func:`_slice_driver`)."""
    loop = prange if parallel else range

    def nonzero(src, p, out, count):
        """NONZERO_COORDINATES of the elements ``[first, first + n)`` of the
        row-major order of the shape in ``p`` (the whole input; a dask block's
        run of the whole array's order), in that shape's coordinates.  ``p`` is a
        :data:`~dmlnumba.params.NONZERO_CPU` block; everything but the arrays is
        in it, since numba's dispatch costs about 0.1 us an argument.

        Block ``b`` holds elements ``first + [b*block, (b+1)*block)``.  Pass 1
        counts each block's non-zeros; the exclusive scan of the counts gives each
        block its first output row; pass 2 writes each block's rows, those below
        ``limit`` (the rows ``out`` holds).  The result is in ascending element
        order with no sort and no atomics; the count is the true count, also where
        it exceeds ``limit``.  A single block whose rows all fit needs no scan, so
        no counting pass either: its write, bounded by the worst case (every
        element), ends on the count.
        """
        mask = src.dtype.type(p[P.mask])  # the bits that make an element non-zero
        src_base = p[P.src_base]
        first = p[P.first]
        n = p[P.n]
        block = p[P.block]
        nblocks = p[P.nblocks]
        contiguous = p[P.contiguous] != 0
        limit = p[P.limit]
        w = (p[P.out_base], p[P.rs], p[P.cs], p[P.width])
        single = nblocks == 1 and limit >= n  # one block, every row fits: no count, no scan
        if single and contiguous and first == 0 and w[3] == 1 and w[1] == 1 and w[0] == 0:
            # One column, rows packed from out[0]: the positions are the rows.
            count[p[P.count_pos]] = _positions(src, src_base, n, mask, out)
            return
        ndim = p[P.ndim]
        shape = p[P.shape : P.shape + ndim]
        strides = p[P.strides : P.strides + ndim]
        if single:
            count[p[P.count_pos]] = _write_block(
                src,
                src_base,
                mask,
                shape,
                strides,
                first,
                n,
                block,
                np.int64(0),
                out,
                w,
                np.int64(0),
                n,
                contiguous,
            )
            return
        rows = np.empty(nblocks + 1, np.int64)
        rows[0] = 0
        for b in loop(nblocks):
            rows[b + 1] = _count_block(
                src, src_base, mask, shape, strides, first, n, block, np.int64(b), contiguous
            )
        _scan(rows, nblocks)
        for b in loop(nblocks):
            lo, hi = min(rows[b], limit), min(rows[b + 1], limit)
            _write_block(
                src,
                src_base,
                mask,
                shape,
                strides,
                first,
                n,
                block,
                np.int64(b),
                out,
                w,
                lo,
                hi,
                contiguous,
            )
        count[p[P.count_pos]] = rows[nblocks]

    return jit(parallel=parallel, nogil=True)(nonzero)


nonzero = _nonzero_driver(False)
nonzero_parallel = _nonzero_driver(True)


def _passes_driver(parallel):
    """The nonzero driver's two passes as drivers of their own (for argwhere, which
    allocates its result between them): :func:`count_blocks` then, into exactly as
    many rows as it counted, :func:`write_blocks`.  ``loop``: see
    :func:`_slice_driver`."""
    loop = prange if parallel else range

    def count_blocks(src, p, rows):
        """Pass 1 of ``nonzero``: ``rows[b]`` becomes block ``b``'s first output row
        and ``rows[nblocks]`` the count (``rows`` has ``nblocks + 1`` entries)."""
        mask = src.dtype.type(p[P.mask])
        src_base = p[P.src_base]
        first = p[P.first]
        n = p[P.n]
        block = p[P.block]
        nblocks = p[P.nblocks]
        contiguous = p[P.contiguous] != 0
        ndim = p[P.ndim]
        shape = p[P.shape : P.shape + ndim]
        strides = p[P.strides : P.strides + ndim]
        rows[0] = 0
        for b in loop(nblocks):
            rows[b + 1] = _count_block(
                src, src_base, mask, shape, strides, first, n, block, np.int64(b), contiguous
            )
        _scan(rows, nblocks)

    def write_blocks(src, p, out, rows):
        """Pass 2 of ``nonzero``: each block's coordinates into its rows, from
        ``rows`` (:func:`count_blocks`'), those below the limit in ``p``."""
        mask = src.dtype.type(p[P.mask])
        src_base = p[P.src_base]
        first = p[P.first]
        n = p[P.n]
        block = p[P.block]
        nblocks = p[P.nblocks]
        contiguous = p[P.contiguous] != 0
        limit = p[P.limit]
        w = (p[P.out_base], p[P.rs], p[P.cs], p[P.width])
        ndim = p[P.ndim]
        shape = p[P.shape : P.shape + ndim]
        strides = p[P.strides : P.strides + ndim]
        for b in loop(nblocks):
            lo, hi = min(rows[b], limit), min(rows[b + 1], limit)
            _write_block(
                src,
                src_base,
                mask,
                shape,
                strides,
                first,
                n,
                block,
                np.int64(b),
                out,
                w,
                lo,
                hi,
                contiguous,
            )

    return jit(parallel=parallel, nogil=True)(count_blocks), jit(parallel=parallel, nogil=True)(
        write_blocks
    )


count_blocks, write_blocks = _passes_driver(False)
count_blocks_parallel, write_blocks_parallel = _passes_driver(True)
