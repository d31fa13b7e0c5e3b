"""dmlnumba.onnx: ONNX's Slice and NonZero through SLICE1 and NONZERO_COORDINATES, bit for
bit against onnx's reference implementation: ONNX's own node test cases (directly and
inside a ReferenceEvaluator), the negative-step, clamping and INT64-sentinel cases of ONNX
Runtime's Slice tests and of other implementations' bug reports, and random inputs.

Where onnx.reference's Slice (NumPy slicing) departs from the ONNX operator page (a negative
step with ``start < -dim``: the page clamps start to 0, NumPy to -1), the page is followed
and the tests say so (:func:`test_negative_step_start_below_the_axis_follows_the_spec`);
ONNX Runtime's CPU provider follows the page too, and random slices are checked against it
where it is installed (:func:`test_random_slices_match_onnxruntime`).
"""

import functools
import warnings

import numpy as np
import pytest
from conftest import tiny_blocks
from hypothesis import assume, given
from hypothesis import strategies as st
from interpreter import run_python

import dmlnumba
import dmlnumba.onnx as donnx

from devices import DEVICES, jax_gpu, needs_real_gpu, to_device, to_host
from strategies import bits, laid_out, values

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


# ------------------------------------------------------------------ the reference


@functools.cache
def _evaluator(op, dtype, names, new_ops=False):
    """A ReferenceEvaluator of a one-node model: ``op`` on inputs ``names`` ("" for an
    omitted optional input), its data of ``dtype``."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    ins = [helper.make_tensor_value_info(names[0], elem, None)]
    ins += [helper.make_tensor_value_info(n, TensorProto.INT64, None) for n in names[1:] if n]
    out = helper.make_tensor_value_info("y", elem if op == "Slice" else TensorProto.INT64, None)
    graph = helper.make_graph([helper.make_node(op, list(names), ["y"])], op, ins, [out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return ReferenceEvaluator(model, new_ops=donnx.ops() if new_ops else None)


def _slice_feeds(data, starts, ends, axes=None, steps=None):
    names = ["data", "starts", "ends"]
    feeds = {
        "data": data,
        "starts": np.array(starts, np.int64).reshape(-1),
        "ends": np.array(ends, np.int64).reshape(-1),
    }
    if axes is not None or steps is not None:
        names.append("" if axes is None else "axes")
        if axes is not None:
            feeds["axes"] = np.array(axes, np.int64).reshape(-1)
    if steps is not None:
        names.append("steps")
        feeds["steps"] = np.array(steps, np.int64).reshape(-1)
    return tuple(names), feeds


def reference_slice(data, starts, ends, axes=None, steps=None, new_ops=False):
    """onnx.reference's Slice of ``data``."""
    names, feeds = _slice_feeds(data, starts, ends, axes, steps)
    return _evaluator("Slice", data.dtype, names, new_ops).run(None, feeds)[0]


def spec_slice(data, starts, ends, axes=None, steps=None):
    """ONNX Slice as the operator page defines it: onnx.reference's, with each start of a
    negative step below ``-dim`` raised to ``-dim`` (the page clamps it to 0; NumPy, which
    the reference runs, to -1: the one place where the two differ; at ``-dim`` both take 0)."""
    starts = [int(s) for s in starts]
    if steps is not None:
        ndim = data.ndim
        for i, a in enumerate(range(len(starts)) if axes is None else axes):
            n = data.shape[a + ndim if a < 0 else a]
            if steps[i] < 0 and n > 0 and starts[i] < -n:
                starts[i] = -n
    return reference_slice(data, starts, ends, axes, steps)


def reference_nonzero(x):
    return _evaluator("NonZero", x.dtype, ("x",)).run(None, {"x": x})[0]


def assert_same(got, want):
    """Bit for bit: shape, dtype and every bit."""
    got = to_host(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(bits(got), bits(want))


def count_calls(monkeypatch):
    """Counts of calls into dmlnumba.onnx's operators and into the kernels' entry points
    (the prepared calls it hands its targets: slice1's, and nonzero's as argwhere's)."""
    from dmlnumba import prepare

    where = {
        "slice": (donnx, "slice"),
        "nonzero": (donnx, "nonzero"),
        "slice1": (prepare, "slice1"),
        "nonzero_coordinates": (prepare, "argwhere"),
    }
    calls = dict.fromkeys(where, 0)
    for name, (module, attr) in where.items():
        real = getattr(module, attr)

        def counted(*args, _real=real, _name=name, **kwargs):
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, attr, counted)
    return calls


# ------------------------------------------------- 1. ONNX's own node test cases


@functools.cache
def _node_cases():
    """ONNX's backend node test cases whose graph has a Slice or NonZero node."""
    pytest.importorskip("onnx")
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # some cases' generators overflow on purpose
        cases = collect_testcases(None)
    return [c for c in cases if any(n.op_type in ("Slice", "NonZero") for n in c.model.graph.node)]


def _single_node_cases():
    cases = [c for c in _node_cases() if len(c.model.graph.node) == 1]
    kinds = [c.model.graph.node[0].op_type for c in cases]
    assert kinds.count("Slice") >= 8 and kinds.count("NonZero") >= 1, [c.name for c in cases]
    return cases


