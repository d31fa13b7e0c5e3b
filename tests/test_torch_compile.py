"""PyTorch custom operators (torch.compile, torch.export, opcheck) and JAX arrays,
on the CPU (CI installs the CPU builds of torch and jax)."""

import logging

import numpy as np
import pytest
from interpreter import run_python

import dmlnumba

torch = pytest.importorskip("torch")


def _input(rng, shape=(6, 9), p=0.4):
    return torch.from_numpy((rng.standard_normal(shape) * (rng.random(shape) < p)).astype("f4"))


def _both(x):
    count, coords = dmlnumba.nonzero_coordinates(x)
    limited = dmlnumba.nonzero_coordinates(x, 2, dtype=np.int64, max_count=5)
    window = dmlnumba.slice1(x, (1, 0), (5, 9), (-2, 3))
    return count, coords, limited, window


def _check(x, out):
    count, coords, (lcount, lcoords), window = out
    h = x.numpy()
    want = np.argwhere(h)
    assert int(count[0]) == len(want) == int(lcount[0])
    assert count.dtype == torch.uint32 and lcoords.dtype == torch.int64
    assert tuple(coords.shape) == (h.size, 2) and tuple(lcoords.shape) == (5, 2)
    np.testing.assert_array_equal(coords[: len(want)].numpy(), want)
    np.testing.assert_array_equal(lcoords[: min(5, len(want))].numpy(), want[:5])
    np.testing.assert_array_equal(window.numpy(), h[5:0:-2, ::3])


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_fullgraph_traces_to_the_operators(backend):
    """fullgraph=True: no graph break, and the graph holds dmlnumba's operators;
    exact over inputs of several densities (the compiled graph is reused)."""
    seen = []

    def spy(gm, example_inputs):
        seen.append(str(gm.code))
        return gm.forward

    rng = np.random.default_rng(0)
    torch.compile(_both, fullgraph=True, backend=spy)(_input(rng))
    assert "torch.ops.dmlnumba.nonzero_coordinates" in seen[0]
    assert "torch.ops.dmlnumba.slice1" in seen[0]
    cf = torch.compile(_both, fullgraph=True, backend=backend)
    for p in (0.0, 1.0, 0.3, 0.7):
        x = _input(rng, p=p)
        _check(x, cf(x))


def test_compile_with_preallocated_outputs_and_argwhere():
    """out= arguments become the mutating operators; argwhere has an unbacked size."""

    def f(x, oc, ox, out):
        dmlnumba.nonzero_coordinates(x, dtype=torch.uint64, out_count=oc, out_coordinates=ox)
        dmlnumba.slice1(x, (0, 0), (6, 9), (1, -1), out=out)
        return dmlnumba.argwhere(x) * 1

    rng = np.random.default_rng(1)
    cf = torch.compile(f, fullgraph=True, backend="aot_eager")
    for p in (0.0, 0.5, 1.0):
        x = _input(rng, p=p)
        oc, ox, out = (
            torch.empty(1, dtype=torch.uint64),
            torch.empty(54, 2, dtype=torch.uint64),
            torch.empty(6, 9),
        )
        rows = cf(x, oc, ox, out)
        want = np.argwhere(x.numpy())
        np.testing.assert_array_equal(rows.numpy(), want)
        assert int(oc[0]) == len(want)
        np.testing.assert_array_equal(ox[: len(want)].numpy(), want)
        np.testing.assert_array_equal(out.numpy(), x.numpy()[:, ::-1])


@pytest.mark.parametrize("how", ["compile", "functionalize"])
def test_one_given_nonzero_output_gives_the_other_new(how):
    """Given only out_count= or only out_coordinates=, the traced call returns the
    caller's one and a new one for the other, as the eager call does (it returned
    None in the other's place)."""

    def count_only(x, oc):
        return dmlnumba.nonzero_coordinates(x, out_count=oc)

    def coords_only(x, ox):
        return dmlnumba.nonzero_coordinates(x, out_coordinates=ox)

    rng = np.random.default_rng(3)
    for f, given in ((count_only, 0), (coords_only, 1)):
        torch._dynamo.reset()
        run = (
            torch.compile(f, fullgraph=True, backend="aot_eager")
            if how == "compile"
            else torch.func.functionalize(f)
        )
        for p in (0.3, 0.7):  # the first call and a repeat
            x = _input(rng, p=p)
            out = (
                torch.empty(1, dtype=torch.uint32)
                if given == 0
                else torch.empty(54, 2, dtype=torch.uint32)
            )
            r = run(x, out)
            want = np.argwhere(x.numpy())
            assert all(isinstance(t, torch.Tensor) for t in r)
            assert tuple(r[0].shape) == (1,) and tuple(r[1].shape) == (54, 2)
            assert int(r[0][0]) == len(want)
            np.testing.assert_array_equal(r[1][: len(want)].numpy(), want)
            if how == "compile":  # (functionalize writes its own copy, then the caller's)
                assert r[given] is out


