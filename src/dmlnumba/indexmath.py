"""Index math shared by every target: plain Python, no numba import.

Each function is a leaf (it calls none of the others), takes only scalars and
1-d integer arrays, and writes its results into buffers the caller passes in.
That keeps the module valid three ways: as ordinary Python (the unit tests call
it directly), compiled by ``numba.njit(inline="always")`` for the CPU kernels
(:mod:`dmlnumba.cpu.kernels`), and compiled by ``numba.cuda.jit(device=True)``
for the GPU kernels (:mod:`dmlnumba.gpu.indexmath`).

Conventions: ``shape``/``strides`` hold ``ndim`` entries; strides are in
elements (not bytes) and may be negative or zero; ``linear`` is an element's
position in row-major (last dimension fastest) order.
"""


def unravel(linear, shape, ndim, coords):
    """Write the row-major coordinates of element ``linear`` of ``shape`` into ``coords``."""
    for d in range(ndim - 1, 0, -1):
        n = shape[d]
        q = linear // n
        coords[d] = linear - q * n
        linear = q
    coords[0] = linear


def offset(coords, strides, ndim):
    """Element offset of ``coords``: sum of coordinate times stride."""
    off = 0
    for d in range(ndim):
        off += coords[d] * strides[d]
    return off


def row_start(r, shape, last, a_strides, b_strides):
    """Where row ``r`` starts in two layouts: ``(a, b, inner)``, the element offsets
    of its first element under ``a_strides`` and ``b_strides`` and its coordinate in
    dimension ``last - 1``.  Rows number the coordinates of dimensions
    ``0 .. last - 1`` in row-major order (``inner`` is ``r`` itself where ``last``
    is 1).  No coordinates buffer: a kernel keeps the three in registers."""
    a = 0
    b = 0
    inner = r
    for d in range(last - 1, 0, -1):
        n = shape[d]
        q = r // n
        c = r - q * n
        if d == last - 1:
            inner = c
        a += c * a_strides[d]
        b += c * b_strides[d]
        r = q
    if last > 0:
        a += r * a_strides[0]
        b += r * b_strides[0]
    return a, b, inner


def next_row(coords, shape, ndim):
    """Advance an odometer to the first element of the next row.

    Sets the last coordinate to 0 and adds one to the one before it, carrying
    into outer dimensions.  Returns False when it ran past the last row (the
    coordinates are then all 0).

    One exit, after the loop: numba cannot drop the reference counting of array
    arguments around an inlined call that returns from inside a loop, and would pay
    for it on every call.
    """
    coords[ndim - 1] = 0
    d = ndim - 2
    more = False
    while d >= 0:
        c = coords[d] + 1
        if c < shape[d]:
            coords[d] = c
            more = True
            d = -1
        else:
            coords[d] = 0
            d -= 1
    return more


def is_nonzero(bits, mask):
    """An element, read as raw bits, is non-zero where any bit of ``mask`` is set.

    The mask is all ones for integers and bool, and all but the sign bit for
    floats, so that both +0.0 and -0.0 are zero while NaN and infinities are not.
    """
    return (bits & mask) != 0


def write_coordinates(out, pos, col_stride, coords, ndim, width, last):
    """Write one coordinates row at ``out[pos]``, one column every ``col_stride``.

    The row holds the last ``width`` coordinates (right-aligned); the innermost
    one is ``last`` rather than ``coords[ndim - 1]``, so that a row loop can keep
    the odometer at the row's start.
    """
    first = ndim - width
    for k in range(width - 1):
        out[pos + k * col_stride] = coords[first + k]
    if width > 0:
        out[pos + (width - 1) * col_stride] = last


def block_bounds(block, block_size, total):
    """The range ``[lo, hi)`` of elements of block ``block``."""
    lo = block * block_size
    hi = lo + block_size
    if hi > total:
        hi = total
    return lo, hi


def advance(coords, shape, strides, ndim, k, off):
    """Move an odometer ``k`` elements forward in row-major order; return ``off``
    (an element offset) moved along with it.

    Divides only when a dimension wraps, once per wrapped dimension.  Moving past
    the last element leaves ``coords[0] >= shape[0]``; such positions must not be
    read.
    """
    d = ndim - 1
    c = coords[d] + k
    off += k * strides[d]
    n = shape[d]
    while c >= n and d > 0:
        q = c // n
        c -= q * n
        off -= q * n * strides[d]
        coords[d] = c
        d -= 1
        c = coords[d] + q
        off += q * strides[d]
        n = shape[d]
    coords[d] = c
    return off
