"""nonzero_coordinates and argwhere against NumPy."""

import contextlib

import numpy as np
import pytest
from conftest import count_full_calls, tiny_blocks
from hypothesis import given
from hypothesis import strategies as st

import dmlnumba
from dmlnumba.validation import effective_rank

from devices import (
    DEVICES,
    SIM,
    device_view,
    needs_real_gpu,
    record_paths,
    skip_on_cudasim,
    to_device,
    to_host,
)
from strategies import NONZERO_DTYPES, arrays, check_written, fill, odd_outs

pytestmark = pytest.mark.boundscheck  # CI runs these again with NUMBA_BOUNDSCHECK=1

SPEC_INPUT = np.array([[1.0, 0.0, 0.0, 2.0], [-0.0, 3.5, 0.0, -5.2]], np.float32).reshape(
    1, 1, 2, 4
)


@pytest.mark.parametrize("device", DEVICES)
def test_spec_example(device):
    count, coords = dmlnumba.nonzero_coordinates(to_device(SPEC_INPUT, device), 3, device=device)
    count, coords = to_host(count), to_host(coords)
    assert count.shape == (1,) and count.dtype == np.uint32 and count[0] == 4
    assert coords.shape == (8, 3) and coords.dtype == np.uint32
    np.testing.assert_array_equal(coords[:4], [[0, 0, 0], [0, 0, 3], [0, 1, 1], [0, 1, 3]])


@pytest.mark.parametrize("device", DEVICES)
def test_spec_ordering_example(device):
    x = np.zeros((2, 6), np.int8)
    x[1, 0] = x[1, 2] = x[0, 5] = 1
    count, coords = dmlnumba.nonzero_coordinates(to_device(x, device), device=device)
    n = int(to_host(count)[0])
    np.testing.assert_array_equal(to_host(coords)[:n], [[0, 5], [1, 0], [1, 2]])


def _expected(x, width):
    want = np.argwhere(x)
    return want[:, x.ndim - width :]


def _assert_matches_argwhere(x, count, coords):
    """A (device) count and coordinates from nonzero_coordinates, full width,
    against np.argwhere of the host input ``x``: the count, then its rows."""
    want = np.argwhere(x)
    n = int(to_host(count)[0])
    assert n == len(want)
    np.testing.assert_array_equal(to_host(coords)[:n], want)


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_random_inputs_match_numpy(device, data):
    x = data.draw(arrays(dtypes=NONZERO_DTYPES, allow_zero=True))
    lo = effective_rank(x.shape)
    width = data.draw(st.integers(lo, x.ndim))
    dtype = data.draw(st.sampled_from([np.uint32, np.uint64, np.int64]))
    ctx = tiny_blocks() if data.draw(st.booleans()) else contextlib.nullcontext()
    with ctx:
        count, coords = dmlnumba.nonzero_coordinates(
            to_device(x, device), width, dtype=dtype, device=device
        )
    count, coords = to_host(count), to_host(coords)
    want = _expected(x, width)
    assert count.shape == (1,) and count.dtype == dtype
    assert coords.shape == (x.size, width) and coords.dtype == dtype
    assert int(count[0]) == len(want)
    np.testing.assert_array_equal(coords[: len(want)], want)


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_outputs_with_odd_strides_and_padded_shapes(device, data):
    x = data.draw(arrays(dtypes=NONZERO_DTYPES, max_dims=4))
    width = data.draw(st.integers(effective_rank(x.shape), x.ndim))
    dtype = np.dtype(data.draw(st.sampled_from(["uint32", "uint64", "int64"])))
    extra = data.draw(st.integers(0, 3))
    lead = data.draw(st.sampled_from([(), (1, 1), (1, 1, 1)]))
    kind = data.draw(st.sampled_from(["C", "F", "strided", "permuted"]))
    shape = lead + (x.size + extra, width)
    cbuf, cview = data.draw(odd_outs(shape, dtype, kind))
    count_shape = data.draw(st.sampled_from([(1,), (1, 1, 1, 1), ()]))
    nbuf, nview = data.draw(odd_outs(count_shape, dtype, "C"))
    cbefore, nbefore = cbuf.copy(), nbuf.copy()
    want = _expected(x, width)
    dc, dn = to_device(cbuf, device), to_device(nbuf, device)
    oc = cview(cbuf) if device == "cpu" else device_view(dc, cview, cbuf)
    on = nview(nbuf) if device == "cpu" else device_view(dn, nview, nbuf)
    ctx = tiny_blocks() if data.draw(st.booleans()) else contextlib.nullcontext()
    with ctx:
        count, coords = dmlnumba.nonzero_coordinates(
            to_device(x, device),
            width,
            dtype=dtype,
            out_count=on,
            out_coordinates=oc,
            device=device,
        )
    assert count is on and coords is oc
    n = len(want)
    got_n = to_host(dn).reshape(-1)[0]
    assert int(got_n) == n
    check_written(nbefore, to_host(dn), nview, np.array(n, dtype))
    # Only the first `count` rows are defined; rows past them may hold anything,
    # but nothing outside the coordinates view may change.
    after = to_host(dc)
    rows = cview(after).reshape(shape[-2:])
    np.testing.assert_array_equal(rows[:n], want)
    mask = np.zeros(cbuf.shape, bool)
    cview(mask)[...] = True
    np.testing.assert_array_equal(after[~mask], cbefore[~mask])


