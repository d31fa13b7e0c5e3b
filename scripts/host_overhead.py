"""Per-call time of small CUDA calls as users write them (default outputs, PyTorch
and CuPy inputs, 1000 back-to-back calls then one sync), and where the host time
goes: ``--parts`` times the pieces of a default nonzero call, ``--profile`` prints
cProfile's top entries.  ``python3 scripts/host_overhead.py [--parts] [--profile]``"""

import cProfile
import pstats
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
if "--parts" in sys.argv:
    # The host time of the pieces of a repeated default nonzero call on a PyTorch
    # tensor: 200 calls timed without a sync (the sync after them is not timed),
    # median of 7.
    from dmlnumba import api, target_cuda
    from dmlnumba.device_arrays import stream_of

    s = stream_of(torch.cuda.current_stream(0).cuda_stream)
    dev = torch.device("cuda", 0)
    key = api._nonzero_key("nonzero_coordinates", xt, None, np.uint32, None, None, None)
    run = api._runners.get(key)
    parts = {
        "default call": lambda: dmlnumba.nonzero_coordinates(xt),
        "its runner, run(x)": lambda: run(xt),
        "api key (_nonzero_key)": lambda: api._nonzero_key(
            "nonzero_coordinates", xt, None, np.uint32, None, None, None
        ),
        "stream_of(current handle)": lambda: stream_of(torch.cuda.current_stream(0).cuda_stream),
        "_where(s)": lambda: target_cuda._where(s),
        "data_ptr()": lambda: xt.data_ptr(),
        "torch.empty device=0": lambda: torch.empty((1000, 3), dtype=torch.uint32, device=0),
        "torch.empty device=torch.device": lambda: torch.empty(
            (1000, 3), dtype=torch.uint32, device=dev
        ),
        "x.new_empty": lambda: xt.new_empty((1000, 3), dtype=torch.uint32),
        "torch.cuda.current_stream()": lambda: torch.cuda.current_stream().cuda_stream,
        "torch.cuda.current_stream(dev)": lambda: torch.cuda.current_stream(dev).cuda_stream,
    }
    for name, f in parts.items():
        f()
        torch.cuda.synchronize()
        times = []
        for _ in range(7):
            t = time.perf_counter()
            for _ in range(200):
                f()
            times.append((time.perf_counter() - t) / 200)
            torch.cuda.synchronize()
        print(f"part: {name:34s} {sorted(times)[3] * 1e6:7.2f} us of host time")
if "--profile" in sys.argv:
    for name in ("nonzero torch in, default", "slice1 torch in, default"):
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(500):
            cases[name]()
        pr.disable()
        print("==", name)
        pstats.Stats(pr).sort_stats("tottime").print_stats(14)
