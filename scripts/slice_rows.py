"""slice1 kernel time for several ``config.CUDA_SLICE_*`` settings, beside CuPy's copy of
the same windows: ``python3 scripts/slice_rows.py`` on a GPU.

Each round times every setting once, as 50 back-to-back calls into a preallocated output
between two CUDA events (the GPU is the bottleneck, so that is about the kernel's time);
prints the medians over 9 rounds, in microseconds per call.  A tile takes
``min(ROWS, rows // TILES)`` rows (at least 1)."""

import cupy as cp
import numpy as np

import dmlnumba
from dmlnumba import config

#: (CUDA_SLICE_ITEMS, CUDA_SLICE_ROWS, CUDA_SLICE_TILES)
SETTINGS = [(8, 32, 4096), (8, 8, 4096), (8, 16, 1024), (8, 16, 4096), (8, 24, 1024)]
SETTINGS += [(8, 12, 1024), (8, 4, 4096)]
WINDOWS = [
    ((8, 64, 256, 256), np.s_[:, ::-1, 3:250:2, 1::3]),
    ((8, 64, 1024, 1024), np.s_[:, ::-1, 3:1000:2, :]),
    ((64, 256, 256), np.s_[:, 1:255, 1:255]),
    ((4096, 4096), np.s_[1:-1:3, 5:4000]),
]


def per_call(f, n=50):
    a, b = cp.cuda.Event(), cp.cuda.Event()
    a.record()
    for _ in range(n):
        f()
    b.record()
    b.synchronize()
    return cp.cuda.get_elapsed_time(a, b) / n * 1e3


def setting(items, rows, tiles, x, w, out):
    def f():
        config.CUDA_SLICE_ITEMS, config.CUDA_SLICE_ROWS = items, rows
        config.CUDA_SLICE_TILES = tiles
        dmlnumba.slice1(x, *w, out=out)

    return f


for shape, idx in WINDOWS:
    x = cp.random.standard_normal(shape, dtype=cp.float32)
    w = dmlnumba.window(shape, idx)
    out = cp.empty(w[3], cp.float32)
    fns = {"cupy": lambda: cp.ascontiguousarray(x[idx])}
    for items, rows, tiles in SETTINGS:
        fns[f"i{items} r{rows} t{tiles}"] = setting(items, rows, tiles, x, w, out)
    for f in fns.values():
        for _ in range(3):
            f()
    ts = {k: [] for k in fns}
    for _ in range(9):
        for k, f in fns.items():
            ts[k].append(per_call(f))
    assert bool((out == cp.ascontiguousarray(x[idx])).all())
    line = "  ".join(f"{k} {np.median(v):.1f}" for k, v in ts.items())
    print(shape, idx, "us per call:", line, flush=True)
    x = out = None
