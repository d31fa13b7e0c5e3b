"""Translate a NumPy basic-slice index into SLICE1's parameters (plain Python)."""

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from .validation import check_ndim


def window(
    shape: Sequence[int], index: Any
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """SLICE1 parameters for a NumPy basic-slice index.

    ``index`` is what goes between the brackets of ``x[...]``: a slice, an
    Ellipsis, or a tuple of them (``numpy.s_[:, ::-1, 3:250:2]``).  Dimensions the
    index leaves out are taken whole.  Returns ``(offsets, sizes, strides,
    output_sizes)`` such that ``slice1(x, *window(x.shape, index))`` equals
    ``x[index]`` element for element.

    Integers (which drop a dimension), ``None``/``newaxis`` and arrays are
    TypeErrors: SLICE1 keeps the rank.  A selection with no elements in some
    dimension is a ValueError: SLICE1 windows are never empty.
    """
    try:
        shape = tuple(operator.index(n) for n in shape)
    except TypeError:
        raise TypeError(f"window(): shape must be a sequence of integers, not {shape!r}") from None
    ndim = len(shape)
    check_ndim(ndim, "window", "shape")
    if any(n < 0 or n > (1 << 63) - 1 for n in shape):
        raise ValueError(
            f"window(): shape {shape} has a size that is negative or does not fit in int64"
        )
    if not isinstance(index, tuple):
        index = (index,)
    n_ell = sum(1 for i in index if i is Ellipsis)
    if n_ell > 1:
        raise IndexError("window(): an index can only have a single ellipsis ('...')")
    for k, i in enumerate(index):
        if i is Ellipsis or isinstance(i, slice):
            continue
        if i is None:
            raise TypeError(f"window(): index[{k}] is None (newaxis); SLICE1 keeps the rank")
        if isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)):
            raise TypeError(
                f"window(): index[{k}] = {i} is an integer, which drops a dimension; SLICE1 keeps "
                f"the rank, so write {i}:{i + 1} (or -1: for -1) instead"
            )
        raise TypeError(f"window(): index[{k}] must be a slice or Ellipsis, not {type(i).__name__}")
    n_sl = len(index) - n_ell
    if n_sl > ndim:
        raise IndexError(
            f"window(): too many indices: shape has {ndim} dimensions but {n_sl} were indexed"
        )
    if n_ell:
        e = index.index(Ellipsis)
        index = index[:e] + (slice(None),) * (ndim - n_sl) + index[e + 1 :]
    else:
        index = index + (slice(None),) * (ndim - n_sl)
    offsets, sizes, strides, out = [], [], [], []
    for d, (sl, n) in enumerate(zip(index, shape)):
        try:
            start, stop, step = sl.indices(n)
        except ValueError:  # Python's "slice step cannot be zero"
            raise ValueError(f"window(): the slice {sl} of dimension {d} has step 0") from None
        except TypeError:
            raise TypeError(
                f"window(): the slice {sl} of dimension {d} has a start, stop or step that is "
                f"neither an integer nor None"
            ) from None
        length = max(0, (stop - start + step - (1 if step > 0 else -1)) // step)
        if length == 0:
            raise ValueError(
                f"window(): index {sl} selects no elements of dimension {d} (size {n}); SLICE1 "
                f"windows cannot be empty"
            )
        last = start + (length - 1) * step
        offsets.append(min(start, last))
        sizes.append(abs(last - start) + 1)
        strides.append(step)
        out.append(length)
    return tuple(offsets), tuple(sizes), tuple(strides), tuple(out)
