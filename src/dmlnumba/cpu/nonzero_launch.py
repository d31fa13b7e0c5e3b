"""How a CPU nonzero call runs: the driver on the calling thread (chosen by
:func:`~dmlnumba.cpu.threads.nonzero_driver`) or the passes on numba's threads, the
addresses of the passes' C functions (each compiled on first use), and the argument
block they take."""

import numpy as np

from ..params import NONZERO_CPU, NONZERO_PASS, size
from . import compiling, process, threads
from .threads import nonzero_on_threads, threads_ok

#: The slots of a pass's argument block.
PASS_ARGS = size(NONZERO_PASS)


def launch_block(p, src, out, count, driver):
    """Run the nonzero of parameter block ``p``; ``driver``:
    :func:`~dmlnumba.cpu.threads.nonzero_driver`'s choice, for a call that runs on
    this thread.  Returns whether it wrote: False, having written nothing, where
    ``p`` asks (``ask_apart``) and ``src``, ``out`` and ``count`` may share memory."""
    bits = (8 * src.itemsize, 8 * out.itemsize)
    if nonzero_on_threads(p) and threads_ok():
        return _on_threads(bits, src, p, out, count)
    kernel, key, passes = serial_driver(driver, bits, p)
    return compiling.run(kernel, key, *passes, src, p, out, count)


def pass_args(src, p, out, nrows, keep=0):
    """The argument block of nonzero's passes (:data:`~dmlnumba.params.NONZERO_PASS`)
    followed by the ``nrows`` slots of its rows, as the serial driver makes it
    (:func:`~.nonzero_kernels._pass_args`), then (``keep``: the kept positions' room
    a block, 0 for none) how many positions each of the ``nrows - 1`` blocks kept,
    and room for them."""
    a = np.empty(
        PASS_ARGS + nrows + (keep + 1) * (nrows - 1) if keep else PASS_ARGS + nrows, np.int64
    )
    A = NONZERO_PASS
    a[A.src], a[A.src_n] = src.ctypes.data, src.size
    a[A.p], a[A.p_n] = p.ctypes.data, p.size
    a[A.out], a[A.out_n] = out.ctypes.data, out.size
    a[A.rows] = a.ctypes.data + 8 * PASS_ARGS
    a[A.kept] = a[A.rows] + 8 * nrows if keep else 0
    return a


def _on_threads(bits, src, p, out, count):
    """The serial driver's work (:func:`~.nonzero_kernels._blocks_driver`) on numba's
    threads (:func:`~.threads.run_passes`): its test of the caller's outputs (NumPy's
    bounds test, as the kernels'), the count pass, the scan, and the write pass
    where it writes rows."""
    P = NONZERO_CPU
    share = np.may_share_memory
    if p[P.ask_apart] and (
        share(src, count) or (p[P.limit] > 0 and (share(src, out) or share(count, out)))
    ):
        return False
    k = process.kernels()
    fw = write_pass(k, bits, p) if p[P.limit] > 0 else None
    nblocks = int(p[P.nblocks])
    a = pass_args(src, p, out, nblocks + 1, int(p[P.keep]) if fw is not None else 0)
    rows = passes_on_threads(count_pass(k, bits[0], p), a, nblocks, lambda n: fw)
    count[p[P.count_pos]] = rows[nblocks]
    return True


def passes_on_threads(fc, a, nblocks, write):
    """The passes of argument block ``a`` (:func:`pass_args`, with ``nblocks + 1`` rows)
    on numba's threads (:func:`~.threads.run_passes` decides, once for both): the
    count pass ``fc``, the scan of the counts into the rows, then the write pass
    that ``write(count)`` gives (the address, or None for none; it may set the
    block's output first: argwhere allocates its result there).  Returns the rows:
    each block's first row, and the count last."""
    rows = a[PASS_ARGS : PASS_ARGS + nblocks + 1]
    rows[0] = 0

    def job(on_threads):
        threads.run_pass(fc, a, rows[1:], on_threads)
        np.cumsum(rows, out=rows)
        fw = write(int(rows[nblocks]))
        if fw is not None:
            threads.run_pass(fw, a, np.empty(nblocks, np.int64), on_threads)

    threads.run_passes(job)
    return rows


def dense_class(width, rs, cs):
    """The width class of a write into rows of ``width`` columns with row and column
    strides ``rs`` and ``cs`` (items): the width, for packed rows (``rs`` the width,
    ``cs`` 1: every default output) of widths 1 to 4; 0 for any other layout."""
    return width if cs == 1 and rs == width and 1 <= width <= 4 else 0


def write_pass(k, bits, p):
    """The address of the write pass for ``bits`` (input, coordinates), with the
    address of the dense write of ``p``'s width class (:func:`dense_class`)
    set in ``p``, where it writes rows: each compiled on first use."""
    if p[NONZERO_CPU.limit] > 0:
        wclass = dense_class(p[NONZERO_CPU.width], p[NONZERO_CPU.rs], p[NONZERO_CPU.cs])
        p[NONZERO_CPU.dense] = compiling.c_function_address(
            k.dense_function, "dense", *bits, int(wclass)
        )
    return compiling.c_function_address(k.write_function, "write", *bits, layout_kind(p))


def count_pass(k, bits, p):
    """The address of the count pass for ``bits``-bit inputs laid out as ``p`` says: a
    C-contiguous input's reads only consecutive elements (a pass of its own, which
    compiles no strided loop)."""
    contiguous = bool(p[NONZERO_CPU.contiguous])
    return compiling.c_function_address(k.count_function, "count", bits, contiguous)


def layout_kind(p):
    """The layout kind of the input of parameter block ``p``, which its write pass is
    compiled for (the loops of that kind alone): ``"contiguous"`` (C-contiguous: a
    block's elements are consecutive), ``"rows"`` (rows of consecutive elements: the
    last stride 1) or ``"strided"``.  (The count pass tells C-contiguous inputs from
    the others only: compiled for stepped rows alone, it counted them 10% slower.)"""
    P = NONZERO_CPU
    if p[P.contiguous]:
        return "contiguous"
    ndim = int(p[P.ndim])
    return "rows" if ndim and p[P.strides + ndim - 1] == 1 else "strided"


def serial_driver(driver, bits, p):
    """The serial nonzero driver ``driver`` (:func:`~dmlnumba.cpu.threads.nonzero_driver`'s
    choice) for inputs and coordinates of ``bits``: ``(kernel, key, passes)``,
    ``passes`` the addresses of the C functions it takes before the arrays (each
    compiled on first use; the dense write's set in ``p``, see :func:`write_pass`)."""
    k = process.kernels()
    key = ("nonzero",) + bits
    if driver == "positions":
        return k.nonzero_positions, key + (driver,), ()
    fw = write_pass(k, bits, p)
    if driver == "single":
        return k.nonzero_single, key + (driver,), (fw,)
    count = count_pass(k, bits[0], p)
    return k.nonzero, key, (count, fw)