def test_jit_trace_records_the_operators():
    """torch.jit.trace (the legacy ONNX exporter's tracer) records the operators: the
    traced function computes each new input's results (it kept the first call's as
    constants: the eager path's results come from NumPy memory, which it cannot see)."""
    import warnings

    def f(x):
        count, coords = dmlnumba.nonzero_coordinates(x)
        g = dmlnumba.slice_grad(x[:2], (6, 9), (0, 0), (4, 9), (2, -1))
        return count, coords, dmlnumba.slice1(x, (1, 0), (5, 9), (-2, 3)), g

    rng = np.random.default_rng(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the tracer's warnings about the fake's checks)
        tf = torch.jit.trace(f, (_input(rng),), check_trace=False)
    assert "dmlnumba::slice1" in str(tf.graph) and "dmlnumba::nonzero_coordinates" in str(tf.graph)
    for p in (0.2, 0.9):
        x = _input(rng, p=p)
        (count, coords, *windows), want = tf(x), f(x)
        n = np.count_nonzero(x.numpy())
        assert int(count[0]) == int(want[0][0]) == n  # (rows past the count: undefined)
        assert torch.equal(coords[:n], want[1][:n])
        assert all(torch.equal(a, b) for a, b in zip(windows, want[2:]))


def test_export_holds_the_operators():
    class M(torch.nn.Module):
        def forward(self, x):
            return _both(x)

    rng = np.random.default_rng(2)
    x = _input(rng)
    ep = torch.export.export(M(), (x,))
    code = ep.graph_module.code
    assert "torch.ops.dmlnumba.nonzero_coordinates.default" in code
    assert "torch.ops.dmlnumba.slice1.default" in code
    for p in (0.0, 0.5, 1.0):
        y = _input(rng, p=p)
        _check(y, ep.module()(y))


def test_opcheck_on_cpu():
    """torch.library.opcheck on inputs whose every returned row is defined (rows past
    the count are unspecified, so the checks' comparisons would see garbage)."""
    import dmlnumba.torch_ops  # noqa: F401

    ops = torch.ops.dmlnumba
    rng = np.random.default_rng(3)
    x = _input(rng, (5, 7))
    k = int((x != 0).sum())
    torch.library.opcheck(
        ops.nonzero_coordinates.default, (torch.ones(3, 4), None, torch.uint32, None)
    )
    torch.library.opcheck(ops.nonzero_coordinates.default, (x, 2, torch.int64, k))
    torch.library.opcheck(ops.nonzero_coordinates.default, (x, None, torch.uint64, 0))
    torch.library.opcheck(ops.slice1.default, (x, [1, 0], [4, 7], [-1, 3], None))
    torch.library.opcheck(ops.slice1.default, (x, [0, 2], [5, 5], [2, -2], [2, 3]))
    torch.library.opcheck(
        ops.slice1_out.default, (x, [1, 0], [4, 7], [-1, 3], None, x.new_empty(4, 3))
    )
    torch.library.opcheck(
        ops.nonzero_coordinates_out.default,
        (
            torch.ones(2, 3),
            None,
            None,
            torch.empty(1, dtype=torch.int64),
            torch.empty(6, 2, dtype=torch.int64),
        ),
    )


def test_eager_calls_do_not_register_the_operators():
    """Eager calls run the kernels directly: the operators' module is imported only
    when a call is traced (or asked for)."""
    code = (
        "import sys, torch, dmlnumba\n"
        "dmlnumba.nonzero_coordinates(torch.ones(3))\n"
        "dmlnumba.slice1(torch.ones(3), (0,), (3,), (-1,))\n"
        "assert 'dmlnumba.torch_ops' not in sys.modules\n"
    )
    r = run_python(code)
    assert r.returncode == 0, r.stderr


