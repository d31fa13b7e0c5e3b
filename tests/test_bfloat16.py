"""bfloat16 beyond PyTorch's: NumPy arrays of ml_dtypes' bfloat16 (what ONNX's tensors
and JAX's host arrays hold) and JAX arrays, on the CPU and (on a real GPU) JAX's
CUDA arrays.  Read as float16, whose zeros (+0 and -0) and bytes are bfloat16's:
slice1 and slice_grad copy the bits, nonzero and argwhere count every other value.
PyTorch's own bfloat16 rules are in test_torch_rules.py."""

import contextlib

import numpy as np
import pytest
from conftest import count_full_calls, tiny_blocks
from hypothesis import given
from hypothesis import strategies as st

import dmlnumba
import dmlnumba.onnx

from devices import CUDA, jax_gpu, needs_real_gpu
from strategies import arrays, slice1_reference, slice_grad_reference, windows

ml_dtypes = pytest.importorskip("ml_dtypes")  # (onnx, in the [test] extra, needs it)
BF16 = np.dtype(ml_dtypes.bfloat16)


def _jax_cpu(a):
    jax = pytest.importorskip("jax")
    return jax.device_put(a, jax.devices("cpu")[0])  # (a GPU machine's default: its GPU)


def _jax_cuda(a):
    import jax

    return jax.device_put(a, jax_gpu())


KINDS = [
    "numpy",
    "jax",
    pytest.param("jax-cuda", marks=needs_real_gpu),
]
MAKE = {"numpy": lambda a: a, "jax": _jax_cpu, "jax-cuda": _jax_cuda}


def _bits(a):
    """A bfloat16 result's bits (uint16), from the host."""
    a = np.asarray(a)
    assert a.dtype == BF16
    return a.view(np.uint16)


def _library(kind, r):
    """Whether ``r`` is the input's library's array (and, for JAX, on its device)."""
    if kind == "numpy":
        return type(r) is np.ndarray
    import jax

    cpu = jax.devices("cpu")[0]
    return isinstance(r, jax.Array) and (r.devices() == {cpu}) == (kind == "jax")


@pytest.mark.parametrize("kind", KINDS)
@given(data=st.data())
def test_bfloat16_arrays_match_numpy(kind, data):
    """Drawn layouts and bits (drawn as float16's: their zeros are bfloat16's), three
    calls of each operator a layout, each with other values (later calls on the CPU
    take the runner the first kept; JAX GPU arrays' the full path), on the serial path or
    (tiny blocks) the parallel one: slice1's and slice_grad's bits as NumPy copies
    them, bfloat16 results of the input's library, NumPy outputs written in place,
    nonzero's and argwhere's rows as NumPy finds them."""
    h = data.draw(arrays(dtypes=["float16"], max_dims=5))
    params = data.draw(windows(h.shape))
    blocks = tiny_blocks() if data.draw(st.booleans()) else contextlib.nullcontext()
    with blocks:
        _match_numpy(kind, h, params)


def _match_numpy(kind, h, params):
    full = params[:3]  # the whole window: slice_grad's gradient has its shape
    make = MAKE[kind]
    out = gout = None
    for k in range(3):
        if k and h.flags.writeable:  # other values in the same memory: the same layout
            h[...] = np.roll(h, 1)
        a = make(np.ndarray.view(h, BF16))
        want = slice1_reference(h, *params).view(np.uint16)
        sl = dmlnumba.slice1(a, *params)
        assert _library(kind, sl)
        np.testing.assert_array_equal(_bits(sl), want)
        g = make(np.array(slice1_reference(h, *full)).view(BF16))
        back = slice_grad_reference(slice1_reference(h, *full), h.shape, *full)
        sg = dmlnumba.slice_grad(g, h.shape, *full)
        assert _library(kind, sg)
        np.testing.assert_array_equal(_bits(sg), back.view(np.uint16))
        if kind == "numpy":  # (JAX arrays are immutable: no out=)
            out = np.empty(want.shape, BF16) if out is None else out
            assert dmlnumba.slice1(a, *params, out=out) is out
            np.testing.assert_array_equal(_bits(out), want)
            gout = np.empty(h.shape, BF16) if gout is None else gout
            assert dmlnumba.slice_grad(g, h.shape, *full, out=gout) is gout
            np.testing.assert_array_equal(_bits(gout), back.view(np.uint16))
        rows = np.argwhere(h)
        count, coords = dmlnumba.nonzero_coordinates(a, dtype=np.uint32)
        assert _library(kind, coords)
        assert int(np.asarray(count)[0]) == len(rows)
        np.testing.assert_array_equal(np.asarray(coords)[: len(rows)], rows)
        np.testing.assert_array_equal(np.asarray(dmlnumba.argwhere(a)), rows)


