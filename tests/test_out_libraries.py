"""Outputs of another array library than the input's: every pairing a call may be
given, three calls each with new values (the first through the full path, the
repeats through the runner it kept, where the call keeps one).  The caller's outputs
are written with NumPy's values and returned as they are (not as arrays of the
input's library); an output not given is a new array of the input's library.

On the CPU: NumPy, PyTorch and JAX inputs, NumPy and PyTorch outputs.  On a real GPU:
PyTorch, CuPy, numba and JAX inputs and NumPy ones sent there, PyTorch, CuPy and numba
outputs.  float32 (with -0.0 and NaN), int32, and bfloat16 where both libraries hold it."""

import numpy as np
import pytest
from conftest import count_full_calls

import dmlnumba

from devices import needs_real_gpu
from strategies import slice1_reference, slice_grad_reference

torch = pytest.importorskip("torch")

W = ((1, 0), (3, 6), (-1, 2))  # rows 3, 2, 1 of a (4, 6) input, every other column
SHAPE = (4, 6)
NO_BFLOAT16 = ("cupy", "numba")


def _dtype(name):
    if name == "bfloat16":
        return np.dtype(pytest.importorskip("ml_dtypes").bfloat16)
    return np.dtype(name)


def _values(dtype, k):
    """A (4, 6) input of ``dtype``, other values each round ``k``: zeros, -0.0 and NaN
    (floats), some non-zero."""
    rng = np.random.default_rng(k)
    h = rng.integers(-3, 4, SHAPE).astype(np.float32)
    if dtype.kind != "i":
        h[0, k % 6] = -0.0
        h[3, (k + 2) % 6] = np.nan
    return h.astype(dtype)


def _bits(h):
    """A host array's values as NumPy compares them: bfloat16's as its bits."""
    return h.view(np.uint16) if h.dtype.name == "bfloat16" else h


def _make(lib, h):
    """The host array ``h`` as an array of ``lib`` (its own memory; ``numpy-cuda``: a
    NumPy array that the calls send to the GPU)."""
    if lib in ("numpy", "numpy-cuda"):
        return h.copy()
    if lib in ("torch", "torch-cuda"):
        t = torch.from_numpy(_bits(h).copy())
        t = t.view(torch.bfloat16) if h.dtype.name == "bfloat16" else t
        return t.cuda() if lib == "torch-cuda" else t
    if lib in ("jax", "jax-cuda"):
        jax = pytest.importorskip("jax")
        if lib == "jax":
            return jax.device_put(h, jax.devices("cpu")[0])
        from devices import jax_gpu

        return jax.device_put(h, jax_gpu())
    if lib == "cupy":
        cupy = pytest.importorskip("cupy")
        return cupy.asarray(h)
    from numba import cuda

    return cuda.to_device(h)


def _host(a):
    """``a`` (any library's array) as a NumPy array of its bits (bfloat16's as uint16)."""
    if isinstance(a, torch.Tensor):
        a = a.detach().cpu()
        if a.dtype == torch.bfloat16:
            return a.view(torch.int16).numpy().view(np.uint16)
        return a.numpy()
    if hasattr(a, "copy_to_host"):
        return _bits(a.copy_to_host())
    if hasattr(a, "get") and not isinstance(a, np.ndarray):
        return _bits(a.get())
    return _bits(np.asarray(a))


def _poisoned(lib, shape, dtype):
    """A new output of ``lib`` full of 7s: what a call does not write stays 7."""
    return _make(lib, np.full(shape, 7, dtype))


def _is_library(r, lib):
    """Whether ``r`` is an array of the library ``lib`` (an input's)."""
    if lib == "numpy":
        return type(r) is np.ndarray
    if lib == "numpy-cuda":  # (its results on a GPU are numba arrays)
        lib = "numba"
    if lib.startswith("torch"):
        return isinstance(r, torch.Tensor) and r.is_cuda == (lib == "torch-cuda")
    if lib.startswith("jax"):
        import jax

        return isinstance(r, jax.Array)
    return type(r) is type(_make(lib, np.zeros(1, np.float32)))


def _bumped(a, v):
    """Whether ``a`` was marked written since its version counter read ``v`` (a PyTorch
    tensor's, as PyTorch's in-place ops mark theirs; other arrays have none)."""
    return not isinstance(a, torch.Tensor) or a._version > v


def _version(a):
    return a._version if isinstance(a, torch.Tensor) else None


