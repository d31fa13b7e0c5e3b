"""Kernel times of the CUDA nonzero, an old source tree against this one, in one process
under Nsight Compute (``gpu__time_duration``, caches flushed before each kernel)::

    git archive <commit> src/dmlnumba | tar -x -C /tmp/ab
    mv /tmp/ab/src/dmlnumba /tmp/ab/dmlnumba_old
    ncu -k regex:nonzero_tiles --metrics gpu__time_duration.sum --csv --log-file /tmp/k.csv \\
        python3 scripts/ab_kernel_times.py /tmp/ab > /tmp/cases.txt
    python3 scripts/ab_kernel_times.py --report /tmp/k.csv /tmp/cases.txt

Preallocated float32 calls on CuPy arrays, 1000 elements and 2**20, 2**24, 2**28 elements,
1-d and (n/4096, 64, 64), at 1 / 50 / 99% non-zero; the packages alternate ``ROUNDS`` times
(default 2), two calls each, every count checked.  ``FOCUS=1``: the multi-dimensional 2**28
and 2**24 cases at 50 and 99% only; ``SMALL=1``: 1000 and 3000 elements, 1-d and 3-d.  The
report tells the kernels apart by name (the old package's start with ``dmlnumba_old``) and
prints medians and new / old.

``WALL=1`` (without ncu): the calls as the benchmark times them instead, default calls on
PyTorch tensors (new outputs), each synchronized, the packages interleaved over 30 rounds;
prints the medians, spreads and new / old directly::

    WALL=1 python3 scripts/ab_kernel_times.py /tmp/ab"""

import csv
import os
import statistics
import sys


def kernel_times(log, cases_file):
    """``(cases, times)`` of an ``ncu --csv`` log and the script's ``CASE`` lines:
    ``times`` the nonzero kernels' ``(name, microseconds)`` in launch order, the same
    number for each case (also :mod:`register_sweep`'s report)."""
    rows = [r for r in csv.reader(open(log)) if len(r) > 10]
    head = rows[0]
    ki, vi = head.index("Kernel Name"), head.index("Metric Value")
    ks = [(r[ki], float(r[vi].replace(",", "")) / 1000) for r in rows[1:] if "nonzero" in r[ki]]
    cases = [ln.split("CASE ")[1].strip() for ln in open(cases_file) if "CASE " in ln]
    return cases, ks


def report(log, cases_file):
    cases, ks = kernel_times(log, cases_file)
    per = len(ks) // len(cases)
    for i, c in enumerate(cases):
        chunk = ks[i * per : (i + 1) * per]
        old = statistics.median(v for name, v in chunk if name.startswith("dmlnumba_old"))
        new = statistics.median(v for name, v in chunk if not name.startswith("dmlnumba_old"))
        print(f"{c:24s} old {old:8.1f} us  new {new:8.1f} us  new/old {new / old:.3f}")


def run(old_dir):
    sys.path.insert(0, old_dir)
    import cupy as cp
    import dmlnumba_old
    import torch

    import dmlnumba
    from dmlnumba.bench import gpu_nonzero_case

    rounds = int(os.environ.get("ROUNDS", "2"))
    if os.environ.get("SMALL"):
        cases = [(1000, (10, 10, 10)), (1000, (1000,)), (3000, (3000,)), (3000, (30, 10, 10))]
        densities = (0.01, 0.5, 0.99)
    elif os.environ.get("FOCUS"):
        cases = [(1 << 28, (65536, 64, 64)), (1 << 28, (4194304, 8, 8)), (1 << 24, (4096, 64, 64))]
        densities = (0.5, 0.99)
    else:
        cases = [(1000, (10, 10, 10))]
        for k in (20, 24, 28):
            n = 1 << k
            cases += [(n, (n,)), (n, (n // 4096, 64, 64))]
        densities = (0.01, 0.5, 0.99)
    for n, shape in cases:
        for d in densities:
            if n < 1 << 20:
                xt = torch.randn(shape, device="cuda")
                xt[torch.rand(shape, device="cuda") >= d] = 0
                xc = cp.asarray(xt)
                cnt = cp.empty(1, cp.uint32)
                crd = cp.empty((n, len(shape)), cp.uint32)
                nnz = int((xt != 0).sum())
            else:
                xc, xt, cnt, crd, nnz = gpu_nonzero_case(n, d, shape)
            if os.environ.get("WALL"):
                wall(f"{shape} {d}", {"old": dmlnumba_old, "new": dmlnumba}, xt, nnz)
                continue
            for m in (dmlnumba_old, dmlnumba) * rounds:
                for _ in range(2):
                    m.nonzero_coordinates(xc, out_count=cnt, out_coordinates=crd)
                torch.cuda.synchronize()
                assert int(cnt.get()[0]) == nnz
            print(f"CASE {shape} {d}", flush=True)
            xc = xt = cnt = crd = None


def wall(case, mods, xt, nnz, rounds=30):
    """Median and spread of synchronized default calls of each package, interleaved."""
    import time

    import torch

    times = {k: [] for k in mods}
    for r in range(rounds + 2):
        for k, m in mods.items():
            torch.cuda.synchronize()
            t = time.perf_counter()
            count, _ = m.nonzero_coordinates(xt)
            torch.cuda.synchronize()
            if r >= 2:  # two rounds of warm-up
                times[k].append((time.perf_counter() - t) * 1e6)
            assert int(count[0]) == nnz
    med = {k: statistics.median(v) for k, v in times.items()}
    spread = "  ".join(
        f"{k} {med[k]:8.1f} us ({min(v):.1f}-{max(v):.1f})" for k, v in times.items()
    )
    print(f"{case:24s} {spread}  new/old {med['new'] / med['old']:.3f}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--report":
        report(sys.argv[2], sys.argv[3])
    else:
        run(sys.argv[1])
