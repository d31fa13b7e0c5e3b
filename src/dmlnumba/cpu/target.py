"""The CPU target: the interface :class:`dmlnumba.target.Target` names, over NumPy
arrays.  Arguments arrive validated (see :mod:`dmlnumba.dispatch`).  The work is done by
the modules beside it, by job: :mod:`.views` (flat views of arrays),
:mod:`.slice` (slice1), :mod:`.nonzero` (nonzero_coordinates, argwhere, dask
stripes) and :mod:`.threads` (numba's threads, the load check, the nonzero driver);
they import numba's CPU kernels on first use, so ``import dmlnumba`` stays light.
"""

import functools
import math
import sys

import numpy as np

from .. import grad as _grad
from .. import target as _shared
from ..array_checks import host_array
from ..arrays import library
from ..interop import bfloat16_result, torch_written
from ..layout import scatter_window
from .nonzero import argwhere, argwhere_runner, nonzero, nonzero_runner, nonzero_stripe
from .slice import overlaps, refuse_read_only, slice1, slice1_runner
from .threads import one_thread
from .views import KEEP_VIEW_BYTES, library_give, library_runner, out_view, torch_array

__all__ = [
    "MAX_ELEMENTS",
    "argwhere",
    "argwhere_call",
    "argwhere_runner",
    "as_library",
    "call_stream",
    "check_out",
    "check_stream",
    "copy_into",
    "describe",
    "empty",
    "empty_result",
    "is_writeable",
    "leading_rows",
    "name",
    "nonzero",
    "nonzero_call",
    "nonzero_runner",
    "nonzero_stripe",
    "one_thread",
    "overlaps",
    "read_count",
    "shares_memory",
    "slice1",
    "slice1_call",
    "slice1_runner",
    "slice_grad",
    "slice_grad_call",
    "slice_grad_runner",
    "ZEROS_FREE",
    "ZERO_BOX_BYTES",
    "strided_view",
    "zero_views",
    "zeros",
]

name = "cpu"
#: Largest nonzero input (None: no limit beyond the coordinate type's).
MAX_ELEMENTS: int | None = None
#: New zero-filled arrays are NumPy's, whose pages the system zeroes as they are
#: first written: no pass of their own.
ZEROS_FREE = True
#: slice_grad zeroes the whole output first, never the window's complement box by box
#: (:func:`dmlnumba.grad.scatter`): NumPy's fills of strided boxes cost more than a
#: contiguous fill of the whole (docs/PERFORMANCE.md, "Specialised paths").
ZERO_BOX_BYTES = 1 << 62


def describe(a, name, func):
    if library(a) == "torch" and not a.is_cuda:  # a PyTorch CPU tensor: its memory, in place
        try:
            a = torch_array(a)
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


def slice_grad(g, starts, steps, out, stream=None, zeroed=False):
    """slice_grad's writes: :func:`dmlnumba.grad.scatter` (zeros, then one SLICE1
    copy into the window's view)."""
    _grad.scatter(_self, g, starts, steps, out, stream, zeroed)


def slice_grad_runner(g, starts, steps, shape, lib=None, out=None, stream=None):
    """A repeated slice_grad of NumPy gradients laid out like ``g``: a function of the
    gradient giving a new output (zeros: pages the system zeroes as they are first
    written; none where the window covers the output), or (``out``: the first call's
    checked output) of ``(gradient, out)`` giving ``out`` (zeroed by NumPy), or None
    where the two may share memory; either way slice1's runner then copies into the
    window's view.  ``lib``: the gradient's library, ``"torch"`` or ``"jax"`` (a CPU
    tensor or JAX array): the NumPy runner over its memory, its new output given back
    as the library's array (:func:`~dmlnumba.cpu.views.library_runner`); ``stream``:
    as slice1's."""
    if lib is not None:
        over_numpy = slice_grad_runner(g, starts, steps, shape, None, out)
        return library_runner(over_numpy, lib)
    lows, spacing, read_starts, read_steps = scatter_window(starts, steps, g.shape)
    idx = tuple(slice(lo, lo + (n - 1) * k + 1, k) for lo, k, n in zip(lows, spacing, g.shape))
    covers = g.size == math.prod(shape)
    make = np.empty if covers else np.zeros
    dtype = g.dtype
    first = make(shape, dtype) if out is None else out
    copy = slice1_runner(g, read_starts, read_steps, g.shape, None, first[idx])
    if out is None:

        def run(x):
            o = make(shape, dtype)
            copy(x, o[idx])  # (a new output: never shares the gradient's memory)
            return o

        return run
    may_share = np.may_share_memory
    bytes_view = by_bytes(first)  # (asked of the first output: the key holds its layout)
    view = out_view()
    ndarray = np.ndarray
    # The last small output's views (the one to zero, the window's), kept while it is
    # given again: the same array has the same memory, and the key its layout.
    kept: tuple = (None, None, None)  # read and set whole

    def run_out(x, o):
        nonlocal kept
        # A PyTorch CPU tensor's memory: the last small one's view kept.
        a = o if type(o) is ndarray else view(o)
        if a is None:  # (a freed tensor: the full path refuses it)
            return None
        if not a.flags.writeable:  # (the key holds no flag: asked of every call)
            refuse_read_only(a, "slice_grad")
        if may_share(x, a):
            return None
        last, zeroed, window = kept
        if a is not last:
            zeroed, window = (a.view(_BYTES) if bytes_view else a), a[idx]
            if a.nbytes <= KEEP_VIEW_BYTES:
                kept = (a, zeroed, window)
        if not covers:  # (a fill costs less than an assignment of 0)
            zeroed.fill(0)
        copy(x, window)
        if a is not o:  # as PyTorch's in-place ops mark the tensors they write
            torch_written(o)
        return o

    return run_out


