"""The CPU target: NumPy arrays in, flat views to the numba kernels, results out.

Arguments arrive validated (see :mod:`dmlnumba.api`); this module only lays
arrays out for the kernels and launches them.  It imports numba's CPU kernels
on first use, so ``import dmlnumba`` stays light.
"""

import functools

import numpy as np

from . import config
from .layout import c_strides, extent, slice_geometry
from .validation import nonzero_mask, uint_of_size

name = "cpu"
_kernels = None
_masks = {}


def kernels():
    global _kernels
    if _kernels is None:
        from . import kernels_cpu
        _kernels = kernels_cpu
    return _kernels


def describe(a, name, func):
    if type(a) is not np.ndarray and not isinstance(a, np.ndarray):
        raise TypeError(f"{func}(): {name} must be an array, not {type(a).__name__}")
    return a


def is_writeable(a):
    return a.flags.writeable


def empty(shape, dtype, stream=None, like=None):
    return np.empty(shape, dtype)


def read_count(count, stream=None):
    return int(count.reshape(-1)[0])


def copy(a, stream=None):
    return a.copy()


def flat(a, writeable):
    """``(view, base, strides)``: a flat unsigned view spanning all elements of the
    non-empty array ``a``, the index of element 0 in it, and element strides.
    Input views are marked read-only so that one compiled type serves all inputs."""
    u = uint_of_size(a.itemsize)
    if a.flags.c_contiguous:
        v = a.reshape(-1)
        if v.dtype != u:
            v = v.view(u)
        es = c_strides(a.shape)
        base = 0
    else:
        low, span, base, es = extent(a.shape, a.strides, a.itemsize)
        if low:
            a = a[tuple(slice(None, None, -1) if s < 0 else slice(None) for s in a.strides)]
        v = np.lib.stride_tricks.as_strided(a.view(u), shape=(span,), strides=(a.itemsize,))
    if not writeable:
        v.flags.writeable = False
    return v, base, es


def _reader(x):
    """A function that gives the read-only flat view (:func:`flat`) of an input
    laid out like ``x``; for C order, the quick way."""
    if x.flags.c_contiguous:
        u = uint_of_size(x.itemsize)

        def read(x):
            v = x.ravel().view(u)
            v.setflags(write=False)
            return v
        return read
    return lambda x: flat(x, False)[0]


def slice1_runner(x, starts, steps, out_shape):
    """A function that runs this validated slice1 call (into a new output) on any
    input laid out like ``x`` (same dtype, shape and strides), with the layout
    work done once.  :mod:`dmlnumba.api` keeps these for repeated calls."""
    dtype = x.dtype
    u = uint_of_size(dtype.itemsize)
    size = 1
    for n in out_shape:
        size *= n
    if size == 0:
        return lambda x: np.empty(out_shape, dtype)
    _, sbase, sstr = flat(x, False)
    geom, off = slice_geometry(out_shape, starts, steps, sstr, c_strides(tuple(out_shape)))
    base = sbase + off
    copy = kernels().slice_copy
    read = _reader(x)

    def run(x):
        out = np.empty(out_shape, dtype)
        copy(read(x), base, out.ravel().view(u), 0, geom, config.CPU_SLICE_CHUNK,
             size >= config.CPU_PARALLEL_MIN)
        return out
    return run


def slice1(x, starts, steps, out, stream=None, fresh=False):
    """``fresh``: ``out`` was just allocated, so it cannot overlap the input."""
    if not fresh and np.may_share_memory(x, out):
        tmp = np.empty(out.shape, out.dtype)
        slice1(x, starts, steps, tmp)
        out[...] = tmp
        return
    src, sbase, sstr = flat(x, False)
    dst, dbase, dstr = flat(out, True)
    geom, off = slice_geometry(out.shape, starts, steps, sstr, dstr)
    kernels().slice_copy(src, sbase + off, dst, dbase, geom, config.CPU_SLICE_CHUNK,
                         out.size >= config.CPU_PARALLEL_MIN)


def _mask(dtype):
    """:func:`nonzero_mask` as a scalar of the kernels' unsigned type for ``dtype``."""
    m = _masks.get(dtype)
    if m is None:
        m = _masks[dtype] = uint_of_size(dtype.itemsize).type(nonzero_mask(dtype))
    return m


@functools.lru_cache(maxsize=1024)
def _nonzero_geometry(shape, strides):
    g = np.array([shape, strides], np.int64)
    g.flags.writeable = False
    return g


def nonzero_runner(x, width, dtype):
    """Like :func:`slice1_runner`, for nonzero_coordinates into new outputs of
    ``dtype``: the function returns ``(count, coordinates)``."""
    n = x.size
    u = uint_of_size(dtype.itemsize)
    shape = (n, width)
    if n == 0:
        return lambda x: (np.zeros(1, dtype), np.empty(shape, dtype))
    _, sbase, sstr = flat(x, False)
    mask = _mask(x.dtype)
    geom = _nonzero_geometry(x.shape, sstr)
    contiguous = bool(x.flags.c_contiguous)
    view = u != dtype
    run_kernel = kernels().nonzero
    read = _reader(x)

    def run(x):
        cnt = np.empty(1, u)
        crd = np.empty(n * width, u)
        run_kernel(read(x), sbase, mask, geom, config.CPU_NONZERO_BLOCK, crd, 0, width, 1,
                   width, cnt, 0, n >= config.CPU_PARALLEL_MIN, contiguous)
        crd = crd.reshape(shape)
        if view:
            return cnt.view(dtype), crd.view(dtype)
        return cnt, crd
    return run


def nonzero(x, width, count, coords, stream=None):
    cnt, cbase, _ = flat(count, True)
    if x.size == 0:
        cnt[cbase] = 0
        return
    src, sbase, sstr = flat(x, False)
    if width:
        out, obase, ostr = flat(coords, True)
        rs, cs = ostr[-2], ostr[-1]
    else:
        out, obase, rs, cs = cnt, cbase, 0, 0
    mask = _mask(x.dtype)
    geom = _nonzero_geometry(x.shape, sstr)
    kernels().nonzero(src, sbase, mask, geom, config.CPU_NONZERO_BLOCK, out, obase, rs, cs,
                      width, cnt, cbase, x.size >= config.CPU_PARALLEL_MIN,
                      bool(x.flags.c_contiguous))
