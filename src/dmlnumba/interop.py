"""The input libraries' ways, at the API's door: bfloat16 (PyTorch's, ml_dtypes') read
as float16, PyTorch's rules for the tensors a call writes, JAX's 64-bit mode (the
input's own view, :func:`dmlnumba.dispatch.readable`, is the in-memory prepare step's).  The
prepare step and the targets call these: they know the library already, and nothing
here asks it."""

import sys

import numpy as np

from .dtypes import FLOAT16, is_bfloat16

_modules = sys.modules


def bfloat16_out(out, f):
    """The float16 view of a bfloat16 ``out=`` (a PyTorch tensor, or a NumPy array of
    ml_dtypes' bfloat16) for a bfloat16 input (the kernels copy the same two bytes);
    any other output's dtype differs from the input's, which is a TypeError naming
    both (a float16 one would receive bfloat16 bits)."""
    torch = _modules.get("torch")
    if torch is not None and isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16:
        return out.view(torch.float16)
    if isinstance(out, np.ndarray) and is_bfloat16(out.dtype):
        return np.ndarray.view(out, np.float16)  # (NumPy's own: a subclass's could lie)
    if getattr(out, "dtype", None) is None:
        raise TypeError(f"{f}(): out must be a bfloat16 array, not {type(out).__name__}")
    raise TypeError(f"{f}(): out has dtype {dtype_name(out.dtype)}, expected bfloat16")


def bfloat16_result(lib, r, bf16):
    """A new window result ``r`` of float16 bits (the input's library's array) as the
    input's bfloat16 dtype ``bf16``: a view of the same memory (a PyTorch tensor, a
    NumPy array); a JAX array bitcast by JAX."""
    if lib == "jax":
        return _modules["jax"].lax.bitcast_convert_type(r, bf16)
    return r.view(bf16)


def bfloat16_runner(run, window, bf16, lib=None):
    """The runner kept for a bfloat16 input's repeated calls (a PyTorch tensor, a
    NumPy array, a JAX CPU array: ``lib``; ``bf16``: its dtype): ``run``, the one made
    for its float16 view (the same two bytes, read and copied as the full path reads
    them, :func:`dmlnumba.dispatch.readable`), given float16 views of the input and of
    a window's ``out`` (slice1's, slice_grad's: ``window``; a NumPy array or a PyTorch
    tensor, whichever the input's library), a window's new result viewed back as
    bfloat16.  A JAX array's runner reads its memory as float16 and views its new
    result back itself (:func:`dmlnumba.cpu.views.library_runner`): only ``out`` is
    viewed here.  nonzero's and argwhere's outputs are integers: passed and given
    back as they are."""
    if lib == "jax":
        if not window:
            return run
        return lambda x, out=None: run(x) if out is None else run(x, float16_view(out))
    if isinstance(bf16, np.dtype):
        view, f16 = np.ndarray.view, FLOAT16
    else:
        torch = _modules["torch"]
        view, f16 = torch.Tensor.view, torch.float16
    if not window:
        return lambda x, *outs: run(view(x, f16), *outs)

    def go(x, out=None):
        if out is None:
            r = run(view(x, f16))
            return None if r is None else view(r, bf16)  # (None: the full path)
        return run(view(x, f16), float16_view(out))  # out itself, or None: the full path

    return go


def float16_view(a):
    """The float16 view of a bfloat16 NumPy array or PyTorch tensor (by NumPy's or
    PyTorch's own method: a subclass's could lie)."""
    if type(a) is np.ndarray:
        return np.ndarray.view(a, FLOAT16)
    torch = _modules["torch"]
    return torch.Tensor.view(a, torch.float16)


def dtype_name(dtype):
    """A NumPy or PyTorch dtype as the messages name it (``float32``, not
    ``torch.float32``)."""
    return str(dtype).rpartition(".")[2]


def check_storage(t, name, f):
    """ValueError where the strided PyTorch tensor ``t`` has elements that its storage
    does not hold: a storage freed or shrunk in place (``untyped_storage().resize_(0)``,
    as FSDP and activation offloading leave tensors).  Its data pointer is then null
    or too short: PyTorch's own kernels read or write past it, and a NumPy view of a
    null one is new memory, not the tensor's.  A tensor whose storage cannot be asked
    (a wrapper subclass) is left to the checks that follow."""
    if t.layout is not _modules["torch"].strided:
        return
    try:
        shape, strides, have = t.shape, t.stride(), t.untyped_storage().nbytes()
        first = t.storage_offset()
    except (RuntimeError, NotImplementedError):
        return
    last = first
    for n, s in zip(shape, strides):
        if n == 0:
            return
        last += (n - 1) * s
    need = (last + 1) * t.element_size()
    if need > have:
        raise ValueError(
            f"{f}(): {name}'s storage holds {have} bytes, and its elements need {need}: "
            f"a storage freed or shrunk in place (untyped_storage().resize_()); give "
            f"it its memory back first"
        )


def torch_out(o, dtype, name, f):
    """A PyTorch tensor the call is about to write, checked as PyTorch checks its
    own ``out=`` and in-place ops, before anything is written: no bfloat16 unless
    expected (``dtype``: a NumPy dtype, which has none), no freed storage
    (:func:`check_storage`), no inference tensor outside
    ``torch.inference_mode()``, no tensor that requires grad while grad mode is on
    (the writes are not differentiable); under ``torch.no_grad()`` such a tensor is
    written through ``detach()``, which shares its version counter.  Returns the
    tensor to write; :func:`torch_written` marks it afterwards."""
    torch = _modules["torch"]
    check_storage(o, name, f)
    if o.dtype is torch.bfloat16:  # dtypes are singletons
        raise TypeError(f"{f}(): {name} has dtype bfloat16, expected {dtype}")
    if o.is_inference() and not torch.is_inference_mode_enabled():
        raise ValueError(
            f"{f}(): {name} is an inference tensor, which PyTorch does not let anything "
            f"update outside torch.inference_mode(); clone() it first"
        )
    if o.requires_grad:
        if torch.is_grad_enabled():
            raise grad_out_error(name, f)
        o = o.detach()
    return o


def grad_out_error(name, f):
    """The TypeError of an output ``name`` that requires grad, in grad mode (the eager
    path's and the operators' path's)."""
    return TypeError(
        f"{f}(): {name} requires grad, and dmlnumba's writes are not differentiable; "
        f"pass a tensor that does not, or call under torch.no_grad()"
    )


def torch_written(o):
    """Bump the version counter of a PyTorch tensor that a call writes, as PyTorch's
    in-place ops do, so that autograd refuses to use a saved copy that was
    overwritten (no-op for inference tensors, which have none).  A sequence: given
    a tensor, PyTorch's function would iterate over its elements."""
    _modules["torch"]._C._increment_version((o,))


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
