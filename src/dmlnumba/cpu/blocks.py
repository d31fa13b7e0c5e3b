"""The CPU block drivers, shared by every bit width: a pass's C function (nonzero's
block count and write) called for each block, on the calling thread or on numba's
threads.

A pass takes ``(args, b)``: the address of its call's argument block (an int64
array, :data:`~dmlnumba.params.NONZERO_PASS`: the arrays as addresses and sizes)
and the block's number, and returns an int64 (a block's count, or the row after the
last one it wrote).  So one driver, compiled once on a machine, runs every pass of
every bit width: a first large call compiles its passes and no driver of its own
(docs/PERFORMANCE.md, "Startup and compile time")."""

import numpy as np
from numba import prange

from .compiling import jit
from .llvm import call_pass


def _blocks_driver(parallel):
    """The block driver, on numba's threads or (``parallel=False``) the calling one:
    one body, compiled twice.  ``loop`` is a closure variable that differs between
    the two, so that numba's disk cache (keyed by the function's code and closure)
    keeps them apart."""
    loop = prange if parallel else range

    def blocks(f, args, results):
        """``results[b] = f(args, b)`` for each block ``b < results.size``: ``f`` the
        address of a pass's C function, ``args`` its argument block."""
        for b in loop(results.size):
            results[b] = call_pass(f, args, np.int64(b))

    return jit(parallel=parallel, nogil=True)(blocks)


blocks = _blocks_driver(False)
blocks_parallel = _blocks_driver(True)
