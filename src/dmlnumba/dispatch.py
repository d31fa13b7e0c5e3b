"""The prepare step's in-memory part: an array's call resolved once into a
:class:`~dmlnumba.target.Call` for the target that runs it (:func:`slice1_call`,
:func:`nonzero_call`): its library's ways (JAX's asynchronous work, PyTorch's lazy
negation and bfloat16), the target and the input as that target's array
(:func:`resolve`), the stream and every check of the input and the parameters.
The front of the step (:mod:`dmlnumba.prepare`) sends traced calls and dask arrays
to their adapters, which call this module for the arrays they hold.

Which target: from the ``device`` argument and the input.

``device=None`` runs where the input lives: on the CPU for NumPy arrays (and
for CPU tensors that export DLPack, such as PyTorch's), on the GPU for objects
that export ``__cuda_array_interface__`` (CuPy, PyTorch, Numba device arrays).
``"cpu"``, ``"cuda"`` and ``"cuda:N"`` name a target; data that lives elsewhere
is copied there first (``"cuda"``: a CUDA array's own device, the current
device for host data; ``"cuda:N"``: device N, whatever the thread's current
device, a CUDA array on another device copied to it).  Target modules are
imported on first use, so that ``import dmlnumba`` imports neither numba's CPU
compiler nor ``numba.cuda``.
"""

import importlib.util
import sys
from typing import Any

import numpy as np

from . import config
from . import validation as v
from .arrays import _ASK, is_cuda_array, is_dask, library, refuse_deleted
from .cpu import process
from .cpu import target as target_cpu
from .cpu.views import jax_memory
from .dtypes import is_bfloat16
from .interop import bfloat16_out, check_jax_fits, check_storage
from .target import Call, CudaTarget, Target
from .validation import host_array

_modules = sys.modules

_cuda: CudaTarget | None = None


class DeviceUnavailableError(ValueError):
    """The device a call asked for cannot be used here (no GPU, no driver, no
    numba-cuda, no such device index)."""


def cuda_target(func: str = "dmlnumba") -> CudaTarget:
    """The CUDA target module, or :class:`DeviceUnavailableError` saying what to
    install or set where it cannot run."""
    global _cuda
    if _cuda is None:
        if importlib.util.find_spec("numba_cuda") is None:
            raise DeviceUnavailableError(
                f"{func}(): the CUDA target needs numba-cuda, which is not installed: "
                f"pip install 'dmlnumba[cuda]'"
            )
        from numba import cuda

        if not cuda.is_available():
            raise DeviceUnavailableError(
                f"{func}(): no usable CUDA GPU here (numba.cuda.is_available() is False: no "
                f"NVIDIA GPU, or no driver). Run on the CPU (device='cpu'), or set "
                f"NUMBA_ENABLE_CUDASIM=1 before importing numba to use numba's CUDA simulator"
            )
        from .gpu import target as target_cuda

        _cuda = target_cuda
    return _cuda


def _cuda_device(dev: tuple[str, int | None], func: str) -> CudaTarget:
    """The CUDA target for ``("cuda", index)``, with the index checked."""
    t = cuda_target(func)
    if dev[1] is not None:  # the simulator has one device
        n = t.device_count()
        if dev[1] >= n:
            raise DeviceUnavailableError(
                f"{func}(): device 'cuda:{dev[1]}' does not exist; this machine has {n} CUDA "
                f"device{'s' if n != 1 else ''} (cuda:0 to cuda:{n - 1})"
            )
    return t


def _to_numpy(x, func, name, lib, cuda=None):
    """A host input as a NumPy array, without a copy where possible (``cuda``: whether
    ``x`` is a CUDA array, where the caller knows)."""
    if isinstance(x, np.ndarray):
        return host_array(x, name, func)
    if is_cuda_array(x, lib) if cuda is None else cuda:
        return cuda_target(func).to_host(x)
    if hasattr(x, "__dlpack__") and not isinstance(x, type):
        if lib == "torch":  # its data: DLPack refuses tensors that require grad
            x = x.detach()
        try:
            return np.from_dlpack(x)
        except (BufferError, TypeError, RuntimeError, ValueError) as e:
            raise TypeError(f"{func}(): {name} could not be read as a host array: {e}") from None
    raise TypeError(
        f"{func}(): {name} must be a NumPy array or a CUDA array (CuPy, PyTorch, Numba), "
        f"not {type(x).__name__}"
    )


