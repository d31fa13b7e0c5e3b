"""The CUDA target: plans made once per call shape, bound per call.

Arguments arrive validated (see :mod:`dmlnumba.dispatch`) and described by
:class:`~dmlnumba.gpu.views.DeviceView`; the stream arrives as its raw
handle (:func:`~dmlnumba.gpu.views.call_stream`).  Inputs are read in place,
whatever their strides; nothing waits for the GPU.  NumPy inputs are copied to
the device first.

A plan (:class:`NonzeroPlan`, :class:`SlicePlan`) holds everything a call of one
shape needs beyond addresses: the kernel variant, the launch geometry and the
parameter block, which is passed by value.  A launch is therefore
self-contained on its stream: nothing is allocated for it but what the
caller's allocator gives, nothing it reads is host state that a CUDA graph's
replay would repeat, and the nonzero look-back buffer is zeroed by a memset on
the same stream (as CUB initialises its tile status per call).  Calls on
different streams share nothing but the plans (no lock).
"""

import functools
import sys

import numpy as np
from numba import cuda

from .. import grad as _grad
from .. import target as _shared
from ..arrays import library
from ..interop import bfloat16_result
from ..layout import c_strides, scatter_window
from ..validation import shares_memory as shares_memory_exact
from ..validation import uint_of_size
from . import tile_status as ts
from .devices import current_device, on, peer_copy
from .memory import current_context, scratch, stage, upload, zero_bytes  # noqa: F401
from .plans import _arg, fill_plan, grad_plan, nonzero_plan, one_pass, slice_plan
from .runners import _release, nonzero_runner, slice1_runner  # noqa: F401  (the interface)
from .runners import slice_grad_runner as grad_runner
from .sim import SIM
from .streams import (  # noqa: F401  (the target's interface)
    call_stream,
    capturing,
    check_stream,
    core_stream,
    numba_stream,
    refuse_capture,
    torch_device,
)
from .views import (  # noqa: F401  (the target's interface)
    DeviceView,
    Flat,
    check_aligned,
    describe,
    elsewhere,
    flat,
    host_view,
    new_array,
    staged,
    strided_view,
    to_host,
    to_jax,
    view_of,
)

name = "cuda"
#: Largest nonzero input: the look-back status words count to 2**VALUE_BITS - 1.
MAX_ELEMENTS: int | None = (1 << ts.VALUE_BITS) - 1
#: A new zero-filled output costs a memset, which slice_grad makes only where the
#: window leaves elements out.
ZEROS_FREE = False
#: slice_grad zeroes the window's complement box by box (:func:`dmlnumba.grad.scatter`)
#: where the window holds this many bytes a box (a box costs a launch), the whole
#: output otherwise.
ZERO_BOX_BYTES = 1 << 26


def device_count():
    return len(cuda.gpus)


def is_writeable(v):
    return not v.readonly


def as_device_array(x, device, func, name, lib=None):
    """The input as a :class:`DeviceView` on device ``device`` (an ordinal; None: a
    CUDA array's own device, the current device for a NumPy array).  A NumPy
    input, or a CUDA array on another device, is staged to be copied there after
    validation (nothing is copied before the checks pass)."""
    if isinstance(x, np.ndarray):
        return staged(x, current_device() if device is None else device)
    v = check_aligned(view_of(x, lib), name, func)
    if device is None or device == v.device or SIM:
        return v
    return elsewhere(v, device)


def _context(v):
    """The guard of a call reading ``v``: its device's context current inside."""
    return on(v.device)


def empty(shape, dtype, stream, like, lib=None, func="dmlnumba"):
    """A new output of library ``lib`` on ``like``'s device, for use on stream handle
    ``stream`` (see :func:`~dmlnumba.gpu.views.new_array`)."""
    with _context(like):
        return new_array(lib, shape, dtype, stream, like, func)


def _materialize(v, handle, func):
    """Copy a staged input to the call's device (a NumPy input uploaded, one on
    another GPU copied over): ``(view, staged)`` (the staged memory's address to give
    back on the stream after the launch, 0 for none: :func:`_release`).  Runs with the
    call's device current."""
    if v.home is not None:
        return _fetch(v, handle, func)
    if v.host is None:
        return v, 0
    refuse_capture(handle, func, "copies a NumPy input to the GPU")
    h = np.ascontiguousarray(v.host)
    if SIM:
        d = cuda.to_device(h if all(st >= 0 for st in h.strides) else h.copy())
        return view_of(d), 0
    ptr = upload(h, handle, v.device)
    strides = tuple(st * h.itemsize for st in c_strides(h.shape))
    return DeviceView(None, h.shape, strides, h.dtype, ptr, False, v.device), ptr


