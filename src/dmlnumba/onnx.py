"""ONNX's Slice and NonZero operators through SLICE1 and NONZERO_COORDINATES.

``window`` turns Slice's inputs (opset 10 and later: ``starts``, ``ends``,
``axes``, ``steps``) into SLICE1's parameters; ``slice`` and ``nonzero`` compute
the ONNX results with dmlnumba's kernels, for every array type dmlnumba takes;
``ops`` gives both as operators for ``onnx.reference.ReferenceEvaluator``.

Only NumPy is needed here: onnx is imported by :func:`ops` alone, and
``import dmlnumba`` does not import this module (``import dmlnumba.onnx``).

Slice follows the ONNX operator page: negative ``starts``/``ends`` count from the
end of their axis; then for a positive step ``start`` and ``end`` are clamped to
``[0, dim]``, for a negative step ``start`` to ``[0, dim - 1]`` and ``end`` to
``[-1, dim - 1]``.  ``onnx.reference``'s Slice (NumPy's ``slice``) differs in one
case: a negative step with ``start < -dim`` and ``end < -dim``, where the page (and
ONNX's shape inference, and ONNX Runtime) take element 0 and NumPy takes nothing.
This module follows the page.
"""

import operator
from typing import Any

import numpy as np

from . import prepare
from .validation import INT64_MAX, INT64_MIN, NONZERO_DTYPES, SLICE_DTYPES, check_dtype, check_ndim

__all__ = ["window", "slice", "nonzero", "ops"]

_INT64 = np.dtype(np.int64)

Params = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]


def _ints(values: Any, name: str, f: str) -> tuple[int, ...]:
    """A Slice input (a list, tuple or 1-d integer array of any library) as Python ints."""
    if isinstance(values, (list, tuple, range)):
        items = list(values)
    elif isinstance(values, (str, bytes, dict, set, frozenset)):
        raise TypeError(
            f"{f}(): {name} must be a list, tuple or 1-d array of integers, "
            f"not {type(values).__name__}"
        )
    else:
        try:
            a = prepare.host_values(values, f)
        except Exception as e:
            raise TypeError(
                f"{f}(): {name} could not be read as an array of integers: {e}"
            ) from None
        if a.ndim != 1:
            raise TypeError(
                f"{f}(): {name} must be a list, tuple or 1-d array of integers, "
                f"not an array of shape {a.shape}"
            )
        if a.dtype.kind not in "iu":
            raise TypeError(f"{f}(): {name} must hold integers, not {a.dtype}")
        items = a.tolist()
    out = []
    for i, v in enumerate(items):
        if type(v) is not int:
            if isinstance(v, (bool, np.bool_)):
                raise TypeError(f"{f}(): {name}[{i}] must be an integer, not bool")
            try:
                v = operator.index(v)
            except TypeError:
                raise TypeError(
                    f"{f}(): {name}[{i}] must be an integer, not {type(v).__name__}"
                ) from None
        if not INT64_MIN <= v <= INT64_MAX:
            raise ValueError(f"{f}(): {name}[{i}] = {v} does not fit in int64")
        out.append(v)
    return tuple(out)