def _node_args(node, inputs):
    """The node's inputs in order, None for an omitted optional one."""
    it = iter(inputs)
    return [None if name == "" else next(it) for name in node.input]


def test_onnx_node_cases_directly():
    for case in _single_node_cases():
        node = case.model.graph.node[0]
        for inputs, outputs in case.data_sets:
            args = _node_args(node, inputs)
            got = donnx.slice(*args) if node.op_type == "Slice" else donnx.nonzero(*args)
            try:
                assert_same(got, outputs[0])
            except AssertionError as e:
                raise AssertionError(f"{case.name}: {e}") from None


def test_onnx_node_cases_through_the_reference_evaluator(monkeypatch):
    from onnx.reference import ReferenceEvaluator

    calls = count_calls(monkeypatch)
    want = dict.fromkeys(calls, 0)
    for case in _single_node_cases():
        op = case.model.graph.node[0].op_type
        sess = ReferenceEvaluator(case.model, new_ops=donnx.ops())
        for inputs, outputs in case.data_sets:
            feeds = {i.name: v for i, v in zip(case.model.graph.input, inputs)}
            got = sess.run(None, feeds)
            try:
                assert len(got) == 1
                assert_same(got[0], outputs[0])
            except AssertionError as e:
                raise AssertionError(f"{case.name}: {e}") from None
            if op == "Slice":
                want["slice"] += 1
                want["slice1"] += outputs[0].size > 0  # an empty result launches nothing
            else:
                want["nonzero"] += 1
                want["nonzero_coordinates"] += 1  # (the transposing copy: the target's)
    assert calls == want


def test_onnx_models_with_slice_nodes_match_the_reference_evaluator(monkeypatch):
    """Every ONNX node test case whose graph has a Slice or NonZero node (function bodies
    expanded: Shape -> Slice chains and the like) gives the same bits with dmlnumba's
    operators as with onnx's own."""
    from onnx.reference import ReferenceEvaluator

    calls = count_calls(monkeypatch)
    n_nodes = 0
    for case in _node_cases():
        n_nodes += sum(n.op_type in ("Slice", "NonZero") for n in case.model.graph.node)
        ours = ReferenceEvaluator(case.model, new_ops=donnx.ops())
        theirs = ReferenceEvaluator(case.model)
        for inputs, _ in case.data_sets:
            feeds = {i.name: v for i, v in zip(case.model.graph.input, inputs)}
            for got, want in zip(ours.run(None, feeds), theirs.run(None, feeds)):
                try:
                    assert_same(got, np.asarray(want))
                except AssertionError as e:
                    raise AssertionError(f"{case.name}: {e}") from None
    assert calls["slice"] + calls["nonzero"] >= n_nodes > 50


