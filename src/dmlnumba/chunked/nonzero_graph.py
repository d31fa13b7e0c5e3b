"""The graph of nonzero_coordinates of a dask array (see :mod:`dmlnumba.chunked`)."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import config
from .. import validation as v
from ..dispatch import run_nonzero
from .blocks import _on_device_of, _prepare, _xp

if TYPE_CHECKING:
    from dask.typing import Key


def _is_stripes(chunks):
    """Whether every block is a contiguous run of the row-major order: for some axis
    ``k``, every earlier axis has chunks of one index and every later axis one chunk."""
    ndim = len(chunks)
    for k in range(ndim):
        if all(len(chunks[d]) == 1 for d in range(k + 1, ndim)) and all(
            c == 1 for d in range(k) for c in chunks[d]
        ):
            return True
    return False


def stripes(shape, itemsize, limit):
    """Chunks of ``shape`` made of stripes of at most ``limit`` bytes where possible
    (one element of the last axis is the least a stripe can hold)."""
    ndim = len(shape)
    k = ndim - 1
    # The first axis k whose later axes fit within the limit together.
    sizes = [1] * (ndim + 1)
    for d in range(ndim - 1, -1, -1):
        sizes[d] = sizes[d + 1] * shape[d]
    for d in range(ndim):
        if sizes[d + 1] * itemsize <= limit:
            k = d
            break
    inner = sizes[k + 1] * itemsize
    run = max(1, limit // max(inner, 1))
    chunks = []
    for d in range(ndim):
        if d < k:
            chunks.append((1,) * shape[d] if shape[d] else (0,))
        elif d == k:
            n = shape[d]
            chunks.append(tuple(min(run, n - i) for i in range(0, n, run)) if n else (0,))
        else:
            chunks.append((shape[d],))
    return tuple(chunks)


def _nonzero_block(op, block, width, dtype, offsets, kind, shape, f):
    """``(count, coordinates)`` of one block (a stripe of the array of ``shape``, whose
    first element sits at ``offsets``): its compact coordinates in ascending order,
    in the whole array's terms.  ``op`` is the in-memory nonzero_coordinates
    (:func:`dmlnumba.dispatch.run_nonzero`, for CuPy blocks)."""
    if kind == "numpy":
        from ..cpu import target as target_cpu

        with target_cpu.one_thread():
            n, coords = target_cpu.nonzero_stripe(
                v.host_array(block, "input", f), shape, offsets, width, dtype
            )
        # Written in the array's terms already: nothing to shift.
        return n, _shifted(coords, n, offsets, width, width)
    with _on_device_of(block):  # the chunk's device, whatever the task thread's current one
        count, coords = op(block, width, dtype=dtype)
        n = int(count[0])  # the host waits for the block's kernel: its rows' number
        return n, _shifted(coords, n, offsets, width, 0)


def _shifted(coords, n, offsets, width, first_col):
    """The first ``n`` rows of a block's coordinates, shifted by the block's position
    from column ``first_col`` on."""
    rows = coords.shape[0]
    coords = coords[:n]
    if 8 * n < rows:
        # A compact copy where the rows are few: the view would hold the worst-case buffer
        # alive (virtual memory only: its untouched pages are never resident).  Denser
        # blocks keep the view; their copy would cost as much as writing the rows.
        coords = coords.copy()
    first = len(offsets) - width
    for col in range(first_col, width):
        off = offsets[first + col]
        if off:
            coords[:, col] += off
    return coords


def _nonzero_rows(*args):
    """A block's compact coordinates alone (:func:`_nonzero_block`'s rows): the
    coordinates' chunk, whose length is the block's count."""
    return _nonzero_block(*args)[1]


def _rows_count(coords):
    return coords.shape[0]


def _rows_of_block(block, op, width, dtype, kind, shape, f, block_info=None):
    """:func:`_nonzero_rows` as a blockwise function (its offsets from ``block_info``)."""
    offsets = tuple(lo for lo, _ in block_info[0]["array-location"])
    return _nonzero_block(op, block, width, dtype, offsets, kind, shape, f)[1]


def _nonzero_blockwise(x, w, dt, kind, f, op, token):
    """``(count, coordinates)`` of a 1-d input, or a 2-d one chunked along its first axis
    only: the rows and the counts as blockwise layers (the rows' blocks the input's, a
    width axis added to a 1-d input), which dask's optimization fuses with the input's
    own blockwise tasks (a generator, a device move: one task a block for both), then one
    total.  (With ``drop_axis``, as other layouts would need, dask fuses nothing.)"""
    import dask.array as da
    from dask.array.utils import meta_from_array
    from dask.highlevelgraph import HighLevelGraph

    nb = x.numblocks[0]
    coords = da.map_blocks(
        _rows_of_block,
        x,
        op,
        w,
        dt,
        kind,
        x.shape,
        f,
        name=f"dmlnumba-nonzero-rows-{token}",
        chunks=((np.nan,) * nb, (w,)),
        new_axis=[1] if x.ndim == 1 else None,
        meta=meta_from_array(x._meta, 2, dtype=dt),
    )
    counts = coords.map_blocks(
        _rows_count,
        name=f"dmlnumba-nonzero-counts-{token}",
        chunks=((1,) * nb, (1,)),
        meta=np.empty((0, 0), np.int64),
    )
    count = f"dmlnumba-nonzero-count-{token}"
    keys = [(counts.name, i, 0) for i in range(nb)]
    layer: dict[Key, Any] = {(count, 0): (_total, keys, dt, kind)}
    graph = HighLevelGraph.from_collections(count, layer, dependencies=[counts])
    total = da.Array(graph, count, ((1,),), meta=meta_from_array(x._meta, 1, dtype=dt))
    return total, coords


def _count_of(result):
    return result[0]


def _scan(counts):
    """The exclusive scan of the block counts, then the total."""
    return np.cumsum([0] + list(counts)).tolist()


def _first_rows(result, scan, i, limit):
    n, coords = result
    return coords[: max(0, min(n, limit - scan[i]))]


def _total(counts, dtype, kind):
    return _xp(kind).asarray([sum(counts)], dtype=dtype)


def _total_of_scan(scan, dtype, kind):
    return _xp(kind).asarray([scan[-1]], dtype=dtype)


def nonzero(x, width, dtype, max_count, device, f, op=run_nonzero):
    """``(count, coordinates)`` as dask arrays (see the module's docstring).

    Tasks a block: without ``max_count``, two: the block's rows (the kernel, the
    rows compacted and shifted: the coordinates' chunk) and its count (the rows'
    number, a task of its own so that the total moves integers between workers,
    never coordinates); for 1-d inputs and 2-d ones in row blocks, with
    ``config.DASK_BLOCKWISE``, both are blockwise layers (see
    :func:`_nonzero_blockwise`), into which dask fuses the input's blockwise
    tasks.  With ``max_count``, three: the block's ``(count, rows)``, its count,
    and its first rows within the limit, from one scan task of all the counts
    (dask-image's running offsets, not a chain of additions a block)."""
    import dask.array as da
    from dask.array.utils import meta_from_array
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    x, kind = _prepare(x, device, f)
    v.check_dtype(np.dtype(x.dtype), v.NONZERO_DTYPES, f)
    v.check_ndim(x.ndim, f)
    w = v.nonzero_width(x.shape, width, f)
    dt = v.coord_dtype(dtype, x.size, f)
    limit = None if max_count is None else v.max_count(max_count, x.size, dt, f)
    if not _is_stripes(x.chunks):
        x = x.rechunk(stripes(x.shape, x.dtype.itemsize, config.DASK_BLOCK_BYTES))
    token = tokenize(x, w, dt, limit, config.DASK_BLOCKWISE)
    fusable = x.ndim == 1 or (x.ndim == 2 and x.numblocks[1] == 1)
    if limit is None and fusable and config.DASK_BLOCKWISE:
        return _nonzero_blockwise(x, w, dt, kind, f, op, token)
    blocks = f"dmlnumba-nonzero-blocks-{token}"
    rows = f"dmlnumba-nonzero-rows-{token}"
    count = f"dmlnumba-nonzero-count-{token}"
    counts = f"dmlnumba-nonzero-counts-{token}"
    scan = f"dmlnumba-nonzero-scan-{token}"
    edges = [np.cumsum((0,) + c).tolist() for c in x.chunks]
    layer: dict[Key, Any] = {}
    keys = []
    for i, idx in enumerate(itertools.product(*(range(len(c)) for c in x.chunks))):
        offsets = tuple(edges[d][j] for d, j in enumerate(idx))
        args = (op, (x.name,) + idx, w, dt, offsets, kind, x.shape, f)
        keys.append((counts, i))
        if limit is None:
            layer[(rows, i, 0)] = (_nonzero_rows, *args)
            layer[(counts, i)] = (_rows_count, (rows, i, 0))
        else:
            layer[(blocks, i)] = (_nonzero_block, *args)
            layer[(counts, i)] = (_count_of, (blocks, i))
            layer[(rows, i, 0)] = (_first_rows, (blocks, i), (scan, 0), i, limit)
    if limit is None:
        layer[(count, 0)] = (_total, keys, dt, kind)
    else:
        layer[(scan, 0)] = (_scan, keys)
        layer[(count, 0)] = (_total_of_scan, (scan, 0), dt, kind)
    graph = HighLevelGraph.from_collections(rows, layer, dependencies=[x])
    meta = x._meta
    coords = da.Array(
        graph, rows, ((np.nan,) * len(keys), (w,)), meta=meta_from_array(meta, 2, dtype=dt)
    )
    total = da.Array(graph, count, ((1,),), meta=meta_from_array(meta, 1, dtype=dt))
    return total, coords
