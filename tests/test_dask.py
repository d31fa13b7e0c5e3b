"""Dask arrays: the operators (slice1, slice_grad, nonzero_coordinates, argwhere)
against NumPy on the computed results, for random shapes, dtypes and chunkings (every
axis, uneven, size-1 chunks), on the threaded scheduler and on a distributed
LocalCluster of 2 worker processes; building a result computes nothing; bad
parameters raise while the graph is built."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dmlnumba

from devices import CUDA, SIM
from strategies import NONZERO_DTYPES, bits, values

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")


@st.composite
def chunked_arrays(draw, max_dims=4, max_side=9):
    ndim = draw(st.integers(1, max_dims))
    shape = tuple(draw(st.integers(1, max_side)) for _ in range(ndim))
    dtype = draw(st.sampled_from(NONZERO_DTYPES))
    a = draw(values(dtype, int(np.prod(shape)))).reshape(shape)
    return a, da.from_array(a, chunks=draw(chunkings(shape)))


@st.composite
def chunkings(draw, shape):
    """Chunks of ``shape``: per axis one chunk, chunks of 1, even or uneven ones."""
    chunks = []
    for n in shape:
        kind = draw(st.sampled_from(["whole", "ones", "uneven", "even"]))
        if kind == "whole":
            chunks.append((n,))
        elif kind == "ones":
            chunks.append((1,) * n)
        elif kind == "even":
            c = draw(st.integers(1, n))
            chunks.append(tuple(min(c, n - i) for i in range(0, n, c)))
        else:
            cuts = sorted(set(draw(st.lists(st.integers(1, max(1, n - 1)), max_size=4))))
            edges = [0] + [c for c in cuts if 0 < c < n] + [n]
            chunks.append(tuple(b - a for a, b in zip(edges, edges[1:])))
    return tuple(chunks)


@st.composite
def windows(draw, shape):
    idx = []
    for n in shape:
        step = draw(st.sampled_from([1, 2, 3, -1, -2, -5, 7]))
        a = draw(st.integers(0, n - 1))
        b = draw(st.integers(a + 1, n))
        idx.append(slice(a, b, step) if step > 0 else slice(b - 1, a - 1 if a else None, step))
    return tuple(idx)


def _check_nonzero(a, results, width=None, max_count=None):
    count, coords, argw = results
    ref = np.argwhere(a)
    w = a.ndim if width is None else width
    assert count.shape == (1,) and int(count[0]) == len(ref)
    k = len(ref) if max_count is None else min(len(ref), max_count)
    assert coords.shape == (k, w) and coords.dtype == np.uint32
    np.testing.assert_array_equal(coords, ref[:k, a.ndim - w :])
    np.testing.assert_array_equal(argw, ref)
    assert argw.dtype == np.int64


def _both(x, idx, max_count):
    """The lazy results of both operators (slice1 takes no bool input)."""
    count, coords = dmlnumba.nonzero_coordinates(x, max_count=max_count)
    s = None if x.dtype == np.bool_ else dmlnumba.slice1(x, *dmlnumba.window(x.shape, idx))
    return count, coords, dmlnumba.argwhere(x), s


@given(st.data())
def test_threaded_scheduler_matches_numpy(data):
    a, x = data.draw(chunked_arrays())
    idx = data.draw(windows(a.shape))
    max_count = data.draw(st.one_of(st.none(), st.integers(0, a.size)))
    count, coords, argw, s = _both(x, idx, max_count)
    if s is not None:
        assert s.dtype == a.dtype
    with dask.config.set(scheduler="threads"):
        if a.dtype == np.bool_:
            r = dask.compute(count, coords, argw)
        else:
            r = dask.compute(count, coords, argw, s)
            np.testing.assert_array_equal(bits(r[3]), bits(a[idx]))
            # Sensible output chunks: never more blocks than the input has, and beyond
            # the outermost axis none longer than the largest input chunk of its axis.
            assert np.prod(s.numblocks) <= np.prod(x.numblocks)
            for d, cs in enumerate(s.chunks[1:], 1):
                assert max(cs) <= max(x.chunks[d])
    _check_nonzero(a, r[:3], max_count=max_count)


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=40,
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as c,
    ):
        yield c


@settings(max_examples=15)
@given(st.data())
def test_distributed_local_cluster_matches_numpy(client, data):
    a, x = data.draw(chunked_arrays(max_dims=3))
    idx = data.draw(windows(a.shape))
    count, coords, argw, s = _both(x, idx, None)
    futures = client.compute([count, coords, argw] + ([s] if a.dtype != np.bool_ else []))
    r = client.gather(futures)
    _check_nonzero(a, r[:3])
    if a.dtype != np.bool_:
        np.testing.assert_array_equal(bits(r[3]), bits(a[idx]))


def test_the_two_worker_processes_both_ran_tasks(client):
    a = np.arange(1, 4 * 8 * 8 + 1, dtype=np.float32).reshape(4, 8, 8)
    x = da.from_array(a, chunks=(1, 8, 8))
    count, coords = dmlnumba.nonzero_coordinates(x)
    futures = client.compute([count, coords])  # held: released results leave who_has
    r = client.gather(futures)
    assert int(r[0][0]) == a.size
    workers = {w for ws in client.who_has(futures).values() for w in ws}
    assert len(client.scheduler_info()["workers"]) == 2
    assert workers  # results were held by the cluster's workers


def test_building_a_result_computes_nothing():
    calls = []

    def make(block_info=None):
        calls.append(1)
        shape = block_info[None]["chunk-shape"]
        return np.ones(shape, np.float32)

    x = da.map_blocks(
        make, chunks=((3, 3), (4, 1)), dtype=np.float32, meta=np.empty((0, 0), np.float32)
    )
    count, coords = dmlnumba.nonzero_coordinates(x, max_count=5)
    argw = dmlnumba.argwhere(x)
    s = dmlnumba.slice1(x, (0, 0), (6, 5), (-1, 2))
    y = x.rechunk(((1,) * 6, (2, 3)))  # not stripes: the nonzero graph rechunks, lazily
    dmlnumba.nonzero_coordinates(y)
    assert calls == []
    assert count.shape == (1,) and np.isnan(coords.shape[0]) and coords.shape[1] == 2
    assert s.shape == (6, 3)
    r = dask.compute(count, coords, argw, s, scheduler="threads")
    assert calls  # computing reads the blocks
    assert int(r[0][0]) == 30 and r[1].shape == (5, 2) and r[2].shape == (30, 2)
    np.testing.assert_array_equal(r[3], np.ones((6, 3), np.float32))


def test_bad_parameters_raise_while_building_the_graph():
    x = da.zeros((6, 5), chunks=3, dtype=np.float32)
    with pytest.raises(ValueError, match=r"^slice1\(\): window out of bounds for dimension 1"):
        dmlnumba.slice1(x, (0, 2), (6, 4), (1, 1))
    with pytest.raises(ValueError, match=r"^nonzero_coordinates\(\): width = 3 is out of range"):
        dmlnumba.nonzero_coordinates(x, 3)
    with pytest.raises(TypeError, match=r"dtype complex64 is not supported"):
        dmlnumba.argwhere(x.astype(np.complex64))
    with pytest.raises(TypeError, match=r"out= is not supported for dask arrays"):
        dmlnumba.slice1(x, (0, 0), (6, 5), (1, 1), out=np.empty((6, 5), np.float32))
    with pytest.raises(ValueError, match=r"max_count = -1 is out of range"):
        dmlnumba.nonzero_coordinates(x, max_count=-1)
    with pytest.raises(ValueError, match=r"unknown chunk sizes"):
        dmlnumba.argwhere(x[x[:, 0] > 0])


def test_stripes_bound_the_block_bytes():
    from dmlnumba.chunked import _is_stripes, stripes

    for shape, limit in [
        ((64, 1024, 1024), 1 << 27),
        ((2, 1 << 20), 1 << 16),
        ((3, 5, 7), 8),
        ((1, 1, 9), 4),
    ]:
        chunks = stripes(shape, 4, limit)
        assert _is_stripes(chunks)
        assert tuple(sum(c) for c in chunks) == shape
        biggest = np.prod([max(c) for c in chunks]) * 4
        assert biggest <= max(limit, 4)


def _cupy():
    if not CUDA or SIM:
        pytest.skip("needs a real CUDA GPU")
    return pytest.importorskip("cupy")


@settings(max_examples=25)
@given(st.data())
def test_cupy_chunks_match_numpy(data):
    cupy = _cupy()
    a, x = data.draw(chunked_arrays(max_dims=3))
    xc = da.from_array(cupy.asarray(a), chunks=x.chunks, asarray=False)
    assert type(xc._meta).__module__.startswith("cupy")
    idx = data.draw(windows(a.shape))
    max_count = data.draw(st.one_of(st.none(), st.integers(0, a.size)))
    count, coords, argw, s = _both(xc, idx, max_count)
    with dask.config.set(scheduler="threads"):
        r = dask.compute(*(v for v in (count, coords, argw, s) if v is not None))
    assert all(type(v).__module__.startswith("cupy") for v in r), [type(v) for v in r]
    r = [cupy.asnumpy(v) for v in r]
    _check_nonzero(a, r[:3], max_count=max_count)
    if s is not None:
        np.testing.assert_array_equal(bits(r[3]), bits(a[idx]))


def test_device_moves_dask_chunks_between_numpy_and_cupy():
    cupy = _cupy()
    a = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    x = da.from_array(a, chunks=(1, 4, 5))
    on_gpu = dmlnumba.argwhere(x, device="cuda")
    r = on_gpu.compute(scheduler="threads")
    assert type(r).__module__.startswith("cupy")
    np.testing.assert_array_equal(cupy.asnumpy(r), np.argwhere(a))
    xc = da.from_array(cupy.asarray(a), chunks=(1, 4, 5), asarray=False)
    back = dmlnumba.slice1(xc, (0, 0, 0), (3, 4, 5), (-1, 2, 1), device="cpu")
    r = back.compute(scheduler="threads")
    assert isinstance(r, np.ndarray)
    np.testing.assert_array_equal(r, a[::-1, ::2])


def _nonzero_tasks(count, coords):
    g = dict(count.__dask_graph__())
    g.update(coords.__dask_graph__())
    return [k for k in g if str(k[0] if isinstance(k, tuple) else k).startswith("dmlnumba-")]


def test_nonzero_graph_tasks_a_block():
    """Two tasks a block (the rows, the count), one for the total; with max_count three
    (the block, its count, its first rows) and one scan of all the counts, no chain."""
    a = np.zeros((64, 8), np.float32)
    a[::3, 1] = 1
    x = da.from_array(a, chunks=(4, 8))  # 16 stripes
    count, coords = dmlnumba.nonzero_coordinates(x)
    assert len(_nonzero_tasks(count, coords)) == 2 * 16 + 1
    count, coords = dmlnumba.nonzero_coordinates(x, max_count=7)
    assert len(_nonzero_tasks(count, coords)) == 3 * 16 + 2
    c, xy = dask.compute(count, coords, scheduler="sync")
    assert int(c[0]) == np.count_nonzero(a)
    np.testing.assert_array_equal(xy, np.argwhere(a)[:7])


@pytest.mark.parametrize("blockwise", [1, 0])
def test_nonzero_fuses_with_the_inputs_blockwise_tasks(monkeypatch, blockwise):
    """Rows in row blocks: dask's optimization fuses the input's blockwise tasks (here a
    generator) into nonzero's, one task a block for both (plus the block's count); with
    config.DASK_BLOCKWISE = 0, the materialized layer, which it does not fuse."""
    from dask.base import collections_to_expr

    from dmlnumba import config

    monkeypatch.setattr(config, "DASK_BLOCKWISE", blockwise)

    def gen(block_info=None):
        i = block_info[None]["chunk-location"][0]
        return np.arange(48, dtype=np.float32).reshape(4, 12) % (i + 2)

    x = da.map_blocks(gen, chunks=((4,) * 16, (12,)), dtype=np.float32, meta=np.empty((0, 0)))
    count, coords = dmlnumba.nonzero_coordinates(x)
    graph = collections_to_expr([count, coords], optimize_graph=True).optimize().__dask_graph__()
    assert len(graph) == (2 if blockwise else 3) * 16 + 1
    c, xy = dask.compute(count, coords, scheduler="threads")
    a = x.compute(scheduler="sync")
    assert int(c[0]) == np.count_nonzero(a)
    np.testing.assert_array_equal(xy, np.argwhere(a))


# ---------------------------------------------------------------- slice_grad


@st.composite
def grad_windows(draw, max_dims=3, max_side=12):
    """``(input_shape, offsets, sizes, strides)`` of a SLICE_GRAD, positive and negative
    strides, some larger than the side."""
    ndim = draw(st.integers(1, max_dims))
    shape, offsets, sizes, strides = [], [], [], []
    for _ in range(ndim):
        n = draw(st.integers(1, max_side))
        o = draw(st.integers(0, n - 1))
        shape.append(n)
        offsets.append(o)
        sizes.append(draw(st.integers(1, n - o)))
        strides.append(draw(st.sampled_from([1, 2, 3, 5, 13, -1, -2, -4, -13])))
    return tuple(shape), tuple(offsets), tuple(sizes), tuple(strides)


def _scatter_reference(g, input_shape, offsets, sizes, strides):
    """NumPy's SLICE_GRAD: zeros, then the gradient assigned through Python slices of
    ascending positions (a negative stride's axis taken from its last coordinate)."""
    out = np.zeros(input_shape, g.dtype)
    idx, flip = [], []
    for o, s, t in zip(offsets, sizes, strides):
        m = 1 + (s - 1) // abs(t)
        lo = o if t > 0 else o + s - 1 - (m - 1) * abs(t)  # the lowest position written
        idx.append(slice(lo, lo + (m - 1) * abs(t) + 1, abs(t)))
        flip.append(slice(None) if t > 0 else slice(None, None, -1))
    out[tuple(idx)] = g[tuple(flip)]
    return out


def _grad_shape(sizes, strides):
    return tuple(1 + (s - 1) // abs(t) for s, t in zip(sizes, strides))


@settings(max_examples=150)
@given(st.data())
def test_slice_grad_matches_numpy(data):
    shape, offsets, sizes, strides = data.draw(grad_windows())
    gshape = _grad_shape(sizes, strides)
    dtype = np.dtype(data.draw(st.sampled_from(NONZERO_DTYPES)))
    g = data.draw(values(dtype, int(np.prod(gshape)))).reshape(gshape)
    x = da.from_array(g, chunks=data.draw(chunkings(gshape)))
    # The output's chunks: dask's usual ones, under a limit from one chunk down to
    # chunks of one element (smaller than the strides).
    limit = data.draw(st.sampled_from(["128MiB", "64B", "24B", "1B"]))
    with dask.config.set({"array.chunk-size": limit}):
        r = dmlnumba.slice_grad(x, shape, offsets, sizes, strides)
        want_chunks = da.core.normalize_chunks("auto", shape, dtype=dtype)
    assert r.shape == shape and r.dtype == dtype and r.chunks == want_chunks
    assert type(r._meta) is np.ndarray
    out = r.compute(scheduler="threads")
    assert type(out) is np.ndarray and out.dtype == dtype
    want = _scatter_reference(g, shape, offsets, sizes, strides)
    np.testing.assert_array_equal(bits(out), bits(want))


@pytest.mark.parametrize(
    "shape, offsets, sizes, strides, grad_chunks, limit",
    [
        ((40,), (3,), (35,), (7,), (1,), "16B"),  # chunks smaller than the stride
        ((40,), (0,), (40,), (-9,), (2, 3), "16B"),  # negative, smaller than the stride
        ((9, 8, 7), (1, 0, 2), (8, 8, 5), (2, -3, 1), -1, "128MiB"),  # one chunk each
        ((9, 8, 7), (1, 0, 2), (8, 8, 5), (2, -3, 1), ((1, 3), (2, 1), (4, 1)), "64B"),
        ((30, 6), (2, 1), (27, 5), (-4, 2), ((3, 4), (1, 2)), "48B"),  # uneven
        # blocks written by several gradient chunks' pieces
        ((9, 8, 7), (1, 0, 2), (8, 8, 5), (2, -3, 1), ((1, 3), (2, 1), (4, 1)), "128MiB"),
        ((20,), (2,), (15,), (1,), (4, 5, 6), "64B"),
        ((20,), (2,), (15,), (-1,), (4, 5, 6), "64B"),
        ((30, 6), (2, 1), (27, 5), (-4, 2), ((1, 2, 4), (1, 1, 1)), "128B"),
    ],
)
def test_slice_grad_chunkings(shape, offsets, sizes, strides, grad_chunks, limit):
    gshape = _grad_shape(sizes, strides)
    g = np.arange(1, np.prod(gshape) + 1, dtype=np.float64).reshape(gshape)
    x = da.from_array(g, chunks=grad_chunks)
    with dask.config.set({"array.chunk-size": limit}):
        r = dmlnumba.slice_grad(x, shape, offsets, sizes, strides)
    out = r.compute(scheduler="sync")
    np.testing.assert_array_equal(out, _scatter_reference(g, shape, offsets, sizes, strides))


def test_slice_grad_blocks_read_only_the_gradient_chunks_that_reach_them():
    """Positions 3, 10, ..., 38 of 40 (stride 7), output chunks of 2 (16 bytes of
    float64): blocks holding no position read nothing; the others read only the
    gradient chunks whose coordinates land in them."""
    g = np.arange(1, 7, dtype=np.float64)
    x = da.from_array(g, chunks=(2, 1, 3))
    with dask.config.set({"array.chunk-size": "16B"}):
        r = dmlnumba.slice_grad(x, (40,), (3,), (36,), (7,))
    assert r.chunks == ((2,) * 20,)
    graph = dict(r.__dask_graph__())
    # gradient coordinate c lands at 3 + 7c, in output block (3 + 7c) // 2
    reached = {(3 + 7 * c) // 2: c for c in range(6)}
    gchunk = [0, 0, 1, 2, 2, 2]  # gradient chunk of each coordinate
    for i in range(20):
        deps = {k for k in dask.core.get_dependencies(graph, (r.name, i))}
        if i in reached:
            assert deps == {(x.name, gchunk[reached[i]])}, i
        else:
            assert deps == set(), i
    want = np.zeros(40)
    want[3::7] = g
    np.testing.assert_array_equal(r.compute(scheduler="sync"), want)


def test_slice_grad_on_a_local_cluster(client):
    g = np.arange(1, 4 * 3 + 1, dtype=np.int16).reshape(4, 3)
    x = da.from_array(g, chunks=(3, 2))
    with dask.config.set({"array.chunk-size": "32B"}):
        r = dmlnumba.slice_grad(x, (9, 7), (1, 0), (7, 7), (-2, 3))
    out = client.gather(client.compute(r))
    np.testing.assert_array_equal(out, _scatter_reference(g, (9, 7), (1, 0), (7, 7), (-2, 3)))


def test_slice_grad_builds_lazily_and_checks_while_building():
    calls = []

    def make(block_info=None):
        calls.append(1)
        return np.ones(block_info[None]["chunk-shape"], np.float32)

    x = da.map_blocks(make, chunks=((2, 1), (2,)), dtype=np.float32, meta=np.empty((0, 0)))
    r = dmlnumba.slice_grad(x, (6, 5), (0, 1), (6, 2), (-2, 1))
    assert calls == [] and r.shape == (6, 5)
    with pytest.raises(ValueError, match=r"^slice_grad\(\): input_gradient has shape \(3, 2\);"):
        dmlnumba.slice_grad(x, (6, 5), (0, 0), (6, 5), (2, 1))
    with pytest.raises(ValueError, match=r"^slice_grad\(\): window out of bounds for dimension 1"):
        dmlnumba.slice_grad(x, (6, 5), (0, 4), (6, 2), (2, 1))
    with pytest.raises(TypeError, match=r"^slice_grad\(\): out= is not supported for dask"):
        dmlnumba.slice_grad(x, (6, 5), (0, 1), (6, 2), (2, 1), out=np.empty((6, 5), np.float32))
    with pytest.raises(ValueError, match=r"^slice_grad\(\): stream= does not apply to dask"):
        dmlnumba.slice_grad(x, (6, 5), (0, 1), (6, 2), (2, 1), stream=0)
    with pytest.raises(TypeError, match=r"^slice_grad\(\): input_gradient dtype complex64 is not"):
        dmlnumba.slice_grad(x.astype(np.complex64), (6, 5), (0, 1), (6, 2), (2, 1))
    with pytest.raises(ValueError, match=r"^slice_grad\(\): input_gradient has unknown chunk"):
        dmlnumba.slice_grad(x[x[:, 0] > 0], (6, 5), (0, 1), (6, 2), (2, 1))
    assert calls == []
    want = np.zeros((6, 5), np.float32)
    want[5::-2, 1:3] = 1  # positions 5, 3, 1 (start offsets + sizes - 1)
    np.testing.assert_array_equal(r.compute(scheduler="sync"), want)


@settings(max_examples=25)
@given(st.data())
def test_slice_grad_cupy_chunks_match_numpy(data):
    cupy = _cupy()
    shape, offsets, sizes, strides = data.draw(grad_windows())
    gshape = _grad_shape(sizes, strides)
    dtype = np.dtype(data.draw(st.sampled_from(NONZERO_DTYPES)))
    g = data.draw(values(dtype, int(np.prod(gshape)))).reshape(gshape)
    x = da.from_array(cupy.asarray(g), chunks=data.draw(chunkings(gshape)), asarray=False)
    with dask.config.set({"array.chunk-size": data.draw(st.sampled_from(["128MiB", "24B"]))}):
        r = dmlnumba.slice_grad(x, shape, offsets, sizes, strides)
    assert type(r._meta).__module__.startswith("cupy")
    out = r.compute(scheduler="threads")
    assert type(out).__module__.startswith("cupy")
    want = _scatter_reference(g, shape, offsets, sizes, strides)
    np.testing.assert_array_equal(bits(cupy.asnumpy(out)), bits(want))
    back = dmlnumba.slice_grad(x, shape, offsets, sizes, strides, device="cpu")
    np.testing.assert_array_equal(bits(back.compute(scheduler="threads")), bits(want))
