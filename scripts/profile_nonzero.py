"""Calls for Nsight Compute to profile: nonzero over 2**K float32 elements at
DENSITY (``K=28 DENSITY=0.01 ncu -k regex:nonzero --launch-skip 3 --launch-count 1
--section SpeedOfLight --section WarpStateStats python3 scripts/profile_nonzero.py``)."""

import os

import cupy as cp

import dmlnumba
from dmlnumba.bench import gpu_nonzero_case

k = int(os.environ.get("K", "28"))
density = float(os.environ.get("DENSITY", "0.01"))
xc, xt, cnt, crd, nnz = gpu_nonzero_case(1 << k, density)
for _ in range(5):
    dmlnumba.nonzero_coordinates(xc, out_count=cnt, out_coordinates=crd)
cp.cuda.runtime.deviceSynchronize()
assert int(cnt.get()[0]) == nnz
print(f"profiled 2**{k} at {density:g}: {nnz} non-zeros")
