"""Smoke test of the asv suite: every benchmark runs once, at its smallest parameters,
so that the suite cannot rot.  GPU benchmarks skip (NotImplementedError in setup) without a GPU.
Then ``python -m dmlnumba.bench``'s slice_grad rows: the CPU ones run, and every contender
(the GPU rows' PyTorch one on CPU tensors) gives the same result."""

import importlib
import inspect
import pathlib
import sys

import numpy as np
import pytest
from interpreter import run_python

import dmlnumba

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODULES = ["bench_nonzero", "bench_slice1", "bench_startup"]


def _classes():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    for m in MODULES:
        mod = importlib.import_module(f"benchmarks.{m}")
        for name, cls in inspect.getmembers(mod, inspect.isclass):
            if cls.__module__ == mod.__name__:
                yield pytest.param(cls, id=f"{m}.{name}")


@pytest.mark.parametrize("cls", list(_classes()))
def test_benchmark_runs_once_at_its_smallest_size(cls):
    params = getattr(cls, "params", ())
    if params and not isinstance(params[0], (list, tuple)):
        params = (params,)
    args = tuple(p[0] for p in params)
    bench = cls()
    methods = [m for m in dir(bench) if m.startswith(("time_", "peakmem_", "timeraw_"))]
    assert methods, f"{cls.__name__} has no benchmarks"
    if hasattr(bench, "setup"):
        try:
            bench.setup(*args)
        except NotImplementedError as e:
            pytest.skip(f"{cls.__name__}: {e}")
    for m in methods:
        result = getattr(bench, m)(*args)
        if m.startswith("timeraw_"):
            r = run_python(result, timeout=300)
            assert r.returncode == 0, r.stderr


# ------------------------------------------------- python -m dmlnumba.bench: slice_grad rows

# (shape, the window's NumPy index, the window as SLICE1's parameters where not the
# tightest one dmlnumba.window gives: a negative stride whose window starts past the
# last element it reads, and a positive one whose window ends past it)
WINDOWS = [
    ((6, 7, 9), np.s_[:, ::-1, 1::3], None),
    ((6, 7, 9), np.s_[5:0:-2, 2:, ::-4], None),
    ((6, 7, 9), np.s_[1:2, :, 7::-3], None),
    ((6, 7), np.s_[::2, 1:6], None),
    ((9, 7), np.s_[7::-3, 1::2], ((0, 1), (8, 6), (-3, 2), (3, 3))),
]


def test_the_cpu_bench_runs_the_slice_grad_rows():
    """``python -m dmlnumba.bench --quick``'s CPU group times slice_grad on slice1's
    windows, beside NumPy's zeros and assignment (each result checked first), with the
    copy roofline where slice1's row has one (bytes: the output and the gradient)."""
    from dmlnumba.bench_cases import cpu_cases

    rows = {r["case"]: r for r in cpu_cases(quick=True)["rows"]}
    big = rows["slice_grad x[:, ::-1, 3:250:2, 1::3] 2x16x256x256 f32"]
    assert set(big["times_s"]) == {"dmlnumba", "dmlnumba preallocated", "numpy"}
    assert big["roofline_pct"] > 0 and "roofline_pct" in rows[big["case"].replace("_grad", "1")]
    small = rows["slice_grad 1000 elements (call latency)"]
    assert "numpy" in small["times_s"] and "roofline_pct" not in small


@pytest.mark.parametrize("shape, index, w", WINDOWS, ids=str)
def test_every_slice_grad_contender_gives_numpys_result(shape, index, w):
    """The contenders of a slice_grad row, PyTorch's included (CPU tensors here, for
    the GPU rows' CUDA ones: its ascending window and flipped gradient), all give
    NumPy's zeros with the gradient assigned through the window's own slice."""
    torch = pytest.importorskip("torch")
    from dmlnumba import bench_grad

    w = w or dmlnumba.window(shape, index)
    g = np.arange(1, 1 + np.prod(w[3]), dtype=np.float32).reshape(w[3])
    want = np.zeros(shape, np.float32)
    want[index] = g
    out = np.full(shape, np.nan, np.float32)
    fns = bench_grad.contenders(w, index, g, np, out, torch.from_numpy(g))
    assert set(fns) == {"dmlnumba", "dmlnumba numpy-in", "dmlnumba preallocated", "numpy", "torch"}
    for name, f in fns.items():
        np.testing.assert_array_equal(np.asarray(f()), want, err_msg=name)
    rows = []
    bench_grad.slice_grad_row(rows, "row", shape, index, 1, 1e9, np, True)
    assert set(rows[0]["times_s"]) == set(fns) and rows[0]["roofline_pct"] > 0


def test_the_slice_grad_check_names_a_contender_that_differs():
    from dmlnumba import bench_grad

    want = np.zeros((2, 3), np.float32)
    same, wrong = (lambda: np.zeros((2, 3))), (lambda: np.eye(2, 3))
    bench_grad.check({"numpy": same}, want, np)
    with pytest.raises(AssertionError, match="torch differs from numpy's result"):
        bench_grad.check({"numpy": same, "torch": wrong}, want, np)
    with pytest.raises(AssertionError, match="torch differs"):
        bench_grad.check({"torch": lambda: np.zeros((3, 2))}, want, np)
