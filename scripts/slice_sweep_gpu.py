"""slice1's two bench windows against CuPy's slice and ``ascontiguousarray`` for several
``DMLNUMBA_CUDA_SLICE_*`` settings, each in a process of its own (200 interleaved
synchronized calls, medians), two rounds.  On a GPU machine:

    PYTHONPATH=src python3 scripts/slice_sweep_gpu.py
"""

import json
import os
import subprocess
import sys

if len(sys.argv) > 1:  # child: one setting
    import cupy as cp
    import numpy as np
    import torch

    import dmlnumba
    from dmlnumba.bench import _interleaved

    sync = torch.cuda.synchronize
    res = {}
    for name, shape, idx in [
        ("small", (8, 64, 256, 256), np.s_[:, ::-1, 3:250:2, 1::3]),
        ("large", (8, 64, 1024, 1024), np.s_[:, ::-1, 3:1000:2, :]),
    ]:
        xt = torch.randn(shape, device="cuda")
        xc = cp.asarray(xt)
        w = dmlnumba.window(shape, idx)
        out = dmlnumba.slice1(xt, *w)
        assert (
            torch.equal(out, xt[:, :, 3:250:2].flip(1)[:, :, :, 1::3]) if name == "small" else True
        )
        med = _interleaved(
            {"dml": lambda: dmlnumba.slice1(xt, *w), "cupy": lambda: cp.ascontiguousarray(xc[idx])},
            200,
            sync,
        )
        res[name] = (med["dml"] * 1e6, med["cupy"] * 1e6)
        del xt, xc, out
        torch.cuda.empty_cache()
        cp.get_default_memory_pool().free_all_blocks()
    print(json.dumps(res))
    sys.exit()
variants = [
    "",
    "ITEMS=4",
    "ITEMS=2",
    "ROWS=4",
    "ROWS=2",
    "ROWS=16",
    "TILES=16384",
    "ITEMS=4,ROWS=4",
    "ITEMS=16",
]
for _ in range(2):
    for v in variants:
        env = dict(os.environ)
        for kv in filter(None, v.split(",")):
            k, val = kv.split("=")
            env["DMLNUMBA_CUDA_SLICE_" + k] = val
        r = subprocess.run(
            [sys.executable, __file__, "child"], env=env, capture_output=True, text=True
        )
        try:
            d = json.loads(r.stdout.strip().splitlines()[-1])
            print(
                f"{v or 'default':18s} "
                + "  ".join(
                    f"{k}: dml {a:7.1f} cupy {b:7.1f} ratio {b / a:.3f}" for k, (a, b) in d.items()
                ),
                flush=True,
            )
        except Exception:
            print(v, r.stdout[-500:], r.stderr[-2000:])
