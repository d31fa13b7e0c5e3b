"""Importing the package is cheap: no compilation, no numba.cuda."""

import subprocess
import sys


def _run(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          timeout=300).stdout


def test_import_compiles_nothing_and_skips_numba_cuda():
    out = _run("import sys, dmlnumba; "
               "print('numba' in sys.modules, 'numba.cuda' in sys.modules, "
               "'dmlnumba.kernels_cpu' in sys.modules)")
    assert out.split() == ["False", "False", "False"]


def test_cpu_call_does_not_import_numba_cuda():
    out = _run("import sys, numpy as np, dmlnumba; dmlnumba.argwhere(np.ones(3)); "
               "print('numba.cuda' in sys.modules)")
    assert out.split() == ["False"]
