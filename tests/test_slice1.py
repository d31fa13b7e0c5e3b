"""slice1 against NumPy: the spec's examples, then random inputs, windows and outputs."""

import contextlib

import numpy as np
import pytest
from conftest import count_full_calls, tiny_blocks
from hypothesis import given
from hypothesis import strategies as st

import dmlnumba

from devices import (
    DEVICES,
    SIM,
    device_view,
    record_paths,
    skip_on_cudasim,
    to_device,
    to_host,
)
from strategies import arrays, bits, check_written, odd_outs, slice1_reference, windows

pytestmark = pytest.mark.boundscheck  # CI runs these again with NUMBA_BOUNDSCHECK=1

SPEC_INPUT = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)


@pytest.mark.parametrize("device", DEVICES)
def test_spec_example_positive_strides(device):
    out = dmlnumba.slice1(
        to_device(SPEC_INPUT, device), (0, 0, 0, 1), (1, 1, 4, 3), (1, 1, 2, 2), device=device
    )
    np.testing.assert_array_equal(to_host(out), [[[[2, 4], [10, 12]]]])
    assert to_host(out).dtype == np.float32


@pytest.mark.parametrize("device", DEVICES)
def test_spec_example_negative_stride(device):
    out = dmlnumba.slice1(
        to_device(SPEC_INPUT, device), (0, 0, 0, 1), (1, 1, 4, 3), (1, 1, -2, 2), device=device
    )
    np.testing.assert_array_equal(to_host(out), [[[[14, 16], [6, 8]]]])


@pytest.mark.parametrize("device", DEVICES)
def test_output_sizes_below_maximum(device):
    # max_copied = (1, 1, 2, 2); ask for one row only.
    out = dmlnumba.slice1(
        to_device(SPEC_INPUT, device),
        (0, 0, 0, 1),
        (1, 1, 4, 3),
        (1, 1, -2, 2),
        (1, 1, 1, 2),
        device=device,
    )
    np.testing.assert_array_equal(to_host(out), [[[[14, 16]]]])


def _run(x, params, device, small, out=None):
    ctx = tiny_blocks() if small else contextlib.nullcontext()
    with ctx:
        return dmlnumba.slice1(to_device(x, device), *params, out=out, device=device)


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_random_windows_match_numpy(device, data):
    """Random windows of random arrays; on CUDA by the gather kernel or the tiles
    (CUDA_SLICE_GATHER drawn)."""
    from dmlnumba import config

    x = data.draw(arrays())
    params = data.draw(windows(x.shape))
    small = data.draw(st.booleans())
    saved = config.CUDA_SLICE_GATHER
    config.CUDA_SLICE_GATHER = data.draw(st.sampled_from([0, 1]))
    try:
        got = to_host(_run(x, params, device, small))
    finally:
        config.CUDA_SLICE_GATHER = saved
    want = slice1_reference(x, *params)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(bits(got), bits(want))


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_out_with_odd_strides(device, data):
    x = data.draw(arrays(max_dims=5))
    params = data.draw(windows(x.shape))
    want = slice1_reference(x, *params)
    kind = data.draw(st.sampled_from(["C", "F", "strided", "permuted"]))
    buf, view_of = data.draw(odd_outs(want.shape, x.dtype, kind))
    before = buf.copy()
    dbuf = to_device(buf, device)
    out = view_of(buf) if device == "cpu" else device_view(dbuf, view_of, buf)
    res = _run(x, params, device, data.draw(st.booleans()), out=out)
    assert res is out
    check_written(before, to_host(dbuf), view_of, want)


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_window_matches_numpy_basic_indexing(device, data):
    x = data.draw(arrays(max_dims=4, dtypes=["float32", "int16"]))
    idx = []
    for n in x.shape:
        step = data.draw(st.integers(1, n + 2)) * data.draw(st.sampled_from([1, -1]))
        start = data.draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
        stop = data.draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
        idx.append(slice(start, stop, step))
    idx = tuple(idx[: data.draw(st.integers(0, len(idx)))])
    want = x[idx]
    if want.size == 0:
        with pytest.raises(ValueError, match="selects no elements"):
            dmlnumba.window(x.shape, idx)
        return
    got = to_host(
        dmlnumba.slice1(to_device(x, device), *dmlnumba.window(x.shape, idx), device=device)
    )
    np.testing.assert_array_equal(bits(got), bits(want))


@pytest.mark.parametrize(
    "index,expected",
    [
        (np.s_[:, ::-1, 3:250:2], ((0, 0, 3), (8, 64, 247), (1, -1, 2), (8, 64, 124))),
        (np.s_[..., 1::3], ((0, 0, 1), (8, 64, 253), (1, 1, 3), (8, 64, 85))),
        (np.s_[2], None),
    ],
)
def test_window_parameters(index, expected):
    if expected is None:
        with pytest.raises(TypeError, match="drops a dimension"):
            dmlnumba.window((8, 64, 256), index)
    else:
        assert dmlnumba.window((8, 64, 256), index) == expected


def test_out_overlapping_input_reads_before_writing():
    x = np.arange(40, dtype=np.int32)
    want = x[::-1][:20].copy()
    dmlnumba.slice1(x, (0,), (40,), (-1,), (20,), out=x[10:30])
    np.testing.assert_array_equal(x[10:30], want)


@skip_on_cudasim
@pytest.mark.parametrize("device", DEVICES)
def test_large_contiguous_and_reversed(device):
    # Large enough to take the multi-threaded path with the default block sizes.
    x = np.random.default_rng(1).standard_normal((64, 33, 129)).astype(np.float32)
    p = dmlnumba.window(x.shape, np.s_[:, ::-1, 3::2])
    np.testing.assert_array_equal(
        to_host(dmlnumba.slice1(to_device(x, device), *p, device=device)), x[:, ::-1, 3::2]
    )
    p = dmlnumba.window(x.shape, np.s_[::-1, ::-1, ::-1])
    np.testing.assert_array_equal(
        to_host(dmlnumba.slice1(to_device(x, device), *p, device=device)), x[::-1, ::-1, ::-1]
    )


