"""Bad input: the right exception, a message naming the parameter, dimension and
values, raised before anything is written (the ``out`` arrays stay untouched)."""

import numpy as np
import pytest

import dmlnumba

from devices import DEVICES, to_device, to_host

X = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
GOOD = dict(offsets=(0, 1, 2), sizes=(4, 3, 3), strides=(1, 2, -1))  # output (4, 2, 3)
SENTINEL = 123.0

SLICE_CASES = [
    # (changes to the good call, exception, message pattern)
    (dict(strides=(1, 0, -1)), ValueError, r"strides\[1\] is 0"),
    (
        dict(offsets=(0, 1, 4)),
        ValueError,
        r"window out of bounds for dimension 2: offsets\[2\] \+ "
        r"sizes\[2\] = 4 \+ 3 = 7 > input.shape\[2\] = 6",
    ),
    (dict(sizes=(0, 3, 3)), ValueError, r"sizes\[0\] = 0"),
    (dict(offsets=(0, -1, 2)), ValueError, r"offsets\[1\] = -1 is negative"),
    (dict(output_sizes=(4, 2, 0)), ValueError, r"output_sizes\[2\] = 0 is out of range .* 3"),
    (dict(output_sizes=(4, 3, 3)), ValueError, r"output_sizes\[1\] = 3 is out of range .* 2"),
    (dict(offsets=(0, 1)), ValueError, r"offsets has 2 values but input has 3 dimensions"),
    (dict(strides=(1, 2, -1, 1)), ValueError, r"strides has 4 values but input has 3"),
    (dict(output_sizes=(4, 2)), ValueError, r"output_sizes has 2 values"),
    (dict(offsets=(0.0, 1, 2)), TypeError, r"offsets\[0\] must be an integer, not float"),
    (dict(sizes=(4, True, 3)), TypeError, r"sizes\[1\] must be an integer, not bool"),
    (dict(strides="abc"), TypeError, r"strides must be a sequence of 3 integers, not str"),
    (dict(strides=5), TypeError, r"strides must be a sequence of 3 integers, not int"),
    (dict(offsets=np.array([0.0, 1, 2])), TypeError, r"offsets must hold integers, not float64"),
    (dict(strides=(1, 2**63, -1)), ValueError, r"strides\[1\] = 9223372036854775808 does not fit"),
    (
        dict(offsets=(0, 1, -(2**64))),
        ValueError,
        r"offsets\[2\] = -18446744073709551616 does not fit",
    ),
    (dict(device="tpu"), ValueError, r"unknown device 'tpu'"),
    (dict(device=0), TypeError, r"device must be a string"),
]


def _slice_call(x=X, out=None, device=None, **change):
    kw = dict(GOOD)
    kw.update(change)
    return dmlnumba.slice1(
        x,
        kw.pop("offsets"),
        kw.pop("sizes"),
        kw.pop("strides"),
        kw.pop("output_sizes", None),
        out=out,
        device=kw.pop("device", device),
        **kw,
    )


@pytest.mark.parametrize("change,exc,pattern", SLICE_CASES)
def test_slice1_bad_parameters(change, exc, pattern):
    out = np.full((4, 2, 3), SENTINEL, np.float32)
    with pytest.raises(exc, match=pattern):
        _slice_call(out=out, **change)
    assert (out == SENTINEL).all()


@pytest.mark.parametrize(
    "x,exc,pattern",
    [
        (np.float32(1.0), ValueError, r"input has 0 dimensions"),
        (np.zeros((1,) * 9, np.float32), ValueError, r"input has 9 dimensions"),
        (X.astype(np.complex64), TypeError, r"dtype complex64 is not supported"),
        (X.astype(object), TypeError, r"dtype object is not supported"),
        (np.array([["ab"]]), TypeError, r"dtype <U2 is not supported"),
        (X.astype(">c8"), TypeError, r"dtype >c8 is not supported"),
        (X.tolist(), TypeError, r"input must be a NumPy array or a CUDA array .* not list"),
        (None, TypeError, r"not NoneType"),
    ],
)
def test_slice1_bad_input(x, exc, pattern):
    out = np.full((4, 2, 3), SENTINEL, np.float32)
    with pytest.raises(exc, match=pattern):
        if isinstance(x, np.ndarray) and x.ndim != 3:
            dmlnumba.slice1(np.asarray(x), (0,) * x.ndim, (1,) * x.ndim, (1,) * x.ndim, out=out)
        elif isinstance(x, np.generic):
            dmlnumba.slice1(np.asarray(x), (), (), (), out=out)
        else:
            _slice_call(x=x, out=out)
    assert (out == SENTINEL).all()


