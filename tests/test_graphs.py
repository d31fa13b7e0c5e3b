"""On a real GPU: CUDA graph capture (PyTorch and CuPy; slice1, slice_grad and
nonzero_coordinates), torch.compile with CUDA
graphs, opcheck on CUDA tensors, JAX CUDA arrays, and the refusals of what a graph
cannot hold.  Each capture test replays 200 times with the input rewritten
between replays (0%, 100% and random densities) and ordinary calls on the same
stream in between, every result checked, under a timeout (a hang fails it)."""

import faulthandler
import sys

import numpy as np
import pytest

import dmlnumba

from devices import jax_gpu, needs_real_gpu

pytestmark = needs_real_gpu

REPLAYS = 200
SHAPE = (64, 1000)  # 64,000 elements: several tiles, so the look-back runs


@pytest.fixture(autouse=True)
def _timeout():
    """Dump the stacks and fail the process if a test hangs (a wrong look-back waits
    forever)."""
    faulthandler.dump_traceback_later(300, exit=True, file=sys.stderr)
    yield
    faulthandler.cancel_dump_traceback_later()


def _densities(rng, n):
    """The replays' inputs: 0%, 100%, then random densities."""
    for k in range(n):
        if k % 3 == 0:
            yield 0.0
        elif k % 3 == 1:
            yield 1.0
        else:
            yield float(rng.random())


def _fill(rng, host, p):
    host[...] = rng.standard_normal(host.shape).astype(np.float32) * (rng.random(host.shape) < p)


def _check_nonzero(x, count, coords, max_count=None):
    want = np.argwhere(x)
    assert int(count[0]) == len(want)
    rows = len(want) if max_count is None else min(len(want), max_count)
    np.testing.assert_array_equal(np.asarray(coords[:rows]), want[:rows])


def _grad(host):
    """slice_grad of the window's slice1: the window's elements kept, the rest 0."""
    g = np.zeros_like(host)
    g[:, 3:900:2] = host[:, 3:900:2]
    return g


def _window(shape):
    return dmlnumba.window(shape, np.s_[::-1, 3:900:2])


def test_torch_cuda_graph_capture_and_replay():
    """nonzero_coordinates (default, preallocated and max_count outputs) and slice1,
    captured in one torch.cuda.graph, replayed with the input rewritten between
    replays and ordinary calls on the same stream in between: every result exact."""
    import torch

    rng = np.random.default_rng(0)
    host = np.zeros(SHAPE, np.float32)
    _fill(rng, host, 0.3)
    x = torch.from_numpy(host).cuda()
    n = x.numel()
    w = _window(SHAPE)
    pre_count = torch.empty(1, dtype=torch.uint32, device="cuda")
    pre_coords = torch.empty((n, 2), dtype=torch.uint32, device="cuda")
    pre_grad = torch.full((SHAPE[0], SHAPE[1] + 3), 7.0, device="cuda")[:, 2:-1]
    limit = 1000

    def body():
        c1, x1 = dmlnumba.nonzero_coordinates(x)
        dmlnumba.nonzero_coordinates(x, out_count=pre_count, out_coordinates=pre_coords)
        c3, x3 = dmlnumba.nonzero_coordinates(x, dtype=np.int64, max_count=limit)
        s = dmlnumba.slice1(x, *w)
        g = dmlnumba.slice_grad(s, SHAPE, *w[:3])
        dmlnumba.slice_grad(s, SHAPE, *w[:3], out=pre_grad)  # a strided out: zeroed by a copy
        return c1, x1, c3, x3, s, g

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up outside the capture (compiles the kernels)
        body()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        outs = body()
    for p in _densities(rng, REPLAYS):
        _fill(rng, host, p)
        x.copy_(torch.from_numpy(host))
        g.replay()
        # an ordinary call on the same stream between replays
        c0, x0 = dmlnumba.nonzero_coordinates(x)
        c1, x1, c3, x3, s, sg = (o.cpu().numpy() for o in outs)
        _check_nonzero(host, c1, x1)
        _check_nonzero(host, pre_count.cpu().numpy(), pre_coords.cpu().numpy())
        _check_nonzero(host, c3, x3, limit)
        _check_nonzero(host, c0.cpu().numpy(), x0.cpu().numpy())
        np.testing.assert_array_equal(s, host[::-1, 3:900:2])
        np.testing.assert_array_equal(sg, _grad(host))
        np.testing.assert_array_equal(pre_grad.cpu().numpy(), _grad(host))