def test_parameters_as_numpy_integers_and_arrays():
    x = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    out = dmlnumba.slice1(
        x, np.array([0, 1, 0]), [np.int64(2), np.uint8(2), 4], (np.int32(1), 1, -3)
    )
    np.testing.assert_array_equal(out, x[:, 1:3, ::-3])


def test_torch_cpu_tensor_via_dlpack():
    torch = pytest.importorskip("torch")
    t = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    out = dmlnumba.slice1(t, (0, 0, 0), (2, 3, 4), (1, -1, 2))
    np.testing.assert_array_equal(out, t.numpy()[:, ::-1, ::2])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32"])
@pytest.mark.parametrize("shift", [0, 1])
def test_contiguous_rows_copied_as_words(device, dtype, shift, monkeypatch):
    """Windows whose rows are contiguous in input and output, a multiple of 8 bytes
    long and 8-byte aligned are copied in 8-byte words on the GPU; an output moved by
    one element (``shift``) is not aligned and takes the element-wise copy."""
    paths = record_paths(monkeypatch, device)
    x = (np.arange(5 * 6 * 64) % 251).astype(dtype).reshape(5, 6, 64)
    idx = np.s_[1:4, ::-1, 8:56]
    want = np.ascontiguousarray(x[idx])
    buf = np.zeros(want.size + shift, dtype)
    dbuf = to_device(buf, device)

    def view_of(b):
        return b[shift:].reshape(want.shape)

    out = view_of(buf) if device == "cpu" else device_view(dbuf, view_of, buf)
    dmlnumba.slice1(to_device(x, device), *dmlnumba.window(x.shape, idx), out=out, device=device)
    np.testing.assert_array_equal(to_host(dbuf)[shift:].reshape(want.shape), want)
    if device == "cuda":
        bits = 8 * np.dtype(dtype).itemsize
        assert [p[:2] for p in paths] == [("slice", 64) if shift == 0 else element_copy(bits)]


def element_copy(bits):
    """The kernel that copies a window of ``bits``-bit items element by element
    (contiguous or reversed rows): the gather for 4- and 8-byte items, the tiles for
    smaller ones."""
    return ("gather" if bits >= 32 else "slice", bits)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32"])
@pytest.mark.parametrize("shift", [0, 1])
def test_reversed_rows_copied_as_words(device, dtype, shift, monkeypatch):
    """Rows reversed in the input, contiguous in the output, a multiple of 8 bytes long
    and with every 8-byte word of the input aligned are copied in 8-byte words on the
    GPU, each word's items reversed in registers; a window moved by one element
    (``shift``) is not aligned and takes the element-wise copy."""
    paths = record_paths(monkeypatch, device)
    x = (np.arange(5 * 6 * 64) % 251).astype(dtype).reshape(5, 6, 64)
    idx = np.s_[1:4, ::-1, 55 - shift : 7 - shift : -1]  # 48 elements from column 55
    want = np.ascontiguousarray(x[idx])
    got = dmlnumba.slice1(to_device(x, device), *dmlnumba.window(x.shape, idx), device=device)
    np.testing.assert_array_equal(to_host(got), want)
    if device == "cuda":
        bits = 8 * np.dtype(dtype).itemsize
        assert [p[:2] for p in paths] == [("slice", 64) if shift == 0 else element_copy(bits)]
    # The 1-d reversal of a whole array, where every word is aligned.
    y = (np.arange(4096) % 253).astype(dtype)
    got = dmlnumba.slice1(to_device(y, device), (0,), (4096,), (-1,), device=device)
    np.testing.assert_array_equal(to_host(got), y[::-1])