@pytest.mark.parametrize("device", DEVICES)
@given(x=arrays(dtypes=NONZERO_DTYPES, max_dims=6))
def test_argwhere_is_numpy_argwhere(device, x):
    got = to_host(dmlnumba.argwhere(to_device(x, device), device=device))
    want = np.argwhere(x)
    assert got.dtype == np.int64 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@skip_on_cudasim
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("density", [0.0, 0.01, 0.5, 0.99, 1.0])
def test_large_multiblock(device, density):
    rng = np.random.default_rng(7)
    x = fill(rng, np.float32, 3 * 50 * 2000, density).reshape(3, 50, 2000)[:, ::-1, 1::2]
    count, coords = dmlnumba.nonzero_coordinates(to_device(x, device), device=device)
    _assert_matches_argwhere(x, count, coords)


@skip_on_cudasim
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "shape,dtype", [((1 << 21,), np.float32), ((3500, 601), np.int8), ((700, 3001), np.float16)]
)
@pytest.mark.parametrize("density", [0.01, 0.5, 0.99])
@pytest.mark.parametrize("reverse", [False, True])
def test_large_inputs_take_the_unrolled_paths(device, shape, dtype, density, reverse, monkeypatch):
    """Inputs big enough that each GPU lane takes many steps (128 here): 16-byte
    loads four at a time (contiguous inputs), or eight element loads at a time and
    single steps (a reversed view), with rows that wrap inside them (601 and 3001
    are not multiples of 32)."""
    from dmlnumba import config

    monkeypatch.setattr(config, "CUDA_NONZERO_TILES", 64)
    rng = np.random.default_rng(11)
    x = fill(rng, dtype, int(np.prod(shape)), density).reshape(shape)
    if reverse:
        x = x[..., ::-1]
    count, coords = dmlnumba.nonzero_coordinates(to_device(x, device), device=device)
    _assert_matches_argwhere(x, count, coords)


@pytest.mark.parametrize("device", DEVICES)
def test_zero_and_special_values(device):
    x = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 5e-324, -5e-324, 1.0], np.float64)
    count, coords = dmlnumba.nonzero_coordinates(to_device(x, device), device=device)
    assert int(to_host(count)[0]) == 6
    np.testing.assert_array_equal(to_host(coords)[:6, 0], [2, 3, 4, 5, 6, 7])


@pytest.mark.parametrize("device", DEVICES)
def test_width_zero_for_all_ones_shape(device):
    x = np.full((1, 1, 1), 3, np.int32)
    count, coords = dmlnumba.nonzero_coordinates(to_device(x, device), 0, device=device)
    assert int(to_host(count)[0]) == 1 and coords.shape == (1, 0)


@pytest.mark.parametrize("device", DEVICES)
def test_size_zero_input(device):
    x = np.zeros((3, 0, 2), np.uint16)
    count, coords = dmlnumba.nonzero_coordinates(to_device(x, device), device=device)
    assert int(to_host(count)[0]) == 0 and coords.shape == (0, 3)


