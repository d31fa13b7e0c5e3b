"""dmlnumba's operators as PyTorch custom operators (``torch.ops.dmlnumba.*``).

Importing this module imports PyTorch and registers them, once.  ``dmlnumba``
imports it only when a call is traced by ``torch.compile`` or ``torch.export``,
or gets a tensor whose own storage is no data (a FakeTensor, a functional tensor,
a ``torch.func`` transform's wrapper; see :func:`dmlnumba.keys.traced`): such a
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

import numpy as np
import torch

from . import validation as v
from .dispatch import run_argwhere, run_nonzero, run_slice1
from .interop import dtype_name

_NP = {
    torch.uint32: np.uint32,
    torch.uint64: np.uint64,
    torch.int64: np.int64,
}


def torch_dtype(dtype):
    """``dtype=`` for the PyTorch operator: a torch dtype (NumPy's named the same way
    map to it)."""
    if isinstance(dtype, torch.dtype):
        return dtype
    name = np.dtype(dtype).name
    if not hasattr(torch, name):
        raise TypeError(f"nonzero_coordinates(): dtype {name} has no PyTorch counterpart")
    return getattr(torch, name)


def _check_input(input, allowed, f):
    """The input's dtype and rank checked as the eager call checks them: bfloat16
    as float16 (the bits it is read as), a conjugated tensor refused."""
    if input.is_conj():
        raise TypeError(f"{f}(): input is a conjugated (complex) tensor, which is not supported")
    name = "float16" if input.dtype == torch.bfloat16 else dtype_name(input.dtype)
    try:
        dt = np.dtype(name)
    except TypeError:
        raise TypeError(f"{f}(): input dtype {name} is not supported") from None
    v.check_dtype(dt, allowed, f)
    v.check_ndim(input.dim(), f)


def _slice1_shape(input, offsets, sizes, strides, output_sizes):
    """The output's shape, with the eager call's checks (the same functions, in the
    same order).  A symbolic shape (dynamic shapes) skips the cache of checked
    windows, whose keys must hash."""
    f = "slice1"
    offsets, sizes, strides, output_sizes = v.slice1_args(offsets, sizes, strides, output_sizes)
    _check_input(input, v.SLICE_DTYPES, f)
    shape = tuple(input.shape)
    if all(type(n) is int for n in shape):
        return list(v.slice1_params(shape, offsets, sizes, strides, output_sizes)[2])
    ndim = len(shape)
    offsets, sizes, strides = (
        v.int_tuple(p, name, ndim, f)
        for p, name in ((offsets, "offsets"), (sizes, "sizes"), (strides, "strides"))
    )
    if output_sizes is not None:
        output_sizes = v.int_tuple(output_sizes, "output_sizes", ndim, f)
    return list(v._slice1_check(shape, offsets, sizes, strides, output_sizes)[2])


def _check_out(out, input, shape):
    """slice1's ``out`` as the eager call checks it: the input's dtype (bfloat16 and
    float16 are different ones) and the output's shape."""
    if out.dtype != input.dtype:
        raise TypeError(
            f"slice1(): out has dtype {dtype_name(out.dtype)}, expected {dtype_name(input.dtype)}"
        )
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"slice1(): out has shape {tuple(out.shape)}, expected {tuple(shape)}")


def _nonzero_shape(input, width, dtype, max_count, f="nonzero_coordinates"):
    """``(width, rows)`` of the coordinates, with the eager call's checks."""
    width, dt, max_count = v.nonzero_args(width, dtype, max_count, f)
    _check_input(input, v.NONZERO_DTYPES, f)
    w = v.nonzero_width(tuple(input.shape), width, f)
    n = input.numel()
    if type(n) is int:
        v.coord_dtype(dt, n, f)
    elif v.COORD_LIMITS[dt] < v.INT64_MAX:  # a dynamic shape: checked when it runs
        torch._check(n <= v.COORD_LIMITS[dt], lambda: f"{f}(): input too large for {dt}")
    return w, (n if max_count is None else torch.sym_min(max_count, n))


def _check_nonzero_outs(dtype, w, rows, out_count, out_coordinates, f="nonzero_coordinates"):
    """The outputs as the eager call checks them (``dtype``: the coordinates')."""
    for name, o in (("out_count", out_count), ("out_coordinates", out_coordinates)):
        if o is not None and o.dtype != dtype:
            raise TypeError(
                f"{f}(): {name} has dtype {dtype_name(o.dtype)}, expected {dtype_name(dtype)}"
            )
    if out_count is not None and out_count.numel() != 1:
        raise ValueError(
            f"{f}(): out_count has shape {tuple(out_count.shape)}; it must hold exactly one element"
        )
    if out_coordinates is not None:
        v.coordinates_matrix_shape(tuple(out_coordinates.shape), rows, w, f=f)


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
    return input.new_empty(_slice1_shape(input, offsets, sizes, strides, output_sizes))


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
    _check_out(out, input, _slice1_shape(input, offsets, sizes, strides, output_sizes))


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
    w, rows = _nonzero_shape(input, width, dtype, max_count)
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
    w, rows = _nonzero_shape(input, width, out_count.dtype, max_count)
    _check_nonzero_outs(out_count.dtype, w, rows, out_count, out_coordinates)


