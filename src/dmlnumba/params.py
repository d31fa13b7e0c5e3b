"""Kernel parameter blocks: one declaration each, read by host and kernel alike.

A parameter block is one int64 array: ``MAXD``-long rows (a shape, strides, each
padded to ``MAXD``) followed by scalars.  A kernel gets it as one argument (a
pointer on a GPU, an array on the CPU) instead of a dozen scalars: numba's
dispatch and a CUDA launch cost per argument, and one block of a layout is built
once and reused.

Each block is declared once, as a named tuple of slot numbers: a kernel reads
``p[NONZERO_CUDA.total]`` or ``p[NONZERO_CUDA.shape + d]`` (numba folds the
global tuple into constants), and the host builds the array with :func:`pack`
by field name.  Plain Python and NumPy: no numba import.
"""

from collections import namedtuple

import numpy as np

#: The most dimensions a tensor has (DirectML's limit).
MAXD = 8


def declare(name, rows, scalars):
    """A block with the ``rows`` (``MAXD`` slots each) then the ``scalars`` (one
    slot each): a named tuple of each field's first slot."""
    kind = namedtuple(name, rows + scalars)  # type: ignore[misc]
    slots = [MAXD * i for i in range(len(rows))]
    slots += [MAXD * len(rows) + j for j in range(len(scalars))]
    kind._row_fields = rows  # type: ignore[attr-defined]  # (no field starts with "_")
    return kind(*slots)


def size(decl, /):
    """The slots of a block of ``decl``."""
    return decl[-1] + 1


def pack(decl, /, **values):
    """The int64 array of a ``decl`` block with every field's value (rows as
    sequences of at most ``MAXD`` integers, padded with zeros); a field left out,
    or one ``decl`` does not have, is an error."""
    name = type(decl).__name__
    missing = set(decl._fields) - set(values)
    extra = set(values) - set(decl._fields)
    if missing or extra:
        raise TypeError(f"{name}: missing {sorted(missing)}, unknown {sorted(extra)}")
    rows = type(decl)._row_fields
    a = np.zeros(size(decl), np.int64)
    for f in decl._fields:
        slot = getattr(decl, f)
        v = values[f]
        if f in rows:
            a[slot : slot + len(v)] = v
        else:
            a[slot] = int(v)
    return a


#: The CUDA slice1 kernel's block (see :mod:`dmlnumba.gpu.slice_kernel`).
SLICE_CUDA = declare(
    "SliceCuda",
    rows=("shape", "src_strides", "dst_strides"),
    scalars=(
        "src_base",  # index of the window's first element in the flat source
        "dst_base",  # index of the output's first element in the flat destination
        "ndim",
        "seg",  # elements of the inner dimension a tile copies
        "nseg",  # tiles across the inner dimension
        "rows",  # rows of the outer dimensions
        "nrows",  # consecutive rows a tile walks
        "ntiles",
    ),
)

#: The CUDA slice1 gather kernel's block (see :func:`dmlnumba.gpu.slice_kernel.make_gather`).
SLICE_GATHER_CUDA = declare(
    "SliceGatherCuda",
    # magic, shift: dividing by shape[d] with a multiply (dmlnumba.layout.divisor32)
    # The rows right-aligned: dimension k of ndim in slot MAXD - ndim + k (the slots
    # before it 0), so that the kernel reads each by a literal slot.
    rows=("shape", "src_strides", "dst_strides", "magic", "shift"),
    scalars=(
        "src_base",  # index of the window's first element in the flat source
        "dst_base",  # index of the output's first element in the flat destination
        "ndim",
        "total",  # elements copied
        "src_stride0",  # the first dimension's strides
        "dst_stride0",
    ),
)

#: The CUDA slice_grad one-pass kernel's block (see :mod:`dmlnumba.gpu.grad_kernel`).
SLICE_GRAD_CUDA = declare(
    "SliceGradCuda",
    # Over the output's dimensions, right-aligned and padded to MAXD with dimensions
    # of size 1 (so that the kernel reads every slot by a literal index): the window's
    # lowest index, spacing and count (the gradient's shape) a dimension, the
    # gradient's and the output's strides (the gradient's negated along a reversed
    # dimension); magic, shift: dividing by shape[d], smagic, sshift: by spacing[d]
    # (dmlnumba.layout.divisor32).
    rows=(
        "shape",
        "low",
        "spacing",
        "count",
        "src_strides",
        "dst_strides",
        "magic",
        "shift",
        "smagic",
        "sshift",
    ),
    scalars=(
        "src_base",  # index in the flat gradient of the window's element at lows
        "dst_base",  # index of the output's first element in the flat destination
        "rows",  # rows of the outer dimensions
        "inner",  # the last dimension's size
        "nseg",  # a warp's segments across a row
        "nwork",  # work items: groups of rows times segments
        "lanes_log",  # log2 of a row's lanes (L)
    ),
)

