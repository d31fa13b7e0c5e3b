"""Validation and normalisation of the public API's arguments, in plain Python.

Nothing here imports numba, touches device memory or writes to an output: every
check of a call runs here, before any kernel is launched, so that an ``out=``
array is left untouched when a call fails.  Errors follow NumPy's conventions:
``TypeError`` for an argument of the wrong type, ``ValueError`` for a bad value,
and the message names the parameter, the dimension and the values.

This module checks the operators' parameters (offsets, sizes, strides, width,
max_count, the coordinates matrix's shape); the dtype checks are in
:mod:`dmlnumba.dtypes`, the checks of arrays (outputs, NumPy inputs) in
:mod:`dmlnumba.array_checks`, both importable from here too.
"""

import collections.abc
import operator

import numpy as np

from .array_checks import (  # noqa: F401  (importable from here)
    check_no_overlap,
    check_out,
    check_strides,
    host_array,
    self_overlaps,
)
from .caches import Bounded
from .dtypes import (  # noqa: F401  (importable from here)
    COORD_DTYPES,
    COORD_LIMITS,
    DML_DTYPES,
    INT64_MAX,
    INT64_MIN,
    NONZERO_DTYPES,
    SLICE_DTYPES,
    check_dtype,
    coord_dtype,
    coord_type,
    nonzero_mask,
)
from .layout import shares_memory, uint_of_size  # noqa: F401  (importable from here)

MAX_DIMS = 8

#: The most bytes an array may hold (NumPy's limit, its index type's largest value):
#: a result that would need more is refused by name, not by NumPy's allocator.
MAX_BYTES = INT64_MAX


def check_ndim(ndim, func, name="input"):
    if not 1 <= ndim <= MAX_DIMS:
        raise ValueError(
            f"{func}(): {name} has {ndim} dimensions; DirectML tensors have 1 to {MAX_DIMS}"
        )


def _is_sequence(values):
    """Whether ``values`` is read as a parameter's sequence of integers: a NumPy array
    (checked by :func:`int_values`) or an ordered sequence (not a string).  A dict
    would be read by its keys, a set in hash order, an iterator only once."""
    if isinstance(values, np.ndarray):
        return True
    return not isinstance(values, (str, bytes)) and isinstance(
        values, (tuple, list, range, collections.abc.Sequence)
    )


def int_values(values, name, func):
    """The elements of ``values`` (an ordered sequence or a 1-d array of integers,
    Python or NumPy) as a tuple of Python ints, each within int64: bools, floats
    and other types are TypeErrors, an int64 overflow a ValueError.  Every
    ``__len__``, ``__iter__`` and ``__index__`` of the caller's objects runs here,
    once."""
    if type(values) is tuple:  # the common case, checked fast
        for v in values:
            if type(v) is not int or v < INT64_MIN or v > INT64_MAX:
                break
        else:
            return values
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise ValueError(f"{func}(): {name} must be one-dimensional, got shape {values.shape}")
        if values.dtype.kind not in "iu":
            raise TypeError(f"{func}(): {name} must hold integers, not {values.dtype}")
        values = values.tolist()
    out = []
    for i, v in enumerate(values):
        if type(v) is not int:
            if isinstance(v, (bool, np.bool_)):
                raise TypeError(f"{func}(): {name}[{i}] must be an integer, not bool")
            try:
                v = operator.index(v)
            except TypeError:
                raise TypeError(
                    f"{func}(): {name}[{i}] must be an integer, not {type(v).__name__}"
                ) from None
        if not INT64_MIN <= v <= INT64_MAX:
            raise ValueError(f"{func}(): {name}[{i}] = {v} does not fit in int64")
        out.append(v)
    return tuple(out)


def int_tuple(values, name, ndim, func, of="input"):
    """``values`` as a tuple of ``ndim`` Python ints, each within int64 (see
    :func:`int_values`); anything but a sequence is a TypeError, a wrong length a
    ValueError naming ``of``, the array whose rank it must have."""
    if type(values) is tuple and len(values) == ndim:  # the common case, checked fast
        for v in values:
            if type(v) is not int or v < INT64_MIN or v > INT64_MAX:
                break
        else:
            return values
    if type(values) is not tuple and not _is_sequence(values):
        raise TypeError(
            f"{func}(): {name} must be a sequence of {ndim} integers, not {type(values).__name__}"
        )
    values = int_values(values, name, func)
    if len(values) != ndim:
        raise ValueError(
            f"{func}(): {name} has {len(values)} values but {of} has {ndim} dimensions"
        )
    return values