def test_cupy_stream_capture_and_replay():
    """The same for a CuPy stream capture (default, preallocated, max_count, slice1)."""
    import cupy as cp

    rng = np.random.default_rng(1)
    host = np.zeros(SHAPE, np.float32)
    _fill(rng, host, 0.3)
    x = cp.asarray(host)
    n = x.size
    w = _window(SHAPE)
    pre_count = cp.empty(1, cp.uint32)
    pre_coords = cp.empty((n, 2), cp.uint32)
    pre_grad = cp.full(SHAPE, 7.0, cp.float32)
    limit = 1000
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:

        def body():
            c1, x1 = dmlnumba.nonzero_coordinates(x)
            dmlnumba.nonzero_coordinates(x, out_count=pre_count, out_coordinates=pre_coords)
            c3, x3 = dmlnumba.nonzero_coordinates(x, dtype=np.int64, max_count=limit)
            s = dmlnumba.slice1(x, *w)
            g = dmlnumba.slice_grad(s, SHAPE, *w[:3])
            dmlnumba.slice_grad(s, SHAPE, *w[:3], out=pre_grad)  # zeroed by a memset
            return c1, x1, c3, x3, s, g

        body()
        stream.synchronize()
        stream.begin_capture()
        outs = body()
        graph = stream.end_capture()
        for p in _densities(rng, REPLAYS):
            _fill(rng, host, p)
            x.set(host, stream=stream)
            graph.launch(stream)
            c0, x0 = dmlnumba.nonzero_coordinates(x)  # on the same stream, in between
            stream.synchronize()
            c1, x1, c3, x3, s, sg = (cp.asnumpy(o) for o in outs)
            _check_nonzero(host, c1, x1)
            _check_nonzero(host, cp.asnumpy(pre_count), cp.asnumpy(pre_coords))
            _check_nonzero(host, c3, x3, limit)
            _check_nonzero(host, cp.asnumpy(c0), cp.asnumpy(x0))
            np.testing.assert_array_equal(s, host[::-1, 3:900:2])
            np.testing.assert_array_equal(sg, _grad(host))
            np.testing.assert_array_equal(cp.asnumpy(pre_grad), _grad(host))


def test_what_a_graph_cannot_hold_is_refused():
    """Inside a capture, argwhere (reads the count back) and NumPy inputs (copied from
    the host) raise a ValueError naming the function, and the capture can still end."""
    import torch

    x = torch.ones(100, device="cuda")
    h = np.ones(100, np.float32)
    dmlnumba.argwhere(x)
    g = torch.cuda.CUDAGraph()
    errors = []
    with torch.cuda.graph(g):
        for f in (
            lambda: dmlnumba.argwhere(x),
            lambda: dmlnumba.nonzero_coordinates(h, device="cuda"),
        ):
            try:
                f()
            except ValueError as e:
                errors.append(str(e))
    assert len(errors) == 2
    assert errors[0].startswith("argwhere(): ") and "CUDA graph" in errors[0]
    assert errors[1].startswith("nonzero_coordinates(): ") and "CUDA graph" in errors[1]


