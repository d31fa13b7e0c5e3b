"""The runners of repeated calls, and one key function per operator that finds them.

A validated call into new outputs (NumPy arrays on the CPU, PyTorch CUDA tensors and
CuPy arrays on their GPU, numba device arrays) keeps a runner under a key of
everything its validation read: the input's type, dtype, shape, strides and device,
the parameters, and the settings' generation (so that a changed setting reaches the
next call).  A repeat of such a call finds the runner here and skips validation and
layout work.  Parameters are keys only as integers: lists or tuples of Python ints or
NumPy integers, ``torch.Size``, 1-d NumPy integer arrays (so that 1.0 or True never
stands for 1).

Each key function (:func:`window`, slice1's and slice_grad's; :func:`nonzero`, also
argwhere's) returns ``(key, runner)``: the key a new runner is kept under (None: the
call keeps none) and the runner kept there, or None.  The API passes the key on to
the prepare step, which asks nothing twice.  Part of the prepare step: it asks which
library an input belongs to, and first whether PyTorch traces the call
(:func:`traced`).
"""

import sys
from typing import Any

import numpy as np

from . import config
from . import traced as _tr
from .caches import Bounded
from .interop import bfloat16_runner
from .layouts import fast, fast_key, layout_key, out_layout, plain_tensors, wrapped
from .traced import TRACED, traced

#: Runners by key: the window calls' id keys hold ``(runner, *parameters)`` (see
#: :func:`window`), every other key the runner.
runners = Bounded()

_ndarray = np.ndarray

#: The prepare step's ``key`` where no key function was asked (an adapter's call).
UNASKED = "unasked"


# ------------------------------------------------------------------ keys

#: The containers of window parameters whose values :func:`window` reads itself (see
#: :func:`_values` for the others): ``torch.Size`` joins them once a call has passed one.
_SEQUENCES: tuple = (list, tuple)


def _plain_dtype(dtype):
    """Whether ``dtype`` may be part of a runner's key: a type, a string, a NumPy or a
    PyTorch dtype, whose hash runs none of the caller's code (which could change the
    input)."""
    tp = type(dtype)
    return tp is type or tp is str or issubclass(tp, np.dtype) or tp.__module__ == "torch"


