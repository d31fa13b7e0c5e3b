"""Small calls of both CUDA kernels for compute-sanitizer (memcheck, racecheck):
odd layouts, many tiles, every bit width; each result is checked against NumPy."""

import numpy as np
from numba import cuda

import dmlnumba
from dmlnumba import config
from devices import to_device, to_host
from strategies import fill

config.CUDA_THREADS = 64
config.CUDA_NONZERO_ITEMS = 2
rng = np.random.default_rng(3)
n_ok = 0
for dtype in ["float64", "float32", "float16", "int8", "uint16", "bool"]:
    for density in (0.0, 0.3, 1.0):
        base = fill(rng, dtype, 5 * 7 * 33, density).reshape(5, 7, 33)
        for x in (base, base[::-1, :, ::2], base.transpose(2, 0, 1)):
            c, k = dmlnumba.nonzero_coordinates(to_device(x, "cuda"), device="cuda")
            n = int(to_host(c)[0])
            want = np.argwhere(x)
            assert n == len(want) and (to_host(k)[:n] == want).all()
            if dtype != "bool":
                p = dmlnumba.window(x.shape, np.s_[1:, ::-1, 2::3])
                got = to_host(dmlnumba.slice1(to_device(x, "cuda"), *p, device="cuda"))
                assert (got.view(np.uint8) == np.ascontiguousarray(x[1:, ::-1, 2::3]).view(np.uint8)).all()
            n_ok += 1
cuda.synchronize()
print(f"{n_ok} cases ok")
