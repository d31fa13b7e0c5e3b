"""Host time of the pieces a small CUDA call is made of, each alone in a loop (2000
calls without a sync, median of 7; the sync after each loop is not timed):
launch paths for the slice kernel (which may be relaunched with the same
arguments), PyTorch's and CuPy's allocation and current-stream queries.
``python3 scripts/launch_overhead.py`` on the GPU machine."""

import ctypes
import statistics
import time

import cupy as cp
import numpy as np
import torch

import dmlnumba
from dmlnumba import launch, target_cuda
from dmlnumba.device_arrays import core_stream, stream_of


def per_call(f, n=2000):
    f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(n):
            f()
        ts.append((time.perf_counter() - t) / n)
        torch.cuda.synchronize()
    return statistics.median(ts) * 1e6


xt = torch.randn(10, 10, 10, device="cuda")
xc = cp.asarray(xt)
w = dmlnumba.window(xt.shape, np.s_[:, ::-1, 1::2])
out = dmlnumba.slice1(xt, *w)
torch.cuda.synchronize()

# The slice launch exactly as a default call makes it (captured once).
captured = []
real = launch.launch


def capture(k, grid, block, stream, args, ctx=0):
    captured.append((k, grid, block, stream, args, ctx))
    real(k, grid, block, stream, args, ctx)


launch.launch = capture
dmlnumba.slice1(xt, *w, out=out)
launch.launch = real
k, grid, block, s, args, ctx = captured[-1]
block3 = block + (1,) * (3 - len(block))
f = k.library.get_cufunc().kernel
handle = int(f.handle) if hasattr(f, "handle") else int(f)

libcuda = ctypes.CDLL("libcuda.so.1")
libcuda.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
vals = (ctypes.c_uint64 * len(args))(*[int(a) & ((1 << 64) - 1) for a in args])
ptrs = (ctypes.c_void_p * len(args))(*[ctypes.addressof(vals) + 8 * i for i in range(len(args))])
sh = int(s)


def raw():
    r = libcuda.cuLaunchKernel(handle, grid, 1, 1, *block3, 0, sh, ptrs, None)
    assert r == 0, r


cs = core_stream(s)
cfg = launch._configs.get((grid, block3))
from cuda.core import launch as core_launch  # noqa: E402

dev = torch.device("cuda", 0)
cases = {
    "slice1 default call (torch in)": lambda: dmlnumba.slice1(xt, *w),
    "launch.launch (cuda.core)": lambda: launch.launch(k, grid, block, s, args, ctx),
    "cuda.core.launch alone": lambda: core_launch(cs, cfg, f, *args),
    "cuLaunchKernel (ctypes, packed)": raw,
    "_where(s)": lambda: target_cuda._where(s),
    "stream_of(handle)": lambda: stream_of(sh),
    "current_stream(dev).cuda_stream": lambda: torch.cuda.current_stream(dev).cuda_stream,
    "current_stream().cuda_stream": lambda: torch.cuda.current_stream().cuda_stream,
    "torch._C._cuda_getCurrentRawStream(0)": lambda: torch._C._cuda_getCurrentRawStream(0),
    "torch.empty((1000,3), dtype, device=dev)": lambda: torch.empty(
        (1000, 3), dtype=torch.uint32, device=dev
    ),
    "torch.empty(3000, ...)": lambda: torch.empty(3000, dtype=torch.uint32, device=dev),
    "torch.empty(1000, 3, ...)": lambda: torch.empty(1000, 3, dtype=torch.uint32, device=dev),
    "torch.empty((1,), ...)": lambda: torch.empty((1,), dtype=torch.uint32, device=dev),
    "torch.empty(1, ...)": lambda: torch.empty(1, dtype=torch.uint32, device=dev),
    "nonzero default call (torch in)": lambda: dmlnumba.nonzero_coordinates(xt),
    "nonzero default call (cupy in)": lambda: dmlnumba.nonzero_coordinates(xc),
    "xt.new_empty((1000,3), dtype)": lambda: xt.new_empty((1000, 3), dtype=torch.uint32),
    "torch.empty(3001).split view": lambda: torch.empty(3001, dtype=torch.uint32, device=dev).split(
        [3000, 1]
    ),
    "cupy.empty((1000,3), uint32)": lambda: cp.empty((1000, 3), cp.uint32),
    "cupy current stream .ptr": lambda: cp.cuda.get_current_stream().ptr,
    "xt.data_ptr()": lambda: xt.data_ptr(),
}
for name, fn in cases.items():
    print(f"{name:46s} {per_call(fn):7.2f} us", flush=True)
