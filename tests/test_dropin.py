"""argwhere, nonzero_coordinates and slice1 as drop-ins for NumPy: byte-swapped, 0-d,
size-0, unaligned and bool inputs, lists, PyTorch bfloat16 in dmlnumba.onnx, and JAX
results that JAX's 32-bit mode would narrow.  Differential tests against NumPy."""

import contextlib

import numpy as np
import pytest
from conftest import tiny_blocks
from hypothesis import given
from hypothesis import strategies as st

import dmlnumba
import dmlnumba.onnx
from dmlnumba import interop

from strategies import NONZERO_DTYPES, arrays, bits, slice1_reference, windows


def _swapped(a, draw):
    """``a`` in the other byte order (the same values), C or F order or a reversed or
    strided view of that."""
    s = np.asarray(a).astype(a.dtype.newbyteorder(), order=draw(st.sampled_from("CF")))
    view = draw(st.sampled_from(["as is", "reversed", "strided"]))
    if view == "reversed":
        s = s[..., ::-1]
    elif view == "strided" and s.shape[-1] > 1:
        s = s[..., ::2]
    return s


def _blocks(draw):
    return tiny_blocks() if draw(st.booleans()) else contextlib.nullcontext()


@given(st.data())
def test_byte_swapped_inputs_match_numpy(data):
    draw = data.draw
    x = _swapped(draw(arrays(dtypes=NONZERO_DTYPES, allow_zero=True, max_dims=4)), draw)
    ref = np.argwhere(x)
    with _blocks(draw):
        got = dmlnumba.argwhere(x)
        count, coords = dmlnumba.nonzero_coordinates(x, dtype=np.int64)
    np.testing.assert_array_equal(got, ref)
    assert got.dtype == np.int64 and got.shape == ref.shape
    assert int(count[0]) == len(ref)
    np.testing.assert_array_equal(coords[: len(ref)], ref)


@given(st.data())
def test_byte_swapped_slice1_keeps_the_dtype_and_the_bits(data):
    draw = data.draw
    x = _swapped(draw(arrays(dtypes=NONZERO_DTYPES, max_dims=4)), draw)
    w = draw(windows(x.shape))
    want = slice1_reference(x, *w)
    with _blocks(draw):
        got = dmlnumba.slice1(x, *w)
        out = np.empty(want.shape, x.dtype)
        dmlnumba.slice1(x, *w, out=out)
    for r in (got, out):
        assert r.dtype == x.dtype and r.shape == want.shape  # the byte order kept
        assert bits(r).tobytes() == bits(np.ascontiguousarray(want)).tobytes()


def test_byte_swapped_float_zero_is_plus_and_minus_zero():
    for dt in (">f2", ">f4", ">f8"):
        x = np.array([0.0, -0.0, 1.0, np.nan, -np.inf, 0.0, 2.0**-24], dt)
        np.testing.assert_array_equal(dmlnumba.argwhere(x), np.argwhere(x))
        count, _ = dmlnumba.nonzero_coordinates(x)
        assert int(count[0]) == 4


def test_byte_swapped_out_must_match_the_input_byte_order():
    x = np.arange(6, dtype=">i4")
    with pytest.raises(TypeError, match=r"^slice1\(\): out has dtype int32, expected >i4"):
        dmlnumba.slice1(x, (0,), (6,), (1,), out=np.empty(6, "<i4"))


def test_other_dtypes_are_still_refused_in_either_byte_order():
    with pytest.raises(TypeError, match=r"^argwhere\(\): input dtype >c8 is not supported"):
        dmlnumba.argwhere(np.ones(3, ">c8"))


ZERO_D = [
    np.array(0.0),
    np.array(-0.0),
    np.array(np.nan, ">f8"),
    np.array(False),
    np.array(7, np.uint8),
    np.float32(3),
    np.int64(0),
    0,
    1.5,
    True,
]


@pytest.mark.parametrize("x", ZERO_D, ids=repr)
def test_argwhere_of_zero_d_inputs_matches_numpy(x):
    got, ref = dmlnumba.argwhere(x), np.argwhere(x)
    assert got.shape == ref.shape and got.dtype == ref.dtype  # (1, 0) or (0, 0)


def test_argwhere_of_zero_d_tensors():
    torch = pytest.importorskip("torch")
    for v in (0.0, 2.0):
        got = dmlnumba.argwhere(torch.tensor(v))
        assert isinstance(got, torch.Tensor)
        assert tuple(got.shape) == torch.argwhere(torch.tensor(v)).shape


