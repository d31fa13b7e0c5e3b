"""The shared index math (:mod:`dmlnumba.indexmath`) compiled for the CPU kernels:
``numba.njit(inline="always")``, so that each kernel inlines it."""

from .. import indexmath as _im
from .compiling import jit

_inline = jit(inline="always")
unravel = _inline(_im.unravel)
offset = _inline(_im.offset)
next_row = _inline(_im.next_row)
is_nonzero = _inline(_im.is_nonzero)
write_coordinates = _inline(_im.write_coordinates)
block_bounds = _inline(_im.block_bounds)
advance = _inline(_im.advance)
