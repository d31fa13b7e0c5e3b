"""In-process A/B of the CPU nonzero: an old source tree and this one, side by side.

    git archive <commit> src/dmlnumba | tar -x -C /tmp/ab
    mv /tmp/ab/src/dmlnumba /tmp/ab/dmlnumba_old
    taskset -c 1 python scripts/ab_cpu_nonzero.py /tmp/ab [call|kernel] ["1000;10,10,10;65536"]

This VM's speed moves by 2x between processes, so both packages run in one process,
alternating loop by loop, best of 40.  ``call``: default calls, with numpy.argwhere beside
them; ``kernel``: the compiled serial kernel called directly.  ``AB_TRANSPOSE=1`` passes the
transposes of the shapes' arrays (non-contiguous inputs).
"""

import importlib
import os
import sys
import time

import numpy as np

old_dir = sys.argv[1]
mode = sys.argv[2] if len(sys.argv) > 2 else "call"
spec = sys.argv[3] if len(sys.argv) > 3 else "1000;10,10,10;100,10;16384,4;64,32,32;65536"
sys.path.insert(0, old_dir)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
mods = {"old": importlib.import_module("dmlnumba_old"), "new": importlib.import_module("dmlnumba")}
rng = np.random.default_rng(0)
shapes = [tuple(int(v) for v in s.split(",")) for s in spec.split(";")]
for shp in shapes:
    for dens in [0.01, 0.5, 1.0]:
        x = (rng.random(shp) < dens).astype(np.float32)
        if os.environ.get("AB_TRANSPOSE"):
            x = x.T
        ref = np.argwhere(x)
        fs = {}
        for nm, d in mods.items():
            api = importlib.import_module(d.__name__ + ".api")
            count, coords = d.nonzero_coordinates(x)
            assert count[0] == len(ref) and (coords[: len(ref)] == ref).all()
            if mode == "kernel":
                d.nonzero_coordinates(x)  # the runner keeps the compiled kernel now
                key = api._nonzero_runner(
                    "nonzero_coordinates", x, None, np.uint32, None, None, None
                )[0]
                run = api._runners[key]
                cl = dict(zip(run.__code__.co_freevars, [c.cell_contents for c in run.__closure__]))
                k = cl["kernel"]
                crd = np.empty(x.size * x.ndim, np.uint32)
                cnt = np.empty(1, np.uint32)
                if "geom" in cl:  # trees before the mask and shape moved into the block
                    args = (cl["read"](x), cl["mask"], cl["geom"], cl["p"], crd, cnt)
                else:
                    args = (cl["read"](x), cl["p"], crd, cnt)
                fs[nm] = lambda k=k, args=args: k(*args)
            else:
                fs[nm] = lambda d=d: d.nonzero_coordinates(x)
        if mode != "kernel":
            fs["argwhere"] = lambda: np.argwhere(x)
        n = max(2, int(2000 * 1000 / x.size))
        best = {nm: 1e9 for nm in fs}
        for _ in range(40):
            for nm, f in fs.items():
                t0 = time.perf_counter()
                for _ in range(n):
                    f()
                best[nm] = min(best[nm], (time.perf_counter() - t0) / n * 1e6)
        print(
            x.shape,
            dens,
            " ".join(f"{k} {v:.2f}" for k, v in best.items()),
            f"new/old {best['new'] / best['old']:.2f}",
            flush=True,
        )