#: The CUDA nonzero kernel's block (see :mod:`dmlnumba.gpu.nonzero_kernel`).
NONZERO_CUDA = declare(
    "NonzeroCuda",
    # magic, shift: dividing by shape[d] with a multiply (dmlnumba.layout.divisor)
    rows=("shape", "strides", "magic", "shift"),
    scalars=(
        "src_base",  # index of element 0 in the flat input
        "ndim",
        "total",  # elements
        "items",  # steps of 32 elements a warp takes per tile
        "out_base",  # index of coordinate row 0, column 0 in the flat output
        "rs",  # row and column strides of the output, in items
        "cs",
        "width",  # columns
        "count_pos",  # index of the count in its flat view
        "limit",  # rows the output holds: rows at and past it are not written
    ),
)

#: The CPU nonzero drivers' block (see :mod:`dmlnumba.cpu.kernels`).
NONZERO_CPU = declare(
    "NonzeroCpu",
    rows=("shape", "strides"),  # of the row-major order counted (strides: of the input)
    scalars=(
        "ndim",
        "mask",  # bits of an element that make it non-zero (two's complement for 64 bits)
        "src_base",  # index of element 0 in the flat input view
        "first",  # the input's first element in the row-major order of ``shape``
        "n",  # elements
        "block",  # elements per block
        "nblocks",
        "out_base",  # index of coordinate row 0, column 0 in the flat output view
        "rs",  # row and column strides of the output, in items
        "cs",
        "width",  # columns
        "count_pos",  # index of the count in its flat view
        "contiguous",  # 1: element e is src[src_base + e]
        "limit",  # rows the output holds
        "ask_apart",  # 1: the driver asks whether its arrays may share memory (a caller's)
        "dense",  # the address of the write pass's dense write (0 where no row is written)
        "keep",  # slots of a block's kept positions (:func:`kept_slots`; 0: none)
    ),
)

#: The CPU count pass of a C-contiguous input keeps the positions of a block's non-zeros
#: (``cpu.nonzero_count._keep_positions``) while at most one in ``KEEP_OF`` of the
#: elements read so far, and ``KEEP_SLACK`` more, is non-zero: the write pass then
#: writes the block's rows from them, without reading the input again
#: (docs/PERFORMANCE.md).
KEEP_OF = 16
KEEP_SLACK = 8


def kept_slots(block):
    """The int64 slots of a block's kept positions (the ``keep`` of a
    :data:`NONZERO_CPU` block): room for every position the density bound lets a
    block of ``block`` elements keep (and a group of 64 more); 0 (none kept) for
    blocks of more than 2**24 elements, whose room would be large."""
    if block > 1 << 24:
        return 0
    return KEEP_SLACK + -(-block // KEEP_OF) + 64


#: The arguments of the CPU nonzero passes' C functions, one int64 block a call (see
#: :mod:`dmlnumba.cpu.blocks`), arrays as the address of their first item and their
#: items: the flat input, its :data:`NONZERO_CPU` block, the flat coordinates,
#: each block's first row, and how many positions the count pass kept in each block
#: (or -1) followed by them (``keep`` slots a block; address 0: the driver keeps none).
NONZERO_PASS = declare(
    "NonzeroPass",
    rows=(),
    scalars=("src", "src_n", "p", "p_n", "out", "out_n", "rows", "kept"),
)


def rows_copier(decl, /):
    """A plain-Python function ``copy(src, *rows)`` that sets ``rows[j][d] = src[
    decl[j] + d]`` for each of ``decl``'s rows (in its order) and every ``d <
    MAXD``, one statement a slot with the index a literal.  Compiled as a CUDA device
    function it moves the layout of a block passed by value (a tuple of kernel
    parameters) into shared memory as straight-line stores: a tuple indexed by a
    run-time value compiles to a switch over every slot.  A kernel reads the
    block's scalars by literal slots, straight from its parameters."""
    fields = decl._row_fields
    lines = [f"    {f}[{d}] = src[{getattr(decl, f) + d}]" for f in fields for d in range(MAXD)]
    src = f"def copy(src, {', '.join(fields)}):\n" + "\n".join(lines) + "\n"
    scope: dict = {}
    exec(compile(src, f"<params.rows_copier {type(decl).__name__}>", "exec"), scope)
    return scope["copy"]
