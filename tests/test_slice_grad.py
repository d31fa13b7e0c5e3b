"""slice_grad against NumPy (zeros, then the window assigned): the reference page's
example, random gradients, windows and outputs on every device, and its errors."""

import contextlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dmlnumba

from devices import DEVICES, device_view, to_device, to_host
from strategies import (
    DML_DTYPES,
    LAYOUTS,
    bits,
    check_written,
    laid_out,
    odd_outs,
    slice_grad_reference,
    values,
    windows,
)

pytestmark = pytest.mark.boundscheck  # CI runs these again with NUMBA_BOUNDSCHECK=1


def _gradient(data, shape, dtype, offsets, sizes, strides):
    """A gradient of the window's output shape, of a drawn layout and values."""
    m = tuple(1 + (s - 1) // abs(t) for s, t in zip(sizes, strides))
    base = data.draw(values(dtype, int(np.prod(m))))
    return data.draw(laid_out(base, m, data.draw(st.sampled_from(LAYOUTS))))


@contextlib.contextmanager
def _zeros_by_box(boxes):
    """Every target zeroes the window's complement box by box (``boxes``), or the whole
    output first."""
    from dmlnumba.cpu import target as cpu

    targets = [cpu]
    if "cuda" in DEVICES:
        from dmlnumba.gpu import target as gpu

        targets.append(gpu)
    saved = [t.ZERO_BOX_BYTES for t in targets]
    for t in targets:
        t.ZERO_BOX_BYTES = 0 if boxes else 1 << 62
    try:
        yield
    finally:
        for t, v in zip(targets, saved):
            t.ZERO_BOX_BYTES = v


@given(data=st.data())
def test_complement_boxes_cover_the_rest_once(data):
    """The boxes and the window cover every element exactly once."""
    from dmlnumba.layout import complement_boxes, scatter_window

    shape = data.draw(st.lists(st.integers(1, 7), min_size=1, max_size=4).map(tuple))
    offsets, sizes, strides, _ = data.draw(windows(shape))
    m = tuple(1 + (s - 1) // abs(t) for s, t in zip(sizes, strides))
    starts = tuple(o if t > 0 else o + s - 1 for o, s, t in zip(offsets, sizes, strides))
    lows, spacing, _, _ = scatter_window(starts, strides, m)
    seen = np.zeros(shape, np.int32)
    for lo, k, n in complement_boxes(shape, lows, spacing, m) + [(lows, spacing, m)]:
        seen[tuple(slice(a, a + (b - 1) * c + 1, c) for a, c, b in zip(lo, k, n))] += 1
    assert (seen == 1).all()


@pytest.mark.parametrize("device", DEVICES)
def test_reference_page_example(device):
    """DirectML's page: a 4x4 input, window (0, 0), (4, 4), (2, 2)."""
    g = np.array([[1, 3], [9, 11]], np.float32)
    out = dmlnumba.slice_grad(to_device(g, device), (4, 4), (0, 0), (4, 4), (2, 2), device=device)
    np.testing.assert_array_equal(
        to_host(out), [[1, 0, 3, 0], [0, 0, 0, 0], [9, 0, 11, 0], [0, 0, 0, 0]]
    )


@pytest.mark.parametrize("device", DEVICES)
def test_backward_of_slice1(device):
    """Each element of a slice1 output goes back to where slice1 read it: slice_grad of
    slice1(x) equals x on the window and 0 elsewhere, a negative stride included."""
    x = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
    w = ((0, 0, 0, 1), (1, 1, 4, 3), (1, 1, -2, 2))
    y = dmlnumba.slice1(to_device(x, device), *w, device=device)
    back = to_host(dmlnumba.slice_grad(y, x.shape, *w, device=device))
    want = np.zeros_like(x)
    want[0, 0, 1::2, 1::2] = x[0, 0, 1::2, 1::2]
    np.testing.assert_array_equal(back, want)


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_random_gradients_match_numpy(device, data):
    """Every dtype, rank 1 to 8, signed strides (also beyond the window), any layout of
    the gradient; the result bit for bit (NaN payloads, -0.0)."""
    dtype = data.draw(st.sampled_from(DML_DTYPES))
    shape = data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=8).map(tuple))
    offsets, sizes, strides, _ = data.draw(windows(shape))
    g = _gradient(data, shape, dtype, offsets, sizes, strides)
    got = to_host(
        dmlnumba.slice_grad(to_device(g, device), shape, offsets, sizes, strides, device=device)
    )
    want = slice_grad_reference(g, shape, offsets, sizes, strides)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(bits(got), bits(want))


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_random_windows_of_any_row_length_match_numpy(device, data):
    """Rows of 1 to 1500 elements under up to 3 short dimensions (CUDA's one-pass kernel
    where the window's rows are not whole: every count of lanes a row, rows across a
    warp's segments, planes ending inside a warp's rows, 4 pairs of chunks a lane in
    long rows of few rows), every item width; the result bit for bit."""
    dtype = data.draw(st.sampled_from(["uint8", "float16", "float32", "float64"]))
    outer = data.draw(st.lists(st.integers(1, 4), max_size=3))
    shape = (*outer, data.draw(st.integers(1, 1500)))
    offsets, sizes, strides, _ = data.draw(windows(shape))
    g = _gradient(data, shape, dtype, offsets, sizes, strides)
    got = to_host(
        dmlnumba.slice_grad(to_device(g, device), shape, offsets, sizes, strides, device=device)
    )
    np.testing.assert_array_equal(
        bits(got), bits(slice_grad_reference(g, shape, offsets, sizes, strides))
    )


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_out_with_odd_strides_is_zeroed_and_written(device, data):
    """A caller's ``out`` of any layout inside a poisoned buffer: every element of it
    zeroed or written, nothing outside it touched."""
    dtype = data.draw(st.sampled_from(["float32", "int8", "uint16", "float64"]))
    shape = data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=4).map(tuple))
    offsets, sizes, strides, _ = data.draw(windows(shape))
    g = _gradient(data, shape, dtype, offsets, sizes, strides)
    want = slice_grad_reference(g, shape, offsets, sizes, strides)
    kind = data.draw(st.sampled_from(["C", "F", "strided", "permuted"]))
    buf, view_of = data.draw(odd_outs(shape, dtype, kind))
    before = buf.copy()
    dbuf = to_device(buf, device)
    out = view_of(buf) if device == "cpu" else device_view(dbuf, view_of, buf)
    with _zeros_by_box(data.draw(st.booleans())):  # the complement's boxes, or all first
        res = dmlnumba.slice_grad(
            to_device(g, device), shape, offsets, sizes, strides, out=out, device=device
        )
    assert res is out
    check_written(before, to_host(dbuf), view_of, want)


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_out_overlapping_the_gradient_reads_it_first(device, data):
    """An ``out`` that shares memory with the gradient: the gradient is read whole
    before the output is zeroed (the result is NumPy's on a copy)."""
    n = data.draw(st.integers(2, 40))
    offset = data.draw(st.integers(0, n - 1))
    size = data.draw(st.integers(1, n - offset))
    step = data.draw(st.integers(1, size + 1)) * data.draw(st.sampled_from([1, -1]))
    m = 1 + (size - 1) // abs(step)
    buf = np.arange(1, 2 * n + 1, dtype=np.int32)
    shift = data.draw(st.integers(0, n))
    g_at = data.draw(st.integers(0, 2 * n - m))
    want_buf = buf.copy()
    want_buf[shift : shift + n] = slice_grad_reference(
        buf[g_at : g_at + m].copy(), (n,), (offset,), (size,), (step,)
    )
    dbuf = to_device(buf, device)
    if device == "cpu":
        g, out = buf[g_at : g_at + m], buf[shift : shift + n]
    else:
        g = device_view(dbuf, lambda b: b[g_at : g_at + m], buf)
        out = device_view(dbuf, lambda b: b[shift : shift + n], buf)
    dmlnumba.slice_grad(g, (n,), (offset,), (size,), (step,), out=out, device=device)
    np.testing.assert_array_equal(to_host(dbuf), want_buf)


