"""Preallocated nonzero of non-contiguous 2**28 float32 inputs (the count pass for other
layouts): (64, 64, 65536) transposed and (65536, 64, 64) reversed in dimension 1, at 1, 50
and 99% non-zero, median of 9, checked against cupy.argwhere.  For A/B runs beside
``scripts/ab_nonzero.py``: ``PYTHONPATH=ab/old/src python3 scripts/ab_nonzero_strided.py old``.
One JSON line per run."""

import json
import sys

import cupy as cp
import numpy as np

import dmlnumba

CASES = [
    ("T(64,64,65536)->(65536,64,64)", lambda b: b.reshape(64, 64, 65536).transpose(2, 1, 0)),
    ("rev (65536,64,64)[:, ::-1]", lambda b: b.reshape(65536, 64, 64)[:, ::-1]),
]
res = {}
for name, make in CASES:
    for d in (0.01, 0.5, 0.99):
        b = cp.random.random(1 << 28, dtype=cp.float32)
        b[b >= d] = 0
        x = make(b)
        cnt = cp.empty(1, cp.uint32)
        crd = cp.empty((x.size, x.ndim), cp.uint32)
        for _ in range(2):
            dmlnumba.nonzero_coordinates(x, out_count=cnt, out_coordinates=crd)
        ts = []
        for _ in range(9):
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
        res[f"{name} {d}"] = round(float(np.median(ts)), 3)
        del b, x, crd, want
        cp.get_default_memory_pool().free_all_blocks()
print(sys.argv[1] if len(sys.argv) > 1 else "", json.dumps(res))
