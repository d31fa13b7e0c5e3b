"""Validation and normalisation of the public API's arguments, in plain Python.

Nothing here imports numba, touches device memory or writes to an output: every
check of a call runs here, before any kernel is launched, so that an ``out=``
array is left untouched when a call fails.  Errors follow NumPy's conventions:
``TypeError`` for an argument of the wrong type, ``ValueError`` for a bad value,
and the message names the parameter, the dimension and the values.
"""

import collections.abc
import operator

import numpy as np

from .arrays import is_cuda_array, is_dask
from .caches import Bounded

MAX_DIMS = 8
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

#: DirectML's eleven tensor data types (SLICE1 and NONZERO_COORDINATES inputs).
DML_DTYPES = tuple(
    np.dtype(t)
    for t in (
        "float64",
        "float32",
        "float16",
        "int64",
        "int32",
        "int16",
        "int8",
        "uint64",
        "uint32",
        "uint16",
        "uint8",
    )
)
#: slice1 and nonzero take DirectML's dtypes and bool (slice1 copies its bytes, as uint8's).
SLICE_DTYPES = frozenset(DML_DTYPES + (np.dtype(np.bool_),))
NONZERO_DTYPES = SLICE_DTYPES
#: Coordinate/count types of nonzero_coordinates; uint32 is DirectML's.
COORD_DTYPES = frozenset(np.dtype(t) for t in ("uint32", "uint64", "int64"))
#: Largest element count whose coordinates and count fit each coordinate type.
COORD_LIMITS = {
    np.dtype(np.uint32): (1 << 32) - 1,
    np.dtype(np.uint64): INT64_MAX,
    np.dtype(np.int64): INT64_MAX,
}

_UINT_BY_SIZE = {
    1: np.dtype(np.uint8),
    2: np.dtype(np.uint16),
    4: np.dtype(np.uint32),
    8: np.dtype(np.uint64),
}


def _names(dtypes):
    return ", ".join(sorted(str(d) for d in dtypes))


def check_dtype(dtype, allowed, func, name="input"):
    """Raise TypeError unless ``dtype``, in either byte order, is in ``allowed``: the
    kernels read the bits, and a byte-swapped float's sign bit is found by
    :func:`nonzero_mask` (NumPy takes either byte order)."""
    if dtype not in allowed and (dtype.isnative or dtype.newbyteorder("=") not in allowed):
        raise TypeError(
            f"{func}(): {name} dtype {dtype} is not supported; supported dtypes: "
            f"{_names(allowed)} (either byte order)"
        )


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


def int_tuple(values, name, ndim, func):
    """``values`` as a tuple of ``ndim`` Python ints, each within int64 (see
    :func:`int_values`); anything but a sequence is a TypeError, a wrong length a
    ValueError."""
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
            f"{func}(): {name} has {len(values)} values but input has {ndim} dimensions"
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


def slice1_params(shape, offsets, sizes, strides, output_sizes):
    """Check SLICE1's parameters against an input ``shape``.

    Returns ``(starts, strides, out_shape)``: for each dimension the input index
    of output coordinate 0, the signed step, and the output's size.  Parameters
    that passed once are remembered (keyed by exact Python ints only), so that
    repeated calls with the same window skip the per-dimension checks.
    """
    f = "slice1"
    ndim = len(shape)
    check_ndim(ndim, f)
    offsets = int_tuple(offsets, "offsets", ndim, f)
    sizes = int_tuple(sizes, "sizes", ndim, f)
    strides = int_tuple(strides, "strides", ndim, f)
    if output_sizes is not None:
        output_sizes = int_tuple(output_sizes, "output_sizes", ndim, f)
    key = (tuple(shape), offsets, sizes, strides, output_sizes)
    return _checked.get_or_make(
        key, lambda: _slice1_check(shape, offsets, sizes, strides, output_sizes)
    )


