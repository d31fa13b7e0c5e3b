"""dmlnumba's operators as PyTorch custom operators (``torch.ops.dmlnumba.*``).

Importing this module imports PyTorch and registers them, once.  ``dmlnumba``
imports it only when a call is traced by ``torch.compile`` or ``torch.export``,
or gets a tensor whose own storage is no data (a FakeTensor, a functional tensor,
a ``torch.func`` transform's wrapper; see :func:`dmlnumba.traced.traced`): such a
call becomes one node of the graph, with static output shapes, so that
``fullgraph=True`` and ``mode="reduce-overhead"`` (CUDA graphs) work.  Eager calls
do not go through these operators (they cost tens of microseconds of dispatch);
they run the same kernels directly.  To load an exported program in a new
process, ``import dmlnumba.torch_ops`` first.

- ``slice1(Tensor input, int[] offsets, int[] sizes, int[] strides,
  int[]? output_sizes) -> Tensor`` and ``slice1_out(..., Tensor(a!) out)``;
- ``nonzero_coordinates(Tensor input, int? width, ScalarType dtype,
  int? max_count) -> (Tensor count, Tensor coordinates)``: the count a ``(1,)``
  tensor, the coordinates ``(rows, width)``, rows ``input.numel()`` or
  ``min(max_count, input.numel())``; rows past the count are unspecified
  (whatever the memory held), as in the eager call.
  ``nonzero_coordinates_out(..., Tensor(a!) out_count, Tensor(b!) out_coordinates)``;
- ``argwhere(Tensor input) -> Tensor``: ``(count, ndim)`` int64, a
  data-dependent shape (an unbacked size under ``torch.compile``; on CUDA the
  count is read back, so it cannot be captured in a CUDA graph).

Their fake implementations check the arguments with the eager call's own
validation functions, so that a traced call raises what the eager call raises
(wrapped by the tracer in an error of its own, which names it and has it in
its chain of exceptions).

Under ``torch.compile``, a call whose input or output is no PyTorch tensor (a
NumPy array, a list), or that passes ``device=`` or ``stream=``, runs eagerly,
as a graph break (``fullgraph=True`` refuses it): its results are then what the
eager call returns (NumPy arrays for NumPy inputs).
"""

from collections.abc import Sequence

import torch

from . import torch_grad
from . import validation as v
from .dispatch import run_argwhere, run_nonzero, run_slice1, run_slice_grad
from .interop import dtype_name, grad_out_error
from .layouts import tensor_there
from .torch_fakes import (
    check_input,
    check_nonzero_outs,
    check_out,
    nonzero_shape,
    slice1_shape,
    slice_grad_check,
    torch_dtype,
)
from .traced import dual_level


@torch.library.custom_op("dmlnumba::slice1", mutates_args=())
def slice1(
    input: torch.Tensor,
    offsets: Sequence[int],
    sizes: Sequence[int],
    strides: Sequence[int],
    output_sizes: Sequence[int] | None = None,
) -> torch.Tensor:
    return run_slice1(input, list(offsets), list(sizes), list(strides), output_sizes)


@slice1.register_fake
def _(input, offsets, sizes, strides, output_sizes=None):
    return input.new_empty(slice1_shape(input, offsets, sizes, strides, output_sizes))


@torch.library.custom_op("dmlnumba::slice1_out", mutates_args=("out",))
def slice1_out(
    input: torch.Tensor,
    offsets: Sequence[int],
    sizes: Sequence[int],
    strides: Sequence[int],
    output_sizes: Sequence[int] | None,
    out: torch.Tensor,
) -> None:
    run_slice1(input, list(offsets), list(sizes), list(strides), output_sizes, out=out)


@slice1_out.register_fake
def _(input, offsets, sizes, strides, output_sizes, out):
    check_out(out, input, slice1_shape(input, offsets, sizes, strides, output_sizes))


@torch.library.custom_op("dmlnumba::slice_grad", mutates_args=())
def slice_grad(
    input_gradient: torch.Tensor,
    input_shape: Sequence[int],
    offsets: Sequence[int],
    sizes: Sequence[int],
    strides: Sequence[int],
) -> torch.Tensor:
    return run_slice_grad(
        input_gradient, list(input_shape), list(offsets), list(sizes), list(strides)
    )


@slice_grad.register_fake
def _(input_gradient, input_shape, offsets, sizes, strides):
    slice_grad_check(input_gradient, input_shape, offsets, sizes, strides)
    return input_gradient.new_empty(tuple(input_shape))


torch_grad.register(slice1, slice_grad)