def test_argwhere_of_zero_d_dask_arrays():
    da = pytest.importorskip("dask.array")
    for v in (0.0, 2.0):
        got = dmlnumba.argwhere(da.from_array(np.array(v))).compute()
        assert got.shape == np.argwhere(np.array(v)).shape


@pytest.mark.parametrize(
    "shape", [(0,), (3, 0), (0, 4), (2, 0, 3), (1, 1, 0, 1, 2, 1, 1, 1)], ids=str
)
@pytest.mark.parametrize("dtype", ["float32", ">i8", "bool"])
def test_argwhere_of_size_zero_inputs_matches_numpy(shape, dtype):
    x = np.zeros(shape, dtype)
    got, ref = dmlnumba.argwhere(x), np.argwhere(x)
    assert got.shape == ref.shape and got.dtype == ref.dtype
    assert dmlnumba.argwhere(x.tolist()).shape == np.argwhere(x.tolist()).shape


def _unaligned(dtype, values, offset=1):
    """``values`` in an array of ``dtype`` at an odd byte address (not aligned)."""
    dt = np.dtype(dtype)
    raw = bytearray(offset + len(values) * dt.itemsize)
    raw[offset:] = np.asarray(values, dt).tobytes()
    a = np.frombuffer(raw, dt, offset=offset)
    assert not a.flags.aligned
    return a


@pytest.mark.parametrize("dtype", ["float64", ">f4", "int16", "uint64", "float16"])
def test_unaligned_inputs_match_numpy(dtype):
    vals = [0, 3, 0, 0, 1, 0, 0, 5, 0, 9, 0, 0]
    x = _unaligned(dtype, vals)
    np.testing.assert_array_equal(dmlnumba.argwhere(x), np.argwhere(x))
    y = x.reshape(3, 4)[:, 1:]  # a strided view, still at the odd address
    np.testing.assert_array_equal(dmlnumba.argwhere(y), np.argwhere(y))
    count, coords = dmlnumba.nonzero_coordinates(y)
    np.testing.assert_array_equal(coords[: int(count[0])], np.argwhere(y))
    got = dmlnumba.slice1(y, (0, 0), (3, 3), (-1, 2))
    assert got.dtype == x.dtype
    assert bits(got).tobytes() == bits(np.ascontiguousarray(y[::-1, ::2])).tobytes()


def test_unaligned_large_input_runs_the_counting_path():
    vals = np.zeros(70000, np.float64)
    vals[[3, 65536, 69999]] = [1.0, -2.0, np.nan]
    x = _unaligned(np.float64, vals)
    np.testing.assert_array_equal(dmlnumba.argwhere(x), np.argwhere(x))


@given(st.data())
def test_slice1_copies_bool_arrays(data):
    draw = data.draw
    x = draw(arrays(dtypes=["bool"], max_dims=5))
    w = draw(windows(x.shape))
    want = slice1_reference(x, *w)
    with _blocks(draw):
        got = dmlnumba.slice1(x, *w)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, want)
    out = np.zeros(want.shape, np.bool_)
    assert dmlnumba.slice1(x, *w, out=out) is out
    np.testing.assert_array_equal(out, want)


def test_slice1_copies_bool_tensors():
    torch = pytest.importorskip("torch")
    t = torch.tensor([[True, False, True], [False, False, True]])
    got = dmlnumba.slice1(t, (0, 0), (2, 3), (1, -2))
    assert got.dtype == torch.bool
    assert torch.equal(got, t[:, [2, 0]])


def test_slice1_copies_bool_dask_arrays():
    da = pytest.importorskip("dask.array")
    x = np.arange(20).reshape(4, 5) % 3 == 0
    d = dmlnumba.slice1(da.from_array(x, chunks=2), *dmlnumba.window(x.shape, np.s_[::-1, 1::2]))
    np.testing.assert_array_equal(d.compute(), x[::-1, 1::2])


def test_onnx_slice_takes_bfloat16_tensors():
    torch = pytest.importorskip("torch")
    x = torch.arange(24, dtype=torch.float32).reshape(4, 6).to(torch.bfloat16)
    x[0, 0] = -0.0
    got = dmlnumba.onnx.slice(x, [3, 1], [-5, 6], [0, 1], [-1, 2])
    assert got.dtype == torch.bfloat16
    want = x.flip(0)[0:4][:, 1:6:2][:, :]  # rows 3, 2, 1, 0; columns 1, 3, 5
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))
    empty = dmlnumba.onnx.slice(x, [2], [2])
    assert empty.dtype == torch.bfloat16 and tuple(empty.shape) == (0, 6)


