"""Memory-layout arithmetic on the host, in plain Python (no numba, no device).

Kernels never see an N-d array.  Every array, whatever its strides (negative,
zero, permuted), is passed as a flat 1-d view of unsigned integers of its item
size spanning all of its elements, plus the element offset of its first
element and its strides in elements.  One compiled kernel then serves every
rank, layout and dtype of a given bit width.
"""

import functools

import numpy as np


def extent(shape, strides, itemsize):
    """For byte ``strides``: ``(low, span, base, elem_strides)``.

    ``low`` is the byte offset (<= 0) of the lowest-addressed element relative
    to element 0, ``span`` the number of items from the lowest to the highest
    addressed element, ``base`` the item index of element 0 within that span.
    Requires every dimension to be non-empty and strides to be multiples of
    ``itemsize``.
    """
    low = 0
    high = 0
    es = []
    for n, s in zip(shape, strides):
        if s < 0:
            low += (n - 1) * s
        else:
            high += (n - 1) * s
        es.append(s // itemsize)
    return low, (high - low) // itemsize + 1, -low // itemsize, tuple(es)


@functools.lru_cache(maxsize=1024)
def c_strides(shape):
    """Row-major element strides of ``shape`` (a tuple)."""
    out = [0] * len(shape)
    acc = 1
    for d in range(len(shape) - 1, -1, -1):
        out[d] = acc
        acc *= shape[d]
    return tuple(out)


def slice_geometry(out_shape, starts, steps, src_strides, dst_strides):
    """See :func:`_slice_geometry`; results are cached (the array is read-only)."""
    return _cached_geometry(
        tuple(out_shape), tuple(starts), tuple(steps), tuple(src_strides), tuple(dst_strides)
    )


@functools.lru_cache(maxsize=4096)
def _cached_geometry(out_shape, starts, steps, src_strides, dst_strides):
    geom, off = _slice_geometry(out_shape, starts, steps, src_strides, dst_strides)
    geom.flags.writeable = False
    return geom, off


def _slice_geometry(out_shape, starts, steps, src_strides, dst_strides):
    """Reduce a strided copy to its fewest dimensions.

    Output coordinate ``c`` reads source element ``sum((start + step*c) * src_stride)``
    and writes destination element ``sum(c * dst_stride)``.  Returns
    ``(geom, src_off)``: ``geom`` an int64 array of shape (3, k) holding sizes,
    source strides and destination strides of k >= 1 dimensions, and the source
    offset of output element 0.  Size-1 dimensions are dropped, dimensions are
    ordered by decreasing destination stride (so that the destination is walked
    in memory order), and neighbours that are contiguous in both arrays merge.
    """
    src_off = 0
    dims = []
    for n, a, t, s, w in zip(out_shape, starts, steps, src_strides, dst_strides):
        src_off += a * s
        if n != 1:
            dims.append((n, t * s, w))
    if not dims:
        return np.array([[1], [0], [0]], np.int64), src_off
    for i in range(1, len(dims)):
        if abs(dims[i][2]) > abs(dims[i - 1][2]):
            dims.sort(key=lambda t: -abs(t[2]))
            break
    merged = [dims[-1]]
    for n, s, w in reversed(dims[:-1]):
        n0, s0, w0 = merged[-1]
        if s == s0 * n0 and w == w0 * n0:
            merged[-1] = (n * n0, s0, w0)
        else:
            merged.append((n, s, w))
    merged.reverse()
    return np.array(merged, np.int64).T.copy(), src_off


def divisor(n):
    """``(magic, shift)`` for dividing any 64-bit unsigned ``e`` by ``n``
    (``1 <= n <= 2**64``) with a multiply, as the CUDA nonzero kernel does
    (Granlund and Montgomery, "Division by invariant integers using
    multiplication", 1994, figure 4.1); :func:`divide` is the arithmetic.
    ``shift`` is ``ceil(log2(n))``; ``magic`` is returned as the signed 64-bit
    integer with the same bits (a parameter block holds int64)."""
    shift = (n - 1).bit_length()
    magic = ((1 << 64) * ((1 << shift) - n)) // n + 1
    if magic >= 1 << 63:
        magic -= 1 << 64
    return magic, shift


def divisor32(n):
    """``(magic, shift)`` for dividing any ``e`` below 2**31 by ``n`` (``1 <= n <=
    2**31``) in 32-bit words, :func:`divide32` the arithmetic: ``magic`` is
    ``ceil(2**(31 + shift) / n)``, below 2**32, with ``shift = ceil(log2 n)``; then
    ``magic * n - 2**(31 + shift) < n <= 2**shift``, the bound under which
    ``e * magic >> (31 + shift)`` is ``e // n`` for every 31-bit ``e``
    (Granlund and Montgomery, 1994)."""
    shift = (n - 1).bit_length()
    return ((1 << (31 + shift)) + n - 1) // n, shift


def divide32(e, magic, shift):
    """``e // n`` from :func:`divisor32`'s ``(magic, shift)``, step for step as the
    kernel's 32-bit write pass computes it: the high word of ``2e * magic`` (``2e``
    fits 32 bits), shifted (every intermediate below 2**32)."""
    return (((2 * e) * magic) >> 32) >> shift


def divide(e, magic, shift):
    """``e // n`` from :func:`divisor`'s ``(magic, shift)`` of ``n``, in plain Python,
    step for step as the kernel computes it (``nonzero_kernel``'s ``divide``)::

        t = (e * magic) >> 64          # the high word of the 128-bit product
        q = (t + ((e - t) >> s1)) >> s2

    with ``s1 = min(shift, 1)`` and ``s2 = max(shift - 1, 0)``."""
    t = (e * (magic & ((1 << 64) - 1))) >> 64
    s1 = 1 if shift > 0 else 0
    s2 = shift - 1 if shift > 0 else 0
    return (t + ((e - t) >> s1)) >> s2


_UINT_BY_SIZE = {n: np.dtype(f"u{n}") for n in (1, 2, 4, 8)}


def uint_of_size(itemsize):
    """The unsigned integer dtype of ``itemsize`` bytes: the element type of the flat
    views the kernels see."""
    return _UINT_BY_SIZE[itemsize]


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


def scatter_window(starts, steps, shape):
    """SLICE_GRAD's writes as a SLICE1 copy into a view of the output: ``(lows,
    spacing, read_starts, read_steps)``.  The window's elements of the output, for a
    gradient of ``shape`` whose element ``c`` goes to ``starts + steps * c``, are the
    view from ``lows`` with ``spacing`` (``abs(steps)``) elements between them, in
    ascending order; the gradient is read into it from ``read_starts`` by
    ``read_steps`` (its last element first along a negative step)."""
    lows = tuple(s + t * (n - 1) if t < 0 else s for s, t, n in zip(starts, steps, shape))
    spacing = tuple(abs(t) for t in steps)
    read_starts = tuple(n - 1 if t < 0 else 0 for t, n in zip(steps, shape))
    read_steps = tuple(-1 if t < 0 else 1 for t in steps)
    return lows, spacing, read_starts, read_steps


def complement_boxes(shape, lows, spacing, counts):
    """The elements of an array of ``shape`` outside a window (per dimension ``counts``
    indices from ``lows``, ``spacing`` apart) as disjoint boxes ``(lows, spacing,
    sizes)``: for each dimension ``d``, the elements inside the window in the
    dimensions before ``d`` and outside it in ``d`` (before the window, after it, and
    each residue between its indices), any index in the dimensions after ``d``."""
    boxes = []
    ndim = len(shape)
    for d in range(ndim):
        low, k, n, size = lows[d], spacing[d], counts[d], shape[d]
        high = low + (n - 1) * k
        parts = [(0, 1, low), (high + 1, 1, size - high - 1)]
        parts += [(low + r, k, n - 1) for r in range(1, k)]
        for lo, step, m in parts:
            if m > 0:
                boxes.append(
                    (
                        tuple(lows[:d]) + (lo,) + (0,) * (ndim - d - 1),
                        tuple(spacing[:d]) + (step,) + (1,) * (ndim - d - 1),
                        tuple(counts[:d]) + (m,) + tuple(shape[d + 1 :]),
                    )
                )
    return boxes
