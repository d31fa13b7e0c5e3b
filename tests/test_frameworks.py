"""On a real GPU: CuPy arrays, PyTorch tensors and Numba device arrays as inputs, with
their own strides (reversed, non-contiguous, permuted, broadcast), against NumPy."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dmlnumba
from devices import needs_real_gpu
from strategies import DML_DTYPES, NONZERO_DTYPES, arrays, bits, slice1_reference, windows

pytestmark = needs_real_gpu

# PyTorch holds these fully (its uint16/32/64 support is partial); CuPy holds them all.
TORCH_DTYPES = ["float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8"]


def _span(x):
    """The bytes ``x`` spans, contiguous, and the element offset of ``x[0, ...]`` in them."""
    from dmlnumba.layout import extent
    low, span, base, _ = extent(x.shape, x.strides, x.itemsize)
    flips = tuple(slice(None, None, -1) if s < 0 else slice(None) for s in x.strides)
    flat = np.lib.stride_tricks.as_strided(x[flips] if low else x, shape=(span,),
                                           strides=(x.itemsize,))
    return np.ascontiguousarray(flat), base


def as_cupy(x):
    import cupy as cp
    flat, base = _span(x)
    buf = cp.asarray(flat)
    return cp.ndarray(x.shape, x.dtype, memptr=buf.data + base * x.itemsize, strides=x.strides)


def as_torch(x):
    import torch
    flat, base = _span(x)
    # np.array: a writable copy (torch warns about read-only NumPy arrays).
    buf = torch.as_tensor(np.array(flat.view(np.uint8) if x.dtype == bool else flat),
                          device="cuda")
    if x.dtype == bool:
        buf = buf.view(torch.bool)
    return torch.as_strided(buf, x.shape, [s // x.itemsize for s in x.strides], base)


def _host(a):
    return a.copy_to_host()


def _frameworks(data, dtypes):
    fw = data.draw(st.sampled_from(["cupy", "torch", "numba"]))
    if fw == "torch":
        pytest.importorskip("torch")
        x = data.draw(arrays(dtypes=[d for d in dtypes if d in TORCH_DTYPES + ["bool"]]))
        if any(s < 0 for s in x.strides):  # PyTorch has no negative strides
            x = x.copy()
        return x, as_torch(x)
    if fw == "cupy":
        pytest.importorskip("cupy")
        x = data.draw(arrays(dtypes=dtypes))
        return x, as_cupy(x)
    from numba import cuda
    x = data.draw(arrays(dtypes=dtypes)).copy()  # numba device arrays: plain C order
    return x, cuda.to_device(x)


@given(data=st.data())
def test_slice1_on_framework_arrays(data):
    x, d = _frameworks(data, DML_DTYPES)
    params = data.draw(windows(x.shape))
    got = dmlnumba.slice1(d, *params)
    assert hasattr(got, "__cuda_array_interface__")
    np.testing.assert_array_equal(bits(_host(got)), bits(slice1_reference(x, *params)))


@given(data=st.data())
def test_nonzero_on_framework_arrays(data):
    x, d = _frameworks(data, NONZERO_DTYPES)
    count, coords = dmlnumba.nonzero_coordinates(d)
    assert hasattr(count, "__cuda_array_interface__")  # the count stays on the device
    want = np.argwhere(x)
    n = int(_host(count)[0])
    assert n == len(want)
    np.testing.assert_array_equal(_host(coords)[:n], want)


def test_torch_stream_and_zero_copy_results():
    torch = pytest.importorskip("torch")
    s = torch.cuda.Stream()
    t = torch.arange(-5, 5, device="cuda", dtype=torch.float32).reshape(2, 5)
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        count, coords = dmlnumba.nonzero_coordinates(t, stream=s)
        out = dmlnumba.slice1(t, (0, 0), (2, 5), (-1, 2), stream=s)
    s.synchronize()
    assert int(torch.as_tensor(count, device="cuda")[0]) == 9
    np.testing.assert_array_equal(torch.as_tensor(out, device="cuda").cpu().numpy(),
                                  t.cpu().numpy()[::-1, ::2])
