"""The checks of dmlnumba's PyTorch operators' fake implementations (see
:mod:`dmlnumba.torch_ops`): the eager call's own validation functions, in the same
order, on tensors whose shapes may be symbolic, so that a traced call raises what
the eager call raises."""

import numpy as np
import torch

from . import validation as v
from .interop import dtype_name


def torch_dtype(dtype):
    """``dtype=`` for the PyTorch operator: a torch dtype (NumPy's named the same way
    map to it)."""
    if isinstance(dtype, torch.dtype):
        return dtype
    name = np.dtype(dtype).name
    if not hasattr(torch, name):
        raise TypeError(f"nonzero_coordinates(): dtype {name} has no PyTorch counterpart")
    return getattr(torch, name)


def check_input(input, allowed, f):
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


def slice1_shape(input, offsets, sizes, strides, output_sizes):
    """The output's shape, with the eager call's checks (the same functions, in the
    same order).  A symbolic shape (dynamic shapes) skips the cache of checked
    windows, whose keys must hash."""
    f = "slice1"
    offsets, sizes, strides, output_sizes = v.slice1_args(offsets, sizes, strides, output_sizes)
    check_input(input, v.SLICE_DTYPES, f)
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


def check_out(out, input, shape):
    """slice1's ``out`` as the eager call checks it: the input's dtype (bfloat16 and
    float16 are different ones) and the output's shape."""
    if out.dtype != input.dtype:
        raise TypeError(
            f"slice1(): out has dtype {dtype_name(out.dtype)}, expected {dtype_name(input.dtype)}"
        )
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"slice1(): out has shape {tuple(out.shape)}, expected {tuple(shape)}")


def nonzero_shape(input, width, dtype, max_count, f="nonzero_coordinates"):
    """``(width, rows)`` of the coordinates, with the eager call's checks."""
    width, dt, max_count = v.nonzero_args(width, dtype, max_count, f)
    check_input(input, v.NONZERO_DTYPES, f)
    w = v.nonzero_width(tuple(input.shape), width, f)
    n = input.numel()
    if type(n) is int:
        v.coord_dtype(dt, n, f)
    elif v.COORD_LIMITS[dt] < v.INT64_MAX:  # a dynamic shape: checked when it runs
        torch._check(n <= v.COORD_LIMITS[dt], lambda: f"{f}(): input too large for {dt}")
    return w, (n if max_count is None else torch.sym_min(max_count, n))


def check_nonzero_outs(dtype, w, rows, out_count, out_coordinates, f="nonzero_coordinates"):
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


def slice_grad_check(grad, input_shape, offsets, sizes, strides):
    """slice_grad's checks as the eager call makes them (a symbolic shape: the window's
    own checks, without the cache of checked windows)."""
    f = "slice_grad"
    offsets, sizes, strides, _ = v.slice1_args(offsets, sizes, strides, None, f)
    check_input(grad, v.SLICE_DTYPES, f)
    shape = tuple(input_shape)
    if all(type(n) is int for n in shape) and all(type(n) is int for n in grad.shape):
        v.slice_grad_params(
            v.shape_arg(shape, "input_shape", f), tuple(grad.shape), offsets, sizes, strides, f
        )
