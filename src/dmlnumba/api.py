"""The public API: validate everything, allocate, then hand over to a target.

Every check of a call runs before any output is allocated or written, so an
``out=`` array is untouched when a call raises.
"""

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import config, dispatch
from . import validation as v
from .arrays import _ASK, current_cupy_device, library
from .caches import Bounded
from .cpu import target as target_cpu
from .dispatch import resolve
from .interop import (
    as_library,
    bfloat16_out,
    check_jax_fits,
    one_element,
    torch_ops,
    torch_out,
    torch_view,
    torch_written,
    traced,
)
from .window import window  # noqa: F401  (re-exported)

#: Validated calls into new outputs (NumPy arrays on the CPU, PyTorch CUDA tensors
#: and CuPy arrays on their GPU), by everything their validation read (the input's
#: type, dtype, shape, strides and device, and the parameters): a repeat of such a
#: call skips validation and layout work.  Parameters are keys only when they are
#: tuples or lists of Python ints (so that 1.0 or True never stands for 1).
_runners = Bounded()  # runner functions (nonzero ones carry .lib, .target)


_modules = sys.modules


def _remember(key, run):
    _runners.put(key, run)


def _int_params(*params):
    """The parameters as a key: each a tuple of Python ints, or None where it is None;
    None where one is anything but a tuple or list of Python ints (such calls take
    the full path, which checks them)."""
    key = []
    for p in params:
        if p is not None:
            tp = type(p)
            if tp is list:
                p = tuple(p)
            elif tp is not tuple:
                return None
            for v in p:
                if type(v) is not int:
                    return None
        key.append(p)
    return tuple(key)


def _no_outputs_for_dask(f, stream, **outs):
    for name, o in outs.items():
        if o is not None:
            raise TypeError(
                f"{f}(): {name}= is not supported for dask arrays: the results are "
                f"new lazy dask arrays"
            )
    if stream is not None:
        raise ValueError(
            f"{f}(): stream= does not apply to dask arrays (each task runs on its "
            f"chunk's current stream)"
        )


def _fresh_key(input, lib, device, stream):
    """The layout part of a repeated call's key (and the settings' generation, so that
    a changed setting reaches the next call), for calls into new outputs on the
    input's own device: NumPy arrays (CPU), PyTorch CUDA tensors and CuPy arrays.
    None for anything else (those calls take the full path every time)."""
    if stream is not None:
        return None
    tp = type(input)
    if tp is np.ndarray:
        if device is None or device == "cpu":
            return (tp, input.dtype, input.shape, input.strides, device, config.GENERATION)
        if device == "cuda" and dispatch._cuda is not None:
            # The current device, which "cuda" names for a host input (a runner per device).
            dev = dispatch._cuda.current_device()
            return (tp, input.dtype, input.shape, input.strides, device, dev, config.GENERATION)
        return None
    if device is not None:
        return None
    if lib == "torch":
        if not input.is_cuda or input.is_neg():
            return None
        return (
            tp,
            input.dtype,
            input.shape,
            input.stride(),
            input.get_device(),
            input.requires_grad,
            input.layout,
            config.GENERATION,
        )
    if lib == "cupy":
        # A runner allocates on CuPy's current device: other devices take the full path.
        dev = input.data.device_id
        if dev != current_cupy_device():
            return None
        return (tp, input.dtype, input.shape, input.strides, dev, config.GENERATION)
    if lib == "numba":
        # The device of the array's numba context (a runner is made only where that is
        # its memory's, see gpu.target._fast_ok).
        try:
            dev = input.gpu_data.context.device.id
        except AttributeError:  # no numba context to tell: the full path, every time
            return None
        return (tp, input.dtype, input.shape, input.strides, dev, config.GENERATION)
    return None


def _numpy_nonzero_key(f, input, width, dtype, max_count):
    """The key of a nonzero call on the NumPy array ``input`` into new outputs: flat
    (:func:`_fresh_key`'s, unnested), 0.15 us less of a 1000-element call's 5 us.
    ``width`` and ``max_count`` must be None or ints (so that 1.0 or True never
    stands for 1): the callers check."""
    return (
        f,
        input.dtype,
        input.shape,
        input.strides,
        width,
        dtype,
        type(dtype),
        max_count,
        config.GENERATION,
    )


