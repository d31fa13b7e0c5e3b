"""The public API: each call prepared once (:mod:`dmlnumba.prepare`), then run by its
target, or a repeated call's runner found by its key (:mod:`dmlnumba.keys`).

Every check of a call runs before any output is allocated or written, so an
``out=`` array is untouched when a call raises.
"""

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import keys, prepare
from .window import window  # noqa: F401  (re-exported)


def slice1(
    input: Any,
    offsets: Sequence[int],
    sizes: Sequence[int],
    strides: Sequence[int],
    output_sizes: Sequence[int] | None = None,
    *,
    out: Any = None,
    device: str | None = None,
    stream: Any = None,
) -> Any:
    """DirectML SLICE1: a strided window of ``input``, copied bit for bit.

    For every output coordinate ``c``: ``output[c] = input[start + strides * c]``
    with ``start = offsets`` where a stride is positive and
    ``offsets + sizes - 1`` where it is negative (which reverses that
    dimension).  ``output_sizes`` defaults to ``1 + (sizes - 1) // abs(strides)``
    per dimension and may be smaller (at least 1).

    ``input`` may have any strides (reversed, permuted, broadcast); it is read in
    place.  ``out``, if given, must be a writeable array of the output's shape and
    the input's dtype (any strides); it is written and returned.  ``device``:
    ``None`` (where ``input`` lives), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    ``stream``: the CUDA stream to order the work on (CUDA only).

    Raises TypeError for arguments of the wrong type and ValueError for bad
    values, before anything is written.
    """
    key, run = keys.window(
        "slice1", input, offsets, sizes, strides, output_sizes, out, device, stream
    )
    if run is not None:  # None from it: the full path decides (see keys)
        if out is None:
            r = run(input)
            if r is not None:
                return r
        elif run(input, out) is not None:
            return out
    call = prepare.slice1(input, offsets, sizes, strides, output_sizes, out, device, stream, key)
    return call.target.slice1_call(call)


def slice_grad(
    input_gradient: Any,
    input_shape: Sequence[int],
    offsets: Sequence[int],
    sizes: Sequence[int],
    strides: Sequence[int],
    *,
    out: Any = None,
    device: str | None = None,
    stream: Any = None,
) -> Any:
    """DirectML SLICE_GRAD, SLICE1's backward: a zero-filled array of ``input_shape``
    holding each element of ``input_gradient`` where SLICE1 read it from.

    For every coordinate ``c`` of ``input_gradient``: ``output[start + strides * c]
    = input_gradient[c]``, with SLICE1's ``start`` (``offsets``, or ``offsets + sizes
    - 1`` where a stride is negative); every other element is 0.  The window follows
    SLICE1's rules against ``input_shape``, and ``input_gradient``'s shape must be the
    window's output sizes, ``1 + (sizes - 1) // abs(strides)``.

    The result has ``input_gradient``'s dtype and library.  ``out``, if given, must be
    a writeable array of ``input_shape`` and that dtype (any strides); it is zeroed,
    written and returned.  ``device`` and ``stream`` as for :func:`slice1`.
    """
    args = (input_gradient, input_shape, offsets, sizes, strides, out, device, stream)
    key, run = keys.window("slice_grad", *args)
    if run is not None:
        if out is None:
            r = run(input_gradient)
            if r is not None:
                return r
        elif run(input_gradient, out) is not None:  # None where out may meet the gradient
            return out
    call = prepare.slice_grad(*args, key)
    return call.target.slice_grad_call(call)


def nonzero_coordinates(
    input: Any,
    width: int | None = None,
    *,
    dtype: Any = np.uint32,
    max_count: int | None = None,
    out_count: Any = None,
    out_coordinates: Any = None,
    device: str | None = None,
    stream: Any = None,
) -> tuple[Any, Any]:
    """DirectML NONZERO_COORDINATES: the coordinates of the non-zero elements, in order.

    Returns ``(count, coordinates)``.  ``count`` is a 1-element array of
    ``dtype`` holding the number of non-zero elements.  ``coordinates`` has
    ``input.size`` rows and ``width`` columns (default ``input.ndim``); its first
    ``count`` rows are the coordinates of the non-zero elements in ascending
    (row-major) element order, right-aligned to the last ``width`` dimensions;
    later rows are undefined.  ``width`` may be anything from the effective rank
    (ndim less leading size-1 dimensions) to ``ndim``.

    Zero is +0.0 and -0.0; NaN and the infinities are non-zero.  ``dtype`` is
    uint32 (DirectML's), uint64 or int64; an input too large for uint32 is a
    ValueError that says so.  ``out_count`` (any 1-element shape) and
    ``out_coordinates`` (shape ``(R, width)``, ``(1, 1, R, width)`` or
    ``(1, 1, 1, R, width)`` with ``R >= input.size``) are written and returned
    if given.  On CUDA the count stays on the device and the call does not wait
    for the GPU.

    ``max_count`` bounds the coordinates matrix: it gets ``min(max_count,
    input.size)`` rows and holds the first ``min(count, max_count)`` coordinates,
    while ``count`` stays the true count, so an overflow shows in the count
    without a host synchronization.
    """
    f = "nonzero_coordinates"
    oc, ox = out_count, out_coordinates
    key, run = keys.nonzero(f, input, width, dtype, max_count, device, stream, oc, ox)
    if run is not None:  # None from it: the full path decides (see keys)
        r = run(input) if oc is None and ox is None else run(input, oc, ox)
        if r is not None:
            return r
    call = prepare.nonzero(
        input, width, dtype, max_count, out_count, out_coordinates, device, stream, key
    )
    return call.target.nonzero_call(call)


def argwhere(input: Any, *, device: str | None = None, stream: Any = None) -> Any:
    """The compact ``(count, ndim)`` int64 coordinates of the non-zero elements,
    a drop-in for ``numpy.argwhere`` (inputs of 1 to 8 dimensions), as an array
    of the input's library (PyTorch, CuPy, numba or NumPy).

    Lists, tuples and scalars are read as ``numpy.asarray`` reads them; a 0-d input
    gives shape ``(1, 0)`` or ``(0, 0)``, as NumPy's.  On the CPU an input
    of more than 65536 elements is counted first, so that no worst-case buffer is
    allocated.  On CUDA this reads the count back to the host, so it waits for the
    GPU once.
    """
    key, run = keys.nonzero("argwhere", input, None, np.int64, None, device, stream)
    if run is not None:  # a repeated CPU call (CPU runners only)
        r = run(input)
        if r is not None:  # (None: a freed tensor's call, refused by the full path)
            return r
    call = prepare.argwhere(input, device, stream, key)
    return call.target.argwhere_call(call)
