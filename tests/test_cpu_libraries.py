"""PyTorch CPU tensors and JAX CPU arrays: a repeated call of one layout takes the
NumPy runner over the input's memory (``Tensor.numpy``; DLPack once JAX's work is
done) and gives the library's arrays, as the full path does; tensors it cannot read
in place (requiring grad, lazily negated, sparse) keep taking the full path.  Against
NumPy, bit for bit."""

import numpy as np
import pytest
from conftest import count_full_calls
from hypothesis import given
from hypothesis import strategies as st

import dmlnumba
from dmlnumba import keys

from strategies import arrays, bits, slice1_reference, slice_grad_reference, windows

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")

# PyTorch holds these fully (its uint16/32/64 support is partial).
TORCH_DTYPES = ["float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8"]


def _tensor(x):
    """``x`` as a CPU tensor of the same layout (no negative strides in PyTorch)."""
    if any(s < 0 for s in x.strides) or any(s == 0 for s in x.strides):
        x = x.copy()
    t = torch.from_numpy(np.array(x, copy=True) if not x.flags.writeable else x)
    assert t.stride() == tuple(s // x.itemsize for s in x.strides)
    return t


def _others(x, rng):
    """Another input of ``x``'s layout and dtype, other values."""
    y = np.empty_like(x)
    y[...] = np.roll(x.reshape(-1), 1).reshape(x.shape) if x.size else x
    if y.dtype != bool and y.size:
        y.reshape(-1)[rng.integers(0, y.size)] = 0
    return y


def _calls_twice(x, rng, params, make, is_result):
    """slice1, nonzero_coordinates and argwhere on ``make(h)`` for ``x`` and for another
    input of its layout, and slice_grad of ``make`` of the window's values back into
    ``x``'s shape (the second call takes the runner the first kept): NumPy's answers,
    every result ``is_result``, the two calls' results of the same dtypes and shapes
    (argwhere's: its count).  ``params`` None: ``x`` is empty (no window in it, so no
    slice1 or slice_grad).  ``(the last input, both calls' results)``."""
    results = []
    full = params[:3] if params else None  # the whole window: slice_grad's gradient has its shape
    for h in (x, _others(x, rng)):
        a = make(h)
        sl = dmlnumba.slice1(a, *params) if h.dtype != bool and params else None
        sg = None
        if h.dtype != bool and params:
            g = slice1_reference(h, *full)
            sg = dmlnumba.slice_grad(make(g), h.shape, *full)
            np.testing.assert_array_equal(
                bits(np.asarray(sg)), bits(slice_grad_reference(g, h.shape, *full))
            )
        count, coords = dmlnumba.nonzero_coordinates(a, dtype=np.uint32)
        arg = dmlnumba.argwhere(a)
        for r in (count, coords, arg, sl, sg):
            assert r is None or is_result(r)
        want = np.argwhere(h)
        assert int(count[0]) == len(want)
        np.testing.assert_array_equal(np.asarray(coords)[: len(want)], want)
        np.testing.assert_array_equal(np.asarray(arg), want)
        if sl is not None:
            np.testing.assert_array_equal(bits(np.asarray(sl)), bits(slice1_reference(h, *params)))
        results.append((sl, count, coords, arg, sg))
    for i, (r1, r2) in enumerate(zip(*results)):
        if r1 is not None:
            assert r1.dtype == r2.dtype and (i == 3 or r1.shape == r2.shape)
    return a, results


@given(data=st.data())
def test_repeats_match_numpy(data):
    """Both operators and argwhere, twice on tensors of one layout (the second call
    takes the runner the first kept): NumPy's answer, as tensors of the full path's
    dtypes, each call with outputs of its own; empty tensors too (nonzero's and
    argwhere's)."""
    x = data.draw(arrays(dtypes=TORCH_DTYPES + ["bool"], max_dims=5, allow_zero=True))
    x = x.copy(order=data.draw(st.sampled_from(["C", "F"])))
    rng = np.random.default_rng(data.draw(st.integers(0, 9)))
    params = data.draw(windows(x.shape)) if x.size else None

    def cpu_tensor(r):
        return type(r) is torch.Tensor and r.device.type == "cpu"

    _, results = _calls_twice(x, rng, params, _tensor, cpu_tensor)
    for a, b in zip(*results):
        if a is not None:
            assert a.numel() == 0 or b.numel() == 0 or a.data_ptr() != b.data_ptr()


def test_a_repeat_takes_the_kept_runner():
    t = torch.arange(24, dtype=torch.float32).reshape(4, 6).t()  # a transpose
    w = ((1, 0), (5, 4), (2, -1))
    dmlnumba.slice1(t, *w)
    dmlnumba.nonzero_coordinates(t)
    g = torch.ones(3, 4)
    dmlnumba.slice_grad(g, (6, 4), *w)
    assert keys.window("slice1", t, *w, None, None, None, None)[1] is not None
    assert keys.nonzero("nonzero_coordinates", t, None, np.uint32, None, None, None)[1]
    assert keys.window("slice_grad", g, (6, 4), *w, None, None, None)[1] is not None


def test_torch_size_parameters_take_the_kept_runner(monkeypatch):
    """``t.shape`` (a ``torch.Size``) as window parameters keys a runner as a tuple of
    the same ints does (every such call took the full path, 7x a repeat's time); a
    tuple subclass of another type does not (its methods could give other values)."""
    full = count_full_calls(monkeypatch)
    t = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    for sizes in (t.shape, t.shape, (4, 6), torch.Size([4, 6])):
        np.testing.assert_array_equal(
            dmlnumba.slice1(t, (0, 0), sizes, (1, -2)).numpy(), t.numpy()[:, ::-2]
        )
        g = dmlnumba.slice_grad(torch.ones(4, 3), t.shape, (0, 0), sizes, (1, -2))
        assert g.shape == t.shape and int(g.sum()) == 12
    assert len(full) == 2

    class Shape(tuple):
        def __iter__(self):
            return iter((4, 2))

    dmlnumba.slice1(t, (0, 0), Shape((4, 6)), (1, -2))
    assert len(full) == 3


def test_device_cpu_takes_the_runner_of_no_device(monkeypatch):
    """``device="cpu"`` for a PyTorch CPU tensor or a JAX CPU array is the call without
    it: a repeat finds the same runner (every such call took the full path, 4-7x a
    repeat's time), and gives the library's arrays with the window of each input."""
    full = count_full_calls(monkeypatch)
    w = ((1, 0), (3, 6), (-1, 2))
    for k in range(3):
        h = np.arange(24, dtype=np.float32).reshape(4, 6) * (k + 1)
        h[0] = 0
        on_cpu = jax.device_put(h, jax.devices("cpu")[0])  # (a GPU machine's default: its GPU)
        for x in (torch.from_numpy(h), on_cpu):
            for device in (None, "cpu"):
                got = dmlnumba.slice1(x, *w, device=device)
                assert type(got) is type(x)
                np.testing.assert_array_equal(np.asarray(got), h[3:0:-1, ::2])
                count, coords = dmlnumba.nonzero_coordinates(x, device=device)
                assert type(coords) is type(x) and int(count[0]) == 18
                if x is on_cpu:  # (JAX's default device, where JAX makes arrays, may be a GPU)
                    assert got.devices() == count.devices() == coords.devices() == x.devices()
                np.testing.assert_array_equal(np.asarray(coords)[:18], np.argwhere(h))
    assert len(full) == 4  # each operator's first call of each library
    for x in (torch.from_numpy(h), on_cpu):
        for d in ("cuda", "cuda:0"):  # (a copy to a GPU: the full path, every time)
            assert keys.window("slice1", x, *w, None, None, d, None)[0] is None
            assert keys.nonzero("nonzero_coordinates", x, None, np.uint32, None, d, None)[0] is None


def _check_all(t, w):
    """slice1, nonzero_coordinates and argwhere of ``t``, and slice_grad of ``t`` (as a
    gradient, into twice its shape) against NumPy's answers."""
    h = t.numpy().copy()
    np.testing.assert_array_equal(dmlnumba.slice1(t, *w).numpy(), slice1_reference(h, *w))
    back = ((1, 0), t.shape, (1, 1))
    big = tuple(2 * n for n in t.shape)
    want = slice_grad_reference(h, big, *back)
    np.testing.assert_array_equal(dmlnumba.slice_grad(t, big, *back).numpy(), want)
    count, coords = dmlnumba.nonzero_coordinates(t)
    want = np.argwhere(h)
    assert int(count[0]) == len(want)
    np.testing.assert_array_equal(coords.numpy()[: len(want)], want)
    np.testing.assert_array_equal(dmlnumba.argwhere(t).numpy(), want)


def test_a_repeat_reads_the_tensors_memory_as_it_is_now():
    """A runner keeps the last small tensor's NumPy view for a repeat on the same
    memory: a repeat reads what that memory holds now, and a tensor moved to other
    memory in place (``set_``, ``.data =``) is read there.  (``resize_`` is refused
    by PyTorch once ``Tensor.numpy`` has shared the memory.)"""
    w = ((1, 0), (3, 5), (-1, 2))
    rng = np.random.default_rng(5)

    def values():
        h = rng.standard_normal((4, 6)).astype(np.float32)
        return torch.from_numpy(np.where(rng.random((4, 6)) < 0.5, h, 0).astype(np.float32)).clone()

    t = values()
    _check_all(t, w)
    t.copy_(values())  # the same memory, other values
    _check_all(t, w)
    other = values()
    t.set_(other.untyped_storage(), 0, t.shape, t.stride())  # other memory, in place
    _check_all(t, w)
    t.data = values()
    _check_all(t, w)
    assert keys.window("slice1", t, *w, None, None, None, None)[1] is not None


def test_repeats_write_the_outputs_memory_as_it_is_now():
    """Runners keep the last small output tensor's NumPy view too: a caller's output
    moved to other memory in place between calls is written there, and the memory
    it left is not written again."""
    h = np.arange(1, 25, dtype=np.float32).reshape(4, 6)
    h[1, 2] = h[3, 0] = 0
    t = torch.from_numpy(h)
    w = ((0, 0), (3, 4), (-1, 2))
    want = np.argwhere(h)
    like = (
        torch.zeros(3, 2),
        torch.zeros(1, dtype=torch.int64),
        torch.zeros((24, 2), dtype=torch.int64),
    )
    places = [[o.clone() for o in like] for _ in range(3)]  # (the first call keeps the runner)
    outs = [o.clone() for o in like]

    def move(to):
        for o, m in zip(outs, to):
            o.set_(m.untyped_storage(), 0, o.shape, o.stride())

    for k, where in enumerate(places):
        move(where)
        out, count, coords = outs
        assert dmlnumba.slice1(t, *w, out=out) is out
        dmlnumba.nonzero_coordinates(t, dtype=np.int64, out_count=count, out_coordinates=coords)
        np.testing.assert_array_equal(where[0].numpy(), h[2::-1, 0:4:2])
        assert int(where[1][0]) == len(want)
        np.testing.assert_array_equal(where[2].numpy()[: len(want)], want)
        for left in places[:k]:  # the memory the outputs left: never written again
            assert not any(m.any() for m in left)
        for m in where:
            m.zero_()
    assert keys.window("slice1", t, *w, None, outs[0], None, None)[1] is not None


def test_tensors_on_other_devices_take_the_full_path():
    """A meta tensor of a kept CPU runner's layout is refused by the full path, which
    names the function."""
    t = torch.ones(2, 3)
    dmlnumba.nonzero_coordinates(t)
    dmlnumba.slice1(t, (0, 0), (2, 3), (1, 1))
    m = torch.ones(2, 3, device="meta")
    assert keys.nonzero("nonzero_coordinates", m, None, np.uint32, None, None, None)[0] is None
    with pytest.raises(TypeError, match=r"nonzero_coordinates\(\): input"):
        dmlnumba.nonzero_coordinates(m)
    with pytest.raises(TypeError, match=r"slice1\(\): input"):
        dmlnumba.slice1(m, (0, 0), (2, 3), (1, 1))


@pytest.mark.parametrize("kind", ["negated", "sparse"])
def test_tensors_not_read_in_place_take_the_full_path(kind):
    """A lazily negated tensor (whose memory holds the values un-negated) and a sparse
    one key no runner: the full path reads the first, and refuses the second.  (One
    that requires grad is read in place, detached:
    test_inputs_that_require_grad_take_a_runner.)"""
    h = np.array([[0.0, 1.5, -2.0], [3.0, 0.0, 0.25]], np.float32)
    t = torch.from_numpy(h.copy())
    if kind == "negated":
        t = torch._neg_view(t)
        want = -h
    else:
        t = t.to_sparse()
    key = keys.nonzero("nonzero_coordinates", t, None, np.uint32, None, None, None)[0]
    assert key is None
    if kind == "sparse":
        with pytest.raises(TypeError, match=r"nonzero_coordinates\(\): input"):
            dmlnumba.nonzero_coordinates(t)
        return
    for _ in range(2):
        count, coords = dmlnumba.nonzero_coordinates(t)
        assert int(count[0]) == 4
        np.testing.assert_array_equal(coords.numpy()[:4], np.argwhere(want))
        np.testing.assert_array_equal(dmlnumba.argwhere(t).numpy(), np.argwhere(want))


def test_repeats_into_given_tensors():
    """Repeats into PyTorch CPU outputs of one layout (slice_grad's of a tensor
    gradient too) take the runner the first call
    kept: each writes the caller's tensors (PyTorch's version counter moves, as for
    its in-place ops) and returns them; an ``out=`` that overlaps the input takes the
    full path, which reads the window whole first."""
    rng = np.random.default_rng(2)
    count = torch.zeros(1, dtype=torch.int64)
    coords = torch.zeros((24, 2), dtype=torch.int64)
    out = torch.full((3, 2), -1.0)
    back = torch.full((4, 6), -1.0)  # slice_grad's, from out
    w = ((0, 0), (3, 4), (-1, 2))
    for _ in range(3):
        h = np.where(rng.random((4, 6)) < 0.5, rng.standard_normal((4, 6)), 0).astype(np.float32)
        t = torch.from_numpy(h)
        v0, v1 = count._version, out._version
        got = dmlnumba.nonzero_coordinates(
            t, dtype=np.int64, out_count=count, out_coordinates=coords
        )
        assert got[0] is count and got[1] is coords and count._version > v0
        want = np.argwhere(h)
        assert int(count[0]) == len(want)
        np.testing.assert_array_equal(coords.numpy()[: len(want)], want)
        assert dmlnumba.slice1(t, *w, out=out) is out and out._version > v1
        np.testing.assert_array_equal(out.numpy(), h[2::-1, 0:4:2])
        v2 = back._version
        assert dmlnumba.slice_grad(out, (4, 6), *w, out=back) is back and back._version > v2
        np.testing.assert_array_equal(back.numpy(), slice_grad_reference(out.numpy(), (4, 6), *w))
    key = keys.nonzero("nonzero_coordinates", t, None, np.int64, None, None, None, count, coords)
    assert key[1] is not None
    assert keys.window("slice_grad", out, (4, 6), *w, back, None, None)[1] is not None
    big = torch.from_numpy(np.arange(48, dtype=np.float32).reshape(8, 6))
    want = big.numpy()[2::-1, 0:4:2].copy()
    assert dmlnumba.slice1(big[:4], *w, out=big[1:4, 1:3]) is not None
    np.testing.assert_array_equal(big.numpy()[1:4, 1:3], want)


def _on_cpu(h):
    """``h`` as a JAX array on the CPU (JAX's default device may be a GPU)."""
    return jax.device_put(h, jax.devices("cpu")[0])


# JAX holds these without its 64-bit mode (float64 and int64 need it).
JAX_DTYPES = ["float32", "float16", "int32", "int16", "int8", "uint32", "uint16", "uint8", "bool"]


@given(data=st.data())
def test_jax_repeats_match_numpy(data):
    """slice1, nonzero_coordinates and argwhere on JAX CPU arrays of one shape, twice
    (the second call takes the runner the first kept): NumPy's answer, as JAX arrays
    of the full path's dtypes."""
    x = data.draw(arrays(dtypes=JAX_DTYPES, max_dims=4, allow_zero=True)).copy()
    rng = np.random.default_rng(data.draw(st.integers(0, 9)))
    params = data.draw(windows(x.shape)) if x.size else None
    a, _ = _calls_twice(x, rng, params, _on_cpu, lambda r: isinstance(r, jax.Array))
    key, run = keys.nonzero("nonzero_coordinates", a, None, np.uint32, None, None, None)
    assert run is not None  # kept by the first call


def test_jax_64_bit_mode_is_part_of_the_key():
    """A runner kept with JAX's 64-bit mode off is not taken with it on (JAX holds
    64-bit results differently), and the call then gives what the full path gives."""
    a = _on_cpu(np.array([[0, 3, 0], [1, 0, 2]], np.int32))
    dmlnumba.nonzero_coordinates(a, dtype=np.int64)
    before = keys.nonzero("nonzero_coordinates", a, None, np.int64, None, None, None)
    was = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", not was)
    try:
        after = keys.nonzero("nonzero_coordinates", a, None, np.int64, None, None, None)
        assert before[0] != after[0]
        count, coords = dmlnumba.nonzero_coordinates(a, dtype=np.int64)
        assert int(count[0]) == 3
        np.testing.assert_array_equal(np.asarray(coords)[:3], [[0, 1], [1, 0], [1, 2]])
    finally:
        jax.config.update("jax_enable_x64", was)


def test_inputs_that_require_grad_take_a_runner(monkeypatch):
    """A CPU tensor that requires grad (a Parameter, or a tensor made so) keys a runner
    where autograd records nothing: nonzero_coordinates always, slice1 and slice_grad
    under ``no_grad``; the runner reads its memory detached (``Tensor.numpy`` refuses
    it) and gives results that do not require grad, as the full path does (every such
    call took the full path, 3-7x a repeat's time).  A plain tensor of the same layout
    keeps its own runner (the key holds ``requires_grad``); in grad mode slice1 is
    recorded."""
    full = count_full_calls(monkeypatch)
    w = ((1, 0), (3, 6), (-1, 2))
    back = ((4, 6), (1, 0), (3, 6), (-1, 2))
    rng = np.random.default_rng(3)
    makes = (torch.nn.Parameter, lambda t: t.requires_grad_())
    for make in makes:
        for _ in range(3):
            h = rng.standard_normal((4, 6)).astype(np.float32)
            h[h < 0] = 0
            x = make(torch.from_numpy(h.copy()))
            g = h[1:, ::2].copy()
            gx = make(torch.from_numpy(g.copy()))
            count, coords = dmlnumba.nonzero_coordinates(x)
            want = np.argwhere(h)
            assert int(count[0]) == len(want) and not coords.requires_grad
            np.testing.assert_array_equal(coords.numpy()[: len(want)], want)
            with torch.no_grad():
                got = dmlnumba.slice1(x, *w)
                grad = dmlnumba.slice_grad(gx, *back)
            assert not got.requires_grad and not grad.requires_grad
            np.testing.assert_array_equal(got.numpy(), h[3:0:-1, ::2])
            np.testing.assert_array_equal(grad.numpy(), slice_grad_reference(g, *back))
    assert len(full) == 3 * len(makes)  # each operator's first call of each kind
    plain = torch.from_numpy(h.copy())
    np.testing.assert_array_equal(dmlnumba.slice1(plain, *w).numpy(), h[3:0:-1, ::2])
    assert len(full) == 3 * len(makes) + 1
    y = dmlnumba.slice1(x, *w)
    assert y.requires_grad and y.grad_fn is not None  # recorded (the operator's own path)
