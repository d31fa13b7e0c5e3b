"""Regression tests for every class of failure that issue 12's probe found: ndarray
subclasses, aliased outputs, fork, cache and debug environments, CUDA
unavailable, arguments that are not ordered sequences, first use."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dmlnumba

from devices import CUDA, DEVICES, SIM, device_view, to_device, to_host

X = np.arange(1, 13, dtype=np.float32).reshape(3, 4)


def _python(code, env=None, timeout=600):
    """Run ``code`` in a fresh interpreter; return its CompletedProcess."""
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=e,
    )


# ---------------------------------------------------------------- 1. subclasses


def test_matrix_out_is_written_in_place_and_nothing_past_it():
    # Was: 9s everywhere and 30 elements written past the buffer (heap corruption).
    buf = np.full(40, -1.0, np.float32)
    o = buf[:6].reshape(3, 2).view(np.matrix)
    assert np.shares_memory(o, buf)
    r = dmlnumba.slice1(X, (0, 0), (3, 4), (-1, 2), out=o)
    assert r is o
    np.testing.assert_array_equal(np.asarray(o), X[::-1, ::2])
    assert (buf[6:] == -1).all()


def test_matrix_out_coordinates():
    buf = np.full(40, 7, np.uint32)
    o = buf[:24].reshape(12, 2).view(np.matrix)
    count, coords = dmlnumba.nonzero_coordinates(X, out_coordinates=o)
    assert coords is o and count[0] == 12
    np.testing.assert_array_equal(np.asarray(o), np.argwhere(X))
    assert (buf[24:] == 7).all()


def test_matrix_memmap_and_recarray_inputs_read_as_their_data(tmp_path):
    m = np.matrix(X)
    np.testing.assert_array_equal(dmlnumba.slice1(m, (0, 0), (3, 4), (-1, 2)), X[::-1, ::2])
    np.testing.assert_array_equal(dmlnumba.argwhere(m), np.argwhere(X))
    mm = np.memmap(tmp_path / "x.bin", np.float32, "w+", shape=X.shape)
    mm[:] = X
    np.testing.assert_array_equal(dmlnumba.slice1(mm, (0, 0), (3, 4), (1, -1)), X[:, ::-1])
    np.testing.assert_array_equal(dmlnumba.argwhere(X.view(np.recarray)), np.argwhere(X))


@pytest.mark.parametrize("where", ["input", "out", "out_coordinates"])
def test_masked_arrays_are_refused_with_the_parameter_named(where):
    ma = np.ma.masked_array(X, X > 5)
    out = np.ma.masked_array(np.zeros((3, 4), np.float32))
    with pytest.raises(TypeError, match=rf"{where} is a numpy.ma.MaskedArray.*filled"):
        if where == "input":
            dmlnumba.slice1(ma, (0, 0), (3, 4), (1, 1))
        elif where == "out":
            dmlnumba.slice1(X, (0, 0), (3, 4), (1, 1), out=out)
        else:
            dmlnumba.nonzero_coordinates(
                X, out_coordinates=np.ma.masked_array(np.zeros((12, 2), np.uint32))
            )
    assert (out.data == 0).all()


# ---------------------------------------------------------------- 2. aliasing


@pytest.mark.parametrize("device", DEVICES)
def test_out_coordinates_overlapping_the_input(device):
    # Was: a count of 1792 instead of 2048, with wrong rows.
    buf = np.ones(4096, np.uint32)
    if device == "cpu":
        x, oc = buf[:2048].reshape(1024, 2), buf.reshape(2048, 2)
    else:
        d = to_device(buf, device)
        x = device_view(d, lambda b: b[:2048].reshape(1024, 2), buf)
        oc = device_view(d, lambda b: b.reshape(2048, 2), buf)
    count, coords = dmlnumba.nonzero_coordinates(x, out_coordinates=oc)
    assert coords is oc
    assert int(to_host(count)[0]) == 2048
    np.testing.assert_array_equal(to_host(coords), np.argwhere(np.ones((1024, 2))))


@pytest.mark.parametrize("device", DEVICES)
def test_out_count_overlapping_the_input(device):
    buf = np.arange(1, 9, dtype=np.uint32)
    if device == "cpu":
        x, cnt = buf[:4], buf[3:4]
    else:
        d = to_device(buf, device)
        x = device_view(d, lambda b: b[:4], buf)
        cnt = device_view(d, lambda b: b[3:4], buf)
    count, coords = dmlnumba.nonzero_coordinates(x, out_count=cnt)
    assert int(to_host(count)[0]) == 4
    np.testing.assert_array_equal(to_host(coords)[:4, 0], [0, 1, 2, 3])


@pytest.mark.parametrize("device", DEVICES)
def test_out_count_overlapping_out_coordinates_is_refused(device):
    buf = np.full(10, 77, np.uint32)
    if device == "cpu":
        cnt, oc = buf[:1], buf[:8].reshape(4, 2)
    else:
        d = to_device(buf, device)
        cnt = device_view(d, lambda b: b[:1], buf)
        oc = device_view(d, lambda b: b[:8].reshape(4, 2), buf)
    with pytest.raises(ValueError, match=r"out_count and out_coordinates overlap"):
        x = np.ones((2, 2), np.float32)
        dmlnumba.nonzero_coordinates(
            x if device == "cpu" else to_device(x, device), out_count=cnt, out_coordinates=oc
        )
    assert (to_host(to_device(buf, "cpu")) == 77).all()


@pytest.mark.parametrize("device", DEVICES)
def test_out_count_beside_out_coordinates_is_accepted(device):
    # Interleaved but disjoint: count in the gap after each coordinate row.
    buf = np.full(12, 77, np.uint32)
    view_c = lambda b: b[2:3]  # noqa: E731
    view_x = lambda b: np.lib.stride_tricks.as_strided(b, (4, 1), (12, 4))  # noqa: E731
    x = np.array([0, 3, 0, 5], np.float32)
    if device == "cpu":
        cnt, oc = view_c(buf), view_x(buf)
    else:
        d = to_device(buf, device)
        cnt, oc = device_view(d, view_c, buf), device_view(d, view_x, buf)
        x = to_device(x, device)
    count, coords = dmlnumba.nonzero_coordinates(x, 1, out_count=cnt, out_coordinates=oc)
    assert int(to_host(count)[0]) == 2
    assert to_host(coords)[:2, 0].tolist() == [1, 3]


@pytest.mark.parametrize("device", DEVICES)
def test_slice1_out_overlapping_the_input(device):
    # Was, on CUDA: TypeError: unhashable type: 'list'.
    buf = np.arange(24, dtype=np.float32)
    want = buf[:12].reshape(3, 4)[::-1, ::-1].copy()
    if device == "cpu":
        x, out = buf[:12].reshape(3, 4), buf[6:18].reshape(3, 4)
    else:
        d = to_device(buf, device)
        x = device_view(d, lambda b: b[:12].reshape(3, 4), buf)
        out = device_view(d, lambda b: b[6:18].reshape(3, 4), buf)
    r = dmlnumba.slice1(x, (0, 0), (3, 4), (-1, -1), out=out)
    assert r is out
    np.testing.assert_array_equal(to_host(r).reshape(3, 4), want)


@pytest.mark.parametrize("device", DEVICES)
def test_interleaved_out_that_does_not_overlap_is_accepted(device):
    # Byte strides (12, 8), shape (2, 3), float32: elements at 0, 8, 16, 12, 20, 28.
    buf = np.full(9, -1.0, np.float32)
    view = lambda b: np.lib.stride_tricks.as_strided(b, (2, 3), (12, 8))  # noqa: E731
    src = np.arange(6, dtype=np.float32).reshape(2, 3)
    if device == "cpu":
        out = view(buf)
    else:
        d = to_device(buf, device)
        out = device_view(d, view, buf)
        src = to_device(src, device)
    r = dmlnumba.slice1(src, (0, 0), (2, 3), (1, 1), out=out)
    np.testing.assert_array_equal(to_host(r), np.arange(6).reshape(2, 3))


@pytest.mark.parametrize(
    "shape,strides,isz,overlaps",
    [
        ((2, 3), (12, 8), 4, False),
        ((2, 3), (12, 4), 4, False),  # 0, 4, 8 then 12, 16, 20
        ((2, 3), (8, 4), 4, True),  # 0, 4, 8 then 8, 12, 16
        ((3, 3), (8, 4), 4, True),
        ((4, 2, 3), (0, 12, 4), 4, True),
        ((5,), (0,), 4, True),
        ((1, 5), (0, 4), 4, False),
        ((3, 4), (16, 4), 4, False),
        ((3, 4), (-16, -4), 4, False),
        ((3, 4), (4, 16), 4, False),
        ((2, 2), (6, 4), 4, True),  # 0, 4, 6, 10: the 4-byte elements at 4 and 6 collide
        ((2, 2), (8, 3), 2, False),  # 0, 3, 8, 11 with 2-byte elements
        ((0, 3), (0, 0), 4, False),
        ((100000, 100000), (4, 4), 4, True),
    ],
)
def test_self_overlap_is_exact(shape, strides, isz, overlaps):
    from dmlnumba.validation import self_overlaps

    assert self_overlaps(shape, strides, isz) is overlaps


# ---------------------------------------------------------------- 3. fork


def test_fork_pool_after_a_parallel_call():
    # Was: workers died ("fork() called from a process already using GNU OpenMP") and
    # Pool.map hung.
    r = _python(
        """
        import multiprocessing as mp, numpy as np, dmlnumba
        x = np.ones((1200, 1000), np.float32)
        def f(i):
            return (int(dmlnumba.nonzero_coordinates(x)[0][0]),
                    float(dmlnumba.slice1(x, (0, 0), (1200, 1000), (1, -1)).sum()))
        if __name__ == "__main__":
            from dmlnumba import config
            assert x.size >= config.CPU_PARALLEL_MIN   # the parent starts the thread pool
            print(len(dmlnumba.argwhere(x)))
            with mp.get_context("fork").Pool(2) as p:
                print(p.map(f, range(4)))
    """,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["1200000", str([(1200000, 1200000.0)] * 4)]
    assert "Terminating" not in r.stderr


# ---------------------------------------------------------------- 4. environments


def test_no_cache_location_compiles_in_memory_with_one_warning():
    # Was: every call raised "cannot cache function 'unravel': no locator available".
    r = _python("""
        import warnings
        warnings.simplefilter("always")
        from numba.core import caching
        caching.CacheImpl._locator_classes = []       # what numba finds with nowhere to write
        import numpy as np, dmlnumba
        print(dmlnumba.argwhere(np.ones((3, 4))).shape)
        x = np.arange(6.).reshape(2, 3)
        print(dmlnumba.slice1(x, (0, 0), (2, 3), (1, -1)).tolist())
        out = np.empty((2, 3))  # into out=: the kernel (a new output this small: NumPy's copy)
        print(dmlnumba.slice1(x, (0, 0), (2, 3), (1, -1), out=out).tolist())
    """)
    assert r.returncode == 0, r.stderr
    want = "[[2.0, 1.0, 0.0], [5.0, 4.0, 3.0]]"
    assert r.stdout.split("\n")[:3] == ["(12, 2)", want, want]
    assert r.stderr.count("numba has no writable cache directory") == 1


def test_truncated_cache_entries_are_recompiled(tmp_path):
    code = """
        import numpy as np, dmlnumba
        out = np.empty(5, np.int8)  # into out=: the kernel
        print(dmlnumba.argwhere(np.array([0, 5, 0, 7], np.int8)).ravel().tolist(),
              dmlnumba.slice1(np.arange(5, dtype=np.int8), (0,), (5,), (-1,), out=out).tolist())
    """
    env = {"NUMBA_CACHE_DIR": str(tmp_path)}
    first = _python(code, env)
    assert first.returncode == 0, first.stderr
    files = [p for p in tmp_path.rglob("*") if p.suffix in (".nbi", ".nbc")]
    assert files
    for p in files:
        p.write_bytes(p.read_bytes()[:7])
    second = _python(code, env)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout == "[1, 3] [4, 3, 2, 1, 0]\n"
    assert "could not be read" in second.stderr
    third = _python(code, env)  # the entries were written anew
    assert third.returncode == 0 and third.stdout == first.stdout
    assert "could not be read" not in third.stderr


def test_a_missing_threading_layer_is_not_taken_for_a_bad_cache_entry(tmp_path):
    # Was: "numba's cached code for count/8/parallel could not be read (ValueError: No
    # threading layer could be loaded...); recompiling it", and every kernel's cache
    # flushed, before the same error was raised.
    code = """
        import numpy as np, dmlnumba
        print(dmlnumba.argwhere(np.ones(1 << 21, np.int8)).shape)
    """
    env = {"NUMBA_CACHE_DIR": str(tmp_path), "DMLNUMBA_CPU_PARALLEL_MIN": str(1 << 20)}
    first = _python(code, env)
    assert first.returncode == 0 and first.stdout == "(2097152, 1)\n", first.stderr
    second = _python(code, {**env, "NUMBA_THREADING_LAYER": "tbb"})
    if second.returncode == 0:
        pytest.skip("numba loads tbb here")
    assert "No threading layer could be loaded" in second.stderr
    assert "could not be read" not in second.stderr
    third = _python(code, env)  # the cache is intact: nothing to recompile
    assert third.returncode == 0 and third.stdout == first.stdout
    assert "compiling" not in third.stderr


def test_disable_jit_runs_every_path():
    # Was: multi-row slice1 failed (the prefetch intrinsic cannot run as Python).
    r = _python(
        """
        import numpy as np, dmlnumba
        x = np.arange(3 * 40 * 50, dtype=np.float32).reshape(3, 40, 50)
        assert (dmlnumba.slice1(x, (0, 0, 0), (3, 40, 50), (1, -1, 2)) == x[:, ::-1, ::2]).all()
        assert (dmlnumba.slice1(x, (0, 0, 0), (3, 40, 50), (1, 3, 3)) == x[:, ::3, ::3]).all()
        out = np.empty((3, 14, 17), np.float32)  # into out=: the kernel, not NumPy's copy
        dmlnumba.slice1(x, (0, 0, 0), (3, 40, 50), (1, -3, 3), out=out)
        assert (out == x[:, ::-3, ::3]).all()
        y = np.arange(1 << 14, dtype=np.int16)  # past CPU_SLICE_NUMPY_MAX: the kernel
        assert (dmlnumba.slice1(y, (1,), (y.size - 1,), (-2,)) == y[1:][::-2]).all()
        assert (dmlnumba.argwhere(x) == np.argwhere(x)).all()
        assert (dmlnumba.argwhere(x[:, ::-2]) == np.argwhere(x[:, ::-2])).all()
        print("ok")
    """,
        {"NUMBA_DISABLE_JIT": "1"},
    )
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr


@pytest.mark.parametrize("value", ["abc", "0", "-5", "1.5", "٣", ""])
def test_bad_environment_values_name_the_variable(value):
    # Was: import failed, or ZeroDivisionError at the first call.
    r = _python(
        """
        import numpy as np, dmlnumba
        for call in (lambda: dmlnumba.slice1(np.ones(3), (0,), (3,), (1,)),
                     lambda: dmlnumba.argwhere(np.ones(3))):
            try:
                call()
            except ValueError as e:
                print(e)
    """,
        {"DMLNUMBA_CPU_SLICE_CHUNK": value},
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("slice1(): environment variable DMLNUMBA_CPU_SLICE_CHUNK=")
    assert lines[1].startswith("argwhere(): environment variable DMLNUMBA_CPU_SLICE_CHUNK=")


def test_register_cap_out_of_range_names_the_variable():
    """The register caps (0 to 255) and the slice kernel's 32-bit bound (0 to 2**31)
    are checked like every setting."""
    for var, value in [
        ("CUDA_NONZERO_MAX_REGISTERS", "256"),
        ("CUDA_SLICE_32BIT_REGISTERS", "256"),
        ("CUDA_SLICE_32BIT_BELOW", str((1 << 31) + 1)),
    ]:
        r = _python(
            """
            import numpy as np, dmlnumba
            try:
                dmlnumba.argwhere(np.ones(3))
            except ValueError as e:
                print(e)
        """,
            {f"DMLNUMBA_{var}": value},
        )
        assert r.returncode == 0, r.stderr
        want = f"argwhere(): environment variable DMLNUMBA_{var}='{value}'"
        assert r.stdout.startswith(want), r.stdout


# ---------------------------------------------------------------- 5. CUDA unavailable


def test_device_digits_are_ascii():
    with pytest.raises(ValueError, match=r"unknown device 'cuda:٣'"):
        dmlnumba.argwhere(X, device="cuda:٣")


@pytest.mark.skipif(CUDA, reason="needs a machine where CUDA is unavailable")
def test_cuda_unavailable_is_one_short_error():
    with pytest.raises(ValueError) as e:
        dmlnumba.slice1(X, (0, 0), (3, 4), (1, 1), device="cuda")
    msg = str(e.value)
    assert msg.startswith("slice1(): ")
    assert "numba-cuda" in msg or "NUMBA_ENABLE_CUDASIM" in msg
    assert len(e.traceback) < 8


def test_without_numba_cuda_the_error_says_what_to_install():
    r = _python("""
        import importlib.util, sys
        real = importlib.util.find_spec
        importlib.util.find_spec = lambda n, *a: None if n == "numba_cuda" else real(n, *a)
        import numpy as np, dmlnumba
        try:
            dmlnumba.argwhere(np.ones(3), device="cuda")
        except ValueError as e:
            print(e)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("argwhere(): the CUDA target needs numba-cuda")
    assert "pip install 'dmlnumba[cuda]'" in r.stdout