def _plain_dtype(dtype):
    """Whether ``dtype`` may be part of a runner's key: a type, a string, a NumPy or a
    PyTorch dtype, whose hash runs none of the caller's code (which could change the
    input)."""
    tp = type(dtype)
    return tp is type or tp is str or issubclass(tp, np.dtype) or tp.__module__ == "torch"


def _nonzero_runner(f, input, lib, width, dtype, max_count, device, stream):
    """``(key, runner)`` of a repeated nonzero call into new outputs: the key None
    where this is not such a call, the runner None where none is kept yet."""
    if (
        (width is None or type(width) is int)
        and (max_count is None or type(max_count) is int)
        and _plain_dtype(dtype)
    ):
        key: tuple[Any, ...] | None = None
        if type(input) is np.ndarray and stream is None and (device is None or device == "cpu"):
            key = _numpy_nonzero_key(f, input, width, dtype, max_count)
        else:
            fresh = _fresh_key(input, lib, device, stream)
            if fresh is not None:
                key = (f, fresh, width, dtype, type(dtype), max_count)
        if key is not None:
            try:
                return key, _runners.get(key)
            except TypeError:  # an unhashable dtype argument: the checks say what is wrong
                pass
    return None, None


def _numpy_slice_key(input, offsets, sizes, strides, output_sizes, out):
    """The key of a slice1 call on the NumPy array ``input`` (``device`` and ``stream``
    None) by the identity of its parameters: a repeat that passes the same tuple
    objects (a stored window, literal tuples) finds its runner without reading a
    parameter (0.7 us of a 1000-element call's 2.8 for the checks of
    :func:`_int_params`).  Only tuples of Python ints are kept under such a key
    (immutable, so the same object means the same values), and the entry holds
    them, so that no other object can take their ids while it lives.  ``out``: a
    NumPy output's layout and writeable flag are part of the key (None where it is
    any other kind of array)."""
    key = (
        "slice1",
        id(offsets),
        id(sizes),
        id(strides),
        id(output_sizes),
        input.dtype,
        input.shape,
        input.strides,
        config.GENERATION,
    )
    if out is None:
        return key
    if type(out) is not np.ndarray:
        return None
    return key + (out.dtype, out.shape, out.strides, out.flags.writeable)


def _tuples(*params):
    """Whether each parameter is a tuple or None (the kinds :func:`_numpy_slice_key`
    may hold)."""
    return all(p is None or type(p) is tuple for p in params)


def _check_stream(target, stream, func):
    if stream is not None and target.name != "cuda":
        raise ValueError(f"{func}(): stream= applies to CUDA calls only; this call runs on the CPU")
    target.check_stream(stream, func)


def _check_out(target, out, dtype, shape, name, func, x):
    """The target's description of a caller's output array, checked (on a GPU: on
    the device the call reading ``x`` runs on).  A PyTorch tensor is checked and
    marked as PyTorch's own in-place ops do it (see :func:`~dmlnumba.interop.torch_out`)."""
    pt = library(out) == "torch"
    if pt:
        out = torch_out(out, dtype, name, func)
    o = target.describe(out, name, func)
    if target.name == "cuda" and o.device != x.device:
        raise ValueError(
            f"{func}(): {name} is on cuda:{o.device}, and the call runs on cuda:{x.device}; "
            f"pass an output on cuda:{x.device} (or device='cuda:{o.device}')"
        )
    v.check_out(o, dtype, shape, name, func)
    if not target.is_writeable(o):
        raise ValueError(f"{func}(): {name} is read-only")
    v.check_no_overlap(o, name, func)
    if pt:
        torch_written(out)
    return o


