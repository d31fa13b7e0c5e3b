"""The CPU nonzero kernels: per-block counts, an exclusive scan, then each block's
rows (:mod:`.nonzero_write`); one body compiled serial and ``parallel=True``, and
two serial drivers for inputs of one block (no count, no scan), each compiled only
by the calls that take it."""

import numpy as np
from numba import prange

from ..params import NONZERO_CPU as P
from .compiling import jit
from .indexmath import _inline, is_nonzero
from .llvm import call_int64, data_pointer
from .nonzero_count import GROUP, _compact_from, _compact_groups, _count_contiguous
from .nonzero_write import DENSE_OF


@jit
def _positions(src, p, n, mask, out):
    """Write the positions ``k`` of the non-zero elements among ``src[p : p + n]``
    into ``out``, in order, and nothing past them; return how many.  These are the
    one-column coordinates of a C-contiguous input of effective rank 1 (every
    dimension but the last of size 1).

    The first 64 elements choose the way (docs/PERFORMANCE.md):
    - a quarter or more of them non-zero: one branchless loop
      (:func:`_compact_from`) that ends on the last non-zero element, faster than
      :func:`~.nonzero_write._write_block` on a small input;
    - fewer: 64 elements at a time, the non-zero ones as a bit mask
      (:func:`~.nonzero_count._compact_groups`), so sparse inputs skip most work.
    """
    up = np.uint64(p)
    h = min(GROUP, n)
    if _count_contiguous(src, p, h, mask) * DENSE_OF >= h:
        e = n
        while e > 0 and not is_nonzero(src[up + np.uint64(e - 1)], mask):
            e -= 1
        return _compact_from(src, up, 0, e, mask, out, 0)
    return _compact_groups(src, up, n, mask, out, 0)


@_inline
def _apart(a, b):
    """Whether the arrays ``a`` and ``b`` share no byte, by their bounds (as
    ``numpy.may_share_memory``): of flat views, the spans of their arrays' elements.
    An empty array shares none."""
    if a.size == 0 or b.size == 0:
        return True
    pa, pb = np.int64(a.ctypes.data), np.int64(b.ctypes.data)
    return pa + a.size * a.itemsize <= pb or pb + b.size * b.itemsize <= pa


@_inline
def _outputs_apart(src, p, out, count):
    """Whether no two of a driver's arrays share a byte, where the block asks
    (``ask_apart``: a runner's call into the caller's outputs; the full path tests
    its outputs itself).  Each driver asks before it writes, and writes nothing
    where they may, so that such a call needs no Python test of its own.  Where no
    row is written (a limit of 0) ``out`` is not asked: the count may stand in."""
    if p[P.ask_apart] == 0:
        return True
    if not _apart(src, count):
        return False
    return p[P.limit] == 0 or (_apart(src, out) and _apart(count, out))


@_inline
def _scan(rows, nblocks):
    """``rows[b + 1]`` holds block ``b``'s count: make ``rows[b]`` its first row."""
    rows[0] = 0
    for b in range(nblocks):
        rows[b + 1] += rows[b]


def _positions_driver(src, p, out, count):
    """NONZERO_COORDINATES of a C-contiguous input into one packed column from
    ``out[0]``, every row fitting (one block): the positions are the rows
    (:func:`_positions`).  A driver of its own, so that only such calls compile
    the positions pass.  Every driver returns whether it wrote: False, having
    written nothing, where its arrays may share memory (:func:`_outputs_apart`)."""
    if not _outputs_apart(src, p, out, count):
        return False
    mask = src.dtype.type(p[P.mask])
    count[p[P.count_pos]] = _positions(src, p[P.src_base], p[P.n], mask, out)
    return True


def _single_driver(fw, src, p, out, count):
    """NONZERO_COORDINATES of an input of one block whose rows all fit (``limit`` at
    least ``n``): no counting pass and no scan; the write (``fw``, the address of
    :func:`~.nonzero_write.write_function`'s C function), bounded by the worst case
    (every element), ends on the count.  ``p`` as for :func:`_nonzero_driver`'s
    drivers."""
    if not _outputs_apart(src, p, out, count):
        return False
    sp, pp, op = data_pointer(src), data_pointer(p), data_pointer(out)
    zero = np.int64(0)
    rows = call_int64(fw, sp, src.size, pp, p.size, zero, op, out.size, zero, p[P.n])
    count[p[P.count_pos]] = rows
    return True


