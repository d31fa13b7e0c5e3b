"""The runners of repeated calls, and one key function per operator that finds them.

A validated call into new outputs (NumPy arrays on the CPU, PyTorch CUDA tensors and
CuPy arrays on their GPU, numba device arrays) keeps a runner under a key of
everything its validation read: the input's type, dtype, shape, strides and device,
the parameters, and the settings' generation (so that a changed setting reaches the
next call).  A repeat of such a call finds the runner here and skips validation and
layout work.  Parameters are keys only when they are tuples or lists of Python ints
(so that 1.0 or True never stands for 1).

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
from .arrays import current_cupy_device, library
from .caches import Bounded
from .traced import traced

#: Runners by key: the window calls' id keys hold ``(runner, *parameters)`` (see
#: :func:`window`), every other key the runner.
runners = Bounded()

_ndarray = np.ndarray
_modules = sys.modules

#: A key function's key for a call that PyTorch traces (:func:`traced`): the prepare
#: step sends it to the registered operators without asking again.
TRACED = "traced"  # a string, whose identity torch.compile's tracing keeps (a tuple's not)
#: The prepare step's ``key`` where no key function was asked (an adapter's call).
UNASKED = "unasked"


# ------------------------------------------------------------------ keys


_SEQUENCES = (list, tuple)


def _int_params(a, b, c, d):
    """The parameters as a key: the lengths of all but the last (-1 for ``c``'s where
    ``d`` is None: slice1 without ``output_sizes``), then every value in one flat
    tuple; None where one is anything but a tuple or list of Python ints (such calls
    take the full path, which checks them).  Lists and tuples of the same values give
    the same key."""
    seqs = _SEQUENCES
    if type(a) not in seqs or type(b) not in seqs or type(c) not in seqs:
        return None
    if d is None:
        n = -1
        flat = (*a, *b, *c)
    elif type(d) in seqs:
        n = len(c)
        flat = (*a, *b, *c, *d)
    else:
        return None
    for i in flat:
        if type(i) is not int:
            return None
    return len(a), len(b), n, flat


def _layout_key(input, device, stream):
    """The layout part of a repeated call's key, for calls into new outputs on the
    input's own device: NumPy arrays (CPU, or ``device="cuda"``: a runner per current
    device), PyTorch tensors (CUDA ones, and CPU ones that do not require grad), JAX
    arrays on one device, CuPy arrays and numba device arrays.  None for anything else
    (those calls take the full path every time)."""
    if stream is not None:
        return None
    tp = type(input)
    if tp is _ndarray:
        if device is None or device == "cpu":
            return (tp, input.dtype, input.shape, input.strides, device, config.GENERATION)
        if device == "cuda":
            from . import dispatch  # the CUDA target, where a call has loaded it

            if dispatch._cuda is not None:
                dev = dispatch._cuda.current_device()
                return (tp, input.dtype, input.shape, input.strides, device, dev, config.GENERATION)
        return None
    if device is not None:
        return None
    lib = library(input)
    if lib == "torch":
        global _Tensor
        _Tensor = _modules["torch"].Tensor  # (the next plain tensor's key: _fast_key)
        return _torch_layout(input, tp, input.requires_grad)
    if lib == "jax":  # on one device: the CPU, or a GPU (its runner keyed per GPU)
        devices = input.devices()
        if len(devices) != 1:
            return None
        (d,) = devices
        x64 = _modules["jax"].config.jax_enable_x64  # (how JAX holds 64-bit results)
        where = -1 if d.platform == "cpu" else d.id
        return (tp, input.dtype, input.shape, where, x64, config.GENERATION)
    if lib == "cupy":
        global _Cupy
        _Cupy = _modules["cupy"].ndarray  # (the next plain array's key: _fast_key)
        return _cupy_layout(input, tp)
    if lib == "numba":
        # The device of the array's numba context (a runner is made only where that is
        # its memory's, see gpu.target._fast_ok).
        try:
            dev = input.gpu_data.context.device.id
        except AttributeError:  # no numba context to tell: the full path, every time
            return None
        return (tp, input.dtype, input.shape, input.strides, dev, config.GENERATION)
    return None


def _torch_layout(t, tp, rg):
    """A PyTorch tensor's layout key (``tp``: its type, ``rg``: ``requires_grad``):
    None where no runner reads it: a lazily negated one, a CPU one that requires grad
    or is not strided (a runner reads its memory: ``Tensor.numpy``), one on neither
    the CPU nor CUDA (meta tensors, other devices: the full path says why).  Not its
    conjugate bit: only complex tensors carry one, and no runner is kept for a
    complex dtype (the full path refuses it)."""
    if t.is_neg():
        return None
    if t.is_cpu:
        if rg or t.layout is not _modules["torch"].strided:
            return None
        return (tp, t.dtype, t.shape, t.stride(), config.GENERATION)
    if not t.is_cuda:
        return None
    return (tp, t.dtype, t.shape, t.stride(), t.get_device(), rg, t.layout, config.GENERATION)


def _cupy_layout(x, tp):
    """A CuPy array's layout key: None off CuPy's current device (a runner allocates
    there: other devices take the full path)."""
    dev = x.data.device_id
    if dev != current_cupy_device():
        return None
    return (tp, x.dtype, x.shape, x.strides, dev, config.GENERATION)


#: ``torch.Tensor`` and ``cupy.ndarray`` once a call has read one of each (None before):
#: a call on one of exactly these types asks :func:`_fast_key` alone, in place of
#: ``traced`` and :func:`_layout_key`.
_Tensor: Any = None
_Cupy: Any = None


def _fast(input, out, device, stream):
    """Whether :func:`_fast_key` answers for this call: a plain PyTorch tensor or CuPy
    array, no device or stream, and ``out`` None, a NumPy array or of the input's type."""
    tp = type(input)
    if (tp is not _Tensor and tp is not _Cupy) or device is not None or stream is not None:
        return False
    return out is None or type(out) is tp or type(out) is _ndarray