def test_errors_name_the_function_and_parameter():
    g = np.ones((2, 2), np.float32)
    cases = [
        ((g, (4, 4), (0, 0), (4, 4), (2, 0)), ValueError, r"strides\[1\] is 0"),
        ((g, (4, 3), (0, 0), (4, 4), (2, 2)), ValueError, r"> input_shape\[1\] = 3"),
        ((g, (4, 4), (0, 0), (4, 4), (1, 2)), ValueError, r"input_gradient has shape \(2, 2\)"),
        ((g, (4, 4, 1), (0, 0), (4, 4), (2, 2)), ValueError, r"offsets has 2 values but input_"),
        ((g, (4, -4), (0, 0), (4, 4), (2, 2)), ValueError, r"input_shape\[1\] = -4 is negative"),
        ((g, 4, (0,), (4,), (2,)), TypeError, r"input_shape must be a sequence"),
        ((g, (4, 4.0), (0, 0), (4, 4), (2, 2)), TypeError, r"input_shape\[1\] must be an integ"),
        ((g.astype(np.complex64), (4, 4), (0, 0), (4, 4), (2, 2)), TypeError, "input_gradient d"),
        (([[1.0]], (1, 1), (0, 0), (1, 1), (1, 1)), TypeError, "input_gradient must be"),
    ]
    for args, exc, match in cases:
        with pytest.raises(exc, match=r"^slice_grad\(\): .*" + match):
            dmlnumba.slice_grad(*args)


