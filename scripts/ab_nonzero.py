"""Preallocated nonzero times for an A/B comparison of two source trees (CUDA events,
median of 15), 2**28 float32, 1-d and (65536, 64, 64), at 1, 50 and 99% non-zero; every
result checked against ``cupy.argwhere``.

Run it alternately on each tree, on one GPU machine::

    for i in 1 2; do for v in old new; do
        PYTHONPATH=ab/$v/src python3 scripts/ab_nonzero.py $v; done; done

(``ab/old/src`` from ``git archive <commit> src``).  ``AB_SHAPES``: other C-contiguous
shapes of 2**28 elements, e.g. ``"268435456;65536,64,64;4194304,8,8"``.
``AB_STRIDED=1`` adds two non-contiguous layouts of the same elements (the count pass for
other layouts): (64, 64, 65536) transposed, and (65536, 64, 64) reversed in dimension 1.
``AB_DENSITIES``: other shares of non-zero elements, e.g. ``"0.01,0.05,0.5,0.99"``.
One JSON line per run."""

import json
import os
import sys

import cupy as cp
import numpy as np

import dmlnumba

N = 1 << 28
shapes = [(N,), (65536, 64, 64)]
if os.environ.get("AB_SHAPES"):
    shapes = [tuple(int(v) for v in t.split(",")) for t in os.environ["AB_SHAPES"].split(";")]


densities = [float(v) for v in os.environ.get("AB_DENSITIES", "0.01,0.5,0.99").split(",")]


def layouts():
    """``(name, view)``: each case is ``view`` of 2**28 float32 elements."""
    for shape in shapes:
        yield "x".join(map(str, shape)), lambda b, shape=shape: b.reshape(shape)
    if os.environ.get("AB_STRIDED"):
        yield "T(64,64,65536)", lambda b: b.reshape(64, 64, 65536).transpose(2, 1, 0)
        yield "(65536,64,64)[:, ::-1]", lambda b: b.reshape(65536, 64, 64)[:, ::-1]


res = {}
for name, view in layouts():
    for d in densities:
        b = cp.random.random(N, dtype=cp.float32)
        b[b >= d] = 0
        x = view(b)
        cnt = cp.empty(1, cp.uint32)
        crd = cp.empty((x.size, x.ndim), cp.uint32)
        for _ in range(3):
            dmlnumba.nonzero_coordinates(x, out_count=cnt, out_coordinates=crd)
        ts = []
        for _ in range(15):
            start, end = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            dmlnumba.nonzero_coordinates(x, out_count=cnt, out_coordinates=crd)
            end.record()
            end.synchronize()
            ts.append(cp.cuda.get_elapsed_time(start, end))
        want = cp.argwhere(x)
        n = int(cnt.get()[0])
        assert n == want.shape[0]
        assert bool((crd[:n].astype(cp.int64) == want).all())
        res[f"{name} {d}"] = float(np.median(ts))
        del b, x, crd, want
        cp.get_default_memory_pool().free_all_blocks()
print(sys.argv[1], json.dumps({k: round(v, 3) for k, v in res.items()}))
