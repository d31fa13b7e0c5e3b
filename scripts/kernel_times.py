"""A few calls for Nsight Compute to time (``ncu --metrics gpu__time_duration.sum``):
nonzero at 2**20, 2**24, 2**28 (1-d, 50%), and slice1 of the bench's small window beside
CuPy's copy of it."""

import cupy as cp
import numpy as np

import dmlnumba

for k in (20, 24, 28):
    x = cp.random.standard_normal(1 << k, dtype=cp.float32)
    x[cp.random.random(1 << k, dtype=cp.float32) >= 0.5] = 0
    cnt, crd = cp.empty(1, cp.uint32), cp.empty((1 << k, 1), cp.uint32)
    for _ in range(2):
        dmlnumba.nonzero_coordinates(x, out_count=cnt, out_coordinates=crd)
    cp.cuda.runtime.deviceSynchronize()
    del x, crd
x = cp.random.standard_normal((8, 64, 256, 256), dtype=cp.float32)
w = dmlnumba.window(x.shape, np.s_[:, ::-1, 3:250:2, 1::3])
for _ in range(2):
    dmlnumba.slice1(x, *w)
    cp.ascontiguousarray(x[:, ::-1, 3:250:2, 1::3])  # CuPy's copy of the same window
cp.cuda.runtime.deviceSynchronize()