def test_out_is_checked_before_anything_is_written():
    g = np.ones((2, 2), np.float32)
    for out, exc, match in [
        (np.full((4, 4), 7, np.float64), TypeError, "dtype"),
        (np.full((4, 5), 7, np.float32), ValueError, "shape"),
        (np.broadcast_to(np.float32(7), (4, 4)), ValueError, ""),
    ]:
        before = out.copy()
        with pytest.raises(exc, match=r"^slice_grad\(\): out.*" + match):
            dmlnumba.slice_grad(g, (4, 4), (0, 0), (4, 4), (2, 2), out=out)
        np.testing.assert_array_equal(out, before)
    with pytest.raises(ValueError, match=r"^slice_grad\(\): stream= applies to CUDA"):
        dmlnumba.slice_grad(g, (4, 4), (0, 0), (4, 4), (2, 2), stream=1)


def test_libraries_give_their_own_arrays():
    """PyTorch CPU tensors (bfloat16 too: the bits copied) and JAX arrays give arrays
    of their library; lists are refused (a gradient is an array)."""
    torch = pytest.importorskip("torch")
    g = np.array([[1.5, -0.0], [np.nan, 4.0]], np.float32)
    want = slice_grad_reference(g, (3, 5), (0, 1), (3, 4), (-2, 3))
    t = dmlnumba.slice_grad(torch.from_numpy(g), (3, 5), (0, 1), (3, 4), (-2, 3))
    assert isinstance(t, torch.Tensor)
    np.testing.assert_array_equal(bits(t.numpy()), bits(want))
    b = torch.from_numpy(g).to(torch.bfloat16)
    tb = dmlnumba.slice_grad(b, (3, 5), (0, 1), (3, 4), (-2, 3))
    assert tb.dtype == torch.bfloat16
    wb = slice_grad_reference(b.view(torch.int16).numpy(), (3, 5), (0, 1), (3, 4), (-2, 3))
    np.testing.assert_array_equal(tb.view(torch.int16).numpy(), wb)
    out = torch.full((3, 5), 9.0, dtype=torch.bfloat16)
    assert dmlnumba.slice_grad(b, (3, 5), (0, 1), (3, 4), (-2, 3), out=out) is out
    np.testing.assert_array_equal(out.view(torch.int16).numpy(), wb)
    jnp = pytest.importorskip("jax.numpy")
    j = dmlnumba.slice_grad(jnp.asarray(g), (3, 5), (0, 1), (3, 4), (-2, 3))
    assert type(j).__module__.startswith("jax")
    np.testing.assert_array_equal(bits(np.asarray(j)), bits(want))


