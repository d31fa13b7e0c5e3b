"""The kinds of rows the CPU slice kernel compiles a chunk copy for, one loop nest
each, and the kind of a call's copy: decided once, on the host, so that a first call
compiles its own kind's loop nest alone (docs/PERFORMANCE.md, "Startup and compile
time").  Pure Python: no numba."""

from ..params import MAXD

#: A cache line, in bytes.
LINE = 64
#: Rows copied together where a transposed input puts each row's elements on lines of
#: their own and the next rows' elements on the same lines.
TILE = 8

#: The kinds (:func:`chunk_kind`): contiguous rows into contiguous rows (``memcpy`` or
#: constant strides), reversed ones, 1-byte items by a constant step of 2, 3 or 4
#: (vectorized, faster than the scalar loop; a runtime-stride gather runs scalar, which
#: beats a vector gather for items of 2 bytes and more), transposed rows (``TILE`` rows
#: at a time), every other step into contiguous rows (steps, broadcast sources), and
#: outputs with gaps or reversed rows (``out=`` arrays).
KINDS = ("plain", "reversed", "gather2", "gather3", "gather4", "tiles", "strided", "general")


def chunk_kind(geom, itemsize):
    """The kind of rows (:data:`KINDS`) of the copy of ``geom``
    (:func:`~dmlnumba.layout.slice_geometry`'s sizes, source and destination strides,
    in elements) of ``itemsize``-byte items: the one loop nest the copy runs.  Raises
    ValueError for more than ``MAXD`` dimensions, which the kernel's odometer has no
    room for (the public functions allow DirectML's 8, which is ``MAXD``)."""
    ndim = geom.shape[1]
    if ndim > MAXD:
        raise ValueError(f"slice1(): a copy of {ndim} dimensions; at most {MAXD} are supported")
    row, ss, ds = int(geom[0, -1]), int(geom[1, -1]), int(geom[2, -1])
    if ds != 1:
        return "general"
    if ss == 1:
        return "plain"
    if ss == -1:
        return "reversed"
    if itemsize == 1 and 2 <= ss <= 4:
        return f"gather{ss}"
    line = LINE // itemsize
    rs = abs(int(geom[1, -2])) if ndim > 1 else 0
    nr = int(geom[0, -2]) if ndim > 1 else 1
    if abs(ss) >= line and rs < line and row >= TILE and nr >= TILE:
        return "tiles"
    return "strided"