@pytest.mark.skipif("cuda" not in DEVICES, reason="needs CUDA (a GPU or the simulator)")
@pytest.mark.parametrize("below", [1 << 30, 0])
@pytest.mark.parametrize("gather", [0, 1])
def test_cuda_slice_kernel_variants(below, gather, monkeypatch):
    """The CUDA slice kernel keeps positions in 32 bits where every position (and
    tile) is below CUDA_SLICE_32BIT_BELOW, else in 64; both copy every window the
    same: reversed and strided dimensions, element copies, a tile count that wraps
    the next-to-last dimension, rows shorter than a warp, into a strided output.  The
    8-byte word copy (of contiguous or reversed rows) in 32-bit positions keeps half
    the loads in flight.  With CUDA_SLICE_GATHER, the element copies of 4-byte items
    in 32-bit positions take the gather kernel instead, the word copies stay."""
    from dmlnumba import config
    from dmlnumba.gpu import launch
    from dmlnumba.gpu.slice_kernel import LOADS

    monkeypatch.setattr(config, "CUDA_SLICE_32BIT_BELOW", below)
    monkeypatch.setattr(config, "CUDA_SLICE_GATHER", gather)
    monkeypatch.setattr(config, "CUDA_SLICE_ROWS", 3)
    variants = []
    real = launch.kernel

    def kernel(name, src_bits, out_bits=0, variant=(False, 0)):
        variants.append((name, src_bits, variant))
        return real(name, src_bits, out_bits, variant)

    monkeypatch.setattr(launch, "kernel", kernel)
    x = (np.arange(3 * 7 * 5 * 40) % 251).astype(np.float32).reshape(3, 7, 5, 40)
    for idx, nbits, swap in [
        (np.s_[:, ::-1, 1::2, 3:37:3], 32, 0),
        (np.s_[::-1, 2:, :, ::-1], 64, 32),  # reversed rows of 40: words, halves swapped
        (np.s_[::-1, 2:, :, 38::-1], 32, 0),  # reversed rows of 39: element by element
        (np.s_[1:, ::2, :, 4:36], 64, 0),  # contiguous rows of 32 elements: 8-byte words
        (np.s_[:, ::-1, :, 3:16], 32, 0),  # rows of 13: a warp's lanes go on to the next rows
        (np.s_[::-1, :, 1:4, 7:8], 32, 0),  # rows of 3 (the last dimension of 1 dropped)
    ]:
        want = np.ascontiguousarray(x[idx])
        variants.clear()
        got = dmlnumba.slice1(to_device(x, "cuda"), *dmlnumba.window(x.shape, idx), device="cuda")
        np.testing.assert_array_equal(to_host(got), want)
        loads = LOADS // 2 if below and nbits == 64 else LOADS
        if gather and below and nbits == 32:
            assert variants[-1] == ("gather", 32, (False, 0))
        else:
            assert variants[-1] == ("slice", nbits, (below > 0, swap, loads, False))
        buf = np.zeros(want.shape + (2,), np.float32)  # into every other element
        out = device_view(to_device(buf, "cuda"), lambda a: a[..., 0], buf)
        dmlnumba.slice1(to_device(x, "cuda"), *dmlnumba.window(x.shape, idx), out=out)
        np.testing.assert_array_equal(to_host(out), want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32", "float64"])
@pytest.mark.parametrize("step", [1, 2, 3, 4, -1, -3, 5, 17, -70])
@pytest.mark.parametrize("strided_out", [False, True])
def test_long_strided_rows(device, dtype, step, strided_out):
    """Rows longer than the short-row cut-off, at every inner step the CPU copies
    with a vectorized constant-stride loop (2, 3, 4, -1) and at others, into
    contiguous and strided outputs; the source rows are far apart, so the CPU
    prefetches rows ahead, element by element where the step spans a cache line."""
    n = 40
    x = (np.arange(3 * 11 * (n * abs(step) + 3)) % 253).astype(dtype)
    x = x.reshape(3, 11, n * abs(step) + 3)
    start = 1 if step > 0 else x.shape[2] - 2
    idx = np.s_[::-1, 1::2, start : start + n * step : step]
    want = x[idx]
    assert want.shape == (3, 5, n)
    w = dmlnumba.window(x.shape, idx)
    if strided_out:
        buf = np.zeros(want.shape[:2] + (2 * n,), dtype)
        out = (
            buf[..., ::2]
            if device == "cpu"
            else device_view(to_device(buf, device), lambda b: b[..., ::2], buf)
        )
    else:
        out = to_device(np.zeros(want.shape, dtype), device)
    dmlnumba.slice1(to_device(x, device), *w, out=out, device=device)
    np.testing.assert_array_equal(to_host(out), want)


def test_rows_too_wide_to_prefetch():
    x = np.random.default_rng(2).standard_normal((2, 9, 3000))
    idx = np.s_[:, ::-2, ::-1]
    np.testing.assert_array_equal(dmlnumba.slice1(x, *dmlnumba.window(x.shape, idx)), x[idx])


def test_tiny_windows_are_copied_by_numpy_and_larger_ones_by_the_kernel(monkeypatch):
    """New outputs of at most CPU_SLICE_NUMPY_MAX elements take NumPy's view-and-copy
    (bit-exact: a byte copy); larger ones the kernel."""
    from dmlnumba import config, keys
    from dmlnumba.caches import Bounded
    from dmlnumba.cpu import slice as cpu_slice

    calls = []
    real = cpu_slice._copy
    monkeypatch.setattr(cpu_slice, "_copy", lambda *a: (calls.append(a[5]), real(*a)))
    monkeypatch.setattr(keys, "runners", Bounded())
    raw = np.array([0x7FC01234, 0x80000000, 0xFF800000, 1, 2, 3] * 50, np.uint32)
    x = raw.view(np.float32).reshape(15, 20)
    small = dmlnumba.slice1(x, (1, 2), (13, 17), (-2, 3))
    assert calls == []
    np.testing.assert_array_equal(small.view(np.uint32), x[13:0:-2, 2:19:3].view(np.uint32))
    assert small.flags.c_contiguous
    monkeypatch.setattr(config, "CPU_SLICE_NUMPY_MAX", 10)  # the same cached call, now large
    big = dmlnumba.slice1(x, (1, 2), (13, 17), (-2, 3))
    assert calls == [small.size]
    np.testing.assert_array_equal(big.view(np.uint32), small.view(np.uint32))


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32, np.float64])
@pytest.mark.parametrize("chunk", [1, 3, 7, 40, 1 << 15])
def test_blocks_of_rows_and_planes_across_chunks(dtype, chunk, monkeypatch):
    """Chunks that start and end inside rows and planes (the last two dimensions),
    short rows of every stride kind the kernel tells apart, in 3 to 5 dimensions:
    bit for bit NumPy's, NaN payloads and -0.0 included."""
    from dmlnumba import config

    monkeypatch.setattr(config, "CPU_SLICE_CHUNK", chunk)
    monkeypatch.setattr(config, "CPU_SLICE_NUMPY_MAX", 0)
    monkeypatch.setattr(config, "CPU_PARALLEL_MIN", 0)  # chunks are the parallel driver's
    monkeypatch.setattr(config, "CPU_LOAD_CHECK", 0)
    rng = np.random.default_rng(chunk)
    isz = np.dtype(dtype).itemsize
    indices = [
        ((5, 6, 16), np.s_[:, ::-1, ::3]),
        ((4, 7, 9), np.s_[::-1, 1::2, ::-1]),
        ((3, 5, 8), np.s_[:, :, 1:3]),
        ((3, 4, 70), np.s_[1:, ::-1, 2:69]),  # memcpy rows for the wider items
        ((2, 3, 4, 12), np.s_[:, ::-1, :, ::2]),
        ((2, 3, 2, 5, 13), np.s_[::-1, :, ::-1, 1::2, ::4]),
        ((6, 5, 9), np.s_[:, ::2, ::-2]),
        ((4, 4, 4), np.s_[:, :, ::-1]),
    ]
    for shape, idx in indices:
        raw = rng.integers(0, 256, (*shape, isz), dtype=np.uint8)
        x = raw.view(dtype).reshape(shape)
        got = dmlnumba.slice1(x, *dmlnumba.window(shape, idx))
        np.testing.assert_array_equal(got.view(np.uint8), x[idx].copy().view(np.uint8))
        out = np.zeros(got.shape[::-1], dtype).T  # an output in Fortran order
        dmlnumba.slice1(x, *dmlnumba.window(shape, idx), out=out)
        u = f"u{isz}"
        np.testing.assert_array_equal(out.view(u), x[idx].view(u))


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32, np.float64])
def test_every_kind_of_rows_takes_its_own_chunk_copy(dtype, monkeypatch):
    """Each kind of rows (cpu.slice_kinds.KINDS) is the copy of the windows it names,
    and its chunk copy (compiled for that kind alone) gives NumPy's window bit for bit,
    across chunks that start and end inside rows: the 1-byte gathers only for 1-byte
    items (wider ones step by the runtime stride), tiles for a transposed input."""
    from dmlnumba import config
    from dmlnumba.cpu import slice as cpu_slice

    monkeypatch.setattr(config, "CPU_SLICE_CHUNK", 7)
    monkeypatch.setattr(config, "CPU_SLICE_NUMPY_MAX", 0)
    kinds = []
    real = cpu_slice._copy
    monkeypatch.setattr(cpu_slice, "_copy", lambda *a: (kinds.append(a[6]), real(*a)))
    isz = np.dtype(dtype).itemsize
    raw = np.random.default_rng(isz).integers(0, 256, (64 * 64 * isz), dtype=np.uint8)
    x = raw.view(dtype).reshape(64, 64)
    one = "gather" if isz == 1 else "strided"
    cases = [
        (x[:5], np.s_[1:, 2:63], "plain"),
        (x[:5], np.s_[:, ::-1], "reversed"),
        (x[:5], np.s_[:, 1::2], one + ("2" if isz == 1 else "")),
        (x[:5], np.s_[::-1, ::3], one + ("3" if isz == 1 else "")),
        (x[:5], np.s_[:, 3::4], one + ("4" if isz == 1 else "")),
        (x[:5], np.s_[:, ::5], "strided"),
        (x[:5], np.s_[:, ::-2], "strided"),
        (x.T, np.s_[1:, ::-1], "tiles"),
        (x.T[:, :4], np.s_[:, :], "strided"),  # rows of 4: too short for tiles
    ]
    for y, idx, kind in cases:
        want = y[idx].copy()
        got = dmlnumba.slice1(y, *dmlnumba.window(y.shape, idx))
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
        assert kinds[-1] == kind, (idx, kinds[-1])
        h, w = want.shape
        out = np.zeros((h, 2 * w), dtype)[:, ::-2]  # an output with gaps, reversed rows
        dmlnumba.slice1(y, *dmlnumba.window(y.shape, idx), out=out)
        u = f"u{isz}"
        np.testing.assert_array_equal(out.view(u), want.view(u))
        assert kinds[-1] == "general"


