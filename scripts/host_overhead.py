"""Per-call time of small CUDA nonzero calls as users make them: a default call on a
1000-element float32 input (50% non-zero), 1000 calls back to back then one sync,
for PyTorch, CuPy and numba inputs and NumPy with ``device="cuda"`` (and
``"cuda:0"``; PyTorch with ``device="cuda"`` or its current stream passed as
``stream=``, the same call; a bfloat16 tensor), beside a CUDA
graph replay of the same call (PyTorch), torch.nonzero and torch.nonzero_static (the
sync-free peer, 1000 rows); then the same calls into
preallocated outputs of the input's library (``out_count=``/``out_coordinates=``),
and slice1 of a (10, 10, 10) window of a (20, 20, 20) input without and with
``out=`` (PyTorch, CuPy, numba, and without for PyTorch bfloat16; literal parameters,
as users write them).  The
contenders run interleaved (:func:`harness.compare`: a synchronization before and
after each loop, the order shuffled each round); each line gives the median and the
spread (min-max) over the rounds, and an ``out`` line its time over the default
call's.  The last line is an empty synchronized call (synchronize, nothing,
synchronize): the floor under any GPU time the benchmark reports.
``--profile NAME`` prints cProfile's top entries for one
(a contender's name, or torch, cupy, numba, numpy for the default nonzero calls).
``--old REF`` adds an older tree's default nonzero and slice1 calls (bfloat16 too)
and its PyTorch ``out`` calls (:func:`harness.old_tree`), named "old ...", each ratio over the old.

    python3 scripts/host_overhead.py [--rounds 7] [--old REF] [--profile "PyTorch out"]
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
ap.add_argument("--old")
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

# Preallocated outputs of the input's library: a count and every row.
outs = {
    "PyTorch": (
        torch.empty(1, dtype=torch.uint32, device="cuda"),
        torch.empty((1000, 1), dtype=torch.uint32, device="cuda"),
    ),
    "CuPy": (cp.empty(1, np.uint32), cp.empty((1000, 1), np.uint32)),
    "numba": (cuda.device_array(1, np.uint32), cuda.device_array((1000, 1), np.uint32)),
}
cube = rng.random((20, 20, 20)).astype(np.float32)
cubes = {"PyTorch": torch.from_numpy(cube).cuda(), "CuPy": cp.asarray(cube)}
cubes["numba"] = cuda.to_device(cube)
windows = {
    "PyTorch": torch.empty((10, 10, 10), device="cuda"),
    "CuPy": cp.empty((10, 10, 10), np.float32),
    "numba": cuda.device_array((10, 10, 10), np.float32),
}
inputs = {"PyTorch": xt, "CuPy": xc, "numba": xn}
xb, cb = xt.to(torch.bfloat16), cubes["PyTorch"].to(torch.bfloat16)

current = torch.cuda.current_stream()  # (passed as stream=, as nvmath-style callers do)
cases = {
    "PyTorch": lambda: dmlnumba.nonzero_coordinates(xt),
    "CuPy": lambda: dmlnumba.nonzero_coordinates(xc),
    "numba": lambda: dmlnumba.nonzero_coordinates(xn),
    'NumPy, device="cuda"': lambda: dmlnumba.nonzero_coordinates(h, device="cuda"),
    'NumPy, device="cuda:0"': lambda: dmlnumba.nonzero_coordinates(h, device="cuda:0"),
    'PyTorch, device="cuda"': lambda: dmlnumba.nonzero_coordinates(xt, device="cuda"),
    "PyTorch, stream=": lambda: dmlnumba.nonzero_coordinates(xt, stream=current),
    "PyTorch bfloat16": lambda: dmlnumba.nonzero_coordinates(xb),
    "PyTorch bfloat16 slice1": lambda: dmlnumba.slice1(cb, (2, 3, 4), (10, 10, 10), (1, 1, 1)),
    "PyTorch, graph replay": g.replay,
    "torch.nonzero (syncs)": lambda: torch.nonzero(xt),
    "torch.nonzero_static": lambda: torch.nonzero_static(xt, size=1000),
}
for k, (oc, ox) in outs.items():
    x = inputs[k]
    cases[f"{k} out"] = lambda x=x, oc=oc, ox=ox: dmlnumba.nonzero_coordinates(
        x, out_count=oc, out_coordinates=ox
    )
    c, w = cubes[k], windows[k]
    # Literal parameters, as users write them.
    cases[f"{k} slice1"] = lambda c=c: dmlnumba.slice1(c, (2, 3, 4), (10, 10, 10), (1, 1, 1))
    cases[f"{k} slice1 out"] = lambda c=c, w=w: dmlnumba.slice1(
        c, (2, 3, 4), (10, 10, 10), (1, 1, 1), out=w
    )
if args.old:
    m = harness.old_tree(args.old)
    oc, ox = outs["PyTorch"]
    olds = {
        "PyTorch": lambda: m.nonzero_coordinates(xt),
        "CuPy": lambda: m.nonzero_coordinates(xc),
        "numba": lambda: m.nonzero_coordinates(xn),
        'NumPy, device="cuda"': lambda: m.nonzero_coordinates(h, device="cuda"),
        'NumPy, device="cuda:0"': lambda: m.nonzero_coordinates(h, device="cuda:0"),
        'PyTorch, device="cuda"': lambda: m.nonzero_coordinates(xt, device="cuda"),
        "PyTorch, stream=": lambda: m.nonzero_coordinates(xt, stream=current),
        "PyTorch bfloat16": lambda: m.nonzero_coordinates(xb),
        "PyTorch bfloat16 slice1": lambda: m.slice1(cb, (2, 3, 4), (10, 10, 10), (1, 1, 1)),
        "PyTorch out": lambda: m.nonzero_coordinates(xt, out_count=oc, out_coordinates=ox),
    }
    for k in inputs:
        c, w = cubes[k], windows[k]
        olds[f"{k} slice1"] = lambda c=c: m.slice1(c, (2, 3, 4), (10, 10, 10), (1, 1, 1))
    olds["PyTorch slice1 out"] = lambda: m.slice1(
        cubes["PyTorch"], (2, 3, 4), (10, 10, 10), (1, 1, 1), out=windows["PyTorch"]
    )
    cases.update({f"old {k}": f for k, f in olds.items()})
times = harness.compare(cases, args.rounds, sync=torch.cuda.synchronize, calls=args.calls)
empty = harness.compare({"": lambda: None}, 30, sync=torch.cuda.synchronize, calls=1)[""]
print(
    f"{torch.cuda.get_device_name()}; {args.calls} calls back to back, one sync; "
    f"{args.rounds} interleaved rounds; us a call: median (min-max)"
)
for k, v in times.items():
    base = times.get(k[:-4]) if k.endswith(" out") else None
    ratio = f"  out/default {v.median / base.median:.2f}" if base else ""
    if f"old {k}" in times:
        ratio += f"  new/old {v.median / times[f'old {k}'].median:.2f}"
    print(f"  {k:24s} {v.fmt('us')}{ratio}")
print(
    f"  {'sync, nothing, sync':24s} {empty.fmt('us')}  (30 times: the floor of a synchronized call)"
)
static = times["torch.nonzero_static"].median
over = [k for k in times if not k.endswith(" out") and "torch." not in k and "graph" not in k]
over = [k for k in over if not k.startswith("old ")]
shown = "  ".join(f"{k} {times[k].median / static:.2f}" for k in over)
print(f"  over torch.nonzero_static: {shown}")
if args.profile:
    name = {"torch": "PyTorch", "cupy": "CuPy", "numba": "numba", "numpy": 'NumPy, device="cuda"'}
    f = cases[name.get(args.profile, args.profile)]
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(args.calls):
        f()
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(20)
