"""A/B of the CUDA nonzero kernel at the read roofline: CUDA graph replays of
``nonzero_coordinates`` into preallocated PyTorch outputs, this tree (``new``) beside
an older one (``old``, :func:`harness.old_tree`) and ``torch.sum`` of the same input,
interleaved (21 rounds, CUDA events after an untimed flush of the L2 cache
(:func:`dmlnumba.bench_roofline.flusher`), median (min-max) us, then each one's read
speed as a share of torch.sum's).  float32 inputs, 1-d and ``(n / 4096, 64, 64)``, of
2**K elements for each K of ``--sizes`` (default 26,28,30) at 1%, 10%, 50% and 99%.
The two trees' coordinates are compared.  ``--set NAME=V[,NAME=V]`` (repeatable) sets the
old tree's ``config``: with ``--old .`` (this tree again), the A/B of a setting.

    python3 scripts/roofline_ab.py --old REF [--sizes 24,26,28,30] [--set NAME=V]
"""

import argparse
import functools

import harness
import torch

import dmlnumba
from dmlnumba.bench_roofline import _event_time, flusher
from dmlnumba.bench_timing import interleaved

ap = argparse.ArgumentParser()
ap.add_argument("--old", required=True, help="the older tree: a commit or a directory")
ap.add_argument("--sizes", default="26,28,30", help="the exponents K of 2**K elements")
ap.add_argument(
    "--set", action="append", default=[], metavar="NAME=V[,NAME=V]", help="old's settings"
)
args = ap.parse_args()
old = harness.old_tree(args.old)
for spec in args.set:
    for name, value in harness.settings(spec).items():
        if not hasattr(old.config, name):  # (a typo would otherwise change nothing)
            ap.error(f"--set {spec}: no setting {name!r}")
        setattr(old.config, name, value)
clock = functools.partial(_event_time, torch=torch, before=flusher(torch))
for k, d in [(int(k), d) for k in args.sizes.split(",") for d in (0.01, 0.1, 0.5, 0.99)]:
    n = 1 << k
    for shape in ((n,), (n // 4096, 64, 64)):
        x = torch.empty(shape, device="cuda")
        x.uniform_()
        x[x >= d] = 0
        nnz = int(torch.count_nonzero(x))
        fns, keep = {}, []
        for tag, m in (("new", dmlnumba), ("old", old)):
            count = torch.empty(1, dtype=torch.uint32, device="cuda")
            coords = torch.empty((n, len(shape)), dtype=torch.uint32, device="cuda")
            m.nonzero_coordinates(x, out_count=count, out_coordinates=coords)  # compiled
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                m.nonzero_coordinates(x, out_count=count, out_coordinates=coords)
            g.replay()
            torch.cuda.synchronize()
            assert int(count[0]) == nnz, tag
            keep.append((g, count, coords))
            fns[tag] = g.replay
        assert torch.equal(keep[0][2][:nnz], keep[1][2][:nnz])
        fns["torch.sum"] = lambda x=x: torch.sum(x)
        med = interleaved(fns, 21, warmup=2, clock=clock)
        line = f"2**{k} {'x'.join(map(str, shape)):>16s} {round(d * 100):2d}%:"
        for name in fns:
            lo, hi = med.spread[name]
            share = med["torch.sum"] / med[name] * 100
            line += f"  {name} {med[name] * 1e6:.1f} ({lo * 1e6:.1f}-{hi * 1e6:.1f}) {share:.1f}%"
        print(line, flush=True)
        del keep, fns, x
        torch.cuda.empty_cache()