#: (input_shape, window, the strided output's buffer, its view): rows read with a step into a
#: column-stepped output (CUDA's one-pass kernel); whole rows (copied and zeroed a word at a
#: time on CUDA) into an output whose rows leave gaps; whole rows into a column-stepped output
#: (zeroed item by item by the slice tiles on CUDA).
WIDTH_CASES = {
    "stepped": ((7, 9, 11), ((1, 0, 1), (5, 7, 9), (-2, 2, 2)), (7, 9, 23), np.s_[:, :, 1::2]),
    "rows": ((7, 9, 16), ((1, 0, 0), (5, 7, 16), (-2, 2, 1)), (7, 11, 16), np.s_[:, 1:10, :]),
    "rows into steps": (
        (7, 9, 11),
        ((1, 0, 0), (5, 7, 11), (-2, 2, 1)),
        (7, 9, 23),
        np.s_[:, :, 1::2],
    ),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32", "float64"])
@pytest.mark.parametrize("case", sorted(WIDTH_CASES))
@pytest.mark.parametrize("boxes", [False, True])
def test_every_width_into_new_and_strided_outputs(device, dtype, case, boxes):
    """Each item width, into a new output (a memset on CUDA) and a strided one (zeroed
    by the slice tiles storing zeros on CUDA), its complement zeroed box by box or
    whole first; nothing outside the strided output is written."""
    shape, w, buf_shape, index = WIDTH_CASES[case]
    m = tuple(1 + (s - 1) // abs(t) for s, t in zip(w[1], w[2]))
    g = (np.arange(1, 2 * np.prod(m) + 1) % 120).astype(dtype).reshape(m[0], 2 * m[1], m[2])
    g = g[:, ::-2]
    want = slice_grad_reference(g, shape, *w)
    buf = np.full(buf_shape, 5, dtype)
    dbuf = to_device(buf, device)
    view_of = lambda b: b[index]  # noqa: E731
    out = view_of(buf) if device == "cpu" else device_view(dbuf, view_of, buf)
    with _zeros_by_box(boxes):
        got = to_host(dmlnumba.slice_grad(to_device(g, device), shape, *w, device=device))
        dmlnumba.slice_grad(to_device(g, device), shape, *w, out=out, device=device)
    np.testing.assert_array_equal(bits(got), bits(want))
    check_written(buf, to_host(dbuf), view_of, want)


#: Windows whose rows are not whole, with the item sizes that take CUDA's one-pass
#: kernel there (the others a memset and a copy: 1- and 2-byte items where the window
#: holds under half the output's elements, 8-byte ones under half its rows): rows
#: longer than a warp's segment and not a multiple of its chunks, planes that end
#: inside a warp's group of rows, reversed dimensions, a window starting inside a
#: chunk, a crop, rows of a lane each (32 rows a step across planes of 9), 1-d (a
#: segment of 4 pairs of chunks a lane).
ONE_PASS_CASES = {
    "rows of 301": ((3, 5, 301), ((0, 0, 2), (3, 5, 297), (1, -1, 3)), {4, 8}),
    "half of rows of 301": ((3, 5, 301), ((0, 0, 0), (3, 5, 301), (1, -1, 2)), {1, 2, 4, 8}),
    "planes of 5 rows": ((2, 5, 7, 40), ((1, 1, 0, 1), (1, 4, 7, 38), (1, -2, 1, 2)), {4}),
    "crop": ((6, 70), ((1, 3), (5, 64), (-1, 1)), {1, 2, 4, 8}),
    "short rows": ((3, 7, 9, 4), ((0, 1, 0, 1), (3, 6, 9, 3), (1, -1, 2, 2)), {4}),
    "short crops": ((3, 7, 9, 4), ((0, 0, 0, 1), (3, 7, 9, 3), (1, -1, 1, 1)), {1, 2, 4, 8}),
    "1-d": ((2100,), ((5,), (2093,), (3,)), {4, 8}),
    "1-d, half": ((2100,), ((1,), (2099,), (2,)), {1, 2, 4, 8}),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32", "float64"])
@pytest.mark.parametrize("case", sorted(ONE_PASS_CASES))
def test_one_pass_windows(device, dtype, case):
    """Windows whose rows are not whole, into a new output and into a strided one inside
    a poisoned buffer: every element zero or the gradient's, nothing outside written.
    On CUDA the item sizes the case names take the one-pass kernel (asked of the plans
    kept), the others none."""
    shape, w, widths = ONE_PASS_CASES[case]
    m = tuple(1 + (s - 1) // abs(t) for s, t in zip(w[1], w[2]))
    g = (np.arange(1, np.prod(m) + 1) % 250 + 1).astype(dtype).reshape(m)
    want = slice_grad_reference(g, shape, *w)
    got = to_host(dmlnumba.slice_grad(to_device(g, device), shape, *w, device=device))
    np.testing.assert_array_equal(bits(got), bits(want))
    buf = np.full(shape[:-1] + (2 * shape[-1],), 7, dtype)
    dbuf = to_device(buf, device)
    view_of = lambda b: b[..., ::-2]  # noqa: E731
    out = view_of(buf) if device == "cpu" else device_view(dbuf, view_of, buf)
    dmlnumba.slice_grad(to_device(g, device), shape, *w, out=out, device=device)
    check_written(buf, to_host(dbuf), view_of, want)
    if device == "cuda":  # the one-pass plan, a row on the fewest lanes that cover it
        from dmlnumba.gpu import plans
        from dmlnumba.params import SLICE_GRAD_CUDA

        made = [
            v
            for k, v in list(plans._plans.items())
            if k[0] == "grad" and k[1][0] == g.shape and k[1][2] == g.dtype
        ]
        assert bool(made) == (g.itemsize in widths)
        inner = shape[-1]
        for plan in made:
            lanes = 1 << plan.params[SLICE_GRAD_CUDA.lanes_log]
            assert 4 * lanes >= min(inner, 128) and (lanes == 1 or 2 * lanes < inner)
            assert plan.many == (len(shape) == 1 and inner >= 1024)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("window", [((1, 0), (5, 9), (-2, 3)), ((0, 0), (7, 9), (1, 1))])
def test_repeats_take_the_kept_runner(device, window):
    """A repeat (same gradient layout, shape and window) takes the runner the first
    call kept, and each call writes its own gradient: a fresh output every time, zeros
    outside the window (a window that covers the output: none to write)."""
    from dmlnumba import keys

    shape = (7, 9)
    m = tuple(1 + (s - 1) // abs(t) for s, t in zip(window[1], window[2]))
    rng = np.random.default_rng(3)
    results = []
    for k in range(3):
        g = rng.standard_normal(m).astype(np.float32) + k
        got = dmlnumba.slice_grad(to_device(g, device), shape, *window, device=device)
        results.append(to_host(got))
        np.testing.assert_array_equal(results[-1], slice_grad_reference(g, shape, *window))
    assert not np.shares_memory(results[0], results[1])
    if device == "cpu":
        key = keys.window("slice_grad", g, shape, *window, None, device, None)
        assert key[1] is not None  # kept by the first call, found by the repeats


@pytest.mark.parametrize("kind", ["numpy", "torch_cpu", "foreign", "cupy", "torch"])
def test_repeats_into_given_outputs(kind):
    """Repeats into outputs of one layout: apart from the gradient (the runner the
    first call kept, where the target keeps one: NumPy and PyTorch on the CPU, CuPy
    and PyTorch on CUDA), then overlapping it (the full path, which reads the
    gradient whole first), then apart again; every result NumPy's."""
    if kind not in ("numpy", "torch_cpu") and "cuda" not in DEVICES:
        pytest.skip("needs CUDA")
    n, w = 40, ((3,), (30,), (-3,))
    m = 10
    buf = np.arange(1, 201, dtype=np.float32)
    if kind == "numpy":
        dbuf, host = buf, lambda: buf
    elif kind == "torch_cpu":
        torch = pytest.importorskip("torch")
        dbuf = torch.from_numpy(buf.copy())
        host = dbuf.numpy
    elif kind == "foreign":
        dbuf = to_device(buf, "cuda")
        host = lambda: to_host(dbuf)  # noqa: E731
    elif kind == "cupy":
        cp = pytest.importorskip("cupy")
        dbuf = cp.asarray(buf)
        host = lambda: cp.asnumpy(dbuf)  # noqa: E731
    else:
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("needs a CUDA PyTorch")
        dbuf = torch.from_numpy(buf).cuda()
        host = lambda: dbuf.cpu().numpy()  # noqa: E731
    want = buf.copy()
    for g_at, o_at in [(0, 100), (150, 50), (120, 60), (10, 140), (60, 55), (0, 100)]:
        g_host = want[g_at : g_at + m].copy()
        want[o_at : o_at + n] = slice_grad_reference(g_host, (n,), *w)
        if kind == "foreign":
            g = device_view(dbuf, lambda x, a=g_at: x[a : a + m], buf)
            out = device_view(dbuf, lambda x, a=o_at: x[a : a + n], buf)
        else:
            g, out = dbuf[g_at : g_at + m], dbuf[o_at : o_at + n]
        assert dmlnumba.slice_grad(g, (n,), *w, out=out) is out
        np.testing.assert_array_equal(host(), want)
    if kind in ("numpy", "torch_cpu"):
        from dmlnumba import keys

        assert keys.window("slice_grad", g, (n,), *w, out, None, None)[1] is not None  # kept


@pytest.mark.parametrize("kind", ["numpy", "torch_cpu"])
def test_repeats_into_the_same_outputs_again(kind):
    """The CPU runner keeps the views of the last small output it wrote (the one it
    zeroes, the window's) while that output is given again: outputs given again and
    in turn, one reshaped in place and back, one made read-only and writeable again,
    and the window's own elements given as the gradient (the full path) each give
    NumPy's answer, and the read-only one is refused."""
    shape, w = (20, 20, 20), ((2, 3, 4), (10, 10, 10), (-1, 1, 1))
    arrays = [np.full(shape, 7, np.float32) for _ in range(2)]
    if kind == "torch_cpu":
        torch = pytest.importorskip("torch")
        outs = [torch.from_numpy(a) for a in arrays]
    else:
        outs = arrays
    rng = np.random.default_rng(8)
    for i in (0, 0, 1, 0, 1, 1, 0):
        g = rng.random((10, 10, 10)).astype(np.float32)
        assert dmlnumba.slice_grad(g, shape, *w, out=outs[i]) is outs[i]
        np.testing.assert_array_equal(arrays[i], slice_grad_reference(g, shape, *w))
    a = arrays[0]
    if kind == "numpy":
        a.shape = (8000,)
        with pytest.raises(ValueError, match=r"^slice_grad\(\): out"):
            dmlnumba.slice_grad(g, shape, *w, out=a)
        a.shape = shape
        a.flags.writeable = False
        with pytest.raises(ValueError, match=r"^slice_grad\(\): out is read-only"):
            dmlnumba.slice_grad(g, shape, *w, out=a)
        a.flags.writeable = True
    g = rng.random((10, 10, 10)).astype(np.float32)
    assert dmlnumba.slice_grad(g, shape, *w, out=outs[0]) is outs[0]
    np.testing.assert_array_equal(a, slice_grad_reference(g, shape, *w))
    inside = outs[0][2:12, 3:13, 4:14]  # the output's own elements: read whole first
    want = slice_grad_reference(np.array(a[2:12, 3:13, 4:14]), shape, *w)
    assert dmlnumba.slice_grad(inside, shape, *w, out=outs[0]) is outs[0]
    np.testing.assert_array_equal(a, want)


@pytest.mark.parametrize("kind", ["cupy", "torch"])
@pytest.mark.parametrize("given", [False, True])
def test_repeats_zeroing_box_by_box(kind, given):
    """A repeat whose window's complement is zeroed box by box (large windows; here
    forced) takes the runner the first call kept, into new outputs and into given
    ones of poisoned values: every element outside the window zeroed each call."""
    from dmlnumba import keys

    if "cuda" not in DEVICES:
        pytest.skip("needs CUDA")
    if kind == "cupy":
        xp = pytest.importorskip("cupy")
        dev, host = xp.asarray, xp.asnumpy
    else:
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("needs a CUDA PyTorch")
        dev, host = (lambda a: torch.from_numpy(a).cuda()), (lambda t: t.cpu().numpy())
    shape, w = (6, 9, 16), ((1, 0, 2), (5, 9, 13), (-2, 3, 1))
    m = tuple(1 + (s - 1) // abs(t) for s, t in zip(w[1], w[2]))
    rng = np.random.default_rng(5)
    out = dev(np.full(shape, 7, np.float32)) if given else None
    with _zeros_by_box(True):
        for k in range(3):
            g_host = rng.standard_normal(m).astype(np.float32) + k
            g = dev(g_host)
            if given:
                out[...] = 7
            got = dmlnumba.slice_grad(g, shape, *w, out=out)
            assert got is out or not given
            np.testing.assert_array_equal(host(got), slice_grad_reference(g_host, shape, *w))
        key = keys.window("slice_grad", g, shape, *w, out, None, None)
    assert key[1] is not None  # kept by the first call, found by the repeats


def test_repeats_by_tuples_and_lists():
    """A repeat passing the same tuple objects finds the runner by their identity (the
    entry holds them); lists are read on every call, so a list changed between two
    calls gives the new window; the same values split otherwise between the
    parameters are not the kept call's."""
    from dmlnumba import keys

    g = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    shape, offsets, sizes, strides = (4, 6), (1, 0), (2, 6), (1, 2)
    for _ in range(2):
        got = dmlnumba.slice_grad(g, shape, offsets, sizes, strides)
        np.testing.assert_array_equal(got, slice_grad_reference(g, shape, offsets, sizes, strides))
    id_key = ("slice_grad", id(shape), id(offsets), id(sizes), id(strides))
    held = [v for k, v in keys.runners.items() if k[:5] == id_key]
    assert len(held) == 1 and held[0][1:] == (shape, offsets, sizes, strides)
    lists = [list(p) for p in (shape, offsets, sizes, strides)]
    np.testing.assert_array_equal(dmlnumba.slice_grad(g, *lists), got)
    lists[3][1] = -2
    want = slice_grad_reference(g, shape, offsets, sizes, (1, -2))
    np.testing.assert_array_equal(dmlnumba.slice_grad(g, *lists), want)
    with pytest.raises(TypeError):
        dmlnumba.slice_grad(g, shape, offsets, sizes, (1, 2.0))
    with pytest.raises(ValueError):  # the same values, one moved from sizes to offsets
        dmlnumba.slice_grad(g, shape, (1, 0, 2), (6,), strides)


def test_torch_cpu_repeats_keep_pytorchs_rules():
    """A PyTorch CPU gradient's repeats (the runner kept over its memory) into PyTorch
    CPU outputs: each write moves the output's version counter; an inference tensor
    or an output that requires grad, of the kept layout, is refused as the first
    call would refuse it, with nothing written."""
    torch = pytest.importorskip("torch")
    from dmlnumba import keys

    w = ((1,), (3,), (-1,))
    g = torch.arange(1.0, 4.0)
    out = torch.full((6,), 9.0)
    for _ in range(2):
        v = out._version
        assert dmlnumba.slice_grad(g, (6,), *w, out=out) is out and out._version > v
        assert out.tolist() == [0.0, 3.0, 2.0, 1.0, 0.0, 0.0]
    assert keys.window("slice_grad", g, (6,), *w, out, None, None)[1] is not None
    with torch.inference_mode():
        inf = torch.full((6,), 9.0)
    with pytest.raises(ValueError, match=r"^slice_grad\(\): out is an inference tensor"):
        dmlnumba.slice_grad(g, (6,), *w, out=inf)
    assert inf.tolist() == [9.0] * 6
    rg = torch.full((6,), 9.0, requires_grad=True)
    with pytest.raises(TypeError, match=r"^slice_grad\(\): out requires grad"):
        dmlnumba.slice_grad(g, (6,), *w, out=rg)
    assert rg.tolist() == [9.0] * 6


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64"])
def test_contiguous_out_is_zeroed_whole(device, dtype):
    """A C-contiguous out= of 16 to 128 KiB (on the CPU, zeroed through a byte view from
    16 KiB with items of 4 bytes or more), poisoned with ones, NaNs and -0.0 before
    each call: after the first call (the full path) and a repeat (the runner kept for its
    layout), every element outside the window is zero bits and the window holds the
    gradient."""
    shape, window = (64, 256), ((1, 3), (60, 250), (2, -3))
    m = tuple(1 + (s - 1) // abs(t) for s, t in zip(window[1], window[2]))
    g = (np.arange(1, np.prod(m) + 1) % 100 + 1).astype(dtype).reshape(m)
    want = slice_grad_reference(g, shape, *window)
    poison = np.ones(shape, dtype)
    if np.dtype(dtype).kind == "f":
        poison.ravel()[::3] = np.nan
        poison.ravel()[1::3] = -0.0
    for _ in range(2):
        out = to_device(poison, device)
        dmlnumba.slice_grad(to_device(g, device), shape, *window, out=out, device=device)
        np.testing.assert_array_equal(bits(to_host(out)), bits(want))