nonzero_positions = jit(nogil=True)(_positions_driver)
nonzero_single = jit(nogil=True)(_single_driver)


def _nonzero_driver(parallel):
    """The nonzero driver, on numba's threads or the calling one (see
    :func:`_slice_driver`)."""
    loop = prange if parallel else range

    def nonzero(fc, fw, src, p, out, count):
        """NONZERO_COORDINATES of the elements ``[first, first + n)`` of the
        row-major order of the shape in ``p`` (the whole input; a dask block's
        run of the whole array's order), in that shape's coordinates.  ``p`` is a
        :data:`~dmlnumba.params.NONZERO_CPU` block; everything but the arrays is
        in it, since numba's dispatch costs time for every argument.

        Block ``b`` holds elements ``first + [b*block, (b+1)*block)``.  Pass 1
        counts each block's non-zeros; the exclusive scan of the counts gives each
        block its first output row; pass 2 writes each block's rows, those below
        ``limit`` (the rows ``out`` holds).  ``fc`` and ``fw``: the addresses of the
        passes' C functions (:func:`~.nonzero_count.count_function`,
        :func:`~.nonzero_write.write_function`).  The result is in ascending element
        order with no sort and no atomics; the count is the true count, also where
        it exceeds ``limit``.  (A single block whose rows all fit needs neither
        the count nor the scan: :func:`nonzero_single` and
        :func:`nonzero_positions` take those calls, chosen by the caller.)  Returns
        whether it wrote (see :func:`_positions_driver`).
        """
        if not _outputs_apart(src, p, out, count):
            return False
        sp, sn, pp, pn = data_pointer(src), src.size, data_pointer(p), p.size
        op, on = data_pointer(out), out.size
        nblocks = p[P.nblocks]
        limit = p[P.limit]
        rows = np.empty(nblocks + 1, np.int64)
        rows[0] = 0
        for b in loop(nblocks):
            rows[b + 1] = call_int64(fc, sp, sn, pp, pn, np.int64(b))
        _scan(rows, nblocks)
        for b in loop(nblocks):
            lo, hi = min(rows[b], limit), min(rows[b + 1], limit)
            call_int64(fw, sp, sn, pp, pn, np.int64(b), op, on, lo, hi)
        count[p[P.count_pos]] = rows[nblocks]
        return True

    return jit(parallel=parallel, nogil=True)(nonzero)


nonzero = _nonzero_driver(False)
nonzero_parallel = _nonzero_driver(True)


def _passes_driver(parallel):
    """The nonzero driver's two passes as drivers of their own (for argwhere, which
    allocates its result between them): :func:`count_blocks` then, into exactly as
    many rows as it counted, :func:`write_blocks`.  ``loop``: see
    :func:`_slice_driver`."""
    loop = prange if parallel else range

    def count_blocks(fc, src, p, rows):
        """Pass 1 of ``nonzero``: ``rows[b]`` becomes block ``b``'s first output row
        and ``rows[nblocks]`` the count (``rows`` has ``nblocks + 1`` entries)."""
        sp, sn, pp, pn = data_pointer(src), src.size, data_pointer(p), p.size
        nblocks = p[P.nblocks]
        rows[0] = 0
        for b in loop(nblocks):
            rows[b + 1] = call_int64(fc, sp, sn, pp, pn, np.int64(b))
        _scan(rows, nblocks)

    def write_blocks(fw, src, p, out, rows):
        """Pass 2 of ``nonzero``: each block's coordinates into its rows, from
        ``rows`` (:func:`count_blocks`'), those below the limit in ``p``."""
        sp, sn, pp, pn = data_pointer(src), src.size, data_pointer(p), p.size
        op, on = data_pointer(out), out.size
        limit = p[P.limit]
        for b in loop(p[P.nblocks]):
            lo, hi = min(rows[b], limit), min(rows[b + 1], limit)
            call_int64(fw, sp, sn, pp, pn, np.int64(b), op, on, lo, hi)

    return jit(parallel=parallel, nogil=True)(count_blocks), jit(parallel=parallel, nogil=True)(
        write_blocks
    )


count_blocks, write_blocks = _passes_driver(False)
count_blocks_parallel, write_blocks_parallel = _passes_driver(True)