def test_a_copy_of_more_dimensions_than_the_odometer_holds_is_refused():
    """The chunk copy keeps its odometer in MAXD slots on the stack: a geometry of more
    dimensions (no public call makes one: DirectML allows 8) is a ValueError before the
    kernel runs, not a write past them."""
    from dmlnumba.cpu.slice_kinds import chunk_kind
    from dmlnumba.params import MAXD

    geom = np.ones((3, MAXD), np.int64)
    assert chunk_kind(geom, 4) == "plain"
    with pytest.raises(ValueError, match="at most 8"):
        chunk_kind(np.ones((3, MAXD + 1), np.int64), 4)


@pytest.mark.parametrize("dtype", [np.uint8, np.float64])
def test_the_compile_command_takes_every_kind_of_rows(dtype, monkeypatch):
    """The compile command's slice1 group (precompile._every_kind) copies rows of every
    kind its width has (the gathers are 1-byte items'), so that no first call compiles
    a chunk copy after it (test_first_call checks the float32 group end to end)."""
    from dmlnumba import precompile
    from dmlnumba.cpu import slice as cpu_slice
    from dmlnumba.cpu.slice_kinds import KINDS

    kinds = set()
    real = cpu_slice._copy
    monkeypatch.setattr(cpu_slice, "_copy", lambda *a: (kinds.add(a[6]), real(*a)))
    precompile._every_kind(np.dtype(dtype))
    want = {k for k in KINDS if dtype == np.uint8 or not k.startswith("gather")}
    assert kinds == want


@pytest.mark.parametrize("numpy_max", [0, 1 << 16])
def test_repeated_out_calls_check_overlap_and_writeable(numpy_max, monkeypatch):
    """A repeat of an out= call (same parameter tuples, same layouts) skips the
    checks that depend only on layouts, never the ones that depend on the arrays:
    an output that overlaps the input, or one made read-only since."""
    from dmlnumba import config

    monkeypatch.setattr(config, "CPU_SLICE_NUMPY_MAX", numpy_max)
    w = ((0,), (40,), (-1,), (20,))
    x = np.arange(40, dtype=np.int32)
    out = np.empty(20, np.int32)
    for _ in range(2):
        dmlnumba.slice1(x, *w, out=out)
        np.testing.assert_array_equal(out, x[::-1][:20])
    y = np.arange(40, dtype=np.int32)
    want = y[::-1][:20].copy()
    dmlnumba.slice1(y, *w, out=y[10:30])  # the same layouts, now overlapping
    np.testing.assert_array_equal(y[10:30], want)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        dmlnumba.slice1(x, *w, out=out)


