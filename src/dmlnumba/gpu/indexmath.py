"""The shared index math (:mod:`dmlnumba.indexmath`) compiled for CUDA kernels:
``numba.cuda.jit(device=True)``, one device function each (the CPU kernels'
are :mod:`dmlnumba.cpu.indexmath`)."""

from .. import indexmath as _im
from .warp import device

unravel = device(_im.unravel)
offset = device(_im.offset)
row_start = device(_im.row_start)
is_nonzero = device(_im.is_nonzero)
advance = device(_im.advance)