def parse_device(device, func):
    """``None``, ``("cpu", None)`` or ``("cuda", N or None)``."""
    if device is None:
        return None
    if not isinstance(device, str):
        raise TypeError(
            f"{func}(): device must be a string such as 'cpu' or 'cuda:0', "
            f"or None, not {type(device).__name__}"
        )
    d = device.strip().lower()
    if d == "cpu":
        return ("cpu", None)
    if d == "cuda":
        return ("cuda", None)
    if d.startswith("cuda:") and d[5:].isascii() and d[5:].isdigit():
        return ("cuda", int(d[5:]))
    raise ValueError(
        f"{func}(): unknown device {device!r}; expected 'cpu', 'cuda', 'cuda:N' or None"
    )


def resolve(
    x: Any, device: Any, func: str, name: str = "input", lib: str | None = _ASK
) -> tuple[Target, Any]:
    """``(target, array)``: the target module and the input as that target's array;
    ``lib``: :func:`~dmlnumba.arrays.library`'s answer for ``x``, where the caller has
    it (the API does: it asks once per call)."""
    if lib == _ASK:
        lib = library(x)
    if config.ENV_ERROR:
        raise ValueError(f"{func}(): {config.ENV_ERROR}")
    dev = parse_device(device, func)
    if dev is None:
        # The library's answer where it settles it (a PyTorch tensor says where it is).
        # A NumPy array first: the common call, and never a CUDA one.
        if isinstance(x, np.ndarray):
            cuda = False
        elif lib == "torch":
            cuda = x.is_cuda
        elif lib == "jax":  # (a JAX array on a GPU exports the interface)
            cuda = hasattr(x, "__cuda_array_interface__")
        else:
            cuda = lib in ("cupy", "numba") or is_cuda_array(x, lib)
        if cuda:
            t = cuda_target(func)
            return t, t.as_device_array(x, None, func, name, lib)
        process.check_env(func)
        return target_cpu, _to_numpy(x, func, name, lib, False)
    if dev[0] == "cpu":
        process.check_env(func)
        return target_cpu, _to_numpy(x, func, name, lib)
    t = _cuda_device(dev, func)
    if not is_cuda_array(x, lib):
        x, lib = _to_numpy(x, func, name, lib), None
    return t, t.as_device_array(x, dev[1], func, name, lib)


def torch_view(t, f, name="input"):
    """``(tensor, bfloat16)``: a PyTorch tensor as the kernels can read it, its lazy
    negation resolved (a view whose storage holds the un-negated values), a
    bfloat16 one viewed as float16 (whose zero bits, copy and NaN rule are the same);
    ``bfloat16``: ``torch.bfloat16`` for such a one, else None.  A conjugated one
    (complex) is refused, and one whose storage does not hold its elements
    (:func:`~dmlnumba.interop.check_storage`)."""
    torch = _modules["torch"]
    check_storage(t, name, f)
    if t.is_conj():
        raise TypeError(f"{f}(): {name} is a conjugated (complex) tensor, which is not supported")
    if t.is_neg():
        t = t.resolve_neg()
    if t.dtype == torch.bfloat16:
        return t.view(torch.float16), torch.bfloat16
    return t, None


def readable(input, lib, f, stream=None, name="input"):
    """``(input, bf16)``: the input as the kernels can read it, ``bf16`` the bfloat16 dtype
    it had (else None), read as float16, whose zero bits, copy and NaN rule are the
    same: a JAX array (a deleted one refused) once its asynchronous work is done
    (JAX computes on streams of its own; a GPU one's call with no ``stream=``, which
    runs on the legacy stream, refused first while PyTorch's or CuPy's current
    stream captures: the wait would end the capture), a bfloat16 one's bits on the
    CPU read in place, on a GPU bitcast by JAX (a copy: JAX has no views); a PyTorch
    tensor through :func:`torch_view`; a NumPy array of ml_dtypes' bfloat16 as a
    view."""
    if lib == "jax":
        refuse_deleted(input, name, f)
        gpu = any(d.platform == "gpu" for d in input.devices())
        if stream is None and gpu:
            cuda_target(f)  # (its own error where numba-cuda or a GPU is missing)
            from .gpu.streams import refuse_legacy

            refuse_legacy(f)
        input.block_until_ready()
        if is_bfloat16(input.dtype):
            bf16 = input.dtype
            if gpu:
                jax = _modules["jax"]
                bits = jax.lax.bitcast_convert_type(input, jax.numpy.float16)
                return bits.block_until_ready(), bf16
            return jax_memory(input), bf16  # (JAX's memory, as a runner reads it)
    elif lib == "torch":
        return torch_view(input, f, name)
    elif isinstance(input, np.ndarray) and is_bfloat16(input.dtype):
        return np.ndarray.view(input, np.float16), input.dtype
    return input, None


