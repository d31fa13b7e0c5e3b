"""Inputs with no elements, of every library, on every path: the checked first call and
the repeats a runner serves.  nonzero_coordinates gives a count of 0 and a (0, width)
matrix, argwhere a (0, ndim) one, as NumPy's ``argwhere``; slice1 has no window in
them (a ValueError).  An empty PyTorch tensor's data pointer is null, as a freed
one's is, and a runner declines both: nonzero_coordinates of an empty tensor once
returned None."""

import numpy as np
import pytest
from conftest import count_full_calls

import dmlnumba

from devices import CUDA, needs_real_gpu, to_device, to_host

SHAPES = [(0,), (0, 3), (4, 0), (2, 0, 5)]


def _library(name):
    """``(make, host)``: an array of the library ``name`` from a NumPy one, and an
    array of that library as a NumPy one."""
    if name == "numpy":
        return (lambda a: a), np.asarray
    if name.startswith("torch"):
        torch = pytest.importorskip("torch")
        dev = "cuda" if name == "torch-cuda" else "cpu"
        return (lambda a: torch.from_numpy(a.copy()).to(dev)), (lambda t: t.cpu().numpy())
    if name == "jax":
        jax = pytest.importorskip("jax")
        cpu = jax.devices("cpu")[0]
        return (lambda a: jax.device_put(a, cpu)), np.asarray
    if name == "cupy":
        cupy = pytest.importorskip("cupy")
        return cupy.asarray, cupy.asnumpy
    if name == "numba-cuda":
        from numba import cuda

        return cuda.to_device, to_host
    return (lambda a: to_device(a, "cuda")), to_host  # "foreign-cuda"


needs_cuda = pytest.mark.skipif(not CUDA, reason="needs CUDA (a GPU or the simulator)")
LIBRARIES = [
    "numpy",
    "torch",
    "jax",
    pytest.param("foreign-cuda", marks=needs_cuda),
    pytest.param("numba-cuda", marks=needs_cuda),
    pytest.param("torch-cuda", marks=needs_real_gpu),
    pytest.param("cupy", marks=needs_real_gpu),
]


@pytest.mark.parametrize("lib", LIBRARIES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_nonzero_of_an_empty_input(lib, shape):
    make, host = _library(lib)
    a = np.zeros(shape, np.float32)
    for _ in range(3):  # the first call is checked, the repeats take the runner it kept
        r = dmlnumba.nonzero_coordinates(make(a))
        assert r is not None, "nonzero_coordinates returned None"
        count, coords = host(r[0]), host(r[1])
        assert count.tolist() == [0] and count.dtype == np.uint32
        assert coords.shape == (0, len(shape)) and coords.dtype == np.uint32
        count, coords = (host(x) for x in dmlnumba.nonzero_coordinates(make(a), max_count=3))
        assert count.tolist() == [0] and coords.shape == (0, len(shape))
        got = dmlnumba.argwhere(make(a))
        assert host(got).shape == np.argwhere(a).shape


@pytest.mark.parametrize("lib", [x for x in LIBRARIES if x != "jax"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_nonzero_of_an_empty_input_into_outputs(lib, shape):
    """Outputs of the input's library (JAX arrays are immutable: no ``out_*=``)."""
    make, host = _library(lib)
    a = np.zeros(shape, np.float32)
    for _ in range(3):
        oc, ox = make(np.full(1, 7, np.uint32)), make(np.zeros((0, len(shape)), np.uint32))
        count, coords = dmlnumba.nonzero_coordinates(make(a), out_count=oc, out_coordinates=ox)
        assert count is oc and coords is ox
        assert host(oc).tolist() == [0]


@pytest.mark.parametrize("lib", LIBRARIES)
def test_slice1_of_an_empty_input_has_no_window(lib):
    make, _ = _library(lib)
    for _ in range(2):
        with pytest.raises(ValueError, match=r"slice1\(\)"):
            dmlnumba.slice1(make(np.zeros((4, 0), np.float32)), (0, 0), (1, 1), (1, 1))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_an_empty_tensor_s_repeats_take_the_runner(shape, monkeypatch):
    """An empty PyTorch CPU tensor's null data pointer is not a freed storage: its
    repeats take the runner the first call kept (none reruns the full path)."""
    torch = pytest.importorskip("torch")
    full = count_full_calls(monkeypatch)
    for _ in range(3):
        count, coords = dmlnumba.nonzero_coordinates(torch.zeros(shape))
        assert count.tolist() == [0] and coords.shape == (0, len(shape))
    assert len(full) == 1