def test_jax_cpu_arrays_in_give_jax_arrays_out():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    rng = np.random.default_rng(5)
    h = (rng.random((7, 5)) < 0.4).astype(np.float32) * 2
    x = jnp.asarray(h)
    count, coords = dmlnumba.nonzero_coordinates(x)
    assert isinstance(count, jax.Array) and isinstance(coords, jax.Array)
    want = np.argwhere(h)
    assert int(count[0]) == len(want)
    np.testing.assert_array_equal(np.asarray(coords)[: len(want)], want)
    s = dmlnumba.slice1(x, *dmlnumba.window(h.shape, np.s_[::-1, 1::2]))
    assert isinstance(s, jax.Array)
    np.testing.assert_array_equal(np.asarray(s), h[::-1, 1::2])
    a = dmlnumba.argwhere(x)
    assert isinstance(a, jax.Array)
    np.testing.assert_array_equal(np.asarray(a), want)


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
def test_what_pytorch_users_pass(device):
    """bfloat16 (copied bit for bit; +0 and -0 zero, NaN non-zero), tensors that
    require grad (nonzero's results do not require grad; slice1's do, and its out= is
    refused in grad mode, as PyTorch's out= calls are), lazily negated views
    (resolved: the values, not the storage), and PyTorch dtypes as dtype=."""
    rng = np.random.default_rng(6)
    h = rng.standard_normal((9, 11)).astype(np.float32)
    h[rng.random(h.shape) < 0.5] = 0
    h[0, :3] = [-0.0, np.nan, np.inf]
    b = torch.from_numpy(h).to(torch.bfloat16).to(device).requires_grad_()
    bits = b.detach().view(torch.int16).cpu().numpy()
    want = np.argwhere((bits & 0x7FFF) != 0)  # bfloat16: only +-0 are zero
    count, coords = dmlnumba.nonzero_coordinates(b, dtype=torch.int64)
    assert not count.requires_grad and not coords.requires_grad
    assert coords.dtype == torch.int64 and int(count[0]) == len(want)
    np.testing.assert_array_equal(coords[: len(want)].cpu().numpy(), want)
    np.testing.assert_array_equal(dmlnumba.argwhere(b).cpu().numpy(), want)
    w = dmlnumba.window(h.shape, np.s_[::-1, 1::3])
    s = dmlnumba.slice1(b, *w)
    assert s.dtype == torch.bfloat16 and s.requires_grad
    np.testing.assert_array_equal(s.detach().view(torch.int16).cpu().numpy(), bits[::-1, 1::3])
    out = torch.empty(tuple(w[3]), dtype=torch.bfloat16, device=device)
    with pytest.raises(TypeError, match=r"^slice1\(\): out= does not support automatic diff"):
        dmlnumba.slice1(b, *w, out=out)
    with torch.no_grad():
        assert dmlnumba.slice1(b, *w, out=out) is out
    np.testing.assert_array_equal(out.view(torch.int16).cpu().numpy(), bits[::-1, 1::3])
    z = torch.complex(torch.from_numpy(h), torch.from_numpy(h[::-1].copy())).to(device)
    neg = z.conj().imag  # a lazily negated view
    assert neg.is_neg()
    for _ in range(2):  # the second call takes the repeated-call path where there is one
        s = dmlnumba.slice1(neg, (0, 0), (9, 11), (1, 1))
        np.testing.assert_array_equal(s.cpu().numpy(), -h[::-1])
        count, coords = dmlnumba.nonzero_coordinates(neg)
        assert int(count[0]) == int(np.count_nonzero(h[::-1]))
    with pytest.raises(TypeError, match=r"^slice1\(\): .*dtype"):
        dmlnumba.slice1(z, (0, 0), (9, 11), (1, 1))


def _chain(e):
    while e is not None:
        yield e
        e = e.__cause__ or e.__context__