@pytest.mark.parametrize("kind", ["numpy", "jax"])
def test_bfloat16_repeats_take_a_runner(kind, monkeypatch):
    """A bfloat16 NumPy or JAX CPU array's repeated calls take their runner, as a
    float16 one's do, into new and given (NumPy) outputs (those of a float16 view
    would be float16), new results of the input's library; -0.0 stays a zero, NaN
    not; a NumPy input given as its own output goes the full way (the runner's
    overlap test) and is reversed as if read first."""
    full = count_full_calls(monkeypatch)
    w = ((1, 0), (3, 6), (-1, 2))
    back = ((4, 6), (1, 0), (3, 6), (-1, 2))
    rng = np.random.default_rng(7)
    out, gout = np.empty((3, 3), BF16), np.empty((4, 6), BF16)
    cnt, crd = np.empty(1, np.int64), np.empty((24, 2), np.int64)
    for _ in range(4):
        h = rng.standard_normal((4, 6)).astype(BF16)
        h[h < 0] = -0.0
        h[rng.integers(4), rng.integers(6)] = np.nan
        want = h.view(np.uint16)[3:0:-1, ::2]
        a = MAKE[kind](h)
        y = dmlnumba.slice1(a, *w)
        assert y.dtype == BF16 and _library(kind, y)
        np.testing.assert_array_equal(_bits(y), want)
        assert dmlnumba.slice1(a, *w, out=out) is out
        np.testing.assert_array_equal(_bits(out), want)
        g = dmlnumba.slice_grad(y, *back)
        assert g.dtype == BF16 and _library(kind, g)
        np.testing.assert_array_equal(_bits(g), slice_grad_reference(want, *back))
        assert dmlnumba.slice_grad(y, *back, out=gout) is gout
        np.testing.assert_array_equal(_bits(gout), slice_grad_reference(want, *back))
        rows = np.argwhere(h.view(np.uint16) & 0x7FFF)
        count, coords = dmlnumba.nonzero_coordinates(a, dtype=np.uint32)
        assert _library(kind, coords) and int(count[0]) == len(rows)
        np.testing.assert_array_equal(np.asarray(coords)[: len(rows)], rows)
        got = dmlnumba.nonzero_coordinates(a, dtype=np.int64, out_count=cnt, out_coordinates=crd)
        assert got[0] is cnt and got[1] is crd and int(cnt[0]) == len(rows)
        np.testing.assert_array_equal(crd[: len(rows)], rows)
        np.testing.assert_array_equal(np.asarray(dmlnumba.argwhere(a)), rows)
    assert len(full) == 6  # each operator's first call, into new and into given outputs
    if kind == "jax":
        return
    for _ in range(3):
        want = h.view(np.uint16)[::-1].copy()
        assert dmlnumba.slice1(h, (0, 0), (4, 6), (-1, 1), out=h) is h
        np.testing.assert_array_equal(_bits(h), want)


