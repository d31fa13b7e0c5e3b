"""The CPU slice1: the copy of a window by the slice kernel (on numba's threads
where it is large), the full call (with its overlap rule), and the runners that
repeat a validated call with the layout work done once."""

import numpy as np

from .. import config
from ..interop import torch_written
from ..layout import c_strides, slice_geometry, uint_of_size
from . import compiling, process, threads
from .slice_kinds import chunk_kind
from .views import flat_view, library_runner, out_view, reader


def _copy(src, src_base, dst, dst_base, geom, size, kind):
    """Run the slice kernel over ``size`` output elements: on numba's threads where
    the copy is large enough to gain from them and the machine has a core free for
    them (:func:`dmlnumba.cpu.threads.slice_parallel`); ``kind``: ``geom``'s
    :func:`~dmlnumba.cpu.slice_kinds.chunk_kind`."""
    k = process.kernels()
    chunk = config.CPU_SLICE_CHUNK
    nchunks = -(-size // chunk)
    key = ("slice1", 8 * src.itemsize)
    f = compiling.c_function_address(k.chunk_function, "slice1", 8 * src.itemsize, kind)
    if threads.slice_parallel(size, nchunks):
        threads.run_parallel(
            k.slice_copy_parallel,
            k.slice_copy,
            key,
            f,
            src,
            src_base,
            dst,
            dst_base,
            geom,
            chunk,
            nchunks,
        )
    else:  # one chunk: a contiguous window is then one memcpy, as NumPy's copy is
        compiling.run(k.slice_copy, key, f, src, src_base, dst, dst_base, geom, size, 1)


def _numpy_slice(start, step, m):
    """The basic slice that takes ``m`` elements from ``start`` in steps of ``step``."""
    stop = start + step * (m - 1) + (1 if step > 0 else -1)
    return slice(start, stop if stop >= 0 else None, step)


def slice1_runner(x, starts, steps, out_shape, lib=None, out=None, stream=None):
    """A function that runs this validated slice1 call on any input laid out like
    ``x`` (same dtype, shape and strides), with the layout work done once.
    :mod:`dmlnumba.api` keeps these for repeated calls.  ``lib``: the input's
    library: None (NumPy), or ``"torch"`` or ``"jax"`` (a CPU tensor or JAX array: the
    NumPy runner over its memory, :func:`~dmlnumba.cpu.views.library_runner`).

    ``out``: None for calls into new arrays, whose function of ``x`` returns one; or
    the NumPy view of the first call's checked ``out`` (:func:`dmlnumba.target.check_out`),
    for calls into outputs laid out like it (their key holds the layout): the function
    of ``(x, out)`` returns ``out``, or None (having written nothing) where the two
    may share memory (:func:`overlaps`) and the kernel would copy (the full path,
    :func:`slice1`, then copies through a buffer).  None (no runner) for an empty
    ``out``.  ``stream``: the targets' common signature; a CPU call has none (its
    check refuses ``stream=``)."""
    if lib is not None:  # a PyTorch or JAX CPU array's: the NumPy runner over its memory
        over_numpy = slice1_runner(x, starts, steps, out_shape, None, out)
        return None if over_numpy is None else library_runner(over_numpy, lib)
    dtype = x.dtype
    u = uint_of_size(dtype.itemsize)
    size = 1
    for n in out_shape:
        size *= n
    if size == 0:
        return lambda x, *o: np.empty(out_shape, dtype) if out is None else None
    idx = tuple(_numpy_slice(a, t, m) for a, t, m in zip(starts, steps, out_shape))
    _, sbase, sstr = flat_view(x)
    dbase, dstr = 0, c_strides(tuple(out_shape))
    if out is not None:
        _, dbase, dstr = flat_view(out)
    geom, off = slice_geometry(out_shape, starts, steps, sstr, dstr)
    base = sbase + off
    kind = chunk_kind(geom, dtype.itemsize)
    read = reader(x)
    small = size <= config.CPU_SLICE_NUMPY_MAX
    if out is None:
        if small:
            # A small window: NumPy's strided view and copy (a byte copy, so
            # bit-exact) costs less than a kernel call's fixed overhead
            # (docs/PERFORMANCE.md).
            return lambda x: x[idx].copy()

        def new(x):
            o = np.empty(out_shape, dtype)
            _copy(read(x), base, o.ravel().view(u), 0, geom, size, kind)
            return o

        return new
    write = reader(out)
    flat = len(out_shape) == 1
    may_share = np.may_share_memory  # overlaps' test, without a frame of its own
    view = out_view()
    ndarray = np.ndarray

    def into(x, out):
        o = out if type(out) is ndarray else view(out)  # (a PyTorch CPU tensor's memory)
        if o is None:  # (a freed tensor: the full path refuses it)
            return None
        if small:
            # As for new outputs.  NumPy's assignment buffers a source that may
            # overlap a destination of two or more dimensions, but of a 1-d one only
            # where their directions differ (the rest it copies element by element):
            # a 1-d window that may overlap ``out`` is copied first.  An assignment of
            # the same dtype (the key's) is a byte copy, and costs less than copyto;
            # it refuses a read-only ``out`` before it writes.
            w = x[idx]
            try:
                o[...] = w.copy() if flat and may_share(w, o) else w
            except ValueError:
                refuse_read_only(o)
                raise
        else:
            refuse_read_only(o)  # (the key holds no flag: asked of every call)
            if may_share(x, o):
                return None
            _copy(read(x), base, write(o), dbase, geom, size, kind)
        if o is not out:
            torch_written(out)  # as PyTorch's in-place ops mark the tensors they write
        return out

    if not small or flat:
        return into

    def assign(x, out):  # into's small window of 2+ dimensions, in as few steps
        if type(out) is not ndarray:
            return into(x, out)
        try:
            out[...] = x[idx]
        except ValueError:
            refuse_read_only(out)
            raise
        return out

    return assign


def refuse_read_only(o, func="slice1"):
    """The ValueError the checks raise for a read-only ``out`` (``o``: it, or its
    memory), where a runner, whose key holds no writeable flag, is about to write it
    or NumPy's assignment into it failed (NumPy refuses one before it writes)."""
    if not o.flags.writeable:
        raise ValueError(f"{func}(): out is read-only") from None


def overlaps(a, b):
    """Whether ``a`` and ``b`` may share memory (bounds only: a yes costs a copy).  The
    one test of an output against the input: every path that writes a caller's
    output directly asks it first."""
    return np.may_share_memory(a, b)


def slice1(x, starts, steps, out, stream=None, fresh=False):
    """``fresh``: ``out`` was just allocated, so it cannot overlap the input.  An
    ``out`` that may overlap the input (:func:`overlaps`) is written through a new
    buffer, so that the call reads the whole window before it writes."""
    if not fresh and overlaps(x, out):
        tmp = np.empty(out.shape, out.dtype)
        slice1(x, starts, steps, tmp)
        out[...] = tmp
        return
    src, sbase, sstr = flat_view(x)
    dst, dbase, dstr = flat_view(out)
    geom, off = slice_geometry(out.shape, starts, steps, sstr, dstr)
    _copy(src, sbase + off, dst, dbase, geom, out.size, chunk_kind(geom, dst.itemsize))
