"""The dtypes the operators take and give, and their checks: DirectML's tensor types,
the coordinate types of nonzero_coordinates, and the bits that make an element
non-zero.  Plain Python and NumPy (see :mod:`dmlnumba.validation`)."""

import numpy as np

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


def names(dtypes):
    return ", ".join(sorted(str(d) for d in dtypes))


#: float16, the dtype that bfloat16 arrays are read as (the same zeros, bytes and NaN rule).
FLOAT16 = np.dtype(np.float16)


def is_bfloat16(dtype):
    """Whether a NumPy dtype is bfloat16 (ml_dtypes', which JAX's arrays and ONNX's
    tensors hold; NumPy has none of its own).  Its bytes are always native: a
    byte-swapped one is a plain ``V2``.  Its kind is ``V``, asked first: NumPy works
    out a dtype's name in Python, 40 times as long."""
    return isinstance(dtype, np.dtype) and dtype.kind == "V" and dtype.name == "bfloat16"


def check_dtype(dtype, allowed, func, name="input"):
    """Raise TypeError unless ``dtype``, in either byte order, is in ``allowed``: the
    kernels read the bits, and a byte-swapped float's sign bit is found by
    :func:`nonzero_mask` (NumPy takes either byte order).  bfloat16 passes: every
    call reads it as float16 (whose zero bits and copy are the same), and only the
    dask adapters, whose blocks are such calls, ask about it here."""
    if dtype not in allowed and (dtype.isnative or dtype.newbyteorder("=") not in allowed):
        if is_bfloat16(dtype):
            return
        raise TypeError(
            f"{func}(): {name} dtype {dtype} is not supported; supported dtypes: "
            f"{names(allowed)} (either byte order), bfloat16"
        )


def coord_type(dtype, f="nonzero_coordinates"):
    """``dtype`` as one of :data:`COORD_DTYPES` (TypeError otherwise); PyTorch's
    dtypes name NumPy's (``torch.int64`` is int64)."""
    if dtype is None:  # np.dtype(None) is float64, which the caller did not name
        raise TypeError(
            f"{f}(): dtype=None is not a coordinate type; use one of {names(COORD_DTYPES)}"
        )
    if type(dtype).__module__ == "torch":
        dtype = str(dtype).rpartition(".")[2]
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError):
        raise TypeError(f"{f}(): dtype {dtype!r} is not a NumPy dtype") from None
    if dt not in COORD_DTYPES:
        raise TypeError(f"{f}(): dtype {dt} is not supported; use one of {names(COORD_DTYPES)}")
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


def nonzero_mask(dtype):
    """Bits that make an element non-zero, as the native unsigned integer of its size
    reads them: all of them, but the sign bit of a float (so that -0.0 is zero; NaN
    and the infinities are not), bfloat16's too (a kernel that reads one as it is:
    the dask adapters' NumPy blocks), byte-swapped where ``dtype`` is (its sign bit
    is then in the other end's byte)."""
    bits = dtype.itemsize * 8
    full = (1 << bits) - 1
    if dtype.kind != "f" and not is_bfloat16(dtype):
        return full
    if dtype.isnative:
        return full >> 1
    return int.from_bytes((full >> 1).to_bytes(dtype.itemsize, "little"), "big")