def test_bfloat16_models_through_the_reference_evaluator(monkeypatch):
    """A model's bfloat16 data (ml_dtypes' arrays, as onnx's evaluator holds them; it
    was a TypeError): Slice copies the bits, and NonZero finds what onnx's own
    operator finds (-0.0 among the zeros, NaN among the rest)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    calls = count_calls(monkeypatch)
    bf = np.dtype(ml_dtypes.bfloat16)
    h = (np.arange(24, dtype=np.float32).reshape(4, 6) - 5).astype(bf)
    h[1, 2], h[0, 0] = -0.0, np.nan
    params = ([3, 1], [0, 6], [0, 1], [-1, 2])
    got, want = (reference_slice(h, *params, new_ops=new) for new in (True, False))
    assert got.dtype == want.dtype == bf
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    np.testing.assert_array_equal(got.view(np.uint16), h.view(np.uint16)[3:0:-1, 1::2])
    got, want = (_evaluator("NonZero", bf, ("x",), new).run(None, {"x": h})[0] for new in (1, 0))
    assert want.shape == (2, 22)
    np.testing.assert_array_equal(got, want)
    assert calls["slice"] == calls["nonzero"] == 1


def test_slice_1_attributes_through_the_reference_evaluator(monkeypatch):
    """Slice-1 to Slice-9 take starts, ends and axes as attributes."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    calls = count_calls(monkeypatch)
    node = helper.make_node("Slice", ["x"], ["y"], starts=[1, -1], ends=[1000, 0], axes=[0, 1])
    graph = helper.make_graph(
        [node],
        "s",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = ReferenceEvaluator(model, new_ops=donnx.ops()).run(None, {"x": x})[0]
    assert_same(got, x[1:1000, -1:0])
    assert calls["slice"] == 1


# ----------------------- 2. cases from ONNX Runtime's tests and other implementations' bugs

# (source, shape, starts, ends, axes, steps): every one is checked against onnx.reference.
SLICE_CASES = [
    # onnxruntime/test/providers/cpu/tensor/slice_op.test.cc
    ("ort Slice1D_InvalidStartEndRange", (6,), [3], [2], [0], None),
    ("ort Slice1D_ValidStartEndRange_NoOutput", (6,), [2], [2], [0], None),
    ("ort Slice1D_EndOutOfBounds", (6,), [0], [10], None, None),
    ("ort Slice1D_StartAndEndOutOfBounds", (6,), [1000], [1001], None, None),
    ("ort Slice2D_StartAndEndOutOfBounds", (2, 3), [0, 1000], [10, 1000], [0, 1], None),
    ("ort Slice2D_TwoAxes", (6, 4), [2, 3], [1000, -1], [1, 0], None),
    ("ort Slice2D_TwoAxesEque", (6, 4), [2, 3], [1000, 3], [1, 0], None),
    ("ort Slice2D_DefaultAxes", (2, 2), [0], [1], None, None),
    ("ort Slice3D", (3, 3, 3), [0, 1, 1], [1000, 1000, 1000], None, None),
    ("ort Slice1D_WithPositiveSteps", (6,), [0], [6], [0], [2]),
    ("ort Slice1D_WithNegativeSteps_Regular", (4,), [-1], [-4], [0], [-1]),
    ("ort Slice1D_WithNegativeSteps_EndOutOfBounds_1", (6,), [0], [6], [0], [-1]),
    ("ort Slice1D_WithNegativeSteps_EndOutOfBounds_2", (6,), [0], [-10], [0], [-1]),
    ("ort Slice1D_WithNegativeSteps_ValidStartEndRange", (6,), [5], [0], [0], [-1]),
    ("ort Slice1D_WithNegativeSteps_StartOutOfBounds", (6,), [7], [0], [0], [-3]),
    ("ort Slice2D_WithPositiveSteps_1", (2, 4), [1, 0], [2, 3], [0, 1], [1, 2]),
    ("ort Slice2D_WithPositiveSteps_2", (2, 4), [0, 1], [-1, 1000], None, None),
    ("ort Slice2D_WithNegativeSteps_1", (2, 4), [1, 0], [2, 3], [0, 1], [-1, -2]),
    ("ort Slice2D_WithNegativeSteps_2", (2, 4), [1, 3], [0, 1], [0, 1], [-1, -2]),
    ("ort Slice3D_WithPositiveSteps_AllAxes", (3, 3, 3), [0, 1, 1], [1000] * 3, [0, 1, 2], [2] * 3),
    (
        "ort Slice3D_FlattenInnermostDimsIncopy",
        (3, 3, 3),
        [0, 0, 1],
        [1000] * 3,
        [2, 1, 0],
        [1, 1, 2],
    ),
    ("ort Slice3D_PosAndNegSteps_SubsetOfAxes_1", (3, 3, 3), [1, 4], [1000, 1], [1, 2], [3, -2]),
    ("ort Slice3D_PosAndNegSteps_SubsetOfAxes_2", (3, 3, 3), [1, 4], [1000, 2], [1, 2], [3, -2]),
    # ORT takes INT_MAX as "to the end" in either direction and reverses all four here; ONNX
    # says INT_MAX is an end to slice forward to, so backward it selects nothing
    # (microsoft/onnxruntime#11107).  dmlnumba follows ONNX.
    ("ort Slice1D_ReverseAllAxes_1", (4,), [-1], [I32_MAX], [0], [-1]),
    ("ort Slice1D_ReverseAllAxes_2", (4,), [-1], [I32_MIN], [0], [-1]),
    ("ort Slice1D_ReverseAllAxes_3", (4,), [-1], [-5], [0], [-1]),
    ("ort Slice2D_ReverseAllAxes", (2, 2), [-1, -1], [I64_MIN, I64_MIN], [0, 1], [-1, -1]),
    ("ort Slice2D_ReverseSubsetOfAxes_1", (2, 2), [-1], [I64_MIN], [1], [-1]),
    ("ort Slice2D_ReverseSubsetOfAxes_2", (2, 2), [-1], [I64_MIN], [0], [-1]),
    ("ort Slice2D_ImplicitCopyBySlicingADimensionFully", (2, 2), [0], [I64_MAX], [1], [1]),
    ("ort Slice2D_ReverseSubsetOfNegAxes_1", (2, 2), [-1], [I64_MIN], [-1], [-1]),
    (
        "ort Slice5D_SubsetOfAxes_Flatten2Dims_OffsetInput",
        (1, 2, 2, 2, 2),
        [0, 1, 1, 0],
        [1, 2, I64_MAX, 6],
        [0, 1, 2, 3],
        None,
    ),
    ("ort Slice5D_LargeStep", (1, 2, 2, 2, 2), [0], [1], [1], [I64_MAX]),
    ("ort Slice5D_CopyAxis2LargeBlock", (1, 3, 4, 2, 2), [0, 1], [2, 3], [1, 2], None),
    ("ort EmptyDim", (0, 6), [0], [1], [0], None),
    ("ort EmptyDim negative step", (0, 6), [1], [0], [0], [-1]),
    ("ort CoalesceDims 1", (2, 2, 2, 2), [1, 1], [0, 2], [0, 1], [-1, 1]),
    ("ort CoalesceDims 2", (1, 2, 2, 2, 2), [1], [I64_MAX], [2], None),
    ("ort CoalesceDims 3", (1, 2, 2, 2, 2), [1, 1], [I64_MAX, I64_MAX], [1, 3], None),
    ("ort CoalesceDims 4", (1, 1, 1), [0], [I64_MAX], [1], None),
    # microsoft/onnxruntime#11107: INT_MAX ends nothing backward, INT_MIN ends at the start.
    ("ort#11107 INT32_MAX backward", (5,), [-1], [I32_MAX], [0], [-1]),
    ("ort#11107 INT64_MAX backward", (5,), [-1], [I64_MAX], [0], [-1]),
    ("ort#11107 INT32_MIN backward", (5,), [-1], [I32_MIN], [0], [-1]),
    ("ort#11107 INT64_MIN backward", (5,), [-1], [I64_MIN], [0], [-1]),
    ("ort#11107 INT64_MAX start backward", (5,), [I64_MAX], [I64_MIN], [0], [-2]),
    ("ort#11107 INT64_MIN start forward", (5,), [I64_MIN], [I64_MAX], [0], [2]),
    # microsoft/onnxruntime#9492: huge steps clamped, and an axis of size 0.
    ("ort#9492 huge step on an empty axis", (0, 3), [0], [I64_MAX], [0], [I64_MAX]),
    ("ort#9492 huge negative step on an empty axis", (3, 0), [-1], [I64_MIN], [1], [I64_MIN]),
    ("ort#9492 huge steps", (3, 4), [0, -1], [I64_MAX, I64_MIN], [0, 1], [I64_MAX, I64_MIN]),
    ("ort#9492 INT64_MIN + 1 step", (3, 4), [2], [I64_MIN], [1], [I64_MIN + 1]),
    # iree-org/iree#24584: negative steps off by one, negative offsets.
    ("iree#24584 [9:0:-1]", (10,), [9], [0], [0], [-1]),
    ("iree#24584 [7:0:-1]", (10,), [7], [0], [0], [-1]),
    ("iree#24584 [5:0:-1]", (10,), [5], [0], [0], [-1]),
    ("iree#24584 [9:2:-1]", (10,), [9], [2], [0], [-1]),
    ("iree#24584 [9:0:-3]", (10,), [9], [0], [0], [-3]),
    ("iree#24584 3x4 axis 0 [2:0:-1]", (3, 4), [2], [0], [0], [-1]),
    ("iree#24584 3x4 axis 1 [3:0:-1]", (3, 4), [3], [0], [1], [-1]),
    ("iree#24584 [19:0:-3] of 20", (20,), [19], [0], [0], [-3]),
    # Xilinx/onnx-mlir#386: steps whose windows do not divide the axis.
    ("onnx-mlir#386 steps", (99, 195), [5, 10], [97, 192], [0, 1], [5, 10]),
    ("onnx-mlir#386 negative steps", (99, 195), [97, 192], [5, 10], [0, 1], [-5, -10]),
    # ROCm/AMDMIGraphX#855 (and its fix #858): negative axes with steps and reversal.
    ("migraphx#855 slice_5arg_step", (5, 5), [-1, -3], [-5, -1], [-1, -2], [-2, 2]),
    ("migraphx#855 slice_5arg_reverse", (5, 5), [-1, -3], [-5, -1], [-1, -2], [-1, 1]),
    ("migraphx#855 negative axes on 2x4", (2, 4), [-1, 1], [-5, -1], [-1, -2], [-2, 1]),
]

# iree-org/iree#24584's table of expected results (ONNX Runtime's), on arange inputs.
IREE_EXPECTED = {
    "iree#24584 [9:0:-1]": [9, 8, 7, 6, 5, 4, 3, 2, 1],
    "iree#24584 [7:0:-1]": [7, 6, 5, 4, 3, 2, 1],
    "iree#24584 [5:0:-1]": [5, 4, 3, 2, 1],
    "iree#24584 [9:2:-1]": [9, 8, 7, 6, 5, 4, 3],
    "iree#24584 [9:0:-3]": [9, 6, 3],
    "iree#24584 3x4 axis 0 [2:0:-1]": [[8, 9, 10, 11], [4, 5, 6, 7]],
    "iree#24584 3x4 axis 1 [3:0:-1]": [[3, 2, 1], [7, 6, 5], [11, 10, 9]],
    "iree#24584 [19:0:-3] of 20": [19, 16, 13, 10, 7, 4, 1],
}


@pytest.mark.parametrize("small", [False, True], ids=["default", "kernel"])
@pytest.mark.parametrize("case", SLICE_CASES, ids=[c[0] for c in SLICE_CASES])
def test_implementation_cases_match_the_reference(case, small):
    name, shape, starts, ends, axes, steps = case
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    want = reference_slice(x, starts, ends, axes, steps)
    with tiny_blocks() if small else _nothing():
        got = donnx.slice(x, starts, ends, axes, steps)
    assert_same(got, want)
    if name in IREE_EXPECTED:
        np.testing.assert_array_equal(got, IREE_EXPECTED[name])
    w = donnx.window(shape, starts, ends, axes, steps)
    assert (w is None) == (want.size == 0)
    if w is not None:
        assert_same(dmlnumba.slice1(x, *w), want)


def _nothing():
    import contextlib

    return contextlib.nullcontext()


def test_negative_step_start_below_the_axis_follows_the_spec():
    """A negative step with start < -dim and end < -dim: the ONNX operator page clamps the
    start to 0 (and the end to -1), so element 0 is taken; so do ONNX's shape inference and
    ONNX Runtime.  onnx.reference slices with NumPy, whose start becomes -1: nothing.
    dmlnumba follows the page."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    x = np.arange(5, dtype=np.float32)
    for start, end in [(-10, -10), (I64_MIN, I64_MIN), (-6, I32_MIN)]:
        got = donnx.slice(x, [start], [end], [0], [-1])
        assert_same(got, x[:1])
        assert donnx.window(x.shape, [start], [end], [0], [-1]) == ((0,), (1,), (-1,), (1,))
        inits = [
            numpy_helper.from_array(np.array(v, np.int64), n)
            for v, n in [([start], "s"), ([end], "e"), ([0], "a"), ([-1], "t")]
        ]
        graph = helper.make_graph(
            [helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"])],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
            initializer=inits,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        dims = inferred.graph.output[0].type.tensor_type.shape.dim
        assert [d.dim_value for d in dims] == [1]
        assert_same(got, spec_slice(x, [start], [end], [0], [-1]))


# --------------------------------------------------------------- 3. random inputs

SENTINELS = [I64_MIN, I64_MAX, I32_MIN, I32_MAX, -(2**62), 2**62]
HUGE_STEPS = [I64_MAX, I64_MIN, I64_MIN + 1, I32_MAX, I32_MIN, 2**40, -(2**40)]
ONNX_DTYPES = ["float32", "int8", "uint16", "bool", "float64"]


@st.composite
def onnx_arrays(draw, min_dims=1, max_dims=5, dtypes=ONNX_DTYPES):
    """Sizes 1 to 6 (0 to 6 in about one draw in five), mostly several; every layout."""
    sides = [5, 6, 4, 3, 2, 1] + ([0] if draw(st.integers(0, 4)) == 4 else [])
    ndim = draw(st.integers(min_dims, max_dims))
    shape = tuple(draw(st.sampled_from(sides)) for _ in range(ndim))
    dtype = draw(st.sampled_from(dtypes))
    base = draw(values(dtype, max(int(np.prod(shape)), 1)))
    layouts = ["C", "F", "reversed", "strided", "permuted", "broadcast"] if shape else ["C"]
    return draw(laid_out(base, shape, draw(st.sampled_from(layouts))))


@st.composite
def bounds(draw, n):
    """A start or end on an axis of ``n``: mostly -n-2 to n+2, else a sentinel."""
    if draw(st.integers(0, 4)) == 4:
        return draw(st.sampled_from(SENTINELS))
    return draw(st.integers(-n - 2, n + 2))


@st.composite
def nonempty_range(draw, n, t):
    """A start and an end that take at least one element of an axis of ``n`` with step
    ``t``, each written in one of ONNX's ways: from the front, from the back (negative),
    past the end, or as a sentinel."""
    # Drawn from the far end in the step's direction: the simplest range is the longest.
    first = draw(st.integers(0, n - 1))
    if t < 0:
        first = n - 1 - first
    start = first - n if draw(st.booleans()) else first
    if t > 0:
        end = n - draw(st.integers(0, n - first - 1))
        if end == n:
            end = draw(st.sampled_from([n, n + 3, I64_MAX, I32_MAX]))
        elif draw(st.booleans()):
            end -= n
    else:
        end = draw(st.integers(-1, first - 1))
        if end == -1:
            end = draw(st.sampled_from([-n - 1, -n - 3, I64_MIN, I32_MIN]))
            if first == 0 and draw(st.booleans()):
                # Below the axis: the ONNX page clamps it to 0 (onnx.reference: to -1).
                start = draw(st.sampled_from([-n - 1, -n - 4, I64_MIN, I32_MIN]))
        elif draw(st.booleans()):
            end -= n
    return start, end


@st.composite
def steps_(draw):
    """A step: mostly 1 to 4 either way, else huge."""
    r = draw(st.integers(0, 6))
    if r == 6:
        return draw(st.sampled_from(HUGE_STEPS))
    return draw(st.sampled_from([2, 1, 3, 4])) * (1 if r % 2 else -1)


@st.composite
def slice_inputs(draw, shape):
    """Slice's starts, ends, axes (None, or a subset of the axes in any order, some
    negative) and steps (None, or non-zero: small and huge), all drawn."""
    ndim = len(shape)
    k = draw(st.sampled_from(list(range(ndim, 0, -1)) * 3 + [0]))
    axes = None
    if draw(st.booleans()):
        order = draw(st.permutations(range(ndim)))[:k]
        axes = [a - ndim if draw(st.booleans()) else a for a in order]
    use_steps = draw(st.integers(0, 3)) < 3
    starts, ends, steps = [], [], []
    for i in range(k):
        n = shape[i if axes is None else axes[i]]
        t = draw(steps_()) if use_steps else 1
        if n and not draw(st.booleans()):
            a, b = draw(nonempty_range(n, t))
        else:
            a, b = draw(bounds(n)), draw(bounds(n))
        starts.append(a)
        ends.append(b)
        steps.append(t)
    steps = steps if use_steps else None
    # As lists, tuples or int64 arrays (ONNX's tensors), or int32 arrays where they fit.
    kind = draw(st.sampled_from(["list", "tuple", "int64", "int32"]))

    def wrap(v):
        if v is None or kind == "list":
            return v
        if kind == "tuple":
            return tuple(v)
        if kind == "int32" and all(I32_MIN <= i <= I32_MAX for i in v):
            return np.array(v, np.int32)
        return np.array(v, np.int64)

    return (starts, ends, axes, steps), tuple(wrap(v) for v in (starts, ends, axes, steps))


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_random_slices_match_the_reference(device, data):
    x = data.draw(onnx_arrays())
    plain, given_ = data.draw(slice_inputs(x.shape))
    want = spec_slice(x, *plain)
    with tiny_blocks() if data.draw(st.booleans()) else _nothing():
        got = donnx.slice(to_device(x, device), *given_)
    assert_same(got, want)


@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_random_nonzero_matches_the_reference(device, data):
    x = data.draw(onnx_arrays(min_dims=0, dtypes=ONNX_DTYPES + ["float16", "int64"]))
    want = reference_nonzero(x)
    if x.ndim:
        np.testing.assert_array_equal(want, np.array(np.nonzero(x), np.int64).reshape(x.ndim, -1))
    with tiny_blocks() if data.draw(st.booleans()) else _nothing():
        got = donnx.nonzero(to_device(x, device))
    assert_same(got, want)


@functools.cache
def _ort_session(dtype, names):
    """An ONNX Runtime CPU session of the one-node Slice model that onnx.reference runs."""
    ort = pytest.importorskip("onnxruntime")
    model = _evaluator("Slice", dtype, names).proto_
    model.ir_version = min(model.ir_version, 8)  # what older runtimes read
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@given(data=st.data())
def test_random_slices_match_onnxruntime(data):
    """ONNX Runtime, which DirectML's execution provider sits in, agrees with the page (and
    with dmlnumba) where onnx.reference does not: the sentinel and below-the-axis starts of
    negative steps included.  Except where ONNX Runtime departs from the page itself: an end of
    INT32_MAX or INT64_MAX with a negative step, which it reads as "past the first element"
    (the page clamps it to ``dim - 1``, as onnx.reference and dmlnumba do)."""
    x = data.draw(onnx_arrays(dtypes=["float32", "int64", "uint8", "float16"]))
    plain, _ = data.draw(slice_inputs(x.shape))
    starts, ends, axes, steps = plain
    backwards = [False] * len(ends) if steps is None else [int(s) < 0 for s in steps]
    assume(not any(b and int(e) in (I32_MAX, I64_MAX) for b, e in zip(backwards, ends)))
    names, feeds = _slice_feeds(x, *plain)
    want = _ort_session(x.dtype, names).run(None, feeds)[0]
    assert_same(donnx.slice(x, *plain), want)
    assert_same(spec_slice(x, *plain), want)


@given(data=st.data())
def test_random_slices_through_the_evaluator_run_dmlnumba(data):
    x = data.draw(onnx_arrays(max_dims=3))
    plain, _ = data.draw(slice_inputs(x.shape))
    ours = reference_slice(x, *plain, new_ops=True)
    assert_same(ours, spec_slice(x, *plain))
    assert_same(ours, donnx.slice(x, *plain))


# ---------------------------------------------- input libraries and empty results


def _libraries():
    """The CPU array libraries installed here (found without importing them)."""
    import importlib.util

    return ["numpy"] + [m for m in ("dask", "torch", "jax") if importlib.util.find_spec(m)]


def _as(lib, x):
    if lib == "torch":
        import torch

        return torch.from_numpy(x.copy())
    if lib == "jax":
        import jax.numpy as jnp

        return jnp.asarray(x)
    if lib == "dask":
        import dask.array as da

        return da.from_array(x, chunks=tuple(max(1, (n + 1) // 2) for n in x.shape) or ())
    return x


def _result_type(lib):
    """The array type dmlnumba's operators return for CPU inputs of ``lib``."""
    if lib == "torch":
        import torch

        return torch.Tensor
    if lib == "dask":
        import dask.array as da

        return da.Array
    if lib == "jax":
        import jax

        return jax.Array
    return np.ndarray


