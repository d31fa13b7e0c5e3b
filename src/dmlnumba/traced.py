"""Whether PyTorch traces a call (:func:`traced`), asked first by every key function
(:mod:`dmlnumba.keys`): a traced call keeps no runner, and runs on the registered
operators (:mod:`dmlnumba.torch_ops`)."""

import sys
from typing import Any

import numpy as np

_ndarray = np.ndarray
_modules = sys.modules

#: A key function's key for a call that PyTorch traces (:func:`traced`): the prepare
#: step sends it to the registered operators without asking again.
TRACED = "traced"  # a string, whose identity torch.compile's tracing keeps (a tuple's not)


def traced(input, *outs, grad=False):
    """Whether this call goes through the registered PyTorch operators (see
    :mod:`dmlnumba.torch_ops`): when torch.compile, torch.export or torch.jit.trace
    traces it (the tracer records one node per call), or when the input or an output
    is a PyTorch tensor whose own storage holds no data (:func:`_wrapper`), which the
    eager path must never read or write through DLPack or a data pointer; for a differentiable
    operator (``grad``: slice1, slice_grad), also when autograd records the call (an
    input that requires grad, in grad mode, or forward-mode AD: :func:`dual_level`).
    Cheap where PyTorch is not loaded, and for a NumPy input with no other output to
    ask about."""
    if _compiling():  # (False while PyTorch is not loaded)
        return True
    if not outs and type(input) is _ndarray:  # the common call: nothing more to ask
        return False
    torch = _modules.get("torch")
    if torch is None:
        return False
    Tensor = torch.Tensor
    if grad and isinstance(input, Tensor):
        if input.requires_grad and torch.is_grad_enabled() or dual_level():
            return True
    if type(input) is Tensor:  # the common case, asked here (a call less)
        if (
            _functional(input)
            or _jit_tracing()
            or (_transforms_active() and _functorch_wrapped(input))
        ):
            return True
    elif isinstance(input, Tensor) and (_wrapper(input, Tensor) or _jit_tracing()):
        return True
    for o in outs:
        if o is None:
            continue
        if type(o) is Tensor:
            if _functional(o) or (_transforms_active() and _functorch_wrapped(o)):
                return True
        elif isinstance(o, Tensor) and _wrapper(o, Tensor):
            return True
    return False


def dual_level():
    """Whether forward-mode AD is on (a ``torch.autograd.forward_ad.dual_level()`` is
    open): a differentiable operator's call then carries its input's tangent, through
    the registered operators (PyTorch is loaded)."""
    return _modules["torch.autograd.forward_ad"]._current_level >= 0


def _wrapper(t, Tensor):
    """Whether the tensor ``t`` wraps others: FakeTensor, FunctionalTensor and other
    ``torch._subclasses``; functional tensors; torch.func's batched and grad
    wrappers (asked only while a torch.func transform runs: the global question is
    the cheaper one).  ``torch.nn.Parameter`` and plain subclasses are read."""
    tp = type(t)
    if tp is not Tensor and _subclass(tp):
        return True
    return _functional(t) or (_transforms_active() and _functorch_wrapped(t))


def _first_functional(t):
    """``_functional``'s first call: PyTorch's own checks looked up (PyTorch is
    loaded: ``t`` is a tensor), then asked.  Callers ask ``_functional`` first."""
    global _functional, _transforms_active, _functorch_wrapped, _jit_tracing
    C = _modules["torch"]._C
    _functional = _modules["torch"]._is_functional_tensor
    _jit_tracing = C._is_tracing
    _transforms_active = C._are_functorch_transforms_active
    _functorch_wrapped = C._functorch.is_functorch_wrapped_tensor
    return _functional(t)


def _not_compiling():
    """``_compiling`` while PyTorch is not loaded: False, until it is, from when on
    ``_compiling`` is ``torch.compiler.is_compiling`` itself (torch.compile's tracer
    knows the function, and takes it as True)."""
    global _compiling
    torch = _modules.get("torch")
    if torch is None:
        return False
    if torch.compiler.is_compiling():  # (set by an eager call: a global a traced call
        return True  # changes makes torch.compile guard on it, and compile the frame again)
    _compiling = torch.compiler.is_compiling
    return False


_compiling: Any = _not_compiling
# PyTorch's own checks (no test for None on every call: the first call looks them up).
_functional: Any = _first_functional
_transforms_active: Any = None
_functorch_wrapped: Any = None
#: Whether ``torch.jit.trace`` records the call (the legacy ONNX exporter's tracer too):
#: it must see the operators, or it keeps the first call's result as a constant.
_jit_tracing: Any = None


def _subclass(tp):
    """A tensor subclass the eager path cannot read (FakeTensor, FunctionalTensor,
    wrapper subclasses); ``torch.nn.Parameter`` and plain subclasses are read."""
    torch = _modules["torch"]
    return tp is not torch.nn.Parameter and "_subclasses" in (tp.__module__ or "")
