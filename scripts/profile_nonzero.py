"""Calls for Nsight Compute to profile: nonzero over 2**K float32 elements at
DENSITY, 1-d or of SHAPE (``K=28 DENSITY=0.5 SHAPE=65536,64,64 ncu -k regex:nonzero
--launch-skip 3 --launch-count 1 --section SpeedOfLight --section WarpStateStats
python3 scripts/profile_nonzero.py``); ``LINEINFO=1`` compiles with source line
information, for ``--import-source yes`` and the source page)."""

import os

import cupy as cp

import dmlnumba

if os.environ.get("LINEINFO"):  # source lines in the report (set NUMBA_CACHE_DIR apart)
    import functools
    import types

    from numba import cuda

    from dmlnumba.gpu import launch

    launch.cuda = types.SimpleNamespace(jit=functools.partial(cuda.jit, lineinfo=True))
from dmlnumba.bench_cases import gpu_nonzero_case

k = int(os.environ.get("K", "28"))
density = float(os.environ.get("DENSITY", "0.01"))
shape = tuple(int(v) for v in os.environ["SHAPE"].split(",")) if os.environ.get("SHAPE") else None
xc, xt, cnt, crd, nnz = gpu_nonzero_case(1 << k, density, shape)
for _ in range(5):
    dmlnumba.nonzero_coordinates(xc, out_count=cnt, out_coordinates=crd)
cp.cuda.runtime.deviceSynchronize()
assert int(cnt.get()[0]) == nnz
print(f"profiled 2**{k} at {density:g}: {nnz} non-zeros")
