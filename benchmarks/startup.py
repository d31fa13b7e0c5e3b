"""Startup of dmlnumba, each figure from fresh interpreters (median of 5):

- ``import dmlnumba``;
- import plus the first call of both operators with numba's on-disk cache warm;
- the same with an empty cache (cold: everything compiles).

``python benchmarks/startup.py`` (the cold runs compile from scratch: about a minute).
"""

import os
import statistics
import subprocess
import sys
import tempfile

FIRST_CALLS = """
import time
t = time.perf_counter()
import numpy as np
import dmlnumba
x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
dmlnumba.slice1(x, (0, 0, 0), (2, 3, 4), (1, -1, 2))
dmlnumba.nonzero_coordinates(x)
print(time.perf_counter() - t)
"""
IMPORT = """
import time
t = time.perf_counter()
import dmlnumba
print(time.perf_counter() - t)
"""


def run(code, env=None, n=5):
    times = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
            ).stdout
        )
        for _ in range(n)
    ]
    return statistics.median(times)


def main():
    print(f"import dmlnumba:                      {run(IMPORT):.3f} s")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        cold = [run(FIRST_CALLS, env, 1)]
        warm = run(FIRST_CALLS, env)
    print(f"import + first calls, cache cold:    {cold[0]:.2f} s (compiles the kernels)")
    print(f"import + first calls, cache warm:    {warm:.3f} s")


if __name__ == "__main__":
    main()