def test_slice1_size_zero_dimension_is_an_empty_window():
    with pytest.raises(ValueError, match=r"window out of bounds for dimension 1"):
        dmlnumba.slice1(np.zeros((2, 0)), (0, 0), (1, 1), (1, 1))


def _readonly(shape):
    a = np.full(shape, SENTINEL, np.float32)
    a.flags.writeable = False
    return a


@pytest.mark.parametrize(
    "out,exc,pattern",
    [
        (
            np.full((4, 2, 2), SENTINEL, np.float32),
            ValueError,
            r"out has shape \(4, 2, 2\), expected \(4, 2, 3\)",
        ),
        (
            np.full((4, 2, 3), SENTINEL, np.float64),
            TypeError,
            r"out has dtype float64, expected float32",
        ),
        (_readonly((4, 2, 3)), ValueError, r"out is read-only"),
        (
            np.lib.stride_tricks.as_strided(
                np.full(6, SENTINEL, np.float32), (4, 2, 3), (0, 12, 4)
            ),
            ValueError,
            r"out has overlapping memory",
        ),
        ([[0.0]], TypeError, r"out must be an array, not list"),
    ],
)
def test_slice1_bad_out(out, exc, pattern):
    before = np.array(out, copy=True)
    with pytest.raises(exc, match=pattern):
        _slice_call(out=out)
    np.testing.assert_array_equal(np.asarray(out), before)


# ---------------------------------------------------------------- nonzero

Y = np.array([[0, 1, 0], [2, 0, 3]], np.int16).reshape(1, 2, 3)  # effective rank 2


def _nz_outs(dtype=np.uint32, rows=6, width=3):
    return np.full((1,), 77, dtype), np.full((rows, width), 77, dtype)


@pytest.mark.parametrize(
    "kw,exc,pattern",
    [
        (
            dict(width=1),
            ValueError,
            r"width = 1 is out of range for an input of shape \(1, 2, 3\): it "
            r"must be between the effective rank 2 and the number of dimensions 3",
        ),
        (dict(width=4), ValueError, r"width = 4 is out of range"),
        (dict(width=2.0), TypeError, r"width must be an integer, not float"),
        (dict(dtype=np.float32), TypeError, r"dtype float32 is not supported"),
        (dict(dtype="int32"), TypeError, r"dtype int32 is not supported"),
        (dict(dtype="nonsense"), TypeError, r"dtype 'nonsense' is not a NumPy dtype"),
        (dict(device="gpu"), ValueError, r"unknown device 'gpu'"),
        (dict(stream=object()), ValueError, r"stream= applies to CUDA calls only"),
    ],
)
def test_nonzero_bad_parameters(kw, exc, pattern):
    count, coords = _nz_outs()
    with pytest.raises(exc, match=pattern):
        dmlnumba.nonzero_coordinates(Y, out_count=count, out_coordinates=coords, **kw)
    assert (count == 77).all() and (coords == 77).all()


def _ro(a):
    a.flags.writeable = False
    return a