@torch.library.custom_op("dmlnumba::nonzero_coordinates", mutates_args=())
def nonzero_coordinates(
    input: torch.Tensor,
    width: int | None = None,
    dtype: torch.dtype = torch.uint32,
    max_count: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    return run_nonzero(input, width, dtype, max_count)


@nonzero_coordinates.register_fake
def _(input, width=None, dtype=torch.uint32, max_count=None):
    w, rows = nonzero_shape(input, width, dtype, max_count)
    return input.new_empty((1,), dtype=dtype), input.new_empty((rows, w), dtype=dtype)


@torch.library.custom_op(
    "dmlnumba::nonzero_coordinates_out", mutates_args=("out_count", "out_coordinates")
)
def nonzero_coordinates_out(
    input: torch.Tensor,
    width: int | None,
    max_count: int | None,
    out_count: torch.Tensor,
    out_coordinates: torch.Tensor,
) -> None:
    run_nonzero(input, width, out_count.dtype, max_count, out_count, out_coordinates)


@nonzero_coordinates_out.register_fake
def _(input, width, max_count, out_count, out_coordinates):
    w, rows = nonzero_shape(input, width, out_count.dtype, max_count)
    check_nonzero_outs(out_count.dtype, w, rows, out_count, out_coordinates)


@torch.library.custom_op("dmlnumba::argwhere", mutates_args=())
def argwhere(input: torch.Tensor) -> torch.Tensor:
    return run_argwhere(input)


@argwhere.register_fake
def _(input):
    check_input(input, v.NONZERO_DTYPES, "argwhere")
    ctx = torch.library.get_ctx()
    n = input.numel()
    if type(n) is int:
        rows = ctx.new_dynamic_size(max=max(n, 2))
    else:  # a dynamic shape: the bound, a symbol, as a runtime check (max= takes ints)
        rows = ctx.new_dynamic_size()
        torch._check(rows <= n)
    return input.new_empty((rows, input.dim()), dtype=torch.int64)


# The API's calls routed here (see dmlnumba.traced.traced).


def _tensors(*args):
    return all(a is None or isinstance(a, torch.Tensor) for a in args)


def _func_wrapped(*args):
    """Whether a tensor is one of torch.func's wrappers (not while compiling, where
    tensors are fake), whose functionalization takes no mutating custom operator:
    outputs are then written by ``copy_`` from the functional operator's."""
    if torch.compiler.is_compiling():
        return False
    return any(
        a is not None
        and (torch._C._functorch.is_functorch_wrapped_tensor(a) or torch._is_functional_tensor(a))
        for a in args
    )


def _eager(f):
    """The eager call, for what the operators do not take: under torch.compile a
    graph break (``fullgraph=True`` refuses it), elsewhere (a wrapper tensor beside
    an array of another kind, a device or stream beside a tensor that autograd or
    torch.jit.trace records) a TypeError."""
    if torch.compiler.is_compiling():
        return _EAGER[f]
    raise TypeError(
        f"{f}(): a call that PyTorch records (autograd, torch.jit.trace, a wrapper tensor: "
        f"FakeTensor, functional tensor, torch.func transform) goes through "
        f"torch.ops.dmlnumba.{f}, which takes PyTorch tensors as input and outputs and "
        f"runs where they are: no stream=, and device= only the input's own"
    )


def _here(input, device):
    """``device``, or None where it names where the tensor ``input`` is already (the
    operators' own place: the same call)."""
    if device is not None and isinstance(input, torch.Tensor) and tensor_there(input, device):
        return None
    return device


def _window(f, **params):
    """A window's parameters as the operators' schema reads them, checked first as the
    eager call checks them (the schema takes True for 1, refuses a float with its own
    RuntimeError, and would read an iterator twice): a TypeError or ValueError naming
    the parameter; ints and traced sizes (``torch.SymInt``) pass as they are."""
    out = []
    for name, p in params.items():
        if p is not None and (
            not isinstance(p, (tuple, list, torch.Size))
            or not all(type(e) is int or isinstance(e, torch.SymInt) for e in p)
        ):
            if not v._is_sequence(p):
                raise TypeError(
                    f"{f}(): {name} must be a sequence of integers, not {type(p).__name__}"
                )
            p = v.int_values(p, name, f)
        out.append(p)
    return out


def _eager_slice1(input, offsets, sizes, strides, output_sizes, *, out, device, stream):
    return run_slice1(input, offsets, sizes, strides, output_sizes, out, device, stream)


def _eager_slice_grad(grad, input_shape, offsets, sizes, strides, *, out, device, stream):
    return run_slice_grad(grad, input_shape, offsets, sizes, strides, out, device, stream)


def _eager_nonzero(input, width, *, dtype, max_count, out_count, out_coordinates, device, stream):
    outs = (out_count, out_coordinates)
    return run_nonzero(input, width, dtype, max_count, *outs, device, stream)


def _eager_argwhere(input, *, device, stream):
    return run_argwhere(input, device, stream)


_EAGER = {
    "slice1": torch.compiler.disable(_eager_slice1),
    "slice_grad": torch.compiler.disable(_eager_slice_grad),
    "nonzero_coordinates": torch.compiler.disable(_eager_nonzero),
    "argwhere": torch.compiler.disable(_eager_argwhere),
}


def slice1_call(c):
    """:func:`dmlnumba.slice1` through the operators (``c.args``: the caller's)."""
    input = c.input
    offsets, sizes, strides, output_sizes, out, device, stream = c.args
    device = _here(input, device)
    offsets, sizes, strides, output_sizes = _window(
        "slice1", offsets=offsets, sizes=sizes, strides=strides, output_sizes=output_sizes
    )
    if not _tensors(input, out) or device is not None or stream is not None:
        return _eager("slice1")(
            input, offsets, sizes, strides, output_sizes, out=out, device=device, stream=stream
        )
    ops = torch.ops.dmlnumba
    if out is None:
        return torch_grad.slice1_op(input, offsets, sizes, strides, output_sizes)
    _no_grad_out("slice1", input, out)
    if _func_wrapped(input, out):
        r = ops.slice1(input, offsets, sizes, strides, output_sizes)
        check_out(out, input, r.shape)
        out.copy_(r)
    else:
        ops.slice1_out(input, offsets, sizes, strides, output_sizes, out)
    return out


def _no_grad_out(f, input, out):
    """An ``out=`` write is not differentiable: refused in grad mode for an input or an
    ``out`` that requires grad, as PyTorch refuses its own ``out=`` calls and the eager
    path ``out`` (:func:`~dmlnumba.interop.torch_out`), and for an input that carries
    a forward-mode tangent (the write would drop it)."""
    if not torch.is_grad_enabled():
        pass
    elif input.requires_grad:
        raise TypeError(
            f"{f}(): out= does not support automatic differentiation, and the input requires "
            f"grad; call without out=, or under torch.no_grad()"
        )
    elif out.requires_grad:
        raise grad_out_error("out", f)
    if dual_level() and torch.autograd.forward_ad.unpack_dual(input).tangent is not None:
        raise TypeError(
            f"{f}(): out= does not carry forward-mode tangents, and the input has one; "
            f"call without out="
        )


def slice_grad_call(c):
    """:func:`dmlnumba.slice_grad` through the operator (differentiable: its backward is
    slice1); ``out=`` is written by ``copy_`` from the operator's result."""
    grad = c.input
    input_shape, offsets, sizes, strides, out, device, stream = c.args
    device = _here(grad, device)
    input_shape, offsets, sizes, strides = _window(
        "slice_grad", input_shape=input_shape, offsets=offsets, sizes=sizes, strides=strides
    )
    if not _tensors(grad, out) or device is not None or stream is not None:
        return _eager("slice_grad")(
            grad, input_shape, offsets, sizes, strides, out=out, device=device, stream=stream
        )
    if out is not None:
        _no_grad_out("slice_grad", grad, out)
    r = torch_grad.slice_grad_op(grad, input_shape, offsets, sizes, strides)
    if out is None:
        return r
    if out.dtype != r.dtype:
        raise TypeError(
            f"slice_grad(): out has dtype {dtype_name(out.dtype)}, expected {dtype_name(r.dtype)}"
        )
    if tuple(out.shape) != tuple(r.shape):
        raise ValueError(
            f"slice_grad(): out has shape {tuple(out.shape)}, expected {tuple(r.shape)}"
        )
    out.copy_(r)
    return out


def nonzero_call(c):
    """:func:`dmlnumba.nonzero_coordinates` through the operators; with one output,
    or torch.func wrappers, the new outputs are checked and copied in."""
    input = c.input
    width, dtype, max_count, out_count, out_coordinates, device, stream = c.args
    device = _here(input, device)
    outs = (out_count, out_coordinates)
    if not _tensors(input, *outs) or device is not None or stream is not None:
        return _eager("nonzero_coordinates")(
            input,
            width,
            dtype=dtype,
            max_count=max_count,
            out_count=out_count,
            out_coordinates=out_coordinates,
            device=device,
            stream=stream,
        )
    ops = torch.ops.dmlnumba
    dt = torch_dtype(dtype)
    input = input.detach()  # the results are not differentiable, as in eager calls
    if out_count is None and out_coordinates is None:
        return ops.nonzero_coordinates(input, width, dt, max_count)
    if out_count is not None and out_coordinates is not None and not _func_wrapped(input, *outs):
        if out_count.dtype != dt:  # the operator takes the outputs' dtype
            check_nonzero_outs(dt, None, None, out_count, None)
        ops.nonzero_coordinates_out(input, width, max_count, out_count, out_coordinates)
        return out_count, out_coordinates
    count, coords = ops.nonzero_coordinates(input, width, dt, max_count)
    check_nonzero_outs(dt, coords.shape[1], coords.shape[0], out_count, out_coordinates)
    if out_count is not None:
        out_count.copy_(count.view(out_count.shape))
        count = out_count
    if out_coordinates is not None:
        out_coordinates[..., : coords.shape[0], :].copy_(coords)
        coords = out_coordinates
    return count, coords  # (a new output where the call was given one only, as eager)


def argwhere_call(c):
    """:func:`dmlnumba.argwhere` through the operator."""
    input = c.input
    device, stream = c.args
    device = _here(input, device)
    if not _tensors(input) or device is not None or stream is not None:
        return _eager("argwhere")(input, device=device, stream=stream)
    if input.dim() == 0:  # NumPy's (1, 0) or (0, 0), as the eager call gives
        return torch.ops.dmlnumba.argwhere(input.detach().reshape(1))[:, :0]
    return torch.ops.dmlnumba.argwhere(input.detach())  # not differentiable, as in eager calls