def _slice1_check(shape, offsets, sizes, strides, output_sizes):
    f = "slice1"
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
            raise ValueError(
                f"{f}(): window out of bounds for dimension {d}: offsets[{d}] + sizes[{d}] = "
                f"{o} + {s} = {o + s} > input.shape[{d}] = {n}"
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


class _Addresses:
    """An ``__array_interface__`` over an address range that is never read."""

    def __init__(self, ptr, shape, strides, itemsize):
        self.__array_interface__ = {
            "shape": tuple(shape),
            "strides": tuple(strides),
            "typestr": f"|V{itemsize}",
            "data": (ptr, True),
            "version": 3,
        }


def shares_memory(a_ptr, a_shape, a_strides, a_itemsize, b_ptr, b_shape, b_strides, b_itemsize):
    """Whether two strided arrays, given by the address of element 0, shape, byte
    strides and item size, share a byte (exact: ``numpy.shares_memory`` on
    stand-in arrays over the same addresses, which only does arithmetic on them).
    Works for device addresses too."""
    if 0 in a_shape or 0 in b_shape:
        return False
    a = np.asarray(_Addresses(a_ptr, a_shape, a_strides, a_itemsize))
    b = np.asarray(_Addresses(b_ptr, b_shape, b_strides, b_itemsize))
    return bool(np.shares_memory(a, b))


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


def argwhere_input(x, f="argwhere"):
    """``x`` where dmlnumba reads it as an array, a list, tuple or scalar as
    ``numpy.asarray`` reads it (as ``numpy.argwhere`` does); a TypeError for anything
    else."""
    if isinstance(x, (list, tuple, np.generic, bool, int, float)):
        try:
            return np.asarray(x)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{f}(): input could not be read as an array: {e}") from None
    if (
        isinstance(x, np.ndarray)
        or is_dask(x)
        or is_cuda_array(x)
        or (hasattr(x, "__dlpack__") and not isinstance(x, type))
    ):
        return x
    raise TypeError(
        f"{f}(): input must be an array (NumPy, CuPy, numba, dask, or a PyTorch CPU or CUDA "
        f"tensor), a list, a tuple or a scalar, not {type(x).__name__}; convert it with "
        f"numpy.asarray(input) first"
    )


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


def coord_type(dtype, f="nonzero_coordinates"):
    """``dtype`` as one of :data:`COORD_DTYPES` (TypeError otherwise); PyTorch's
    dtypes name NumPy's (``torch.int64`` is int64)."""
    if dtype is None:  # np.dtype(None) is float64, which the caller did not name
        raise TypeError(
            f"{f}(): dtype=None is not a coordinate type; use one of {_names(COORD_DTYPES)}"
        )
    if type(dtype).__module__ == "torch":
        dtype = str(dtype).rpartition(".")[2]
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError):
        raise TypeError(f"{f}(): dtype {dtype!r} is not a NumPy dtype") from None
    if dt not in COORD_DTYPES:
        raise TypeError(f"{f}(): dtype {dt} is not supported; use one of {_names(COORD_DTYPES)}")
    return dt


def coord_dtype(dtype, size, f="nonzero_coordinates"):
    """:func:`coord_type`, able to count and index ``size`` elements (ValueError otherwise)."""
    dt = coord_type(dtype, f)
    if size > COORD_LIMITS[dt]:
        raise ValueError(
            f"{f}(): input has {size} elements, more than dtype {dt} can count and index "
            f"(at most {COORD_LIMITS[dt]}); pass dtype=numpy.uint64 or numpy.int64"
        )
    return dt


def _max_count_arg(value, dtype, f):
    value = _int_arg(value, "max_count", f)
    if not 0 <= value <= COORD_LIMITS[dtype]:
        raise ValueError(
            f"{f}(): max_count = {value} is out of range: it must be between 0 and "
            f"{COORD_LIMITS[dtype]} (what dtype {dtype} can count)"
        )
    return value


def max_count(value, size, dtype, f="nonzero_coordinates"):
    """The rows of the coordinates matrix: ``size`` (DirectML's worst case) for None,
    else ``value`` (a non-negative int that the coordinate type can index) where it
    is smaller: more rows than elements are never needed."""
    if value is None:
        return size
    return min(_max_count_arg(value, dtype, f), size)


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


def uint_of_size(itemsize):
    return _UINT_BY_SIZE[itemsize]


def nonzero_mask(dtype):
    """Bits that make an element non-zero, as the native unsigned integer of its size
    reads them: all of them, but the sign bit of a float (so that -0.0 is zero; NaN
    and the infinities are not), byte-swapped where ``dtype`` is (its sign bit is then
    in the other end's byte)."""
    bits = dtype.itemsize * 8
    full = (1 << bits) - 1
    if dtype.kind != "f":
        return full
    if dtype.isnative:
        return full >> 1
    return int.from_bytes((full >> 1).to_bytes(dtype.itemsize, "little"), "big")