@pytest.mark.parametrize(
    "which,bad,exc,pattern",
    [
        (
            "coords",
            np.full((5, 3), 77, np.uint32),
            ValueError,
            r"out_coordinates has 5 rows, too few for an input of 6 elements",
        ),
        (
            "coords",
            np.full((6, 2), 77, np.uint32),
            ValueError,
            r"out_coordinates has 2 columns, expected width = 3",
        ),
        (
            "coords",
            np.full((6, 3), 77, np.int64),
            TypeError,
            r"out_coordinates has dtype int64, expected uint32",
        ),
        (
            "coords",
            np.full((2, 1, 6, 3), 77, np.uint32),
            ValueError,
            r"out_coordinates has shape \(2, 1, 6, 3\)",
        ),
        (
            "coords",
            _ro(np.full((6, 3), 77, np.uint32)),
            ValueError,
            r"out_coordinates is read-only",
        ),
        ("coords", np.full((18,), 77, np.uint32), ValueError, r"out_coordinates has shape \(18,\)"),
        (
            "count",
            np.full((2,), 77, np.uint32),
            ValueError,
            r"out_count has shape \(2,\); it must hold exactly one",
        ),
        (
            "count",
            np.full((1,), 77, np.int32),
            TypeError,
            r"out_count has dtype int32, expected uint32",
        ),
        ("count", _ro(np.full((1,), 77, np.uint32)), ValueError, r"out_count is read-only"),
        ("count", 5, TypeError, r"out_count must be an array, not int"),
    ],
)
def test_nonzero_bad_outputs(which, bad, exc, pattern):
    count, coords = _nz_outs()
    if which == "count":
        count = bad
    else:
        coords = bad
    saved = [np.array(a, copy=True) for a in (count, coords)]
    with pytest.raises(exc, match=pattern):
        dmlnumba.nonzero_coordinates(Y, out_count=count, out_coordinates=coords)
    for a, s in zip((count, coords), saved):
        np.testing.assert_array_equal(np.asarray(a), s)


@pytest.mark.parametrize(
    "x,exc,pattern",
    [
        (np.zeros(()), ValueError, r"input has 0 dimensions"),
        (np.zeros((1,) * 9), ValueError, r"input has 9 dimensions"),
        (np.zeros(3, np.complex128), TypeError, r"dtype complex128 is not supported"),
        (np.zeros(3, "datetime64[s]"), TypeError, r"dtype datetime64\[s\] is not supported"),
        ({1, 0, 2}, TypeError, r"input must be a NumPy array"),
    ],
)
def test_nonzero_bad_input(x, exc, pattern):
    count = np.full((1,), 77, np.uint32)
    with pytest.raises(exc, match=pattern):
        dmlnumba.nonzero_coordinates(x, out_count=count)
    assert count[0] == 77
    if getattr(x, "ndim", None) == 0:  # argwhere takes 0-d inputs, as numpy.argwhere does
        assert dmlnumba.argwhere(x).shape == np.argwhere(x).shape
        return
    with pytest.raises(exc, match=r"input must be an array" if isinstance(x, set) else pattern):
        dmlnumba.argwhere(x)


def test_results_larger_than_an_array_are_refused_by_name():
    # NumPy's own "array is too big" named neither the function nor the parameter.
    g = np.ones((1, 1), np.float32)
    out = np.full((1, 1), 7, np.float32)
    with pytest.raises(ValueError, match=r"^slice_grad\(\): input_shape = \(4294967296, 42"):
        dmlnumba.slice_grad(g, (1 << 32, 1 << 32), (0, 0), (1, 1), (1, 1), out=out)
    assert out[0, 0] == 7
    # A broadcast input of 2**60 elements: its worst-case uint64 coordinates, 3 columns.
    huge = np.broadcast_to(np.zeros(1, np.uint8), (1 << 20,) * 3)
    count = np.full((1,), 77, np.uint64)
    with pytest.raises(ValueError, match=r"^nonzero_coordinates\(\): the coordinates of 11529"):
        dmlnumba.nonzero_coordinates(huge, dtype=np.uint64, out_count=count)
    assert count[0] == 77


def test_uint32_cannot_describe_2_to_the_32_elements():
    huge = np.broadcast_to(np.zeros(1, np.uint8), (1 << 16, 1 << 16))  # no memory behind it
    count = np.full((1,), 77, np.uint32)
    with pytest.raises(
        ValueError,
        match=r"input has 4294967296 elements, more than dtype uint32 "
        r"can count .* pass dtype=numpy.uint64 or numpy.int64",
    ):
        dmlnumba.nonzero_coordinates(huge, out_count=count)
    assert count[0] == 77