@pytest.mark.skipif(not CUDA or SIM, reason="needs a real CUDA GPU")
def test_nonexistent_cuda_device_index():
    with pytest.raises(ValueError, match=r"device 'cuda:99' does not exist"):
        dmlnumba.argwhere(X, device="cuda:99")


@pytest.mark.skipif(not CUDA, reason="needs CUDA (a GPU or the simulator)")
def test_cuda_size_limit_is_checked_before_allocating():
    # Was: a MemoryError from allocating 2**40 rows, before the documented ValueError.
    from dmlnumba.gpu import target as target_cuda

    huge = np.broadcast_to(np.zeros(1, np.uint8), (1 << 20, 1 << 20))  # no memory behind it
    with pytest.raises(ValueError, match=r"counts at most"):
        dmlnumba.nonzero_coordinates(huge, dtype=np.uint64, device="cuda")
    assert target_cuda.MAX_ELEMENTS == (1 << 40) - 1


@pytest.mark.skipif(not CUDA, reason="needs CUDA (a GPU or the simulator)")
def test_cuda_parameter_blocks_travel_by_value():
    """A plan's parameter block is a tuple of ints bound into its launcher as kernel
    parameters: nothing is uploaded for it, at any call (an upload at call time was
    a ``cuMemAlloc`` that a CUDA graph capture refuses, and a cached device copy an
    address that a replay would read after it was freed)."""
    from dmlnumba.gpu import plans, runners
    from dmlnumba.params import NONZERO_CUDA, SLICE_CUDA, SLICE_GATHER_CUDA, size

    x = runners._new_view((4, 5), np.dtype(np.float32))
    count = runners._new_view((1,), np.dtype(np.uint32))
    coords = runners._new_view((20, 2), np.dtype(np.uint32))
    p = plans.NonzeroPlan(x, 2, count, coords, 20)
    assert len(p.params) == size(NONZERO_CUDA)
    assert all(type(v) is int for v in p.params)
    assert p.params[NONZERO_CUDA.total] == 20 and p.params[NONZERO_CUDA.width] == 2
    kinds = set()
    for dtype in (np.float32, np.uint8):  # the gather kernel, the tiles
        y = runners._new_view((4, 5), np.dtype(dtype))
        s = plans.SlicePlan(y, (0, 4), (1, -1), runners._new_view((4, 5), y.dtype))
        for spec in s.specs:
            if spec is not None and spec[1] == "gather":
                kinds.add("gather")
                _, params = plans._gather_grid(spec[3], spec[2], 4)
                assert len(params) == size(SLICE_GATHER_CUDA)
                assert all(type(v) is int for v in params)
            elif spec is not None:
                kinds.add("tiles")
                for slots in (0, 3 * 132 * spec[2][1]):
                    _, params = plans._slice_tiles(spec[3], spec[2][1], slots)
                    assert len(params) == size(SLICE_CUDA)
                    assert all(type(v) is int for v in params)
    assert kinds == {"gather", "tiles"}


