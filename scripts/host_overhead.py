"""Per-call time of small CUDA calls as users write them (default outputs, PyTorch
and CuPy inputs, 1000 back-to-back calls then one sync), and where the host time
goes: ``--parts`` times the pieces of a default nonzero call (and alternatives to
some), ``--launch`` one kernel launch three ways, ``--profile`` prints cProfile's top
entries.  ``python3 scripts/host_overhead.py [--parts] [--launch] [--profile]``"""

import cProfile
import pstats
import statistics
import sys
import time

import cupy as cp
import numpy as np
import torch

import dmlnumba

xt = torch.randn(10, 10, 10, device="cuda")
xt[xt < 0] = 0
xc = cp.asarray(xt)
cnt = cp.empty(1, cp.uint32)
crd = cp.empty((xc.size, 3), cp.uint32)
w = dmlnumba.window(xt.shape, np.s_[:, ::-1, 1::2])
out = cp.empty(w[3], cp.float32)
cases = {
    "nonzero torch in, default": lambda: dmlnumba.nonzero_coordinates(xt),
    "nonzero cupy in, default": lambda: dmlnumba.nonzero_coordinates(xc),
    "nonzero cupy in, preallocated": lambda: dmlnumba.nonzero_coordinates(
        xc, out_count=cnt, out_coordinates=crd
    ),
    "slice1 torch in, default": lambda: dmlnumba.slice1(xt, *w),
    "slice1 cupy in, preallocated": lambda: dmlnumba.slice1(xc, *w, out=out),
    "torch.nonzero": lambda: torch.nonzero(xt),
    "torch.empty x2": lambda: (
        torch.empty(1, dtype=torch.uint32, device="cuda"),
        torch.empty((1000, 3), dtype=torch.uint32, device="cuda"),
    ),
    "torch current_stream": lambda: torch.cuda.current_stream(0).cuda_stream,
}
for name, f in cases.items():
    f()
    torch.cuda.synchronize()
    best = []
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(1000):
            f()
        torch.cuda.synchronize()
        best.append((time.perf_counter() - t) / 1000)
    print(f"{name:34s} {sorted(best)[1] * 1e6:7.1f} us per call (1000 calls, one sync)")


def host_time(f, n):
    """Host microseconds per call of ``f``: ``n`` calls timed without a sync (the
    sync after them is not timed), median of 7."""
    f()
    torch.cuda.synchronize()
    times = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(n):
            f()
        times.append((time.perf_counter() - t) / n)
        torch.cuda.synchronize()
    return statistics.median(times) * 1e6


if "--parts" in sys.argv:
    # The host time of the pieces of a repeated default nonzero call on a PyTorch
    # tensor, and of the alternatives to some of them, each alone.
    from dmlnumba import api, target_cuda
    from dmlnumba.device_arrays import stream_of

    s = stream_of(torch.cuda.current_stream(0).cuda_stream)
    dev = torch.device("cuda", 0)
    key, run = api._nonzero_runner("nonzero_coordinates", xt, None, np.uint32, None, None, None)
    u32 = torch.uint32
    parts = {
        "default call": lambda: dmlnumba.nonzero_coordinates(xt),
        "its runner, run(x)": lambda: run(xt),
        "api key and lookup (_nonzero_runner)": lambda: api._nonzero_runner(
            "nonzero_coordinates", xt, None, np.uint32, None, None, None
        ),
        "stream_of(current handle)": lambda: stream_of(torch.cuda.current_stream(0).cuda_stream),
        "_where(s)": lambda: target_cuda._where(s),
        "data_ptr()": lambda: xt.data_ptr(),
        "torch.empty device=0": lambda: torch.empty((1000, 3), dtype=u32, device=0),
        "torch.empty device=torch.device": lambda: torch.empty((1000, 3), dtype=u32, device=dev),
        "torch.empty(1000, 3, ...)": lambda: torch.empty(1000, 3, dtype=u32, device=dev),
        "torch.empty(3000, ...)": lambda: torch.empty(3000, dtype=u32, device=dev),
        "torch.empty((1,), ...)": lambda: torch.empty((1,), dtype=u32, device=dev),
        "torch.empty(1, ...)": lambda: torch.empty(1, dtype=u32, device=dev),
        "x.new_empty": lambda: xt.new_empty((1000, 3), dtype=u32),
        "cupy.empty((1000, 3))": lambda: cp.empty((1000, 3), cp.uint32),
        "torch.cuda.current_stream()": lambda: torch.cuda.current_stream().cuda_stream,
        "torch.cuda.current_stream(dev)": lambda: torch.cuda.current_stream(dev).cuda_stream,
        "torch._C._cuda_getCurrentRawStream": lambda: torch._C._cuda_getCurrentRawStream(0),
        "cupy current stream .ptr": lambda: cp.cuda.get_current_stream().ptr,
    }
    for name, f in parts.items():
        print(f"part: {name:36s} {host_time(f, 200):7.2f} us of host time")
if "--launch" in sys.argv:
    # One launch of the slice kernel, captured as a default call makes it (the
    # slice kernel may be relaunched with the same arguments), three ways.
    import ctypes

    from cuda.core import launch as core_launch

    from dmlnumba import launch
    from dmlnumba.device_arrays import core_stream

    captured = []
    real = launch.launcher

    def spy(k, grid, block, stream, ctx=0):
        go = real(k, grid, block, stream, ctx)
        return lambda *args: (captured.append((k, grid, block, stream, args, ctx)), go(*args))

    launch.launcher = spy
    dmlnumba.slice1(xc, *w, out=out)
    launch.launcher = real
    k, grid, block, s, args, ctx = captured[-1]
    block3 = block + (1,) * (3 - len(block))
    fn = k.library.get_cufunc().kernel
    cs, cfg = core_stream(s), launch._configs.get((grid, block3))
    libcuda = ctypes.CDLL("libcuda.so.1")
    libcuda.cuLaunchKernel.argtypes = (
        [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    )
    vals = (ctypes.c_uint64 * len(args))(*[int(a) & ((1 << 64) - 1) for a in args])
    ptrs = (ctypes.c_void_p * len(args))(
        *[ctypes.addressof(vals) + 8 * i for i in range(len(args))]
    )
    handle = int(fn.handle) if hasattr(fn, "handle") else int(fn)

    def raw():
        r = libcuda.cuLaunchKernel(handle, grid, 1, 1, *block3, 0, int(s), ptrs, None)
        assert r == 0, r

    ways = {
        "launch.launcher(...)(*args) (cached lookups, cuda.core)": lambda: launch.launcher(
            k, grid, block, s, ctx
        )(*args),
        "cuda.core.launch alone": lambda: core_launch(cs, cfg, fn, *args),
        "cuLaunchKernel (ctypes, packed)": raw,
    }
    for name, f in ways.items():
        print(f"launch: {name:42s} {host_time(f, 2000):7.2f} us of host time")
if "--profile" in sys.argv:
    for name in ("nonzero torch in, default", "slice1 torch in, default"):
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(500):
            cases[name]()
        pr.disable()
        print("==", name)
        pstats.Stats(pr).sort_stats("tottime").print_stats(14)
