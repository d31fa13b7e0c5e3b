"""The graph of slice_grad of a dask array (see :mod:`dmlnumba.chunked`)."""

from __future__ import annotations

import bisect
import contextlib
import itertools
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import validation as v
from ..dispatch import parse_device, run_slice_grad
from .blocks import _on_device_of, _prepare, _xp
from .slice_graph import _axis_runs

if TYPE_CHECKING:
    from dask.typing import Key


def _axis_pieces(out_chunks, grad_chunks, start, step):
    """One axis: per output chunk, its pieces ``(j, lo, hi, low, size)``: gradient
    chunk ``j``'s coordinates ``[lo, hi)`` (in the chunk's own coordinates) land in
    positions ``[low, low + size)`` of the output chunk, every ``abs(step)``-th one;
    ``[]`` for an output chunk that no gradient coordinate reaches.  Positions are
    monotone in the coordinate, so the pieces of one output chunk are disjoint."""
    runs, edges = _axis_runs(out_chunks, start, step, sum(grad_chunks))
    gedges = np.cumsum((0,) + tuple(grad_chunks)).tolist()
    plan: list[list[tuple[int, int, int, int, int]]] = [[] for _ in out_chunks]
    for k, lo, hi in runs:
        # The last gradient chunk starting at or before lo holds it (empty chunks skipped).
        for j in range(bisect.bisect_right(gedges, lo) - 1, len(grad_chunks)):
            if gedges[j] >= hi:
                break
            a, b = max(lo, gedges[j]), min(hi, gedges[j + 1])
            if a < b:
                first, last = start + step * a, start + step * (b - 1)
                low = min(first, last) - edges[k]
                size = (b - a - 1) * abs(step) + 1
                plan[k].append((j, a - gedges[j], b - gedges[j], low, size))
    return plan


def _zeros_block(shape, dtype, kind, gpu):
    """A block that no gradient coordinate reaches (a CuPy one on GPU ``gpu``, the one
    device= names, else on the task's current device)."""
    if kind == "numpy":
        return np.zeros(shape, dtype)
    import cupy

    with contextlib.nullcontext() if gpu is None else cupy.cuda.Device(gpu):
        return cupy.zeros(shape, dtype)


def _grad_block(op, blocks, pieces, shape, dtype, kind):
    """One output block from the gradient ``blocks`` that reach it, by ``op`` (the
    in-memory slice_grad, :func:`dmlnumba.dispatch.run_slice_grad`); each piece
    ``(cut, lows, sizes, steps)``: the block's part ``cut`` lands in the region
    ``[lows, lows + sizes)`` of the output block."""
    from ..cpu import target as target_cpu

    with target_cpu.one_thread():
        if len(pieces) == 1:  # one call makes the block: its zeros and the piece
            cut, lows, sizes, steps = pieces[0]
            return op(blocks[0][cut], shape, lows, sizes, steps)
        # On a GPU: the output on the first chunk's device, the pieces of chunks on
        # other devices copied over.
        device = None if kind == "numpy" else f"cuda:{blocks[0].device.id}"
        with contextlib.nullcontext() if kind == "numpy" else _on_device_of(blocks[0]):
            out = _xp(kind).zeros(shape, dtype)
        for block, (cut, lows, sizes, steps) in zip(blocks, pieces):
            view = out[tuple(slice(a, a + n) for a, n in zip(lows, sizes))]
            op(block[cut], sizes, (0,) * len(sizes), sizes, steps, out=view, device=device)
        return out


def slice_grad(g, input_shape, offsets, sizes, strides, device, op=run_slice_grad):
    """slice_grad of the dask array ``g`` (see the package's docstring), its parameters
    read (:func:`dmlnumba.validation.slice1_args`, ``shape_arg``), and checked here
    against its shape."""
    import dask.array as da
    from dask.array.core import normalize_chunks
    from dask.array.utils import meta_from_array
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    f = "slice_grad"
    g, kind = _prepare(g, device, f, "input_gradient")
    dtype = np.dtype(g.dtype)
    v.check_dtype(dtype, v.SLICE_DTYPES, f, "input_gradient")
    starts, steps = v.slice_grad_params(input_shape, g.shape, offsets, sizes, strides, f)
    dev = parse_device(device, f)
    gpu = dev[1] if dev is not None and dev[0] == "cuda" else None
    chunks = normalize_chunks("auto", tuple(input_shape), dtype=dtype)
    plans = [_axis_pieces(chunks[d], g.chunks[d], starts[d], steps[d]) for d in range(g.ndim)]
    name = "dmlnumba-slice_grad-" + tokenize(g, input_shape, starts, steps, chunks, gpu)
    layer: dict[Key, Any] = {}
    for idx in itertools.product(*(range(len(c)) for c in chunks)):
        shape = tuple(chunks[d][i] for d, i in enumerate(idx))
        here = [plans[d][i] for d, i in enumerate(idx)]
        if not all(here):  # no dependency on the gradient
            layer[(name,) + idx] = (_zeros_block, shape, dtype, kind, gpu)
            continue
        keys, pieces = [], []
        for combo in itertools.product(*here):
            keys.append((g.name,) + tuple(p[0] for p in combo))
            pieces.append(
                (
                    tuple(slice(p[1], p[2]) for p in combo),
                    tuple(p[3] for p in combo),
                    tuple(p[4] for p in combo),
                    tuple(steps),
                )
            )
        layer[(name,) + idx] = (_grad_block, op, keys, pieces, shape, dtype, kind)
    graph = HighLevelGraph.from_collections(name, layer, dependencies=[g])
    return da.Array(graph, name, chunks, meta=meta_from_array(g._meta, g.ndim, dtype=dtype))
