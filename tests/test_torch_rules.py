"""PyTorch's own rules for the tensors dmlnumba reads and writes, on the CPU and (on a
real GPU) CUDA: ``out=`` dtypes (bfloat16 is not float16), the version counter of
every tensor written, inference tensors, tensors that require grad, and wrapper
tensors (functional, fake, torch.func's) that are never read through DLPack."""

import logging

import numpy as np
import pytest
from conftest import count_full_calls
from hypothesis import given
from hypothesis import strategies as st

import dmlnumba

from devices import torch_devices
from strategies import arrays, bits, slice1_reference, slice_grad_reference, windows

torch = pytest.importorskip("torch")

# The fake implementations raise the eager call's errors; PyTorch logs each one too.
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)

DEVICES = torch_devices(torch)


def _raised(excinfo, kind, text):
    """Whether ``kind`` with ``text`` in its message is the raised error or in its
    chain (torch.compile wraps what a fake implementation raises)."""
    e = excinfo.value
    while e is not None:
        if isinstance(e, kind) and text in str(e):
            return True
        e = e.__cause__ or e.__context__
    return False


def _slice1_out(x, out):
    return dmlnumba.slice1(x, (0,), (3,), (1,), out=out)


# Dtypes of out=: a bfloat16 input's output must be bfloat16, and a float16 one's float16.


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("out_kind", ["float16", "int16", "numpy float16"])
def test_bfloat16_input_refuses_another_out_dtype(device, out_kind):
    """A float16 out= took bfloat16 bits (1.0 became 1.875), a NumPy one raised an
    AttributeError, an int16 one was told "expected float16"."""
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16, device=device)
    if out_kind == "numpy float16":
        out = np.full(3, -1, np.float16)
    else:
        out = torch.full((3,), -1, dtype=getattr(torch, out_kind), device=device)
    name = out_kind.split()[-1]
    with pytest.raises(TypeError, match=rf"^slice1\(\): out has dtype {name}, expected bfloat16$"):
        _slice1_out(x, out)
    assert (out == -1).all()


@pytest.mark.parametrize("device", DEVICES)
def test_float16_input_refuses_a_bfloat16_out(device):
    """Both dtypes named, for a PyTorch and a NumPy input alike."""
    out = torch.full((3,), -1, dtype=torch.bfloat16, device=device)
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float16, device=device)
    inputs = [x] + ([x.numpy()] if device == "cpu" else [])
    for a in inputs:
        with pytest.raises(
            TypeError, match=r"^slice1\(\): out has dtype bfloat16, expected float16$"
        ):
            _slice1_out(a, out)
    counts = torch.zeros(1, dtype=torch.bfloat16, device=device)
    with pytest.raises(
        TypeError, match=r"^nonzero_coordinates\(\): out_count has dtype bfloat16, expected int64$"
    ):
        dmlnumba.nonzero_coordinates(x, dtype=torch.int64, out_count=counts)
    assert (out == -1).all()


@pytest.mark.parametrize("device", DEVICES)
def test_bfloat16_out_for_a_bfloat16_input_is_copied_bit_for_bit(device):
    x = torch.tensor([1.0, -2.5, 3.0], dtype=torch.bfloat16, device=device)
    out = torch.zeros(3, dtype=torch.bfloat16, device=device)
    assert _slice1_out(x, out) is out
    assert torch.equal(out.view(torch.int16), x.view(torch.int16))


def _bits(t):
    """A bfloat16 tensor's bits, as a NumPy int16 array."""
    assert t.dtype == torch.bfloat16
    return t.view(torch.int16).cpu().numpy()


