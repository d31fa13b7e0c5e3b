"""Device guards: every call runs on the device its input lives on (or the one
``device="cuda:N"`` names), whatever the calling thread's current device, and its results
live there.

- On one device (the simulator too): ``device="cuda:0"`` and ``"cuda"`` parsed and honoured,
  a device that does not exist refused, for NumPy and CUDA inputs and dask chunks.
- On two devices (skipped elsewhere, with the reason): PyTorch, CuPy and Numba inputs on
  ``cuda:1`` while the current device is 0 (and the other way round), repeated calls (the
  kept runners) included; ``device="cuda:1"`` for inputs on ``cuda:0`` and for NumPy inputs
  (copied, results on ``cuda:1``); numba results copied to the host by numba with the
  other device current; repeats into given outputs on the other device; JAX inputs on
  the second GPU; outputs on another device refused; dask arrays with chunks on both
  devices.
"""

import numpy as np
import pytest

import dmlnumba
from dmlnumba import DeviceUnavailableError

from devices import CUDA, SIM, to_device, to_host


def _device_count():
    if not CUDA:
        return 0
    from numba import cuda

    return len(cuda.gpus)


N_DEVICES = _device_count()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs CUDA (a GPU or the simulator)")
needs_two = pytest.mark.skipif(
    not CUDA or SIM or N_DEVICES < 2,
    reason=f"needs two CUDA devices (this process sees {N_DEVICES}"
    f"{', under the simulator' if SIM else ''})",
)

X = np.array([[0.0, 1.5, 0.0, -2.0], [0.0, 0.0, 3.0, 0.0], [4.0, -0.0, 0.0, 5.0]], np.float32)


def _want(x):
    return np.argwhere(x).astype(np.uint32)


def _check_nonzero(r, x):
    count, coords = (to_host(a) for a in r)
    n = int(count[0])
    assert n == np.count_nonzero(x)
    np.testing.assert_array_equal(coords[:n], _want(x))


# ---------------------------------------------------------------- one device


@needs_cuda
@pytest.mark.parametrize("device", ["cuda", "cuda:0", " CUDA:0 "])
def test_numpy_input_on_a_named_device(device):
    _check_nonzero(dmlnumba.nonzero_coordinates(X, device=device), X)
    np.testing.assert_array_equal(to_host(dmlnumba.argwhere(X, device=device)), np.argwhere(X))
    got = to_host(dmlnumba.slice1(X, (0, 0), (3, 4), (-1, 2), device=device))
    np.testing.assert_array_equal(got, X[::-1, ::2])


@needs_cuda
def test_cuda_input_on_its_own_device_is_read_in_place():
    from dmlnumba.gpu import target as target_cuda

    d = to_device(X, "cuda")
    v = target_cuda.as_device_array(d, 0, "f", "input")
    assert v.device == 0 and v.home is None and v.host is None
    assert v.ptr == d.__cuda_array_interface__["data"][0]
    _check_nonzero(dmlnumba.nonzero_coordinates(d, device="cuda:0"), X)
    got = dmlnumba.slice1(d, (0, 0), (3, 4), (1, -1), device="cuda:0")
    np.testing.assert_array_equal(to_host(got), X[:, ::-1])


@needs_cuda
def test_a_device_that_does_not_exist_is_refused():
    n = N_DEVICES
    for f in (
        lambda: dmlnumba.nonzero_coordinates(X, device=f"cuda:{n}"),
        lambda: dmlnumba.argwhere(to_device(X, "cuda"), device=f"cuda:{n}"),
        lambda: dmlnumba.slice1(X, (0, 0), (1, 1), (1, 1), device=f"cuda:{n}"),
    ):
        with pytest.raises(DeviceUnavailableError, match=rf"device 'cuda:{n}' does not exist"):
            f()


@needs_cuda
def test_the_guard_is_a_shared_null_context_on_the_current_device():
    from dmlnumba.gpu import devices, target

    assert devices.on(devices.current_device()) is devices.on(devices.current_device())
    assert target.device_count() == N_DEVICES


@needs_cuda
def test_dask_device_index_is_checked_while_the_graph_is_built():
    da = pytest.importorskip("dask.array")
    x = da.from_array(X, chunks=(1, 4))
    with pytest.raises(ValueError, match=r"cuda:99"):
        dmlnumba.nonzero_coordinates(x, device="cuda:99")


# ---------------------------------------------------------------- two devices


def _other(dev):
    return 1 - dev


