"""Where a 1000-element 1-d nonzero call's time goes on the CPU: the whole default call,
its runner, the compiled kernel called directly, numba's dispatch of four arrays to a
kernel that does nothing, and each host step, best of 30 loops of 2000 calls.

    taskset -c 1 python scripts/cpu_call_parts.py
"""

import os
import sys
import time

import numpy as np
from numba import njit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
import dmlnumba  # noqa: E402
from dmlnumba import api  # noqa: E402


@njit
def nothing(a, p, o, c):
    c[0] = 1


rng = np.random.default_rng(0)
x = rng.standard_normal(1000).astype(np.float32)
x[rng.random(1000) >= 0.5] = 0
dmlnumba.nonzero_coordinates(x)
dmlnumba.nonzero_coordinates(x)  # the runner now holds the compiled serial kernel
key = api._numpy_nonzero_key("nonzero_coordinates", x, None, np.uint32, None)
run = api._runners[key]
cl = dict(zip(run.__code__.co_freevars, [c.cell_contents for c in run.__closure__]))
k, read, p = cl["kernel"], cl["read"], cl["p"]
crd = np.empty((1000, 1), np.uint32)
flat, cnt = crd.ravel(), np.empty(1, np.uint32)
src = read(x)
nothing(src, p, flat, cnt)
u = np.dtype(np.uint32)
parts = {
    "whole call": lambda: dmlnumba.nonzero_coordinates(x),
    "its runner": lambda: run(x),
    "kernel": lambda: k(src, p, flat, cnt),
    "dispatch (empty kernel)": lambda: nothing(src, p, flat, cnt),
    "input view (read)": lambda: read(x),
    "two np.empty": lambda: (np.empty(1, u), np.empty((1000, 1), u)),
    "output ravel": lambda: crd.ravel(),
    "key and lookup": lambda: api._runners.get(
        api._numpy_nonzero_key("nonzero_coordinates", x, None, np.uint32, None)
    ),
    "numpy.argwhere": lambda: np.argwhere(x),
}
best = dict.fromkeys(parts, 1e9)
for _ in range(30):
    for name, f in parts.items():
        t0 = time.perf_counter()
        for _ in range(2000):
            f()
        best[name] = min(best[name], (time.perf_counter() - t0) / 2000 * 1e6)
for name, v in best.items():
    print(f"{name:24s} {v:6.3f} us")