def _fetch(v, handle, func):
    """An input on another GPU (``v.home``) copied to a new buffer on the call's
    device (the bytes it spans, so its strides stay), ordered after the work on
    its library's current stream there (see :func:`~dmlnumba.gpu.devices.peer_copy`)."""
    refuse_capture(handle, func, "copies its input from another GPU")
    p, span, _, _ = flat(v)
    n = span * v.itemsize
    q = stage(n, handle, v.device)
    try:
        src_stream = call_stream(v.lib, None, DeviceView(v.obj, (), (), v.dtype, 0, True, v.home))
        peer_copy(q, v.device, p, v.home, n, src_stream, handle)
    except BaseException:
        _release(q, handle)
        raise
    at = q + (v.ptr - p)
    return DeviceView(None, v.shape, v.strides, v.dtype, at, False, v.device, lib=v.lib), q


# --------------------------------------------------------------------- the general path


def slice1(x, starts, steps, out, stream, fresh=False, func="slice1"):
    with _context(x):
        x, staged = _materialize(x, stream, func)
        try:
            if not fresh and _overlaps(x, out):
                tmp = view_of(new_array(None, out.shape, out.dtype, stream, x, func))
                slice1(x, starts, steps, tmp, stream, func=func)
                slice1(tmp, (0,) * out.ndim, (1,) * out.ndim, out, stream, func=func)
            else:
                slice_plan(x, starts, steps, out).launch(stream, x.ptr, out.ptr)
        finally:
            _release(staged, stream)


def nonzero(x, width, count, coords, stream, limit=None, func="nonzero_coordinates"):
    """``limit``: the rows to write at most (default: every element's)."""
    if limit is None:
        limit = x.size
    if not width or not coords.size or not limit:  # no coordinates to write
        width = limit = 0
    with _context(x):
        if x.size == 0:
            cp, _, cbase, _ = flat(count)
            if SIM:
                _arg(cp, cbase + 1, count.itemsize)[cbase] = 0
            else:
                zero_bytes(cp + cbase * count.itemsize, count.itemsize, stream)
            return
        x, staged = _materialize(x, stream, func)
        try:
            plan = nonzero_plan(x, width, count, coords, limit)
            out = coords if width else count
            plan.launch(stream, x.ptr, out.ptr, count.ptr, _scratch(x))
        finally:
            _release(staged, stream)


def slice_grad(g, starts, steps, out, stream, zeroed=False):
    """slice_grad's writes: one pass where the window's rows are not whole (every
    output element written once, :func:`~dmlnumba.gpu.plans.one_pass`), else
    :func:`dmlnumba.grad.scatter` (zeros, of the whole output or of the window's
    complement box by box, then one SLICE1 copy into the window's view)."""
    if not one_pass(g, starts, steps, out):
        _grad.scatter(_self, g, starts, steps, out, stream, zeroed)
        return
    with _context(g):
        g, staged = _materialize(g, stream, "slice_grad")
        try:
            grad_plan(g, starts, steps, out).launch(stream, g.ptr, out.ptr)
        finally:
            _release(staged, stream)


def slice_grad_runner(g, starts, steps, shape, lib, out=None, stream=None):
    """A repeated slice_grad (:func:`~dmlnumba.gpu.runners.slice_grad_runner`), zeroing
    the window's complement box by box where :func:`dmlnumba.grad.zero_boxes` says
    so, else the whole output; None where the call keeps none."""
    lows, spacing, _, _ = scatter_window(starts, steps, g.shape)
    boxes = _grad.zero_boxes(_self, g, lows, spacing, shape)
    return grad_runner(g, starts, steps, shape, lib, out, tuple(boxes), stream)


def zeros(shape, dtype, stream, like, lib=None, func="dmlnumba"):
    """A new output (see :func:`empty`) zeroed by a memset on the stream."""
    a = empty(shape, dtype, stream, like, lib, func)
    zero_views([describe(a, "out", func)], stream)
    return a


def zero_views(views, stream):
    """Every element of each view set to zero bits on the stream: a memset of its span
    where its elements fill it (new outputs), else the slice tiles storing zeros over
    it (:class:`~dmlnumba.gpu.plans.SlicePlan`'s ``fill``: nothing read)."""
    with _context(views[0]):
        for v in views:
            p, span, _, _ = flat(v)
            if span == v.size and not SIM:
                zero_bytes(p, span * v.itemsize, stream)
            else:
                fill_plan(v).launch(stream, v.ptr, v.ptr)


def _scratch(x):
    """The look-back buffer's allocator for a call reading ``x`` (see
    :func:`~dmlnumba.gpu.memory.scratch`)."""
    return scratch(x.lib, torch_device(x) if x.lib == "torch" else x.device)


def overlaps(a, b):
    """Whether ``a`` and ``b`` may share memory (their address ranges meet; a yes
    costs a copy).  A staged NumPy input is on the host, apart from any output."""
    if a.host is not None or b.host is not None:
        return False
    return _overlaps(a, b)


def _overlaps(a, b):
    if a.size == 0 or b.size == 0:
        return False
    a0, a1 = a.span()
    b0, b1 = b.span()
    return a0 < b1 and b0 < a1