def test_repeated_out_calls_of_small_windows_of_two_dimensions():
    """The small window's runner into out= of 2+ dimensions (NumPy's assignment): a
    repeat writes the window; an out laid out alike that now overlaps the input gets
    the window as the input held it (the assignment buffers it); one made read-only is
    refused, naming the function, with nothing written; a PyTorch tensor of the same
    layout takes the general runner, which bumps its version counter."""
    from dmlnumba import keys

    w = ((1, 2), (6, 6), (-1, 2))
    x = np.arange(80, dtype=np.int32).reshape(8, 10)
    out = np.empty((6, 3), np.int32)
    for _ in range(2):
        assert dmlnumba.slice1(x, *w, out=out) is out
        np.testing.assert_array_equal(out, x[6:0:-1, 2:8:2])
    y = np.arange(80, dtype=np.int32).reshape(8, 10)
    want = y[6:0:-1, 2:8:2].copy()
    o = y.reshape(-1)[10:28].reshape(6, 3)  # out's layout, in the window's memory
    assert keys.window("slice1", y, *w, None, o, None, None)[1] is not None  # the runner's
    assert dmlnumba.slice1(y, *w, out=o) is o
    np.testing.assert_array_equal(o, want)
    out[...] = -1
    out.flags.writeable = False
    with pytest.raises(ValueError, match=r"slice1\(\): out .*read-only"):
        dmlnumba.slice1(x, *w, out=out)
    assert (out == -1).all()
    torch = pytest.importorskip("torch")
    t = torch.full((6, 3), -1, dtype=torch.int32)
    for _ in range(2):
        before = t._version
        assert dmlnumba.slice1(x, *w, out=t) is t
        np.testing.assert_array_equal(t.numpy(), x[6:0:-1, 2:8:2])
        assert t._version > before  # marked written, as PyTorch's in-place ops are


def test_repeated_calls_with_lists_read_them_again():
    """Parameters passed as lists are read on every call (only tuples are kept by
    identity): a list changed between two calls gives the new window; lists and tuples
    of the same values give the same window."""
    x = np.arange(24, dtype=np.int64).reshape(4, 6)
    offsets, sizes, strides = [0, 0], [4, 6], [1, 1]
    np.testing.assert_array_equal(dmlnumba.slice1(x, offsets, sizes, strides), x)
    strides[1] = -2
    np.testing.assert_array_equal(dmlnumba.slice1(x, offsets, sizes, strides), x[:, ::-2])
    with pytest.raises(TypeError):
        dmlnumba.slice1(x, (0, 0), (4, 6), (1, 1.0))
    with pytest.raises(TypeError, match="bool"):  # True == 1, and hashes as 1: not a key
        dmlnumba.slice1(x, [0, 0], [4, 6], [True, -2])
    # The same values split otherwise between the parameters: not the kept call's key.
    with pytest.raises(ValueError, match="offsets"):
        dmlnumba.slice1(x, [0], [0, 4, 6], [1, -2])
    np.testing.assert_array_equal(dmlnumba.slice1(x, (0, 0), [4, 6], (1, -2)), x[:, ::-2])
    # Nor with output_sizes' values moved into strides (a key without their lengths).
    np.testing.assert_array_equal(
        dmlnumba.slice1(x, [0, 0], [4, 6], [1, -2], [4, 2]), x[:, -1:-5:-2]
    )
    with pytest.raises(ValueError, match="strides"):
        dmlnumba.slice1(x, [0, 0], [4, 6], [1, -2, 4, 2])


class _LyingInt(np.int64):
    """A NumPy integer whose ``int()`` is not its value (validation reads the value)."""

    def __int__(self):
        return 2


@pytest.mark.parametrize("device", DEVICES)
def test_numpy_integer_parameters_take_the_kept_runner(device, monkeypatch):
    """Window parameters of NumPy integers (in tuples or lists, or 1-d integer arrays),
    and width and max_count as NumPy integers, key a runner as Python ints do: a repeat
    takes it (every such call took the full path, 9-10x a repeat's time), read as the
    checks read them.  An array changed between calls gives the new window; bools,
    floats and subclasses of NumPy's integers take the full path (its checks).  On
    CUDA, numba device arrays (inputs that keep runners on a GPU)."""
    full = count_full_calls(monkeypatch)
    h = np.arange(24, dtype=np.float32).reshape(4, 6)
    gh = np.ones((4, 3), np.float32)
    if device == "cpu":
        x, g = h, gh
    else:
        from numba import cuda

        x, g = cuda.to_device(h), cuda.to_device(gh)
    i64 = np.int64
    forms = [
        ((i64(0), i64(0)), (i64(4), i64(6)), (i64(1), i64(-2))),
        ([np.int32(0), 0], [np.uint8(4), 6], [1, np.int16(-2)]),
        (np.array([0, 0]), np.array([4, 6], np.uint64), np.array([1, -2], np.int8)),
        ((0, 0), [4, 6], (1, -2)),
    ]
    want_grad = np.zeros_like(h)
    want_grad[:, ::-2] = 1

    def window(*w):
        return to_host(dmlnumba.slice1(x, *w))

    for w in forms:
        for _ in range(2):
            np.testing.assert_array_equal(window(*w), h[:, ::-2])
            np.testing.assert_array_equal(window(*w, np.array([4, 2])), h[:, -1:-4:-2])
            grad = dmlnumba.slice_grad(g, np.array(h.shape), *w)
            np.testing.assert_array_equal(to_host(grad), want_grad)
    kept = device == "cpu" or not SIM  # (the simulator's arrays keep no runners)
    assert len(full) == 3 or not kept  # each call's first; every other form found its runner
    steps = np.array([1, -2])
    window((0, 0), (4, 6), steps)
    steps[1] = 3
    np.testing.assert_array_equal(window((0, 0), (4, 6), steps), h[:, ::3])
    with pytest.raises(TypeError, match="bool"):
        window((0, 0), (4, 6), (np.True_, -2))
    np.testing.assert_array_equal(window((0, 0), (4, 6), np.array([1, 1])), h)
    with pytest.raises(TypeError, match="bool"):  # True == 1, and hashes as 1: not a key
        window((0, 0), (4, 6), np.array([True, True]))
    with pytest.raises(TypeError, match="float64"):
        window((0, 0), (4, 6), (np.float64(1.0), -2))
    with pytest.raises(ValueError, match=r"^slice1\(\): strides must be one-dimensional"):
        window((0, 0), (4, 6), np.array([[1, -2]]))  # (its rows are no key's values)
    np.testing.assert_array_equal(window((0, 0), (4, 6), (_LyingInt(1), -2)), h[:, ::-2])
    np.testing.assert_array_equal(window((0, 0), (4, 6), (2, -2)), h[::2, ::-2])
    before = len(full)
    for width, most in ((i64(2), i64(5)), (2, 5), (np.uint16(2), np.int8(5))):
        count, coords = dmlnumba.nonzero_coordinates(x, width, max_count=most)
        assert int(to_host(count)[0]) == 23 and coords.shape == (5, 2)
        np.testing.assert_array_equal(to_host(coords), np.argwhere(h)[:5])
    assert len(full) == before + 1 or not kept
    dmlnumba.nonzero_coordinates(x, max_count=1)
    with pytest.raises(TypeError, match="bool"):  # (not the kept max_count=1 call's key)
        dmlnumba.nonzero_coordinates(x, max_count=np.True_)