@pytest.mark.parametrize("device", DEVICES)
def test_bfloat16_repeats_take_a_runner(device, monkeypatch):
    """A bfloat16 tensor's repeated calls take their runner, as a float16 one's do
    (each took the full path, 3-4x a repeat's time), and give what it gives:
    bfloat16 results of the same bits, given outputs written in place and marked
    written (their version counters), the count and rows of the values that are not
    zero (-0.0 among the zeros, NaN among the rest)."""
    full = count_full_calls(monkeypatch)
    w = ((1, 0), (3, 6), (-1, 2))
    back = ((4, 6), (1, 0), (3, 6), (-1, 2))
    rng = np.random.default_rng(5)
    kw = {"dtype": torch.bfloat16, "device": device}
    out, gout = torch.empty((3, 3), **kw), torch.empty((4, 6), **kw)
    cnt = torch.empty(1, dtype=torch.int64, device=device)
    crd = torch.empty((24, 2), dtype=torch.int64, device=device)
    for _ in range(4):
        h = rng.standard_normal((4, 6)).astype(np.float32)
        h[h < 0] = -0.0
        h[rng.integers(4), rng.integers(6)] = np.nan
        x = torch.from_numpy(h).to(**kw)
        want = _bits(x)[3:0:-1, ::2]
        y = dmlnumba.slice1(x, *w)
        np.testing.assert_array_equal(_bits(y), want)
        v = out._version
        assert dmlnumba.slice1(x, *w, out=out) is out and out._version > v
        np.testing.assert_array_equal(_bits(out), want)
        g = dmlnumba.slice_grad(y, *back)
        np.testing.assert_array_equal(_bits(g), slice_grad_reference(want, *back))
        v = gout._version
        assert dmlnumba.slice_grad(y, *back, out=gout) is gout and gout._version > v
        np.testing.assert_array_equal(_bits(gout), slice_grad_reference(want, *back))
        rows = np.argwhere(h != 0)
        for into in (False, True):
            outs = {"out_count": cnt, "out_coordinates": crd} if into else {}
            count, coords = dmlnumba.nonzero_coordinates(x, dtype=torch.int64, **outs)
            assert (count is cnt and coords is crd) == into
            assert int(count[0]) == len(rows)
            np.testing.assert_array_equal(coords[: len(rows)].cpu().numpy(), rows)
        np.testing.assert_array_equal(dmlnumba.argwhere(x).cpu().numpy(), rows)
    assert len(full) == 6  # each operator's first call, into new and into given outputs
    for _ in range(3):  # into its own input: the runner's overlap test sends it the full way
        want = _bits(x)[::-1].copy()
        assert dmlnumba.slice1(x, (0, 0), (4, 6), (-1, 1), out=x) is x
        np.testing.assert_array_equal(_bits(x), want)


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_bfloat16_calls_match_numpy(device, data):
    """bfloat16 tensors of drawn layouts and bits (drawn as float16's, whose zeros,
    +0 and -0, are bfloat16's too), three calls of each operator on one layout (the
    later ones take the runner the first kept), each input with other values: slice1's
    and slice_grad's bits as NumPy copies them, nonzero's and argwhere's rows as
    NumPy finds them, new bfloat16 results and given outputs written in place."""
    h = data.draw(arrays(dtypes=["float16"], max_dims=5))
    if not h.flags.writeable or any(s <= 0 for s in h.strides):  # (no such tensor)
        h = h.copy()
    params = data.draw(windows(h.shape))
    full = params[:3]  # the whole window: slice_grad's gradient has its shape
    out = gout = None
    for k in range(3):
        if k:  # other values in the same memory: the same layout
            h[...] = np.roll(h, 1)
        a = torch.from_numpy(h.view(np.int16)).to(device).view(torch.bfloat16)
        assert device != "cpu" or a.stride() == tuple(s // 2 for s in h.strides)
        want = bits(slice1_reference(h, *params))
        sl = dmlnumba.slice1(a, *params)
        np.testing.assert_array_equal(_bits(sl).view(want.dtype), want)
        out = torch.empty_like(sl) if out is None else out
        assert dmlnumba.slice1(a, *params, out=out) is out
        np.testing.assert_array_equal(_bits(out).view(want.dtype), want)
        g = torch.from_numpy(np.array(slice1_reference(h.view(np.int16), *full))).to(device)
        g = g.view(torch.bfloat16)
        back = bits(slice_grad_reference(slice1_reference(h, *full), h.shape, *full))
        sg = dmlnumba.slice_grad(g, h.shape, *full)
        np.testing.assert_array_equal(_bits(sg).view(back.dtype), back)
        gout = torch.empty_like(sg) if gout is None else gout
        assert dmlnumba.slice_grad(g, h.shape, *full, out=gout) is gout
        np.testing.assert_array_equal(_bits(gout).view(back.dtype), back)
        rows = np.argwhere(h)
        count, coords = dmlnumba.nonzero_coordinates(a, dtype=np.int64)
        assert int(count[0]) == len(rows)
        np.testing.assert_array_equal(coords[: len(rows)].cpu().numpy(), rows)
        np.testing.assert_array_equal(dmlnumba.argwhere(a).cpu().numpy(), rows)


@pytest.mark.parametrize("fullgraph", [False, True])
def test_compiled_bfloat16_input_refuses_a_float16_out(fullgraph):
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16)
    out = torch.full((3,), -1, dtype=torch.float16)
    f = torch.compile(_slice1_out, backend="aot_eager", fullgraph=fullgraph)
    with pytest.raises(Exception) as excinfo:
        f(x, out)
    assert _raised(excinfo, TypeError, "slice1(): out has dtype float16, expected bfloat16")
    assert (out == -1).all()