@pytest.mark.parametrize("capture", ["torch global", "torch relaxed", "cupy"])
def test_legacy_stream_calls_are_refused_inside_a_capture(capture, monkeypatch):
    """A numba array's call with no ``stream=`` runs on the legacy default stream (as
    does a call given that stream's handle, 0).
    Inside a PyTorch capture its repeats (the runner) broke a global-mode capture
    with a driver error, and in a relaxed one, or CuPy's, they ran at once, missing
    from the graph that replays run.  Now every such call raises a ValueError naming
    its function before it does anything: repeats into new and given outputs, and
    calls of a new layout (the full path, which makes a runner for new outputs and
    writes given ones itself); the capture goes on and replays what it holds."""
    import cupy as cp
    import torch
    from conftest import count_full_calls
    from numba import cuda

    full = count_full_calls(monkeypatch)
    x = cuda.to_device(np.ones(100, np.float32))
    oc, ox = cuda.device_array(1, np.uint32), cuda.device_array((100, 1), np.uint32)
    out = cuda.device_array(100, np.float32)
    calls = {
        "nonzero_coordinates": lambda: dmlnumba.nonzero_coordinates(x),
        "nonzero_coordinates ": lambda: dmlnumba.nonzero_coordinates(
            x, out_count=oc, out_coordinates=ox
        ),
        "slice1": lambda: dmlnumba.slice1(x, (0,), (100,), (-1,)),
        "slice1 ": lambda: dmlnumba.slice1(x, (0,), (100,), (-1,), out=out),
        "slice_grad": lambda: dmlnumba.slice_grad(x, (102,), (1,), (100,), (1,)),
    }
    t = torch.ones(100, device="cuda")  # a PyTorch tensor given the legacy stream's handle
    calls["slice1   "] = lambda: dmlnumba.slice1(t, (0,), (100,), (-1,), stream=0)
    for f in calls.values():  # runners kept, outside the capture
        f()
    kept = len(full)
    fresh = cuda.to_device(np.ones((4, 25), np.float32))  # a layout no call has seen
    fresh_out = cuda.device_array((4, 25), np.float32)
    calls["nonzero_coordinates  "] = lambda: dmlnumba.nonzero_coordinates(fresh)
    calls["slice1  "] = lambda: dmlnumba.slice1(fresh, (0, 0), (4, 25), (1, 1), out=fresh_out)
    calls["argwhere"] = lambda: dmlnumba.argwhere(x)
    errors = []

    def each():
        for name, f in calls.items():
            with pytest.raises(ValueError) as e:
                f()
            errors.append((name.strip(), str(e.value)))

    if capture == "cupy":
        y = cp.zeros(3, cp.float32)
        s = cp.cuda.Stream(non_blocking=True)
        with s:
            s.begin_capture()
            each()
            y += 1
            g = s.end_capture()
        g.launch(stream=s)
        s.synchronize()
        assert float(y[0]) == 1.0
    else:
        y = torch.zeros(3, device="cuda")
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, capture_error_mode=capture.split()[1]):
            each()
            y += 1
        g.replay()
        torch.cuda.synchronize()
        assert float(y[0]) == 1.0
    assert len(full) == kept + 2  # the new layout's calls: the full path; the rest runners
    for name, message in errors:
        assert message.startswith(f"{name}(): ") and "CUDA graph" in message, message


FIRST_CALLS_IN_A_CAPTURE = """
import numpy as np, torch
from numba import cuda
import dmlnumba
h = np.ones(100, np.float32)
x = cuda.to_device(h)  # (numba's own allocation: dmlnumba's pool not yet asked)
g = torch.cuda.CUDAGraph()
errors = []
with torch.cuda.graph(g):
    for f in (
        lambda: dmlnumba.nonzero_coordinates(h, device="cuda"),
        lambda: dmlnumba.nonzero_coordinates(x),
        lambda: dmlnumba.slice1(x, (0,), (100,), (-1,)),
    ):
        try:
            f()
        except ValueError as e:
            errors.append(str(e))
print(len(errors), all("CUDA graph" in e for e in errors))
"""


