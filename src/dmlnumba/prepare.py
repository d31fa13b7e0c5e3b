"""The prepare step's front: every public call is resolved here, once, into a
:class:`~dmlnumba.target.Call` whose ``target`` runs it.

- a call that PyTorch traces (torch.compile, torch.export) or that holds a wrapper
  tensor (:func:`~dmlnumba.traced.traced`) runs on the registered operators,
  :mod:`dmlnumba.torch_ops`;
- lists, tuples and scalars are read as ``numpy.asarray`` reads them
  (nonzero_coordinates, argwhere); a 0-d argwhere input is read as shape (1,) and
  its rows lose their one column (NumPy's ``(1, 0)`` or ``(0, 0)``);
- a dask array's parameters are read once and its call runs on :mod:`dmlnumba.chunked`
  (no ``out=``, no ``stream=``);
- any other array goes to :mod:`dmlnumba.dispatch`, which resolves its library's
  ways (JAX, bfloat16, PyTorch's negation), its target, view and stream, and
  checks everything before anything is written.

``key``: a key function's (:mod:`dmlnumba.keys`) key, under which the call's target
keeps the runner it makes (``call.keep``); :data:`~dmlnumba.keys.TRACED` where
PyTorch traces the call (the key function asked, first); ``UNASKED`` where no key
function was asked (an adapter's call): it is asked here.
"""

from typing import Any

import numpy as np

from . import dispatch, keys
from . import validation as v
from .arrays import _libraries, is_cuda_array, library
from .chunked.blocks import check_chunks
from .keys import TRACED, UNASKED
from .target import Call, Runs
from .traced import traced

_INT64 = np.dtype(np.int64)


def torch_ops_ready():
    """Register the PyTorch operators (once) and say so.  Under torch.compile this
    runs when traced, not in the graph (marked as a constant result, see
    :mod:`dmlnumba._internals`), so that a first call inside a compiled function
    registers them too."""
    from . import torch_ops  # noqa: F401  (registers on import)

    return True


torch_ops_ready._dynamo_marked_constant = True  # type: ignore[attr-defined]


def torch_ops():
    """The module :mod:`dmlnumba.torch_ops`, registered (see :func:`torch_ops_ready`)."""
    torch_ops_ready()
    # An import, not a look-up in sys.modules: torch.compile reads that dict as it
    # was when tracing began, before the first call imported the module.
    from . import torch_ops

    return torch_ops


def adapter(name: str) -> Runs:
    """The adapter module that runs traced (``"torch"``) or dask (``"dask"``) calls,
    imported on first use (PyTorch and dask load only where a call needs them)."""
    if name == "torch":
        torch_ops()  # registered (see torch_ops_ready)
        from . import torch_ops as traced_ops

        return traced_ops
    from . import chunked

    return chunked


def _no_outputs_for_dask(f, stream, **outs):
    for name, o in outs.items():
        if o is not None:
            raise TypeError(
                f"{f}(): {name}= is not supported for dask arrays: the results are "
                f"new lazy dask arrays"
            )
    if stream is not None:
        raise ValueError(
            f"{f}(): stream= does not apply to dask arrays (each task runs on its "
            f"chunk's current stream)"
        )


def _lib(input):
    """The input's library: :func:`~dmlnumba.arrays.library`'s answer, read from its
    cache where the key function asked it already."""
    tp = type(input)
    if tp is np.ndarray:
        return None
    lib = _libraries.get(tp, UNASKED)
    return library(input) if lib is UNASKED else lib


def slice1(input, offsets, sizes, strides, output_sizes, out, device, stream, key=UNASKED) -> Call:
    """slice1's :class:`~dmlnumba.target.Call`."""
    f = "slice1"
    if key is UNASKED:
        key = keys.window(
            "slice1", input, offsets, sizes, strides, output_sizes, out, device, stream
        )[0]
    if key is TRACED:
        args = (offsets, sizes, strides, output_sizes, out, device, stream)
        return Call(f, input, "torch", adapter("torch"), args=args)
    lib = _lib(input)  # asked once: every layer below is told
    if lib == "dask":
        # Read once, before the input's layout: a parameter's __index__ may change it.
        args = v.slice1_args(offsets, sizes, strides, output_sizes)
        _no_outputs_for_dask(f, stream, out=out)
        return Call(f, input, lib, adapter("dask"), device=device, args=args)
    window = dispatch.slice1_window(offsets, sizes, strides, output_sizes)
    c = dispatch.window_call(f, input, "input", window, out, device, stream, lib, key)
    c.keep = keys.window_keeper(c.key, c.bf16, c.lib)
    return c


def slice_grad(
    grad, input_shape, offsets, sizes, strides, out, device, stream, key=UNASKED
) -> Call:
    """slice_grad's :class:`~dmlnumba.target.Call`."""
    f = "slice_grad"
    if key is UNASKED:
        key = keys.window(
            "slice_grad", grad, input_shape, offsets, sizes, strides, out, device, stream
        )[0]
    if key is TRACED:
        args = (input_shape, offsets, sizes, strides, out, device, stream)
        return Call(f, grad, "torch", adapter("torch"), args=args)
    lib = _lib(grad)
    if lib == "dask":
        offsets, sizes, strides, _ = v.slice1_args(offsets, sizes, strides, None, f)
        input_shape = v.shape_arg(input_shape, "input_shape", f)
        _no_outputs_for_dask(f, stream, out=out)
        return Call(
            f,
            grad,
            lib,
            adapter("dask"),
            device=device,
            args=(input_shape, offsets, sizes, strides),
        )
    window = dispatch.slice_grad_window(input_shape, offsets, sizes, strides)
    c = dispatch.window_call(f, grad, "input_gradient", window, out, device, stream, lib, key)
    c.keep = keys.window_keeper(c.key, c.bf16, c.lib)
    return c