def _bfloat16_key(key, lib, bits):
    """The key under which a bfloat16 input's call keeps its runner: its own, but
    None for a JAX array on a GPU (its float16 ``bits`` are a copy JAX makes, which no
    runner reads: every call takes the full path; a CPU one's are its memory)."""
    return None if lib == "jax" and type(bits) is not np.ndarray else key


def slice1_window(offsets, sizes, strides, output_sizes):
    """slice1's window check for :func:`window_call`, its parameters read once here,
    before the input's layout: a parameter's ``__index__`` may change the input."""
    offsets, sizes, strides, output_sizes = v.slice1_args(offsets, sizes, strides, output_sizes)

    def window(x):
        return v.slice1_params(x.shape, offsets, sizes, strides, output_sizes)

    return window


def slice_grad_window(input_shape, offsets, sizes, strides):
    """slice_grad's window check for :func:`window_call` (the output's shape
    ``input_shape``), its parameters read once here (see :func:`slice1_window`)."""
    f = "slice_grad"
    offsets, sizes, strides, _ = v.slice1_args(offsets, sizes, strides, None, f)
    input_shape = v.shape_arg(input_shape, "input_shape", f)

    def window(x):
        starts, steps = v.slice_grad_params(input_shape, x.shape, offsets, sizes, strides, f)
        return starts, steps, input_shape

    return window


def window_call(f, input, name, window, out, device, stream, lib, key=None):
    """The checked :class:`~dmlnumba.target.Call` of a window copy (slice1, slice_grad:
    ``f``) reading the array ``input`` (its parameter's ``name``): ``window(x)`` gives
    the window's ``(starts, steps, output shape)``, checked against the input's array
    ``x`` (:func:`slice1_window`, :func:`slice_grad_window`).  ``key``: where a runner
    the call makes is kept; a bfloat16 tensor is read (and ``out`` written) as
    float16, the same two bytes (its runner is kept for bfloat16 tensors:
    :func:`dmlnumba.keys.window_keeper`)."""
    given_out = out
    read, bf16 = readable(input, lib, f, stream, name)  # (a new runner runs on input)
    if bf16 is not None:
        if out is not None:
            out = bfloat16_out(out, f)
        elif lib not in ("torch", "jax") and (parse_device(device, f) or ("cpu",))[0] == "cuda":
            raise TypeError(  # (before its upload)
                f"{f}(): a bfloat16 NumPy {name} runs on the CPU only: its result on a GPU "
                f"would be a numba device array, which holds no bfloat16"
            )
        key = _bfloat16_key(key, lib, read)
    target, x = resolve(read, device, f, name, lib)
    target.check_stream(stream, f)
    v.check_dtype(x.dtype, v.SLICE_DTYPES, f, name)
    starts, steps, shape = window(x)
    v.check_strides(x, name, f)
    return Call(
        f,
        input,
        lib,
        target,
        x=x,
        stream=stream,
        key=key,
        bf16=bf16,
        starts=starts,
        steps=steps,
        shape=shape,
        out=out,
        given_out=given_out,
    )