def zeros(shape, dtype, stream=None, like=None, lib=None, func=None):
    """A new zero-filled array (pages the system zeroes as they are first written)."""
    return np.zeros(shape, dtype)


#: Bytes from which a C-contiguous array of items of 4 bytes or more is zeroed through a
#: byte view: NumPy fills bytes by memset and wider items element by element, and below
#: this the view costs more than it saves (docs/PERFORMANCE.md, "Specialised paths").
ZERO_BYTES_VIEW = 16384


#: The byte view's dtype, made once (a view given the type itself looks it up per call).
_BYTES = np.dtype(np.uint8)


def by_bytes(a):
    """Whether ``a`` is zeroed through a byte view (:data:`ZERO_BYTES_VIEW`)."""
    return a.itemsize >= 4 and a.nbytes >= ZERO_BYTES_VIEW and a.flags.c_contiguous


def zero(a):
    """Every element of ``a`` set to zero bits (+0.0 for floats)."""
    if by_bytes(a):
        a.view(_BYTES).fill(0)
    else:
        a.fill(0)


def zero_views(views, stream=None):
    """Every element of each array set to zero bits (+0.0 for floats)."""
    for a in views:
        zero(a)


def strided_view(a, lows, spacing, shape):
    """The view of ``a`` of ``shape`` from ``lows``, ``spacing`` elements apart."""
    return a[tuple(slice(lo, lo + (n - 1) * k + 1, k) for lo, k, n in zip(lows, spacing, shape))]


def call_stream(lib, stream, x, func=None):
    return None


def check_stream(stream, func):
    """A CPU call has no stream: ``stream=`` is refused."""
    if stream is not None:
        raise ValueError(f"{func}(): stream= applies to CUDA calls only; this call runs on the CPU")


def read_count(count, stream=None, func=None):
    return int(count.reshape(-1)[0])


# ------------------------------------------------------------------ the Target interface
# (dmlnumba.target.Target: the calls a prepared Call makes of this target)

_self = sys.modules[__name__]


def check_out(out, dtype, shape, name, func, x):
    """A caller's output as a NumPy array, checked (:func:`dmlnumba.target.check_out`)."""
    return _shared.check_out(_self, out, dtype, shape, name, func, x, library(out) == "torch")


def as_library(lib, a, bf16=None):
    """A new NumPy result as the input's library's array: a PyTorch tensor over the
    same memory, a JAX array of its values (``bf16``: float16 bits as that bfloat16
    dtype: a NumPy array's view, which JAX takes as it is; a tensor's view)."""
    if bf16 is not None and lib != "torch":
        a, bf16 = a.view(bf16), None
    r = library_give(lib)(a) if lib in ("torch", "jax") else a
    return r if bf16 is None else bfloat16_result(lib, r, bf16)


#: slice1: :func:`dmlnumba.target.slice1_call` on this target.
slice1_call = functools.partial(_shared.slice1_call, _self)


#: slice_grad: :func:`dmlnumba.target.slice_grad_into` on this target.
slice_grad_call = functools.partial(_grad.slice_grad_into, _self)


#: nonzero_coordinates: :func:`dmlnumba.target.nonzero_call` on this target (the
#: shared step itself, bound: no call of this module's on the way).
nonzero_call = functools.partial(_shared.nonzero_call, _self)


def argwhere_call(c):
    """The compact rows: an input of at most :data:`ARGWHERE_BUFFER_MAX` elements
    through a worst-case buffer, a larger one counted first (:func:`argwhere`)."""
    run = argwhere_runner(c.x)
    if c.key is not None and c.lib is None:
        c.keep(run)
    elif c.key is not None and not (c.zero_d or c.transposed):  # a PyTorch or JAX array's
        c.keep(library_runner(run, c.lib))
    rows = run(c.x)
    if c.zero_d:
        rows = rows[:, :0]
    if c.transposed:
        rows = np.ascontiguousarray(rows.T)
    return as_library(c.lib, rows)


def empty_result(c, shape, dtype):
    """A new empty NumPy result, as the input's library's array."""
    return as_library(c.lib, np.empty(shape, dtype), c.bf16)
