"""The layout part of a repeated call's key (:mod:`dmlnumba.keys` builds the rest): what
an input of each array library contributes (:func:`layout_key`), a caller's output
(:func:`out_layout`), and for plain PyTorch tensors, CuPy and numba arrays both that and
``traced``'s questions in one step (:func:`fast_key`)."""

import sys
from typing import Any

import numpy as np

from . import config
from . import traced as _tr
from .arrays import current_cupy_device, library
from .traced import TRACED

_ndarray = np.ndarray
_modules = sys.modules


def layout_key(input, device, stream):
    """The layout part of a repeated call's key, for calls into new outputs on the
    input's own device: NumPy arrays (CPU, or ``device="cuda"``: a runner per current
    device), PyTorch tensors (CUDA ones, and CPU ones that do not require grad), JAX
    arrays on one device, CuPy arrays and numba device arrays; with no ``device``, or
    ``"cpu"`` for a CPU tensor or JAX array (the same key).  None for anything else
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
    # device="cpu" names where a CPU tensor or JAX array is already: the call of no
    # device's key (any other device: no runner).
    cpu = device is not None
    if cpu and not (type(device) is str and device == "cpu"):
        return None
    lib = library(input)
    if lib == "torch":
        global _Tensor
        _Tensor = _modules["torch"].Tensor  # (the next plain tensor's key: fast_key)
        if cpu and not input.is_cpu:
            return None
        return _torch_layout(input, tp, input.requires_grad)
    if cpu and lib != "jax":
        return None
    if lib == "jax":  # on one device: the CPU, or a GPU (its runner keyed per GPU)
        devices = input.devices()
        if len(devices) != 1:
            return None
        (d,) = devices
        if cpu and d.platform != "cpu":
            return None
        x64 = _modules["jax"].config.jax_enable_x64  # (how JAX holds 64-bit results)
        where = -1 if d.platform == "cpu" else d.id
        return (tp, input.dtype, input.shape, where, x64, config.GENERATION)
    if lib == "cupy":
        global _Cupy
        _Cupy = _modules["cupy"].ndarray  # (the next plain array's key: fast_key)
        return _cupy_layout(input, tp)
    if lib == "numba":
        global _Numba
        if tp.__name__ == "DeviceNDArray":  # (the next plain array's key: fast_key)
            _Numba = tp
        return _numba_layout(input, tp)
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


def _numba_layout(x, tp):
    """A numba device array's layout key, with the device of its numba context (a
    runner is made only where that is its memory's, see gpu.target._fast_ok); None
    where no context tells (the full path, every time)."""
    try:
        dev = x.gpu_data.context.device.id
    except AttributeError:
        return None
    return (tp, x.dtype, x.shape, x.strides, dev, config.GENERATION)


#: ``torch.Tensor``, ``cupy.ndarray`` and numba's ``DeviceNDArray`` once a call has read
#: one of each (None before):
#: a call on one of exactly these types asks :func:`fast_key` alone, in place of
#: ``traced`` and :func:`layout_key`.
_Tensor: Any = None
_Cupy: Any = None
_Numba: Any = None


def fast(input, out, device, stream):
    """Whether :func:`fast_key` answers for this call: a plain PyTorch tensor or CuPy
    array, no stream, no device (or ``"cpu"`` for a CPU tensor: the same call), and
    ``out`` None, a NumPy array or of the input's type."""
    tp = type(input)
    if tp is not _Tensor and tp is not _Cupy and tp is not _Numba:
        return False
    if stream is not None:
        return False
    if device is not None and not (
        tp is _Tensor and type(device) is str and device == "cpu" and input.is_cpu
    ):
        return False
    return out is None or type(out) is tp or type(out) is _ndarray


def fast_key(x, out, grad):
    """``traced(x, out, grad=grad)`` and ``layout_key(x, None, None)`` in one, for the
    calls :func:`fast` names: :data:`TRACED`, the layout, or None (no runner), without
    ``traced``'s and the library lookup's frames (a third of a small PyTorch key)."""
    if _tr._compiling():
        return TRACED
    if type(x) is _Cupy:  # (CuPy and numba arrays: traced only while compiling)
        return _cupy_layout(x, _Cupy)
    if type(x) is _Numba:
        return _numba_layout(x, _Numba)
    rg = x.requires_grad
    if rg and grad and _modules["torch"].is_grad_enabled():
        return TRACED
    if wrapped(x) or (type(out) is _Tensor and wrapped(out)):
        return TRACED
    return _torch_layout(x, _Tensor, rg)


def wrapped(t):
    """``traced``'s question of a plain tensor: a functional tensor, or a torch.func
    wrapper (asked only while a transform runs)."""
    return _tr._functional(t) or (_tr._transforms_active() and _tr._functorch_wrapped(t))


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


def plain_tensors(a, b):
    """Whether ``a`` and ``b`` are both plain ``torch.Tensor`` objects (of that type
    exactly, :data:`_Tensor`)."""
    return type(a) is _Tensor and type(b) is _Tensor
