"""The CUDA target's runners: repeated calls (on the library's current stream, into
new outputs or into given ones of the layouts their key holds) bound once to a plan,
so that a repeat skips validation and layout work (see :mod:`dmlnumba.keys`).  A
call into given outputs checks per call only what their addresses decide: whether
an output's bytes meet the input's or the other output's (a range test)."""

import functools
import operator
import sys

import numpy as np

from ..interop import torch_written
from ..layout import c_strides, scatter_window
from .devices import context_handle, on
from .memory import current_context, numba_context, pool, scratch, unstage, upload, zero_bytes
from .plans import fill_plan, grad_plan, nonzero_plan, one_pass, slice_plan
from .sim import SIM
from .streams import (
    call_stream,
    core_stream,
    refuse_legacy,
    torch_current_stream,
    torch_module,
    torch_of,
    torch_stream,
)
from .views import DeviceView, strided_view, to_jax

_modules = sys.modules


def _release(staged, handle):
    """Give a call's staged input (its address, 0 for none) back on the stream."""
    if staged:
        unstage(staged, handle)


def _new_view(shape, dtype):
    """A view of a new C-contiguous array (pointer filled in per call)."""
    strides = tuple(v * dtype.itemsize for v in c_strides(shape))
    return DeviceView(None, shape, strides, dtype, 0, False)


def _fast_ok(x, lib, stream):
    """Whether calls like this one may take a runner: not a copy from another GPU, a
    ``stream=`` only for PyTorch and CuPy inputs (whose allocators the runner asks
    for blocks on that stream), and for numba arrays, memory on the device of the
    array's context (the device its runner is kept under)."""
    if SIM or x.home is not None or not x.size:
        return False
    if stream is not None and lib not in ("torch", "cupy"):
        return False
    return lib != "numba" or x.obj.gpu_data.context.device.id == x.device


def _bare(x):
    """``x`` without its array (a runner must not keep its first input alive)."""
    return DeviceView(None, x.shape, x.strides, x.dtype, 0, False)


def _source(x, ptr_of):
    """A runner's input: ``(layout, read)``, ``read(obj, handle)`` giving ``(address,
    staged)``, ``staged`` the address to give back after the launch (0: none).  A
    NumPy input sent to the GPU is uploaded, C-contiguous, per call (on the legacy
    stream, whose handle :func:`library_io` gives: refused inside a capture)."""
    if x.host is None:
        return x, lambda obj, handle: (ptr_of(obj), 0)
    dev = x.device

    def read(obj, handle):
        ptr = upload(np.ascontiguousarray(obj), handle, dev)
        return ptr, ptr

    return _new_view(x.shape, x.dtype), read


def _given(v):
    """A given output's part of a runner: ``(layout, the function giving such an
    output's address, (first, end) of its bytes from that address, whether it is
    PyTorch's: marked written)``, from the first call's checked output ``v``."""
    lib = v.lib
    if lib == "torch":
        get = _modules["torch"].Tensor.data_ptr
    elif lib == "cupy":
        get = operator.attrgetter("data.ptr")
    else:  # numba's (the only other library a key holds, see layouts.out_layout)
        from .._internals import numba_pointer as get
    b = _bare(v)
    return b, get, b.span(), lib == "torch"


def _new_ptr(ptr_of, give):
    """The address reader of a runner's new outputs: the input library's, or where the
    library's results are handed back by a ``give`` step (JAX's), numba's (its new
    outputs are numba arrays until then)."""
    if give is None:
        return ptr_of
    from .._internals import numba_pointer

    return numba_pointer


def _apart(a, ra, b, rb):
    """Whether the bytes ``ra`` from address ``a`` and ``rb`` from ``b`` are apart."""
    return a + ra[1] <= b + rb[0] or b + rb[1] <= a + ra[0]


