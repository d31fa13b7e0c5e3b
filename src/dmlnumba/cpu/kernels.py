"""CPU kernels: the shared index math compiled by ``numba.njit``, run on all cores.

Importing this module imports numba but compiles nothing: every kernel compiles
on its first call, once per bit width, and is cached on disk (``cache=True``).
Arrays arrive as flat unsigned-integer views (see :mod:`dmlnumba.layout`), so
one specialization serves every rank, layout and dtype of a bit width (read-only
inputs, such as broadcasts, too: their views are flagged writeable, see
:func:`dmlnumba.cpu.views.flat_view`).  The drivers release the GIL (``nogil=True``),
so that calls from several threads (a dask scheduler's, an application's) run at
the same time.

The passes, slice1's chunk copy and nonzero's block count and block write, are C
functions (``numba.cfunc``, :func:`.compiling.c_function`) that the drivers call by
address (:mod:`.llvm`): a jitted callee's code is linked into its caller, which LLVM
then optimizes and compiles again for each driver (docs/PERFORMANCE.md, "Startup
and compile time").  nonzero's passes take their call's arguments as one int64
block, so that the drivers of :mod:`.blocks`, compiled once for every bit width,
run them on numba's threads (or on the calling one, on a busy machine).  The other
drivers, each compiled only by the calls that take it:

- :mod:`.slice_kernels`: slice1's strided copy, chunk by chunk, one body compiled
  serial and ``parallel=True``;
- :mod:`.nonzero_kernels`: nonzero's per-block counts, scan and writes (the count
  pass in :mod:`.nonzero_count`, the write pass and its dense write in
  :mod:`.nonzero_write`), and two drivers for inputs of one block (no count pass).

Their building blocks: :mod:`.indexmath` (the shared index math, compiled here)
and :mod:`.llvm` (prefetch, bit-count and call intrinsics).
"""

from .blocks import blocks, blocks_parallel
from .nonzero_count import count_function
from .nonzero_kernels import (
    count_blocks,
    nonzero,
    nonzero_positions,
    nonzero_single,
    write_blocks,
)
from .nonzero_write import dense_function, write_function
from .slice_kernels import chunk_function, slice_copy, slice_copy_parallel

__all__ = [
    "blocks",
    "blocks_parallel",
    "count_blocks",
    "write_blocks",
    "nonzero",
    "nonzero_positions",
    "nonzero_single",
    "chunk_function",
    "slice_copy",
    "slice_copy_parallel",
    "count_function",
    "dense_function",
    "write_function",
]
