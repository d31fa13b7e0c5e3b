"""Dask arrays: both operators chunk by chunk, lazily, with NumPy or CuPy chunks.

Imported only when a ``dask.array.Array`` reaches the API (``pip install
'dmlnumba[dask]'``).  Parameters are checked while the graph is built, against
the array's shape; nothing is computed until the caller asks.

slice1
    Output chunks follow the input's: along each axis, the output coordinates
    that read one input chunk form a run, and neighbouring runs are merged up to
    the input's largest chunk length (so a large stride gives neither one giant
    chunk nor thousands of one-element ones).  Each output block depends on the
    input blocks it reads and nothing else; it is allocated once and filled
    piece by piece, each piece a ``slice1`` from one input block into a view of
    the output block (no concatenation, no full materialisation).

nonzero_coordinates
    DirectML's design one level up: per-block coordinates, in ascending order
    within each block, and blocks in ascending order of their elements, so the
    concatenation is in ascending global order.  That needs every block to be a
    contiguous run of the row-major order ("stripes": one index along the
    leading axes, a range along one axis, the whole of every later axis).  A
    chunking that is not made of stripes is rechunked into stripes of at most
    ``config.DASK_BLOCK_BYTES`` (128 MiB) of input each, which bounds the memory
    the rechunk and every task need.  Each block is read once: its coordinates
    are found by the in-memory kernel and shifted by the block's position in
    place.  ``count`` is the sum of the blocks' counts; with ``max_count``, an
    exclusive scan of the block counts gives each block its first row, and rows
    past ``max_count`` are dropped.  The coordinates' chunk sizes are unknown
    until computed (a lazy array needs no worst-case buffer).

Kernels inside tasks run on the task's thread: the scheduler's threads (or
workers) are the parallelism, and numba's thread pool is not started on top.

Devices
    Each CuPy chunk is processed on the GPU it is on, under CuPy's guard for that
    device (the task thread's current device may be another); ``device="cuda:N"``
    moves every chunk to GPU N first (NumPy chunks uploaded, CuPy chunks on other
    GPUs copied), ``device="cpu"`` every chunk to the host.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import numpy as np

from . import config
from . import validation as v
from .dispatch import DeviceUnavailableError, parse_device, run_nonzero, run_slice1

if TYPE_CHECKING:
    from dask.typing import Key


def _kind(meta, f):
    if isinstance(meta, np.ma.MaskedArray):
        raise TypeError(
            f"{f}(): input is a dask array of numpy.ma.MaskedArray chunks, whose masks dmlnumba "
            f"would ignore; pass dask.array.ma.filled(input, 0) instead"
        )
    mod = (type(meta).__module__ or "").split(".")[0]
    if mod not in ("numpy", "cupy"):
        raise TypeError(
            f"{f}(): input is a dask array of {type(meta).__name__} chunks; "
            f"dmlnumba takes NumPy or CuPy chunks"
        )
    return mod


def _xp(kind):
    if kind == "cupy":
        import cupy

        return cupy
    return np


def _to_numpy(block):
    import cupy

    return cupy.asnumpy(block)


def _to_cupy(block, dev=None):
    """A chunk as a CuPy array: on device ``dev`` (copied there where it is on
    another; None: on the task's current device, or where it is already)."""
    import cupy

    if dev is None:
        return cupy.asarray(block)
    with cupy.cuda.Device(dev):
        if isinstance(block, cupy.ndarray):
            # CuPy copies an array on another device to the current one.
            return block if block.device.id == dev else block.copy()
        return cupy.asarray(block)


def _on_device_of(block):
    """CuPy's device guard for a chunk (the device it is on): CuPy's kernels run on
    the current device, and refuse arrays of another."""
    import cupy

    return cupy.cuda.Device(block.device.id)


def _prepare(x, device, f):
    """``(x, kind)``: the array with its chunks where ``device`` says, and their kind
    (``"cuda:N"``: every chunk on device N, copied there where it is elsewhere)."""
    from dask.array.utils import meta_from_array

    config.check_env(f)
    if any(np.isnan(c) for cs in x.chunks for c in cs):
        raise ValueError(
            f"{f}(): input has unknown chunk sizes; call input.compute_chunk_sizes() first"
        )
    kind = _kind(x._meta, f)
    dev = parse_device(device, f)
    if dev is None:
        return x, kind
    if dev[0] == "cpu" and kind == "cupy":
        return x.map_blocks(_to_numpy, meta=np.empty((0,) * x.ndim, x.dtype)), "numpy"
    if dev[0] == "cuda" and (kind == "numpy" or dev[1] is not None):
        from .dispatch import _cuda_device

        _cuda_device(dev, f)
        try:
            import cupy
        except ImportError:
            raise DeviceUnavailableError(
                f"{f}(): device='cuda' moves a dask array's chunks to the GPU as CuPy arrays, and "
                f"CuPy is not installed"
            ) from None
        meta = meta_from_array(cupy.empty((0,) * x.ndim, x.dtype))
        return x.map_blocks(_to_cupy, dev[1], meta=meta), "cupy"
    return x, kind


# ---------------------------------------------------------------- slice1


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

    from .cpu import target as target_cpu

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


# ---------------------------------------------------------------- nonzero


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
        from .cpu import target as target_cpu

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


# ---------------------------------------------------------------- the adapter's interface
# (dmlnumba.target.Runs: the calls a prepared Call of a dask array makes)


def slice1_call(c):
    """slice1 (``c.args``: the parameters as read once by the prepare step)."""
    offsets, sizes, strides, output_sizes = c.args
    return slice1(c.input, offsets, sizes, strides, output_sizes, c.device)


def nonzero_call(c):
    """nonzero_coordinates (``c.args``: ``(width, dtype, max_count)`` read once)."""
    width, dtype, max_count = c.args
    return nonzero(c.input, width, dtype, max_count, c.device, c.f)


def argwhere_call(c):
    """The compact rows of :func:`nonzero`, as ``numpy.argwhere`` gives them."""
    width, dtype, max_count = c.args
    rows = nonzero(c.input, width, dtype, max_count, c.device, c.f)[1]
    if c.zero_d:
        rows = rows[:, :0]
    return rows.T if c.transposed else rows


def empty_result(c, shape, dtype):
    """A lazy empty slice of the input, of its chunk type (``dtype``: the input's)."""
    return c.input[tuple(slice(0, n) for n in shape)]