@needs_real_gpu
def test_more_than_2_to_the_31_elements_on_the_gpu():
    """uint8 input of 2**31 + 2**20 + 3 elements, non-zeros also past 2**31: exact
    count and positions (64-bit indexing)."""
    from numba import cuda

    n = (1 << 31) + (1 << 20) + 3
    where = np.array([0, 12345, (1 << 31) - 1, 1 << 31, (1 << 31) + 7, n - 1], np.int64)
    x = cuda.device_array(n, np.uint8)
    from numba.cuda.cudadrv.driver import device_memset

    device_memset(x, 0, n)
    for i in where:
        x[int(i)] = 1 + int(i) % 200
    count, coords = dmlnumba.nonzero_coordinates(x)
    assert int(count.copy_to_host()[0]) == len(where)
    got = coords[: len(where)].copy_to_host()[:, 0]
    np.testing.assert_array_equal(got.astype(np.int64), where)
    # The same through a 2-d view: coordinates (row, column).
    x2 = x.reshape(3, n // 3)
    count, coords = dmlnumba.nonzero_coordinates(x2)
    np.testing.assert_array_equal(
        coords[: len(where)].copy_to_host().astype(np.int64),
        np.stack([where // (n // 3), where % (n // 3)], 1),
    )


@needs_real_gpu
def test_more_than_2_to_the_32_elements_on_the_gpu():
    """A (2, 3, k) uint8 input of more than 2**32 elements: the write pass divides
    element positions in 64 bits there.  Exact count and coordinates (int64, the
    rows bounded by max_count), non-zeros on both sides of 2**32 and at the end."""
    from numba import cuda

    k = (1 << 32) // 6 + 1001
    n = 6 * k
    where = np.array([0, 7, (1 << 32) - 1, 1 << 32, (1 << 32) + 3, n - 1], np.int64)
    h = np.zeros(n, np.uint8)
    h[where] = 1 + where % 200
    x = cuda.to_device(h)
    del h
    count, coords = dmlnumba.nonzero_coordinates(x.reshape(2, 3, k), dtype=np.int64, max_count=16)
    assert int(count.copy_to_host()[0]) == len(where)
    np.testing.assert_array_equal(
        coords[: len(where)].copy_to_host(), np.stack(np.unravel_index(where, (2, 3, k)), 1)
    )


@pytest.mark.skipif("cuda" not in DEVICES, reason="needs CUDA (a GPU or the simulator)")
@pytest.mark.parametrize(
    "where",
    ["launch", pytest.param("scratch", marks=skip_on_cudasim)],  # (no buffer there)
)
def test_cuda_failed_launch_leaves_later_calls_exact(monkeypatch, where):
    """A nonzero call interrupted at its launch, or while its look-back buffer is
    made, leaves nothing behind that the calls after it on the same stream depend on
    (each call's buffer is its own, zeroed on the stream before its launch)."""
    from dmlnumba.caches import Bounded
    from dmlnumba.gpu import launch, plans
    from dmlnumba.gpu import target as target_cuda

    rng = np.random.default_rng(3)
    x = fill(rng, np.float32, 5000, 0.5).reshape(50, 100)
    want = np.argwhere(x)
    xd = to_device(x, "cuda")

    def fail(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(plans, "_plans", Bounded())
    monkeypatch.setattr(config_of(), "CUDA_NONZERO_TILES", 4)  # several tiles: a buffer
    if where == "launch":
        monkeypatch.setattr(launch, "launcher", lambda *args, **kwargs: fail)
    else:
        monkeypatch.setattr(target_cuda, "scratch", lambda *args: (fail, fail))
    with pytest.raises(KeyboardInterrupt):
        dmlnumba.nonzero_coordinates(xd, device="cuda")
    monkeypatch.undo()
    for _ in range(3):
        count, coords = dmlnumba.nonzero_coordinates(xd, device="cuda")
        n = int(to_host(count)[0])
        assert n == len(want)
        np.testing.assert_array_equal(to_host(coords)[:n], want)


def config_of():
    from dmlnumba import config

    return config


@pytest.mark.parametrize("device", DEVICES)
def test_numpy_input_with_explicit_device(device):
    """NumPy inputs with device="cuda" are copied there first, whatever their strides
    (a reversed size-1 dimension included)."""
    for x in (
        np.array([5.0, 0.0, -1.0])[::-1],
        np.array([5.0])[::-1],
        np.arange(12, dtype=np.int16).reshape(3, 4)[::-1, ::2],
    ):
        count, coords = dmlnumba.nonzero_coordinates(x, device=device)
        n = int(to_host(count)[0])
        np.testing.assert_array_equal(to_host(coords)[:n], np.argwhere(x))
        w = dmlnumba.window(x.shape, (slice(None, None, -1),) * x.ndim)
        np.testing.assert_array_equal(
            to_host(dmlnumba.slice1(x, *w, device=device)), x[(slice(None, None, -1),) * x.ndim]
        )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("small", [False, True])
def test_long_rows(device, small):
    """Rows long enough for the GPU kernel's eight-load steps, with wraps inside and
    between steps, reversed and strided."""
    rng = np.random.default_rng(11)
    base = fill(rng, np.float32, 3 * 701, 0.4).reshape(3, 701)
    for x in (base, base[:, ::-1], base[::-1, 1::3]):
        with tiny_blocks() if small else contextlib.nullcontext():
            count, coords = dmlnumba.nonzero_coordinates(to_device(x, device), device=device)
        _assert_matches_argwhere(x, count, coords)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shift", [0, 1])
def test_contiguous_inputs_read_16_bytes_a_lane(device, dtype, shift, monkeypatch):
    """A C-contiguous input whose first element is 16-byte aligned is counted from
    16-byte loads on the GPU (four in flight, then one at a time, then element by
    element, with a partial vector at the end); one moved by an element (``shift``)
    is not aligned and is read element by element."""
    from dmlnumba import config

    paths = record_paths(monkeypatch, device)
    monkeypatch.setattr(config, "CUDA_THREADS", 32)
    monkeypatch.setattr(config, "CUDA_NONZERO_ITEMS", 72)
    monkeypatch.setattr(config, "CUDA_NONZERO_TILES", 1)  # 72 steps a lane, not fewer
    rng = np.random.default_rng(5)
    n = 32 * 72 + 45  # a full tile, then a partial one
    buf = fill(rng, dtype, n + 1, 0.3)

    def view_of(b):
        return b[shift : shift + n].reshape(-1, 3)

    x = view_of(buf)
    dx = x if device == "cpu" else device_view(to_device(buf, device), view_of, buf)
    count, coords = dmlnumba.nonzero_coordinates(dx, device=device)
    _assert_matches_argwhere(x, count, coords)
    if device == "cuda":  # the last launch argument says 16-byte loads
        assert [(p[0], p[1], p[2][-1]) for p in paths] == [
            ("nonzero", 8 * x.itemsize, 1 if shift == 0 else 0)
        ]


def _default_tiling(monkeypatch):
    """The CUDA nonzero tiling's settings at their defaults (the simulator's run sets
    smaller ones)."""
    from dmlnumba import config

    for name, value in [
        ("CUDA_THREADS", 256),
        ("CUDA_NONZERO_ITEMS", 256),
        ("CUDA_NONZERO_ITEMS_1D", 128),
        ("CUDA_NONZERO_MIN_ITEMS", 16),
        ("CUDA_NONZERO_TILES", 512),
    ]:
        monkeypatch.setattr(config, name, value)


def _tiling(shape):
    """``(items, tiles)`` of the CUDA nonzero plan of a C-contiguous float32 input of
    ``shape`` into 32-bit coordinates (the plan alone: nothing is allocated)."""
    from dmlnumba.gpu import plans, runners

    n = int(np.prod(shape))
    x = runners._new_view(shape, np.dtype(np.float32))
    count = runners._new_view((1,), np.dtype(np.uint32))
    coords = runners._new_view((n, len(shape)), np.dtype(np.uint32))
    p = plans.NonzeroPlan(x, len(shape), count, coords, n)
    return dict(p.values)["items"], p.ntiles


@pytest.mark.skipif("cuda" not in DEVICES, reason="needs CUDA (a GPU or the simulator)")
def test_cuda_one_tile_input_takes_the_steps_it_fills(monkeypatch):
    """An input that fits one tile takes only the 32-element steps it fills, in multiples
    of 4 (1000 elements and 256 threads: 4 steps a warp, not CUDA_NONZERO_MIN_ITEMS'
    16); an input of more than one tile keeps that floor.  The plan alone, at the
    default settings (the simulator's run sets smaller ones)."""
    _default_tiling(monkeypatch)

    def plan(n):
        return _tiling((n,))

    threads, floor = 256, 16
    assert plan(1) == (4, 1)
    assert plan(1000) == (4, 1)
    assert plan(4 * threads) == (4, 1)
    assert plan(4 * threads + 1) == (8, 1)
    assert plan(floor * threads) == (floor, 1)
    assert plan(floor * threads + 1) == (floor, 2)


@pytest.mark.skipif("cuda" not in DEVICES, reason="needs CUDA (a GPU or the simulator)")
def test_cuda_one_dimensional_inputs_take_smaller_tiles(monkeypatch):
    """A 1-d input that CUDA_NONZERO_ITEMS steps a warp would cut into more than
    CUDA_NONZERO_TILES tiles and at most 8 times as many takes at most
    CUDA_NONZERO_ITEMS_1D steps; a multi-dimensional one, and a 1-d one of one wave or
    of more tiles, CUDA_NONZERO_ITEMS.  The plan alone, at the default settings."""
    from dmlnumba import config

    _default_tiling(monkeypatch)
    plan = _tiling
    wave = 512 * 256 * 256  # 512 tiles of 256 steps
    for n in (2 * wave, 8 * wave, wave + 256 * 256):
        assert plan((n,)) == (128, -(-n // (256 * 128)))
        assert plan((n // 4096, 64, 64)) == (256, n // (256 * 256))
    for n in (wave, 8 * wave + 256 * 256, 16 * wave):
        assert plan((n,)) == (256, n // (256 * 256))
    monkeypatch.setattr(config, "CUDA_NONZERO_ITEMS_1D", 512)  # never more steps
    assert plan((2 * wave,)) == (256, 2 * wave // (256 * 256))


@pytest.mark.skipif("cuda" not in DEVICES, reason="needs CUDA (a GPU or the simulator)")
@pytest.mark.parametrize("threads", [256, 512])
def test_cuda_staged_kernel_only_where_its_expansion_fits(threads, monkeypatch):
    """A staged kernel, whose tiles expand positions in shared memory where they fit 32
    bits, is planned only where every warp's part of the expansion fits (CUDA_THREADS
    up to 256); with more threads such an input takes the unstaged write, transposed
    or not.  The plan alone."""
    from dmlnumba import config
    from dmlnumba.gpu import plans, runners
    from dmlnumba.gpu.views import DeviceView

    monkeypatch.setattr(config, "CUDA_THREADS", threads)

    def variant(x):
        count = runners._new_view((1,), np.dtype(np.uint32))
        coords = runners._new_view((x.size, 2), np.dtype(np.uint32))
        return plans.NonzeroPlan(x, 2, count, coords, x.size).kernel[2]

    x = runners._new_view((64, 4096), np.dtype(np.float32))
    assert variant(x) == (True, 2 if threads == 256 else 0)
    t = DeviceView(None, (64, 4096), (4, 256), np.dtype(np.float32), 0, False)  # a transpose
    got = variant(t)
    assert got[:2] == (True, 2 if threads == 256 else 0) and got[2] > 0


@pytest.mark.skipif("cuda" not in DEVICES, reason="needs CUDA (a GPU or the simulator)")
@pytest.mark.parametrize("below", [1 << 31, 0])
@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_cuda_write_pass_variants(dtype, below, monkeypatch, small_blocks):
    """The CUDA kernel's write-pass variants give the same rows: divisions in 32 bits
    (inputs under CUDA_NONZERO_32BIT_BELOW elements) or 64, and, for coordinates of
    several columns in contiguous rows (2 to 8 of them), tiles that expand their
    positions (32-bit positions; but 32-bit coordinates of 6 to 8 columns,
    policy.RING_FROM) or are staged in a ring of shared memory (64-bit positions,
    32-bit coordinates): dense ones, whose rows fill it in a word or two,
    and middling ones; and sparse tiles (at most 1 in 16) written 32 words at once,
    in one call, with words of several non-zeros among the sparse ones; a caller's
    rows with strided columns take the unstaged write.  Rows of one column with 32-bit
    positions take the width-1 kernel (expanded 32 words at a time), also into a
    caller's rows two items apart."""
    from dmlnumba import config
    from dmlnumba.gpu import launch

    monkeypatch.setattr(config, "CUDA_NONZERO_32BIT_BELOW", below)
    variants = []
    real = launch.kernel

    def kernel(name, src_bits, out_bits=0, variant=(False, 0)):
        variants.append(variant)
        return real(name, src_bits, out_bits, variant)

    monkeypatch.setattr(launch, "kernel", kernel)
    rng = np.random.default_rng(5)
    shapes = [(9, 70, 5), (300, 2), (3, 4, 5, 6), (3, 2, 3, 2, 3, 5), (2, 3, 2, 3, 2, 3, 5)]
    for shape in shapes + [(2, 3, 2, 3, 2, 3, 2, 5), (1000,)]:
        x = (rng.random(shape) < 0.2).astype(np.float32)
        flat = x.reshape(-1)
        third = x.size // 3
        flat[:third] = 1.0  # a dense third, a sparse third, the rest at 20%
        flat[third : 2 * third] = 0.0
        flat[third : 2 * third : 53] = 2.0
        for k in range(third + 70, 2 * third - 5, 160):  # words of several non-zeros
            flat[k : k + 5] = 3.0
        variants.clear()
        count, coords = dmlnumba.nonzero_coordinates(to_device(x, "cuda"), dtype=dtype)
        _assert_matches_argwhere(x, count, coords)
        # A kernel of the width's own: expanding (32-bit positions, either coordinate
        # width) or staging in a ring (32-bit coordinates).
        staged = x.ndim > 1 and (dtype == np.uint32 or below > 0)
        one = 1 if below > 0 and x.ndim == 1 else 0  # the width-1 kernel
        assert variants == [(below > 0, x.ndim if staged else one)]
        # A caller's rows, their columns two items apart: unstaged where there are
        # several columns; one column (rows two items apart) keeps its kernel.
        buf = np.zeros((x.size, 2 * x.ndim), dtype)
        out = device_view(to_device(buf, "cuda"), lambda a: a[:, ::2], buf)
        variants.clear()
        count, coords = dmlnumba.nonzero_coordinates(
            to_device(x, "cuda"), dtype=dtype, out_coordinates=out
        )
        _assert_matches_argwhere(x, count, coords)
        assert variants == [(below > 0, one)]


@pytest.mark.skipif("cuda" not in DEVICES, reason="needs CUDA (a GPU or the simulator)")
@pytest.mark.parametrize(
    "dtype", [np.uint8, np.float32, np.float64] + ([] if SIM else [np.float16, np.int64])
)
def test_cuda_transposed_inputs_read_rows_together(dtype, monkeypatch):
    """Inputs whose next-to-last dimension is contiguous (transposed matrices, also
    batched and with the last dimension flipped) are counted U rows at a time
    (count_transposed: whole tiles of U rows, U = 8 for 1- to 4-byte items, 4 for
    8-byte ones at these sizes), with every write variant and a row limit; a layout
    that does not qualify (the contiguous dimension flipped, a last dimension not a
    multiple of 32, too few rows) takes the strided count.  Every result against
    NumPy, at densities 0, 1 and in between."""
    from dmlnumba.caches import Bounded
    from dmlnumba.gpu import launch, plans

    variants = []
    real = launch.kernel

    def kernel(name, src_bits, out_bits=0, variant=(False, 0)):
        variants.append(variant)
        return real(name, src_bits, out_bits, variant)

    monkeypatch.setattr(launch, "kernel", kernel)
    if SIM:  # simulated blocks of 32 threads: tiles of U rows of 32 columns
        monkeypatch.setattr(dmlnumba.config, "CUDA_THREADS", 32)
    rng = np.random.default_rng(11)
    u = 4 if np.dtype(dtype).itemsize == 8 else 8
    # (n, c, r): after a[0].T, r rows of c columns, strides (1, r)
    n, c, r = (2, 32, 16) if SIM else (3, 256, 96)
    base = rng.random((n, c, r)) * 2 - 1
    cases = [
        (lambda a: a[0].T, u),  # (r, c), strides (1, r)
        (lambda a: a.transpose(0, 2, 1), u),  # batched: (n, r, c)
        (lambda a: a[0].T[:, ::-1], u),  # the last dimension flipped
        (lambda a: a[0].T[::-1], 0),  # the contiguous dimension flipped: strided count
        (lambda a: a[0, : c - 8].T, 0),  # columns not a multiple of 32: strided count
        (lambda a: a[0, :, :3].T, 0),  # 3 rows: strided count
    ]
    for density in (0.0, 0.1, 1.0):
        x = np.where(np.abs(base) < density, base, 0).astype(dtype)
        if density == 1.0:
            x = (np.abs(base) + 1).astype(dtype)
        for make, rows in cases:
            v = make(x)
            dv = device_view(to_device(x, "cuda"), make, x)
            want = np.argwhere(v)
            for out_dtype, max_count in ((np.uint32, None), (np.uint64, 37)):
                variants.clear()
                monkeypatch.setattr(plans, "_plans", Bounded())  # a plan for each call
                count, coords = dmlnumba.nonzero_coordinates(
                    dv, dtype=out_dtype, max_count=max_count
                )
                n = int(to_host(count)[0])
                assert n == len(want)
                m = n if max_count is None else min(n, max_count)
                np.testing.assert_array_equal(to_host(coords)[:m], want[:m])
                got = variants[-1]
                assert (got[2] if len(got) > 2 else 0) == rows, (v.shape, v.strides, got)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("density", [0.0, 0.03, 0.3, 1.0])
@pytest.mark.parametrize("shape", [(50,), (7, 9, 11)])
def test_max_count_bounds_the_rows_and_keeps_the_true_count(device, density, shape, small_blocks):
    """``max_count``: overflow (fewer rows than non-zeros), an exact fit and zero rows;
    the count is always the true count."""
    rng = np.random.default_rng(3)
    x = (rng.random(shape) < density).astype(np.float32) * 2
    ref = np.argwhere(x)
    n = len(ref)
    for m in sorted({0, n // 2, n, n + 3}):
        count, coords = dmlnumba.nonzero_coordinates(to_device(x, device), max_count=m)
        count, coords = to_host(count), to_host(coords)
        assert coords.shape == (min(m, x.size), x.ndim)  # never more rows than elements
        assert int(count[0]) == n
        k = min(n, m)
        np.testing.assert_array_equal(coords[:k], ref[:k])
    # A caller's buffer: only max_count rows are needed, and rows past them stay untouched.
    m = n // 2
    buf = np.full((m + 2, x.ndim), 77, np.uint32)
    out = to_device(buf, device)
    count, coords = dmlnumba.nonzero_coordinates(
        to_device(x, device), max_count=m, out_coordinates=out
    )
    got = to_host(coords)
    assert int(to_host(count)[0]) == n
    np.testing.assert_array_equal(got[:m], ref[:m])
    assert (got[m:] == 77).all()


@given(data=st.data())
def test_cpu_dense_runs_every_width_layout_and_limit(data):
    """The CPU write pass writes runs of 128 or more elements, a quarter or more of
    them non-zero, element by element without a branch (widths 1 to 4 compiled in).
    Such inputs are larger than the fuzzed ones: every width, input layout, output
    layout, density (sparse runs beside dense ones) and ``max_count``.  The rows at
    and past the count (or past ``max_count``) of a caller's buffer stay as they were."""
    ndim = data.draw(st.integers(1, 8))
    shape = [1] * ndim
    size = data.draw(st.integers(129, 3000))
    for d in data.draw(st.permutations(range(ndim))):  # spread the size over the dims
        shape[d] = data.draw(st.integers(1, max(1, size)))
        size //= shape[d]
    shape = tuple(shape)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    # Stretches of their own density: a dense run after a sparse one and the reverse
    # (the write pass guesses a run's density from the last one's).
    densities = data.draw(
        st.lists(st.sampled_from([0.0, 0.05, 0.3, 0.6, 0.97, 1.0]), min_size=1, max_size=4)
    )
    x = np.empty(shape, np.float32)
    for part, density in zip(np.array_split(x.reshape(-1), len(densities)), densities):
        part[...] = rng.random(part.size) < density
    if data.draw(st.booleans()):  # a zero run at the end: the last row is not written
        x.reshape(-1)[-data.draw(st.integers(1, 200)) :] = -0.0
    layout = data.draw(st.sampled_from(["C", "reversed", "transposed"]))
    if layout == "reversed":
        x = np.ascontiguousarray(x[::-1])[::-1]
    elif layout == "transposed":
        x = np.ascontiguousarray(x.T).T
    width = data.draw(st.integers(effective_rank(x.shape), x.ndim))
    dtype = np.dtype(data.draw(st.sampled_from(["uint32", "uint64"])))
    want = _expected(x, width)
    n = len(want)
    max_count = data.draw(st.sampled_from([None, 0, n // 3, n, n + 5]))
    rows = x.size if max_count is None else max_count
    kind = data.draw(st.sampled_from(["C", "F", "strided"]))
    buf, view = data.draw(odd_outs((rows + 2, width), dtype, kind))
    before = buf.copy()
    count, coords = dmlnumba.nonzero_coordinates(
        x, width, dtype=dtype, max_count=max_count, out_coordinates=view(buf)
    )
    assert int(count[0]) == n
    k = min(n, rows)
    got = view(buf)
    np.testing.assert_array_equal(got[:k], want[:k])
    np.testing.assert_array_equal(got[k:], view(before)[k:])
    mask = np.zeros(buf.shape, bool)
    view(mask)[...] = True
    np.testing.assert_array_equal(buf[~mask], before[~mask])


@given(data=st.data())
def test_cpu_one_column_positions_every_density_mix(data):
    """A C-contiguous input of effective rank 1 (one column) takes the CPU's positions
    pass: dense from the start (a branchless loop ending on the last non-zero), or
    sparse (64 elements a mask at a time: empty groups skipped, a few set bits written
    one by one, denser groups by the branchless loop).  Stretches of their own density
    put dense groups after sparse ones and the reverse, zero runs at the end, short
    tail groups; -0.0 is zero, NaN payloads and infinities are not.  Rows at and past
    the count of a caller's buffer stay as they were."""
    dtype = np.dtype(data.draw(st.sampled_from(NONZERO_DTYPES)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    # Stretches of their own density, then a run of zeros (-0.0 for floats).
    parts = data.draw(
        st.lists(
            st.tuples(st.integers(1, 300), st.sampled_from([0.0, 0.01, 0.1, 0.3, 0.6, 1.0])),
            max_size=3,
        )
    )
    parts.append((data.draw(st.integers(0, 70)), 0.0))
    x = np.concatenate([fill(rng, dtype, k, d) for k, d in parts]).astype(dtype)
    n = x.size
    x = x.reshape(data.draw(st.sampled_from([(n,), (1, n), (1, 1, n)])))
    want = np.flatnonzero(x)
    count, coords = dmlnumba.nonzero_coordinates(x, 1)
    assert int(count[0]) == len(want)
    np.testing.assert_array_equal(coords[: len(want), 0], want)
    buf = np.full((n + 3, 1), 77, np.uint64)
    count, coords = dmlnumba.nonzero_coordinates(x, 1, dtype=np.uint64, out_coordinates=buf)
    assert coords is buf and int(count[0]) == len(want)
    np.testing.assert_array_equal(buf[: len(want), 0], want)
    assert (buf[len(want) :] == 77).all()


def _pattern(spec):
    """A float32 1-d input from ``spec``: (length, every k-th element non-zero) pairs
    (k = 0: zeros, alternately +0.0 and -0.0)."""
    parts = []
    for length, k in spec:
        a = np.zeros(length, np.float32)
        a[1::2] = -0.0
        if k:
            a[::k] = np.float32("nan") if k == 3 else 2.5
        parts.append(a)
    return np.concatenate(parts)


@pytest.mark.parametrize(
    "spec",
    [
        [(64, 0), (40, 1), (20, 0)],  # sparse start, a dense group ending in zeros
        [(10, 20), (60, 0), (64, 2), (3, 0)],  # sparse start, dense group, short zero tail
        [(200, 1), (500, 0)],  # dense start, long zero tail
        [(64, 1), (300, 50), (36, 1)],  # dense start, sparse middle
        [(63, 0), (1, 1)],
        [(64, 0), (1, 1)],
        [(65, 3)],
        [(128, 0)],
        [(1000, 100)],
        [(1000, 3)],
    ],
)
def test_cpu_one_column_positions_patterns(spec):
    """The CPU positions pass on patterns that each way of it meets (see
    test_cpu_one_column_positions_every_density_mix); rows past the count stay
    as they were."""
    x = _pattern(spec)
    want = np.flatnonzero(x)
    buf = np.full((x.size + 2, 1), 77, np.uint32)
    count, _ = dmlnumba.nonzero_coordinates(x, out_coordinates=buf)
    assert int(count[0]) == len(want)
    np.testing.assert_array_equal(buf[: len(want), 0], want)
    assert (buf[len(want) :] == 77).all()


def test_max_count_argument_errors():
    x = np.ones(4, np.float32)
    for bad, exc in [
        (-1, ValueError),
        (True, TypeError),
        (1.5, TypeError),
        ("2", TypeError),
        (2**32, ValueError),
    ]:
        with pytest.raises(exc, match=r"max_count"):
            dmlnumba.nonzero_coordinates(x, max_count=bad)
    with pytest.raises(ValueError, match=r"out_coordinates has 2 rows, too few"):
        dmlnumba.nonzero_coordinates(x, max_count=3, out_coordinates=np.zeros((2, 1), np.uint32))


@pytest.mark.parametrize("op", ["nonzero", "slice1"])
def test_cpu_threads_only_for_large_inputs(op, monkeypatch):
    """Inputs of at least CPU_PARALLEL_MIN elements (in more than one block) run on
    numba's threads; smaller ones, and any call inside ``one_thread()`` (a dask
    task's), on the calling thread.  The results are the same."""
    from dmlnumba import config
    from dmlnumba.cpu import target as target_cpu

    paths = record_paths(monkeypatch, "cpu")
    monkeypatch.setattr(config, "CPU_PARALLEL_MIN", 1000)
    monkeypatch.setattr(config, "CPU_NONZERO_BLOCK", 64)
    monkeypatch.setattr(config, "CPU_SLICE_CHUNK", 64)
    monkeypatch.setattr(config, "CPU_SLICE_NUMPY_MAX", 0)
    monkeypatch.setattr(config, "CPU_LOAD_CHECK", 0)  # however busy the machine is
    rng = np.random.default_rng(3)

    def run(n):
        x = fill(rng, np.float32, n, 0.5).reshape(n // 10, 10)
        if op == "nonzero":
            count, coords = dmlnumba.nonzero_coordinates(x)
            _assert_matches_argwhere(x, count, coords)
        else:
            out = dmlnumba.slice1(x, (0, 0), (x.shape[0], 10), (1, -1))
            np.testing.assert_array_equal(out.view(np.uint32), x[:, ::-1].view(np.uint32))
        ran = [key[-1] == "parallel" for _, key in paths]
        paths.clear()
        return ran

    assert run(990) == [False]
    # nonzero on the threads: its count and write passes, one region each
    assert run(2000) == ([True, True] if op == "nonzero" else [True])
    with target_cpu.one_thread():
        assert run(2000) == [False]


def test_repeated_numpy_calls_reuse_their_runner(monkeypatch):
    """A default call on a NumPy array of a layout seen before runs the runner the
    first call kept, without validation: nonzero_coordinates looks the NumPy key up
    itself, and its runner must be the one ``device="cpu"`` calls (through
    ``keys.nonzero``) find.  Arguments that only look alike (a float width, a bool
    max_count) take the full path and its errors."""
    from dmlnumba import keys

    full = count_full_calls(monkeypatch)
    rng = np.random.default_rng(11)
    x = fill(rng, np.float32, 1000, 0.5)
    dmlnumba.nonzero_coordinates(x)
    assert len(full) == 1
    key = keys.nonzero("nonzero_coordinates", x, None, np.uint32, None, None, None)[0]
    assert key in keys.runners
    for kwargs in [{}, {"device": "cpu"}]:
        y = fill(rng, np.float32, 1000, 0.3)
        _assert_matches_argwhere(y, *dmlnumba.nonzero_coordinates(y, **kwargs))
    assert len(full) == 1
    dmlnumba.nonzero_coordinates(x, 1)  # another key: the full path once, then its runner
    dmlnumba.nonzero_coordinates(x, 1)
    assert len(full) == 2
    with pytest.raises(TypeError, match="width"):
        dmlnumba.nonzero_coordinates(x, 1.0)
    with pytest.raises(TypeError, match="max_count"):
        dmlnumba.nonzero_coordinates(x, max_count=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["nonzero", "slice1"])
def test_changed_settings_reach_repeated_calls(monkeypatch, device, op):
    """A repeated default call (its runner, or on CUDA its plan, kept from the first)
    follows a setting changed after it was made, and the old one once it is restored:
    the caches key on the settings' generation.  Seen in what the kernels are called
    with: on the CPU whether a call runs on numba's threads, on CUDA the look-back
    buffer that a launch of several tiles needs."""
    from dmlnumba import config

    if device == "cuda" and op == "slice1":
        pytest.skip("slice1's CUDA launch arguments do not show its geometry")
    rng = np.random.default_rng(5)
    h = fill(rng, np.float32, 3000, 0.5).reshape(300, 10)
    if device == "cuda":  # a numba device array: a library whose repeated calls have runners
        from numba import cuda

        x = cuda.to_device(h)
    else:
        x = h
    want = np.argwhere(h)
    paths = record_paths(monkeypatch, device)

    def call():
        paths.clear()
        if op == "nonzero":
            count, coords = dmlnumba.nonzero_coordinates(x)
            _assert_matches_argwhere(h, count, coords)
            assert int(to_host(count)[0]) == len(want)
        else:
            out = dmlnumba.slice1(x, (0, 0), (300, 10), (1, -1))
            np.testing.assert_array_equal(to_host(out), h[:, ::-1])
        if device == "cpu":
            return [key[-1] == "parallel" for _, key in paths]
        return [_status_words(args) for _, _, args in paths]

    first = [call(), call()]  # made, then repeated
    assert first[0] == first[1]
    with monkeypatch.context() as m:
        m.setattr(config, "CPU_PARALLEL_MIN", 0)
        m.setattr(config, "CPU_SLICE_NUMPY_MAX", 0)
        m.setattr(config, "CPU_LOAD_CHECK", 0)  # however busy the machine is
        m.setattr(config, "CPU_NONZERO_BLOCK", 64)
        m.setattr(config, "CPU_SLICE_CHUNK", 64)
        m.setattr(config, "CUDA_THREADS", 32)
        m.setattr(config, "CUDA_NONZERO_ITEMS", 4)
        changed = [call(), call()]
    restored = call()
    if device == "cpu":  # serial (or NumPy's copy, for a small new slice1 window) at first
        on = [True, True] if op == "nonzero" else [True]  # (nonzero: count, write)
        assert first[0] in ([False], []) and changed == [on, on]
    else:
        assert changed[0] == changed[1] and changed[0][0] > max(first[0][0], 2)
    assert restored == first[0]


def _status_words(args):
    """The look-back buffer's words in a recorded CUDA nonzero launch (a GPU's
    arguments are flat: the buffer's element count is its third field; under the
    simulator, an array)."""
    status = args[2]
    return status.shape[0] if hasattr(status, "shape") else args[4]


@pytest.mark.skipif("cuda" not in DEVICES, reason="needs CUDA (a GPU or the simulator)")
def test_cuda_plans_of_one_kernel_keep_their_grids(monkeypatch):
    """Two layouts of one kernel variant (float64, 3-d, 3 columns) with grids of 10 and 5
    tiles, called in turn: each launch runs its own plan's grid.  The simulator's
    ``kernel[grid, block]`` configures the kernel object itself, so a kept launcher once
    launched with the grid a later plan asked for: tiles left out, or a tile past the
    look-back buffer."""
    from dmlnumba import config

    monkeypatch.setattr(config, "CUDA_THREADS", 64)
    monkeypatch.setattr(config, "CUDA_NONZERO_ITEMS", 2)
    base = fill(np.random.default_rng(3), "float64", 5 * 7 * 33, 0.3).reshape(5, 7, 33)
    for _ in range(2):
        for x in (base, base[::-1, :, ::2]):
            c, k = dmlnumba.nonzero_coordinates(to_device(x, "cuda"), device="cuda")
            n = int(to_host(c)[0])
            want = np.argwhere(x)
            assert n == len(want) and (to_host(k)[:n] == want).all()