_BAD_CALLS = {
    "zero stride": lambda x: dmlnumba.slice1(x, (0, 0), (2, 3), (1, 0)),
    "window out of bounds": lambda x: dmlnumba.slice1(x, (1, 0), (3, 3), (1, 1)),
    "output_sizes too large": lambda x: dmlnumba.slice1(x, (0, 0), (3, 3), (2, 1), (3, 3)),
    "strides of another rank": lambda x: dmlnumba.slice1(x, (0, 0), (3, 3), (1,)),
    "out of another shape": lambda x: dmlnumba.slice1(x, (0, 0), (2, 2), (1, 1), out=x),
    "width below the rank": lambda x: dmlnumba.nonzero_coordinates(x, 1),
    "dtype no coordinate type": lambda x: dmlnumba.nonzero_coordinates(x, dtype=torch.float32),
    "max_count negative": lambda x: dmlnumba.nonzero_coordinates(x, max_count=-1),
    "complex input": lambda x: dmlnumba.argwhere(x.to(torch.complex64)),
}


@pytest.mark.parametrize("case", sorted(_BAD_CALLS))
def test_compiled_calls_raise_the_eager_errors(case):
    """The fake implementations check the arguments with the eager call's own
    functions: a compiled call raises the eager call's error (in the chain of the
    tracer's own), where a zero stride raised ZeroDivisionError from the fake."""
    logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
    f = _BAD_CALLS[case]
    x = torch.arange(9.0).reshape(3, 3)
    with pytest.raises((TypeError, ValueError)) as eager:
        f(x)
    torch._dynamo.reset()
    with pytest.raises(Exception) as compiled:
        torch.compile(f, fullgraph=True, backend="aot_eager")(x)
    errors = list(_chain(compiled.value))
    assert not any(isinstance(e, ZeroDivisionError) for e in errors)
    want = (type(eager.value), str(eager.value))
    assert any((type(e), str(e)) == want for e in errors) or any(
        want[1] in str(e) for e in errors
    ), (want, errors[0])


@pytest.mark.parametrize("op", ["slice1", "slice_grad"])
def test_compiled_out_that_requires_grad_is_refused(op):
    """An out= that requires grad (a leaf, or the result of a recorded op) is refused
    in grad mode with the eager call's error, and left unwritten; written under
    no_grad.  The compiled call wrote it, invisibly to autograd: the result of a
    recorded op kept its grad_fn, and its inputs got that op's gradient."""
    logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
    x = torch.arange(9.0).reshape(3, 3)
    if op == "slice1":
        f = lambda x, o: dmlnumba.slice1(x, (0, 0), (3, 3), (1, -1), out=o)  # noqa: E731
    else:
        f = lambda x, o: dmlnumba.slice_grad(x, (3, 3), (0, 0), (3, 3), (1, -1), out=o)  # noqa: E731
    want = f(x, torch.empty(3, 3))
    w = torch.ones(3, 3, requires_grad=True)
    for o in (torch.zeros(3, 3, requires_grad=True), w * 2):
        before = o.detach().clone()
        with pytest.raises(TypeError, match=rf"^{op}\(\): out requires grad") as eager:
            f(x, o)
        torch._dynamo.reset()
        with pytest.raises(Exception) as compiled:
            torch.compile(f, fullgraph=True, backend="aot_eager")(x, o)
        assert any(str(eager.value) in str(e) for e in _chain(compiled.value)), compiled.value
        assert torch.equal(o.detach(), before)
    o = torch.zeros(3, 3, requires_grad=True)
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(f, fullgraph=True, backend="aot_eager")(x, o)
    assert torch.equal(o.detach(), want)


def test_numpy_inputs_under_compile_give_what_eager_calls_give():
    """A NumPy input (or output) runs eagerly, as a graph break: NumPy results, as
    in eager calls (argwhere raised, slice1 returned a tensor)."""
    h = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, 3.0]], np.float32)

    def f(a, out):
        window = dmlnumba.slice1(a, (0, 0), (2, 3), (-1, 2))
        count, coords = dmlnumba.nonzero_coordinates(a, dtype=np.int64)
        dmlnumba.slice1(a, (0, 0), (2, 3), (1, -1), out=out)
        return window, count, coords, dmlnumba.argwhere(a), dmlnumba.argwhere(a.tolist())

    torch._dynamo.reset()
    out = np.zeros((2, 3), np.float32)
    window, count, coords, rows, from_list = torch.compile(f, backend="aot_eager")(h, out)
    for r in (window, count, coords, rows, from_list):
        assert type(r) is np.ndarray
    np.testing.assert_array_equal(window, h[::-1, ::2])
    np.testing.assert_array_equal(out, h[:, ::-1])
    assert count.dtype == np.int64 and int(count[0]) == 3
    np.testing.assert_array_equal(coords[:3], np.argwhere(h))
    np.testing.assert_array_equal(rows, np.argwhere(h))
    np.testing.assert_array_equal(from_list, np.argwhere(h))
    torch._dynamo.reset()  # compiled code is kept per code object
    with pytest.raises(Exception, match="disable"):  # a documented graph break
        torch.compile(f, fullgraph=True, backend="aot_eager")(h, out)