def _fast_key(x, out, grad):
    """``traced(x, out, grad=grad)`` and ``_layout_key(x, None, None)`` in one, for the
    calls :func:`_fast` names: :data:`TRACED`, the layout, or None (no runner), without
    ``traced``'s and the library lookup's frames (a third of a small PyTorch key)."""
    if _tr._compiling():
        return TRACED
    if type(x) is _Cupy:  # (traced only while compiling)
        return _cupy_layout(x, _Cupy)
    rg = x.requires_grad
    if rg and grad and _modules["torch"].is_grad_enabled():
        return TRACED
    if _wrapped(x) or (type(out) is _Tensor and _wrapped(out)):
        return TRACED
    return _torch_layout(x, _Tensor, rg)


def _wrapped(t):
    """``traced``'s question of a plain tensor: a functional tensor, or a torch.func
    wrapper (asked only while a transform runs)."""
    return _tr._functional(t) or (_tr._transforms_active() and _tr._functorch_wrapped(t))


def _plain_dtype(dtype):
    """Whether ``dtype`` may be part of a runner's key: a type, a string, a NumPy or a
    PyTorch dtype, whose hash runs none of the caller's code (which could change the
    input)."""
    tp = type(dtype)
    return tp is type or tp is str or issubclass(tp, np.dtype) or tp.__module__ == "torch"


def out_layout(o):
    """The part of a repeated call's key that a caller's output adds: everything the
    checks of an output read that a later output of the same key could change
    (:func:`dmlnumba.target.check_out`): its type, dtype, shape, strides, device and
    writeable flag.  A runner then checks per call only what pointers decide: an
    overlap with the input or the other output.  ``()`` for no output; None (the
    full path, every time) for outputs of other kinds, and for PyTorch tensors whose
    rules depend on more than the layout: one that requires grad (refused in grad
    mode), an inference tensor (refused outside inference mode), a lazily negated
    one (which the CPU cannot write in place)."""
    tp = type(o)
    if tp is _ndarray:
        return (tp, o.dtype, o.shape, o.strides, o.flags.writeable)
    if o is None:
        return ()
    lib = "torch" if tp is _Tensor else library(o)
    try:
        if lib == "torch":
            if o.requires_grad or o.is_inference() or o.is_neg():
                return None
            return (tp, o.dtype, o.shape, o.stride(), o.get_device(), o.layout)
        if lib == "cupy":
            return (tp, o.dtype, o.shape, o.strides, o.data.device_id)
        if lib == "numba":
            return (tp, o.dtype, o.shape, o.strides, o.gpu_data.context.device.id)
    except (AttributeError, RuntimeError):  # no strides or no device to tell
        return None
    return None