def nonzero_runner(x, width, dtype, rows, lib, oc=None, ox=None, stream=None):
    """A repeated nonzero call on inputs of ``x``'s library, layout and device: new
    outputs from the library's allocator where the call gives none (``oc`` and
    ``ox``: the first call's checked outputs, whose layouts a later call's share:
    its key holds them), one plan bound to the library's current stream (or to the
    call's ``stream=``, PyTorch's and CuPy's: see :func:`library_io`), with the
    device's context current (made so, for the call, where the calling thread's is
    another's).  With outputs given, the function of ``(input, out_count,
    out_coordinates)`` returns None, having launched nothing, where an output's
    bytes may meet the input's or the other output's (the full path then decides),
    and any call where an address is null (a PyTorch tensor whose storage was freed)
    or not a multiple of its item size (a view at a byte offset): the full path
    refuses those.
    None where the call has no kernel to run (empty input, no rows or columns)."""
    if not (_fast_ok(x, lib, stream) and width and rows):
        return None
    dev = x.device
    with on(dev):  # a first call from another device's thread: the plan, allocators there
        ptr_of, handle, alloc, scr, give = library_io(lib, x, stream, "nonzero_coordinates")
        new_count = alloc((1,), dtype) if oc is None else None
        new_coords = alloc((rows, width), dtype) if ox is None else None
    given = oc is not None or ox is not None
    new_ptr = _new_ptr(ptr_of, give)
    cl, cget, cr, cmark = (_new_view((1,), dtype), new_ptr, None, False)
    if oc is not None:
        cl, cget, cr, cmark = _given(oc)
    ol, oget, orr, omark = (_new_view((rows, width), dtype), new_ptr, None, False)
    if ox is not None:
        ol, oget, orr, omark = _given(ox)
    xr = None if x.host is not None else _bare(x).span()  # a staged input meets nothing
    x, read = _source(x, ptr_of)
    go = nonzero_plan(_bare(x), width, cl, ol, rows).launch
    want = context_handle(dev)
    xsz, csz, osz = x.itemsize, cl.itemsize, ol.itemsize

    def run(obj, out_count=None, out_coordinates=None, entered=False):
        # The query the launch made anyway, made here: the guard adds a comparison (a
        # thread with no current context, 0, takes the guarded path too).
        ctx = current_context()
        if ctx != want and not entered:
            with on(dev):
                return run(obj, out_count, out_coordinates, True)
        h = handle()  # (the legacy stream's refused inside a capture: nothing done yet)
        xp, staged = read(obj, h)
        try:  # (a staged input given back whatever happens: an interrupt, no memory)
            if not xp or xp % xsz:  # null (a freed tensor) or misaligned: refused by
                return None  # the full path (check_storage, check_aligned)
            c = new_count() if new_count is not None else out_count
            xs = new_coords() if new_coords is not None else out_coordinates
            cp, op = cget(c), oget(xs)
            if given:  # (an input whose bytes a given output may meet is never a staged one)
                if not cp or not op or cp % csz or op % osz:  # as the input's
                    return None
                if cr is not None and orr is not None and not _apart(cp, cr, op, orr):
                    return None
                if xr is not None:
                    if cr is not None and not _apart(xp, xr, cp, cr):
                        return None
                    if orr is not None and not _apart(xp, xr, op, orr):
                        return None
            go(h, xp, op, cp, scr, ctx)
        finally:
            _release(staged, h)
        if cmark or omark:  # as PyTorch's in-place ops mark the tensors they write
            _mark(c if cmark else None, xs if omark else None)
        if give is None:
            return c, xs
        return (c if new_count is None else give(c), xs if new_coords is None else give(xs))

    return run


def _for_stream(new, h, current, enter):
    """The allocation ``new`` made for work on stream ``h``: as it is where ``h`` is
    the library's current stream, else inside ``enter()`` (the library's context of
    that stream), so that the library's allocator hands the block out again only
    for work ordered after that stream's (as :func:`~dmlnumba.gpu.views.new_array`)."""

    def make():
        if current() == h:
            return new()
        with enter():
            return new()

    return make


def _mark(*tensors):
    """Bump the version counters of the given PyTorch tensors that a call wrote."""
    for t in tensors:
        if t is not None:
            torch_written(t)


def slice1_runner(x, starts, steps, out_shape, lib, out=None, stream=None):
    """A repeated slice1 call (see :func:`nonzero_runner`): a function of the input
    giving a new array, or (``out``: the first call's checked output) of ``(input,
    out)`` giving ``out``, or None where its bytes may meet the input's."""
    if not all(out_shape):
        return None
    return _copy_runner(x, starts, steps, tuple(out_shape), lib, out, "slice1", stream=stream)