def test_device_cpu_repeats_take_the_numpy_runner(monkeypatch):
    """A NumPy call with ``device="cpu"`` finds the runner a call without it kept (the
    same key), into new arrays and into ``out=``, and gives the window of each input."""
    full = count_full_calls(monkeypatch)
    w = ((1, 0), (3, 6), (-1, 2))
    out = np.empty((3, 3), np.float32)
    for k in range(3):
        x = np.arange(24, dtype=np.float32).reshape(4, 6) * (k + 1)
        device = "cpu" if k else None
        np.testing.assert_array_equal(dmlnumba.slice1(x, *w, device=device), x[3:0:-1, ::2])
        assert dmlnumba.slice1(x, *w, out=out, device=device) is out
        np.testing.assert_array_equal(out, x[3:0:-1, ::2])
    assert len(full) == 2  # the first call of each kind
    # An out of the kept layout that overlaps the input: the window as it was before
    # the write; bad parameters: the full path's errors.
    buf = np.arange(40, dtype=np.float32)
    x, o = buf[:24].reshape(4, 6), buf[15:24].reshape(3, 3)
    want = x[3:0:-1, ::2].copy()
    assert dmlnumba.slice1(x, *w, out=o, device="cpu") is o
    np.testing.assert_array_equal(o, want)
    with pytest.raises(TypeError, match="strides"):
        dmlnumba.slice1(x, (1, 0), (3, 6), (-1, 2.0), device="cpu")


@pytest.mark.parametrize("free", [1, 2, 99])
def test_busy_machine_runs_large_calls_on_the_free_cores(free, monkeypatch):
    """With CPU_LOAD_CHECK on (the default), a call large enough for numba's threads
    runs on as many as have a core (cpu.threads.threads_free), on this thread where
    fewer than two have one; numba's setting is put back after; the same result
    every way."""
    import numba

    from dmlnumba import config
    from dmlnumba.cpu import threads

    monkeypatch.setattr(config, "CPU_LOAD_CHECK", 1)
    monkeypatch.setattr(config, "CPU_PARALLEL_MIN", 0)
    monkeypatch.setattr(config, "CPU_SLICE_CHUNK", 64)
    monkeypatch.setattr(config, "CPU_SLICE_NUMPY_MAX", 0)
    monkeypatch.setattr(threads, "threads_free", lambda n: min(n, free))
    seen = []
    real = threads.compiling.run
    monkeypatch.setattr(
        threads.compiling,
        "run",
        lambda f, key, *a: (seen.append((key[-1], numba.get_num_threads())), real(f, key, *a))[1],
    )
    before = numba.get_num_threads()
    x = np.arange(4000, dtype=np.float32).reshape(40, 100)
    got = dmlnumba.slice1(x, *dmlnumba.window(x.shape, np.s_[::-1, 1::3]))
    np.testing.assert_array_equal(got, x[::-1, 1::3])
    want = min(before, free)
    assert seen == [("parallel", want)] if want >= 2 else seen[0][0] != "parallel"
    assert numba.get_num_threads() == before


def test_the_load_check_is_on_by_default():
    from interpreter import run_python

    r = run_python(
        """
        import os
        os.environ.pop("DMLNUMBA_CPU_LOAD_CHECK", None)  # (the test session sets it)
        from dmlnumba import config
        print(config.CPU_LOAD_CHECK)
        """
    )
    assert r.stdout.split() == ["1"], r.stderr


