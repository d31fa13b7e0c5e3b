"""Tuning sweep on a GPU: nonzero against torch.nonzero for several settings of
``config.CUDA_NONZERO_*`` (each argument one variant, ``"NAME=V,NAME=V"``, e.g.
``VECTOR=0`` or ``TILES=1024``; default ``VECTOR=1 VECTOR=0``), and slice1's large
window for several settings.  ``python3 scripts/tune_gpu.py [variant ...]``;
``SKIP_NONZERO=1`` and ``SKIP_SLICE=1`` leave a part out.  Prints medians, ratios
and percent of the copy roofline.  A register cap (``DMLNUMBA_CUDA_NONZERO_MAX_REGISTERS``)
needs its own ``NUMBA_CACHE_DIR``: the disk cache does not key on it."""

import os
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
a = b = None  # free the GiB before the cases
# Variants: "NAME=V,NAME=V" settings of config.CUDA_NONZERO_<NAME>, e.g. "TILES=1024"
# or "VECTOR=0"; each is applied before its calls (plans are keyed by them).
variants = sys.argv[1:] or ["VECTOR=1", "VECTOR=0"]
SLICE_CONFIGS = [(4, 4096), (4, 16384), (8, 4096), (8, 16384), (8, 65536), (16, 16384)]
defaults = {n: getattr(config, n) for n in dir(config) if n.startswith("CUDA_NONZERO_")}


def settings(spec):
    out = dict(defaults)
    for kv in filter(None, spec.split(",")):
        k, v = kv.split("=")
        out["CUDA_NONZERO_" + k] = int(v)
    return out


for k in (20, 24, 28) if "SKIP_NONZERO" not in os.environ else ():
    for d in (0.01, 0.5, 0.99):
        xc, xt, cnt, crd, nnz = gpu_nonzero_case(1 << k, d)
        fns = {"torch": lambda: torch.nonzero(xt)}
        for spec in variants:
            sets = settings(spec)

            def f(sets=sets):
                for n, v in sets.items():
                    setattr(config, n, v)
                dmlnumba.nonzero_coordinates(xc, out_count=cnt, out_coordinates=crd)

            fns[spec] = f
        med = _interleaved(fns, 15, sync)
        for spec in variants:  # every variant's answer, not just the last one's
            crd.fill(0)
            fns[spec]()
            assert int(cnt.get()[0]) == nnz
            assert bool((crd[:nnz, 0] == cp.flatnonzero(xc)).all())
        line = "  ".join(
            f"{name} {v * 1e3:.3f} ms ({med['torch'] / v:.2f}x, "
            f"{100 * (xc.nbytes + nnz * 4) / bw / v:.0f}%)"
            for name, v in med.items()
            if name != "torch"
        )
        print(f"nonzero 2**{k} {d:.0%}: torch {med['torch'] * 1e3:.3f} ms | {line}", flush=True)
        xc = xt = crd = None
for n, v in defaults.items():
    setattr(config, n, v)

SLICE_CASES = [
    ((8, 64, 1024, 1024), np.s_[:, ::-1, 3:1000:2, :]),
    ((8, 64, 256, 256), np.s_[:, ::-1, 3:250:2, 1::3]),
]
for shape, idx in [] if "SKIP_SLICE" in os.environ else SLICE_CASES:
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
    print(
        f"slice1 {shape} {idx}: "
        + "  ".join(
            f"{k} {v * 1e3:.3f} ms ({med['cupy'] / v:.2f}x cupy, "
            f"{100 * 2 * out.nbytes / bw / v:.0f}%)"
            for k, v in med.items()
        ),
        flush=True,
    )
    xc = out = out_odd = None