def test_first_calls_inside_a_capture_are_refused_in_a_new_process():
    """A process's first calls on the legacy stream inside a PyTorch capture: its
    runner's making asked the stream-ordered pool and the look-back scratch first,
    which the capture refused with a driver error (ending it); with the pool made by
    earlier calls the ValueError came.  Now the ValueError comes first either way."""
    import subprocess

    r = subprocess.run(
        [sys.executable, "-c", FIRST_CALLS_IN_A_CAPTURE], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["3", "True"], r.stdout + r.stderr[-3000:]


def test_torch_compile_reduce_overhead_on_cuda():
    """torch.compile(fullgraph=True, mode="reduce-overhead") of a function calling
    both operators: exact over varying inputs (CUDA graphs replayed by PyTorch)."""
    import torch

    def f(x):
        count, coords = dmlnumba.nonzero_coordinates(x)
        window = dmlnumba.slice1(x, (0, 0), (64, 1000), (-1, 2))
        return count, coords, window * 2

    cf = torch.compile(f, fullgraph=True, mode="reduce-overhead")
    rng = np.random.default_rng(2)
    host = np.zeros(SHAPE, np.float32)
    for p in list(_densities(rng, 12)):
        _fill(rng, host, p)
        x = torch.from_numpy(host).cuda()
        count, coords, window = (o.cpu().numpy() for o in cf(x))
        _check_nonzero(host, count, coords)
        np.testing.assert_array_equal(window, host[::-1, ::2] * 2)


def test_opcheck_on_cuda():
    import torch

    import dmlnumba.torch_ops  # noqa: F401

    ops = torch.ops.dmlnumba
    x = torch.randn(5, 7, device="cuda")
    full = torch.ones(3, 4, device="cuda")
    torch.library.opcheck(ops.nonzero_coordinates.default, (full, None, torch.uint32, None))
    k = int((x != 0).sum())
    torch.library.opcheck(ops.nonzero_coordinates.default, (x, 2, torch.int64, k))
    torch.library.opcheck(ops.slice1.default, (x, [1, 0], [4, 7], [-1, 3], None))
    torch.library.opcheck(
        ops.slice1_out.default, (x, [1, 0], [4, 7], [-1, 3], None, x.new_empty(4, 3))
    )


def test_jax_cuda_arrays_in_give_jax_arrays_out():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    dev = jax_gpu()
    rng = np.random.default_rng(4)
    host = (rng.random((30, 40)) < 0.3).astype(np.float32) * 3
    x = jax.device_put(jnp.asarray(host), dev)
    count, coords = dmlnumba.nonzero_coordinates(x)
    assert isinstance(count, jax.Array) and isinstance(coords, jax.Array)
    _check_nonzero(host, np.asarray(count), np.asarray(coords))
    s = dmlnumba.slice1(x, *dmlnumba.window(host.shape, np.s_[::-1, 1::3]))
    assert isinstance(s, jax.Array)
    np.testing.assert_array_equal(np.asarray(s), host[::-1, 1::3])
    np.testing.assert_array_equal(np.asarray(dmlnumba.argwhere(x)), np.argwhere(host))


def test_jax_cuda_arrays_are_refused_inside_a_capture():
    """A JAX array's calls run on the legacy default stream: inside a PyTorch capture
    its repeats (the runner) and a new layout's call (the full path, whose wait for
    JAX's work would end the capture) raise the ValueError naming the function (see
    test_legacy_stream_calls_are_refused_inside_a_capture), and the capture ends."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import torch

    x = jax.device_put(jnp.ones((30, 40), jnp.float32), jax_gpu())
    calls = {
        "nonzero_coordinates": lambda: dmlnumba.nonzero_coordinates(x),
        "slice1": lambda: dmlnumba.slice1(x, (0, 0), (30, 40), (-1, 1)),
    }
    for f in calls.values():  # runners kept, outside the capture
        f()
    fresh = jax.device_put(jnp.ones((7, 11), jnp.float32), jax_gpu())  # a new layout
    calls["argwhere"] = lambda: dmlnumba.argwhere(fresh)  # (the full path: its wait first)
    g = torch.cuda.CUDAGraph()
    y = torch.zeros(3, device="cuda")
    with torch.cuda.graph(g):
        for name, f in calls.items():
            with pytest.raises(ValueError, match=rf"^{name}\(\): .*CUDA graph"):
                f()
        y += 1
    g.replay()
    torch.cuda.synchronize()
    assert float(y[0]) == 1.0
