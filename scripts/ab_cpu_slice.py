"""In-process A/B of the CPU slice1 copy: copies of the package side by side.

    git archive <commit> src/dmlnumba | tar -x -C /tmp/ab
    mv /tmp/ab/src/dmlnumba /tmp/ab/dml_old
    cp -r src/dmlnumba /tmp/ab/dml_new
    taskset -c 1 python scripts/ab_cpu_slice.py /tmp/ab dml_old,dml_new

Each package (a directory under the given folder) copies the same windows into
preallocated outputs, alternating loop by loop, best of 9, with NumPy's slice and
copy beside them; every result is checked against NumPy's.  This VM's speed moves
by 2x between processes, so only the columns of one run compare.
"""

import importlib
import sys
import time

import numpy as np

sys.path.insert(0, sys.argv[1])
mods = {n: importlib.import_module(n) for n in sys.argv[2].split(",")}
rng = np.random.default_rng(0)
cases = [
    ((256, 1024, 16), np.s_[:, ::-1, ::3]),
    ((256, 1024, 16), np.s_[:, 1::2, ::-1]),
    ((1024, 1024, 4), np.s_[::-1, :, ::2]),
    ((8, 64, 256, 256), np.s_[:, ::-1, 3:250:2, 1::3]),
    ((4096, 256), np.s_[:, 1::5]),
    ((8, 64, 1024, 256), np.s_[:, ::-1, 3:1000:2, :]),
]
for shape, idx in cases:
    x = rng.standard_normal(shape).astype(np.float32)
    ref = np.ascontiguousarray(x[idx])
    fs = {}
    for n, d in mods.items():
        w = d.window(x.shape, idx)
        out = np.empty(w[3], np.float32)
        d.slice1(x, *w, out=out)
        assert (out == ref).all(), n
        fs[n] = lambda d=d, w=w, out=out: d.slice1(x, *w, out=out)
    fs["numpy"] = lambda: np.ascontiguousarray(x[idx])
    reps = max(2, int(2e6 / ref.size))
    best = {n: 1e9 for n in fs}
    for _ in range(9):
        for n, f in fs.items():
            t0 = time.perf_counter()
            for _ in range(reps):
                f()
            best[n] = min(best[n], (time.perf_counter() - t0) / reps * 1e3)
    label = f"{'x'.join(map(str, shape))} {idx}"
    print(f"{label[:70]:70s}", "  ".join(f"{n} {v:8.3f} ms" for n, v in best.items()), flush=True)
