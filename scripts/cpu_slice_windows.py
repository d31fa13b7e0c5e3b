"""CPU slice1 on several windows of an 8x64x256x256 float32 input, interleaved with
``np.copyto`` of the same NumPy view into the same preallocated output.  For an A/B
between two checkouts, run it once per checkout, alternating:
``PYTHONPATH=<checkout>/src python scripts/cpu_slice_windows.py LABEL``.
Prints, per window, dmlnumba's median time and NumPy's time over it."""

import sys
import time

import numpy as np

import dmlnumba as d

x = np.random.rand(8, 64, 256, 256).astype(np.float32)
res = []
for idx in (
    np.s_[:, ::-1, 3:250:2, 1::3],
    np.s_[:, ::-1, 3:250:2, :],
    np.s_[::-1],
    np.s_[:, :, ::2, ::2],
    np.s_[..., ::-1],
    np.s_[:, 1::3, :, 5:200:7],
):
    w = d.window(x.shape, idx)
    out = np.empty(w[3], np.float32)
    f1 = lambda: d.slice1(x, *w, out=out)
    f2 = lambda: np.copyto(out, x[idx])
    f1()
    f2()
    a = []
    b = []
    for _ in range(15):
        t = time.perf_counter()
        f1()
        a.append(time.perf_counter() - t)
        t = time.perf_counter()
        f2()
        b.append(time.perf_counter() - t)
    res.append(f"{np.median(a) * 1e3:6.2f}({np.median(b) / np.median(a):4.2f}x)")
print(sys.argv[1], " ".join(res))
