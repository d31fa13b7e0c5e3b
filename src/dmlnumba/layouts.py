"""The layout part of a repeated call's key (:mod:`dmlnumba.keys` builds the rest): what
an input of each array library contributes (:func:`layout_key`), a caller's output
(:func:`out_layout`), and for plain PyTorch tensors, CuPy and numba arrays both that and
``traced``'s questions in one step (:func:`fast_key`)."""

import sys
from typing import Any

import numpy as np

from . import config, dispatch
from . import traced as _tr
from .arrays import current_cupy_device, jax_deleted, library
from .traced import TRACED

_ndarray = np.ndarray
_modules = sys.modules


#: The places that device strings name, by string, as ``dispatch.parse_device`` reads
#: them: ``"cpu"``; ``-1`` for ``"cuda"`` (a CUDA array's own GPU); ``N`` for
#: ``"cuda:N"``; False for any other string (the full path says what is wrong).
_PLACES: dict = {}


def place(device):
    """Where the ``device`` argument (not None) names, for a key: ``"cpu"``, a GPU
    (``-1``: a CUDA array's own, or ``N``), or False (no runner: not a plain string,
    or not a device): ``dispatch.parse_device``'s answer, kept per string."""
    if type(device) is not str:
        return False
    p = _PLACES.get(device)
    if p is None:
        try:
            kind, n = dispatch.parse_device(device, "dmlnumba")
        except ValueError:
            p = False
        else:
            p = "cpu" if kind == "cpu" else -1 if n is None else n
        if len(_PLACES) < 64:  # (a caller's strings are few; any more are read per call)
            _PLACES[device] = p
    return p


#: The attribute that holds the raw handle of each stream type a key reads: PyTorch's
#: and CuPy's own classes, learned once their modules are loaded (see stream_handle).
_STREAM_ATTRS: dict = {}


def stream_handle(stream):
    """The raw handle of a ``stream=`` that a key may hold: an int (not a bool), or a
    stream of PyTorch's or CuPy's own classes (whose handle attribute runs no caller
    code); None for anything else (those calls take the full path every time)."""
    tp = type(stream)
    if tp is int:
        return stream
    attr = _STREAM_ATTRS.get(tp)
    if attr is None:
        if tp.__module__.partition(".")[0] not in ("torch", "cupy"):
            return None
        torch, cupy = _modules.get("torch"), _modules.get("cupy")
        if torch is not None:
            _STREAM_ATTRS.update(dict.fromkeys(_stream_classes(torch.cuda), "cuda_stream"))
        if cupy is not None:
            _STREAM_ATTRS.update(dict.fromkeys(_stream_classes(cupy.cuda), "ptr"))
        attr = _STREAM_ATTRS.get(tp)
        if attr is None:
            return None
    return getattr(stream, attr)


def _stream_classes(module):
    return (module.Stream, module.ExternalStream)


def layout_key(input, device, stream):
    """The layout part of a repeated call's key (:func:`_layout`).  A call with
    ``stream=`` on a PyTorch CUDA tensor or a CuPy array adds the stream's handle
    (:func:`stream_handle`): its runner runs on that stream and allocates for it;
    other libraries' calls with a stream take the full path every time."""
    if stream is None:
        return _layout(input, device)
    h = stream_handle(stream)
    lib = library(input)
    if h is None or not (lib == "cupy" or lib == "torch" and input.is_cuda):
        return None
    key = _layout(input, device)
    return None if key is None else (key, h)


