"""CPU kernels: the shared index math compiled by ``numba.njit``, run on all cores.

Importing this module imports numba but compiles nothing: every kernel compiles
on its first call, once per bit width, and is cached on disk (``cache=True``).
Arrays arrive as flat unsigned-integer views (see :mod:`dmlnumba.layout`), so
one specialization serves every rank, layout and dtype of a bit width (read-only
inputs, such as broadcasts, too: their views are flagged writeable, see
:func:`dmlnumba.cpu.views.flat_view`).  The drivers release the GIL (``nogil=True``),
so that calls from several threads (a dask scheduler's, an application's) run at
the same time.

The drivers, each one body compiled serial and ``parallel=True``:

- :mod:`.slice_kernels`: slice1's strided copy, chunk by chunk;
- :mod:`.nonzero_kernels`: nonzero's per-block counts, scan and writes (the count
  pass in :mod:`.nonzero_count`, the write pass in :mod:`.nonzero_write`); inputs
  of one block take serial drivers of their own (no count pass), which a call
  compiles only where it takes them.

The passes they run, slice1's chunk copy and nonzero's block count and block
write, are C functions (``numba.cfunc``, :func:`.compiling.c_function`) that the
drivers call by address (:func:`.llvm.call_int64`): a jitted callee's code is
linked into its caller, which LLVM then optimizes and compiles again for each
driver and each of a parallel driver's loops: most of a first call's compile time
(docs/PERFORMANCE.md, "Startup and compile time").

Their building blocks: :mod:`.indexmath` (the shared index math, compiled here)
and :mod:`.llvm` (prefetch, bit-count and call intrinsics).
"""

from .nonzero_count import count_function
from .nonzero_kernels import (
    count_blocks,
    count_blocks_parallel,
    nonzero,
    nonzero_parallel,
    nonzero_positions,
    nonzero_single,
    write_blocks,
    write_blocks_parallel,
)
from .nonzero_write import write_function
from .slice_kernels import chunk_function, slice_copy, slice_copy_parallel

__all__ = [
    "count_blocks",
    "count_blocks_parallel",
    "nonzero",
    "nonzero_parallel",
    "nonzero_positions",
    "nonzero_single",
    "write_blocks",
    "write_blocks_parallel",
    "chunk_function",
    "slice_copy",
    "count_function",
    "write_function",
    "slice_copy_parallel",
]