def slice1_args(offsets, sizes, strides, output_sizes, f="slice1"):
    """SLICE1's parameters read once, before anything reads the input's layout: each
    sequence as a tuple of Python ints (:func:`int_values`), so that a parameter whose
    ``__index__``, ``__len__`` or ``__iter__`` changes the input (reshapes, resizes
    it) has done so before the window is checked against the input's shape.  A
    parameter that is no sequence is returned as it is, for :func:`slice1_params`
    to refuse with the input's rank in the message."""
    if (
        type(offsets) is tuple
        and type(sizes) is tuple
        and type(strides) is tuple
        and (output_sizes is None or type(output_sizes) is tuple)
    ):
        for v in offsets + sizes + strides + (output_sizes or ()):
            if type(v) is not int:
                break
        else:  # Python ints in tuples (the common case): nothing of the caller's to run
            return offsets, sizes, strides, output_sizes
    return tuple(
        p if p is None or not _is_sequence(p) else int_values(p, name, f)
        for p, name in (
            (offsets, "offsets"),
            (sizes, "sizes"),
            (strides, "strides"),
            (output_sizes, "output_sizes"),
        )
    )


_checked = Bounded()


def slice1_params(shape, offsets, sizes, strides, output_sizes, f="slice1", of="input"):
    """Check SLICE1's parameters against an input ``shape`` (``of``: its name in the
    messages; ``f``: the function's).

    Returns ``(starts, strides, out_shape)``: for each dimension the input index
    of output coordinate 0, the signed step, and the output's size.  Parameters
    that passed once are remembered (keyed by exact Python ints only), so that
    repeated calls with the same window skip the per-dimension checks.
    """
    ndim = len(shape)
    check_ndim(ndim, f, of)
    offsets = int_tuple(offsets, "offsets", ndim, f, of)
    sizes = int_tuple(sizes, "sizes", ndim, f, of)
    strides = int_tuple(strides, "strides", ndim, f, of)
    if output_sizes is not None:
        output_sizes = int_tuple(output_sizes, "output_sizes", ndim, f, of)
    key = (tuple(shape), offsets, sizes, strides, output_sizes, f, of)
    return _checked.get_or_make(
        key, lambda: _slice1_check(shape, offsets, sizes, strides, output_sizes, f, of)
    )


def _slice1_check(shape, offsets, sizes, strides, output_sizes, f="slice1", of="input"):
    ndim = len(shape)
    starts = []
    out_shape = []
    for d in range(ndim):
        o, s, t, n = offsets[d], sizes[d], strides[d], shape[d]
        if t == 0:
            raise ValueError(f"{f}(): strides[{d}] is 0; strides must be non-zero")
        if o < 0:
            raise ValueError(f"{f}(): offsets[{d}] = {o} is negative")
        if s < 1:
            raise ValueError(
                f"{f}(): sizes[{d}] = {s}; the window must span at least 1 element in every "
                f"dimension"
            )
        if o + s > n:
            shape_d = f"{of}.shape[{d}]" if of == "input" else f"{of}[{d}]"
            raise ValueError(
                f"{f}(): window out of bounds for dimension {d}: offsets[{d}] + sizes[{d}] = "
                f"{o} + {s} = {o + s} > {shape_d} = {n}"
            )
        most = 1 + (s - 1) // abs(t)
        if output_sizes is None:
            m = most
        else:
            m = output_sizes[d]
            if not 1 <= m <= most:
                raise ValueError(
                    f"{f}(): output_sizes[{d}] = {m} is out of range for dimension {d}: it must "
                    f"be between 1 and 1 + (sizes[{d}] - 1) // abs(strides[{d}]) = {most}"
                )
        starts.append(o if t > 0 else o + s - 1)
        out_shape.append(m)
    return tuple(starts), strides, tuple(out_shape)


def shape_arg(values, name, f):
    """A shape argument (``input_shape``) read once: a sequence of non-negative Python
    ints (see :func:`int_values`), of 1 to 8 of them."""
    if type(values) is not tuple and not _is_sequence(values):
        raise TypeError(
            f"{f}(): {name} must be a sequence of integers, not {type(values).__name__}"
        )
    shape = int_values(values, name, f)
    check_ndim(len(shape), f, name)
    size = 1
    for d, n in enumerate(shape):
        if n < 0:
            raise ValueError(f"{f}(): {name}[{d}] = {n} is negative")
        size *= n
    if size * 8 > MAX_BYTES:  # (8: the widest item; NumPy counts an array's bytes)
        raise ValueError(
            f"{f}(): {name} = {shape} has {size} elements, more than an array can hold"
        )
    return shape


