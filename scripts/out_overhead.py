"""Per-call host time of small CPU calls into preallocated outputs beside the same
calls into new ones: nonzero_coordinates of 1000 float32 elements (50% non-zero)
with and without ``out_count=``/``out_coordinates=``, and slice1 of a (10, 10, 10)
window with and without ``out=``, for NumPy and PyTorch CPU inputs (their outputs of
the same library).  ``--old REF`` adds the same contenders from an older tree
(:func:`harness.old_tree`), interleaved in one process.  Each line: median (min-max)
over the rounds, then each contender's time over the default call's of its tree.

    python3 scripts/out_overhead.py [--old REF] [--rounds 15]
"""

import argparse

import harness
import numpy as np
import torch

import dmlnumba

ap = argparse.ArgumentParser()
ap.add_argument("--old")
ap.add_argument("--rounds", type=int, default=15)
args = ap.parse_args()

trees = {"new": dmlnumba}
if args.old:
    trees["old"] = harness.old_tree(args.old)

rng = np.random.default_rng(0)
h = rng.random(1000).astype(np.float32)
h[h < 0.5] = 0
cube = rng.random((20, 20, 20)).astype(np.float32)
inputs = {"numpy": (h, cube), "torch": (torch.from_numpy(h), torch.from_numpy(cube))}
window = ((2, 3, 4), (10, 10, 10), (1, 1, 1))

print(f"{args.rounds} interleaved rounds; us a call: median (min-max)")
for lib, (x, c) in inputs.items():
    new = (lambda s, d: torch.empty(s, dtype=d)) if lib == "torch" else np.empty
    u32, f32 = (torch.uint32, torch.float32) if lib == "torch" else (np.uint32, np.float32)
    oc, ox, os_ = new((1,), u32), new((1000, 1), u32), new((10, 10, 10), f32)
    for op in ("nonzero", "slice1"):
        cases = {}
        for tag, m in trees.items():
            if op == "nonzero":
                cases[f"{tag} default"] = lambda m=m: m.nonzero_coordinates(x)
                cases[f"{tag} out"] = lambda m=m: m.nonzero_coordinates(
                    x, out_count=oc, out_coordinates=ox
                )
            else:
                cases[f"{tag} default"] = lambda m=m: m.slice1(c, *window)
                cases[f"{tag} out"] = lambda m=m: m.slice1(c, *window, out=os_)
        st = harness.compare(cases, args.rounds)
        print(f"{lib} {op}:")
        for tag in trees:
            d, o = st[f"{tag} default"], st[f"{tag} out"]
            print(
                f"  {tag:4s} default {d.fmt('us')}  out {o.fmt('us')}  out/default "
                f"{o.median / d.median:.2f}"
            )
