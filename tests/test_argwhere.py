"""argwhere: the compact result only allocated, counted first, lists and tuples read
like NumPy, unreadable inputs named, and the chunked variant."""

import tracemalloc

import numpy as np
import pytest

import dmlnumba


def test_argwhere_allocates_the_compact_result_only():
    # Was: a worst-case (input.size, ndim) int64 buffer first: 64 MiB here, for 3 rows.
    x = np.zeros((1 << 12, 1 << 10), np.uint8)
    x[5, 7] = x[100, 0] = x[-1, -1] = 1
    dmlnumba.argwhere(x)  # compiled and warm
    for _ in range(2):  # the first call, then the repeated call's runner
        tracemalloc.start()
        try:
            r = dmlnumba.argwhere(x)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        np.testing.assert_array_equal(r, np.argwhere(x))
        assert peak < 1 << 20, peak


@pytest.mark.parametrize("density", [0.0, 0.01, 0.5, 1.0])
@pytest.mark.parametrize("shape", [(70001,), (300, 257), (3, 5, 4681)])
def test_argwhere_counted_first_matches_numpy(density, shape):
    rng = np.random.default_rng(7)
    x = (rng.random(shape) < density).astype(np.float32)
    for a in (x, x[..., ::-1], np.asfortranarray(x), np.broadcast_to(x[..., :1], x.shape)):
        for _ in range(2):
            r = dmlnumba.argwhere(a)
            assert r.dtype == np.int64
            np.testing.assert_array_equal(r, np.argwhere(a))


def test_argwhere_counted_first_across_blocks(small_blocks):
    rng = np.random.default_rng(3)
    for shape in [(50,), (9, 11), (2, 3, 17)]:
        for density in (0.0, 0.3, 1.0):
            x = (rng.random(shape) < density).astype(np.int16)
            np.testing.assert_array_equal(dmlnumba.argwhere(x), np.argwhere(x))
            np.testing.assert_array_equal(dmlnumba.argwhere(x.T), np.argwhere(x.T))


def test_argwhere_reads_lists_and_tuples_like_numpy():
    for a in ([1, 0, 2], ((0, 1), (1, 1)), [[0.0, -0.0], [3.5, 0.0]], [True, False]):
        np.testing.assert_array_equal(dmlnumba.argwhere(a), np.argwhere(np.asarray(a)))
    with pytest.raises(ValueError, match=r"^argwhere\(\): input could not be read as an array"):
        dmlnumba.argwhere([[1], [1, 2]])


@pytest.mark.parametrize("x", ["ab", {3}, None, {1: 2}])
def test_argwhere_names_what_it_reads_and_suggests_asarray(x):
    with pytest.raises(TypeError, match=r"^argwhere\(\): input must be an array") as e:
        dmlnumba.argwhere(x)
    msg = str(e.value)
    assert "PyTorch CPU" in msg and "dask" in msg and "numpy.asarray" in msg


def test_chunked_argwhere_runs():
    # Was: TypeError (nonzero() called without its op argument).
    da = pytest.importorskip("dask.array")

    x = np.array([[0, 1, 0], [2, 0, 3]], np.int32)
    r = dmlnumba.argwhere(da.from_array(x, chunks=1))
    np.testing.assert_array_equal(r.compute(), np.argwhere(x))