def _fake_loadavg(monkeypatch, cores, now):
    """``free(running, n)``: :func:`threads_free` of ``n`` threads on a machine of
    ``cores`` cores where Linux counts ``running`` runnable threads (the caller among
    them; a list: what each read gives, the last one kept), at the time ``now[0]``,
    with none of this process's pool threads running; ``free.reads``: the counts
    read so far."""
    from dmlnumba.cpu import threads

    monkeypatch.setattr(threads.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(threads, "_CORES", cores)
    monkeypatch.setattr(threads, "_busy_until", -1.0)
    monkeypatch.setattr(threads, "_busy_score", 0)
    monkeypatch.setattr(threads, "_last_count", -1e9)
    monkeypatch.setattr(threads, "KEEP_S", 0.0)  # (every call counts: its own test)
    monkeypatch.setattr(threads, "_kept", (-1.0, 0, 0))
    monkeypatch.setattr(threads, "_pools_running", lambda enough: 0)
    monkeypatch.setattr(threads, "_loadavg", 0)  # (not None, not False: counts are read)
    reads = []

    def read():
        free.reads += 1
        return reads.pop(0) if len(reads) > 1 else reads[0]

    def free(running, n=cores):
        reads[:] = running if isinstance(running, list) else [running]
        return threads.threads_free(n)

    free.reads = 0  # (how many times the count was read)
    monkeypatch.setattr(threads, "_running", read)
    return free


def test_threads_free_counts_the_other_runnable_threads(monkeypatch, tmp_path):
    """Linux's runnable threads (the fourth field of /proc/loadavg, which counts the
    caller) leave the rest of the cores, counted out this process's pool threads, and
    counted again after their states (a thread runnable for a moment is not load)."""
    import os

    from dmlnumba.cpu import threads

    f = tmp_path / "loadavg"
    f.write_text("0.5 0.5 0.5 7/900 123\n")
    fd = os.open(f, os.O_RDONLY)
    monkeypatch.setattr(threads, "_loadavg", fd)
    try:
        assert threads._running() == 7  # the fourth field's first count
    finally:
        os.close(fd)
    now = [100.0]
    free = _fake_loadavg(monkeypatch, 16, now)
    assert free(1) == 16  # only the caller
    assert free(2) == 15  # one other runnable thread: 15 cores left
    assert free([2, 1]) == 16  # gone when counted again: a moment's work
    assert free(40) == 1 and free(1, n=4) == 4
    pool = [2]  # this process's pool threads, spinning after a parallel region
    monkeypatch.setattr(threads, "_pools_running", lambda enough: min(pool[0], enough))
    assert free(3) == 16 and free(5) == 14
    assert free(3, n=4) == 4  # (12 cores left for 4 threads: not asked)
    monkeypatch.setattr(threads, "_loadavg", False)
    assert threads.threads_free(8) == 8  # not Linux: no count, no check


def test_the_load_check_holds_where_most_counts_are_busy(monkeypatch):
    """A hold (the count that started it, or a lower one, for BUSY_HOLD_S) starts
    where the busy score (+1 a busy count, -2 an idle one, at most BUSY_CHECKS)
    reaches BUSY_CHECKS.  An idle machine's system tasks run for a moment (one count
    in 15 to 30 between back-to-back calls on the 2-core VM, now and then several
    in a row), and calls that caught two such moments within a second were held on
    one thread (2**24 at 1% on that VM: 8.5 against 4.5 ms)."""
    from dmlnumba.cpu import threads

    now = [100.0]
    free = _fake_loadavg(monkeypatch, 16, now)
    checks = threads.BUSY_CHECKS
    assert checks >= 4

    def counts(pattern):
        """The answers to counts a millisecond apart, busy (15 others) at a 1."""
        out = []
        for busy in pattern:
            now[0] += 0.001
            out.append(free(16 if busy else 1))
        return out

    # Moments of others' work, single or several in a row, between idle counts.
    assert counts([1, 0] * 20) == [1, 16] * 20
    assert counts(([1] * (checks - 1) + [0] * 4) * 5) == ([1] * (checks - 1) + [16] * 4) * 5
    # Others at two counts in three, over and over: never held.
    assert counts([1, 1, 0] * 30) == [1, 1, 16] * 30
    # Others at three counts in four (a busy machine's processes sleep now and then):
    # held, its idle counts answered with the held count.
    got = counts([1, 1, 1, 0] * checks)
    assert got[3] == 16 and got[-1] == 1
    assert counts([0, 0]) == [1, 1]  # the others asleep for a moment: still held
    now[0] += threads.BUSY_HOLD_S
    assert counts([0]) == [16]  # let go
    # A long busy stretch leaves no credit: its score is at most BUSY_CHECKS.
    counts([1] * 10 * checks)
    idle = []
    for _ in range(11):  # idle counts a tenth of the hold apart, past its end
        now[0] += threads.BUSY_HOLD_S / 10
        idle.append(free(1))
    assert idle[-1] == 16 and counts([1, 0]) == [1, 16]


def test_a_count_answers_for_the_calls_that_follow_it(monkeypatch):
    """A count that found every thread a core answers for KEEP_S, for as many threads
    or fewer (the pool's spinning threads' states cost a count on many cores more
    than a small parallel call); so does a busy one that followed another busy count.
    A first busy count is never kept (a kernel task runnable for a moment would keep
    the calls that follow on fewer threads: on two cores, one)."""
    from dmlnumba.cpu import threads

    now = [100.0]
    free = _fake_loadavg(monkeypatch, 16, now)
    keep = 0.01
    monkeypatch.setattr(threads, "KEEP_S", keep)
    assert free(1) == 16 and free.reads == 1
    now[0] += keep / 2  # others start: not seen until the count is KEEP_S old
    assert free(40) == 16 and free(40, n=8) == 8 and free.reads == 1
    # More threads than it answered for: counted (a busy count reads twice); the
    # first busy count is not kept, the second is.
    assert free(40, n=32) == 1 and free.reads == 3
    assert free(40) == 1 and free.reads == 5
    assert free(1) == 1 and free.reads == 5
    now[0] += keep
    assert free(1) == 16 and free.reads == 6
    now[0] += keep
    # A kernel task runnable for a moment: 15 of 16, not kept, the next call counts.
    assert free(2) == 15 and free(1) == 16 and free.reads == 9
    now[0] += keep
    # One other runnable thread for good (a daemon of a many-core host): the second
    # busy count in a row is kept, and answers fewer threads as a count would.
    assert free(2) == 15 and free(2) == 15 and free.reads == 13
    assert free(2) == 15 and free(40, n=8) == 8 and free(40, n=15) == 15 and free.reads == 13
    now[0] += keep
    assert free(6) == 11 and free(40) == 11 and free.reads == 15  # still busy: kept
    two = _fake_loadavg(monkeypatch, 2, now)
    monkeypatch.setattr(threads, "KEEP_S", keep)
    assert two(2) == 1 and two(1) == 2 and two.reads == 3  # a moment's task: not kept
    now[0] += keep
    assert two(2) == 1 and two(2) == 1 and two(1) == 1 and two.reads == 7  # the second kept
    now[0] += keep
    assert two(1) == 2 and two.reads == 8


def test_the_load_check_lets_go_a_second_after_the_machine_is_idle(monkeypatch):
    """Calls that follow each other within BUSY_HOLD_S on an idle machine do not
    renew the hold (they did: back-to-back calls stayed on one thread for good)."""
    from dmlnumba.cpu import threads

    now = [100.0]
    free = _fake_loadavg(monkeypatch, 2, now)
    for _ in range(threads.BUSY_CHECKS):  # another process runs: held for BUSY_HOLD_S
        now[0] += 0.01
        assert free(2) == 1
    seen = []
    for _ in range(8):
        now[0] += threads.BUSY_HOLD_S / 4
        seen.append(free(1))
    assert seen[:3] == [1, 1, 1] and seen[4:] == [2, 2, 2, 2]


def _running_states(count, stop):
    """``count()`` sampled until ``stop()``, at least 50 times."""
    seen = []
    while len(seen) < 50 or not stop():
        seen.append(count())
    return seen


def test_pool_threads_are_not_load_and_python_threads_are(monkeypatch):
    """The load check counts out this process's runnable threads that Python did not
    start (numba's pool, grown by set_num_threads after the first region; PyTorch's
    and ONNX Runtime's pools spin the same way), and counts in a running Python
    thread: another thread of the application at work."""
    import threading
    import time

    import numba

    from dmlnumba import config
    from dmlnumba.cpu import threads

    if numba.get_num_threads() < 2:
        pytest.skip("numba runs one thread here")
    monkeypatch.setattr(config, "CPU_LOAD_CHECK", 0)
    a = np.random.default_rng(0).random(1 << 21)
    x = (a < 0.5).astype(np.float32)
    done = threading.Event()

    def sort():  # a Python thread that runs without the GIL (NumPy sorting)
        while not done.is_set():
            np.sort(a)

    calls = [0]

    def regions():  # numba's pool at work, called from a Python thread
        while not done.is_set():
            dmlnumba.nonzero_coordinates(x)
            calls[0] += 1

    def all_running():  # every runnable thread of this process but the caller
        me = str(threading.get_native_id())
        n = 0
        for tid in threads.os.listdir("/proc/self/task"):
            try:
                s = open(f"/proc/self/task/{tid}/stat", "rb").read()
            except OSError:
                continue
            n += tid != me and s[s.rfind(b")") + 2 : s.rfind(b")") + 3] == b"R"
        return n

    dmlnumba.nonzero_coordinates(x)  # (compiled first: a compile runs no pool)
    for work, counted in ((sort, False), (regions, True)):
        done.clear()
        time.sleep(0.05)  # (pools that spin after earlier tests' regions: asleep)
        t = threading.Thread(target=work)
        t.start()
        end = time.monotonic() + 0.5
        try:
            pools = _running_states(  # (half a second, and 20 calls on a busy machine)
                lambda: threads._pools_running(99),
                lambda: time.monotonic() > end and (work is sort or calls[0] >= 20),
            )
            every = _running_states(all_running, lambda: True)
        finally:
            done.set()
            t.join()
        assert max(every) >= 1  # the work ran
        # The share of samples that found a pool thread running: about half while
        # numba's pool works (2-core VM), none while Python sorts, but for the
        # rare sample that catches another library's thread (a CUDA driver's).
        share = sum(n >= 1 for n in pools) / len(pools)
        assert share >= 0.2 if counted else share <= 0.05, (work.__name__, share)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.float64])