def slice1(
    input: Any,
    offsets: Sequence[int],
    sizes: Sequence[int],
    strides: Sequence[int],
    output_sizes: Sequence[int] | None = None,
    *,
    out: Any = None,
    device: str | None = None,
    stream: Any = None,
) -> Any:
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
    if traced(input, out):
        return torch_ops().slice1_call(
            input, offsets, sizes, strides, output_sizes, out, device, stream
        )
    np_key = None
    if type(input) is np.ndarray and device is None and stream is None:
        # A repeat of a NumPy call with the very same parameter tuples (see
        # _numpy_slice_key): its runner, with no checks to redo.
        np_key = _numpy_slice_key(input, offsets, sizes, strides, output_sizes, out)
        if np_key is not None:
            run = _runners.get(np_key)
            if run is not None:
                if out is None:
                    return run[0](input)
                if run[0](input, out):  # False where out may overlap the input
                    return out
    key = None
    lib = library(input)  # asked once: every layer below is told
    if out is None:
        params = _int_params(offsets, sizes, strides, output_sizes)
        fresh = _fresh_key(input, lib, device, stream) if params is not None else None
        if fresh is not None:
            key = ("slice1", fresh, params)
            run = _runners.get(key)
            if run is not None:
                if np_key is not None and _tuples(offsets, sizes, strides, output_sizes):
                    _remember(np_key, (run, offsets, sizes, strides, output_sizes))
                return run(input)
    f = "slice1"
    offsets_in, sizes_in, strides_in, sizes_out_in = offsets, sizes, strides, output_sizes
    # Read once, before the input's layout: a parameter's __index__ may change the input.
    offsets, sizes, strides, output_sizes = v.slice1_args(offsets, sizes, strides, output_sizes)
    if lib == "dask":
        from . import chunked

        _no_outputs_for_dask(f, stream, out=out)
        return chunked.slice1(input, offsets, sizes, strides, output_sizes, device, slice1)
    if lib == "jax":  # JAX computes asynchronously, on streams of its own
        input.block_until_ready()
    elif lib == "torch":
        input, bf16 = torch_view(input, f)
        if bf16:  # copied as float16 (the same two bytes)
            o = out if out is None else bfloat16_out(out, f)
            r = slice1(
                input, offsets, sizes, strides, output_sizes, out=o, device=device, stream=stream
            )
            return out if out is not None else r.view(_modules["torch"].bfloat16)
    target, x = resolve(input, device, f, lib=lib)
    _check_stream(target, stream, f)
    v.check_dtype(x.dtype, v.SLICE_DTYPES, f)
    starts, steps, out_shape = v.slice1_params(x.shape, offsets, sizes, strides, output_sizes)
    v.check_strides(x, "input", f)
    if key is not None:
        run = target.slice1_runner(x, starts, steps, out_shape, lib)
        if run is not None:
            _remember(key, run)
            if np_key is not None and _tuples(offsets_in, sizes_in, strides_in, sizes_out_in):
                _remember(np_key, (run, offsets_in, sizes_in, strides_in, sizes_out_in))
            return run(input)
    ks = target.call_stream(lib, stream, x)
    if out is None:
        new = target.empty(out_shape, x.dtype, ks, x, lib, f)
        target.slice1(x, starts, steps, target.describe(new, "out", f), ks, fresh=True)
        return as_library(lib, target, new)
    o = _check_out(target, out, x.dtype, out_shape, "out", f, x)
    if (
        np_key is not None
        and o is out
        and target is target_cpu
        and _tuples(offsets_in, sizes_in, strides_in, sizes_out_in)
        and _int_params(offsets_in, sizes_in, strides_in, sizes_out_in) is not None
    ):
        run = target.slice1_out_runner(x, starts, steps, o)
        _remember(np_key, (run, offsets_in, sizes_in, strides_in, sizes_out_in))
        if run(input, out):
            return out
    target.slice1(x, starts, steps, o, ks)
    return out