def _computed(a):
    h = np.asarray(a.compute() if hasattr(a, "compute") else a)
    if type(a).__module__.startswith("jaxlib") and h.dtype == np.int32:
        # JAX keeps 64-bit integers only with jax_enable_x64: its int64 results are int32
        h = h.astype(np.int64)
    return h


@pytest.mark.parametrize("lib", _libraries())
@pytest.mark.parametrize("dtype", ["float32", "bool", "int8"])
def test_every_cpu_library(lib, dtype, monkeypatch):
    x = (np.arange(24).reshape(2, 3, 4) % 3).astype(dtype)
    a = _as(lib, x)
    cases = [
        (([0, -1], [2, I64_MIN], [0, 2], [1, -2]), x[0:2, :, ::-2]),
        (([1], [I64_MAX], [-2], None), x[:, 1:]),
        (([5], [6], None, None), x[5:6]),  # empty
        (([-1], [-1], [2], [-1]), x[:, :, 3:3:-1]),  # empty
    ]
    for params, want in cases:
        got = donnx.slice(a, *params)
        assert isinstance(got, _result_type(lib)), type(got)
        assert_same(_computed(got), want)
    got = donnx.nonzero(a)
    assert isinstance(got, _result_type(lib)), type(got)
    assert_same(_computed(got), np.array(np.nonzero(x), np.int64))
    for scalar in (np.array(0, dtype), np.array(1, dtype)):
        got = donnx.nonzero(_as(lib, scalar))
        assert isinstance(got, _result_type(lib))
        assert _computed(got).shape == (0, int(bool(scalar)))
        assert _computed(got).dtype == np.int64


