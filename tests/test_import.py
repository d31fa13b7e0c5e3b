"""Importing the package is cheap: no compilation, no numba.cuda."""

import os

import pytest
from interpreter import run_python


def _run(code):
    r = run_python(code, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_import_compiles_nothing_and_skips_numba_cuda():
    out = _run(
        "import sys, dmlnumba; "
        "print('numba' in sys.modules, 'numba.cuda' in sys.modules, "
        "'dmlnumba.cpu.kernels' in sys.modules)"
    )
    assert out.split() == ["False", "False", "False"]


def test_cpu_call_does_not_import_numba_cuda():
    out = _run(
        "import sys, numpy as np, dmlnumba; dmlnumba.argwhere(np.ones(3)); "
        "print('numba.cuda' in sys.modules)"
    )
    assert out.split() == ["False"]


def test_numba_cuda_is_in_the_pinned_range():
    """pyproject pins numba-cuda to the tested range: the CUDA launcher reads a
    kernel's function handle through numba-cuda internals."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("numba-cuda")
    except PackageNotFoundError:
        pytest.skip("numba-cuda is not installed")
    parts = tuple(int(p) for p in v.split(".")[:3] if p.isdigit())
    assert (0, 30, 4) <= parts < (0, 31), v


def test_version_is_written_once():
    import dmlnumba

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    pyproject = os.path.join(root, "pyproject.toml")
    if os.path.exists(pyproject):
        text = open(pyproject).read()
        assert 'dynamic = ["version"]' in text and "\nversion =" not in text.split("[tool")[0]
    from importlib.metadata import PackageNotFoundError, version

    try:
        assert version("dmlnumba") == dmlnumba.__version__
    except PackageNotFoundError:
        pytest.skip("dmlnumba runs from its source tree here, not installed")
