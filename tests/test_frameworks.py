"""On a real GPU: CuPy arrays, PyTorch tensors and Numba device arrays as inputs, with
their own strides (reversed, non-contiguous, permuted, broadcast), against NumPy."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dmlnumba

from devices import jax_gpu, needs_real_gpu
from strategies import DML_DTYPES, NONZERO_DTYPES, arrays, bits, slice1_reference, windows

pytestmark = needs_real_gpu

# PyTorch holds these fully (its uint16/32/64 support is partial); CuPy holds them all.
TORCH_DTYPES = ["float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8"]


def _span(x):
    """The bytes ``x`` spans, contiguous, and the element offset of ``x[0, ...]`` in them."""
    from dmlnumba.layout import extent

    low, span, base, _ = extent(x.shape, x.strides, x.itemsize)
    flips = tuple(slice(None, None, -1) if s < 0 else slice(None) for s in x.strides)
    flat = np.lib.stride_tricks.as_strided(
        x[flips] if low else x, shape=(span,), strides=(x.itemsize,)
    )
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
    buf = torch.as_tensor(np.array(flat.view(np.uint8) if x.dtype == bool else flat), device="cuda")
    if x.dtype == bool:
        buf = buf.view(torch.bool)
    return torch.as_strided(buf, x.shape, [s // x.itemsize for s in x.strides], base)


def _host(a):
    from dmlnumba.gpu import target as target_cuda

    return np.ascontiguousarray(target_cuda.to_host(a))


def _library_of(d):
    """The library whose arrays dmlnumba must return for input ``d``."""
    mod = type(d).__module__.split(".")[0]
    return {"torch": "torch", "cupy": "cupy"}.get(mod, "numba")


def _check_library(got, d):
    """``got`` is an array of ``d``'s library, on ``d``'s device."""
    lib = _library_of(d)
    if lib == "torch":
        import torch

        assert type(got) is torch.Tensor and got.device == d.device, (type(got), got.device)
    elif lib == "cupy":
        import cupy

        assert type(got) is cupy.ndarray and got.device == d.device
    else:
        from numba.cuda.cudadrv.devicearray import DeviceNDArray

        assert isinstance(got, DeviceNDArray), type(got)


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
    _check_library(got, d)
    np.testing.assert_array_equal(bits(_host(got)), bits(slice1_reference(x, *params)))


@given(data=st.data())
def test_nonzero_on_framework_arrays(data):
    x, d = _frameworks(data, NONZERO_DTYPES)
    count, coords = dmlnumba.nonzero_coordinates(d)
    _check_library(count, d)  # the count stays on the device
    _check_library(coords, d)
    want = np.argwhere(x)
    n = int(_host(count)[0])
    assert n == len(want)
    np.testing.assert_array_equal(_host(coords)[:n], want)


@given(data=st.data())
def test_argwhere_on_framework_arrays(data):
    x, d = _frameworks(data, NONZERO_DTYPES)
    got = dmlnumba.argwhere(d)
    _check_library(got, d)
    np.testing.assert_array_equal(_host(got).reshape(-1, x.ndim), np.argwhere(x))


def test_numpy_sent_to_the_gpu_gives_numba_arrays():
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    x = np.array([[0, 1.5], [-0.0, np.nan]], np.float32)
    count, coords = dmlnumba.nonzero_coordinates(x, device="cuda")
    assert isinstance(count, DeviceNDArray) and isinstance(coords, DeviceNDArray)
    assert int(count.copy_to_host()[0]) == 2
    np.testing.assert_array_equal(coords.copy_to_host()[:2], [[0, 1], [1, 1]])
    got = dmlnumba.slice1(x, (0, 0), (2, 2), (-1, 1), device="cuda")
    assert isinstance(got, DeviceNDArray)
    np.testing.assert_array_equal(bits(got.copy_to_host()), bits(x[::-1]))


def test_torch_tensors_out_for_torch_tensors_in_on_both_devices():
    torch = pytest.importorskip("torch")
    for dev in ("cpu", "cuda"):
        t = torch.tensor([[0.0, 2.0, 0.0], [3.0, 0.0, -0.0]], device=dev)
        count, coords = dmlnumba.nonzero_coordinates(t)
        assert type(count) is torch.Tensor and count.device == t.device
        assert count.dtype == torch.uint32 and tuple(coords.shape) == (6, 2)
        assert int(count.to(torch.int64)[0]) == 2
        np.testing.assert_array_equal(coords.to(torch.int64).cpu().numpy()[:2], [[0, 1], [1, 0]])
        a = dmlnumba.argwhere(t)
        assert type(a) is torch.Tensor and a.dtype == torch.int64 and a.device == t.device
        np.testing.assert_array_equal(a.cpu().numpy(), [[0, 1], [1, 0]])
        s = dmlnumba.slice1(t, (0, 0), (2, 3), (1, -2))
        assert type(s) is torch.Tensor and s.device == t.device
        np.testing.assert_array_equal(s.cpu().numpy(), t.cpu().numpy()[:, ::-2])
    # A CUDA tensor computed on the CPU comes back as a CPU tensor, and the reverse.
    t = torch.tensor([0.0, 1.0], device="cuda")
    assert dmlnumba.slice1(t, (0,), (2,), (1,), device="cpu").device.type == "cpu"
    assert dmlnumba.slice1(t.cpu(), (0,), (2,), (1,), device="cuda").device.type == "cuda"


def _spin_kernel():
    """A CuPy kernel that keeps its stream busy for about ``ns`` nanoseconds."""
    import cupy

    return cupy.RawKernel(
        r"""
    extern "C" __global__ void spin(long long ns) {
        long long t0 = clock64();
        while (clock64() - t0 < ns) { }
    }""",
        "spin",
    )


def _producer(lib, want, cycles):
    """A side stream's producer of ``want`` (float32) for the stream-order tests, in
    library ``lib``: ``(x, side, ctx, spin, copy)``, ``x`` zeros, ``side`` a
    non-blocking stream, ``ctx()`` its library context, ``spin()`` about ``cycles``
    clock cycles of a kernel on the current stream, ``copy()`` ``want`` into ``x`` there."""
    n = len(want)
    if lib == "torch":
        torch = pytest.importorskip("torch")
        src = torch.as_tensor(want, device="cuda")
        x = torch.zeros(n, device="cuda")
        side = torch.cuda.Stream()
        return (
            x,
            side,
            lambda: torch.cuda.stream(side),
            lambda: torch.cuda._sleep(cycles),
            lambda: x.copy_(src),
        )
    cupy = pytest.importorskip("cupy")
    src = cupy.asarray(want)
    x = cupy.zeros(n, cupy.float32)
    side = cupy.cuda.Stream(non_blocking=True)
    k = _spin_kernel()
    return (
        x,
        side,
        lambda: side,
        lambda: k((1,), (1,), (np.int64(cycles),)),
        lambda: x.__setitem__(Ellipsis, src),
    )


@pytest.mark.parametrize("lib", ["torch", "cupy"])
@pytest.mark.parametrize("explicit", [False, True])
def test_calls_are_ordered_on_the_callers_stream(lib, explicit):
    """A long producer on a side stream, then the calls with no synchronization in
    between: a call that ran on any other stream would read the zeros the producer
    has not yet overwritten (side streams are non-blocking, so the legacy default
    stream does not wait for them)."""
    n = 1 << 20
    want = np.zeros(n, np.float32)
    want[3::7] = 1.5
    x, side, ctx, spin, copy = _producer(lib, want, 500_000_000)  # (about 0.3 s)
    kw = {"stream": side} if explicit else {}
    with ctx():
        spin()
        copy()
        count, coords = dmlnumba.nonzero_coordinates(x, **kw)
        arg = dmlnumba.argwhere(x, **kw)  # reads the count back: waits for its stream
        window = dmlnumba.slice1(x, (0,), (n,), (-1,), **kw)
    side.synchronize()
    expect = np.argwhere(want)
    assert int(_host(count).astype(np.int64)[0]) == len(expect)
    np.testing.assert_array_equal(_host(coords)[: len(expect)], expect)
    np.testing.assert_array_equal(_host(arg), expect)
    np.testing.assert_array_equal(_host(window), want[::-1])


def test_explicit_stream_outside_the_current_one():
    """``stream=`` names a stream that is not current: outputs are allocated for it."""
    torch = pytest.importorskip("torch")
    want = np.zeros(1 << 16, np.float32)
    want[::5] = 2.0
    src = torch.as_tensor(want, device="cuda")
    side = torch.cuda.Stream()
    x = torch.zeros_like(src)
    with torch.cuda.stream(side):
        torch.cuda._sleep(500_000_000)
        x.copy_(src)
    count, coords = dmlnumba.nonzero_coordinates(x, stream=side)
    side.synchronize()
    assert int(count.to(torch.int64)[0]) == np.count_nonzero(want)


@pytest.mark.parametrize("lib", ["torch", "cupy"])
def test_repeats_with_a_stream_take_its_runner_in_its_order(lib, monkeypatch):
    """Repeated calls with ``stream=`` (the stream, or its raw handle) take the runner
    their first call kept, bound to that stream: after a long producer on it (not the
    current stream) and with no synchronization, each repeat reads the producer's
    data, into new and given outputs.  A new output's block is PyTorch's allocator's
    for that stream (the stream of its segment; CuPy's pool names none: its arrays
    are allocated by the same step, inside CuPy's context of the stream)."""
    from conftest import count_full_calls

    full = count_full_calls(monkeypatch)
    n = 1 << 16
    want = np.zeros(n, np.float32)
    want[3::7] = 1.5
    x, side, ctx, spin, copy = _producer(lib, want, 100_000_000)
    if lib == "torch":
        import torch

        handle, zero, i64 = side.cuda_stream, x.zero_, torch.int64
        new = lambda shape, dt: torch.empty(shape, dtype=dt, device="cuda")  # noqa: E731
    else:
        import cupy

        handle, zero, i64 = side.ptr, (lambda: x.fill(0)), np.int64
        new = cupy.empty
    oc, ox, out = new((1,), i64), new((n, 1), i64), new((n,), x.dtype)
    expect = np.argwhere(want)
    grad_want = np.zeros(n + 2, np.float32)
    grad_want[1:-1] = want
    for _ in range(2):
        for s in (side, handle):
            with ctx():
                zero()
                spin()
                copy()
            count, coords = dmlnumba.nonzero_coordinates(x, stream=s)
            window = dmlnumba.slice1(x, (0,), (n,), (-1,), stream=s)
            dmlnumba.nonzero_coordinates(
                x, dtype=np.int64, out_count=oc, out_coordinates=ox, stream=s
            )
            dmlnumba.slice1(x, (0,), (n,), (1,), out=out, stream=s)
            grad = dmlnumba.slice_grad(x, (n + 2,), (1,), (n,), (1,), stream=s)
            side.synchronize()
            assert int(_host(count).astype(np.int64)[0]) == len(expect)
            np.testing.assert_array_equal(_host(coords)[: len(expect)], expect)
            np.testing.assert_array_equal(_host(window), want[::-1])
            assert int(_host(oc)[0]) == len(expect)
            np.testing.assert_array_equal(_host(ox)[: len(expect)], expect)
            np.testing.assert_array_equal(_host(out), want)
            np.testing.assert_array_equal(_host(grad), grad_want)
    assert len(full) == 5  # each operator's first call into new outputs, and into given ones
    if lib == "torch":  # the block's segment is the side stream's in PyTorch's allocator
        window = dmlnumba.slice1(x, (0,), (n,), (-1,), stream=side)
        p = window.data_ptr()
        (segment,) = [
            g
            for g in torch.cuda.memory_snapshot()
            if g["address"] <= p < g["address"] + g["total_size"]
        ]
        assert segment["stream"] == side.cuda_stream
    assert len(full) == 5


def test_torch_current_stream_query_agrees_with_the_public_one():
    """The fast query of PyTorch's current stream gives the handle that
    ``torch.cuda.current_stream(i).cuda_stream`` gives: on the default stream, inside
    ``torch.cuda.stream`` blocks (nested ones included), and after them."""
    torch = pytest.importorskip("torch")
    from dmlnumba.gpu.views import torch_current_stream

    fast = torch_current_stream(torch)
    i = torch.cuda.current_device()

    def same():
        assert fast(i) == torch.cuda.current_stream(i).cuda_stream

    same()
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    with torch.cuda.stream(a):
        same()
        assert fast(i) == a.cuda_stream
        with torch.cuda.stream(b):
            assert fast(i) == b.cuda_stream
        same()
    same()


@pytest.mark.parametrize("lib", ["torch", "cupy"])
def test_repeated_default_calls_read_each_input(lib):
    """Repeated calls of one layout take the cached path: each reads its own input
    and gets its own outputs."""
    rng = np.random.default_rng(5)
    hosts = [
        np.where(rng.random((3, 40, 7)) < p, rng.standard_normal((3, 40, 7)), 0).astype(np.float32)
        for p in (0.1, 0.9, 0.0, 0.5)
    ]
    if lib == "torch":
        torch = pytest.importorskip("torch")
        devs = [torch.as_tensor(h, device="cuda") for h in hosts]
    else:
        cupy = pytest.importorskip("cupy")
        devs = [cupy.asarray(h) for h in hosts]
    w = dmlnumba.window(hosts[0].shape, np.s_[1:, ::-3, ::2])
    results = [
        (dmlnumba.nonzero_coordinates(d), dmlnumba.slice1(d, *w), dmlnumba.argwhere(d))
        for d in devs * 2
    ]
    for h, ((count, coords), window, arg) in zip(hosts * 2, results):
        want = np.argwhere(h)
        assert int(_host(count).astype(np.int64)[0]) == len(want)
        np.testing.assert_array_equal(_host(coords)[: len(want)], want)
        np.testing.assert_array_equal(_host(arg).reshape(-1, 3), want)
        np.testing.assert_array_equal(_host(window), h[1:, ::-3, ::2])
        _check_library(window, devs[0])


def test_torch_cpu_tensors_as_outputs():
    """A PyTorch CPU tensor as ``out=`` is written in place and returned; one that
    requires grad (the writes are not differentiable) is a TypeError naming the
    parameter."""
    torch = pytest.importorskip("torch")
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    out = torch.full((3, 2), -1.0)
    got = dmlnumba.slice1(t, (0, 0), (3, 4), (-1, 2), out=out)
    assert got is out
    np.testing.assert_array_equal(out.numpy(), t.numpy()[::-1, ::2])
    count = torch.zeros(1, dtype=torch.int64)
    coords = torch.zeros((12, 2), dtype=torch.int64)
    dmlnumba.nonzero_coordinates(t, dtype=np.int64, out_count=count, out_coordinates=coords)
    assert int(count[0]) == 11
    np.testing.assert_array_equal(coords.numpy()[:11], np.argwhere(t.numpy()))
    bad = torch.zeros((3, 2), requires_grad=True)
    with pytest.raises(TypeError, match=r"^slice1\(\): out requires grad"):
        dmlnumba.slice1(t, (0, 0), (3, 4), (-1, 2), out=bad)
    assert not bad.detach().any()


def test_jax_gpu_repeats_keep_a_runner():
    """JAX arrays on a GPU: repeated calls of one layout take the runner the first call
    kept (the input read once JAX's work is done, new results handed back through
    DLPack): each call's own results, JAX arrays on the input's GPU, NumPy's answers."""
    jax = pytest.importorskip("jax")
    from dmlnumba import keys

    gpu = jax_gpu()
    rng = np.random.default_rng(7)
    w = dmlnumba.window((6, 40), np.s_[1:, ::-3])
    for _ in range(3):
        h = np.where(rng.random((6, 40)) < 0.4, rng.standard_normal((6, 40)), 0).astype(np.float32)
        a = jax.device_put(h, gpu)
        count, coords = dmlnumba.nonzero_coordinates(a)
        sl = dmlnumba.slice1(a, *w)
        for r in (count, coords, sl):
            assert isinstance(r, jax.Array) and r.devices() == {gpu}
        want = np.argwhere(h)
        assert int(np.asarray(count)[0]) == len(want)
        np.testing.assert_array_equal(np.asarray(coords)[: len(want)], want)
        np.testing.assert_array_equal(np.asarray(sl), h[1:, ::-3])
    key, run = keys.nonzero("nonzero_coordinates", a, None, np.uint32, None, None, None)
    assert run is not None