def _torch(x, dev):
    torch = pytest.importorskip("torch")
    return torch.as_tensor(x, device=f"cuda:{dev}")


def _cupy(x, dev):
    cupy = pytest.importorskip("cupy")
    with cupy.cuda.Device(dev):
        return cupy.asarray(x)


def _numba(x, dev):
    from numba import cuda

    with cuda.gpus[dev]:
        return cuda.to_device(x)


def _device_of(a):
    """The device a result lives on, by the driver's account of its memory."""
    from dmlnumba.gpu.devices import pointer_device

    return pointer_device(a.__cuda_array_interface__["data"][0])


def _current(dev, lib):
    """The calling thread's current device set to ``dev`` the way ``lib``'s users do."""
    if lib == "torch":
        import torch

        return torch.cuda.device(dev)
    if lib == "cupy":
        import cupy

        return cupy.cuda.Device(dev)
    from numba import cuda

    return cuda.gpus[dev]


MAKERS = {"torch": _torch, "cupy": _cupy, "numba": _numba}


def _check_library(got, lib, dev):
    if lib == "torch":
        import torch

        assert type(got) is torch.Tensor and got.device == torch.device("cuda", dev), got.device
    elif lib == "cupy":
        import cupy

        assert type(got) is cupy.ndarray and got.device.id == dev, got.device
    else:
        from numba.cuda.cudadrv.devicearray import DeviceNDArray

        assert isinstance(got, DeviceNDArray)
    assert _device_of(got) == dev


