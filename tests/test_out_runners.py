"""Repeated calls into preallocated outputs (``out=``, ``out_count=``,
``out_coordinates=``) take the runner their first call kept, under a key of the
outputs' layouts (:func:`dmlnumba.layouts.out_layout`).  Every check that the layouts
do not decide still runs on such a repeat, before anything is written: an output
that now overlaps the input (copied correctly), outputs that now overlap each other,
a NumPy output made read-only, a PyTorch output that now requires grad or is an
inference tensor, an output on another GPU.  Each test makes the first call, checks
that the runner was kept, then makes the repeat that must raise or copy correctly.

Where: ``cpu`` (NumPy inputs, NumPy or PyTorch CPU outputs) always; ``torch``,
``cupy`` and ``numba`` (inputs and outputs of that library on a GPU) on a real GPU
(the simulator's calls keep no CUDA runner)."""

import numpy as np
import pytest

import dmlnumba
from dmlnumba import keys

from devices import SIM, device_pointer, needs_real_gpu

torch = pytest.importorskip("torch")

GPU = [needs_real_gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")]
LIBS = [
    "numpy",
    "cpu-torch",
    pytest.param("torch", marks=GPU),
    pytest.param("cupy", marks=GPU),
    pytest.param("numba", marks=GPU),
]
TORCH_LIBS = ["cpu-torch", pytest.param("torch", marks=GPU)]


class Lib:
    """Arrays of one kind: ``input`` (an input made from a host array), ``out`` (an
    output over the same memory as an array ``input`` made), ``host`` (back to
    NumPy)."""

    def __init__(self, name):
        self.name = name
        if name in ("cupy", "numba"):
            pytest.importorskip(name if name == "cupy" else "numba.cuda")

    def input(self, h):
        if self.name in ("numpy", "cpu-torch"):
            return h.copy()
        if self.name == "torch":
            return torch.from_numpy(h.copy()).cuda()
        if self.name == "cupy":
            import cupy

            return cupy.asarray(h)
        from numba import cuda

        return cuda.to_device(h)

    def out(self, a):
        """An output over ``a``'s memory (``a`` of :meth:`input`)."""
        return torch.from_numpy(a) if self.name == "cpu-torch" else a

    def host(self, a):
        if isinstance(a, np.ndarray):
            return a
        if isinstance(a, torch.Tensor):
            return a.cpu().numpy()
        if self.name == "cupy":
            return a.get()
        return a.copy_to_host()


def _nonzero(x, oc, ox):
    return dmlnumba.nonzero_coordinates(x, dtype=np.int64, out_count=oc, out_coordinates=ox)


def _nonzero_kept(x, oc, ox):
    return keys.nonzero("nonzero_coordinates", x, None, np.int64, None, None, None, oc, ox)[1]


def _slice_kept(x, params, out):
    return keys.window("slice1", x, *params, None, out, None, None)[1]


def _values(n, seed):
    rng = np.random.default_rng(seed)
    h = rng.integers(0, 3, n).astype(np.int64)
    h[h == 2] = 0
    return h


def _want_nonzero(h, n):
    nz = np.flatnonzero(h)
    return len(nz), nz[:n]


# ------------------------------------------------------------------ the runner is kept


@pytest.mark.parametrize("lib", LIBS)
def test_repeat_into_outputs_takes_the_runner(lib):
    """Was: no runner for calls into given outputs (every call validated in full)."""
    L = Lib(lib)
    for seed in range(3):
        h = _values(1000, seed)
        buf = L.input(np.zeros(1 + 1000 + 1000, np.int64))
        x = L.input(h)
        oc, ox = L.out(buf[:1]), L.out(buf[1:1001].reshape(1000, 1))
        if seed:
            assert _nonzero_kept(x, oc, ox) is not None
        count, coords = _nonzero(x, oc, ox)
        assert count is oc and coords is ox
        n, nz = _want_nonzero(h, 1000)
        assert L.host(count).tolist() == [n]
        assert L.host(coords)[:n, 0].tolist() == nz.tolist()
    params = ((2, 3, 4), (10, 10, 10), (1, 1, 1))
    for seed in range(3):
        c = np.random.default_rng(seed).random((20, 20, 20)).astype(np.float32)
        x = L.input(c)
        out = L.out(L.input(np.zeros((10, 10, 10), np.float32)))
        if seed:
            assert _slice_kept(x, params, out) is not None
        assert dmlnumba.slice1(x, *params, out=out) is out
        np.testing.assert_array_equal(L.host(out), c[2:12, 3:13, 4:14])


# ------------------------------------------------------------------ overlaps per call


@pytest.fixture(params=[None, 16], ids=["one-block", "blocks"])
def block(request, monkeypatch):
    """The CPU's nonzero block: one block of 64 elements (the single-pass driver), or
    blocks of 16 (counted first, then written: a second read of the input)."""
    if request.param is not None:
        monkeypatch.setattr(dmlnumba.config, "CPU_NONZERO_BLOCK", request.param)
    return request.param


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("at", [-1, 1, 17])  # coordinates from before, or inside, the input
def test_repeat_into_coordinates_that_now_overlap_the_input(lib, at, block):
    """The first call's outputs lie apart from its input; the repeat's, of the same
    layouts, overlap it: the whole input is read before its memory is written."""
    L = Lib(lib)
    n = 64
    h = _values(4 * n, 7)
    h[n : 2 * n] = np.arange(1, n + 1) % 5  # mostly non-zero: writes run into unread ones
    buf = L.input(h)
    oc = L.out(L.input(np.zeros(1, np.int64)))
    first = _nonzero(buf[:n], oc, L.out(buf[3 * n :].reshape(n, 1)))
    assert first[0] is oc
    x, ox = buf[n : 2 * n], L.out(buf[n + at : 2 * n + at].reshape(n, 1))
    assert _nonzero_kept(x, oc, ox) is not None
    want_n, want = _want_nonzero(L.host(buf)[n : 2 * n], n)
    _nonzero(x, oc, ox)
    assert L.host(oc).tolist() == [want_n]
    assert L.host(buf)[n + at : n + at + want_n].tolist() == want.tolist()


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("at", [0, 63])  # the input's first or last element
def test_repeat_into_a_count_that_now_overlaps_the_input(lib, at, block):
    L = Lib(lib)
    n = 64
    h = _values(2 * n + 1, 8)
    h[n : 2 * n] = np.arange(1, n + 1) % 5
    buf = L.input(h)
    ox = L.out(L.input(np.zeros((n, 1), np.int64)))
    _nonzero(buf[:n], L.out(buf[2 * n :]), ox)
    x = buf[n : 2 * n]
    oc = L.out(buf[n + at : n + at + 1])
    assert _nonzero_kept(x, oc, ox) is not None
    want_n, want = _want_nonzero(L.host(buf)[n : 2 * n], n)
    _nonzero(x, oc, ox)
    assert L.host(buf)[n + at] == want_n
    assert L.host(ox)[:want_n, 0].tolist() == want.tolist()


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("size", [5, 3 * 4096])  # NumPy's copy (CPU), and the kernel's
def test_repeat_into_an_out_that_now_overlaps_the_input(lib, size):
    L = Lib(lib)
    h = np.arange(3 * size, dtype=np.float32)
    buf = L.input(h)
    params = ((0,), (2 * size,), (2,))
    dmlnumba.slice1(buf[: size * 2], *params, out=L.out(buf[2 * size :]))
    x, out = buf[size : 3 * size], L.out(buf[size + 1 : 2 * size + 1])
    assert _slice_kept(x, params, out) is not None
    want = L.host(buf)[size : 3 * size : 2].copy()
    assert dmlnumba.slice1(x, *params, out=out) is out
    np.testing.assert_array_equal(L.host(buf)[size + 1 : 2 * size + 1], want)


@pytest.mark.parametrize("lib", LIBS)
def test_repeat_into_count_and_coordinates_that_now_overlap(lib):
    """Refused (the count would overwrite a coordinate), and nothing written."""
    L = Lib(lib)
    n = 16
    h = _values(n, 9)
    x = L.input(h)
    buf = L.input(np.full(2 * n + 1, -1, np.int64))
    _nonzero(x, L.out(buf[2 * n :]), L.out(buf[:n].reshape(n, 1)))
    buf = L.input(np.full(2 * n + 1, -1, np.int64))
    oc, ox = L.out(buf[3:4]), L.out(buf[:n].reshape(n, 1))
    assert _nonzero_kept(x, oc, ox) is not None
    with pytest.raises(ValueError, match="out_count and out_coordinates overlap in memory"):
        _nonzero(x, oc, ox)
    assert (L.host(buf) == -1).all()


# ------------------------------------------------------------------ flags and modes


def test_repeat_into_a_numpy_output_made_read_only():
    """The writeable flag changes no layout: nonzero's key holds it, a window call's
    runner asks it (slice1: NumPy's assignment of a small window, the kernel's check of
    a larger one; slice_grad), before anything is written."""
    h = _values(100, 10)
    oc, ox = np.full(1, -1, np.int64), np.full((100, 1), -1, np.int64)
    _nonzero(h, oc, ox)
    ox[:] = -1
    ox.flags.writeable = False
    with pytest.raises(ValueError, match=r"^nonzero_coordinates\(\): out_coordinates is read-only"):
        _nonzero(h, oc, ox)
    ox.flags.writeable = True
    oc.flags.writeable = False
    oc_before = oc.copy()
    with pytest.raises(ValueError, match=r"^nonzero_coordinates\(\): out_count is read-only$"):
        _nonzero(h, oc, ox)
    assert (ox == -1).all() and (oc == oc_before).all()
    big = np.arange(40000.0)  # (its window the kernel's copy, not NumPy's)
    window_calls = [
        (
            "slice1",
            np.full(5, -1.0),
            lambda o: dmlnumba.slice1(np.arange(20.0), (0,), (5,), (1,), out=o),
        ),
        (
            "slice1",
            np.full(20000, -1.0),
            lambda o: dmlnumba.slice1(big, (0,), (40000,), (2,), out=o),
        ),
        (
            "slice_grad",
            np.full((4, 6), -1.0),
            lambda o: dmlnumba.slice_grad(np.ones((2, 3)), (4, 6), (0, 0), (4, 6), (2, 2), out=o),
        ),
    ]
    for f, out, call in window_calls:
        call(out)  # a writeable out of this layout first: the runner is kept
        out[:] = -1
        out.flags.writeable = False
        with pytest.raises(ValueError, match=rf"^{f}\(\): out is read-only$"):
            call(out)
        assert (out == -1).all()


def _torch_pair(lib):
    """A float32 input and a float32 output tensor of its device (on the CPU, a NumPy
    input: its calls keep runners)."""
    if lib == "cpu-torch":
        return np.arange(6, dtype=np.float32), torch.zeros(3)
    return torch.arange(6.0, device="cuda"), torch.zeros(3, device="cuda")


@pytest.mark.parametrize("lib", TORCH_LIBS)
def test_repeat_into_an_out_that_now_requires_grad(lib):
    x, out = _torch_pair(lib)
    params = ((0,), (3,), (1,))
    assert dmlnumba.slice1(x, *params, out=out) is out
    assert _slice_kept(x, params, out) is not None
    out.zero_()
    out.requires_grad_(True)
    v = out._version
    with pytest.raises(TypeError, match=r"^slice1\(\): out requires grad"):
        dmlnumba.slice1(x, *params, out=out)
    assert not out.detach().any() and out._version == v
    with torch.no_grad():
        assert dmlnumba.slice1(x, *params, out=out) is out
    assert out.tolist() == [0.0, 1.0, 2.0] and out._version > v


@pytest.mark.parametrize("lib", TORCH_LIBS)
def test_repeat_into_an_inference_tensor(lib):
    x, out = _torch_pair(lib)
    params = ((0,), (3,), (1,))
    dmlnumba.slice1(x, *params, out=out)
    with torch.inference_mode():
        inf = torch.zeros_like(out)
        ic, ix = (
            torch.zeros(1, dtype=torch.int64, device=out.device),
            torch.zeros((6, 1), dtype=torch.int64, device=out.device),
        )
    assert _slice_kept(x, params, out) is not None
    with pytest.raises(ValueError, match=r"^slice1\(\): out is an inference tensor"):
        dmlnumba.slice1(x, *params, out=inf)
    assert not inf.any()
    oc = torch.zeros(1, dtype=torch.int64, device=out.device)
    ox = torch.zeros((6, 1), dtype=torch.int64, device=out.device)
    _nonzero(x, oc, ox)
    assert _nonzero_kept(x, oc, ox) is not None
    with pytest.raises(ValueError, match=r"out_count is an inference tensor"):
        _nonzero(x, ic, ox)
    with pytest.raises(ValueError, match=r"out_coordinates is an inference tensor"):
        _nonzero(x, oc, ix)
    assert not ic.any() and not ix.any()


@pytest.mark.parametrize("lib", TORCH_LIBS)
def test_repeats_bump_the_version_counter(lib):
    x, out = _torch_pair(lib)
    dev = out.device
    oc = torch.zeros(1, dtype=torch.int64, device=dev)
    ox = torch.zeros((6, 1), dtype=torch.int64, device=dev)
    params = ((0,), (3,), (1,))
    for i in range(3):
        if i:
            assert _slice_kept(x, params, out) is not None
            assert _nonzero_kept(x, oc, ox) is not None
        before = (out._version, oc._version, ox._version)
        dmlnumba.slice1(x, *params, out=out)
        _nonzero(x, oc, ox)
        assert all(a > b for a, b in zip((out._version, oc._version, ox._version), before))
    assert oc.tolist() == [5]


# ------------------------------------------------------------------ CUDA only


@needs_real_gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_repeat_into_an_out_on_another_gpu():
    x = torch.arange(6.0, device="cuda:0")
    params = ((0,), (3,), (1,))
    dmlnumba.slice1(x, *params, out=torch.zeros(3, device="cuda:0"))
    out = torch.zeros(3, device="cuda:1")
    with pytest.raises(ValueError, match=r"^slice1\(\): out is on cuda:1"):
        dmlnumba.slice1(x, *params, out=out)
    assert not out.any()
    oc = torch.zeros(1, dtype=torch.int64, device="cuda:0")
    ox = torch.zeros((6, 1), dtype=torch.int64, device="cuda:0")
    _nonzero(x, oc, ox)
    ox1 = torch.zeros((6, 1), dtype=torch.int64, device="cuda:1")
    with pytest.raises(ValueError, match=r"out_coordinates is on cuda:1"):
        _nonzero(x, oc, ox1)
    assert not ox1.any()


@needs_real_gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")
def test_repeat_of_a_numpy_input_sent_to_the_gpu_into_outputs():
    """A NumPy input uploaded per call, into PyTorch CUDA outputs (a staged input
    meets no output: only the outputs' own overlap is tested)."""
    oc = torch.zeros(1, dtype=torch.int64, device="cuda")
    ox = torch.zeros((100, 1), dtype=torch.int64, device="cuda")
    for seed in range(3):
        h = _values(100, seed)
        count, coords = dmlnumba.nonzero_coordinates(
            h, dtype=np.int64, out_count=oc, out_coordinates=ox, device="cuda"
        )
        assert count is oc and coords is ox
        n, nz = _want_nonzero(h, 100)
        assert oc.tolist() == [n] and ox[:n, 0].tolist() == nz.tolist()


@pytest.mark.skipif(not SIM, reason="the CUDA simulator only (a GPU runs the tests above)")
def test_cuda_runners_into_given_outputs_under_the_simulator(monkeypatch):
    """The CUDA runners' given-output branch, run under the simulator (which keeps no
    CUDA runner: the test makes them, host addresses standing in for device ones):
    results written into the outputs, and None (nothing written) where an output's
    bytes meet the input's or the other output's."""
    from numba import cuda

    from dmlnumba import _internals
    from dmlnumba.gpu import runners, views

    monkeypatch.setattr(runners, "_fast_ok", lambda x, lib, stream: x.size > 0)
    monkeypatch.setattr(_internals, "numba_pointer", device_pointer)

    def view(a):
        v = views.view_of(a)
        v.lib = "numba"
        return v

    h = np.arange(40, dtype=np.float32) % 3
    x = cuda.to_device(h)
    oc, ox = cuda.to_device(np.zeros(1, np.uint32)), cuda.to_device(np.zeros((40, 1), np.uint32))
    run = runners.nonzero_runner(view(x), 1, np.dtype(np.uint32), 40, "numba", view(oc), view(ox))
    count, coords = run(x, oc, ox)
    assert count is oc and coords is ox
    want = np.flatnonzero(h)
    assert oc.copy_to_host().tolist() == [len(want)]
    assert ox.copy_to_host()[: len(want), 0].tolist() == want.tolist()
    ox2 = cuda.to_device(np.full((40, 1), 7, np.uint32))
    assert run(x, ox2[3:4].reshape(1), ox2) is None  # the count inside the coordinates
    assert (ox2.copy_to_host() == 7).all()
    y = cuda.to_device(np.arange(80, dtype=np.float32).view(np.uint32))  # as coordinates
    assert run(y[:40].view(np.float32), oc, y[20:60].reshape(40, 1)) is None
    assert (y.copy_to_host().view(np.float32) == np.arange(80)).all()

    out = cuda.to_device(np.zeros(20, np.float32))
    s = runners.slice1_runner(view(x), (0,), (2,), (20,), "numba", view(out))
    assert s(x, out) is out
    assert out.copy_to_host().tolist() == h[::2].tolist()
    assert s(x, x[1:21]) is None
    assert x.copy_to_host().tolist() == h.tolist()