def slice_grad_params(input_shape, grad_shape, offsets, sizes, strides, f="slice_grad"):
    """SLICE_GRAD's parameters checked: the window against ``input_shape`` as
    :func:`slice1_params` checks it against an input, then the gradient's shape
    against the window's output sizes.  Returns ``(starts, strides)``."""
    starts, steps, want = slice1_params(
        input_shape, offsets, sizes, strides, None, f, "input_shape"
    )
    if tuple(grad_shape) != want:
        raise ValueError(
            f"{f}(): input_gradient has shape {tuple(grad_shape)}; the window's output sizes "
            f"1 + (sizes - 1) // abs(strides) are {want}"
        )
    return starts, steps


def effective_rank(shape):
    """Number of dimensions after leading size-1 dimensions are dropped."""
    r = len(shape)
    for n in shape:
        if n != 1:
            break
        r -= 1
    return r


def _int_arg(value, name, f):
    """A scalar argument as a Python int: any integer but bool (TypeError otherwise)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{f}(): {name} must be an integer, not bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{f}(): {name} must be an integer, not {type(value).__name__}") from None


def nonzero_width(shape, width, f="nonzero_coordinates"):
    ndim = len(shape)
    lo = effective_rank(shape)
    if width is None:
        return ndim
    width = _int_arg(width, "width", f)
    if not lo <= width <= ndim:
        raise ValueError(
            f"{f}(): width = {width} is out of range for an input of shape {tuple(shape)}: it must "
            f"be between the effective rank {lo} and the number of dimensions {ndim}"
        )
    return width


def _max_count_arg(value, dtype, f):
    value = _int_arg(value, "max_count", f)
    if not 0 <= value <= COORD_LIMITS[dtype]:
        raise ValueError(
            f"{f}(): max_count = {value} is out of range: it must be between 0 and "
            f"{COORD_LIMITS[dtype]} (what dtype {dtype} can count)"
        )
    return value


def max_count(value, size, dtype, f="nonzero_coordinates", width=1):
    """The rows of the coordinates matrix: ``size`` (DirectML's worst case) for None,
    else ``value`` (a non-negative int that the coordinate type can index) where it
    is smaller: more rows than elements are never needed.  A matrix of these rows and
    ``width`` columns must fit in an array (a broadcast input may have more elements
    than memory): otherwise a ValueError that names max_count."""
    rows = size if value is None else min(_max_count_arg(value, dtype, f), size)
    if rows * width * dtype.itemsize > MAX_BYTES:
        raise ValueError(
            f"{f}(): the coordinates of {rows} rows and {width} columns of {dtype} would be "
            f"more than an array can hold; pass a smaller max_count"
        )
    return rows


def nonzero_args(width, dtype, max_count, f="nonzero_coordinates"):
    """``(width, dtype, max_count)`` read once, before anything reads the input's
    layout (see :func:`slice1_args`): the ints as Python ints (or None), the dtype
    as a NumPy dtype.  What depends on the input is checked later
    (:func:`nonzero_width`, :func:`coord_dtype`, :func:`max_count`)."""
    if width is not None:
        width = _int_arg(width, "width", f)
    dt = coord_type(dtype, f)
    if max_count is not None:
        max_count = _max_count_arg(max_count, dt, f)
    return width, dt, max_count


def coordinates_matrix_shape(
    out_shape, rows, width, name="out_coordinates", f="nonzero_coordinates"
):
    """Where ``out_coordinates`` has shape (R, N), (1, 1, R, N) or (1, 1, 1, R, N) with
    R >= rows and N == width, return R; else raise ValueError."""
    out_shape = tuple(out_shape)
    lead = out_shape[:-2]
    if len(out_shape) not in (2, 4, 5) or any(n != 1 for n in lead):
        raise ValueError(
            f"{f}(): {name} has shape {out_shape}; expected (rows, {width}), (1, 1, rows, {width}) "
            f"or (1, 1, 1, rows, {width}) with rows >= {rows}"
        )
    r, n = out_shape[-2:]
    if n != width:
        raise ValueError(f"{f}(): {name} has {n} columns, expected width = {width}")
    if r < rows:
        raise ValueError(
            f"{f}(): {name} has {r} rows, too few for an input of {rows} elements (it needs "
            f"at least {rows})"
        )
    return r
