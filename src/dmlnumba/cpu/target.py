"""The CPU target: NumPy arrays in, flat views to the numba kernels, results out.

Arguments arrive validated (see :mod:`dmlnumba.dispatch`); this module only lays
arrays out for the kernels and launches them.  It imports numba's CPU kernels
on first use, so ``import dmlnumba`` stays light.
"""

import os
import sys
import time
from typing import Any

import numpy as np

from .. import config
from .. import target as _shared
from ..arrays import library
from ..layout import c_strides, extent, slice_geometry
from ..params import NONZERO_CPU, pack
from ..validation import host_array, nonzero_mask, uint_of_size
from . import compiling, process
from .threads import one_thread, run_parallel, threads_ok  # noqa: F401  (one_thread: dask's)

name = "cpu"
#: Largest nonzero input (None: no limit beyond the coordinate type's).
MAX_ELEMENTS: int | None = None
_kernels = None
_masks: dict[np.dtype, int] = {}


def kernels():
    global _kernels
    if _kernels is None:
        _kernels = process.import_whole("dmlnumba.cpu.kernels")
    return _kernels


def _copy(src, src_base, dst, dst_base, geom, size):
    """Run the slice kernel over ``size`` output elements: on numba's threads
    where the copy is large enough to gain from them and the machine has a core
    free for them."""
    k = kernels()
    chunk = config.CPU_SLICE_CHUNK
    nchunks = -(-size // chunk)
    key = ("slice1", 8 * src.itemsize)
    if (
        nchunks > 1
        and size >= config.CPU_PARALLEL_MIN
        and threads_ok()
        and (not config.CPU_SLICE_LOAD_CHECK or cores_free())
    ):
        global _parallel_end
        run_parallel(
            k.slice_copy_parallel,
            k.slice_copy,
            key,
            _c_function(k.chunk_function, "slice1", 8 * src.itemsize),
            src,
            src_base,
            dst,
            dst_base,
            geom,
            chunk,
            nchunks,
        )
        _parallel_end = time.monotonic()
    else:  # one chunk: a contiguous window is then one memcpy, as NumPy's copy is
        f = _c_function(k.chunk_function, "slice1", 8 * src.itemsize)
        compiling.run(k.slice_copy, key, f, src, src_base, dst, dst_base, geom, size, 1)


#: ``/proc/loadavg``, kept open (:func:`cores_free`); None until first asked, False
#: where it cannot be read (not Linux).
_loadavg: Any = None
#: ``time.monotonic()`` at the end of this module's last parallel call.
_parallel_end = -1.0
#: Seconds after a parallel region in which numba's pool threads may still be
#: running: GNU OpenMP's threads spin a while at its barrier before they sleep.
POOL_SPIN_S = 0.02
#: Seconds that calls stay on one thread after other runnable threads were seen.
BUSY_HOLD_S = 1.0
_busy_until = -1.0
#: The machine's cores (``os.cpu_count()`` takes about 6 us on the 2-core VM).
_CORES = os.cpu_count() or 1


def cores_free():
    """Whether the machine has a core for each of numba's threads: the runnable
    threads (Linux's count, ``/proc/loadavg``) other than the caller and, just
    after a parallel call, numba's pool threads still spinning, leave a core to
    each of them; and none were seen in the last ``BUSY_HOLD_S`` (the other
    processes of a busy machine sleep now and then: a count taken at such a moment
    would send a call to the threads).  A parallel region waits for its slowest
    thread, and on a busy machine one of them waits for a core: with other
    processes busy on the 2-core VM, parallel slice1 calls took 3-8x their serial
    time (docs/PERFORMANCE.md).  True where the count cannot be read.  About 2-3
    us, asked only before a call large enough for the threads."""
    global _loadavg, _busy_until
    now = time.monotonic()
    if now < _busy_until:
        return False
    if _loadavg is None:
        try:
            _loadavg = os.open("/proc/loadavg", os.O_RDONLY)
        except OSError:
            _loadavg = False
    if _loadavg is False:
        return True
    try:
        running = int(os.pread(_loadavg, 128, 0).split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return True
    import numba

    threads = numba.get_num_threads()
    own = threads if now - _parallel_end < POOL_SPIN_S else 1
    if running - own <= _CORES - threads:
        return True
    _busy_until = now + BUSY_HOLD_S
    return False


def _nonzero(src, dtype, out, count, **fields):
    """Run the nonzero kernel on ``src``, the flat view of an input of ``dtype``,
    with these :data:`~dmlnumba.params.NONZERO_CPU` fields (all but the block
    size and count, the mask and ``ndim``)."""
    p = _params(config.CPU_NONZERO_BLOCK, dtype, **fields)
    _nonzero_with(p, src, out, count, _driver(fields))


def _driver(fields):
    """Which serial nonzero driver takes a call of these fields (``_params``'): the
    positions pass (one packed column from ``out[0]`` of a C-contiguous input),
    the single-block write (no count pass) or the blocks driver (count, scan,
    write).  A driver compiles on its first call: a call compiles only its own."""
    n = fields["n"]
    if n > config.CPU_NONZERO_BLOCK or fields["limit"] < n:
        return "blocks"
    if (
        fields["contiguous"]
        and fields["first"] == 0
        and fields["width"] == 1
        and fields["rs"] == 1
        and fields["out_base"] == 0
    ):
        return "positions"
    return "single"


def _params(block, dtype, **fields):
    """The :data:`~dmlnumba.params.NONZERO_CPU` block for these fields (all but
    ``block``, ``nblocks``, ``ndim`` and ``mask``), block size and input dtype."""
    fields["block"] = block
    fields["nblocks"] = max(1, -(-fields["n"] // block))
    fields["ndim"] = len(fields["shape"])
    fields["mask"] = _mask(dtype)
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


def _parallel(p):
    """Whether the nonzero of parameter block ``p`` runs on numba's threads."""
    return p[NONZERO_CPU.nblocks] > 1 and p[NONZERO_CPU.n] >= config.CPU_PARALLEL_MIN


def _nonzero_with(p, src, out, count, driver):
    """Run the nonzero of parameter block ``p``; ``driver``: :func:`_driver`'s
    choice, for a call that runs on this thread."""
    bits = (8 * src.itemsize, 8 * out.itemsize)
    if _parallel(p) and threads_ok():
        k = kernels()
        fc = _c_function(k.count_function, "count", bits[0])
        fw = _c_function(k.write_function, "write", *bits)
        key = ("nonzero",) + bits
        run_parallel(k.nonzero_parallel, k.nonzero, key, fc, fw, src, p, out, count)
    else:
        kernel, key, passes = _serial(driver, bits)
        compiling.run(kernel, key, *passes, src, p, out, count)


def _serial(driver, bits):
    """The serial nonzero driver ``driver`` (:func:`_driver`'s choice) for inputs and
    coordinates of ``bits``: ``(kernel, key, passes)``, ``passes`` the addresses of
    the C functions it takes before the arrays (each compiled on first use)."""
    k = kernels()
    key = ("nonzero",) + bits
    if driver == "positions":
        return k.nonzero_positions, key + (driver,), ()
    fw = _c_function(k.write_function, "write", *bits)
    if driver == "single":
        return k.nonzero_single, key + (driver,), (fw,)
    return k.nonzero, key, (_c_function(k.count_function, "count", bits[0]), fw)


#: The C functions' addresses by key: the one place each is kept (the kernels' makers
#: compile or load one anew each time they are called).
_addresses: dict[tuple, Any] = {}


def _c_function(make, *key):
    """The address of a kernel's C function (``make(*key[1:])``: compiled on first use,
    under the compile notice), looked up once a call."""
    f = _addresses.get(key)
    if f is None:
        f = _addresses[key] = compiling.build(make, key + ("C",), *key[1:])
    return f


def describe(a, name, func):
    if library(a) == "torch" and not a.is_cuda:  # a PyTorch CPU tensor: its memory, in place
        try:
            a = a.numpy()
        except (RuntimeError, TypeError) as e:
            raise TypeError(f"{func}(): {name} cannot be written as a NumPy array: {e}") from None
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{func}(): {name} must be an array, not {type(a).__name__}")
    return host_array(a, name, func)


def overlaps(a, b):
    """Whether ``a`` and ``b`` may share memory (bounds only: a yes costs a copy).  The
    one test of an output against the input: every path that writes a caller's
    output directly asks it first."""
    return np.may_share_memory(a, b)


def shares_memory(a, b):
    """Whether ``a`` and ``b`` share memory (exact)."""
    return bool(np.shares_memory(a, b))


def copy_into(src, dst, stream=None):
    """``dst[...] = src`` for arrays of the same number of elements per row."""
    np.copyto(dst, src.reshape(dst.shape))


def leading_rows(coords, n):
    """The first ``n`` rows of a coordinates matrix ((R, N) or DirectML's padded shapes)."""
    return coords[..., :n, :]


def is_writeable(a):
    return a.flags.writeable


def empty(shape, dtype, stream=None, like=None, lib=None, func=None):
    return np.empty(shape, dtype)


def call_stream(lib, stream, x):
    return None


def check_stream(stream, func):
    """A CPU call has no stream: ``stream=`` is refused."""
    if stream is not None:
        raise ValueError(f"{func}(): stream= applies to CUDA calls only; this call runs on the CPU")


def read_count(count, stream=None, func=None):
    return int(count.reshape(-1)[0])


def flat(a):
    """``(view, base, strides)``: a flat unsigned view spanning all elements of the
    non-empty array ``a``, the index of element 0 in it, and element strides.  The
    view of a read-only array (a broadcast, a read-only memory map) is flagged
    writeable (:func:`_as_writeable`), so that it takes the kernels compiled for
    writeable arrays instead of compiling its own; the kernels never write their
    input."""
    u = uint_of_size(a.itemsize)
    if a.flags.c_contiguous:
        v = a.reshape(-1)
        es = c_strides(a.shape)
        base = 0
    else:
        low, span, base, es = extent(a.shape, a.strides, a.itemsize)
        flip = _flip(a.strides)
        if flip is not None:
            a = a[flip]
        v = _memory_order(a) if span == a.size else None
        if v is None:
            v = np.lib.stride_tricks.as_strided(a, shape=(span,), strides=(a.itemsize,))
    if v.dtype != u:
        v = v.view(u)
    if not v.flags.writeable:
        v = _as_writeable(v)
    return v, base, es


class _Memory:
    """The NumPy array interface of a view (its memory, flagged writeable), and the
    view itself, kept alive as long as the array made from this."""

    __slots__ = ("__array_interface__", "view")

    def __init__(self, view):
        ai = dict(view.__array_interface__)
        ai["data"] = (ai["data"][0], False)  # (address, read-only?)
        self.__array_interface__ = ai
        self.view = view


def _as_writeable(v):
    """The memory of the read-only view ``v`` as an array flagged writeable, without a
    copy (about 2 us).  For kernel inputs only, which the kernels read and never
    write: numba types a read-only array apart from a writeable one, and would
    compile every kernel a second time for it (docs/PERFORMANCE.md)."""
    return np.asarray(_Memory(v))


def _flip(strides):
    """The index that reverses every dimension of negative stride; None where none is."""
    if all(s >= 0 for s in strides):
        return None
    return tuple(slice(None, None, -1) if s < 0 else slice(None) for s in strides)


def _memory_order(a):
    """``a`` (no negative strides, its elements dense in memory: a permutation of a
    contiguous block, such as a transpose) as a 1-d view in memory order, which is
    :func:`flat`'s view; None where NumPy would copy.  NumPy's ``ravel("K")`` makes
    it in about 1 us where ``as_strided`` takes about 9."""
    v = a.ravel("K")
    return None if v.base is None else v


def _reader(x):
    """A function that gives the flat view (:func:`flat`) of an input laid out like
    ``x``: for C order and for dense layouts (transposes, reversals), the quick way.
    Where ``x`` is read-only the view is flagged writeable (:func:`_as_writeable`);
    a writeable ``x`` gives a function that does not look at the flag (about 0.05
    us a call), so a read-only input of a layout first seen writeable, in a repeated
    call, compiles kernels of its own once."""
    if not x.flags.writeable:
        return lambda x: flat(x)[0]
    u = np.dtype(uint_of_size(x.itemsize))
    if x.flags.c_contiguous and x.ndim == 1:
        return lambda x: x.view(u)  # no ravel: 0.07 us of a 1000-element call's 2.5
    if x.flags.c_contiguous:
        return lambda x: x.ravel().view(u)
    flip = _flip(x.strides)
    y = x if flip is None else x[flip]
    if extent(x.shape, x.strides, x.itemsize)[1] == x.size and _memory_order(y) is not None:
        if flip is None:
            return lambda x: x.ravel("K").view(u)
        return lambda x: x[flip].ravel("K").view(u)
    return lambda x: flat(x)[0]


def slice1_runner(x, starts, steps, out_shape, lib=None):
    """A function that runs this validated slice1 call (into a new output) on any
    input laid out like ``x`` (same dtype, shape and strides), with the layout
    work done once.  :mod:`dmlnumba.keys` keeps these for repeated calls.  ``lib``:
    the input's library, as for :func:`dmlnumba.gpu.target.slice1_runner` (only
    plain NumPy arrays reach this target's runners, so None)."""
    dtype = x.dtype
    u = uint_of_size(dtype.itemsize)
    size = 1
    for n in out_shape:
        size *= n
    if size == 0:
        return lambda x: np.empty(out_shape, dtype)
    idx = tuple(_numpy_slice(a, t, m) for a, t, m in zip(starts, steps, out_shape))
    _, sbase, sstr = flat(x)
    geom, off = slice_geometry(out_shape, starts, steps, sstr, c_strides(tuple(out_shape)))
    base = sbase + off
    read = _reader(x)

    def run(x):
        if size <= config.CPU_SLICE_NUMPY_MAX:
            # A small window: NumPy's strided view and copy (a byte copy, so bit-exact)
            # costs less than a kernel call's fixed overhead (docs/PERFORMANCE.md).
            return x[idx].copy()
        out = np.empty(out_shape, dtype)
        _copy(read(x), base, out.ravel().view(u), 0, geom, size)
        return out

    return run


def slice1_out_runner(x, starts, steps, out):
    """Like :func:`slice1_runner`, for a validated call into the NumPy array ``out``:
    a function of ``(x, out)`` for arrays laid out like these that copies the
    window and returns True, or returns False (having written nothing) where the
    two may share memory (:func:`overlaps`) and the kernel would copy (the full
    path, :func:`slice1`, then copies through a buffer)."""
    size = out.size
    if size == 0:
        return lambda x, out: True
    _, sbase, sstr = flat(x)
    _, dbase, dstr = flat(out)
    geom, off = slice_geometry(out.shape, starts, steps, sstr, dstr)
    base = sbase + off
    read = _reader(x)
    write = _reader(out)
    may_share = overlaps
    idx = tuple(_numpy_slice(a, t, m) for a, t, m in zip(starts, steps, out.shape))
    copyto = np.copyto

    def run(x, out):
        if size <= config.CPU_SLICE_NUMPY_MAX:
            # As for new outputs (slice1_runner).  A window that may overlap ``out`` is
            # copied first: NumPy's copyto does not buffer every overlap (a 1-d
            # same-direction one of other strides is copied element by element).
            w = x[idx]
            copyto(out, w.copy() if may_share(w, out) else w)
            return True
        if may_share(x, out):
            return False
        _copy(read(x), base, write(out), dbase, geom, size)
        return True

    return run


def _numpy_slice(start, step, m):
    """The basic slice that takes ``m`` elements from ``start`` in steps of ``step``."""
    stop = start + step * (m - 1) + (1 if step > 0 else -1)
    return slice(start, stop if stop >= 0 else None, step)


def slice1(x, starts, steps, out, stream=None, fresh=False):
    """``fresh``: ``out`` was just allocated, so it cannot overlap the input.  An
    ``out`` that may overlap the input (:func:`overlaps`) is written through a new
    buffer, so that the call reads the whole window before it writes."""
    if not fresh and overlaps(x, out):
        tmp = np.empty(out.shape, out.dtype)
        slice1(x, starts, steps, tmp)
        out[...] = tmp
        return
    src, sbase, sstr = flat(x)
    dst, dbase, dstr = flat(out)
    geom, off = slice_geometry(out.shape, starts, steps, sstr, dstr)
    _copy(src, sbase + off, dst, dbase, geom, out.size)


def _mask(dtype):
    """:func:`nonzero_mask` of ``dtype`` as an int64 (two's complement for 64 bits),
    for a parameter block: the kernel reads it as its unsigned element type."""
    m = _masks.get(dtype)
    if m is None:
        m = _masks[dtype] = int(np.uint64(nonzero_mask(dtype)).view(np.int64))
    return m


def nonzero_runner(x, width, dtype, rows, lib=None):
    """Like :func:`slice1_runner`, for nonzero_coordinates into new outputs of
    ``dtype`` with ``rows`` rows: the function returns ``(count, coordinates)``."""
    n = x.size
    u = np.dtype(uint_of_size(dtype.itemsize))
    shape = (rows, width)
    if n == 0:
        return lambda x: (np.zeros(1, dtype), np.empty(shape, dtype))
    _, sbase, sstr = flat(x)
    view = u != dtype
    read = _reader(x)

    p = _fresh_rows_block(x, sbase, sstr, width, rows)
    driver = _driver(
        {
            "n": n,
            "limit": rows,
            "contiguous": x.flags.c_contiguous,
            "first": 0,
            "width": width,
            "rs": width,
            "out_base": 0,
        }
    )
    serial = not _parallel(p)
    kernel = None
    key: tuple = ()
    passes: tuple = ()

    def run(x):
        nonlocal kernel, key, passes
        cnt = np.empty(1, u)
        crd = np.empty(shape, u)  # and its flat view: 0.1 us less than the other way round
        src = read(x)
        if kernel is not None:  # small inputs: the serial kernel, its key worked out once
            if passes:
                compiling.run(kernel, key, *passes, src, p, crd.ravel(), cnt)
            else:  # the positions pass: no C function (and no star call)
                compiling.run(kernel, key, src, p, crd.ravel(), cnt)
        else:
            _nonzero_with(p, src, crd.ravel(), cnt, driver)
            if serial:  # compiled (or loaded) by the call just made
                kernel, key, passes = _serial(driver, (8 * src.itemsize, 8 * crd.itemsize))
        if view:
            return cnt.view(dtype), crd.view(dtype)
        return cnt, crd

    return run


#: argwhere of at most this many elements writes its rows into a worst-case buffer
#: (at most 4 MiB: this many rows of 8 columns) and keeps the rows used: one kernel
#: call.  A larger input is counted first, then its rows are written into the
#: compact result, so that it needs no more memory than numpy.argwhere.
ARGWHERE_BUFFER_MAX = 1 << 16


def argwhere_runner(x):
    """A function that gives ``numpy.argwhere`` of any input laid out like ``x`` (the
    compact int64 rows), as :func:`slice1_runner` does for slice1."""
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
    :func:`nonzero`'s, in two kernel calls."""
    n = x.size
    w = x.ndim
    if n == 0:
        return np.empty((0, w), np.int64)
    src, sbase, sstr = flat(x)
    p = _fresh_rows_block(x, sbase, sstr, w, n)
    k = kernels()
    bits = (8 * src.itemsize,)
    rows = np.empty(p[NONZERO_CPU.nblocks] + 1, np.int64)
    parallel = _parallel(p) and threads_ok()
    fc = _c_function(k.count_function, "count", *bits)
    if parallel:
        run_parallel(k.count_blocks_parallel, k.count_blocks, ("count",) + bits, fc, src, p, rows)
    else:
        compiling.run(k.count_blocks, ("count",) + bits, fc, src, p, rows)
    count = int(rows[-1])
    coords = np.empty((count, w), np.int64)
    if count:
        out = coords.reshape(-1).view(np.uint64)
        key = ("write", bits[0], 64)
        fw = _c_function(k.write_function, *key)
        if parallel:
            run_parallel(k.write_blocks_parallel, k.write_blocks, key, fw, src, p, out, rows)
        else:
            compiling.run(k.write_blocks, key, fw, src, p, out, rows)
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
        src, sbase, sstr = flat(x)
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
        _nonzero(
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
    cnt, cbase, _ = flat(count)
    if x.size == 0:
        cnt[cbase] = 0
        return
    src, sbase, sstr = flat(x)
    if width and coords.size and limit != 0:
        out, obase, ostr = flat(coords)
        rs, cs = ostr[-2], ostr[-1]
    else:  # no coordinates to write: the count stands in for them
        out, obase, rs, cs, limit = cnt, cbase, 0, 0, 0
    _nonzero(
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


# ------------------------------------------------------------------ the Target interface
# (dmlnumba.target.Target: the calls a prepared Call makes of this target)

_self = sys.modules[__name__]


def check_out(out, dtype, shape, name, func, x):
    """A caller's output as a NumPy array, checked (:func:`dmlnumba.target.check_out`)."""
    return _shared.check_out(_self, out, dtype, shape, name, func, x, library(out) == "torch")


def as_library(lib, a, bf16=False):
    """A new NumPy result as the input's library's array: a PyTorch tensor over the
    same memory (``bf16``: float16 bits as bfloat16), a JAX array through DLPack."""
    if lib == "torch":
        import torch

        t = torch.from_numpy(a)
        return t.view(torch.bfloat16) if bf16 else t
    if lib == "jax":
        import jax

        return jax.dlpack.from_dlpack(np.ascontiguousarray(a))
    return a


def slice1_call(c):
    """slice1: the runner the call keeps (``c.key``), of the input, or for a NumPy
    call into the NumPy array ``out`` of ``(input, out)``; else
    :func:`dmlnumba.target.slice1_into`."""
    if c.key is None:
        return _shared.slice1_into(_self, c)
    if c.out is None:
        run = slice1_runner(c.x, c.starts, c.steps, c.shape, c.lib)
        if run is None:
            return _shared.slice1_into(_self, c)
        c.keep(run)
        return run(c.input)
    o = check_out(c.out, c.x.dtype, c.shape, "out", c.f, c.x)
    if o is c.out:
        run = slice1_out_runner(c.x, c.starts, c.steps, o)
        c.keep(run)
        if run(c.input, c.out):  # False where out may overlap the input
            return c.out
    slice1(c.x, c.starts, c.steps, o)
    return c.given_out


def nonzero_call(c):
    """nonzero_coordinates: the runner the call keeps (``c.key``), where this target
    makes one, else :func:`dmlnumba.target.nonzero_into`."""
    if c.key is not None:
        run = nonzero_runner(c.x, c.width, c.dtype, c.rows, c.lib)
        if run is not None:
            c.keep(run)
            return run(c.input)
    return _shared.nonzero_into(_self, c)


def argwhere_call(c):
    """The compact rows: an input of at most :data:`ARGWHERE_BUFFER_MAX` elements
    through a worst-case buffer, a larger one counted first (:func:`argwhere`)."""
    run = argwhere_runner(c.x)
    if c.key is not None:
        c.keep(run)
    rows = run(c.x)
    if c.zero_d:
        rows = rows[:, :0]
    if c.transposed:
        rows = np.ascontiguousarray(rows.T)
    return as_library(c.lib, rows)


def empty_result(c, shape, dtype):
    """A new empty NumPy result, as the input's library's array."""
    return as_library(c.lib, np.empty(shape, dtype), c.bf16)