@needs_two
@pytest.mark.parametrize("lib", ["torch", "cupy", "numba"])
@pytest.mark.parametrize("dev", [1, 0])
def test_input_on_another_device_than_the_current_one(lib, dev):
    """The input on ``dev``, the current device the other: the launches, the
    allocations and the stream are the input's device's, and so are the results;
    repeated calls (kept runners) too.  Before the guards the launch went to the
    current device's context."""
    x = np.arange(4096 * 3, dtype=np.float32).reshape(4096, 3) % 7
    d = MAKERS[lib](x, dev)
    with _current(_other(dev), lib):
        for _ in range(3):  # the first call, then the kept runner's
            count, coords = dmlnumba.nonzero_coordinates(d)
            _check_library(count, lib, dev)
            _check_library(coords, lib, dev)
            _check_nonzero((count, coords), x)
            s = dmlnumba.slice1(d, (5, 0), (4000, 3), (-3, 2))
            _check_library(s, lib, dev)
            np.testing.assert_array_equal(to_host(s), x[5:4005][::-3, ::2])
        a = dmlnumba.argwhere(d)
        _check_library(a, lib, dev)
        np.testing.assert_array_equal(to_host(a), np.argwhere(x))
        # Caller-given outputs on the input's device.
        out = MAKERS[lib](np.zeros((4000 // 3 + 1, 2), np.float32), dev)
        dmlnumba.slice1(d, (5, 0), (4000, 3), (-3, 2), out=out)
        np.testing.assert_array_equal(to_host(out), x[5:4005][::-3, ::2])
        from dmlnumba.gpu.target import synchronize

        synchronize(0, dev)


@needs_two
@pytest.mark.parametrize("lib", ["numba", "numpy"])
@pytest.mark.parametrize("dev", [0, 1])
def test_numba_results_are_read_with_the_other_device_current(lib, dev):
    """numba results (a numba input's, a NumPy input's sent to a GPU) live in their
    device's stream-ordered pool.  numba copies them to the host with another device
    current, as it copies its own arrays, where that device has peer access: the pool
    is opened to it (before, ``CUDA_ERROR_INVALID_VALUE``); first calls and kept
    runners."""
    from cuda.bindings import driver
    from numba import cuda

    if not driver.cuDeviceCanAccessPeer(_other(dev), dev)[1]:
        pytest.skip(f"cuda:{_other(dev)} has no peer access to cuda:{dev}")
    d = X if lib == "numpy" else _numba(X, dev)
    kw = {"device": f"cuda:{dev}"} if lib == "numpy" else {}
    for _ in range(3):
        count, coords = dmlnumba.nonzero_coordinates(d, **kw)
        s = dmlnumba.slice1(d, (0, 0), (3, 4), (1, -1), **kw)
        a = dmlnumba.argwhere(d, **kw)
        with cuda.gpus[_other(dev)]:
            n = int(count.copy_to_host()[0])
            assert n == np.count_nonzero(X)
            np.testing.assert_array_equal(coords.copy_to_host()[:n], _want(X))
            np.testing.assert_array_equal(s.copy_to_host(), X[:, ::-1])
            np.testing.assert_array_equal(a.copy_to_host(), np.argwhere(X))


@needs_two
@pytest.mark.parametrize("lib", ["torch", "cupy", "numba", "numpy"])
def test_device_names_another_device_the_input_is_copied(lib):
    """``device="cuda:1"``: an input on cuda:0 (or on the host) copied to cuda:1, the
    results there, whatever the current device."""
    base = np.arange(5 * 6 * 8, dtype=np.float32).reshape(5, 6, 8) % 5
    if lib == "numpy":  # a reversed, strided view
        d = want_x = base[::-1, :, ::2]
    else:  # a strided view of an array on cuda:0: copied with its strides
        d = MAKERS[lib](base, 0)[:, :, ::2]
        want_x = base[:, :, ::2]
    for current in (0, 1):
        with _current(current, "numba"):
            count, coords = dmlnumba.nonzero_coordinates(d, device="cuda:1")
            out_lib = "numba" if lib == "numpy" else lib
            _check_library(coords, out_lib, 1)
            _check_nonzero((count, coords), want_x)
            s = dmlnumba.slice1(d, (0, 1, 0), (5, 4, 4), (1, 2, -1), device="cuda:1")
            _check_library(s, out_lib, 1)
            np.testing.assert_array_equal(to_host(s), want_x[:, 1:5:2, 3::-1])
            a = dmlnumba.argwhere(d, device="cuda:1")
            np.testing.assert_array_equal(to_host(a), np.argwhere(want_x))


@needs_two
def test_copy_from_another_device_is_ordered_after_its_producer():
    """The copy of a cuda:0 tensor to cuda:1 waits for the work queued on cuda:0's current
    stream (a long spin, then the fill): with no synchronization by the caller, it reads
    the filled values, not the zeros before."""
    torch = pytest.importorskip("torch")
    x = torch.zeros(1 << 20, device="cuda:0")
    with torch.cuda.device(0):
        torch.cuda._sleep(500_000_000)  # about 0.3 s on cuda:0's current stream
        x.fill_(1.0)
    count, _ = dmlnumba.nonzero_coordinates(x, device="cuda:1")
    assert int(count.cpu()[0]) == 1 << 20


@needs_two
def test_outputs_on_another_device_are_refused():
    torch = pytest.importorskip("torch")
    t = _torch(X, 1)
    out = torch.empty((3, 4), dtype=torch.float32, device="cuda:0")
    with pytest.raises(ValueError, match=r"out is on cuda:0, and the call runs on cuda:1"):
        dmlnumba.slice1(t, (0, 0), (3, 4), (1, 1), out=out)
    oc = torch.empty(1, dtype=torch.uint32, device="cuda:0")
    ox = torch.empty((12, 2), dtype=torch.uint32, device="cuda:1")
    with pytest.raises(ValueError, match=r"out_count is on cuda:0"):
        dmlnumba.nonzero_coordinates(t, out_count=oc, out_coordinates=ox)


@needs_two
@pytest.mark.parametrize("lib", ["torch", "cupy", "numba"])
def test_repeats_into_outputs_on_another_device_than_the_current_one(lib):
    """Input and given outputs on cuda:1, cuda:0 current: the repeats (the runners the
    first calls kept) write the outputs there and return them."""
    w = ((0, 0), (3, 4), (-1, 2))
    with _current(0, lib):
        for _ in range(3):
            d = MAKERS[lib](X, 1)
            out = MAKERS[lib](np.zeros((3, 2), np.float32), 1)
            oc = MAKERS[lib](np.zeros(1, np.uint32), 1)
            ox = MAKERS[lib](np.zeros((12, 2), np.uint32), 1)
            assert dmlnumba.slice1(d, *w, out=out) is out
            np.testing.assert_array_equal(to_host(out), X[::-1, ::2])
            count, coords = dmlnumba.nonzero_coordinates(d, out_count=oc, out_coordinates=ox)
            assert count is oc and coords is ox
            _check_nonzero((oc, ox), X)


@needs_two
def test_jax_input_on_another_device_than_the_current_one():
    """A JAX array on the second GPU, the first current: results on the JAX array's GPU,
    first calls and kept runners.  The first GPU is made current as PyTorch does it:
    JAX's own work makes its GPU current, which breaks numba's context stack."""
    jax = pytest.importorskip("jax")
    pytest.importorskip("torch")
    gpus = [g for g in jax.devices() if g.platform == "gpu"]
    if len(gpus) < 2:
        pytest.skip("JAX sees fewer than two GPUs")
    x = jax.device_put(X, gpus[1])
    with _current(0, "torch"):
        for _ in range(3):
            count, coords = dmlnumba.nonzero_coordinates(x)
            assert coords.devices() == {gpus[1]}
            _check_nonzero((np.asarray(count), np.asarray(coords)), X)
            s = dmlnumba.slice1(x, (0, 0), (3, 4), (1, -1))
            assert s.devices() == {gpus[1]}
            np.testing.assert_array_equal(np.asarray(s), X[:, ::-1])
            np.testing.assert_array_equal(np.asarray(dmlnumba.argwhere(x)), np.argwhere(X))


@needs_two
def test_calls_from_a_new_thread_on_device_1():
    """A thread with no current context (a dask worker's) calling on cuda:1 inputs."""
    import threading

    d = _torch(X, 1)
    dmlnumba.nonzero_coordinates(d)  # the runner made on the main thread
    got = []
    th = threading.Thread(target=lambda: got.append(dmlnumba.nonzero_coordinates(d)))
    th.start()
    th.join()
    _check_library(got[0][1], "torch", 1)
    _check_nonzero(got[0], X)


def _two_device_chunks(a, chunks):
    """A CuPy-chunked dask array of ``a`` whose chunks alternate between cuda:0 and cuda:1."""
    import cupy
    import dask.array as da

    def put(block, block_info=None):
        dev = sum(block_info[None]["chunk-location"]) % 2
        with cupy.cuda.Device(dev):
            return cupy.asarray(block)

    x = da.from_array(a, chunks=chunks)
    return x.map_blocks(put, meta=cupy.empty((0,) * a.ndim, a.dtype))


def _blocks_to_host(y):
    """Each result chunk copied to the host where it is (chunks on several devices
    cannot be concatenated on one)."""
    import cupy

    return y.map_blocks(cupy.asnumpy, meta=np.empty((0,) * y.ndim, y.dtype))


@needs_two
@pytest.mark.parametrize("scheduler", ["threads", "sync"])
def test_dask_chunks_on_two_devices(scheduler):
    pytest.importorskip("cupy")
    pytest.importorskip("dask.array")
    import dask

    rng = np.random.default_rng(0)
    a = rng.random((64, 33, 10), dtype=np.float32)
    a[a < 0.7] = 0
    x = _two_device_chunks(a, (8, 33, 10))
    count, coords = dmlnumba.nonzero_coordinates(x)
    c, xy = dask.compute(count, _blocks_to_host(coords), scheduler=scheduler)
    assert int(c[0]) == np.count_nonzero(a)
    np.testing.assert_array_equal(xy, np.argwhere(a))
    # max_count: the first 100 rows, from blocks on both devices
    count, coords = dmlnumba.nonzero_coordinates(x, max_count=100)
    c, xy = dask.compute(count, _blocks_to_host(coords), scheduler=scheduler)
    assert int(c[0]) == np.count_nonzero(a)
    np.testing.assert_array_equal(xy, np.argwhere(a)[:100])
    # slice1 whose output blocks read chunks of both devices.
    s = dmlnumba.slice1(x, (0, 0, 0), (64, 33, 10), (-3, 2, 1))
    np.testing.assert_array_equal(
        dask.compute(_blocks_to_host(s), scheduler=scheduler)[0], a[::-3, ::2]
    )


@needs_two
def test_dask_device_index_moves_every_chunk_there():
    cupy = pytest.importorskip("cupy")
    pytest.importorskip("dask.array")
    import dask.array as da

    a = (np.arange(40 * 6, dtype=np.float32).reshape(40, 6) % 3).astype(np.float32)
    for x in (da.from_array(a, chunks=(8, 6)), _two_device_chunks(a, (8, 6))):
        count, coords = dmlnumba.nonzero_coordinates(x, device="cuda:1")
        devs = coords.map_blocks(
            lambda b: np.array([[b.device.id]]), chunks=(1, 1), meta=np.empty((0, 0))
        ).compute(scheduler="threads")
        assert set(devs.ravel().tolist()) == {1}
        got = _blocks_to_host(coords).compute(scheduler="threads")
        np.testing.assert_array_equal(got, np.argwhere(a))
        assert int(cupy.asnumpy(count.compute(scheduler="threads"))[0]) == np.count_nonzero(a)
