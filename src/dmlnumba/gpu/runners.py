"""The CUDA target's runners: repeated default calls (new outputs, the library's
current stream) bound once to a plan, so that a repeat skips validation and layout
work (see :mod:`dmlnumba.keys`)."""

import numpy as np

from ..layout import c_strides
from .devices import context_handle, on
from .memory import current_context, upload
from .plans import nonzero_plan, slice_plan
from .sim import SIM
from .streams import core_stream, refuse_capture
from .views import DeviceView, library_io


def _release(buf, handle):
    if buf is not None:
        buf.close(core_stream(handle))


def _new_view(shape, dtype):
    """A view of a new C-contiguous array (pointer filled in per call)."""
    strides = tuple(v * dtype.itemsize for v in c_strides(shape))
    return DeviceView(None, shape, strides, dtype, 0, False)


def _fast_ok(x, lib):
    """Whether calls like this one may take a runner: not a copy from another GPU,
    and for numba arrays, memory on the device of the array's context (the
    device its runner is kept under)."""
    if SIM or x.home is not None or not x.size:
        return False
    return lib != "numba" or x.obj.gpu_data.context.device.id == x.device


def _bare(x):
    """``x`` without its array (a runner must not keep its first input alive)."""
    return DeviceView(None, x.shape, x.strides, x.dtype, 0, False)


def _source(x, ptr_of, func):
    """A runner's input: ``(layout, read)``, ``read(obj, handle)`` giving ``(address,
    buffer to free after the launch or None)``.  A NumPy input sent to the GPU is
    uploaded, C-contiguous, per call (refused inside a capture)."""
    if x.host is None:
        return x, lambda obj, handle: (ptr_of(obj), None)
    dev = x.device

    def read(obj, handle):
        refuse_capture(handle, func, "copies a NumPy input to the GPU")
        buf, ptr = upload(np.ascontiguousarray(obj), handle, dev)
        return ptr, buf

    return _new_view(x.shape, x.dtype), read


def nonzero_runner(x, width, dtype, rows, lib):
    """A repeated default nonzero call on inputs of ``x``'s library, layout and
    device: new outputs from the library's allocator, one plan bound to the
    library's current stream, with the device's context current (made so, for the
    call, where the calling thread's is another's).  None where the call has no
    kernel to run (empty input, no rows or columns)."""
    if not (_fast_ok(x, lib) and width and rows):
        return None
    dev = x.device
    with on(dev):  # a first call from another device's thread: the plan, allocators there
        ptr_of, handle, alloc, scr = library_io(lib, x)
        new_count, new_coords = alloc((1,), dtype), alloc((rows, width), dtype)
    count, coords = _new_view((1,), dtype), _new_view((rows, width), dtype)
    x, read = _source(x, ptr_of, "nonzero_coordinates")
    go = nonzero_plan(_bare(x), width, count, coords, rows).launch
    want = context_handle(dev)

    def run(obj, entered=False):
        # The query the launch made anyway, made here: the guard adds a comparison (a
        # thread with no current context, 0, takes the guarded path too).
        ctx = current_context()
        if ctx != want and not entered:
            with on(dev):
                return run(obj, True)
        h = handle()
        xp, buf = read(obj, h)
        c, xs = new_count(), new_coords()
        go(h, xp, ptr_of(xs), ptr_of(c), scr, ctx)
        if buf is not None:
            _release(buf, h)
        return c, xs

    return run


def slice1_runner(x, starts, steps, out_shape, lib):
    """A repeated default slice1 call (see :func:`nonzero_runner`)."""
    if not _fast_ok(x, lib) or not all(out_shape):
        return None
    dev = x.device
    with on(dev):
        ptr_of, handle, alloc, _ = library_io(lib, x)
        new_out = alloc(tuple(out_shape), x.dtype)
    x, read = _source(x, ptr_of, "slice1")
    go = slice_plan(_bare(x), starts, steps, _new_view(tuple(out_shape), x.dtype)).launch
    want = context_handle(dev)

    def run(obj, entered=False):
        ctx = current_context()
        if ctx != want and not entered:
            with on(dev):
                return run(obj, True)
        h = handle()
        xp, buf = read(obj, h)
        o = new_out()
        go(h, xp, ptr_of(o), ctx)
        if buf is not None:
            _release(buf, h)
        return o

    return run