@pytest.mark.parametrize("device", DEVICES)
def test_errors_are_the_same_on_every_device(device):
    x = to_device(X, device)
    with pytest.raises(ValueError, match=r"strides\[1\] is 0"):
        dmlnumba.slice1(x, (0, 0, 0), (1, 1, 1), (1, 0, 1), device=device)
    with pytest.raises(ValueError, match=r"width = 0 is out of range"):
        dmlnumba.nonzero_coordinates(x, 0, device=device)
    out = to_device(np.full((4, 2, 3), SENTINEL, np.float64), device)
    with pytest.raises(TypeError, match=r"out has dtype float64, expected float32"):
        _slice_call(x=x, out=out, device=device)
    assert (to_host(out) == SENTINEL).all()


@pytest.mark.parametrize("device", [d for d in DEVICES if d != "cpu"])
@pytest.mark.parametrize("stream", ["s", 1.5, True, object()])
def test_bad_streams_name_the_function(device, stream):
    x = to_device(X, device)
    out = to_device(np.full((4, 2, 3), SENTINEL, np.float32), device)
    with pytest.raises(TypeError, match=r"^slice1\(\): stream must be a numba, PyTorch"):
        _slice_call(x=x, out=out, device=device, stream=stream)
    assert (to_host(out) == SENTINEL).all()
    with pytest.raises(TypeError, match=r"^nonzero_coordinates\(\): stream must be"):
        dmlnumba.nonzero_coordinates(x, device=device, stream=stream)
    with pytest.raises(TypeError, match=r"^argwhere\(\): stream must be"):
        dmlnumba.argwhere(x, device=device, stream=stream)


def test_a_repeated_call_is_checked_like_the_first():
    """Calls into new CPU outputs remember validated windows and widths; a later
    call with equal values of a wrong type (1.0, True) must still be a TypeError,
    and each call must return new arrays."""
    first = _slice_call()
    again = _slice_call()
    np.testing.assert_array_equal(again, first)
    assert not np.shares_memory(again, first)
    with pytest.raises(TypeError, match=r"strides\[0\] must be an integer, not bool"):
        _slice_call(strides=(True, 2, -1))
    with pytest.raises(TypeError, match=r"offsets\[0\] must be an integer, not float"):
        _slice_call(offsets=(0.0, 1, 2))
    np.testing.assert_array_equal(_slice_call(offsets=np.array([0, 1, 2])), first)
    np.testing.assert_array_equal(_slice_call(offsets=[0, 1, 2]), first)
    # Lists are remembered too: by their values at each call, never by the object.
    offsets = [0, 1, 2]
    np.testing.assert_array_equal(_slice_call(offsets=offsets), first)
    with pytest.raises(TypeError, match=r"offsets\[1\] must be an integer, not bool"):
        _slice_call(offsets=[0, True, 2])
    with pytest.raises(TypeError, match=r"sizes\[0\] must be an integer, not float"):
        _slice_call(sizes=[float(v) for v in GOOD["sizes"]])
    offsets[0] = 1
    moved = _slice_call(offsets=offsets, sizes=[GOOD["sizes"][0] - 1] + list(GOOD["sizes"][1:]))
    ref = _slice_call(offsets=(1, 1, 2), sizes=(GOOD["sizes"][0] - 1,) + tuple(GOOD["sizes"][1:]))
    np.testing.assert_array_equal(moved, ref)

    z = np.array([0, 5, 0, 7], np.int32)
    c1, x1 = dmlnumba.nonzero_coordinates(z, 1)
    c2, x2 = dmlnumba.nonzero_coordinates(z, 1)
    assert c1[0] == c2[0] == 2 and (x1[:2, 0] == [1, 3]).all() and (x2[:2, 0] == [1, 3]).all()
    assert not np.shares_memory(x1, x2) and not np.shares_memory(c1, c2)
    with pytest.raises(TypeError, match=r"width must be an integer, not bool"):
        dmlnumba.nonzero_coordinates(z, True)
    with pytest.raises(TypeError, match=r"width must be an integer, not float"):
        dmlnumba.nonzero_coordinates(z, 1.0)
    c3, x3 = dmlnumba.nonzero_coordinates(z, dtype=np.int64)
    assert c3.dtype == x3.dtype == np.int64 and c3[0] == 2 and (x3[:2, 0] == [1, 3]).all()