def shares_memory(a, b):
    """Whether ``a`` and ``b`` share memory (exact)."""
    return shares_memory_exact(
        a.ptr, a.shape, a.strides, a.itemsize, b.ptr, b.shape, b.strides, b.itemsize
    )


def copy_into(src, dst, stream):
    """``dst[...] = src`` on the device, for views of the same number of elements
    (``src`` C-contiguous, as the call's own new arrays are)."""
    shape = tuple(dst.shape)
    strides = tuple(s * src.itemsize for s in c_strides(shape))
    v = DeviceView(src.obj, shape, strides, src.dtype, src.ptr, False, src.device, lib=src.lib)
    slice1(v, (0,) * len(shape), (1,) * len(shape), dst, stream)


def leading_rows(coords, n):
    """The first ``n`` rows of a coordinates matrix ((R, N) or DirectML's padded shapes)."""
    shape = tuple(coords.shape[:-2]) + (n, coords.shape[-1])
    c = coords
    return DeviceView(c.obj, shape, c.strides, c.dtype, c.ptr, c.readonly, c.device, lib=c.lib)


def synchronize(stream, device=None):
    """Wait for the work queued on stream handle ``stream`` (of device ``device``:
    the legacy default stream, 0, is each device's own)."""
    if device is None:
        numba_stream(stream).synchronize()
        return
    with on(device):
        numba_stream(stream).synchronize()


def read_count(count, stream, func="argwhere"):
    """The value of a 1-element count array (a DeviceView), read back: waits for the
    stream (refused inside a capture, which cannot read back)."""
    refuse_capture(stream, func, "reads the count back to the host")
    p, _, _, _ = flat(count)
    with on(count.device):
        s = numba_stream(stream)
        f = Flat(count.obj, p, 1, uint_of_size(count.itemsize))
        arr = cuda.as_cuda_array(f) if not SIM else cuda.to_device(host_view(f))
        h = arr.copy_to_host(stream=s)
        s.synchronize()
    return int(h[0])


# ------------------------------------------------------------------ the Target interface
# (dmlnumba.target.Target: the calls a prepared Call makes of this target)

_self = sys.modules[__name__]


def check_out(out, dtype, shape, name, func, x):
    """A caller's CUDA output as a view, checked (:func:`dmlnumba.target.check_out`)."""
    return _shared.check_out(_self, out, dtype, shape, name, func, x, library(out) == "torch")


def as_library(lib, a, bf16=None):
    """A new result (allocated in the input's library already) as handed back: for a
    JAX input, a JAX array through DLPack once the call's work is done (JAX reads on
    streams of its own; the call ran on the legacy default stream, where JAX inputs
    run); float16 bits as the bfloat16 dtype ``bf16`` (a PyTorch tensor's view, a
    JAX array bitcast: :func:`~dmlnumba.interop.bfloat16_result`)."""
    if lib == "jax":
        a = to_jax(a, describe(a, "result", "to_jax").device)
    return a if bf16 is None else bfloat16_result(lib, a, bf16)


#: slice1: :func:`dmlnumba.target.slice1_call` on this target.
slice1_call = functools.partial(_shared.slice1_call, _self)


#: slice_grad: :func:`dmlnumba.target.slice_grad_into` on this target.
slice_grad_call = functools.partial(_grad.slice_grad_into, _self)


#: nonzero_coordinates: :func:`dmlnumba.target.nonzero_call` on this target (the
#: shared step itself, bound: no call of this module's on the way).
nonzero_call = functools.partial(_shared.nonzero_call, _self)


def argwhere_call(c):
    """The compact rows: counted first (a wait), then written
    (:func:`dmlnumba.target.counted_rows`)."""
    rows = _shared.counted_rows(_self, c.x, c.width, c.dtype, c.lib, c.stream, c.f)
    if c.zero_d:
        rows = rows[:, :0]
    if c.transposed:
        rows = _transposed(rows, c)
    return as_library(c.lib, rows)


def _transposed(rows, c):
    """The ``(n, w)`` rows transposed into a new C-contiguous ``(w, n)`` array."""
    v = describe(rows, "coordinates", c.f)
    n, w = v.shape
    ks = call_stream(c.lib, c.stream, c.x, c.f)
    new = empty((w, n), v.dtype, ks, c.x, c.lib, c.f)
    if n and w:
        t = DeviceView(
            v.obj, (w, n), v.strides[::-1], v.dtype, v.ptr, v.readonly, v.device, lib=v.lib
        )
        slice1(t, (0, 0), (1, 1), describe(new, "coordinates", c.f), ks, fresh=True)
    return new


def empty_result(c, shape, dtype):
    """A new empty result of the input's library, on its device."""
    x = c.x
    ks = call_stream(c.lib, None, x, c.f)
    return as_library(c.lib, empty(shape, dtype, ks, x, c.lib, c.f), c.bf16)
