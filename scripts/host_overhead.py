"""Per-call host time of small CUDA calls, and where it goes (cProfile top entries)."""
import cProfile
import pstats
import time

import cupy as cp
import numpy as np

import dmlnumba

x = cp.random.standard_normal(1 << 10, dtype=cp.float32)
cnt = cp.empty(1, cp.uint32)
crd = cp.empty((x.size, 1), cp.uint32)
w = dmlnumba.window((1 << 10,), np.s_[::-2])
out = cp.empty(w[3], cp.float32)
for f, name in [(lambda: dmlnumba.nonzero_coordinates(x, out_count=cnt, out_coordinates=crd), "nonzero"),
                (lambda: dmlnumba.slice1(x, *w, out=out), "slice1")]:
    f()
    cp.cuda.runtime.deviceSynchronize()
    t = time.perf_counter()
    for _ in range(500):
        f()
    host = (time.perf_counter() - t) / 500
    cp.cuda.runtime.deviceSynchronize()
    print(f"{name}: {host * 1e6:.1f} us host time per call (1024 elements)")
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(200):
        f()
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(8)
