"""Per-call time of small CUDA nonzero calls as users make them: a default call on a
1000-element float32 input (50% non-zero), 1000 calls back to back then one sync,
for PyTorch, CuPy and numba inputs and NumPy with ``device="cuda"``, beside a CUDA
graph replay of the same call (PyTorch) and torch.nonzero.  The contenders run
interleaved (:func:`harness.compare`: a synchronization before and after each loop,
the order shuffled each round); each line gives the median and the spread (min-max)
over the rounds.  The last line is an empty synchronized call (synchronize, nothing,
synchronize): the floor under any GPU time the benchmark reports.  ``--profile NAME``
prints cProfile's top entries for one.

    python3 scripts/host_overhead.py [--rounds 7] [--profile numba]
"""

import argparse
import cProfile
import pstats

import cupy as cp
import harness
import numpy as np
import torch
from numba import cuda

import dmlnumba

ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=7)
ap.add_argument("--calls", type=int, default=1000)
ap.add_argument("--profile")
args = ap.parse_args()

rng = np.random.default_rng(0)
h = rng.random(1000).astype(np.float32)
h[h < 0.5] = 0
xt = torch.from_numpy(h).cuda()
xc = cp.asarray(h)
xn = cuda.to_device(h)

g = torch.cuda.CUDAGraph()
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    dmlnumba.nonzero_coordinates(xt)
torch.cuda.current_stream().wait_stream(s)
with torch.cuda.graph(g):
    graph_out = dmlnumba.nonzero_coordinates(xt)

cases = {
    "PyTorch": lambda: dmlnumba.nonzero_coordinates(xt),
    "CuPy": lambda: dmlnumba.nonzero_coordinates(xc),
    "numba": lambda: dmlnumba.nonzero_coordinates(xn),
    'NumPy, device="cuda"': lambda: dmlnumba.nonzero_coordinates(h, device="cuda"),
    "PyTorch, graph replay": g.replay,
    "torch.nonzero (syncs)": lambda: torch.nonzero(xt),
}
times = harness.compare(cases, args.rounds, sync=torch.cuda.synchronize, calls=args.calls)
empty = harness.compare({"": lambda: None}, 30, sync=torch.cuda.synchronize, calls=1)[""]
print(
    f"{torch.cuda.get_device_name()}; {args.calls} calls back to back, one sync; "
    f"{args.rounds} interleaved rounds; us a call: median (min-max)"
)
for k, v in times.items():
    print(f"  {k:24s} {v.fmt('us')}")
print(
    f"  {'sync, nothing, sync':24s} {empty.fmt('us')}  (30 times: the floor of a synchronized call)"
)
if args.profile:
    name = {"torch": "PyTorch", "cupy": "CuPy", "numba": "numba", "numpy": 'NumPy, device="cuda"'}
    f = cases[name.get(args.profile, args.profile)]
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(args.calls):
        f()
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(20)
