"""The CPU target: the interface :class:`dmlnumba.target.Target` names, over NumPy
arrays.  Arguments arrive validated (see :mod:`dmlnumba.api`).  The work is done by
the modules beside it, by job: :mod:`.views` (flat views of arrays),
:mod:`.slice` (slice1), :mod:`.nonzero` (nonzero_coordinates, argwhere, dask
stripes) and :mod:`.threads` (numba's threads, the load check, the nonzero driver);
they import numba's CPU kernels on first use, so ``import dmlnumba`` stays light.
"""

import numpy as np

from ..array_checks import host_array
from ..arrays import library
from .nonzero import argwhere, argwhere_runner, nonzero, nonzero_run, nonzero_runner
from .slice import overlaps, slice1, slice1_out_runner, slice1_runner
from .threads import one_thread

__all__ = [
    "MAX_ELEMENTS",
    "argwhere",
    "argwhere_runner",
    "call_stream",
    "check_stream",
    "copy_into",
    "describe",
    "empty",
    "is_writeable",
    "leading_rows",
    "name",
    "nonzero",
    "nonzero_run",
    "nonzero_runner",
    "one_thread",
    "overlaps",
    "read_count",
    "shares_memory",
    "slice1",
    "slice1_out_runner",
    "slice1_runner",
]

name = "cpu"
#: Largest nonzero input (None: no limit beyond the coordinate type's).
MAX_ELEMENTS: int | None = None


def describe(a, name, func):
    if library(a) == "torch" and not a.is_cuda:  # a PyTorch CPU tensor: its memory, in place
        try:
            a = a.numpy()
        except (RuntimeError, TypeError) as e:
            raise TypeError(f"{func}(): {name} cannot be written as a NumPy array: {e}") from None
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{func}(): {name} must be an array, not {type(a).__name__}")
    return host_array(a, name, func)


def shares_memory(a, b):
    """Whether ``a`` and ``b`` share memory (exact)."""
    return bool(np.shares_memory(a, b))


def copy_into(src, dst, stream=None):
    """``dst[...] = src`` for arrays of the same number of elements per row."""
    np.copyto(dst, src.reshape(dst.shape))


def leading_rows(coords, n):
    """The first ``n`` rows of a coordinates matrix ((R, N) or DirectML's padded shapes)."""
    return coords[..., :n, :]


def is_writeable(a):
    return a.flags.writeable


def empty(shape, dtype, stream=None, like=None, lib=None, func=None):
    return np.empty(shape, dtype)


def call_stream(lib, stream, x):
    return None


def check_stream(stream, func):
    """Nothing to check: the API refuses ``stream=`` for CPU calls."""


def read_count(count, stream=None, func=None):
    return int(count.reshape(-1)[0])
