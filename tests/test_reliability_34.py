"""Regression tests for issue 34: parameters that change the input while they are read,
calls from several threads under numba's workqueue layer, ``-W error`` without a
cache directory, argwhere's memory, max_count, bad settings, masked dask chunks and
messages that name their function."""

import importlib.util
import os
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import pytest

import dmlnumba

from devices import CUDA, SIM


def _python(code, env=None, args=(), timeout=600):
    """Run ``code`` in a fresh interpreter; return its CompletedProcess."""
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(
        [sys.executable, *args, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=e,
    )


# ---------------------------------------------------------------- 1. parameters changing the input


def test_parameters_that_reshape_or_resize_the_input_never_read_past_it():
    # Was: the window was checked against the input's old layout and walked over its
    # new one: a read 2**40 bytes past a 1 MiB buffer (a segfault), or wrong results.
    r = _python("""
        import collections.abc
        import numpy as np, dmlnumba

        N = 1 << 20

        class Index:
            def __init__(self, value, act):
                self.value, self.act = value, act
            def __index__(self):
                self.act()
                return self.value

        class Seq(collections.abc.Sequence):
            def __init__(self, values, act, on):
                self.values, self.act, self.on = values, act, on
            def __len__(self):
                if self.on == "len":
                    self.act()
                return len(self.values)
            def __getitem__(self, i):
                return self.values[i]
            def __iter__(self):
                if self.on == "iter":
                    self.act()
                return iter(self.values)

        def attempt(call, x, window):
            # "error" (naming the function), or whether the result is the window of the
            # input's layout after the call (where that window exists).
            try:
                r = call()
            except (ValueError, TypeError) as e:
                return "error" if str(e).startswith(("slice1()", "nonzero_")) else str(e)
            offsets, sizes = window
            if any(o + s > n for o, s, n in zip(offsets, sizes, x.shape)):
                return "wrong: no such window"
            want = x[tuple(slice(o, o + s) for o, s in zip(offsets, sizes))]
            return "right" if r.tolist() == want.tolist() else "wrong"

        def column():
            x = np.zeros((N, 1), np.uint8)
            x[-1] = 7
            return x

        def flip(x):
            def act():
                x.shape = (1, N)
            return act

        w = ((N - 1, 0), (1, 1))
        for out in [None, np.zeros((1, 1), np.uint8)]:
            x = column()
            o = (Index(N - 1, flip(x)), 0)
            print(attempt(lambda: dmlnumba.slice1(x, o, (1, 1), (1, 1), out=out), x, w))
        for on in ("len", "iter"):
            x = column()
            s = Seq((1, 1), flip(x), on)
            print(attempt(lambda: dmlnumba.slice1(x, (N - 1, 0), s, (1, 1)), x, w))
        x = np.arange(N, dtype=np.uint8)
        def shrink():
            x.resize((16,), refcheck=False)
        o = (Index(N - 1, shrink),)
        print(attempt(lambda: dmlnumba.slice1(x, o, (1,), (1,)), x, ((N - 1,), (1,))))
        # A reshape that makes the window valid: the result is the new layout's window.
        x = np.arange(16, dtype=np.int16).reshape(4, 4)
        def wide():
            x.shape = (2, 8)
        o = (1, Index(5, wide))
        print(attempt(lambda: dmlnumba.slice1(x, o, (1, 3), (1, 1)), x, ((1, 5), (1, 3))))
        # nonzero_coordinates: width and dtype read before the input's shape.
        x = np.arange(16, dtype=np.float32).reshape(1, 16)
        def tall():
            x.shape = (16, 1)
        try:
            dmlnumba.nonzero_coordinates(x, Index(1, tall))
        except ValueError as e:
            print(str(e).split(":")[0])
        class DType:
            @property
            def dtype(self):
                x.shape = (16,)
                return np.dtype(np.uint32)
        x = np.arange(16, dtype=np.float32).reshape(4, 4)
        count, coords = dmlnumba.nonzero_coordinates(x, dtype=DType())
        print(int(count[0]), coords.shape, coords[:15].ravel().tolist() == list(range(1, 16)))
    """)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert all(line in ("error", "right") for line in lines[:5]), lines
    assert lines[5:] == [
        "right",
        "nonzero_coordinates()",
        "15 (16, 1) True",
    ]


# ---------------------------------------------------------------- 2. threads under workqueue


def test_threads_making_parallel_calls_under_the_workqueue_layer():
    # Was: "Numba workqueue threading layer is terminating: Concurrent access has been
    # detected", and the process aborted.
    r = _python(
        """
        import threading
        import numpy as np, numba, dmlnumba

        x = (np.arange(1 << 21) % 3).astype(np.float32).reshape(1 << 11, 1 << 10)
        want = np.argwhere(x)
        bad = []

        def work():
            for _ in range(6):
                if not np.array_equal(dmlnumba.argwhere(x), want):
                    bad.append("argwhere")
                if not np.array_equal(dmlnumba.slice1(x, (0, 0), x.shape, (-1, 1)), x[::-1]):
                    bad.append("slice1")

        ts = [threading.Thread(target=work) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        print(numba.threading_layer(), bad)
    """,
        {"NUMBA_THREADING_LAYER": "workqueue"},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout == "workqueue []\n"


# ---------------------------------------------------------------- 3. -W error, no cache directory


def test_cache_warning_under_w_error_is_raised_by_every_call_alike():
    # Was: the first call raised the warning from inside the kernels' import and later
    # calls succeeded silently (dmlnumba half initialised).
    r = _python(
        """
        import warnings
        from numba.core import caching
        caching.CacheImpl._locator_classes = []       # what numba finds with nowhere to write
        import numpy as np, dmlnumba
        x = np.ones((3, 4))
        for _ in range(3):
            try:
                dmlnumba.argwhere(x)
                print("returned")
            except RuntimeWarning as e:
                print("raised", "no writable cache directory" in str(e))
        warnings.simplefilter("ignore")
        print(dmlnumba.argwhere(x).shape, dmlnumba.argwhere(x).shape)
    """,
        args=("-W", "error"),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["raised True"] * 3 + ["(12, 2) (12, 2)"]


# ---------------------------------------------------------------- 5. argwhere


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


# ---------------------------------------------------------------- 6. max_count


def test_max_count_past_the_input_gives_input_size_rows():
    # Was: max_count rows, here 2**32 - 1 of them (16 GiB).
    x = np.array([0, 3, 0, 5, 1], np.float32)
    count, coords = dmlnumba.nonzero_coordinates(x, max_count=2**32 - 1)
    assert coords.shape == (5, 1) and int(count[0]) == 3
    np.testing.assert_array_equal(coords[:3], np.argwhere(x))
    out = np.full((5, 1), 9, np.uint32)  # input.size rows are enough for any max_count
    count, coords = dmlnumba.nonzero_coordinates(x, max_count=100, out_coordinates=out)
    assert coords is out and int(count[0]) == 3
    np.testing.assert_array_equal(out[:3], np.argwhere(x))


# ---------------------------------------------------------------- 7. bad settings


def test_a_bad_setting_never_breaks_the_import_and_dask_refuses_it_at_once():
    # Was: DMLNUMBA_CPU_SLICE_CHUNK=--5 made `import dmlnumba` raise; dask graphs were
    # built and failed inside a task.
    pytest.importorskip("dask.array")  # the child process builds dask graphs
    r = _python(
        """
        import numpy as np, dask.array as da, dmlnumba
        x = da.ones((4, 4), chunks=2)
        for call in (
            lambda: dmlnumba.slice1(np.ones(3), (0,), (3,), (1,)),
            lambda: dmlnumba.slice1(x, (0, 0), (2, 2), (1, 1)),
            lambda: dmlnumba.nonzero_coordinates(x),
            lambda: dmlnumba.argwhere(x),
        ):
            try:
                call()
                print("built")
            except ValueError as e:
                print(e)
    """,
        {"DMLNUMBA_CPU_SLICE_CHUNK": "--5"},
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 4
    for line, f in zip(lines, ["slice1", "slice1", "nonzero_coordinates", "argwhere"]):
        assert line.startswith(f"{f}(): environment variable DMLNUMBA_CPU_SLICE_CHUNK='--5'")


# ---------------------------------------------------------------- 8. masked dask chunks


def test_dask_arrays_of_masked_chunks_are_refused_while_the_graph_is_built():
    # Was: refused inside a task, by "dask block()".
    da = pytest.importorskip("dask.array")
    m = np.ma.masked_array(np.arange(6.0), mask=[0, 1, 0, 0, 0, 0])
    for x in (
        da.from_array(m, chunks=3),
        da.ma.masked_array(da.arange(6.0, chunks=3), mask=da.zeros(6, chunks=3, dtype=bool)),
    ):
        for f, call in [
            ("slice1", lambda: dmlnumba.slice1(x, (0,), (6,), (1,))),
            ("nonzero_coordinates", lambda: dmlnumba.nonzero_coordinates(x)),
            ("argwhere", lambda: dmlnumba.argwhere(x)),
        ]:
            with pytest.raises(TypeError, match=rf"^{f}\(\): input is a dask array of numpy.ma"):
                call()


# ---------------------------------------------------------------- 9. messages


@pytest.mark.parametrize(
    "index,exc",
    [
        (slice(None, None, 0), ValueError),
        (slice(0.5, 3), TypeError),
        ((Ellipsis, slice(0, "a")), TypeError),
    ],
)
def test_window_slice_errors_name_window(index, exc):
    # Was: Python's own "slice step cannot be zero" / "slice indices must be integers".
    with pytest.raises(exc, match=r"^window\(\): the slice .* of dimension 0"):
        dmlnumba.window((4,), index)


@pytest.mark.skipif(CUDA or SIM, reason="needs a machine where CUDA is unavailable")
@pytest.mark.parametrize(
    "argv", [["--device", "cuda", "--no-timing"], ["compile", "--device", "cuda"]]
)
def test_command_line_without_a_gpu_prints_one_line(argv):
    r = subprocess.run(
        [sys.executable, "-m", "dmlnumba", *argv],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 1
    assert r.stdout == ""
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    # Without numba-cuda (pip install ".[test]" alone) the line says what to install;
    # with it, that there is no GPU.
    if importlib.util.find_spec("numba_cuda") is None:
        why = "the CUDA target needs numba-cuda, which is not installed"
    else:
        why = "no usable CUDA GPU"
    assert len(lines) == 1 and why in lines[0], r.stderr
