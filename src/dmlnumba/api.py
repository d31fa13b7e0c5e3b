"""The public API: validate everything, allocate, then hand over to a target.

Every check of a call runs before any output is allocated or written, so an
``out=`` array is untouched when a call raises.
"""

import numpy as np

from . import validation as v
from . import target_cpu
from .dispatch import resolve
from .window import window  # noqa: F401  (re-exported)

#: Validated CPU calls into new outputs, by everything their validation read
#: (dtype, shape and strides of the input, and the parameters): a repeat of such
#: a call skips validation and layout work.  Parameters are keys only when they
#: are tuples of Python ints (so that 1.0 or True never stands for 1).
_runners = {}


def _remember(key, make):
    if len(_runners) >= 4096:
        _runners.clear()
    _runners[key] = make()


def _int_tuples(*params):
    for p in params:
        if p is not None:
            if type(p) is not tuple:
                return False
            for v in p:
                if type(v) is not int:
                    return False
    return True


def _is_dask(x):
    """Whether ``x`` is a ``dask.array.Array`` (read from its type: dask is not imported)."""
    tp = type(x)
    return tp.__name__ == "Array" and (getattr(tp, "__module__", "") or "").startswith(
        "dask.array")


def _no_outputs_for_dask(f, stream, **outs):
    for name, o in outs.items():
        if o is not None:
            raise TypeError(f"{f}(): {name}= is not supported for dask arrays: the results are "
                            f"new lazy dask arrays")
    if stream is not None:
        raise ValueError(f"{f}(): stream= does not apply to dask arrays (each task runs on its "
                         f"chunk's current stream)")


def _cpu_fresh(input, device, stream):
    """A CPU call on a NumPy array whose outputs the call allocates."""
    return (type(input) is np.ndarray and stream is None
            and (device is None or device == "cpu"))

def _check_stream(target, stream, func):
    if stream is not None and target.name != "cuda":
        raise ValueError(f"{func}(): stream= applies to CUDA calls only; this call runs on the CPU")


def _check_out(target, out, dtype, shape, name, func):
    """The target's description of a caller's output array, checked."""
    o = target.describe(out, name, func)
    v.check_out(o, dtype, shape, name, func)
    if not target.is_writeable(o):
        raise ValueError(f"{func}(): {name} is read-only")
    v.check_no_overlap(o, name, func)
    return o


def slice1(input, offsets, sizes, strides, output_sizes=None, *, out=None, device=None,
           stream=None):
    """DirectML SLICE1: a strided window of ``input``, copied bit for bit.

    For every output coordinate ``c``: ``output[c] = input[start + strides * c]``
    with ``start = offsets`` where a stride is positive and
    ``offsets + sizes - 1`` where it is negative (which reverses that
    dimension).  ``output_sizes`` defaults to ``1 + (sizes - 1) // abs(strides)``
    per dimension and may be smaller (at least 1).

    ``input`` may have any strides (reversed, permuted, broadcast); it is read in
    place.  ``out``, if given, must be a writeable array of the output's shape and
    the input's dtype (any strides); it is written and returned.  ``device``:
    ``None`` (where ``input`` lives), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    ``stream``: the CUDA stream to order the work on (CUDA only).

    Raises TypeError for arguments of the wrong type and ValueError for bad
    values, before anything is written.
    """
    key = None
    if out is None and _cpu_fresh(input, device, stream) and _int_tuples(
            offsets, sizes, strides, output_sizes):
        key = ("slice1", input.dtype, input.shape, input.strides, offsets, sizes, strides,
               output_sizes)
        run = _runners.get(key)
        if run is not None:
            return run(input)
    f = "slice1"
    if _is_dask(input):
        from . import chunked
        _no_outputs_for_dask(f, stream, out=out)
        return chunked.slice1(input, offsets, sizes, strides, output_sizes, device)
    target, x = resolve(input, device, f)
    _check_stream(target, stream, f)
    v.check_dtype(x.dtype, v.SLICE_DTYPES, f)
    starts, steps, out_shape = v.slice1_params(x.shape, offsets, sizes, strides, output_sizes)
    v.check_strides(x, "input", f)
    if key is not None:
        _remember(key, lambda: target_cpu.slice1_runner(x, starts, steps, out_shape))
        return _runners[key](x)
    if out is None:
        out = target.empty(out_shape, x.dtype, stream, x)
        target.slice1(x, starts, steps, target.describe(out, "out", f), stream, fresh=True)
    else:
        o = _check_out(target, out, x.dtype, out_shape, "out", f)
        target.slice1(x, starts, steps, o, stream)
    return out


