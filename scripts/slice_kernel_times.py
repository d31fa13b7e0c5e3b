"""Kernel times of CUDA slice1, an old source tree against this one, beside CuPy's copy of
the same windows, in one process under Nsight Compute::

    git archive <commit> src/dmlnumba | tar -x -C /tmp/ab
    mv /tmp/ab/src/dmlnumba /tmp/ab/dmlnumba_old
    CHECK=1 python3 scripts/slice_kernel_times.py /tmp/ab          # compile, check results
    ncu -k regex:"slice_copy|cupy_copy" --metrics gpu__time_duration.sum --csv \\
        --log-file /tmp/s.csv python3 scripts/slice_kernel_times.py /tmp/ab
    python3 scripts/slice_kernel_times.py --report /tmp/s.csv

Five float32 windows, preallocated outputs, three calls of each package and three of CuPy
per window; the report prints the medians (µs) and new / old."""

import os
import statistics
import sys

WINDOWS = [
    ((8, 64, 256, 256), "[:, ::-1, 3:250:2, 1::3]"),
    ((8, 64, 1024, 1024), "[:, ::-1, 3:1000:2, :]"),
    ((64, 256, 256), "[:, 1:255, 1:255]"),
    ((4096, 4096), "[1:-1:3, 5:4000]"),
    ((8, 64, 256, 256), "[:, ::-1, 3:250:2, ::-1]"),
]
CALLS = 3


def index(text):
    """``"[a:b:c, ...]"`` as a tuple of slices."""
    parts = text.strip()[1:-1].split(",")
    return tuple(slice(*(int(v) if v.strip() else None for v in p.split(":"))) for p in parts)


def report(log):
    import csv

    rows = [r for r in csv.reader(open(log)) if len(r) > 10]
    head = rows[0]
    ki, vi = head.index("Kernel Name"), head.index("Metric Value")
    ks = [(r[ki], float(r[vi].replace(",", "")) / 1000) for r in rows[1:]]
    per = 3 * CALLS
    for w, (shape, idx) in enumerate(WINDOWS):
        c = ks[w * per : (w + 1) * per]
        old, new, cupy = (statistics.median(t for _, t in c[i : i + CALLS]) for i in (0, 3, 6))
        assert c[0][0].startswith("dmlnumba_old") and c[CALLS][0].startswith("dmlnumba::")
        print(
            f"x{idx} of {'x'.join(map(str, shape))}: old {old:.1f} us, new {new:.1f} us, "
            f"CuPy {cupy:.1f} us, new / old {new / old:.3f}"
        )


def run(old_dir):
    import cupy as cp

    sys.path.insert(0, old_dir)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    import dmlnumba_old

    import dmlnumba

    for shape, text in WINDOWS:
        idx = index(text)
        x = cp.random.standard_normal(shape, dtype=cp.float32)
        w = dmlnumba.window(shape, idx)
        out = cp.empty(w[3], cp.float32)
        for m in (dmlnumba_old, dmlnumba):
            for _ in range(CALLS):
                m.slice1(x, *w, out=out)
        for _ in range(CALLS):
            cp.ascontiguousarray(x[idx])
        cp.cuda.runtime.deviceSynchronize()
        if os.environ.get("CHECK"):  # outside ncu: these launch kernels of their own
            assert bool((out == cp.ascontiguousarray(x[idx])).all())
            print("ok", shape, text)


if __name__ == "__main__":
    if sys.argv[1] == "--report":
        report(sys.argv[2])
    else:
        run(sys.argv[1])
