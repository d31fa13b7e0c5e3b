"""Gradients through slice1 and slice_grad in PyTorch: eager, torch.compile (inductor,
fullgraph, reduce-overhead), torch.export, gradcheck and opcheck; nonzero's integer
outputs beside a model that is trained."""

import numpy as np
import pytest

import dmlnumba

torch = pytest.importorskip("torch")

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])

#: Windows of a (5, 7) input: negative strides, strides beyond the window, a smaller output.
WINDOWS = [
    ((1, 0), (4, 7), (-2, 3), None),
    ((0, 2), (5, 5), (1, -1), None),
    ((0, 0), (5, 7), (-2, 3), (2, 2)),
    ((4, 6), (1, 1), (-5, 9), None),
]


def _flip_slice(x, offsets, sizes, strides, output_sizes):
    """SLICE1 written with PyTorch's slicing and flip (its slicing refuses negative steps)."""
    idx, flips = [], []
    for d, (o, s, t) in enumerate(zip(offsets, sizes, strides)):
        m = 1 + (s - 1) // abs(t) if output_sizes is None else output_sizes[d]
        if t > 0:
            idx.append(slice(o, o + (m - 1) * t + 1, t))
        else:
            hi = o + s - 1
            idx.append(slice(hi - (m - 1) * -t, hi + 1, -t))
            flips.append(d)
    y = x[tuple(idx)]
    return y.flip(flips) if flips else y


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("window", WINDOWS)
def test_eager_gradients_equal_flip_and_slicing(device, window):
    x = torch.randn(5, 7, dtype=torch.float64, device=device, requires_grad=True)
    y = dmlnumba.slice1(x, *window)
    assert y.requires_grad and "slice1" in type(y.grad_fn).__name__
    (y * y).sum().backward()
    got = x.grad.clone()
    x.grad = None
    ref = _flip_slice(x, *window)
    torch.testing.assert_close(y, ref, rtol=0, atol=0)
    (ref * ref).sum().backward()
    torch.testing.assert_close(got, x.grad, rtol=0, atol=0)
    assert got.count_nonzero() == y.numel()


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_and_gradgradcheck(device):
    for window in WINDOWS:
        x = torch.randn(5, 7, dtype=torch.float64, device=device, requires_grad=True)
        assert torch.autograd.gradcheck(lambda t: dmlnumba.slice1(t, *window), (x,))
        assert torch.autograd.gradgradcheck(lambda t: dmlnumba.slice1(t, *window), (x,))
    offsets, sizes, strides, _ = WINDOWS[0]
    g = torch.randn(2, 3, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: dmlnumba.slice_grad(t, (5, 7), *WINDOWS[0][:3]), (g,))
    assert torch.autograd.gradgradcheck(
        lambda t: dmlnumba.slice_grad(t, (5, 7), offsets, sizes, strides), (g,)
    )


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    """PyTorch's own checks of the operators (schema, fake, autograd registration),
    with samples that require grad."""
    import dmlnumba.torch_ops  # noqa: F401  (registers the operators)

    ops = torch.ops.dmlnumba
    for offsets, sizes, strides, output_sizes in WINDOWS:
        for rg in (False, True):
            x = torch.randn(5, 7, device=device, requires_grad=rg)
            torch.library.opcheck(ops.slice1, (x, offsets, sizes, strides, output_sizes))
    for rg in (False, True):
        g = torch.randn(2, 3, device=device, requires_grad=rg)
        torch.library.opcheck(ops.slice_grad, (g, [5, 7], *WINDOWS[0][:3]))


class _Model(torch.nn.Module):
    """Linear, then a reversed strided window of its output, then a loss."""

    def __init__(self, use_dmlnumba):
        super().__init__()
        self.lin = torch.nn.Linear(8, 12, dtype=torch.float64)
        self.use = use_dmlnumba

    def forward(self, x):
        h = self.lin(x)
        window = ((0, 1), (h.shape[0], 10), (1, -3), None)
        y = dmlnumba.slice1(h, *window) if self.use else _flip_slice(h, *window)
        return (y * y).sum()