def test_onnx_slice_takes_byte_swapped_arrays():
    x = np.arange(12, dtype=">f4").reshape(3, 4)
    got = dmlnumba.onnx.slice(x, [2, 0], [0, 4], steps=[-1, 3])
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, x[2:0:-1, ::3])


@pytest.mark.parametrize("x", [[[0, 1]], ([0.0, 2.5, -0.0],), [[True], [False]]], ids=repr)
def test_nonzero_coordinates_reads_lists_and_tuples_like_argwhere(x):
    count, coords = dmlnumba.nonzero_coordinates(x)
    want_count, want_coords = dmlnumba.nonzero_coordinates(np.asarray(x))
    assert count.tolist() == want_count.tolist()
    n = int(count[0])
    np.testing.assert_array_equal(coords[:n], want_coords[:n])
    np.testing.assert_array_equal(coords[:n], np.argwhere(np.asarray(x)))


# ------------------------------------------------------------------ JAX's 32-bit mode


def _jax_32bit():
    jax = pytest.importorskip("jax")
    if jax.dtypes.canonicalize_dtype(np.int64) == np.int64:
        pytest.skip("JAX's 64-bit mode is on (JAX_ENABLE_X64)")
    return jax


def _huge_jax_bool(n, ones):
    """A JAX bool array of ``n`` elements over NumPy's lazily zeroed memory (aligned, so
    that JAX takes it without a copy): only the pages written are ever allocated."""
    jax = _jax_32bit()
    buf = np.zeros(n + 4096, np.bool_)
    off = (-buf.ctypes.data) % 4096
    a = buf[off : off + n]
    a[ones] = True
    return jax.dlpack.from_dlpack(a)


def test_jax_argwhere_refuses_coordinates_that_32_bit_mode_would_wrap():
    # Was: [[5], [-2147483643]], the int64 coordinates narrowed to int32.
    x = _huge_jax_bool(2**31 + 8, [5, 2**31 + 5])
    with pytest.raises(ValueError, match=r"^argwhere\(\): .*jax_enable_x64.*JAX_ENABLE_X64=1"):
        dmlnumba.argwhere(x)
    with pytest.raises(ValueError, match=r"^nonzero_coordinates\(\): the count .*int32"):
        dmlnumba.nonzero_coordinates(x, dtype=np.int64, max_count=4)


def test_jax_results_under_32_bit_mode_are_the_dtypes_jax_holds():
    jax = _jax_32bit()
    x = jax.numpy.array([[0.0, 3.0, -0.0], [1.0, 0.0, np.nan]])
    ref = np.argwhere(np.asarray(x))
    got = dmlnumba.argwhere(x)
    assert got.dtype == np.int32 == jax.numpy.argwhere(x).dtype
    np.testing.assert_array_equal(np.asarray(got), ref)
    for dt, held in ((np.uint32, np.uint32), (np.uint64, np.uint32), (np.int64, np.int32)):
        count, coords = dmlnumba.nonzero_coordinates(x, dtype=dt)
        assert count.dtype == held and coords.dtype == held
        assert int(count[0]) == len(ref)
        np.testing.assert_array_equal(np.asarray(coords)[: len(ref)], ref)


def test_jax_64_bit_mode_gives_int64():
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        x = jax.numpy.array([0, 2, 0, 7], jax.numpy.int64)
        got = dmlnumba.argwhere(x)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(np.asarray(got), [[1], [3]])
        interop.check_jax_fits((2**40,), np.dtype(np.int64), "argwhere")  # nothing narrows


@pytest.mark.parametrize(
    "shape,dtype,f,fits",
    [
        ((2**31,), np.int64, "argwhere", True),  # coordinates up to 2**31 - 1
        ((2**31 + 1,), np.int64, "argwhere", False),
        ((2**16, 2**16 + 1), np.int64, "argwhere", True),  # 2**32 elements, small coordinates
        ((2**31 - 1,), np.int64, "nonzero_coordinates", True),
        ((2**31,), np.int64, "nonzero_coordinates", False),  # the count may be 2**31
        ((2**16, 2**16), np.int64, "nonzero_coordinates", False),
        ((2**32 - 1,), np.uint64, "nonzero_coordinates", True),
        ((2**32,), np.uint64, "nonzero_coordinates", False),
        ((2**32 - 1,), np.uint32, "nonzero_coordinates", True),  # JAX holds uint32
    ],
)
def test_check_jax_fits_by_size(shape, dtype, f, fits):
    _jax_32bit()
    if fits:
        interop.check_jax_fits(shape, np.dtype(dtype), f)
    else:
        with pytest.raises(ValueError, match=rf"^{f}\(\): .*64-bit mode"):
            interop.check_jax_fits(shape, np.dtype(dtype), f)
