"""The CUDA target's edges: CUDA or numba-cuda unavailable, device indexes, the size
limit checked before allocating, parameter blocks passed by value, slice tiles, and
kernels compiled and loaded once when threads race."""

import numpy as np
import pytest
from interpreter import run_python

import dmlnumba
from dmlnumba import keys
from dmlnumba.caches import Bounded

from devices import CUDA, SIM, needs_real_gpu

pytestmark = pytest.mark.boundscheck  # CI runs these again with NUMBA_BOUNDSCHECK=1

X = np.arange(1, 13, dtype=np.float32).reshape(3, 4)


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
    r = run_python("""
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
    from dmlnumba.gpu import geometry as geo
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
                _, params = geo.gather_grid(spec[3], spec[2], 4)
                assert len(params) == size(SLICE_GATHER_CUDA)
                assert all(type(v) is int for v in params)
            elif spec is not None:
                kinds.add("tiles")
                for slots in (0, 3 * 132 * spec[2][1]):
                    _, params = geo.slice_tiles(spec[3], spec[2][1], slots)
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
    from dmlnumba.gpu import geometry as geo
    from dmlnumba.params import SLICE_CUDA as P

    full = shape + (inner,)
    strides = tuple(int(np.prod(full[i + 1 :])) for i in range(len(full)))
    _, _, (tx, ty), geometry = geo.slice_spec(32, full, strides, strides, 0, 0)
    _, base = geo.slice_tiles(geometry, ty, 0)
    rows, nseg = base[P.rows], base[P.nseg]
    spread = 0
    for slots in (8 * 132 * ty, 3 * 132 * ty, 4 * 132 * ty, 64 * ty):
        blocks, p = geo.slice_tiles(geometry, ty, slots)
        nrows, ntiles = p[P.nrows], p[P.ntiles]
        assert -(-rows // nrows) * nseg == ntiles and blocks == -(-ntiles // ty)
        fill = geo.wave_fill(ntiles, slots)
        assert fill >= geo.wave_fill(base[P.ntiles], slots)
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

    k = types.SimpleNamespace()
    monkeypatch.setattr(launch, "function_handle", lambda kern: slow("handle"))
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


def test_device_strings_name_places_as_the_checks_read_them():
    """The key's reading of ``device`` (:func:`dmlnumba.layouts.place`) is the checks':
    the same strings name the CPU, a CUDA array's own GPU or GPU N, and every other
    value (a string that is no device, a non-ASCII digit, a str subclass, an object
    that says it equals "cpu") names nothing, so that its call takes the full path,
    which says what is wrong."""
    from dmlnumba.dispatch import parse_device
    from dmlnumba.layouts import place

    class Str(str):
        pass

    for s in ("cpu", " CPU", "cuda", "Cuda", "cuda:0", "cuda:12 ", "cuda:", "cuda:٣", "gpu", ""):
        try:
            want = parse_device(s, "f")
        except ValueError:
            want = False
        else:
            want = "cpu" if want[0] == "cpu" else (-1 if want[1] is None else want[1])
        for _ in range(2):  # (the second from the kept answers)
            assert place(s) == want and type(place(s)) is type(want)

    class Cpu:
        def __eq__(self, other):
            return True

        __hash__ = object.__hash__

    for odd in (Str("cpu"), Cpu(), 0, b"cpu"):
        assert place(odd) is False
    x = np.arange(6.0)
    dmlnumba.slice1(x, (0,), (3,), (1,))
    dmlnumba.nonzero_coordinates(x)
    with pytest.raises(TypeError, match=r"^slice1\(\): device must be a string"):
        dmlnumba.slice1(x, (0,), (3,), (1,), device=Cpu())
    with pytest.raises(TypeError, match=r"^nonzero_coordinates\(\): device must be a string"):
        dmlnumba.nonzero_coordinates(x, device=Cpu())


@pytest.mark.skipif(not CUDA, reason="needs CUDA (a GPU or the simulator)")
def test_a_device_naming_where_a_cuda_array_is_keys_the_call_without_it(monkeypatch):
    """``device="cuda"`` (or ``"cuda:N"`` of the array's own GPU) for a CUDA array is the
    call without it: the same key, so a repeat takes the runner of no device (every
    such call took the full path).  Another GPU's number, ``"cpu"``, and a NumPy input's
    ``"cuda:N"`` (a runner of its own, per N) key differently.  On a real GPU, the
    calls themselves: one full call per operator and library, right results (the
    simulator: the NumPy input's keys; its arrays have none)."""
    from conftest import count_full_calls
    from numba import cuda

    from devices import to_host

    h = np.arange(24, dtype=np.float32).reshape(4, 6)
    h[0] = 0
    w = ((1, 0), (3, 6), (-1, 2))
    arrays = []  # (the simulator's arrays have no key: its calls keep no runners)
    if not SIM:
        arrays.append(cuda.to_device(h))
        torch = pytest.importorskip("torch")
        arrays.append(torch.from_numpy(h).cuda())
        try:
            import cupy
        except ImportError:
            pass
        else:
            arrays.append(cupy.asarray(h))

    def window_key(x, device):
        return keys.window("slice1", x, *w, None, None, device, None)[0]

    def nonzero_key(x, device):
        return keys.nonzero("nonzero_coordinates", x, None, np.uint32, None, device, None)[0]

    for x in arrays:
        for key in (window_key, nonzero_key):
            plain = key(x, None)
            assert plain is not None
            for d in ("cuda", "cuda:0", " CUDA:0"):
                assert key(x, d) == plain
            for d in ("cuda:1", "cpu"):
                assert key(x, d) is None
    dmlnumba.slice1(h, *w, device="cuda")  # (loads the CUDA target: "cuda" asks its device)
    for key in (window_key, nonzero_key):
        assert key(h, "cuda:0") not in (None, key(h, None), key(h, "cuda"), key(h, "cuda:1"))
        assert key(h, "cuda:0") == key(h, "cuda:0")
    if SIM:
        return
    full = count_full_calls(monkeypatch)
    for x in arrays:
        for d in (None, "cuda", "cuda:0", "cuda", "cuda:0"):
            got = dmlnumba.slice1(x, *w, device=d)
            assert type(got) is type(x)
            np.testing.assert_array_equal(to_host(got), h[3:0:-1, ::2])
            count, coords = dmlnumba.nonzero_coordinates(x, device=d)
            assert type(coords) is type(x) and int(to_host(count)[0]) == 18
            np.testing.assert_array_equal(to_host(coords)[:18], np.argwhere(h))
    assert len(full) == 2 * len(arrays)  # each operator's first call of each library
    for _ in range(2):
        got = dmlnumba.slice1(h, *w, device="cuda:0")
        np.testing.assert_array_equal(to_host(got), h[3:0:-1, ::2])
        count, coords = dmlnumba.nonzero_coordinates(h, device="cuda:0")
        np.testing.assert_array_equal(to_host(coords)[:18], np.argwhere(h))
    assert len(full) == 2 * len(arrays) + 2


@needs_real_gpu
def test_staged_inputs_are_given_back_to_the_pool(monkeypatch):
    """A NumPy input sent to the GPU is staged in memory of the device's pool, given
    back after the launch on every path (the runner, the general path), and when the
    call stops between staging and the launch (an interrupt): the pool's memory in
    use is what it was."""
    import gc

    from cuda.bindings import driver
    from numba import cuda

    from dmlnumba.gpu import memory, plans

    attr = driver.CUmemPool_attribute.CU_MEMPOOL_ATTR_USED_MEM_CURRENT

    def used():
        gc.collect()  # (results of earlier calls: memory of the same pool)
        cuda.synchronize()
        err, v = driver.cuMemPoolGetAttribute(memory.pool(0).handle, attr)
        assert not err
        return int(v)

    stop = [False]
    real = plans.NonzeroPlan.launch

    def launch(self, *a, **k):
        if stop[0]:
            raise KeyboardInterrupt
        return real(self, *a, **k)

    monkeypatch.setattr(plans.NonzeroPlan, "launch", launch)
    monkeypatch.setattr(keys, "runners", Bounded())  # the runner binds the patched launch
    h = np.arange(4096, dtype=np.float32) % 3
    want = np.argwhere(h)
    w = ((1,), (4000,), (-2,))
    for _ in range(2):  # the full path, then the runner each call keeps
        assert int(dmlnumba.nonzero_coordinates(h, device="cuda")[0].copy_to_host()[0]) == len(want)
        np.testing.assert_array_equal(
            dmlnumba.slice1(h, *w, device="cuda").copy_to_host(), h[4000:0:-2]
        )
    before = used()
    for stream in (None, 0):  # the runner; a stream: the general path
        for _ in range(20):
            count, coords = dmlnumba.nonzero_coordinates(h, device="cuda", stream=stream)
            np.testing.assert_array_equal(coords.copy_to_host()[: len(want)], want)
            dmlnumba.slice1(h, *w, device="cuda", stream=stream)
        stop[0] = True
        with pytest.raises(KeyboardInterrupt):
            dmlnumba.nonzero_coordinates(h, device="cuda", stream=stream)
        stop[0] = False
        del count, coords
        assert used() == before


def test_the_streams_a_key_reads():
    """A key holds a ``stream=`` only as an int or a stream of PyTorch's or CuPy's own
    classes (:func:`dmlnumba.layouts.stream_handle`), and only for a PyTorch CUDA
    tensor or a CuPy array: any other call with a stream takes the full path, which
    says what is wrong (a CPU call) or runs it (a NumPy input sent to a GPU)."""
    from dmlnumba.layouts import stream_handle

    class Int(int):
        pass

    assert stream_handle(5) == 5 and stream_handle(0) == 0
    for odd in (True, Int(5), np.int64(5), 5.0, "0", object(), None):
        assert stream_handle(odd) is None
    x = np.arange(6.0)
    w = ((0,), (3,), (1,))
    inputs = [x]
    torch = pytest.importorskip("torch")
    inputs.append(torch.from_numpy(x))
    for a in inputs:
        for device in (None, "cpu", "cuda"):
            assert keys.window("slice1", a, *w, None, None, device, 0)[0] is None
            nz = keys.nonzero("nonzero_coordinates", a, None, np.uint32, None, device, 0)
            assert nz[0] is None
        with pytest.raises(ValueError, match=r"^slice1\(\): stream= applies to CUDA calls only"):
            dmlnumba.slice1(a, *w, stream=0)