def nonzero(
    f, input, width, dtype, max_count, device, stream, out_count=None, out_coordinates=None
):
    """``(key, runner)`` of a nonzero_coordinates (``f``) or argwhere call; the key
    None where the call keeps no runner, :data:`TRACED` where PyTorch traces it.
    Given outputs add their layouts (:func:`~dmlnumba.layouts.out_layout`) to the key, and their
    runner is a function of ``(input, out_count, out_coordinates)``.  Every runner
    returns None where the full path must run: an output may overlap the input, a
    PyTorch tensor's storage was freed (its data pointer null), or a CUDA array's
    address is not a multiple of its item size; the full path refuses those two
    (:func:`~dmlnumba.interop.check_storage`, ``gpu.views.check_aligned``).
    A NumPy input's key on the CPU is flat (the common repeated call, the fast path),
    the same for ``device="cpu"``."""
    layout: Any = None
    numpy_cpu = (
        type(input) is _ndarray
        and stream is None
        and (device is None or (type(device) is str and device == "cpu"))
    )
    plain = not numpy_cpu and fast(input, None, device, stream)  # (a NumPy call: no frame)
    if plain:
        layout = fast_key(input, None, False)  # (outputs asked below)
        if layout is TRACED:
            return TRACED, None
        if layout is None:
            return None, None
    elif _tr._compiling() if numpy_cpu else traced(input):  # (a NumPy input: one question)
        return TRACED, None
    if not (
        (width is None or type(width) is int) and (max_count is None or type(max_count) is int)
    ):
        width, max_count = _scalar(width), _scalar(max_count)  # (NumPy integers)
        if width is False or max_count is False:
            return None, None
    if not (type(dtype) is type or _plain_dtype(dtype)):  # the default first: no call
        return None, None
    given = out_count is not None or out_coordinates is not None
    if numpy_cpu and type(out_count) is _ndarray and type(out_coordinates) is _ndarray:
        # The common given call: out_layout's of both outputs, in the one flat tuple.
        cnt, crd = out_count, out_coordinates
        key: Any = (
            f,
            input.dtype,
            input.shape,
            input.strides,
            width,
            dtype,
            type(dtype),
            max_count,
            config.GENERATION,
            cnt.dtype,
            cnt.shape,
            cnt.strides,
            cnt.flags.writeable,
            crd.dtype,
            crd.shape,
            crd.strides,
            crd.flags.writeable,
        )
        given = False  # (asked)
    elif numpy_cpu:
        key = (
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
    else:
        if layout is None:
            layout = layout_key(input, device, stream)
            if layout is None:
                return None, None
        key = (f, layout, width, dtype, type(dtype), max_count)
    if given:
        # Asked last: a call whose input keeps no runner asks nothing of its outputs
        # (the prepare step asks whether they are traced); a NumPy output is never.
        if type(out_count) is _ndarray and type(out_coordinates) is _ndarray:
            # NumPy outputs of another library's input: out_layout's of both, flat.
            cnt, crd = out_count, out_coordinates
            cw, xw = cnt.flags.writeable, crd.flags.writeable
            key += (cnt.dtype, cnt.shape, cnt.strides, cw, crd.dtype, crd.shape, crd.strides, xw)
        elif plain and plain_tensors(out_count, out_coordinates):
            # Plain tensors beside an input fast_key asked: only their own question.
            if wrapped(out_count) or wrapped(out_coordinates):
                return TRACED, None
            outs = (out_layout(out_count), out_layout(out_coordinates))
            if outs[0] is None or outs[1] is None:
                return None, None
            key += outs
        else:
            oc = None if type(out_count) is _ndarray else out_count
            ox = None if type(out_coordinates) is _ndarray else out_coordinates
            if (oc is not None or ox is not None) and traced(input, oc, ox):
                return TRACED, None
            outs = (out_layout(out_count), out_layout(out_coordinates))
            if outs[0] is None or outs[1] is None:
                return None, None
            key += outs
    try:
        return key, runners.get(key)
    except TypeError:  # an unhashable dtype argument: the checks say what is wrong
        return None, None


def window(op, input, a, b, c, d, out, device, stream):
    """``(key, runner)`` of a window call: slice1's (``op``), whose parameters ``a, b, c,
    d`` are offsets, sizes, strides and output_sizes (or None), or slice_grad's (the
    input is the gradient; input_shape, offsets, sizes and strides).  The runner a
    function of the input (of ``(input, out)`` with ``out``: ``out`` where it wrote);
    None where the full path must run (``out`` may overlap the input; a freed or
    misaligned array, as for :func:`nonzero`).  The key,
    for the prepare step: ``(id_key, value_key, params)``, the id key None where it
    does not apply; :data:`TRACED` for a traced call (or one autograd records).

    The layout part of both keys: a NumPy array's dtype, shape and strides on the
    CPU (a NumPy ``out``'s too; its writeable flag the runner asks, per call, as
    NumPy's assignment does), otherwise the input's layout key and ``out``'s
    (:mod:`dmlnumba.layouts`).  A call is
    first looked up by the identity of its parameters (the id key): a repeat that
    passes the same tuple objects (a stored window, literal tuples) finds its runner
    without reading a parameter.  Only tuples of integers are kept under such a key
    (immutable, so the same object means the same values), and the entry holds them,
    so that no other object can take their ids while it lives.  Then by the
    parameters' values (the value key)."""
    if (
        type(input) is _ndarray
        and (device is None or (type(device) is str and device == "cpu"))
        and stream is None
        and (out is None or type(out) is _ndarray)
    ):  # NumPy on the CPU, the common repeated call (a NumPy out is never traced)
        if _tr._compiling():  # traced's one question of a NumPy input (no frame)
            return TRACED, None
        if out is None:
            layout: Any = (input.dtype, input.shape, input.strides, config.GENERATION)
        else:  # one tuple, not two joined; not out's writeable flag (the runner asks)
            layout = (
                input.dtype,
                input.shape,
                input.strides,
                config.GENERATION,
                out.dtype,
                out.shape,
                out.strides,
            )
    else:
        if fast(input, out, device, stream):
            layout = fast_key(input, out, True)
            if layout is TRACED:
                return TRACED, None
        else:  # a NumPy out is never traced (asked of the others only)
            if (
                traced(input, grad=True)
                if out is None or type(out) is _ndarray
                else traced(input, out, grad=True)
            ):
                return TRACED, None
            # The input's layout first: an input that keeps no runner (a dask array)
            # pays for no more; an output's layout last, as nonzero's.
            layout = layout_key(input, device, stream)
        outs = out_layout(out) if layout is not None else None
        if outs is None:
            return None, None
        layout = (layout,) + outs
    id_key: Any = None
    if type(a) is tuple and type(b) is tuple and type(c) is tuple:
        if d is None or type(d) is tuple:
            id_key = (op, id(a), id(b), id(c), id(d), layout)
            run = runners.get(id_key)
            if run is not None:
                return None, run[0]
    # The parameters' values, with the lengths of all but the last (-1 for strides'
    # where there are no output_sizes): Python ints in lists or tuples, the common
    # call, read here; any other form through _values.
    seqs = _SEQUENCES
    flat: Any = None
    if type(a) in seqs and type(b) in seqs and type(c) in seqs:
        if d is None:
            flat = (*a, *b, *c)
        elif type(d) in seqs:
            flat = (*a, *b, *c, *d)
        if flat is not None:
            for i in flat:
                if type(i) is not int:
                    flat = None
                    break
    if flat is not None:
        la, lb, n = len(a), len(b), -1 if d is None else len(c)
    else:
        other = _other_values(a, b, c, d)
        if other is None:
            return None, None
        la, lb, n, flat = other
    value_key = (op, layout, la, lb, n, flat)
    run = runners.get(value_key)
    if run is not None:
        if id_key is not None:
            runners.put(id_key, (run, a, b, c, d))
        return None, run
    return (id_key, value_key, (a, b, c, d)), None


def _values(p):
    """A window parameter's values as Python ints, as :func:`dmlnumba.validation.int_values`
    reads them, where it is one of the forms a key may be made of: a list or tuple of
    Python ints and NumPy integer scalars, a ``torch.Size``, a 1-d NumPy array of integers;
    None for anything else (bools, floats, other types: the full path checks them).
    No caller's code runs here (the types are exact ones; NumPy's and PyTorch's own)."""
    tp = type(p)
    if tp is _ndarray:
        return p.tolist() if p.ndim == 1 and p.dtype.kind in "iu" else None
    if not (tp is list or tp is tuple):
        torch = sys.modules.get("torch")
        if torch is None or tp is not torch.Size:
            return None
        global _SEQUENCES
        _SEQUENCES = (list, tuple, tp)  # (read by window itself from now on: a tuple of ints)
    out = []
    for i in p:
        if type(i) is not int:
            if type(i) not in _NUMPY_INTS:  # (exact types: a subclass's methods could lie)
                return None
            i = int(i)
        out.append(i)
    return out


def _other_values(a, b, c, d):
    """``(len(a), len(b), n, flat)`` of :func:`window`'s value key for parameters in
    another form than lists or tuples of Python ints (:func:`_values`), as ``window``
    reads those (``n``: ``len(c)``, -1 without ``d``); None where one makes no key."""
    va, vb, vc = _values(a), _values(b), _values(c)
    vd = [] if d is None else _values(d)
    if va is None or vb is None or vc is None or vd is None:
        return None
    return len(va), len(vb), -1 if d is None else len(vc), tuple(va + vb + vc + vd)


def _scalar(v):
    """``width`` or ``max_count`` as a key holds it: None, or a Python int (from a
    Python int or a NumPy integer scalar); False for anything else (the full path
    checks it)."""
    if v is None or type(v) is int:
        return v
    return int(v) if type(v) in _NUMPY_INTS else False


#: NumPy's integer scalar types (not its bool).
_NUMPY_INTS = frozenset(np.dtype(c).type for c in np.typecodes["AllInteger"])


def keeper(key, bf16=None, lib=None):
    """The function that keeps a new nonzero or argwhere runner under ``key`` (their
    key function's) and returns the runner kept, or None where the call keeps none.
    ``bf16``: the dtype of a bfloat16 input (of library ``lib``) that the call reads
    as float16, and ``run`` is made for that view: what is kept reads such inputs
    (:func:`~dmlnumba.interop.bfloat16_runner`)."""
    if key is None or key is TRACED:
        return None
    if bf16 is not None:
        return lambda run: runners.put(key, bfloat16_runner(run, False, bf16, lib))
    return lambda run: runners.put(key, run)


def window_keeper(key, bf16=None, lib=None):
    """The function that keeps a new slice1 or slice_grad runner under ``key``
    (:func:`window`'s): under its value key, and under its id key with the parameter
    tuples it holds; it returns the runner kept (``bf16``, ``lib``: as
    :func:`keeper`'s)."""
    if key is None or key is TRACED:
        return None
    id_key, value_key, params = key

    def keep(run):
        if bf16 is not None:
            run = bfloat16_runner(run, True, bf16, lib)
        runners.put(value_key, run)
        if id_key is not None:
            runners.put(id_key, (run,) + params)
        return run

    return keep