@pytest.mark.parametrize("lib", _libraries())
def test_empty_results_launch_nothing(lib, monkeypatch):
    calls = count_calls(monkeypatch)
    x = np.ones((3, 4), np.float32)
    for params, shape in [
        (([4], [5], [0]), (0, 4)),
        (([0, 2], [3, 2], [0, 1]), (3, 0)),
        (([I64_MIN], [I64_MAX], [1], [-1]), (3, 0)),
    ]:
        got = donnx.slice(_as(lib, x), *params)
        assert isinstance(got, _result_type(lib))
        assert tuple(got.shape) == shape and _computed(got).dtype == np.float32
    assert calls["slice1"] == 0


def _converters(device):
    """Ways to pass Slice's inputs: Python sequences, NumPy arrays of several integer
    types, and arrays of the other libraries (on ``device``)."""
    convs = [list, tuple, np.array, lambda v: np.array(v, np.uint8 if min(v) >= 0 else np.int16)]
    convs.append(lambda v: to_device(np.array(v, np.int64), device))
    if "torch" in _libraries():
        import torch

        convs.append(torch.tensor)
    if "jax" in _libraries():
        import jax.numpy as jnp

        convs.append(jnp.asarray)
    if "dask" in _libraries():
        import dask.array as da

        convs.append(lambda v: da.from_array(np.array(v)))
    return convs


