"""Checks of the arrays a call is given (outputs' dtype, shape, strides and
self-overlap; NumPy inputs as the kernels see them; argwhere's input).  Plain Python
and NumPy (see :mod:`dmlnumba.validation`)."""

import numpy as np


def check_out(out, dtype, shape, name, func):
    """An output array (described by its target) must be of ``dtype`` and ``shape``."""
    if out.dtype != dtype:
        raise TypeError(f"{func}(): {name} has dtype {out.dtype}, expected {dtype}")
    if shape is not None and tuple(out.shape) != tuple(shape):
        raise ValueError(f"{func}(): {name} has shape {tuple(out.shape)}, expected {tuple(shape)}")
    check_strides(out, name, func)


def check_strides(a, name, func):
    """Strides must be multiples of the item size (views of the elements).  A stride
    of a dimension of size 1 is never used and may be anything.  A contiguous
    array's other strides are multiples of the item size by construction."""
    flags = getattr(a, "flags", None)
    if flags is not None and (flags.c_contiguous or flags.f_contiguous):
        return
    isz = a.dtype.itemsize
    for d, (s, n) in enumerate(zip(a.strides, a.shape)):
        if s % isz and n > 1:
            raise ValueError(
                f"{func}(): {name}.strides[{d}] = {s} is not a multiple of the item size {isz}"
            )


def check_no_overlap(out, name, func):
    """An output may not hold one memory location twice (zero or interleaved strides
    that collide); see :func:`self_overlaps`."""
    if self_overlaps(out.shape, out.strides, out.itemsize):
        raise ValueError(
            f"{func}(): {name} has overlapping memory (strides {tuple(out.strides)}, shape "
            f"{tuple(out.shape)}); it must be able to hold every element separately"
        )


def self_overlaps(shape, strides, itemsize):
    """Whether two elements of an array of this layout share a byte (exact).

    The quick test: with dimensions sorted by stride, each stride reaches past
    everything the smaller ones span (true of every C, F, permuted or sliced
    layout).  Where it fails, the answer is decided exactly: a zero stride, or
    more bytes of elements than bytes spanned, overlaps for certain; otherwise
    (an interleaved layout) the element offsets are sorted and compared, which
    takes memory proportional to the array, never more than the bytes it spans.
    """
    dims = sorted((abs(s), n) for s, n in zip(strides, shape) if n > 1)
    if any(n == 0 for n in shape) or not dims:
        return False
    reach = itemsize
    for s, n in dims:
        if s < reach:
            break
        reach = s * (n - 1) + reach
    else:
        return False
    if dims[0][0] == 0:
        return True
    span = sum(s * (n - 1) for s, n in dims) + itemsize
    size = 1
    for _, n in dims:
        size *= n
    if size * itemsize > span:
        return True
    offs = np.zeros(1, np.int64)
    for s, n in dims:
        offs = (offs[:, None] + np.arange(n, dtype=np.int64) * s).reshape(-1)
    offs.sort()
    return bool((np.diff(offs) < itemsize).any())


def host_array(a, name, func):
    """A NumPy input or output as the plain ndarray the kernels see.

    ndarray subclasses (matrix, memmap, recarray, ...) are read through their
    ndarray data, as ``numpy.asarray`` reads them (a matrix stays 2-d; nothing is
    copied); a masked array is refused, since its mask would be ignored."""
    if type(a) is np.ndarray:
        return a
    if isinstance(a, np.ma.MaskedArray):
        raise TypeError(
            f"{func}(): {name} is a numpy.ma.MaskedArray, whose mask dmlnumba would ignore; "
            f"pass {name}.filled(0) (or {name}.data) instead"
        )
    return np.ndarray.view(a, np.ndarray)
