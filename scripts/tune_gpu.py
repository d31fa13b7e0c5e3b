"""Tuning sweep on a GPU: nonzero against torch.nonzero for several tile counts
(``CUDA_NONZERO_TILES``), and slice1's large window with and without 8-byte
words.  ``python3 scripts/tune_gpu.py [tiles ...]``; prints medians and ratios."""
import sys

import cupy as cp
import numpy as np
import torch

import dmlnumba
from dmlnumba import config
from dmlnumba.bench import _interleaved, gpu_nonzero_case

sync = torch.cuda.synchronize
print("device:", torch.cuda.get_device_name(), flush=True)
a = cp.empty(1 << 28, cp.float32)
b = cp.empty_like(a)
t = _interleaved({"copy": lambda: b.__setitem__(Ellipsis, a)}, 10, sync)["copy"]
bw = 2 * a.nbytes / t
print(f"copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
del a, b
tiles = [int(v) for v in sys.argv[1:]] or [256, 1024, 2048, 4096]
SLICE_CONFIGS = [(4, 4096), (4, 16384), (8, 4096), (8, 16384), (8, 65536), (16, 16384)]
for k in ((20, 24, 28) if "SKIP_NONZERO" not in __import__("os").environ else ()):
    for d in (0.01, 0.5, 0.99):
        xc, xt, cnt, crd, nnz = gpu_nonzero_case(1 << k, d)
        fns = {"torch": lambda: torch.nonzero(xt)}
        for tl in tiles:
            def f(tl=tl):
                config.CUDA_NONZERO_TILES = tl
                dmlnumba.nonzero_coordinates(xc, out_count=cnt, out_coordinates=crd)
            fns[f"tiles={tl}"] = f
        med = _interleaved(fns, 15, sync)
        assert int(cnt.get()[0]) == nnz
        line = "  ".join(f"{name} {v * 1e3:.3f} ms ({med['torch'] / v:.2f}x, "
                         f"{100 * (xc.nbytes + nnz * 4) / bw / v:.0f}%)"
                         for name, v in med.items() if name != "torch")
        print(f"nonzero 2**{k} {d:.0%}: torch {med['torch'] * 1e3:.3f} ms | {line}", flush=True)
        del xc, xt, crd

for shape, idx in [((8, 64, 1024, 1024), np.s_[:, ::-1, 3:1000:2, :]),
                   ((8, 64, 256, 256), np.s_[:, ::-1, 3:250:2, 1::3])]:
    xc = cp.random.standard_normal(shape, dtype=cp.float32)
    w = dmlnumba.window(shape, idx)
    out = cp.empty(w[3], cp.float32)
    out_odd = cp.empty(out.size + 1, cp.float32)[1:].reshape(out.shape)  # 4-byte aligned only
    fns = {"cupy": lambda: cp.ascontiguousarray(xc[idx])}
    for items, tl in SLICE_CONFIGS:
        def f(items=items, tl=tl):
            config.CUDA_SLICE_ITEMS, config.CUDA_SLICE_TILES = items, tl
            dmlnumba.slice1(xc, *w, out=out)
        fns[f"items={items},tiles={tl}"] = f
    fns["narrow (default)"] = lambda: dmlnumba.slice1(xc, *w, out=out_odd)
    med = _interleaved(fns, 15, sync)
    assert bool((cp.ascontiguousarray(xc[idx]) == out).all())
    assert bool((out_odd == out).all())
    print(f"slice1 {shape} {idx}: " + "  ".join(
        f"{k} {v * 1e3:.3f} ms ({med['cupy'] / v:.2f}x cupy, {100 * 2 * out.nbytes / bw / v:.0f}%)"
        for k, v in med.items()), flush=True)
    del xc, out, out_odd