def slice_grad_runner(x, starts, steps, shape, lib, out=None, boxes=(), stream=None):
    """A repeated slice_grad (see :func:`slice1_runner`): one launch of the one-pass
    kernel where the window's rows are not whole (:func:`~dmlnumba.gpu.plans.one_pass`,
    any ``out``); else the output zeroed (a memset, none where the window covers it;
    or with ``boxes``, the window's complement box by box,
    :func:`dmlnumba.grad.zero_boxes`), then one SLICE1 launch of the gradient into the
    window's elements, where ``out`` fills its bytes (no memset zeroes the gaps of one
    that does not: None, no runner)."""
    if one_pass(x, starts, steps, _new_view(tuple(shape), x.dtype) if out is None else out):
        # (every output element written once: the output zeroed by no memset)
        return _copy_runner(
            x, starts, steps, tuple(shape), lib, out, "slice_grad", plan=grad_plan, stream=stream
        )
    if out is not None and out.span()[1] - out.span()[0] != out.size * out.itemsize:
        return None
    lows, spacing, read_starts, read_steps = scatter_window(starts, steps, x.shape)
    window = (lows, spacing, x.shape, boxes)
    return _copy_runner(
        x, read_starts, read_steps, tuple(shape), lib, out, "slice_grad", window, stream=stream
    )


def _copy_runner(
    x, starts, steps, shape, lib, out, func, window=None, plan=slice_plan, stream=None
):
    """The runner of a SLICE1 copy from ``x`` (``starts``, ``steps``) into an output of
    ``shape`` (new from the library's allocator, or laid out like the first call's
    checked ``out``): the copy into the whole output (slice1), or with ``window``
    (slice_grad's ``(lows, spacing, shape, boxes)``) the output zeroed (by a memset, or
    where ``boxes`` lists the window's complement, by the slice tiles storing zeros
    box by box), then the copy into the window's view of it.  None where calls like
    this one take none."""
    if not _fast_ok(x, lib, stream):
        return None
    dev = x.device
    with on(dev):
        ptr_of, handle, alloc, _, give = library_io(lib, x, stream, func)
        new_out = alloc(shape, x.dtype) if out is None else None
    o, oget, orr, mark = (_new_view(shape, x.dtype), _new_ptr(ptr_of, give), None, False)
    if out is not None:
        o, oget, orr, mark = _given(out)
    dst, nbytes, low, fills = o, 0, 0, []
    if window is not None:
        *window, boxes = window
        dst = strided_view(o, *window)  # (its address: the window's offset in the output)
        for box in boxes:  # (their addresses too: offsets in the output)
            v = strided_view(o, *box)
            fills.append((fill_plan(v).launch, v.ptr))
        if o.size != x.size and not boxes:  # (a window as large as the output covers it)
            nbytes, low = o.size * x.itemsize, o.span()[0]
    off = dst.ptr
    xr = None if x.host is not None or out is None else _bare(x).span()
    x, read = _source(x, ptr_of)
    go = plan(_bare(x), starts, steps, dst).launch
    want = context_handle(dev)
    xsz = x.itemsize

    def run(obj, out=None, entered=False):
        ctx = current_context()
        if ctx != want and not entered:
            with on(dev):
                return run(obj, out, True)
        h = handle()  # (the legacy stream's refused inside a capture: nothing done yet)
        xp, staged = read(obj, h)
        try:  # (a staged input given back whatever happens)
            if not xp or xp % xsz:  # null (a freed tensor) or misaligned: refused by
                return None  # the full path (check_storage, check_aligned)
            o = new_out() if new_out is not None else out
            op = oget(o)
            if not op or op % xsz:  # (the output's items are the input's)
                return None
            if xr is not None and not _apart(xp, xr, op, orr):  # (xr: no staged input)
                return None
            if nbytes:
                zero_bytes(op + low, nbytes, h)
            for fill, at in fills:
                fill(h, op + at, op + at, ctx)
            go(h, xp, op + off, ctx)
        finally:
            _release(staged, h)
        if mark:  # as PyTorch's in-place ops mark the tensors they write
            torch_written(o)
        return o if give is None or new_out is None else give(o)  # (the caller's as it is)

    return run


