"""The input libraries' ways, at the API's door: tracing by torch.compile (calls go
through the registered PyTorch operators, :mod:`dmlnumba.torch_ops`), PyTorch
views the kernels cannot read as they are (lazily negated, bfloat16), PyTorch
dtypes, and results handed back as the input's library's arrays (PyTorch on the
CPU, JAX through DLPack)."""

import sys

import numpy as np

from .cpu import target as target_cpu

_modules = sys.modules


def traced(input):
    """Whether this call is being traced by torch.compile or torch.export (or gets a
    PyTorch tensor subclass, such as a FakeTensor): then it goes through the
    registered PyTorch operators (:mod:`dmlnumba.torch_ops`), which the tracer
    records as one node each.  Cheap where PyTorch is not loaded."""
    torch = _modules.get("torch")
    if torch is None:
        return False
    if torch.compiler.is_compiling():
        return True
    tp = type(input)
    return tp is not torch.Tensor and isinstance(input, torch.Tensor) and _subclass(tp)


def _subclass(tp):
    """A tensor subclass the eager path cannot read (FakeTensor, FunctionalTensor,
    wrapper subclasses); ``torch.nn.Parameter`` and plain subclasses are read."""
    torch = _modules["torch"]
    return tp is not torch.nn.Parameter and "_subclasses" in (tp.__module__ or "")


def torch_ops_ready():
    """Register the PyTorch operators (once) and say so.  Under torch.compile this
    runs when traced, not in the graph (marked as a constant result, see
    :mod:`dmlnumba._internals`), so that a first call inside a compiled function
    registers them too."""
    from . import torch_ops  # noqa: F401  (registers on import)

    return True


torch_ops_ready._dynamo_marked_constant = True  # type: ignore[attr-defined]


def torch_view(t, f, name="input"):
    """``(tensor, bfloat16)``: a PyTorch tensor as the kernels can read it, its lazy
    negation resolved (a view whose storage holds the un-negated values), a
    bfloat16 one viewed as float16 (whose zero bits, copy and NaN rule are the same);
    ``bfloat16`` says which.  A conjugated one (complex) is refused."""
    torch = _modules["torch"]
    if t.is_conj():
        raise TypeError(f"{f}(): {name} is a conjugated (complex) tensor, which is not supported")
    if t.is_neg():
        t = t.resolve_neg()
    if t.dtype == torch.bfloat16:
        return t.view(torch.float16), True
    return t, False


def torch_dtype(dtype):
    """``dtype=`` for the PyTorch operator: a torch dtype (NumPy's named the same way
    map to it)."""
    torch = _modules["torch"]
    if isinstance(dtype, torch.dtype):
        return dtype
    name = np.dtype(dtype).name
    if not hasattr(torch, name):
        raise TypeError(f"nonzero_coordinates(): dtype {name} has no PyTorch counterpart")
    return getattr(torch, name)


def as_library(lib, target, a):
    """A new result as the input's library's array: a PyTorch tensor over the same
    memory for PyTorch inputs on the CPU (CUDA targets allocate in PyTorch and
    CuPy already); a JAX array for JAX inputs (see :func:`to_jax`)."""
    if lib == "torch" and target is target_cpu:
        import torch

        return torch.from_numpy(a)
    if lib == "jax":
        return to_jax(target, a)
    return a


def to_jax(target, a):
    """A result as a JAX array, through DLPack.  JAX runs on streams of its own, so
    on the GPU the call's work (on the legacy default stream, where JAX inputs run)
    is waited for first: JAX may then read the result on any stream."""
    import jax

    if target is target_cpu:
        return jax.dlpack.from_dlpack(np.ascontiguousarray(a))
    from cuda.core.utils import StridedMemoryView

    target.synchronize(0, target.describe(a, "result", "to_jax").device)
    return jax.dlpack.from_dlpack(StridedMemoryView.from_cuda_array_interface(a, -1))
