"""slice_grad's steps, shared by the array targets (as :mod:`dmlnumba.target`'s are):
the call (:func:`slice_grad_into`) and its writes as zeros plus one SLICE1 copy
(:func:`scatter`).  They take the target module as ``t`` and call only its interface."""

import math
from typing import Any

from .layout import complement_boxes, scatter_window
from .target import Call


def slice_grad_into(t: Any, c: Call) -> Any:
    """slice_grad on the target ``t``: the runner the call keeps (``c.key``, new outputs
    only), where ``t`` makes one; else the output (new, or the caller's ``out``
    checked) written whole by the target's ``slice_grad``.  A gradient that may
    share memory with ``out`` is copied first, so that it is read whole before the
    output is written.  A new output comes zeroed where the target's zeros cost
    nothing more (``ZEROS_FREE``: the CPU's, whose pages the system zeroes)."""
    g, f = c.x, c.f
    if c.key is not None and c.out is None:  # a repeat takes the runner kept here
        r = c.keep_and_run(
            t.slice_grad_runner(g, c.starts, c.steps, c.shape, c.lib, None, c.stream)
        )
        if r is not None:
            return r
    ks = t.call_stream(c.lib, c.stream, g, f)
    new = None
    if c.out is None:
        zeroed = t.ZEROS_FREE and g.size != math.prod(c.shape)
        new = (t.zeros if zeroed else t.empty)(c.shape, g.dtype, ks, g, c.lib, f)
        o = t.describe(new, "out", f)
    else:
        zeroed = False
        o = t.check_out(c.out, g.dtype, c.shape, "out", f, g)
        if c.key is not None and not t.overlaps(g, o):  # a repeat takes the runner kept here
            run = t.slice_grad_runner(g, c.starts, c.steps, c.shape, c.lib, o, c.stream)
            if run is not None:
                if c.keep(run)(c.input, c.out) is not None:
                    return c.given_out
        if t.overlaps(g, o):
            tmp = t.describe(t.empty(g.shape, g.dtype, ks, g, None, f), "input_gradient", f)
            t.slice1(g, (0,) * g.ndim, (1,) * g.ndim, tmp, ks, fresh=True)
            g = tmp
    t.slice_grad(g, c.starts, c.steps, o, ks, zeroed)
    return c.given_out if new is None else t.as_library(c.lib, new, c.bf16)


def scatter(t: Any, g: Any, starts: Any, steps: Any, out: Any, stream: Any, zeroed: bool) -> None:
    """SLICE_GRAD as zeros and one SLICE1 copy on the target ``t``: the elements outside
    the window zeroed (unless ``zeroed`` says they are, or the window covers the
    output), then the gradient copied into the window's elements by one SLICE1 copy
    (:func:`~dmlnumba.layout.scatter_window`).  The zeros go to the window's
    complement, box by box (:func:`~dmlnumba.layout.complement_boxes`), where the
    window's bytes, written once less, outweigh the boxes' launches
    (``t.ZERO_BOX_BYTES`` a box); else to the whole output first."""
    lows, spacing, read_starts, read_steps = scatter_window(starts, steps, g.shape)
    if not zeroed and g.size != out.size:  # (a window as large as the output covers it)
        boxes = zero_boxes(t, g, lows, spacing, out.shape)
        if boxes:
            t.zero_views([t.strided_view(out, *box) for box in boxes], stream)
        else:
            t.zero_views([out], stream)
    view = t.strided_view(out, lows, spacing, g.shape)
    t.slice1(g, read_starts, read_steps, view, stream, fresh=True)


def zero_boxes(t: Any, g: Any, lows: Any, spacing: Any, shape: Any) -> list:
    """The boxes of the window's complement (:func:`~dmlnumba.layout.complement_boxes`)
    that the target ``t`` zeroes one by one, where the window's bytes written once
    less outweigh their launches (``t.ZERO_BOX_BYTES`` a box); else none (the whole
    output is zeroed first)."""
    boxes = complement_boxes(shape, lows, spacing, g.shape)
    return boxes if g.size * g.itemsize >= len(boxes) * t.ZERO_BOX_BYTES else []
