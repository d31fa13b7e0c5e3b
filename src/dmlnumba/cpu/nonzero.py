"""The CPU nonzero_coordinates: parameter blocks for the nonzero kernels, the choice
of driver (serial or on numba's threads), the full call, the runner that repeats a
validated call, argwhere, and the dask stripes (a block of a larger array)."""

from typing import Any

import numpy as np

from .. import config
from ..dtypes import nonzero_mask
from ..interop import torch_written
from ..layout import uint_of_size
from ..params import NONZERO_CPU, NONZERO_PASS, kept_slots, pack
from . import compiling, process
from .nonzero_launch import (
    count_pass,
    launch_block,
    pass_args,
    passes_on_threads,
    serial_driver,
    write_pass,
)
from .threads import nonzero_driver, nonzero_on_threads, threads_ok
from .views import element_layout, flat_view, library_io, out_view, reader

#: argwhere of at most this many elements writes its rows into a worst-case buffer
#: (at most 4 MiB: this many rows of 8 columns) and keeps the rows used: one kernel
#: call.  A larger input is counted first, then its rows are written into the
#: compact result, so that it needs no more memory than numpy.argwhere.
ARGWHERE_BUFFER_MAX = 1 << 16

_masks: dict[np.dtype, int] = {}
_ndarray = np.ndarray


def _mask(dtype):
    """:func:`nonzero_mask` of ``dtype`` as an int64 (two's complement for 64 bits),
    for a parameter block: the kernel reads it as its unsigned element type."""
    m = _masks.get(dtype)
    if m is None:
        m = _masks[dtype] = int(np.uint64(nonzero_mask(dtype)).view(np.int64))
    return m