def _axis_range(n: int, start: int, end: int, step: int) -> tuple[int, int]:
    """``(first, count)``: the first index Slice takes on an axis of ``n`` elements
    and how many it takes (the ONNX page's adjustment and clamping)."""
    if start < 0:
        start += n
    if end < 0:
        end += n
    if n == 0:
        return 0, 0
    if step > 0:
        start = min(max(start, 0), n)
        end = min(max(end, 0), n)
        return start, max(0, (end - start + step - 1) // step)
    start = min(max(start, 0), n - 1)
    end = min(max(end, -1), n - 1)
    return start, max(0, (start - end - step - 1) // -step)


def _params(shape: Any, starts: Any, ends: Any, axes: Any, steps: Any, f: str, name: str) -> Params:
    """SLICE1's ``(offsets, sizes, strides, output_sizes)`` for Slice's inputs; an
    output size of 0 where the result is empty (its offset, size and stride are
    then 0, 1 and 1)."""
    what = "shape" if name == "shape" else f"{name}'s shape"
    try:
        shape = tuple(operator.index(n) for n in shape)
    except TypeError:
        raise TypeError(
            f"{f}(): {what} must be a sequence of integers, not {tuple(shape)!r}"
        ) from None
    ndim = len(shape)
    check_ndim(ndim, f, name)
    if any(n < 0 or n > INT64_MAX for n in shape):
        raise ValueError(
            f"{f}(): {what} {shape} has a size that is negative or does not fit in int64"
        )
    starts = _ints(starts, "starts", f)
    ends = _ints(ends, "ends", f)
    k = len(starts)
    if len(ends) != k:
        raise ValueError(
            f"{f}(): starts has {k} values and ends {len(ends)}; they must have the same length"
        )
    if axes is None:
        if k > ndim:
            raise ValueError(
                f"{f}(): starts and ends have {k} values but {name} has {ndim} dimensions "
                f"(without axes, they slice axes 0 to {k - 1})"
            )
        axes = tuple(range(k))
    else:
        axes = _ints(axes, "axes", f)
        if len(axes) != k:
            raise ValueError(
                f"{f}(): axes has {len(axes)} values and starts {k}; they must have the same length"
            )
    if steps is None:
        steps = (1,) * k
    else:
        steps = _ints(steps, "steps", f)
        if len(steps) != k:
            raise ValueError(
                f"{f}(): steps has {len(steps)} values and starts {k}; they must have the same "
                f"length"
            )
    offsets, sizes, strides, out = [0] * ndim, list(shape), [1] * ndim, list(shape)
    seen: dict[int, int] = {}
    for i in range(k):
        a = axes[i]
        if not -ndim <= a < ndim:
            raise ValueError(
                f"{f}(): axes[{i}] = {a} is out of range for {ndim} dimensions: it must be "
                f"between {-ndim} and {ndim - 1}"
            )
        d = a + ndim if a < 0 else a
        if d in seen:
            j = seen[d]
            raise ValueError(
                f"{f}(): axes[{j}] = {axes[j]} and axes[{i}] = {a} are both axis {d}; each axis "
                f"may be sliced once"
            )
        seen[d] = i
        t = steps[i]
        if t == 0:
            raise ValueError(f"{f}(): steps[{i}] is 0; steps must be non-zero")
        first, count = _axis_range(shape[d], starts[i], ends[i], t)
        out[d] = count
        if count == 0:
            offsets[d], sizes[d], strides[d] = 0, 1, 1
            continue
        last = first + (count - 1) * t
        offsets[d] = min(first, last)
        sizes[d] = abs(last - first) + 1
        strides[d] = t
    for d in range(ndim):  # an axis of size 0 that no entry sliced
        if out[d] == 0:
            offsets[d], sizes[d], strides[d] = 0, 1, 1
    return tuple(offsets), tuple(sizes), tuple(strides), tuple(out)


def window(
    shape: Any,
    starts: Any,
    ends: Any,
    axes: Any = None,
    steps: Any = None,
) -> Params | None:
    """SLICE1 parameters for ONNX Slice's inputs, or None where the result is empty.

    ``starts``, ``ends``, ``axes`` and ``steps`` are Slice's inputs (lists, tuples
    or 1-d integer arrays; ``axes`` defaults to ``0, 1, ...`` and ``steps`` to 1s),
    with their meaning on the ONNX operator page: negative values count from the
    end, values past either end are clamped (so an end of ``INT64_MAX`` slices
    forward to the end, ``INT64_MIN`` backward to the start).  Returns ``(offsets, sizes, strides,
    output_sizes)`` such that ``slice1(x, *window(x.shape, ...))`` is ONNX's
    ``Slice(x, ...)``: a negative step's range (from ``start`` down to ``end``,
    exclusive) becomes the window from the lowest element it takes up to ``start``,
    with the step as a negative stride.  ``shape`` has 1 to 8 dimensions.

    Raises ValueError as ONNX does: a zero step, an axis out of range or given
    twice, inputs of different lengths; TypeError for non-integer inputs.
    """
    p = _params(shape, starts, ends, axes, steps, "onnx.window", "shape")
    return None if 0 in p[3] else p


def slice(  # ONNX's name: this module's code says builtins.slice for Python's
    data: Any,
    starts: Any,
    ends: Any,
    axes: Any = None,
    steps: Any = None,
) -> Any:
    """ONNX Slice (opset 10 and later) of ``data``, copied by :func:`dmlnumba.slice1`.

    ``data``: any array :func:`dmlnumba.slice1` takes (NumPy, PyTorch, CuPy,
    numba device arrays, dask, DLPack exporters such as JAX's), of its dtypes
    (PyTorch bfloat16 too), with 1 to 8 dimensions; the result is of the array type and on the
    device that ``slice1`` gives.
    ``starts``, ``ends``, ``axes``, ``steps``: as in :func:`window` (arrays on a
    GPU are read back to the host).  An empty result is a new empty array of
    that type, made without launching a kernel.
    """
    f = "onnx.slice"
    c = prepare.view(data, f, "data")  # a bfloat16 tensor read as float16 (the same bytes)
    dtype = np.dtype(c.x.dtype)
    check_dtype(dtype, SLICE_DTYPES, f, "data")
    offsets, sizes, strides, out = _params(c.x.shape, starts, ends, axes, steps, f, "data")
    if 0 in out:
        return c.target.empty_result(c, out, dtype)
    call = prepare.slice1(data, offsets, sizes, strides, out, None, None, None)
    return call.target.slice1_call(call)


def nonzero(x: Any) -> Any:
    """ONNX NonZero of ``x``: the ``(x.ndim, count)`` int64 indices of its non-zero
    elements, in row-major order, through :func:`dmlnumba.nonzero_coordinates`.

    The count is read back to the host (on CUDA this waits for the GPU once, as
    :func:`dmlnumba.argwhere` does); the result is of the input's array type, on
    its device.  A 0-d ``x`` gives shape ``(0, 1)`` where it is non-zero and
    ``(0, 0)`` where it is zero (ONNX's reference).  dask arrays give lazy results.
    """
    f = "onnx.nonzero"
    c = prepare.view(x, f, "x")
    check_dtype(np.dtype(c.x.dtype), NONZERO_DTYPES, f, "x")
    ndim = len(c.x.shape)
    if ndim:  # 1 to 8 dimensions, or 0 (ONNX's scalar case, read as 1 element)
        check_ndim(ndim, f, "x")
    # argwhere's compact rows, transposed into a new C-contiguous array (dask: lazily).
    call = prepare.argwhere(x, None, None, transposed=True)
    return call.target.argwhere_call(call)


_ops: list | None = None


def ops() -> list:
    """Operator classes for ``onnx.reference.ReferenceEvaluator(model,
    new_ops=dmlnumba.onnx.ops())``: the model's Slice and NonZero nodes (domain
    ``""``) then run through :func:`slice` and :func:`nonzero`.  Imports onnx."""
    global _ops
    if _ops is None:
        from onnx.reference.op_run import OpRun

        class Slice(OpRun):
            op_domain = ""

            def _run(self, data, starts=None, ends=None, axes=None, steps=None):
                # Slice-1 to Slice-9 give starts, ends and axes as attributes: the
                # evaluator passes them by keyword.
                return (slice(data, starts, ends, axes, steps),)

        class NonZero(OpRun):
            op_domain = ""

            def _run(self, x):
                return (nonzero(x),)

        _ops = [Slice, NonZero]
    return list(_ops)
