"""``python -m dmlnumba`` on a machine without a GPU."""

import importlib.util

import pytest
from interpreter import run_python

from devices import CUDA, SIM


@pytest.mark.skipif(CUDA or SIM, reason="needs a machine where CUDA is unavailable")
@pytest.mark.parametrize(
    "argv", [["--device", "cuda", "--no-timing"], ["compile", "--device", "cuda"]]
)
def test_command_line_without_a_gpu_prints_one_line(argv):
    r = run_python(module="dmlnumba", args=argv)
    assert r.returncode == 1
    assert r.stdout == ""
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    # Without numba-cuda (pip install ".[test]" alone) the line says what to install;
    # with it, that there is no GPU.
    if importlib.util.find_spec("numba_cuda") is None:
        why = "the CUDA target needs numba-cuda, which is not installed"
    else:
        why = "no usable CUDA GPU"
    assert len(lines) == 1 and why in lines[0], r.stderr