def nonzero_coordinates(input, width=None, *, dtype=np.uint32, max_count=None, out_count=None,
                        out_coordinates=None, device=None, stream=None):
    """DirectML NONZERO_COORDINATES: the coordinates of the non-zero elements, in order.

    Returns ``(count, coordinates)``.  ``count`` is a 1-element array of
    ``dtype`` holding the number of non-zero elements.  ``coordinates`` has
    ``input.size`` rows and ``width`` columns (default ``input.ndim``); its first
    ``count`` rows are the coordinates of the non-zero elements in ascending
    (row-major) element order, right-aligned to the last ``width`` dimensions;
    later rows are undefined.  ``width`` may be anything from the effective rank
    (ndim less leading size-1 dimensions) to ``ndim``.

    Zero is +0.0 and -0.0; NaN and the infinities are non-zero.  ``dtype`` is
    uint32 (DirectML's), uint64 or int64; an input too large for uint32 is a
    ValueError that says so.  ``out_count`` (any 1-element shape) and
    ``out_coordinates`` (shape ``(R, width)``, ``(1, 1, R, width)`` or
    ``(1, 1, 1, R, width)`` with ``R >= input.size``) are written and returned
    if given.  On CUDA the count stays on the device and the call does not wait
    for the GPU.

    ``max_count`` bounds the coordinates matrix: it gets ``max_count`` rows (not
    ``input.size``) and holds the first ``min(count, max_count)`` coordinates,
    while ``count`` stays the true count, so an overflow shows in the count
    without a host synchronization.
    """
    return _nonzero(input, width, dtype, max_count, out_count, out_coordinates, device,
                    stream)[1:]


def _nonzero(input, width, dtype, max_count, out_count, out_coordinates, device, stream,
             f="nonzero_coordinates"):
    key = None
    if (out_count is None and out_coordinates is None and _cpu_fresh(input, device, stream)
            and (width is None or type(width) is int)
            and (max_count is None or type(max_count) is int)):
        key = (f, input.dtype, input.shape, input.strides, width, dtype, type(dtype), max_count)
        try:
            run = _runners.get(key)
        except TypeError:  # an unhashable dtype argument: the checks below say what is wrong
            run = key = None
        if run is not None:
            return (target_cpu,) + run(input)
    if _is_dask(input):
        from . import chunked
        _no_outputs_for_dask(f, stream, out_count=out_count, out_coordinates=out_coordinates)
        return (None,) + chunked.nonzero(input, width, dtype, max_count, device, f)
    target, x = resolve(input, device, f)
    _check_stream(target, stream, f)
    v.check_dtype(x.dtype, v.NONZERO_DTYPES, f)
    v.check_ndim(x.ndim, f)
    v.check_strides(x, "input", f)
    w = v.nonzero_width(x.shape, width, f)
    dt = v.coord_dtype(dtype, x.size, f)
    rows = v.max_count(max_count, x.size, dt, f)
    if target.MAX_ELEMENTS is not None and x.size > target.MAX_ELEMENTS:
        raise ValueError(f"{f}(): input has {x.size} elements; the {target.name} target counts "
                         f"at most {target.MAX_ELEMENTS}")
    if key is not None:
        _remember(key, lambda: target_cpu.nonzero_runner(x, w, dt, rows))
        return (target_cpu,) + _runners[key](x)
    oc = ox = None
    if out_count is not None:
        oc = _check_out(target, out_count, dt, None, "out_count", f)
        if oc.size != 1:
            raise ValueError(f"{f}(): out_count has shape {tuple(oc.shape)}; it must hold "
                             f"exactly one element")
    if out_coordinates is not None:
        ox = _check_out(target, out_coordinates, dt, None, "out_coordinates", f)
        v.coordinates_matrix_shape(ox.shape, rows, w, f=f)
    if oc is not None and ox is not None and target.overlaps(oc, ox) and \
            target.shares_memory(oc, ox):
        raise ValueError(f"{f}(): out_count and out_coordinates overlap in memory; the count "
                         f"would overwrite a coordinate")
    # Where the call writes: the caller's outputs, or new arrays where none was given or
    # where an output overlaps the input (then copied over, as if the input had been read
    # first).
    aliased = any(o is not None and target.overlaps(x, o) for o in (oc, ox))
    new_count = target.empty((1,), dt, stream, x) if oc is None or aliased else None
    new_coords = target.empty((rows, w), dt, stream, x) if ox is None or aliased else None
    wc = oc if new_count is None else target.describe(new_count, "out_count", f)
    wx = ox if new_coords is None else target.describe(new_coords, "out_coordinates", f)
    target.nonzero(x, w, wc, wx, stream, rows)
    if aliased:
        if oc is not None:
            target.copy_into(wc, oc, stream)
        if ox is not None and rows and w:
            target.copy_into(wx, target.leading_rows(ox, rows), stream)
    return (target, new_count if out_count is None else out_count,
            new_coords if out_coordinates is None else out_coordinates)


def argwhere(input, *, device=None, stream=None):
    """The compact ``(count, ndim)`` int64 coordinates of the non-zero elements,
    a drop-in for ``numpy.argwhere`` (inputs of 1 to 8 dimensions).

    On CUDA this reads the count back to the host, so it waits for the GPU once.
    """
    target, count, coords = _nonzero(input, None, np.int64, None, None, None, device, stream,
                                     "argwhere")
    if target is None:  # a dask array: the compact rows, lazily
        return coords
    n = target.read_count(count, stream)
    rows = coords[:n]
    if 2 * n < coords.shape[0]:
        rows = target.copy(rows, stream)
    return rows