def nonzero_coordinates(
    input: Any,
    width: int | None = None,
    *,
    dtype: Any = np.uint32,
    max_count: int | None = None,
    out_count: Any = None,
    out_coordinates: Any = None,
    device: str | None = None,
    stream: Any = None,
) -> tuple[Any, Any]:
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

    ``max_count`` bounds the coordinates matrix: it gets ``min(max_count,
    input.size)`` rows and holds the first ``min(count, max_count)`` coordinates,
    while ``count`` stays the true count, so an overflow shows in the count
    without a host synchronization.
    """
    if traced(input, out_count, out_coordinates):
        return torch_ops().nonzero_call(
            input, width, dtype, max_count, out_count, out_coordinates, device, stream
        )
    if isinstance(input, (list, tuple)):  # read as numpy.asarray reads it, as argwhere does
        input = v.argwhere_input(input, "nonzero_coordinates")
    key = None
    lib: str | None = _ASK
    if out_count is None and out_coordinates is None:  # a repeated call: its runner
        if (
            type(input) is np.ndarray
            and device is None
            and stream is None
            and (width is None or type(width) is int)
            and (max_count is None or type(max_count) is int)
            and (type(dtype) is type or _plain_dtype(dtype))  # the default first: no call
        ):
            # _nonzero_runner's NumPy case without the call through it, and
            # _numpy_nonzero_key's tuple built in place: 0.3-0.5 us of a 1000-element
            # call's 2.2-6 (docs/PERFORMANCE.md).
            key = (
                "nonzero_coordinates",
                input.dtype,
                input.shape,
                input.strides,
                width,
                dtype,
                type(dtype),
                max_count,
                config.GENERATION,
            )
            try:
                run = _runners.get(key)
            except TypeError:  # an unhashable dtype argument: the checks say what is wrong
                key = run = None
        else:
            lib = library(input)  # asked once: every layer below is told
            key, run = _nonzero_runner(
                "nonzero_coordinates", input, lib, width, dtype, max_count, device, stream
            )
        if run is not None:
            return run(input)
    lib, target, count, coords = _nonzero(
        input, width, dtype, max_count, out_count, out_coordinates, device, stream, key=key, lib=lib
    )[:4]
    if out_count is None:
        count = as_library(lib, target, count)
    if out_coordinates is None:
        coords = as_library(lib, target, coords)
    return count, coords


def _nonzero(
    input,
    width,
    dtype,
    max_count,
    out_count,
    out_coordinates,
    device,
    stream,
    f="nonzero_coordinates",
    key=None,
    lib=_ASK,
):
    """``(library, target, count, coordinates, call)``; ``call`` is None where the
    call ran through a new runner (stored under ``key``, the caller's
    :func:`_nonzero_runner`, which found none), else ``(stream, input, count view)``.
    CPU argwhere: ``count`` is None and ``coordinates`` the compact rows."""
    # Read once, before the input's layout: a parameter's __index__ may change the input.
    width, dtype, max_count = v.nonzero_args(width, dtype, max_count, f)
    if lib == _ASK:
        lib = library(input)
    if lib == "dask":
        from . import chunked

        _no_outputs_for_dask(f, stream, out_count=out_count, out_coordinates=out_coordinates)
        return (
            (None, None)
            + chunked.nonzero(input, width, dtype, max_count, device, f, nonzero_coordinates)
            + (None,)
        )
    if lib == "jax":  # JAX computes asynchronously, on streams of its own
        input.block_until_ready()
    elif lib == "torch":
        input, bf16 = torch_view(input, f)
        if bf16:  # counted as float16: the same zeros (+0, -0), the rest non-zero
            return _nonzero(
                input, width, dtype, max_count, out_count, out_coordinates, device, stream, f
            )
    target, x = resolve(input, device, f, lib=lib)
    _check_stream(target, stream, f)
    v.check_dtype(x.dtype, v.NONZERO_DTYPES, f)
    v.check_ndim(x.ndim, f)
    v.check_strides(x, "input", f)
    w = v.nonzero_width(x.shape, width, f)
    dt = v.coord_dtype(dtype, x.size, f)
    rows = v.max_count(max_count, x.size, dt, f)
    if lib == "jax":
        check_jax_fits(x.shape, dt, f)
    if target.MAX_ELEMENTS is not None and x.size > target.MAX_ELEMENTS:
        raise ValueError(
            f"{f}(): input has {x.size} elements; the {target.name} target counts "
            f"at most {target.MAX_ELEMENTS}"
        )
    if f == "argwhere" and target is target_cpu:  # the compact rows, counted first
        run = target_cpu.argwhere_runner(x)
        if key is not None:
            run.lib, run.target = lib, target
            _remember(key, run)
        return lib, target, None, run(x), None
    if f == "argwhere":  # on a GPU: counted first (a wait), then the compact rows written
        return lib, target, None, _cuda_argwhere(target, lib, x, w, dt, stream), None
    if key is not None:
        run = target.nonzero_runner(x, w, dt, rows, lib)
        if run is not None:
            run.lib, run.target = lib, target
            _remember(key, run)
            return (lib, target) + run(input) + (None,)
    oc = ox = None
    if out_count is not None:
        oc = _check_out(target, out_count, dt, None, "out_count", f, x)
        if oc.size != 1:
            raise ValueError(
                f"{f}(): out_count has shape {tuple(oc.shape)}; it must hold exactly one element"
            )
    if out_coordinates is not None:
        ox = _check_out(target, out_coordinates, dt, None, "out_coordinates", f, x)
        v.coordinates_matrix_shape(ox.shape, rows, w, f=f)
    if (
        oc is not None
        and ox is not None
        and target.overlaps(oc, ox)
        and target.shares_memory(oc, ox)
    ):
        raise ValueError(
            f"{f}(): out_count and out_coordinates overlap in memory; the count "
            f"would overwrite a coordinate"
        )
    # Where the call writes: the caller's outputs, or new arrays where none was given or
    # where an output overlaps the input (then copied over, as if the input had been read
    # first).
    aliased = any(o is not None and target.overlaps(x, o) for o in (oc, ox))
    ks = target.call_stream(lib, stream, x)
    new_count = target.empty((1,), dt, ks, x, lib, f) if oc is None or aliased else None
    new_coords = target.empty((rows, w), dt, ks, x, lib, f) if ox is None or aliased else None
    wc = oc if new_count is None else target.describe(new_count, "out_count", f)
    wx = ox if new_coords is None else target.describe(new_coords, "out_coordinates", f)
    target.nonzero(x, w, wc, wx, ks, rows, func=f)
    if aliased:
        if oc is not None:
            target.copy_into(wc, oc, ks)
        if ox is not None and rows and w:
            target.copy_into(wx, target.leading_rows(ox, rows), ks)
    return (
        lib,
        target,
        new_count if out_count is None else out_count,
        new_coords if out_coordinates is None else out_coordinates,
        (ks, x, wc),
    )


def _cuda_argwhere(target, lib, x, w, dt, stream, f="argwhere"):
    """The compact ``(count, ndim)`` rows of a GPU input: a counting launch, the count
    read back (refused inside a capture), then a launch that writes the rows into
    an array of exactly that many (no worst-case buffer)."""
    ks = target.call_stream(lib, stream, x)
    wc = target.describe(target.empty((1,), dt, ks, x, lib, f), "count", f)
    target.nonzero(x, 0, wc, wc, ks, 0, func=f)
    n = target.read_count(wc, ks, f)
    rows = target.empty((n, w), dt, ks, x, lib, f)
    if n and w:
        target.nonzero(x, w, wc, target.describe(rows, "coordinates", f), ks, n, func=f)
    return rows


def argwhere(input: Any, *, device: str | None = None, stream: Any = None) -> Any:
    """The compact ``(count, ndim)`` int64 coordinates of the non-zero elements,
    a drop-in for ``numpy.argwhere`` (inputs of 1 to 8 dimensions), as an array
    of the input's library (PyTorch, CuPy, numba or NumPy).

    Lists, tuples and scalars are read as ``numpy.asarray`` reads them; a 0-d input
    gives shape ``(1, 0)`` or ``(0, 0)``, as NumPy's.  On the CPU an input
    of more than 65536 elements is counted first, so that no worst-case buffer is
    allocated.  On CUDA this reads the count back to the host, so it waits for the
    GPU once.
    """
    if traced(input):
        return torch_ops().argwhere_call(input, device, stream)
    lib = library(input)
    key, run = _nonzero_runner("argwhere", input, lib, None, np.int64, None, device, stream)
    if run is not None:  # a repeated CPU call (CPU runners only: see _nonzero)
        return run(input)
    input = v.argwhere_input(input)
    if len(input.shape) == 0:  # NumPy's (1, 0) or (0, 0): its one element's row, no columns
        return argwhere(one_element(input), device=device, stream=stream)[:, :0]
    lib, target, count, coords = _nonzero(
        input, None, np.int64, None, None, None, device, stream, "argwhere", key
    )[:4]
    if target is None:  # a dask array: the compact rows, lazily
        return coords
    return as_library(lib, target, coords)  # the compact rows, counted first
