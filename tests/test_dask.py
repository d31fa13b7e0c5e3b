"""Dask arrays: both operators against NumPy on the computed results, for random
shapes, dtypes and chunkings (every axis, uneven, size-1 chunks), on the threaded
scheduler and on a distributed LocalCluster of 2 worker processes; building a
result computes nothing; bad parameters raise while the graph is built."""

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
    return a, da.from_array(a, chunks=tuple(chunks))


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