def nonzero(
    f, input, width, dtype, max_count, device, stream, out_count=None, out_coordinates=None
):
    """``(key, runner)`` of a nonzero_coordinates (``f``) or argwhere call; the key
    None where the call keeps no runner, :data:`TRACED` where PyTorch traces it.
    Given outputs add their layouts (:func:`out_layout`) to the key, and their
    runner is a function of ``(input, out_count, out_coordinates)`` that returns None
    where the full path must run (an output may overlap the input).
    A NumPy input's key on the CPU is flat (the common repeated call, the fast path),
    the same for ``device="cpu"``."""
    layout: Any = None
    tp = type(input)  # _fast's question, asked inline: a NumPy call pays no frame for it
    fast = (tp is _Tensor or tp is _Cupy) and device is None and stream is None
    if fast:
        layout = _fast_key(input, None, False)  # (outputs asked below)
        if layout is TRACED:
            return TRACED, None
        if layout is None:
            return None, None
    elif traced(input):
        return TRACED, None
    if not (
        (width is None or type(width) is int)
        and (max_count is None or type(max_count) is int)
        and (type(dtype) is type or _plain_dtype(dtype))  # the default first: no call
    ):
        return None, None
    if type(input) is _ndarray and stream is None and (device is None or device == "cpu"):
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
        )
    else:
        if layout is None:
            layout = _layout_key(input, device, stream)
            if layout is None:
                return None, None
        key = (f, layout, width, dtype, type(dtype), max_count)
    if out_count is not None or out_coordinates is not None:
        # Asked last: a call whose input keeps no runner asks nothing of its outputs
        # (the prepare step asks whether they are traced); a NumPy output is never.
        if type(out_count) is _ndarray and type(out_coordinates) is _ndarray:
            # The common given call: out_layout's of both, in one flat tuple.
            cnt, crd = out_count, out_coordinates
            cw, xw = cnt.flags.writeable, crd.flags.writeable
            key += (cnt.dtype, cnt.shape, cnt.strides, cw, crd.dtype, crd.shape, crd.strides, xw)
        elif fast and type(out_count) is _Tensor and type(out_coordinates) is _Tensor:
            # Plain tensors beside an input _fast_key asked: only their own question.
            if _wrapped(out_count) or _wrapped(out_coordinates):
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
    function of the input (of ``(input, out)`` with ``out``: ``out`` where it wrote,
    None where ``out`` may overlap the input and the full path must run).  The key,
    for the prepare step: ``(id_key, value_key, params)``, the id key None where it
    does not apply; :data:`TRACED` for a traced call (or one autograd records).

    The layout part of both keys: a NumPy array's dtype, shape and strides on the
    CPU (a NumPy ``out``'s too, with its writeable flag), otherwise the input's
    layout key (:func:`_layout_key`) and ``out``'s (:func:`out_layout`).  A call is
    first looked up by the identity of its parameters (the id key): a repeat that
    passes the same tuple objects (a stored window, literal tuples) finds its runner
    without reading a parameter.  Only tuples of Python ints are kept under such a
    key (immutable, so the same object means the same values), and the entry holds
    them, so that no other object can take their ids while it lives.  Then by the
    parameters' values (the value key)."""
    if (
        type(input) is _ndarray
        and (device is None or device == "cpu")
        and stream is None
        and (out is None or type(out) is _ndarray)
    ):  # NumPy on the CPU, the common repeated call (a NumPy out is never traced)
        if traced(input, grad=True):
            return TRACED, None
        if out is None:
            layout: Any = (input.dtype, input.shape, input.strides, config.GENERATION)
        else:  # one tuple, not two joined
            ow = out.flags.writeable
            layout = (
                input.dtype,
                input.shape,
                input.strides,
                config.GENERATION,
                out.dtype,
                out.shape,
                out.strides,
                ow,
            )
    else:
        if _fast(input, out, device, stream):
            layout = _fast_key(input, out, True)
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
            layout = _layout_key(input, device, stream)
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
    ints = _int_params(a, b, c, d)
    if ints is None:
        return None, None
    value_key = (op, layout, ints)
    run = runners.get(value_key)
    if run is not None:
        if id_key is not None:
            runners.put(id_key, (run, a, b, c, d))
        return None, run
    return (id_key, value_key, (a, b, c, d)), None


def keeper(key):
    """The function that keeps a new nonzero or argwhere runner under ``key`` (their
    key function's), or None where the call keeps none."""
    if key is None or key is TRACED:
        return None
    return lambda run: runners.put(key, run)


def window_keeper(key):
    """The function that keeps a new slice1 or slice_grad runner under ``key``
    (:func:`window`'s): under its value key, and under its id key with the parameter
    tuples it holds."""
    if key is None or key is TRACED:
        return None
    id_key, value_key, params = key

    def keep(run):
        runners.put(value_key, run)
        if id_key is not None:
            runners.put(id_key, (run,) + params)

    return keep
