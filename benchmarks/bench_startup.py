"""Startup: import, and import plus the first call of both operators, each in a fresh interpreter.

After asv's warm-up runs numba's on-disk cache is warm, so ``timeraw_first_calls`` measures the
warm-cache first call; ``python benchmarks/startup.py`` also measures a cold (empty cache) one.
"""


class Startup:
    def timeraw_import(self):
        return "import dmlnumba"

    def timeraw_first_calls(self):
        return """
import numpy as np
import dmlnumba
x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
dmlnumba.slice1(x, (0, 0, 0), (2, 3, 4), (1, -1, 2))
dmlnumba.nonzero_coordinates(x)
"""