def _check(inp, out, dtype_name, monkeypatch):
    dtype = _dtype(dtype_name)
    if dtype_name == "bfloat16" and (inp in NO_BFLOAT16 or out in NO_BFLOAT16):
        pytest.skip(f"{inp} or {out} holds no bfloat16")
    full = count_full_calls(monkeypatch)
    kw = {"device": "cuda"} if inp == "numpy-cuda" else {}
    u32 = np.dtype(np.uint32)
    for k in range(3):
        h = _values(dtype, k)
        x = _make(inp, h)
        want = slice1_reference(_bits(h), *W)
        o = _poisoned(out, want.shape, dtype)
        v = _version(o)
        assert dmlnumba.slice1(x, *W, out=o, **kw) is o
        np.testing.assert_array_equal(_host(o), want)
        assert _bumped(o, v)
        g = _make(inp, slice1_reference(h, *W))
        go = _poisoned(out, SHAPE, dtype)
        v = _version(go)
        assert dmlnumba.slice_grad(g, SHAPE, *W, out=go, **kw) is go
        np.testing.assert_array_equal(_host(go), slice_grad_reference(want, SHAPE, *W))
        assert _bumped(go, v)
        rows = np.argwhere(_bits(h) & 0x7FFF if dtype_name == "bfloat16" else h)
        n = len(rows)
        oc, ox = _poisoned(out, (1,), u32), _poisoned(out, (24, 2), u32)
        v = _version(oc), _version(ox)
        c, r = dmlnumba.nonzero_coordinates(x, out_count=oc, out_coordinates=ox, **kw)
        assert c is oc and r is ox
        assert _bumped(oc, v[0]) and _bumped(ox, v[1])
        assert _host(oc)[0] == n
        np.testing.assert_array_equal(_host(ox)[:n], rows)
        oc = _poisoned(out, (1,), u32)
        c, r = dmlnumba.nonzero_coordinates(x, out_count=oc, **kw)
        assert c is oc and _is_library(r, inp)
        assert _host(oc)[0] == n
        np.testing.assert_array_equal(_host(r)[:n], rows)
        ox = _poisoned(out, (24, 2), u32)
        c, r = dmlnumba.nonzero_coordinates(x, out_coordinates=ox, **kw)
        assert r is ox and _is_library(c, inp)
        assert _host(c)[0] == n
        np.testing.assert_array_equal(_host(ox)[:n], rows)
    return full


@pytest.mark.parametrize("dtype", ["float32", "int32", "bfloat16"])
@pytest.mark.parametrize("out", ["numpy", "torch"])
@pytest.mark.parametrize("inp", ["numpy", "torch", "jax"])
def test_cpu_outputs_of_another_library(inp, out, dtype, monkeypatch):
    """The CPU's pairings.  The repeats take the runners the first calls kept (five
    calls a round: the first round's are the full path's)."""
    full = _check(inp, out, dtype, monkeypatch)
    assert len(full) == 5


@needs_real_gpu
@pytest.mark.parametrize("dtype", ["float32", "int32", "bfloat16"])
@pytest.mark.parametrize("out", ["torch-cuda", "cupy", "numba"])
@pytest.mark.parametrize("inp", ["torch-cuda", "cupy", "numba", "jax-cuda", "numpy-cuda"])
def test_gpu_outputs_of_another_library(inp, out, dtype, monkeypatch):
    """A GPU's pairings (values as on the CPU; the runners are the CUDA target's)."""
    _check(inp, out, dtype, monkeypatch)


@pytest.mark.parametrize("inp, out", [("torch", "numpy"), ("numpy", "torch")])
@pytest.mark.parametrize("n", [6, 5000])  # NumPy's copy, and the kernel's
def test_an_output_of_another_library_over_the_input_s_memory(inp, out, n):
    """An output of the other library over the input's own memory (a PyTorch tensor and
    a NumPy array of one buffer), overlapping it: the window is written as if the input
    were read first, on the first call and on the runner's repeats."""
    for _ in range(3):
        base = np.arange(2 * n, dtype=np.float32)
        t = torch.from_numpy(base)
        x = t[:n] if inp == "torch" else base[:n]
        want = base[:n][::-1].copy()
        o = base[n // 3 : n // 3 + n]
        o = torch.from_numpy(o) if out == "torch" else o
        assert dmlnumba.slice1(x, (0,), (n,), (-1,), out=o) is o
        np.testing.assert_array_equal(base[n // 3 : n // 3 + n], want)
