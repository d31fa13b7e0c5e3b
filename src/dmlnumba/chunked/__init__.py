"""Dask arrays: the operators chunk by chunk, lazily, with NumPy or CuPy chunks.

Imported only when a ``dask.array.Array`` reaches the API (``pip install
'dmlnumba[dask]'``).  Parameters are checked while the graph is built, against
the array's shape; nothing is computed until the caller asks.

slice1
    Output chunks follow the input's: along each axis, the output coordinates
    that read one input chunk form a run, and neighbouring runs are merged up to
    the input's largest chunk length (so a large stride gives neither one giant
    chunk nor thousands of one-element ones).  Each output block depends on the
    input blocks it reads and nothing else; it is allocated once and filled
    piece by piece, each piece a ``slice1`` from one input block into a view of
    the output block (no concatenation, no full materialisation).

slice_grad
    Output chunks are dask's usual ones for the output's shape and dtype
    (``normalize_chunks("auto", ...)``).  Along each axis, the gradient
    coordinates whose positions fall in one output chunk form a run; an output
    block that no coordinate reaches is zeros and reads nothing, and every other
    block depends only on the gradient chunks that meet its runs.  It is made by
    one in-memory ``slice_grad`` of the one gradient piece that reaches it, or
    allocated zeroed and written piece by piece, each piece a ``slice_grad`` into
    the view of the block the piece spans (the pieces' views are disjoint).

nonzero_coordinates
    DirectML's design one level up: per-block coordinates, in ascending order
    within each block, and blocks in ascending order of their elements, so the
    concatenation is in ascending global order.  That needs every block to be a
    contiguous run of the row-major order ("stripes": one index along the
    leading axes, a range along one axis, the whole of every later axis).  A
    chunking that is not made of stripes is rechunked into stripes of at most
    ``config.DASK_BLOCK_BYTES`` (128 MiB) of input each, which bounds the memory
    the rechunk and every task need.  Each block is read once: its coordinates
    are found by the in-memory kernel and shifted by the block's position in
    place.  ``count`` is the sum of the blocks' counts; with ``max_count``, an
    exclusive scan of the block counts gives each block its first row, and rows
    past ``max_count`` are dropped.  The coordinates' chunk sizes are unknown
    until computed (a lazy array needs no worst-case buffer).

Kernels inside tasks run on the task's thread: the scheduler's threads (or
workers) are the parallelism, and numba's thread pool is not started on top.

Devices
    Each CuPy chunk is processed on the GPU it is on, under CuPy's guard for that
    device (the task thread's current device may be another); ``device="cuda:N"``
    moves every chunk to GPU N first (NumPy chunks uploaded, CuPy chunks on other
    GPUs copied), ``device="cpu"`` every chunk to the host.
"""

from .grad_graph import slice_grad
from .nonzero_graph import _is_stripes, nonzero, stripes  # noqa: F401  (the tests' and scripts')
from .slice_graph import slice1

# ---------------------------------------------------------------- the adapter's interface
# (dmlnumba.target.Runs: the calls a prepared Call of a dask array makes)


def slice1_call(c):
    """slice1 (``c.args``: the parameters as read once by the prepare step)."""
    offsets, sizes, strides, output_sizes = c.args
    return slice1(c.input, offsets, sizes, strides, output_sizes, c.device)


def slice_grad_call(c):
    """slice_grad (``c.args``: ``(input_shape, offsets, sizes, strides)`` read once)."""
    input_shape, offsets, sizes, strides = c.args
    return slice_grad(c.input, input_shape, offsets, sizes, strides, c.device)


def nonzero_call(c):
    """nonzero_coordinates (``c.args``: ``(width, dtype, max_count)`` read once)."""
    width, dtype, max_count = c.args
    return nonzero(c.input, width, dtype, max_count, c.device, c.f)


def argwhere_call(c):
    """The compact rows of :func:`nonzero`, as ``numpy.argwhere`` gives them."""
    width, dtype, max_count = c.args
    rows = nonzero(c.input, width, dtype, max_count, c.device, c.f)[1]
    if c.zero_d:
        rows = rows[:, :0]
    return rows.T if c.transposed else rows


def empty_result(c, shape, dtype):
    """A lazy empty slice of the input, of its chunk type (``dtype``: the input's)."""
    return c.input[tuple(slice(0, n) for n in shape)]
