"""Smoke test of the asv suite: every benchmark runs once, at its smallest parameters,
so that the suite cannot rot.  GPU benchmarks skip (NotImplementedError in setup) without a GPU."""

import importlib
import inspect
import pathlib
import sys

import pytest
from interpreter import run_python

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