@pytest.mark.skipif(not CUDA, reason="needs CUDA (a GPU or the simulator)")
@pytest.mark.parametrize(
    "shape, inner",
    [((2048, 1024), 13), ((512, 512), 7), ((8, 64, 124), 85), ((4096,), 4096), ((1,), 1 << 28)],
)
def test_cuda_slice_tiles_fill_whole_waves(shape, inner):
    """Given the tiles one wave of resident blocks runs (``slots``), slice1's tiles are
    spread evenly over whole waves (as many as the default tiling fills, at least one,
    full but for the rounding of rows to whole tiles) where that fills the waves'
    slots better than the default tiling; every row in exactly one tile."""
    from dmlnumba.gpu import plans
    from dmlnumba.params import SLICE_CUDA as P

    full = shape + (inner,)
    strides = tuple(int(np.prod(full[i + 1 :])) for i in range(len(full)))
    _, _, (tx, ty), geometry = plans._slice_spec(32, full, strides, strides, 0, 0)
    _, base = plans._slice_tiles(geometry, ty, 0)
    rows, nseg = base[P.rows], base[P.nseg]
    spread = 0
    for slots in (8 * 132 * ty, 3 * 132 * ty, 4 * 132 * ty, 64 * ty):
        blocks, p = plans._slice_tiles(geometry, ty, slots)
        nrows, ntiles = p[P.nrows], p[P.ntiles]
        assert -(-rows // nrows) * nseg == ntiles and blocks == -(-ntiles // ty)
        fill = plans._wave_fill(ntiles, slots)
        assert fill >= plans._wave_fill(base[P.ntiles], slots)
        if ntiles != base[P.ntiles]:  # spread: within whole waves, nearly full
            spread += 1
            waves = max(1, base[P.ntiles] // slots)
            groups = max(1, waves * slots // nseg)  # the row groups of those waves
            used = ntiles // nseg
            assert used <= groups and used > groups * rows / (rows + groups)
    assert spread or rows < 4096  # the short-row windows are spread at some slots


def test_cuda_kernels_compile_and_load_once_when_threads_race(monkeypatch):
    """Threads launching a kernel for the first time at once compile it once and load
    its module once.  numba-cuda's module loading is not thread-safe: two threads in
    ``get_cufunc`` at once (the first launches of a threaded dask graph of CuPy
    chunks) raised "key already in dictionary" under ``CUDA_LAUNCH_BLOCKING=1`` on
    the H100, and without it gave an illegal address or wrong coordinates.  The
    compile and the load are replaced by slow stand-ins that count how many threads
    are inside at once (no GPU needed)."""
    import threading
    import time
    import types

    from dmlnumba.caches import Bounded
    from dmlnumba.gpu import launch

    inside, most, calls = [0], [0], []
    guard = threading.Lock()

    def slow(result):
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            calls.append(result)
        time.sleep(0.05)
        with guard:
            inside[0] -= 1
        return result

    k = types.SimpleNamespace(
        library=types.SimpleNamespace(
            get_cufunc=lambda: slow(types.SimpleNamespace(kernel="handle"))
        )
    )
    monkeypatch.setattr(launch, "_kernels", Bounded())
    monkeypatch.setattr(launch, "_functions", Bounded())
    monkeypatch.setattr(launch, "_compile", lambda *a: slow(k))
    barrier = threading.Barrier(8)
    got = []

    def first_launch():
        barrier.wait()
        kern = launch.kernel("slice", 32)
        got.append((kern, launch.function(kern, 7)))

    threads = [threading.Thread(target=first_launch) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 2 and most[0] == 1  # one compile, one load, never two at once
    assert got == [(k, "handle")] * 8


# ---------------------------------------------------------------- 6. argument containers


@pytest.mark.parametrize(
    "offsets", [{0: 0, 1: 0}, {0, 1}, frozenset({0}), (i for i in (0, 0)), iter([0, 0])]
)
def test_unordered_containers_are_refused(offsets):
    out = np.full((3, 4), 5.0, np.float32)
    with pytest.raises(TypeError, match=r"slice1\(\): offsets must be a sequence of 2 integers"):
        dmlnumba.slice1(X, offsets, (3, 4), (1, 1), out=out)
    assert (out == 5).all()


@pytest.mark.parametrize("seq", [[0, 1], (0, 1), range(2), np.array([0, 1], np.int8)])
def test_ordered_sequences_are_accepted(seq):
    np.testing.assert_array_equal(dmlnumba.slice1(X, seq, (2, 3), (1, 1)), X[0:2, 1:4])


def test_argwhere_errors_name_argwhere():
    with pytest.raises(ValueError, match=r"^argwhere\(\): input has 9 dimensions"):
        dmlnumba.argwhere(np.zeros((1,) * 9))
    with pytest.raises(TypeError, match=r"^argwhere\(\): input dtype complex64"):
        dmlnumba.argwhere(np.zeros(3, np.complex64))


def test_window_with_a_huge_shape_is_a_value_error():
    with pytest.raises(ValueError, match=r"does not fit in int64"):
        dmlnumba.window((2**70,), slice(None))
    assert dmlnumba.window((2**62,), slice(None, None, -1)) == ((0,), (2**62,), (-1,), (2**62,))


# ---------------------------------------------------------------- 7. first use


def test_slow_first_call_says_it_is_compiling(caplog, monkeypatch):
    import logging
    import time

    from dmlnumba.cpu import compiling

    monkeypatch.setattr(compiling, "NOTICE_AFTER", 0.05)
    calls = []

    def slow(*a):
        time.sleep(0.3)
        calls.append(a)
        return 7

    with caplog.at_level(logging.WARNING, logger="dmlnumba"):
        assert compiling.run(slow, ("test-kernel", 1), 1, 2) == 7
        assert compiling.run(slow, ("test-kernel", 1), 3, 4) == 7
    notes = [r for r in caplog.records if "test-kernel/1" in r.getMessage()]
    assert len(notes) == 1 and "python -m dmlnumba compile" in notes[0].getMessage()
    assert calls == [(1, 2), (3, 4)]
