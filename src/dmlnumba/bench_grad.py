"""slice_grad's rows of :mod:`dmlnumba.bench`: the gradient of a slice1 row's window
scattered into zeros of the input's shape, beside each library's own way, zeros and
an indexed assignment.  NumPy and CuPy assign through the window's slice itself
(negative steps included).  PyTorch has no negative steps and ``Tensor.flip`` copies
(an assignment into ``z.flip(d)[...]`` would write a temporary), so PyTorch assigns
the gradient, flipped along the window's negative strides, into the window's elements
taken in ascending order.  Every contender's result is checked against the library's
own before the timing."""

from typing import Any

import numpy as np

import dmlnumba

from .bench_timing import interleaved, record


def ascending(w):
    """``(index, flip)`` of the SLICE1 window ``w`` (offsets, sizes, strides, output
    sizes, as :func:`dmlnumba.window` gives them): the basic index of the elements the
    window reads, in ascending order along every dimension, and the dimensions whose
    stride is negative (read from the window's end), along which the gradient is
    flipped to match it."""
    index, flip = [], []
    for d, (offset, size, stride, n) in enumerate(zip(*w)):
        step = abs(stride)
        low = offset + size - 1 - step * (n - 1) if stride < 0 else offset
        index.append(slice(low, low + step * (n - 1) + 1, step))
        if stride < 0:
            flip.append(d)
    return tuple(index), flip


def _assign(z, index, g):
    z[index] = g
    return z


def contenders(w, index, g, xp, out, gt=None):
    """The timed calls of one row, each returning its result: ``dmlnumba``, the
    default call (on ``gt``, a PyTorch tensor, where given, else on ``g``, an array of
    ``xp``: NumPy or CuPy); ``dmlnumba <xp>-in`` (on ``g``, where ``gt`` is given);
    ``dmlnumba preallocated`` (into ``out``, an array of the input's shape);
    ``xp.zeros`` and the assignment through ``index`` (the window's NumPy index); and
    where ``gt`` is given, ``torch.zeros`` and the assignment of :func:`ascending`."""
    shape, params = tuple(out.shape), w[:3]
    name = xp.__name__
    fns: dict[str, Any] = {"dmlnumba": lambda: dmlnumba.slice_grad(g, shape, *params)}
    if gt is not None:
        fns["dmlnumba"] = lambda: dmlnumba.slice_grad(gt, shape, *params)
        fns[f"dmlnumba {name}-in"] = lambda: dmlnumba.slice_grad(g, shape, *params)
    fns["dmlnumba preallocated"] = lambda: dmlnumba.slice_grad(g, shape, *params, out=out)
    fns[name] = lambda: _assign(xp.zeros(shape, g.dtype), index, g)
    if gt is not None:
        import torch

        asc, flip = ascending(w)
        gf = (lambda: gt.flip(flip)) if flip else (lambda: gt)
        fns["torch"] = lambda: _assign(
            torch.zeros(shape, dtype=gt.dtype, device=gt.device), asc, gf()
        )
    return fns


def check(fns, want, xp):
    """Every contender's result equal to ``want`` (an array of ``xp``), element for
    element; an AssertionError names the first that differs."""
    for k, f in fns.items():
        got = xp.asarray(f())
        if got.shape != want.shape or not bool((got == want).all()):
            raise AssertionError(f"slice_grad bench: {k} differs from {xp.__name__}'s result")


def slice_grad_row(rows, case, shape, index, reps, bw=None, xp=np, torch_in=False, sync=None):
    """Time and record one row: slice_grad of a float32 gradient of the window
    ``index`` of an input of ``shape``, into ``shape``.  ``torch_in``: the default
    call on a PyTorch tensor sharing the gradient's memory (on the GPU for CuPy).
    Where ``bw`` is given, the row's share of the copy bandwidth counts the bytes
    the operation must move: the output written whole and the gradient read."""
    w = dmlnumba.window(shape, index)
    if xp is np:
        g = np.random.default_rng(0).standard_normal(w[3]).astype(np.float32)
    else:
        g = xp.random.standard_normal(w[3], dtype=xp.float32)
    out = xp.empty(shape, xp.float32)
    gt = None
    if torch_in:
        import torch

        gt = torch.as_tensor(g, device="cpu" if xp is np else "cuda")
    fns = contenders(w, index, g, xp, out, gt)
    check(fns, fns[xp.__name__](), xp)
    med = interleaved(fns, reps, sync)
    record(rows, case, med, out.nbytes + g.nbytes, bw)