def _layout(input, device):
    """The layout part of the key of a call on the library's current stream, into new
    outputs on the input's own device: NumPy arrays (CPU, or ``device="cuda"``: a
    runner per current device, ``"cuda:N"``: GPU N's), PyTorch tensors (CUDA and CPU
    ones), JAX arrays on one device, CuPy arrays and numba device arrays.  A
    ``device`` that names where the array already is (``"cpu"`` for a CPU tensor or
    JAX array; ``"cuda"``, or ``"cuda:N"`` of its own GPU, for a CUDA tensor, CuPy or
    numba array) gives the key of the call without it: the same call.  None for
    anything else (the full path every time)."""
    tp = type(input)
    gpu = None if device is None else place(device)
    if gpu is False:
        return None
    if tp is _ndarray:
        if gpu is None or gpu == "cpu":
            return (tp, input.dtype, input.shape, input.strides, device, config.GENERATION)
        if gpu < 0:
            cuda = dispatch._cuda  # the CUDA target, where a call has loaded it
            if cuda is None:
                return None
            gpu = cuda.current_device()
        return (tp, input.dtype, input.shape, input.strides, device, gpu, config.GENERATION)
    cpu = gpu == "cpu"
    lib = library(input)
    if lib == "torch":
        global _Tensor
        _Tensor = _modules["torch"].Tensor  # (the next plain tensor's key: fast_key)
        if gpu is not None and not _tensor_there(input, gpu):
            return None
        return _torch_layout(input, tp, input.requires_grad)
    if gpu is not None and lib not in (("jax",) if cpu else ("cupy", "numba")):
        return None
    if lib == "jax":  # on one device: the CPU, or a GPU (its runner keyed per GPU)
        if jax_deleted(input):  # (the full path says so)
            return None
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
        key = _cupy_layout(input, tp)
    elif lib == "numba":
        global _Numba
        if tp.__name__ == "DeviceNDArray":  # (the next plain array's key: fast_key)
            _Numba = tp
        key = _numba_layout(input, tp)
    else:
        return None
    if gpu is not None and key is not None and not _on_gpu(True, key[4], gpu):  # (its device)
        return None
    return key


def tensor_there(t, device):
    """Whether the PyTorch tensor ``t`` is where the ``device`` argument names."""
    return _tensor_there(t, place(device))


def _tensor_there(t, where):
    """Whether the tensor ``t`` is where ``where`` (a :func:`place`) names."""
    if where == "cpu":
        return t.is_cpu
    return where is not False and _on_gpu(t.is_cuda, t.get_device(), where)


def _on_gpu(cuda, dev, gpu):
    """Whether a CUDA array (``cuda``) on device ``dev`` is where ``gpu`` (a
    :func:`place`: -1, its own GPU, or N) names."""
    return cuda and (gpu < 0 or gpu == dev)


def _torch_layout(t, tp, rg):
    """A PyTorch tensor's layout key (``tp``: its type, ``rg``: ``requires_grad``, which
    decides how a CPU runner reads it): None where no runner reads it: a lazily
    negated one, a CPU one that is not strided (a runner reads its memory:
    :func:`~dmlnumba.cpu.views.torch_array`), one on neither the CPU nor CUDA (meta
    tensors, other devices: the full path says why).  Not its conjugate bit: only
    complex tensors carry one, and no runner is kept for a complex dtype (the full
    path refuses it)."""
    if t.is_neg():
        return None
    if t.is_cpu:  # (one that requires grad: read detached, cpu.views._torch_reader)
        if t.layout is not _modules["torch"].strided:
            return None
        return (tp, t.dtype, t.shape, t.stride(), rg, config.GENERATION)
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
    array, no stream, no device (or for a tensor, one that names where it is: the same
    call), and ``out`` None, a NumPy array or of the input's type."""
    tp = type(input)
    if tp is not _Tensor and tp is not _Cupy and tp is not _Numba:
        return False
    if stream is not None:
        return False
    if device is not None and not (tp is _Tensor and _tensor_there(input, place(device))):
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
    if grad and (
        rg
        and _modules["torch"].is_grad_enabled()
        or _modules["torch.autograd.forward_ad"]._current_level >= 0  # (_tr.dual_level, inline)
    ):
        return TRACED
    if wrapped(x) or (type(out) is _Tensor and wrapped(out)):
        return TRACED
    return _torch_layout(x, _Tensor, rg)


def wrapped(t):
    """``traced``'s question of a plain tensor: a functional tensor, a torch.func
    wrapper (asked only while a transform runs), or any while torch.jit.trace runs."""
    return (
        _tr._functional(t)
        or _tr._jit_tracing()
        or (_tr._transforms_active() and _tr._functorch_wrapped(t))
    )


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