def nonzero_call(
    input, width, dtype, max_count, out_count, out_coordinates, device, stream, lib, f, key=None
):
    """The :class:`~dmlnumba.target.Call` of an array's nonzero_coordinates or argwhere
    (``f``), checked (``width``, ``dtype`` and ``max_count`` read already)."""
    read, bf16 = readable(input, lib, f, stream)  # bfloat16 counted as float16: its zeros
    if bf16 is not None:
        key = _bfloat16_key(key, lib, read)
    target, x = resolve(read, device, f, lib=lib)
    target.check_stream(stream, f)
    v.check_dtype(x.dtype, v.NONZERO_DTYPES, f)
    v.check_ndim(x.ndim, f)
    v.check_strides(x, "input", f)
    w = v.nonzero_width(x.shape, width, f)
    dt = v.coord_dtype(dtype, x.size, f)
    rows = v.max_count(max_count, x.size, dt, f, w)
    if lib == "jax":
        check_jax_fits(x.shape, dt, f)
    if target.MAX_ELEMENTS is not None and x.size > target.MAX_ELEMENTS:
        raise ValueError(
            f"{f}(): input has {x.size} elements; the {target.name} target counts "
            f"at most {target.MAX_ELEMENTS}"
        )
    return Call(
        f,
        input,
        lib,
        target,
        x=x,
        stream=stream,
        key=key,
        width=w,
        dtype=dt,
        rows=rows,
        max_count=max_count,
        out_count=out_count,
        out_coordinates=out_coordinates,
        bf16=bf16,
    )


def run_slice1(
    input, offsets, sizes, strides, output_sizes=None, out=None, device=None, stream=None
):
    """slice1 of an array (no dask array, no traced call), prepared and run: the
    adapters' way to the targets (no runner is kept)."""
    lib = library(input)
    window = slice1_window(offsets, sizes, strides, output_sizes)
    c = window_call("slice1", input, "input", window, out, device, stream, lib)
    return c.target.slice1_call(c)


def run_slice_grad(grad, input_shape, offsets, sizes, strides, out=None, device=None, stream=None):
    """slice_grad of an array (see :func:`run_slice1`)."""
    lib = library(grad)
    window = slice_grad_window(input_shape, offsets, sizes, strides)
    c = window_call("slice_grad", grad, "input_gradient", window, out, device, stream, lib)
    return c.target.slice_grad_call(c)


def run_nonzero(
    input,
    width,
    dtype,
    max_count=None,
    out_count=None,
    out_coordinates=None,
    device=None,
    stream=None,
):
    """nonzero_coordinates of an array, a list or a tuple (see :func:`run_slice1`)."""
    f = "nonzero_coordinates"
    if isinstance(input, (list, tuple)):  # read as numpy.asarray reads it
        input = argwhere_input(input, f)
    width, dtype, max_count = v.nonzero_args(width, dtype, max_count, f)
    lib = library(input)
    outs = (out_count, out_coordinates)
    c = nonzero_call(input, width, dtype, max_count, *outs, device, stream, lib, f)
    return c.target.nonzero_call(c)


def run_argwhere(input, device=None, stream=None):
    """argwhere of an array, a list, a tuple or a scalar (see :func:`run_slice1`); a
    0-d input gives NumPy's ``(1, 0)`` or ``(0, 0)``."""
    f = "argwhere"
    input = argwhere_input(input, f)
    if len(input.shape) == 0:  # its one element's row, no columns
        return run_argwhere(input.reshape(1), device, stream)[:, :0]
    lib = library(input)
    c = nonzero_call(input, None, np.dtype(np.int64), None, None, None, device, stream, lib, f)
    return c.target.argwhere_call(c)


def argwhere_input(x, f="argwhere"):
    """``x`` where dmlnumba reads it as an array, a list, tuple or scalar as
    ``numpy.asarray`` reads it (as ``numpy.argwhere`` does); a TypeError for anything
    else."""
    if isinstance(x, (list, tuple, np.generic, bool, int, float)):
        try:
            return np.asarray(x)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{f}(): input could not be read as an array: {e}") from None
    if (
        isinstance(x, np.ndarray)
        or is_dask(x)
        or is_cuda_array(x)
        or (hasattr(x, "__dlpack__") and not isinstance(x, type))
    ):
        return x
    raise TypeError(
        f"{f}(): input must be an array (NumPy, CuPy, numba, dask, or a PyTorch CPU or CUDA "
        f"tensor), a list, a tuple or a scalar, not {type(x).__name__}; convert it with "
        f"numpy.asarray(input) first"
    )