def _train(model, x, steps, step_fn=None):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    f = model if step_fn is None else step_fn
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = f(x)
        loss.backward()
        opt.step()
        losses.append(loss.detach().clone())
    return torch.stack(losses)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_compiled_training_matches_flip_and_slicing(device, mode):
    """``fullgraph=True`` (no graph break, forward or backward): the losses and the
    weights after a few steps are those of the module written with flip and slicing."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    ours, ref = _Model(True).to(device), _Model(False).to(device)
    ref.load_state_dict(ours.state_dict())
    x = torch.randn(6, 8, dtype=torch.float64, device=device)
    compiled = torch.compile(ours, fullgraph=True, mode=mode)
    got = _train(ours, x, 4, compiled)
    want = _train(ref, x, 4)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    for a, b in zip(ours.parameters(), ref.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_exported_program_gradients(device):
    """torch.export holds slice1 as one node; the exported module trains as the
    eager one does."""
    torch.manual_seed(1)
    model = _Model(True).to(device)
    x = torch.randn(6, 8, dtype=torch.float64, device=device)
    ep = torch.export.export(model, (x,))
    assert "torch.ops.dmlnumba.slice1.default" in ep.graph_module.code
    m = ep.module()
    m(x).backward()
    model(x).backward()
    got = dict(m.named_parameters())
    for name, p in model.named_parameters():
        torch.testing.assert_close(got[name].grad, p.grad, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_nonzero_beside_a_trained_model_compiles(device):
    """nonzero_coordinates and argwhere of a tensor that requires grad: integer
    outputs without gradient, as torch.nonzero's; the model around them compiles
    with fullgraph=True and trains."""
    torch._dynamo.reset()
    lin = torch.nn.Linear(4, 6).to(device)

    def step(x):
        h = lin(x)
        count, coords = dmlnumba.nonzero_coordinates(h > 0, dtype=torch.int64)
        assert not coords.requires_grad
        return (h * h).sum() + count.sum() * 0

    f = torch.compile(step, fullgraph=True)
    x = torch.randn(3, 4, device=device)
    f(x).backward()
    assert lin.weight.grad is not None
    rows = dmlnumba.argwhere(lin(x))
    assert not rows.requires_grad and rows.dtype == torch.int64


@pytest.mark.parametrize("window", WINDOWS)
def test_forward_mode_ad_carries_the_tangent(window):
    """torch.autograd.forward_ad: slice1's and slice_grad's tangents are the tangent's
    window (both operators are linear), on the first call and repeats, with and
    without requires_grad; a dropped tangent gave forward-mode Jacobians of zeros."""
    import torch.autograd.forward_ad as fwad

    offsets, sizes, strides, output_sizes = window
    x = torch.randn(5, 7, dtype=torch.float64)
    want = _flip_slice(x, *window)
    for rg in (False, True, False):  # (the third: a repeat of the first's key)
        t = torch.randn(5, 7, dtype=torch.float64)
        with fwad.dual_level():
            y = dmlnumba.slice1(fwad.make_dual(x.requires_grad_(rg), t), *window)
            primal, tangent = fwad.unpack_dual(y)
            assert torch.equal(primal.detach(), want) and torch.equal(
                tangent, _flip_slice(t, *window)
            )
            out = torch.empty(want.shape, dtype=torch.float64)
            with pytest.raises(TypeError, match=r"^slice1\(\): out= does not carry forward"):
                with torch.no_grad():
                    dmlnumba.slice1(fwad.make_dual(x.detach(), t), *window, out=out)
            if output_sizes is None:  # (slice_grad takes the window's own sizes)
                g = fwad.make_dual(want.detach(), _flip_slice(t, *window))
                z = dmlnumba.slice_grad(g, (5, 7), offsets, sizes, strides)
                _, back = torch.func.vjp(lambda a: _flip_slice(a, *window), t)  # (the adjoint)
                (ref,) = back(_flip_slice(t, *window))
                assert torch.equal(fwad.unpack_dual(z).tangent, ref)
        x = x.detach()
    f = lambda a: dmlnumba.slice1(a, *window)  # noqa: E731
    fwd = torch.autograd.functional.jacobian(f, x, strategy="forward-mode", vectorize=True)
    assert torch.equal(fwd, torch.autograd.functional.jacobian(f, x))
    assert fwd.sum() == want.numel()
    torch.autograd.gradcheck(f, x.clone().requires_grad_(), check_forward_ad=True)


_BAD_PARAMETERS = {
    "bool stride": lambda x: dmlnumba.slice1(x, (0, 0), (3, 4), (True, 1)),
    "float stride": lambda x: dmlnumba.slice1(x, (0, 0), (3, 4), (1.5, 1)),
    "generator offsets": lambda x: dmlnumba.slice1(x, (i for i in (0, 0)), (3, 4), (1, 1)),
    "bool array sizes": lambda x: dmlnumba.slice1(x, (0, 0), np.array([True, True]), (1, 1)),
    "bool input_shape": lambda x: dmlnumba.slice_grad(x[:1], (True, 4), (0, 0), (1, 4), (1, 1)),
    "float offsets": lambda x: dmlnumba.slice_grad(x[:1], (3, 4), (0.0, 0), (1, 4), (1, 1)),
}


@pytest.mark.parametrize("case", sorted(_BAD_PARAMETERS))
def test_recorded_calls_check_parameters_as_eager_calls(case):
    """A call that autograd records (the input requires grad) goes through the
    operators, whose schema took True for 1, refused a float with its own RuntimeError
    and read a generator twice: it raises the eager call's error, naming the
    function and parameter."""
    f = _BAD_PARAMETERS[case]
    x = torch.arange(12.0).reshape(3, 4)
    with pytest.raises((TypeError, ValueError)) as eager:
        f(x)
    with pytest.raises(type(eager.value)) as recorded:
        f(x.clone().requires_grad_())
    name = str(eager.value).split(" must")[0]  # the function and the parameter
    assert str(recorded.value).startswith(name), (eager.value, recorded.value)


def test_recorded_calls_take_their_own_device():
    """device= naming where the tensor is (the same call) is taken on the operators'
    path; it was a TypeError calling the tensor a wrapper."""
    x = torch.arange(12.0).reshape(3, 4).requires_grad_()
    y = dmlnumba.slice1(x, (0, 0), (3, 4), (1, -1), device="cpu")
    y.sum().backward()
    assert torch.equal(y.detach(), x.detach().flip(1)) and torch.equal(x.grad, torch.ones(3, 4))
    assert torch.equal(dmlnumba.argwhere(x, device="cpu"), torch.argwhere(x.detach()))


def test_out_with_an_input_that_requires_grad():
    """An out= write is not differentiable: refused in grad mode (as PyTorch's out=
    calls are), written under no_grad."""
    x = torch.arange(6.0, requires_grad=True)
    out = torch.zeros(3)
    with pytest.raises(TypeError, match=r"^slice1\(\): out= does not support automatic"):
        dmlnumba.slice1(x, (0,), (6,), (-2,), out=out)
    g = torch.ones(3, requires_grad=True)
    with pytest.raises(TypeError, match=r"^slice_grad\(\): out= does not support automatic"):
        dmlnumba.slice_grad(g, (6,), (0,), (6,), (-2,), out=torch.zeros(6))
    assert not out.any()
    with torch.no_grad():
        dmlnumba.slice1(x, (0,), (6,), (-2,), out=out)
    assert out.tolist() == [5.0, 3.0, 1.0]


def test_no_grad_calls_take_the_eager_path():
    """Under no_grad (and for inputs that do not require grad) nothing is recorded."""
    x = torch.arange(6.0, requires_grad=True)
    with torch.no_grad():
        y = dmlnumba.slice1(x, (0,), (6,), (-2,))
    assert not y.requires_grad and y.tolist() == [5.0, 3.0, 1.0]
    np.testing.assert_array_equal(
        dmlnumba.slice1(x.detach(), (0,), (6,), (-2,)).numpy(), [5.0, 3.0, 1.0]
    )
