"""The CPU nonzero drivers on the calling thread: per-block counts, an exclusive
scan, then each block's rows (the passes: :mod:`.nonzero_count`,
:mod:`.nonzero_write`), and two drivers for inputs of one block (no count, no
scan), each compiled only by the calls that take it.  Calls on numba's threads run
the same passes through :mod:`.blocks`' drivers (:mod:`dmlnumba.cpu.nonzero`)."""

import numpy as np

from ..params import NONZERO_CPU as P
from ..params import NONZERO_PASS as A
from .compiling import jit
from .indexmath import _inline, is_nonzero
from .llvm import address, call_pass, stack_array
from .nonzero_count import ARGS, GROUP, _compact_from, _compact_groups, _count_contiguous
from .nonzero_write import DENSE_OF

#: The slots of a single block's argument block and its two rows (a constant: the
#: size of an array on the stack).
SINGLE_ARGS = ARGS + 2


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


@_inline
def _pass_args(a, src, p, out):
    """Fill ``a`` with the argument block (:data:`~dmlnumba.params.NONZERO_PASS`) of
    nonzero's passes over these arrays, its ``rows`` the slots that follow it: one
    array (on the stack where its size is a constant, :func:`~.llvm.stack_array`),
    which lives as long as the block or the rows are used (numba frees an allocated
    array after its last use; an address taken of it is not a use).  Returns ``a``."""
    a[A.src], a[A.src_n] = address(src), src.size
    a[A.p], a[A.p_n] = address(p), p.size
    a[A.out], a[A.out_n] = address(out), out.size
    a[A.rows] = address(a) + 8 * ARGS
    a[A.kept] = 0  # (none kept: set by a driver that gives them room)
    return a


@_inline
def _counted_rows(fc, a, rows, nblocks):
    """The count pass ``fc`` over the argument block ``a``, each block's count into
    ``rows[b + 1]``, then their exclusive scan: ``rows[b]`` becomes block ``b``'s first
    output row and ``rows[nblocks]`` the count."""
    for b in range(nblocks):
        rows[b + 1] = call_pass(fc, a, np.int64(b))
    rows[0] = 0
    for b in range(nblocks):
        rows[b + 1] += rows[b]


def _single_driver(fw, src, p, out, count):
    """NONZERO_COORDINATES of an input of one block whose rows all fit (``limit`` at
    least ``n``): no counting pass and no scan; the write (``fw``, the address of
    :func:`~.nonzero_write.write_function`'s C function), bounded by the worst case
    (every element), ends on the count.  ``p`` as for :func:`_blocks_driver`."""
    if not _outputs_apart(src, p, out, count):
        return False
    a = _pass_args(stack_array(p, SINGLE_ARGS), src, p, out)  # its rows: [0, n)
    a[ARGS] = 0
    a[ARGS + 1] = p[P.n]
    count[p[P.count_pos]] = call_pass(fw, a, np.int64(0))
    return True


nonzero_positions = jit(nogil=True)(_positions_driver)
nonzero_single = jit(nogil=True)(_single_driver)


def _blocks_driver(fc, fw, src, p, out, count):
    """NONZERO_COORDINATES of the elements ``[first, first + n)`` of the row-major
    order of the shape in ``p`` (the whole input; a dask block's run of the whole
    array's order), in that shape's coordinates, on the calling thread.  ``p`` is a
    :data:`~dmlnumba.params.NONZERO_CPU` block; everything but the arrays is in it,
    since numba's dispatch costs time for every argument.

    Block ``b`` holds elements ``first + [b*block, (b+1)*block)``.  Pass 1 counts
    each block's non-zeros; the exclusive scan of the counts gives each block its
    first output row; pass 2 writes each block's rows, those below ``limit`` (the
    rows ``out`` holds).  ``fc`` and ``fw``: the addresses of the passes' C functions
    (:func:`~.nonzero_count.count_function`, :func:`~.nonzero_write.write_function`).
    The result is in ascending element order with no sort and no atomics; the count
    is the true count, also where it exceeds ``limit``.  (A single block whose rows
    all fit needs neither the count nor the scan: :func:`nonzero_single` and
    :func:`nonzero_positions` take those calls, chosen by the caller; calls on
    numba's threads run the same passes through :mod:`.blocks`' drivers.)  The count
    pass of a C-contiguous input keeps a sparse block's positions for the write pass
    (``keep``).  Returns whether it wrote (see :func:`_positions_driver`)."""
    if not _outputs_apart(src, p, out, count):
        return False
    nblocks = p[P.nblocks]
    # The argument block, the rows, then how many positions each block kept, and them.
    keep = p[P.keep] if p[P.limit] > 0 else 0
    a = np.empty(
        ARGS + nblocks + 1 + (keep + 1) * nblocks if keep else ARGS + nblocks + 1, np.int64
    )
    a = _pass_args(a, src, p, out)
    if keep > 0:
        a[A.kept] = a[A.rows] + 8 * (nblocks + 1)
    rows = a[ARGS : ARGS + nblocks + 1]
    _counted_rows(fc, a, rows, nblocks)
    for b in range(nblocks):
        call_pass(fw, a, np.int64(b))
    count[p[P.count_pos]] = rows[nblocks]
    return True


nonzero = jit(nogil=True)(_blocks_driver)


def _count_blocks(fc, src, p, rows):
    """Pass 1 of :func:`_blocks_driver` alone, for argwhere on the calling thread (it
    allocates its result between the passes): ``rows[b]`` becomes block ``b``'s first
    output row and ``rows[nblocks]`` the count."""
    a = _pass_args(stack_array(p, ARGS), src, p, src)  # (no output yet)
    a[A.rows] = address(rows)  # (an argument: it outlives the calls)
    _counted_rows(fc, a, rows, p[P.nblocks])


def _write_blocks(fw, src, p, out, rows):
    """Pass 2 of :func:`_blocks_driver` alone (see :func:`_count_blocks`): each block's
    rows into ``out``, from ``rows``."""
    a = _pass_args(stack_array(p, ARGS), src, p, out)
    a[A.rows] = address(rows)
    for b in range(p[P.nblocks]):
        call_pass(fw, a, np.int64(b))


count_blocks = jit(nogil=True)(_count_blocks)
write_blocks = jit(nogil=True)(_write_blocks)
