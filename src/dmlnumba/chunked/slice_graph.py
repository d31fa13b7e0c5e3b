"""The graph of slice1 of a dask array (see :mod:`dmlnumba.chunked`)."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import validation as v
from ..dispatch import run_slice1
from .blocks import _on_device_of, _prepare, _xp

if TYPE_CHECKING:
    from dask.typing import Key


def _axis_runs(chunks, start, step, m):
    """Along one axis: for output coordinates ``c`` in ``[0, m)`` reading input index
    ``start + step * c``, the runs ``(k, lo, hi)``: output coordinates ``[lo, hi)``
    read input chunk ``k``; in output order."""
    edges = np.cumsum((0,) + tuple(chunks)).tolist()
    order = range(len(chunks)) if step > 0 else range(len(chunks) - 1, -1, -1)
    s = abs(step)
    runs = []
    for k in order:
        a, b = edges[k], edges[k + 1]
        if step > 0:
            lo, hi = -((start - a) // s), -((start - b) // s)  # ceil((a - start) / s), ...
        else:
            lo, hi = (start - b) // s + 1, (start - a) // s + 1
        lo, hi = max(lo, 0), min(hi, m)
        if lo < hi:
            runs.append((k, lo, hi))
    return runs, edges


def _axis_plan(chunks, start, step, m, reach=None):
    """One axis of the output: ``[(length, pieces)]`` per output chunk, each piece
    ``(k, offset, size, step, out_lo, out_hi)``: a slice1 of input chunk ``k``'s
    window ``[offset, offset + size)`` (in the chunk's own coordinates) into output
    positions ``[out_lo, out_hi)`` of the output chunk.  Runs merge while the output
    chunk is at most the largest input chunk long, or, with ``reach``, while the input
    chunks it reads span at most ``reach`` indices."""
    runs, edges = _axis_runs(chunks, start, step, m)
    target = max(1, max(chunks))
    out = []
    cur: list[tuple[int, int, int]] = []  # the runs (k, lo, hi) of the output chunk
    cur_lo = 0
    for k, lo, hi in runs:
        span = sum(chunks[j] for j, _, _ in cur) + chunks[k]
        if cur and hi - cur_lo > target and (reach is None or span > reach):
            out.append((cur[-1][2] - cur_lo, cur, cur_lo))
            cur = []
        if not cur:
            cur_lo = lo
        cur.append((k, lo, hi))
    if cur:
        out.append((cur[-1][2] - cur_lo, cur, cur_lo))
    plan = []
    for length, group, base in out:
        pieces = []
        for k, lo, hi in group:
            n = hi - lo
            first, last = start + step * lo, start + step * (hi - 1)
            offset = min(first, last) - edges[k]
            pieces.append((k, offset, (n - 1) * abs(step) + 1, step, lo - base, hi - base))
        plan.append((length, pieces))
    return plan


def _slice_block(op, blocks, pieces, shape, dtype, kind):
    """One output block from the input ``blocks`` it reads, by ``op`` (the in-memory
    slice1, :func:`dmlnumba.dispatch.run_slice1`)."""
    import contextlib

    from ..cpu import target as target_cpu

    with target_cpu.one_thread():
        if len(pieces) == 1 and tuple(pieces[0][3]) == tuple((0, n) for n in shape):
            offsets, sizes, steps, _ = pieces[0]
            return op(blocks[0], offsets, sizes, steps)
        # On a GPU: the output on the first chunk's device, the pieces of chunks on
        # other devices copied over (device=).
        device = None if kind == "numpy" else f"cuda:{blocks[0].device.id}"
        with contextlib.nullcontext() if kind == "numpy" else _on_device_of(blocks[0]):
            out = _xp(kind).empty(shape, dtype)
        for block, (offsets, sizes, steps, where) in zip(blocks, pieces):
            view = out[tuple(slice(a, b) for a, b in where)]
            op(block, offsets, sizes, steps, out=view, device=device)
        return out


def slice1(x, offsets, sizes, strides, output_sizes, device, op=run_slice1):
    """slice1 of the dask array ``x`` (see the module's docstring), its parameters read
    (:func:`dmlnumba.validation.slice1_args`), and checked here against its shape."""
    import dask
    import dask.array as da
    from dask.array.utils import meta_from_array
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph
    from dask.utils import parse_bytes

    f = "slice1"
    x, kind = _prepare(x, device, f)
    dtype = np.dtype(x.dtype)
    v.check_dtype(dtype, v.SLICE_DTYPES, f)
    starts, steps, out_shape = v.slice1_params(x.shape, offsets, sizes, strides, output_sizes)
    plans = [None] + [
        _axis_plan(x.chunks[d], starts[d], steps[d], out_shape[d]) for d in range(1, x.ndim)
    ]
    # Fewer, larger blocks along the outermost axis: each output block may read input
    # chunks of up to dask's array.chunk-size bytes together (never the whole input
    # unless it is that small), which saves tasks and per-block overhead.
    limit = parse_bytes(dask.config.get("array.chunk-size"))
    inner = dtype.itemsize
    for d in range(1, x.ndim):
        inner *= max(sum(x.chunks[d][k] for k in {p[0] for p in pieces}) for _, pieces in plans[d])
    plans[0] = _axis_plan(
        x.chunks[0], starts[0], steps[0], out_shape[0], reach=max(1, limit // max(inner, 1))
    )
    name = "dmlnumba-slice1-" + tokenize(x, starts, steps, out_shape)
    layer: dict[Key, Any] = {}
    for idx in itertools.product(*(range(len(p)) for p in plans)):
        here = [plans[d][i] for d, i in enumerate(idx)]
        keys, pieces = [], []
        for combo in itertools.product(*(h[1] for h in here)):
            keys.append((x.name,) + tuple(p[0] for p in combo))
            pieces.append(
                (
                    tuple(p[1] for p in combo),
                    tuple(p[2] for p in combo),
                    tuple(p[3] for p in combo),
                    tuple((p[4], p[5]) for p in combo),
                )
            )
        layer[(name,) + idx] = (
            _slice_block,
            op,
            keys,
            pieces,
            tuple(h[0] for h in here),
            dtype,
            kind,
        )
    graph = HighLevelGraph.from_collections(name, layer, dependencies=[x])
    chunks = tuple(tuple(h[0] for h in p) for p in plans)
    return da.Array(graph, name, chunks, meta=meta_from_array(x._meta, x.ndim, dtype=dtype))
