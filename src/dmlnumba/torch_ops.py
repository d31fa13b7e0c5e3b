"""dmlnumba's operators as PyTorch custom operators (``torch.ops.dmlnumba.*``).

Importing this module imports PyTorch and registers them, once.  ``dmlnumba``
imports it only when a call is traced by ``torch.compile`` or ``torch.export``
(or gets a FakeTensor): such a call becomes one node of the graph, with static
output shapes, so that ``fullgraph=True`` and ``mode="reduce-overhead"`` (CUDA
graphs) work.  Eager calls do not go through these operators (they cost tens of
microseconds of dispatch); they run the same kernels directly.  To load an
exported program in a new process, ``import dmlnumba.torch_ops`` first.

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
"""

from collections.abc import Sequence

import numpy as np
import torch

from . import api

_NP = {
    torch.uint32: np.uint32,
    torch.uint64: np.uint64,
    torch.int64: np.int64,
}


def _np_dtype(dtype: torch.dtype):
    try:
        return _NP[dtype]
    except KeyError:
        raise TypeError(
            f"nonzero_coordinates(): dtype {dtype} is not a coordinate type; "
            f"use torch.uint32 (DirectML's), torch.uint64 or torch.int64"
        ) from None


def _rows(numel, max_count):
    return numel if max_count is None else torch.sym_min(max_count, numel)


def _width(input, width):
    return input.dim() if width is None else width


@torch.library.custom_op("dmlnumba::slice1", mutates_args=())
def slice1(
    input: torch.Tensor,
    offsets: Sequence[int],
    sizes: Sequence[int],
    strides: Sequence[int],
    output_sizes: Sequence[int] | None = None,
) -> torch.Tensor:
    return api.slice1(input, list(offsets), list(sizes), list(strides), output_sizes)


@slice1.register_fake
def _(input, offsets, sizes, strides, output_sizes=None):
    if output_sizes is None:
        output_sizes = [1 + (n - 1) // abs(s) for n, s in zip(sizes, strides)]
    return input.new_empty(list(output_sizes))


@torch.library.custom_op("dmlnumba::slice1_out", mutates_args=("out",))
def slice1_out(
    input: torch.Tensor,
    offsets: Sequence[int],
    sizes: Sequence[int],
    strides: Sequence[int],
    output_sizes: Sequence[int] | None,
    out: torch.Tensor,
) -> None:
    api.slice1(input, list(offsets), list(sizes), list(strides), output_sizes, out=out)


@slice1_out.register_fake
def _(input, offsets, sizes, strides, output_sizes, out):
    return None


@torch.library.custom_op("dmlnumba::nonzero_coordinates", mutates_args=())
def nonzero_coordinates(
    input: torch.Tensor,
    width: int | None = None,
    dtype: torch.dtype = torch.uint32,
    max_count: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    return api.nonzero_coordinates(input, width, dtype=_np_dtype(dtype), max_count=max_count)


@nonzero_coordinates.register_fake
def _(input, width=None, dtype=torch.uint32, max_count=None):
    _np_dtype(dtype)
    rows = _rows(input.numel(), max_count)
    return (
        input.new_empty((1,), dtype=dtype),
        input.new_empty((rows, _width(input, width)), dtype=dtype),
    )


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
    api.nonzero_coordinates(
        input,
        width,
        dtype=_np_dtype(out_count.dtype),
        max_count=max_count,
        out_count=out_count,
        out_coordinates=out_coordinates,
    )


@nonzero_coordinates_out.register_fake
def _(input, width, max_count, out_count, out_coordinates):
    return None


@torch.library.custom_op("dmlnumba::argwhere", mutates_args=())
def argwhere(input: torch.Tensor) -> torch.Tensor:
    return api.argwhere(input)


@argwhere.register_fake
def _(input):
    n = torch.library.get_ctx().new_dynamic_size(max=max(input.numel(), 2))
    return input.new_empty((n, input.dim()), dtype=torch.int64)