@torch.library.custom_op("dmlnumba::argwhere", mutates_args=())
def argwhere(input: torch.Tensor) -> torch.Tensor:
    return run_argwhere(input)


@argwhere.register_fake
def _(input):
    _check_input(input, v.NONZERO_DTYPES, "argwhere")
    ctx = torch.library.get_ctx()
    n = input.numel()
    if type(n) is int:
        rows = ctx.new_dynamic_size(max=max(n, 2))
    else:  # a dynamic shape: the bound, a symbol, as a runtime check (max= takes ints)
        rows = ctx.new_dynamic_size()
        torch._check(rows <= n)
    return input.new_empty((rows, input.dim()), dtype=torch.int64)


# The API's calls routed here (see dmlnumba.keys.traced).


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
    an array of another kind) a TypeError."""
    if torch.compiler.is_compiling():
        return _EAGER[f]
    raise TypeError(
        f"{f}(): a PyTorch wrapper tensor (FakeTensor, functional tensor, torch.func "
        f"transform) goes through torch.ops.dmlnumba.{f}, which takes PyTorch tensors as "
        f"input and outputs, and neither device= nor stream="
    )


def _eager_slice1(input, offsets, sizes, strides, output_sizes, *, out, device, stream):
    return run_slice1(input, offsets, sizes, strides, output_sizes, out, device, stream)


def _eager_nonzero(input, width, *, dtype, max_count, out_count, out_coordinates, device, stream):
    outs = (out_count, out_coordinates)
    return run_nonzero(input, width, dtype, max_count, *outs, device, stream)


def _eager_argwhere(input, *, device, stream):
    return run_argwhere(input, device, stream)


_EAGER = {
    "slice1": torch.compiler.disable(_eager_slice1),
    "nonzero_coordinates": torch.compiler.disable(_eager_nonzero),
    "argwhere": torch.compiler.disable(_eager_argwhere),
}


def slice1_call(c):
    """:func:`dmlnumba.slice1` through the operators (``c.args``: the caller's)."""
    input = c.input
    offsets, sizes, strides, output_sizes, out, device, stream = c.args
    if not _tensors(input, out) or device is not None or stream is not None:
        return _eager("slice1")(
            input, offsets, sizes, strides, output_sizes, out=out, device=device, stream=stream
        )
    ops = torch.ops.dmlnumba
    input = input.detach()  # the results are not differentiable, as in eager calls
    if out is None:
        return ops.slice1(input, offsets, sizes, strides, output_sizes)
    if _func_wrapped(input, out):
        r = ops.slice1(input, offsets, sizes, strides, output_sizes)
        _check_out(out, input, r.shape)
        out.copy_(r)
    else:
        ops.slice1_out(input, offsets, sizes, strides, output_sizes, out)
    return out


def nonzero_call(c):
    """:func:`dmlnumba.nonzero_coordinates` through the operators; with one output,
    or torch.func wrappers, the new outputs are checked and copied in."""
    input = c.input
    width, dtype, max_count, out_count, out_coordinates, device, stream = c.args
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
            _check_nonzero_outs(dt, None, None, out_count, None)
        ops.nonzero_coordinates_out(input, width, max_count, out_count, out_coordinates)
        return out_count, out_coordinates
    count, coords = ops.nonzero_coordinates(input, width, dt, max_count)
    _check_nonzero_outs(dt, coords.shape[1], coords.shape[0], out_count, out_coordinates)
    if out_count is not None:
        out_count.copy_(count.view(out_count.shape))
    if out_coordinates is not None:
        out_coordinates[..., : coords.shape[0], :].copy_(coords)
    return out_count, out_coordinates


def argwhere_call(c):
    """:func:`dmlnumba.argwhere` through the operator."""
    input = c.input
    device, stream = c.args
    if not _tensors(input) or device is not None or stream is not None:
        return _eager("argwhere")(input, device=device, stream=stream)
    if input.dim() == 0:  # NumPy's (1, 0) or (0, 0), as the eager call gives
        return torch.ops.dmlnumba.argwhere(input.detach().reshape(1))[:, :0]
    return torch.ops.dmlnumba.argwhere(input.detach())  # not differentiable, as in eager calls