def _params(block, dtype, **fields):
    """The :data:`~dmlnumba.params.NONZERO_CPU` block for these fields (all but
    ``block``, ``nblocks``, ``ndim`` and ``mask``), block size and input dtype."""
    fields["block"] = block
    fields["nblocks"] = max(1, -(-fields["n"] // block))
    fields["ndim"] = len(fields["shape"])
    fields["mask"] = _mask(dtype)
    fields.setdefault("ask_apart", 0)
    fields["dense"] = 0  # set where the write pass is chosen (nonzero_launch.write_pass)
    # A C-contiguous input's count pass keeps sparse blocks' positions (where the
    # driver gives them room: the blocks drivers, of more than one block).
    many = fields["contiguous"] and fields["nblocks"] > 1
    fields["keep"] = kept_slots(block) if many else 0
    return pack(NONZERO_CPU, **fields)


def _fresh_rows_block(x, sbase, sstr, width, limit):
    """The block of a nonzero of all of ``x`` (its flat view's ``sbase`` and ``sstr``)
    into new C-contiguous rows of ``width`` columns, at most ``limit`` of them, and a
    new count."""
    return _params(
        config.CPU_NONZERO_BLOCK,
        x.dtype,
        shape=x.shape,
        strides=sstr,
        src_base=sbase,
        first=0,
        n=x.size,
        out_base=0,
        rs=width,
        cs=1,
        width=width,
        count_pos=0,
        contiguous=bool(x.flags.c_contiguous),
        limit=limit,
    )


def _launch(src, dtype, out, count, **fields):
    """Run the nonzero kernel on ``src``, the flat view of an input of ``dtype``,
    with these :data:`~dmlnumba.params.NONZERO_CPU` fields (all but the block
    size and count, the mask and ``ndim``)."""
    p = _params(config.CPU_NONZERO_BLOCK, dtype, **fields)
    launch_block(p, src, out, count, nonzero_driver(fields))


def nonzero_runner(x, width, dtype, rows, lib=None, oc=None, ox=None, stream=None):
    """Like :func:`~dmlnumba.cpu.slice.slice1_runner`, for nonzero_coordinates with
    outputs of ``dtype`` and ``rows`` rows: the function of ``(x, out_count=None,
    out_coordinates=None)`` returns ``(count, coordinates)``, new arrays where this
    runner's call gives none.  ``oc`` and ``ox``: the NumPy views of the first
    call's checked outputs (:func:`dmlnumba.target.check_out`), whose layouts every
    later call's share (its key holds them); None where the call allocates.  With
    either given, a call where an output may overlap the input or the other output
    returns None, having written nothing (the full path then decides: a copy
    through new arrays, or an error); None (no runner) for calls with no rows to
    write (an empty input, no columns or rows).  ``lib``, ``stream``: as for slice1's."""
    n = x.size
    u = np.dtype(uint_of_size(dtype.itemsize))
    shape = (rows, width)
    given = oc is not None or ox is not None
    if lib is not None:  # a PyTorch or JAX CPU array's: the NumPy runner over its memory
        return _library_runner(nonzero_runner(x, width, dtype, rows, None, oc, ox), lib)
    if given and not (n and width and rows):
        return None
    if n == 0:
        return lambda x: (np.zeros(1, dtype), np.empty(shape, dtype))
    sbase, sstr = element_layout(x.shape, x.strides, x.itemsize, x.flags.c_contiguous)
    view = u != dtype

    def read(x):  # the first input's flat view, and the reader of every later one's
        nonlocal read
        read = reader(x)
        return read(x)

    p = _fresh_rows_block(x, sbase, sstr, width, rows)
    obase = 0
    if given:
        p, obase = _given_block(p, oc, ox)
    fields = {"n": n, "limit": rows, "contiguous": x.flags.c_contiguous, "first": 0}
    rs = width if ox is None else int(p[NONZERO_CPU.rs])
    driver = nonzero_driver({**fields, "width": width, "rs": rs, "out_base": obase})
    serial = not nonzero_on_threads(p)
    # The given outputs' flat views, and their library's rules (PyTorch's marks).
    write_count: Any = None if oc is None else reader(oc)
    write_coords: Any = None if ox is None else reader(ox)
    count_view, coords_view = out_view(), out_view()
    both = write_count is not None and write_coords is not None
    ndarray = np.ndarray
    kernel = None
    key: tuple = ()
    passes: tuple = ()

    def run(x, out_count=None, out_coordinates=None):
        nonlocal kernel, key, passes
        cnt: Any = None
        crd: Any = None
        if not given:
            cnt = wc = np.empty(1, u)
            crd = np.empty(shape, u)  # and its flat view: cheaper than the other way round
            wx = crd.ravel()
        elif both and type(out_count) is ndarray and type(out_coordinates) is ndarray:
            # The common given call, asked first: NumPy outputs, read as they are.
            wc, wx = write_count(out_count), write_coords(out_coordinates)
            numpy_outs = True
        else:  # the kernel asks whether they may overlap (None: it wrote nothing)
            numpy_outs = False
            oc, ox = out_count, out_coordinates
            # (a PyTorch CPU tensor's memory; None: a freed one, which the full path
            # refuses; nothing is written before the kernel runs)
            if write_count is None:
                cnt = wc = np.empty(1, u)
            else:
                wc = count_view(oc)
                if wc is None:
                    return None
                wc = write_count(wc)
            if write_coords is None:
                crd = np.empty(shape, u)
                wx = crd.ravel()
            else:
                wx = coords_view(ox)
                if wx is None:
                    return None
                wx = write_coords(wx)
        src = read(x)
        if kernel is not None:  # small inputs: the serial kernel, its key worked out once
            if passes:
                wrote = compiling.run(kernel, key, *passes, src, p, wx, wc)
            else:  # the positions pass: no C function (and no star call)
                wrote = compiling.run(kernel, key, src, p, wx, wc)
        else:
            wrote = launch_block(p, src, wx, wc, driver)
            if serial:  # compiled (or loaded) by the call just made
                kernel, key, passes = serial_driver(driver, (8 * src.itemsize, 8 * wx.itemsize), p)
        if not wrote:
            return None
        if not given:
            return (cnt.view(dtype), crd.view(dtype)) if view else (cnt, crd)
        if numpy_outs:
            return out_count, out_coordinates
        return _given(out_count, out_coordinates, cnt, crd, dtype if view else None)

    return run


def _library_runner(run, lib):
    """The NumPy runner ``run`` (or None) as one of CPU arrays of ``lib`` (as
    :func:`~dmlnumba.cpu.views.library_runner` for one result): the input read in
    place, new outputs given back as the library's arrays, the caller's as they are
    (NumPy ones too, which a PyTorch or JAX input's call may be given)."""
    if run is None:
        return None
    ready, read, give = library_io(lib)

    def go(x, *outs):
        a = read(x if ready is None else ready(x))
        if a is None:  # (a freed tensor: the full path refuses it)
            return None
        r = run(a, *outs)
        if r is None:
            return None
        c, k = r
        if not outs:
            return give(c), give(k)
        oc, ox = outs
        return (c if c is oc else give(c), k if k is ox else give(k))

    return go


def _given_block(p, count, coords):
    """``(block, out_base)``: the block ``p`` of new outputs rewritten for the given
    ``count`` and ``coords`` (NumPy views; either may be None: a new one's place)."""
    p = p.copy()
    p[NONZERO_CPU.ask_apart] = 1  # the kernel's test of the caller's outputs
    if count is not None:
        p[NONZERO_CPU.count_pos] = flat_view(count)[1]
    obase = 0
    if coords is not None:
        _, obase, ostr = flat_view(coords)
        p[NONZERO_CPU.out_base] = obase
        p[NONZERO_CPU.rs], p[NONZERO_CPU.cs] = ostr[-2], ostr[-1]
    return p, obase


def _given(out_count, out_coordinates, cnt, crd, dtype):
    """A runner's results: the caller's outputs (PyTorch tensors marked written, as
    PyTorch's in-place ops mark theirs), the new arrays ``cnt`` and ``crd`` where none
    was given (viewed as ``dtype``, unless None)."""
    if cnt is not None:
        out_count = cnt if dtype is None else cnt.view(dtype)
    elif type(out_count) is not _ndarray:
        torch_written(out_count)
    if crd is not None:
        out_coordinates = crd if dtype is None else crd.view(dtype)
    elif type(out_coordinates) is not _ndarray:
        torch_written(out_coordinates)
    return out_count, out_coordinates


def argwhere_runner(x):
    """A function that gives ``numpy.argwhere`` of any input laid out like ``x`` (the
    compact int64 rows), as :func:`~dmlnumba.cpu.slice.slice1_runner` does for slice1."""
    if x.size > min(ARGWHERE_BUFFER_MAX, config.CPU_NONZERO_BLOCK):
        return lambda x: argwhere(x)
    run = nonzero_runner(x, x.ndim, np.dtype(np.int64), x.size)

    def small(x):
        count, coords = run(x)
        n = int(count[0])
        rows = coords[:n]
        return rows.copy() if 2 * n < coords.shape[0] else rows  # give unused rows back

    return small


def argwhere(x):
    """``numpy.argwhere`` of ``x``: its non-zero elements counted block by block, then
    their rows written into the result, of exactly that many rows (the rows a
    worst-case buffer would take are never allocated).  The same passes as
    :func:`nonzero`'s: on numba's threads through the block drivers, on this thread
    through drivers of their own (a call's Python steps between the passes weigh on
    inputs of 64K to 1M elements)."""
    n = x.size
    w = x.ndim
    if n == 0:
        return np.empty((0, w), np.int64)
    src, sbase, sstr = flat_view(x)
    p = _fresh_rows_block(x, sbase, sstr, w, n)
    k = process.kernels()
    nblocks = int(p[NONZERO_CPU.nblocks])
    bits = 8 * src.itemsize
    fc = count_pass(k, bits, p)
    if nonzero_on_threads(p) and threads_ok():
        a = pass_args(src, p, src, nblocks + 1)  # (the output's slots set once counted)
        coords: Any = None

        def write(count):  # the result, exactly the rows counted, as the passes' output
            nonlocal coords
            coords = np.empty((count, w), np.int64)
            if not coords.size:
                return None
            out = coords.reshape(-1).view(np.uint64)
            a[NONZERO_PASS.out], a[NONZERO_PASS.out_n] = out.ctypes.data, out.size
            return write_pass(k, (bits, 64), p)

        passes_on_threads(fc, a, nblocks, write)
        return coords
    rows = np.empty(nblocks + 1, np.int64)  # on this thread: the passes' own drivers
    compiling.run(k.count_blocks, ("argwhere", bits), fc, src, p, rows)
    coords = np.empty((int(rows[-1]), w), np.int64)
    if coords.size:
        out = coords.reshape(-1).view(np.uint64)
        fw = write_pass(k, (bits, 64), p)
        compiling.run(k.write_blocks, ("argwhere", bits, 64), fw, src, p, out, rows)
    return coords


def nonzero_stripe(x, shape, origin, width, dtype):
    """nonzero_coordinates of ``x``, a block of a larger array of ``shape`` at ``origin``
    (its first element's coordinates) that is one contiguous run of that array's
    row-major order (a dask stripe): ``(count, coordinates)`` with coordinates in the
    larger array, written directly by the kernel (no second pass to shift them)."""
    n = x.size
    u = uint_of_size(dtype.itemsize)
    cnt = np.zeros(1, u)
    crd = np.empty((n, width), u)
    if n:
        src, sbase, sstr = flat_view(x)
        # Strides in the larger array's terms: axes where the block is one index get 0
        # (their coordinate is fixed); element (c) of the larger array is then read at
        # src[sbase + sum((c - origin) * strides)], or src[sbase + e - first] in C order.
        es = tuple(0 if x.shape[d] == 1 else sstr[d] for d in range(x.ndim))
        first = 0
        for d in range(len(shape)):
            first = first * shape[d] + origin[d]
        contiguous = bool(x.flags.c_contiguous)
        base = sbase - first if contiguous else sbase - sum(o * s for o, s in zip(origin, es))
        out, obase, rs, cs = (crd.reshape(-1), 0, width, 1) if width else (cnt, 0, 0, 0)
        _launch(
            src,
            x.dtype,
            out,
            cnt,
            shape=shape,
            strides=es,
            src_base=base,
            first=first,
            n=n,
            out_base=obase,
            rs=rs,
            cs=cs,
            width=width,
            count_pos=0,
            contiguous=contiguous,
            limit=n if width else 0,
        )
    return int(cnt[0]), crd.view(dtype)


def nonzero(x, width, count, coords, stream=None, limit=None, func=None):
    """``limit``: the rows to write at most (default: every element's)."""
    cnt, cbase, _ = flat_view(count)
    if x.size == 0:
        cnt[cbase] = 0
        return
    src, sbase, sstr = flat_view(x)
    if width and coords.size and limit != 0:
        out, obase, ostr = flat_view(coords)
        rs, cs = ostr[-2], ostr[-1]
    else:  # no coordinates to write: the count stands in for them
        out, obase, rs, cs, limit = cnt, cbase, 0, 0, 0
    _launch(
        src,
        x.dtype,
        out,
        cnt,
        shape=x.shape,
        strides=sstr,
        src_base=sbase,
        first=0,
        n=x.size,
        out_base=obase,
        rs=rs,
        cs=cs,
        width=width,
        count_pos=cbase,
        contiguous=bool(x.flags.c_contiguous),
        limit=x.size if limit is None else limit,
    )