def test_device_of_the_tensor_holds_fullgraph():
    """device= naming where the tensor is, the same call, holds fullgraph=True (the
    operators run there); another device (a copy first) runs the eager call, a graph
    break (fullgraph refuses it)."""
    x = torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, 3.0]])

    def f(a):
        count, _ = dmlnumba.nonzero_coordinates(a, device="cpu")
        return dmlnumba.slice1(a, (0, 0), (2, 3), (1, -1), device="cpu"), count

    torch._dynamo.reset()
    window, count = torch.compile(f, fullgraph=True, backend="aot_eager")(x)
    assert torch.equal(window, x.flip(1)) and int(count[0]) == 3
    if torch.cuda.is_available():
        torch._dynamo.reset()
        g = lambda a: dmlnumba.slice1(a, (0, 0), (2, 3), (1, -1), device="cuda")  # noqa: E731
        with pytest.raises(Exception, match="disable"):  # a documented graph break
            torch.compile(g, fullgraph=True, backend="aot_eager")(x)


def _all_three(x):
    window = dmlnumba.slice1(x, (1, 0), (3, 2), (2, -1))
    count, coords = dmlnumba.nonzero_coordinates(x, dtype=torch.int64)
    return window, count, coords, dmlnumba.argwhere(x) * 1


def _check_all_three(x, got):
    window, count, coords, rows = got
    h = x.numpy()
    want = np.argwhere(h)
    np.testing.assert_array_equal(window.numpy(), h[1:4:2, 1::-1])
    assert int(count[0]) == len(want) and tuple(coords.shape) == (h.size, 2)
    np.testing.assert_array_equal(coords[: len(want)].numpy(), want)
    np.testing.assert_array_equal(rows.numpy(), want)


def _dynamic_inputs(rng):
    for n in (5, 8, 13):
        yield _input(rng, (n, 2), p=0.5)


def test_dynamic_shapes_fullgraph_for_all_three_operators():
    """dynamic=True, fullgraph=True: one graph for every size (argwhere's bound was
    the symbolic element count, which new_dynamic_size(max=) refused)."""
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    cf = torch.compile(_all_three, backend=counter, dynamic=True, fullgraph=True)
    rng = np.random.default_rng(7)
    for x in _dynamic_inputs(rng):
        _check_all_three(x, cf(x))
    assert counter.frame_count == 1


def test_export_with_a_dynamic_dimension():
    class M(torch.nn.Module):
        def forward(self, x):
            return _all_three(x)

    rng = np.random.default_rng(8)
    n = torch.export.Dim("n", min=4, max=1 << 20)
    ep = torch.export.export(M(), (_input(rng, (6, 2)),), dynamic_shapes=({0: n},))
    code = ep.graph_module.code
    for op in ("slice1", "nonzero_coordinates", "argwhere"):
        assert f"torch.ops.dmlnumba.{op}.default" in code
    for x in _dynamic_inputs(rng):
        _check_all_three(x, ep.module()(x))


@pytest.mark.parametrize("fullgraph", [False, True])
def test_compiled_argwhere_of_a_0_d_tensor_is_numpy_s_shape(fullgraph):
    """A 0-d input gives (1, 0) or (0, 0) under torch.compile, as in eager calls."""
    torch._dynamo.reset()
    x = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    f = torch.compile(
        lambda x: (dmlnumba.argwhere(x[0, 0]), dmlnumba.argwhere(x[0, 1])),
        fullgraph=fullgraph,
        backend="aot_eager",
    )
    one, none = f(x)
    assert tuple(one.shape) == (1, 0) and tuple(none.shape) == (0, 0)
    assert one.dtype == none.dtype == torch.int64