@pytest.mark.parametrize("other", ["float16", "uint16"])
def test_bfloat16_and_its_namesakes_are_not_mixed(other):
    """A bfloat16 input's out= must be bfloat16 (a float16 one would take bfloat16
    bits as float16 values), and the other way round; nothing is written."""
    x = np.array([1.0, 2.0, 3.0], BF16)
    out = np.full(3, 7, other)
    with pytest.raises(TypeError, match=rf"^slice1\(\): out has dtype {other}, expected bfloat16$"):
        dmlnumba.slice1(x, (0,), (3,), (1,), out=out)
    assert (out == 7).all()
    y = np.array([1.0, 2.0, 3.0], other)
    bout = np.full(3, 7, BF16)
    with pytest.raises(TypeError, match=r"^slice1\(\): out has dtype bfloat16, expected"):
        dmlnumba.slice1(y, (0,), (3,), (1,), out=bout)
    assert (_bits(bout) == np.array(7, BF16).view(np.uint16)).all()
    with pytest.raises(TypeError, match=r"^nonzero_coordinates\(\): out_count has dtype bfloat16"):
        dmlnumba.nonzero_coordinates(x, out_count=bout[:1])


@pytest.mark.skipif(not CUDA, reason="needs CUDA (a GPU, or the simulator)")
def test_bfloat16_numpy_arrays_on_cuda():
    """A bfloat16 NumPy array sent to a GPU: its nonzero and argwhere are integers,
    given as numba device arrays; a new slice1 or slice_grad result would be a numba
    array, which holds no bfloat16: refused, naming the function."""
    h = np.array([[0.0, 1.5, -0.0], [np.nan, 0.0, 2.0]], BF16)
    rows = np.argwhere(h.view(np.uint16) & 0x7FFF)
    count, coords = dmlnumba.nonzero_coordinates(h, device="cuda")
    assert int(count.copy_to_host()[0]) == len(rows)
    np.testing.assert_array_equal(coords.copy_to_host()[: len(rows)], rows)
    np.testing.assert_array_equal(dmlnumba.argwhere(h, device="cuda").copy_to_host(), rows)
    with pytest.raises(TypeError, match=r"^slice1\(\): a bfloat16 NumPy input runs on the CPU"):
        dmlnumba.slice1(h, (0, 0), (2, 3), (1, -1), device="cuda")
    with pytest.raises(TypeError, match=r"^slice_grad\(\): a bfloat16 NumPy input_gradient"):
        dmlnumba.slice_grad(h, (4, 3), (0, 0), (2, 3), (1, 1), device="cuda")


def test_bfloat16_dask_and_onnx():
    """dask arrays of bfloat16 NumPy blocks (lazily, block by block) and ONNX's Slice
    and NonZero of bfloat16 NumPy and JAX arrays give NumPy's bits and rows."""
    da = pytest.importorskip("dask.array")
    h = (np.arange(48, dtype=np.float32).reshape(6, 8) - 20).astype(BF16)
    h[1, ::3] = -0.0
    rows = np.argwhere(h.view(np.uint16) & 0x7FFF)
    d = da.from_array(h, chunks=(4, 3))
    s = dmlnumba.slice1(d, (1, 0), (5, 8), (2, -3))
    assert s.dtype == BF16
    np.testing.assert_array_equal(_bits(s.compute()), h.view(np.uint16)[1:6:2, ::-3])
    g = dmlnumba.slice_grad(d, (7, 9), (1, 1), (6, 8), (1, 1))
    np.testing.assert_array_equal(_bits(g.compute())[1:, 1:], h.view(np.uint16))
    np.testing.assert_array_equal(dmlnumba.argwhere(d).compute(), rows)
    count, coords = dmlnumba.nonzero_coordinates(d)
    np.testing.assert_array_equal(coords.compute()[: int(count.compute()[0])], rows)
    for a in (h, _jax_cpu(h)):
        got = dmlnumba.onnx.slice(a, np.array([-1]), np.array([-7]), np.array([1]), np.array([-2]))
        np.testing.assert_array_equal(_bits(got), h.view(np.uint16)[:, -1:-7:-2])
        np.testing.assert_array_equal(np.asarray(dmlnumba.onnx.nonzero(a)), rows.T)