@pytest.mark.parametrize("chunk", [5, 100, 1 << 15])
def test_transposed_inputs_copied_in_tiles(dtype, chunk, monkeypatch):
    """Transposed inputs (each row's elements on lines of their own, the next rows'
    on the same lines) are copied several rows at a time: row and column counts
    that are not multiples of the tile, chunks that end inside a tile."""
    from dmlnumba import config

    monkeypatch.setattr(config, "CPU_SLICE_CHUNK", chunk)
    monkeypatch.setattr(config, "CPU_SLICE_NUMPY_MAX", 0)
    monkeypatch.setattr(config, "CPU_PARALLEL_MIN", 0)
    monkeypatch.setattr(config, "CPU_LOAD_CHECK", 0)
    rng = np.random.default_rng(chunk)
    isz = np.dtype(dtype).itemsize
    for shape, idx in [
        ((70, 45), np.s_[:, ::-1]),
        ((70, 45), np.s_[3::2, 1:]),
        ((3, 37, 29), np.s_[::-1, 1:, ::-1]),
        ((9, 100), np.s_[:, :]),
    ]:
        base = rng.integers(0, 256, (*shape[::-1], isz), dtype=np.uint8).view(dtype)
        x = base.reshape(shape[::-1]).T
        got = dmlnumba.slice1(x, *dmlnumba.window(shape, idx))
        np.testing.assert_array_equal(got.view(np.uint8), x[idx].copy().view(np.uint8))


def test_pool_state_files_follow_the_threads_and_not_a_fork(monkeypatch):
    """The load check keeps its threads' state files open (cpu.threads._pool_stats):
    a thread that starts later is listed (a Python one as Python's, not a pool's), one
    that ends is dropped, and a forked child closes its parent's and lists its own."""
    import os
    import threading

    from dmlnumba.cpu import threads

    def listed():
        with threads._stats_lock:
            return set(threads._pool_stats())

    listed()
    done = threading.Event()
    t = threading.Thread(target=done.wait)
    t.start()
    try:
        now = listed()
        assert str(t.native_id) not in now  # a Python thread: load, not a pool's
        assert now <= set(os.listdir("/proc/self/task"))
    finally:
        done.set()
        t.join()
    assert listed() <= set(os.listdir("/proc/self/task"))
    parent = {fd: os.readlink(f"/proc/self/fd/{fd}") for fd in threads._stats.values()}
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: none of the parent's files open, its own listed
        ok = all(
            not os.path.exists(f"/proc/self/fd/{fd}") or os.readlink(f"/proc/self/fd/{fd}") != p
            for fd, p in parent.items()
        )
        ok = (
            ok
            and threads._pools_running(99) == 0
            and listed() <= set(os.listdir("/proc/self/task"))
        )
        os.write(w, b"1" if ok else b"0")
        os._exit(0)
    os.close(w)
    assert os.read(r, 1) == b"1"
    os.waitpid(pid, 0)
    os.close(r)