@pytest.mark.parametrize("device", DEVICES)
def test_parameters_from_any_library(device):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    want = x[2:0:-1, 1:]
    for conv in _converters(device):
        got = donnx.slice(x, conv([2, 1]), conv([0, 9]), conv([0, 1]), conv([-1, 1]))
        assert_same(got, want)


def test_jax_gpu_parameters_are_read_after_their_work():
    """Slice's inputs as JAX arrays on a GPU whose computation still runs when the call
    reads them: read once JAX's work is done (read through the CUDA array interface,
    steps were once read as 0)."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    gpu = jax_gpu()
    big = jax.device_put(jnp.ones(1 << 26, jnp.float32), gpu)

    @jax.jit
    def late(v, big):  # v, after some 10 ms of work on the GPU
        z = jax.lax.fori_loop(0, 50, lambda i, a: jnp.sin(a), big)
        return v + (jnp.sum(z) * 0).astype(v.dtype)

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for _ in range(3):
        starts = late(jax.device_put(jnp.array([2, 1], jnp.int32), gpu), big)
        steps = late(jax.device_put(jnp.array([-1, 1], jnp.int32), gpu), big)
        assert_same(donnx.slice(x, starts, [0, 9], [0, 1], steps), x[2:0:-1, 1:])


# --------------------------------------------------------------------- 4. errors


SLICE_ERRORS = [
    (dict(starts=[0, 0], ends=[1, 1], steps=[1, 0]), ValueError, r"steps\[1\] is 0; steps must"),
    (
        dict(starts=[0, 0], ends=[1, 1], axes=[0, -2]),
        ValueError,
        r"axes\[0\] = 0 and axes\[1\] = -2 are both axis 0; each axis may be sliced once",
    ),
    (
        dict(starts=[0], ends=[1], axes=[2]),
        ValueError,
        r"axes\[0\] = 2 is out of range for 2 dimensions: it must be between -2 and 1",
    ),
    (dict(starts=[0], ends=[1], axes=[-3]), ValueError, r"axes\[0\] = -3 is out of range"),
    (dict(starts=[0, 0], ends=[1]), ValueError, "starts has 2 values and ends 1"),
    (dict(starts=[0], ends=[1], axes=[0, 1]), ValueError, "axes has 2 values and starts 1"),
    (dict(starts=[0], ends=[1], steps=[1, 1]), ValueError, "steps has 2 values and starts 1"),
    (
        dict(starts=[0, 0, 0], ends=[1, 1, 1]),
        ValueError,
        "starts and ends have 3 values but data has 2 dimensions",
    ),
    (dict(starts=[0.0], ends=[1]), TypeError, r"starts\[0\] must be an integer, not float"),
    (dict(starts=[True], ends=[1]), TypeError, r"starts\[0\] must be an integer, not bool"),
    (dict(starts=np.array([0.0]), ends=[1]), TypeError, "starts must hold integers, not float64"),
    (dict(starts=np.zeros((1, 1), int), ends=[1]), TypeError, "not an array of shape"),
    (dict(starts=0, ends=[1]), TypeError, "starts must be a list, tuple or 1-d array"),
    (dict(starts="0", ends=[1]), TypeError, "starts must be a list, tuple or 1-d array"),
    (dict(starts=[2**63], ends=[1]), ValueError, r"starts\[0\] = 9223372036854775808 does not"),
    (dict(starts=np.array([2**63], np.uint64), ends=[1]), ValueError, "does not fit in int64"),
]


@pytest.mark.parametrize("kwargs,exc,match", SLICE_ERRORS)
def test_slice_errors(kwargs, exc, match):
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(exc, match=match) as e:
        donnx.slice(x, **kwargs)
    assert str(e.value).startswith("onnx.slice(): ")
    with pytest.raises(exc, match=match.replace("data has", "shape has")) as e:
        donnx.window(x.shape, **kwargs)
    assert str(e.value).startswith("onnx.window(): ")


def test_data_errors():
    with pytest.raises(TypeError, match=r"^onnx\.slice\(\): data dtype complex64 is not supp"):
        donnx.slice(np.zeros(3, np.complex64), [0], [1])
    with pytest.raises(ValueError, match=r"^onnx\.slice\(\): data has 0 dimensions"):
        donnx.slice(np.zeros((), np.float32), [], [])
    with pytest.raises(ValueError, match=r"^onnx\.slice\(\): data has 9 dimensions"):
        donnx.slice(np.zeros((1,) * 9, np.float32), [0], [1])
    with pytest.raises(TypeError, match=r"^onnx\.slice\(\): data must be a NumPy array"):
        donnx.slice([1, 2, 3], [0], [1])
    with pytest.raises(ValueError, match=r"^onnx\.window\(\): shape has 0 dimensions"):
        donnx.window((), [], [])
    with pytest.raises(
        ValueError, match=r"^onnx\.window\(\): shape \(2, -1\) has a size that is neg"
    ):
        donnx.window((2, -1), [0], [1])
    with pytest.raises(TypeError, match=r"^onnx\.nonzero\(\): x dtype complex128 is not supp"):
        donnx.nonzero(np.zeros(3, np.complex128))
    with pytest.raises(ValueError, match=r"^onnx\.nonzero\(\): x has 9 dimensions"):
        donnx.nonzero(np.zeros((1,) * 9, np.float32))
    # A layout the operators refuse is named as the adapter's: a packed record's field.
    odd = np.ndarray((5,), np.float32, buffer=np.arange(64, dtype=np.uint8), strides=(5,))
    with pytest.raises(ValueError, match=r"^onnx\.slice\(\): data\.strides\[0\] = 5 is not a"):
        donnx.slice(odd, [0], [5])
    with pytest.raises(ValueError, match=r"^onnx\.nonzero\(\): x\.strides\[0\] = 5 is not a"):
        donnx.nonzero(odd)


def test_dask_data_errors():
    da = pytest.importorskip("dask.array")
    d = da.from_array(np.arange(10.0), chunks=4)
    unknown = d[d > 3]  # chunks of unknown sizes
    with pytest.raises(ValueError, match=r"^onnx\.slice\(\): data has unknown chunk sizes"):
        donnx.slice(unknown, [0], [1])
    with pytest.raises(ValueError, match=r"^onnx\.nonzero\(\): x has unknown chunk sizes"):
        donnx.nonzero(unknown)
    masked = da.ma.masked_array(da.zeros(3))
    with pytest.raises(TypeError, match=r"^onnx\.slice\(\): data is a dask array of numpy\.ma"):
        donnx.slice(masked, [0], [1])


def test_window_parameters():
    shape = (20, 10, 5)
    assert donnx.window(shape, [0, 0], [3, 10], [0, 1], [1, 1]) == (
        (0, 0, 0),
        (3, 10, 5),
        (1, 1, 1),
        (3, 10, 5),
    )
    # test_slice_neg_steps: x[20:0:-1, 10:0:-3, 4:1:-2]
    assert donnx.window(shape, [20, 10, 4], [0, 0, 1], [0, 1, 2], [-1, -3, -2]) == (
        (1, 3, 2),
        (19, 7, 3),
        (-1, -3, -2),
        (19, 3, 2),
    )
    assert donnx.window(shape, [1000], [1000], [1], [1]) is None


def test_import_dmlnumba_imports_neither_this_module_nor_onnx():
    code = (
        "import sys, dmlnumba; "
        "print(*[m in sys.modules for m in "
        "('dmlnumba.onnx', 'onnx', 'torch', 'jax', 'numba.cuda')]); "
        "import dmlnumba.onnx; print('onnx' in sys.modules)"
    )
    r = run_python(code, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False"] * 6


# ------------------------------------------------------------------------ GPUs


@needs_real_gpu
@pytest.mark.parametrize("lib", ["torch", "cupy"])
def test_cuda_libraries_match_the_cpu(lib):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((7, 33, 65)).astype(np.float32)
    x[x < 0.5] = 0
    if lib == "torch":
        torch = pytest.importorskip("torch")
        d = torch.as_tensor(x, device="cuda")[:, ::2]
        cpu = x[:, ::2]
        check = lambda r: isinstance(r, torch.Tensor) and r.device == d.device
    else:
        cupy = pytest.importorskip("cupy")
        d = cupy.asarray(x)[:, ::-2]
        cpu = x[:, ::-2]
        check = lambda r: isinstance(r, cupy.ndarray) and r.device == d.device
    for params in [
        ([6, -1, 3], [I64_MIN, 0, 50], [0, 1, 2], [-2, -3, 4]),
        ([1], [I64_MAX], [-1], None),
        ([5], [5], [0], [1]),  # empty
    ]:
        got = donnx.slice(d, *params)
        assert check(got)
        assert_same(got, donnx.slice(cpu, *params))
    for a, h in [(d, cpu), (d > 0, cpu > 0), (d[0, 0, 0], cpu[0, 0, 0]), (d[:0], cpu[:0])]:
        got = donnx.nonzero(a)
        assert check(got)
        assert_same(got, donnx.nonzero(np.array(h)))