def library_io(lib, v, stream=None, func="dmlnumba"):
    """For repeated default calls of library ``lib`` (PyTorch, CuPy, numba or JAX) on
    inputs on ``v``'s device (current when the functions are called): ``(address
    of an input, the current stream's handle, allocator, scratch, give)``; with a
    ``stream=`` (PyTorch's or CuPy's calls), that stream's handle, and an allocator
    whose arrays the library keeps for work on it (:func:`_for_stream`);
    ``allocator(shape, dtype)`` gives a function of no arguments that makes a new
    C-contiguous array of that shape and dtype, ``scratch`` is
    :func:`~dmlnumba.gpu.memory.scratch`'s ``(alloc, release)`` for the library, and
    ``give`` (None: the array itself) makes a new result the library's array: a JAX
    input's address is read once its work is done, its call runs on the legacy
    default stream into new numba arrays, handed back through
    :func:`~dmlnumba.gpu.views.to_jax`.  The legacy stream's handle (numba, JAX
    and NumPy inputs, or a ``stream=`` of handle 0) is given by :func:`_legacy`:
    refused inside a capture, as the full path refuses it, naming ``func`` (here
    too, before the pool is asked, the first call's way to its runner).
    The fast counterpart of :func:`~dmlnumba.gpu.streams.call_stream` and
    :func:`~dmlnumba.gpu.views.new_array` with ``stream=None``: bound
    built-ins (a method, ``functools.partial``, ``operator.attrgetter``) where the
    library has them, so a call runs few Python frames of its own.  CuPy calls
    reach it only where the current device is the input's (see
    ``dmlnumba.layouts.layout_key``)."""
    dev = v.device
    h = None if stream is None else call_stream(lib, stream, v, func)  # (the full path's)
    legacy = _legacy(func)
    if lib not in ("torch", "cupy") and h is None:
        legacy()  # a capture refuses the pool's and the scratch's first questions too
    if lib == "torch":
        torch = torch_module()
        empty, dtypes = torch.empty, torch_of
        current = functools.partial(torch_current_stream(torch), dev)

        def allocator(shape, dt):
            # new_empty of a template with no elements (and no memory), which gives the
            # dtype and device without keywords to parse; the sizes unpacked, which
            # PyTorch parses faster than a tuple.
            new = functools.partial(empty(0, dtype=dtypes[dt], device=dev).new_empty, *shape)
            if h is None:
                return new
            side = torch_stream(torch, h, dev)
            return _for_stream(new, h, current, lambda: torch.cuda.stream(side))

        handle = current if h is None else legacy if h == 0 else (lambda: h)
        return torch.Tensor.data_ptr, handle, allocator, scratch("torch", dev), None
    if lib == "cupy":
        import cupy

        get = cupy.cuda.get_current_stream

        def current_cupy():
            return get().ptr

        def cupy_alloc(shape, dt):
            new = functools.partial(cupy.ndarray, shape, dt)  # (cupy.empty's own call)
            if h is None:
                return new
            side = cupy.cuda.ExternalStream(h)
            return _for_stream(new, h, current_cupy, lambda: side)

        handle = current_cupy if h is None else legacy if h == 0 else (lambda: h)
        return operator.attrgetter("data.ptr"), handle, cupy_alloc, scratch("cupy", dev), None

    def numba_alloc(shape, dt):
        # Bound once: the pool's allocation on the legacy stream, and numba's array
        # made by copying one made once (numba_array_maker).
        from .._internals import numba_array_maker

        n = dt.itemsize
        for d in shape:
            n *= d
        take = functools.partial(pool(dev).allocate, max(n, 1), stream=core_stream(0))
        make = numba_array_maker(numba_context(dev), tuple(shape), dt)

        def new():
            buf = take()
            return make(int(buf.handle), buf)

        return new

    if lib == "jax":
        return (
            lambda a: a.block_until_ready().unsafe_buffer_pointer(),  # (JAX's streams)
            legacy,
            numba_alloc,
            scratch(None, dev),
            functools.partial(to_jax, device=dev),
        )
    from .._internals import numba_pointer

    return (numba_pointer, legacy, numba_alloc, scratch(None, dev), None)


def _legacy(func):
    """The legacy default stream's handle, 0, for a runner of ``func``, asked per call
    before anything is read, allocated or launched: a ValueError while PyTorch's or
    CuPy's current stream captures (:func:`~dmlnumba.gpu.streams.refuse_legacy`)."""

    def handle():
        refuse_legacy(func)
        return 0

    return handle
