"""The input libraries' ways, at the API's door: tracing by torch.compile (calls go
through the registered PyTorch operators, :mod:`dmlnumba.torch_ops`), PyTorch
views the kernels cannot read as they are (lazily negated, bfloat16), PyTorch
dtypes, and results handed back as the input's library's arrays (PyTorch on the
CPU, JAX through DLPack)."""

import sys

import numpy as np

from .arrays import is_cuda_array
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


def one_element(x):
    """A 0-d array as shape (1,), in its own library (the same memory)."""
    if is_cuda_array(x) and not hasattr(x, "reshape"):  # a bare __cuda_array_interface__
        return _OneElement(x)
    return x.reshape(1)


class _OneElement:
    """A bare 0-d ``__cuda_array_interface__`` array seen as shape (1,)."""

    def __init__(self, x):
        cai = dict(x.__cuda_array_interface__)
        cai.pop("descr", None)
        cai["shape"], cai["strides"] = (1,), None
        self.__cuda_array_interface__ = cai
        self.shape = (1,)
        self.dtype = np.dtype(cai["typestr"])
        self._owner = x


def check_jax_fits(shape, dtype, f):
    """A coordinates result of ``dtype`` for a JAX input of ``shape`` must fit the
    dtype JAX holds it in: with JAX's 64-bit mode off, JAX takes int64 as int32 and
    uint64 as uint32, and DLPack narrows the values (they would wrap).  argwhere
    gives coordinates only (each below its dimension's size); nonzero_coordinates
    also its count (up to the input's size).  A ValueError where they may not fit."""
    import jax

    held = np.dtype(jax.dtypes.canonicalize_dtype(dtype))
    if held == dtype:
        return
    size = 1
    for n in shape:
        size *= n
    most, what = (max(shape) - 1, "coordinates") if f == "argwhere" else (size, "count")
    if most <= np.iinfo(held).max:
        return
    other = " (or pass dtype=numpy.uint32)" if f != "argwhere" and most < 1 << 32 else ""
    raise ValueError(
        f"{f}(): the {what} of a JAX input of shape {tuple(shape)} may reach {most}, which "
        f"{held} (the dtype JAX holds {dtype} in with its 64-bit mode off) cannot hold; enable "
        f'64-bit mode (jax.config.update("jax_enable_x64", True) at startup, or '
        f"JAX_ENABLE_X64=1){other}"
    )


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
