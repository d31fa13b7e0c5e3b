"""Preallocated nonzero times for an A/B comparison of two source trees (CUDA events,
median of 15), 2**28 float32, 1-d and (65536, 64, 64), at 1, 50 and 99% non-zero.

Run it alternately on each tree, on one GPU machine::

    for i in 1 2; do for v in old new; do
        PYTHONPATH=ab/$v/src python3 scripts/ab_nonzero.py $v; done; done

(``ab/old/src`` from ``git archive <commit> src``).  One JSON line per run."""

import json
import os
import sys

import cupy as cp
import numpy as np

import dmlnumba
from dmlnumba.bench import gpu_nonzero_case

res = {}
# AB_SHAPES: other shapes of 2**28 elements, e.g. "268435456;65536,64,64;4194304,8,8".
shapes = [(1 << 28,), (65536, 64, 64)]
if os.environ.get("AB_SHAPES"):
    shapes = [tuple(int(v) for v in t.split(",")) for t in os.environ["AB_SHAPES"].split(";")]
for shape in shapes:
    for d in (0.01, 0.5, 0.99):
        xc, xt, cnt, crd, nnz = gpu_nonzero_case(1 << 28, d, shape if len(shape) > 1 else None)
        for _ in range(3):
            dmlnumba.nonzero_coordinates(xc, out_count=cnt, out_coordinates=crd)
        ts = []
        for _ in range(15):
            a, b = cp.cuda.Event(), cp.cuda.Event()
            a.record()
            dmlnumba.nonzero_coordinates(xc, out_count=cnt, out_coordinates=crd)
            b.record()
            b.synchronize()
            ts.append(cp.cuda.get_elapsed_time(a, b))
        assert int(cnt.get()[0]) == nnz
        assert bool((crd[:nnz].astype(cp.int64) == cp.argwhere(xc.reshape(shape))).all())
        res[f"{'x'.join(map(str, shape))} {d}"] = float(np.median(ts))
        del xc, xt, crd
        cp.get_default_memory_pool().free_all_blocks()
print(sys.argv[1], json.dumps({k: round(v, 3) for k, v in res.items()}))