def _as_array(input, f):
    """A list, tuple or scalar as ``numpy.asarray`` reads it; anything else as it is,
    where dmlnumba reads it as an array."""
    return dispatch.argwhere_input(input, f)


def nonzero(
    input, width, dtype, max_count, out_count, out_coordinates, device, stream, key=UNASKED
) -> Call:
    """nonzero_coordinates' :class:`~dmlnumba.target.Call`."""
    f = "nonzero_coordinates"
    given = out_count is not None or out_coordinates is not None
    outs = (out_count, out_coordinates)
    if key is UNASKED:
        key = keys.nonzero(f, input, width, dtype, max_count, device, stream, *outs)[0]
    if key is TRACED or (given and traced(input, out_count, out_coordinates)):
        args = (width, dtype, max_count, out_count, out_coordinates, device, stream)
        return Call(f, input, "torch", adapter("torch"), args=args)
    if isinstance(input, (list, tuple)):  # read as numpy.asarray reads it, as argwhere does
        input = _as_array(input, f)
        key = keys.nonzero(f, input, width, dtype, max_count, device, stream, *outs)[0]
    # Read once, before the input's layout: a parameter's __index__ may change the input.
    width, dtype, max_count = v.nonzero_args(width, dtype, max_count, f)
    lib = _lib(input)  # asked once: every layer below is told
    if lib == "dask":
        _no_outputs_for_dask(f, stream, out_count=out_count, out_coordinates=out_coordinates)
        return Call(f, input, lib, adapter("dask"), device=device, args=(width, dtype, max_count))
    c = dispatch.nonzero_call(input, width, dtype, max_count, *outs, device, stream, lib, f, key)
    c.keep = keys.keeper(c.key, c.bf16, c.lib)
    return c


def _one_element(x):
    """A 0-d array as shape (1,), in its own library (the same memory)."""
    if is_cuda_array(x) and not hasattr(x, "reshape"):  # a bare __cuda_array_interface__
        return _OneElement(x)
    return x.reshape(1)


class _OneElement:
    """A bare 0-d ``__cuda_array_interface__`` array seen as shape (1,)."""

    def __init__(self, x: Any) -> None:
        cai = dict(x.__cuda_array_interface__)
        cai.pop("descr", None)
        cai["shape"], cai["strides"] = (1,), None
        self.__cuda_array_interface__ = cai
        self.shape = (1,)
        self.dtype = np.dtype(cai["typestr"])
        self._owner = x


def argwhere(input, device, stream, key=UNASKED, transposed=False) -> Call:
    """argwhere's :class:`~dmlnumba.target.Call` (``call.zero_d``: a 0-d input, whose
    one element is read as shape (1,), its rows then given no column;
    ``transposed``: ONNX NonZero's ``(ndim, count)``)."""
    f = "argwhere"
    if key is UNASKED:
        key = keys.nonzero(f, input, None, np.int64, None, device, stream)[0]
    if key is TRACED:
        return Call(f, input, "torch", adapter("torch"), args=(device, stream))
    input = _as_array(input, f)
    zero_d = len(input.shape) == 0
    if zero_d:  # NumPy's (1, 0) or (0, 0): its one element's row, no columns
        input, key = _one_element(input), None
    lib = _lib(input)
    if lib == "dask":
        _no_outputs_for_dask(f, stream)
        c = Call(f, input, lib, adapter("dask"), device=device, args=(None, _INT64, None))
    else:
        c = dispatch.nonzero_call(
            input, None, _INT64, None, None, None, device, stream, lib, f, key
        )
        c.keep = keys.keeper(c.key, c.bf16, c.lib)
    c.zero_d, c.transposed = zero_d, transposed
    return c


def view(x, f, name) -> Call:
    """The :class:`~dmlnumba.target.Call` of an array read as the operators read it
    (``call.x``: its target's view; a dask array as it is), for an adapter that
    works out a call's parameters from the input's shape and dtype (ONNX's)."""
    lib = library(x)
    if lib == "dask":
        check_chunks(x, f, name)
        return Call(f, x, lib, adapter("dask"), x=x)
    x, bf16 = dispatch.readable(x, lib, f, None, name)
    target, a = dispatch.resolve(x, None, f, name, lib)
    v.check_strides(a, name, f)
    return Call(f, x, lib, target, x=a, bf16=bf16)


def host_values(values, f):
    """An array of any library as a NumPy array on the host (read back from a GPU);
    anything else as ``numpy.asarray`` reads it.  A JAX array is read by JAX, which
    waits for its work (its GPU memory, read through the CUDA array interface, could
    still be unwritten: Slice's steps were once read as 0)."""
    lib = library(values)
    if lib == "torch":
        # A copy: Tensor.numpy would make the caller's storage unresizable for good.
        return values.detach().to("cpu", copy=True).numpy()
    if lib == "jax":
        return np.asarray(values)
    if is_cuda_array(values, lib):  # CuPy, numba device arrays
        return dispatch.cuda_target(f).to_host(values)
    return np.asarray(values)