# Functional and other wrapper tensors: through the registered operators, never DLPack.


@pytest.mark.parametrize("device", DEVICES)
def test_functionalize_reads_the_values(device):
    """The eager path read the functional wrapper's uninitialised storage (garbage on
    the CPU, an illegal memory access on CUDA)."""
    x = torch.tensor([10.0, 11.0, 12.0, 13.0], device=device)
    z = torch.tensor([0.0, 1.0, 0.0, 2.0], device=device)
    got = torch.func.functionalize(lambda t: dmlnumba.slice1(t, (0,), (4,), (-1,)))(x)
    assert got.tolist() == [13.0, 12.0, 11.0, 10.0]
    got = torch.func.functionalize(dmlnumba.argwhere)(z)
    assert got.tolist() == [[1], [3]]
    count, coords = torch.func.functionalize(
        lambda t: dmlnumba.nonzero_coordinates(t, dtype=torch.int64)
    )(z)
    assert int(count[0]) == 2 and coords[:2].tolist() == [[1], [3]]


@pytest.mark.parametrize("device", DEVICES)
def test_functionalize_writes_the_outputs(device):
    """out= under functionalize: the new values reach the caller's tensors (the
    functional copy of the operator's result, then PyTorch's own copy-back)."""
    x = torch.tensor([10.0, 11.0, 12.0, 13.0], device=device)
    out = torch.zeros(4, device=device)

    def f(t, o):
        dmlnumba.slice1(t, (0,), (4,), (-1,), out=o)
        return o + 0

    assert torch.func.functionalize(f)(x, out).tolist() == [13.0, 12.0, 11.0, 10.0]
    assert out.tolist() == [13.0, 12.0, 11.0, 10.0]
    z = torch.tensor([0.0, 1.0, 0.0, 2.0], device=device)
    oc = torch.zeros(1, dtype=torch.int64, device=device)
    ox = torch.full((1, 1, 5, 1), -1, dtype=torch.int64, device=device)

    def g(t, a, b):
        dmlnumba.nonzero_coordinates(t, dtype=torch.int64, out_count=a, out_coordinates=b)
        return a + 0

    assert torch.func.functionalize(g)(z, oc, ox).tolist() == [2]
    assert oc.tolist() == [2] and ox.flatten()[:2].tolist() == [1, 3]
    assert int(ox.flatten()[4]) == -1  # past the input's rows: untouched

    def bad(t, o):
        dmlnumba.slice1(t, (0,), (4,), (-1,), out=o)

    with pytest.raises(TypeError, match=r"^slice1\(\): out has dtype float16, expected float32$"):
        torch.func.functionalize(bad)(x, torch.zeros(4, dtype=torch.float16, device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_functionalize_outputs_of_a_plain_input_after_a_kept_runner(device):
    """A plain input (captured, not functional) into functional outputs, where eager
    calls of the same layouts keep a runner: the key still sends the call to the
    registered operators (a runner would write the wrappers' empty storage), and the
    caller's tensors get the values."""
    x = torch.tensor([10.0, 11.0, 12.0, 13.0], device=device)
    z = torch.tensor([0.0, 1.0, 0.0, 2.0], device=device)
    oc = torch.zeros(1, dtype=torch.int64, device=device)
    ox = torch.full((4, 1), -1, dtype=torch.int64, device=device)
    out = torch.zeros(4, device=device)
    for _ in range(2):  # runners kept for these layouts
        dmlnumba.nonzero_coordinates(z, dtype=torch.int64, out_count=oc, out_coordinates=ox)
        dmlnumba.slice1(x, (0,), (4,), (-1,), out=out)
    oc.zero_(), ox.fill_(-1), out.zero_()

    def g(a, b):
        dmlnumba.nonzero_coordinates(z, dtype=torch.int64, out_count=a, out_coordinates=b)
        return a + 0

    def f(o):
        dmlnumba.slice1(x, (0,), (4,), (-1,), out=o)
        return o + 0

    assert torch.func.functionalize(g)(oc, ox).tolist() == [2]
    assert oc.tolist() == [2] and ox[:2].flatten().tolist() == [1, 3]
    assert torch.func.functionalize(f)(out).tolist() == [13.0, 12.0, 11.0, 10.0]
    assert out.tolist() == [13.0, 12.0, 11.0, 10.0]


@pytest.mark.parametrize("device", DEVICES)
def test_torch_func_transforms_read_the_values(device):
    """vmap and grad wrappers go through the operators too (they hold no storage the
    eager path could read), and gradients flow through slice1 and slice_grad as in
    eager calls."""
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device=device)
    got = torch.func.vmap(lambda r: dmlnumba.slice1(r, (0,), (3,), (-2,)))(x)
    assert got.tolist() == [[3.0, 1.0], [6.0, 4.0]]

    def loss(r):
        return (r * dmlnumba.slice1(r, (0,), (3,), (1,))).sum()

    assert torch.func.grad(loss)(x[0]).tolist() == [2.0, 4.0, 6.0]
    rev = torch.func.jacrev(lambda r: dmlnumba.slice1(r, (0,), (3,), (-2,)))(x[0])
    assert rev.tolist() == [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    spread = torch.func.vmap(lambda g: dmlnumba.slice_grad(g, (3,), (0,), (3,), (-2,)))
    assert spread(got).tolist() == [[1.0, 0.0, 3.0], [4.0, 0.0, 6.0]]
    t = torch.func.jvp(
        lambda g: dmlnumba.slice_grad(g, (3,), (0,), (3,), (-2,)), (got[0],), (got[1],)
    )
    assert t[1].tolist() == [4.0, 0.0, 6.0]


@pytest.mark.parametrize("device", DEVICES)
def test_second_derivatives_through_torch_func(device):
    """hessian (jacfwd over jacrev) and jvp over jacrev go through both operators'
    backward and forward rules; they raised PyTorch's treespec.unflatten error (the
    window's lists were pytree nodes of the autograd.Function's arguments)."""
    from torch.func import grad, hessian, jacrev, jvp

    x = torch.arange(1.0, 7.0, dtype=torch.float64, device=device).reshape(2, 3)
    loss = lambda a: (dmlnumba.slice1(a, (0, 0), (2, 3), (1, -2)) ** 3).sum()  # noqa: E731
    ref = lambda a: (a[:, ::2].flip(1) ** 3).sum()  # noqa: E731
    assert torch.equal(hessian(loss)(x), hessian(ref)(x))
    t = torch.ones_like(x)
    assert torch.equal(jvp(jacrev(loss), (x,), (t,))[1], jvp(jacrev(ref), (x,), (t,))[1])
    # slice_grad's second derivatives: a loss of its (linear) spread of a's cube.
    sg = lambda a: (dmlnumba.slice_grad(a**3, (2, 5), (0, 1), (2, 4), (1, 2)) ** 2).sum()  # noqa: E731

    def sg_ref(a):
        z = torch.zeros(2, 5, dtype=a.dtype, device=a.device)
        return (
            torch.index_put(
                z,
                (torch.arange(2, device=a.device)[:, None], torch.tensor([1, 3], device=a.device)),
                a[:, :2] ** 3,
            )
            ** 2
        ).sum()

    y = x[:, :2]
    assert torch.allclose(hessian(sg)(y), hessian(sg_ref)(y))
    assert torch.allclose(grad(sg)(y), grad(sg_ref)(y))


def test_a_functional_out_beside_a_numpy_input_is_refused():
    """The operators take PyTorch tensors: a NumPy input with a functional out= is
    a TypeError (its storage is no data to write)."""
    out = torch.zeros(3)

    def f(o):
        dmlnumba.slice1(np.ones(3, np.float32), (0,), (3,), (1,), out=o)
        return o

    with pytest.raises(
        TypeError, match=r"^slice1\(\): a call that PyTorch records .* wrapper tensor"
    ):
        torch.func.functionalize(f)(out)
    assert not out.any()


# Writes bump the version counter; inference tensors; tensors that require grad.


def _outputs(device):
    x = torch.tensor([0.0, 1.0, 2.0], device=device)
    out = torch.zeros(3, device=device)
    oc = torch.zeros(1, dtype=torch.int64, device=device)
    ox = torch.zeros((3, 1), dtype=torch.int64, device=device)
    return x, out, oc, ox


def _write_all(x, out, oc, ox):
    dmlnumba.slice1(x, (0,), (3,), (-1,), out=out)
    dmlnumba.nonzero_coordinates(x, dtype=torch.int64, out_count=oc, out_coordinates=ox)


@pytest.mark.parametrize("device", DEVICES)
def test_writes_bump_the_version_counter(device):
    x, *outs = _outputs(device)
    before = [o._version for o in outs]
    _write_all(x, *outs)
    assert all(o._version > v for o, v in zip(outs, before))
    c = outs[1]
    v = c._version
    dmlnumba.nonzero_coordinates(x, dtype=torch.int64, out_count=c.detach().view(1, 1))
    assert c._version > v  # a view's write is its base's (one counter)


@pytest.mark.parametrize("device", DEVICES)
def test_autograd_refuses_a_saved_tensor_that_was_overwritten(device):
    """backward() used the overwritten values ([1, 1, 1] instead of [10, 20, 30]);
    PyTorch's own out= ops make it raise, and so do dmlnumba's now."""
    x = torch.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    w = torch.tensor([10.0, 20.0, 30.0], device=device)
    y = (x * w).sum()  # saves w for backward
    dmlnumba.slice1(torch.ones(3, device=device), (0,), (3,), (1,), out=w)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()
    x.grad = None
    w = torch.tensor([10.0, 20.0, 30.0], device=device)
    y = (x * w).sum()
    dmlnumba.slice1(torch.ones(3, device=device), (0,), (3,), (1,), out=w.detach())
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


@pytest.mark.parametrize("device", DEVICES)
def test_inference_tensors_are_written_only_in_inference_mode(device):
    with torch.inference_mode():
        x, *outs = _outputs(device)
    for o, call in zip(
        outs,
        (
            lambda: dmlnumba.slice1(x, (0,), (3,), (-1,), out=outs[0]),
            lambda: dmlnumba.nonzero_coordinates(x, dtype=torch.int64, out_count=outs[1]),
            lambda: dmlnumba.nonzero_coordinates(x, dtype=torch.int64, out_coordinates=outs[2]),
        ),
    ):
        with pytest.raises(ValueError, match=r"^\w+\(\): out\w* is an inference tensor"):
            call()
        assert not o.any()
    with torch.inference_mode():
        _write_all(x, *outs)
    assert outs[0].tolist() == [2.0, 1.0, 0.0] and outs[1].tolist() == [2]


@pytest.mark.parametrize("device", DEVICES)
def test_outputs_that_require_grad(device):
    """Refused while grad mode is on (the writes are not differentiable), as PyTorch's
    out= ops refuse them; written under torch.no_grad(), version counter bumped.  On
    CUDA such an output was written with grad mode on."""
    x = torch.tensor([0.0, 1.0, 2.0], device=device)
    out = torch.zeros(3, device=device, requires_grad=True)
    with pytest.raises(TypeError, match=r"^slice1\(\): out requires grad"):
        dmlnumba.slice1(x, (0,), (3,), (-1,), out=out)
    assert not out.detach().any() and out._version == 0
    with torch.no_grad():
        assert dmlnumba.slice1(x, (0,), (3,), (-1,), out=out) is out
    assert out.tolist() == [2.0, 1.0, 0.0] and out._version > 0
