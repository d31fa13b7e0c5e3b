"""A/B: this tree against an older one, or against other settings, in one process.

    python scripts/ab.py [--old REF [--aa]] [--set NAME=V[,NAME=V]] ... [--device cpu|cuda]
                         [--op nonzero|argwhere|slice1] [--out]
                         [--cases default|big|small|focus|rows] [--only TEXT] [--rounds N] [--ncu]
    python scripts/ab.py --report NCU_CSV CASES_TXT

Contenders: ``new`` (this tree, default settings); ``old`` (``--old``: a commit or a
directory, loaded by :func:`harness.old_tree` as ``dmlnumba_old``), and with ``--aa``
``old2``, the same tree loaded a second time (compiled and placed anew): its difference
from ``old`` is the noise floor of a CPU kernel change; one for each ``--set`` (this
tree with ``config.NAME = V``, e.g. ``--set CUDA_NONZERO_TILES=1024`` or ``--set
CUDA_SLICE_ROWS=32,CUDA_SLICE_TILES=1024``).  Register caps are keyed in the kernel
caches, so ``--set CUDA_NONZERO_MAX_REGISTERS=40`` compares caps too.

Cases. CPU nonzero and argwhere: float32 inputs of several shapes, layouts and densities
(``--cases big``: 64x1024x1024 at 1, 50 and 99%); CPU slice1: the windows of
``slice_classes_cpu.py`` (``rows``: short rows of each item width, :data:`CPU_ROWS`). CUDA
nonzero and argwhere: 1000 elements as (10, 10, 10); 2**20, 2**24 and 2**28, 1-d and
(n/4096, 64, 64), at 1, 50 and 99% (``small``: 1000 and 3000 elements, 1-d and 3-d;
``focus``: the 3-d 2**28 and 2**24 ones at 50 and 99%); CUDA slice1: the benchmark's two
windows, an inner crop and a stepped crop. ``--only TEXT``: the cases whose name holds TEXT.
Default calls (new outputs; CUDA inputs are PyTorch tensors) or, ``--out``, calls into
preallocated outputs (CUDA: CuPy arrays). Every contender's result is checked against
NumPy's once.

Timing (:func:`harness.compare`, contenders shuffled each round): CPU, a loop of calls
lasting about 4 ms, 11 rounds; CUDA, one call between two synchronizations (as the
benchmark times it), 30 rounds.  Prints each contender's median (min-max) and its time
over ``new``'s (below 1: faster than this tree).  Pin CPU runs (``taskset -c 1``) or set
``NUMBA_NUM_THREADS`` to compare like with like.

``--ncu``: kernel times under Nsight Compute instead (``gpu__time_duration``, caches
flushed before each kernel): the contenders run in a fixed order, two calls each,
``--rounds`` times (default 2), with a ``CASE`` line after each; ``--report`` splits the
log's dmlnumba kernels evenly over those lines (so ``-k`` must match one kernel a call)::

    ncu -k regex:nonzero_tiles --metrics gpu__time_duration.sum --csv --log-file /tmp/k.csv \\
        python3 scripts/ab.py --device cuda --old REF --ncu > /tmp/cases.txt
    python3 scripts/ab.py --report /tmp/k.csv /tmp/cases.txt
"""

import argparse
import csv
import statistics

import harness
import numpy as np

import dmlnumba
from dmlnumba import config

CPU_NONZERO = [
    ((1000,), 0.01, None),
    ((1000,), 0.5, None),
    ((10, 10, 10), 0.5, None),
    ((64, 64, 64), 0.5, None),
    ((64, 64, 64), 0.01, None),
    ((1024, 1024), 0.1, None),
    ((1024, 1024), 0.5, "transposed"),
    ((256, 256, 16), 0.3, "every other row"),
    ((1 << 22,), 0.01, None),
    ((1 << 22,), 0.5, None),
    ((64, 256, 256), 0.01, None),
    ((64, 256, 256), 0.5, None),
    ((64, 256, 256), 0.99, None),
    ((256, 256, 64), 0.5, "transposed"),
    ((1 << 22,), 0.01, "reversed, every other"),
    ((1 << 22,), 0.5, "reversed, every other"),
    ((1024, 1024), 0.01, "inner crop"),
    ((1024, 1024), 0.5, "inner crop"),
]
#: The layouts of CPU_NONZERO's inputs (every layout kind of the CPU passes).
LAYOUTS = {
    None: lambda x: x,
    "transposed": lambda x: x.T,
    "every other row": lambda x: x[:, ::2],
    "reversed, every other": lambda x: x[::-2],
    "inner crop": lambda x: x[:, 3:],
}
CPU_BIG = [((64, 1024, 1024), d, None) for d in (0.01, 0.5, 0.99)]
#: CPU slice1 windows by kind of row (``--cases rows``): short rows of each item width,
#: contiguous, reversed and stepped, which the chunk copy's loop nests serve (LLVM's
#: code for them moves with the code around it, and differently on the two CPUs:
#: docs/PERFORMANCE.md, "Tried and not kept"); shape, dtype, index, transposed.
CPU_ROWS = [
    ("1-d u8 step 2", (1 << 22,), np.uint8, np.s_[::2], False),
    ("1-d u8 step -3", (1 << 22,), np.uint8, np.s_[::-3], False),
    ("1-d u8 step 4", (1 << 22,), np.uint8, np.s_[1::4], False),
    ("1-d u8 step 5", (1 << 22,), np.uint8, np.s_[::5], False),
    ("rows of 3 u8", (262144, 16), np.uint8, np.s_[::-1, 3:6], False),
    ("rows of 12 u8", (131072, 32), np.uint8, np.s_[::-1, 3:15], False),
    ("rows of 12 u8 rev", (131072, 32), np.uint8, np.s_[:, 14:2:-1], False),
    ("rows of 40 u8", (65536, 64), np.uint8, np.s_[::-1, 3:43], False),
    ("rows of 20 u8 step 2", (65536, 64), np.uint8, np.s_[::-1, 3:43:2], False),
    ("1-d 2**22 u8 rev", (1 << 22,), np.uint8, np.s_[::-1], False),
    ("u8 transposed tiles", (1024, 1024), np.uint8, np.s_[::-1, 1:], True),
    ("small (10,10,10) u8", (10, 10, 10), np.uint8, np.s_[:, ::-1, 1::2], False),
    ("rows of 1 f64", (65536, 4), np.float64, np.s_[::-1, 2:3], False),
    ("rows of 4 int16", (131072, 8), np.int16, np.s_[::-1, 4:], False),
    ("rows of 4 int16 rev", (131072, 8), np.int16, np.s_[:, 6:2:-1], False),
    ("rows of 16 f32", (65536, 64), np.float32, np.s_[::-1, 16:32], False),
    ("rows of 16 f32 rev", (65536, 64), np.float32, np.s_[:, 31:15:-1], False),
    ("1-d 2**22 f32 rev", (1 << 22,), np.float32, np.s_[::-1], False),
    ("rows of 6 f32 strided", (64, 1024, 16), np.float32, np.s_[:, ::-1, ::3], False),
    ("2-d [1::2, 5:4000:7]", (2048, 4096), np.float32, np.s_[1::2, 5:4000:7], False),
    ("transposed tiles f32", (1024, 1024), np.float32, np.s_[::-1, 1:], True),
    ("small (10,10,10) f32", (10, 10, 10), np.float32, np.s_[:, ::-1, 1::2], False),
    ("rows of 3 f64 rev", (131072, 8), np.float64, np.s_[::-1, 5:2:-1], False),
]
CUDA_SLICES = [
    ((8, 64, 256, 256), np.s_[:, ::-1, 3:250:2, 1::3]),
    ((8, 64, 1024, 1024), np.s_[:, ::-1, 3:1000:2, :]),
    ((64, 256, 256), np.s_[:, 1:255, 1:255]),
    ((4096, 4096), np.s_[1:-1:3, 5:4000]),
]


def host(a):
    """A NumPy copy of a NumPy, CuPy or PyTorch array."""
    return np.asarray(a.get() if hasattr(a, "get") else a.cpu() if hasattr(a, "cpu") else a)


def cuda_nonzero_shapes(which):
    if which == "small":
        return [(1000, (10, 10, 10)), (1000, (1000,)), (3000, (3000,)), (3000, (30, 10, 10))]
    if which == "focus":
        return [(1 << 28, (65536, 64, 64)), (1 << 28, (4194304, 8, 8)), (1 << 24, (4096, 64, 64))]
    return [(1000, (10, 10, 10))] + [
        (n, s) for k in (20, 24, 28) for n in [1 << k] for s in ((n,), (n // 4096, 64, 64))
    ]


def cases(a):
    """``(name, call, want)``: ``call(m)`` the function one contender (module ``m``) times,
    ``want`` NumPy's answer (see :func:`check`)."""
    rng = np.random.default_rng(0)
    if a.op == "slice1" and a.device == "cpu" and a.cases == "rows":
        for name, shape, dt, idx, transposed in CPU_ROWS:
            x = rng.integers(0, 100, shape).astype(dt)
            x = x.T if transposed else x
            w = dmlnumba.window(x.shape, idx)
            kw = {"out": np.empty(w[3], dt)} if a.out else {}
            yield name, lambda m: lambda: m.slice1(x, *w[:3], **kw), x[idx]
    elif a.op == "slice1" and a.device == "cpu":
        from slice_classes_cpu import WINDOWS

        for cls, shape, idx, dt, perm in WINDOWS:
            if perm is None:
                x = rng.integers(0, 256, shape, dtype=np.uint8).astype(dt)
            else:  # a C-contiguous array seen through a transpose, of this shape
                base = rng.integers(0, 256, [shape[i] for i in np.argsort(perm)], dtype=np.uint8)
                x = base.astype(dt).transpose(perm)
            w = dmlnumba.window(x.shape, idx)
            out = np.empty(w[3], dt)
            kw = {"out": out} if a.out else {}
            name = f"{cls} {'x'.join(map(str, shape))} {np.dtype(dt).name} {idx}"
            yield name, lambda m: lambda: m.slice1(x, *w[:3], **kw), x[idx]
    elif a.op == "slice1":
        import cupy as cp

        for shape, idx in CUDA_SLICES:
            x = cp.random.standard_normal(shape, dtype=cp.float32)
            w = dmlnumba.window(shape, idx)
            kw = {"out": cp.empty(w[3], cp.float32)} if a.out else {}
            yield f"{shape} {idx}", lambda m: lambda: m.slice1(x, *w[:3], **kw), host(x[idx])
    elif a.device == "cpu":
        for shape, d, layout in CPU_BIG if a.cases == "big" else CPU_NONZERO:
            x = (rng.random(shape) < d).astype(np.float32)
            x = LAYOUTS[layout](x)
            kw = {}
            if a.out and a.op == "nonzero":
                kw = {"out_count": np.empty(1, np.uint32)}
                kw["out_coordinates"] = np.empty((x.size, x.ndim), np.uint32)
            op = a.op if a.op == "argwhere" else "nonzero_coordinates"
            name = f"{x.shape} {layout or ''} {d:.0%}"
            yield name, lambda m: lambda: getattr(m, op)(x, **kw), np.argwhere(x)
    else:
        from dmlnumba.bench_cases import gpu_nonzero_case

        densities = (0.5, 0.99) if a.cases == "focus" else (0.01, 0.5, 0.99)
        for n, shape in cuda_nonzero_shapes(a.cases):
            for d in densities:
                xc, xt, cnt, crd, nnz = gpu_nonzero_case(n, d, shape)
                x, kw = (xc, {"out_count": cnt, "out_coordinates": crd}) if a.out else (xt, {})
                op = a.op if a.op == "argwhere" else "nonzero_coordinates"
                # 2**28 elements: the count alone (a host argwhere would cost seconds)
                want = np.argwhere(host(xc)) if n <= 1 << 24 else nnz
                yield f"{shape} {d:.0%}", lambda m: lambda: getattr(m, op)(x, **kw), want


def check(got, want):
    """Whether a call's result (a window, argwhere's coordinates, or a count and
    coordinates) is NumPy's answer ``want`` (an int: the count alone)."""
    if isinstance(got, tuple):
        n = int(host(got[0])[0])
        if isinstance(want, int):
            return n == want
        got = host(got[1])[:n]
    elif isinstance(want, int):
        return len(got) == want
    got = host(got)
    return got.shape == want.shape and bool((got == want).all())


def contenders(a, call):
    """``{name: function}`` of every contender for one case's ``call``."""
    new = call(dmlnumba)
    if not a.set:
        fns = {"new": new}
    else:
        defaults = {k: getattr(config, k) for s in a.set for k in harness.settings(s)}
        fns = {"new": harness.with_settings(config, defaults, new)}
        for s in a.set:
            fns[s] = harness.with_settings(config, dict(defaults, **harness.settings(s)), new)
    if a.old:
        fns["old"] = call(harness.old_tree(a.old))
        if a.aa:  # the old tree again, loaded apart: its code compiled and placed anew
            fns["old2"] = call(harness.old_tree(a.old, name="dmlnumba_old2"))
    return fns


def report(log, cases_file):
    """Median kernel time per contender and case of an ``ncu --csv`` log."""
    rows = [r for r in csv.reader(open(log)) if len(r) > 10]
    head = rows[0]
    ki, vi, ui = (head.index(c) for c in ("Kernel Name", "Metric Value", "Metric Unit"))
    scale = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0}
    ts = [float(r[vi].replace(",", "")) * scale[r[ui]] for r in rows[1:] if "dmlnumba" in r[ki]]
    labels = [ln.split("CASE ", 1)[1].strip() for ln in open(cases_file) if "CASE " in ln]
    if not labels or len(ts) % len(labels):
        raise SystemExit(f"{len(ts)} dmlnumba kernels for {len(labels)} CASE lines")
    per = len(ts) // len(labels)
    by: dict = {}
    for i, label in enumerate(labels):
        case, k = label.rsplit(" | ", 1)
        by.setdefault(case, {}).setdefault(k, []).append(
            statistics.median(ts[i * per : (i + 1) * per])
        )
    for case, d in by.items():
        stats = {k: harness.Stats(v) for k, v in d.items()}
        print(f"{case:44s} {harness.line(stats, 'new' if 'new' in stats else None)}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", help="an older tree: a commit or a directory")
    ap.add_argument("--aa", action="store_true", help="--old twice (old, old2): the noise floor")
    ap.add_argument("--set", action="append", default=[], help="NAME=V[,NAME=V]: a contender")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--op", choices=("nonzero", "argwhere", "slice1"), default="nonzero")
    ap.add_argument("--out", action="store_true", help="calls into preallocated outputs")
    ap.add_argument(
        "--cases", choices=("default", "big", "small", "focus", "rows"), default="default"
    )
    ap.add_argument("--only", help="cases whose name holds this")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--ncu", action="store_true", help="launches for Nsight Compute, untimed")
    ap.add_argument("--report", nargs=2, metavar=("NCU_CSV", "CASES_TXT"))
    a = ap.parse_args(argv)
    if a.report:
        return report(*a.report)
    sync = None
    if a.device == "cuda":
        import torch

        sync = torch.cuda.synchronize
    for name, call, want in cases(a):
        if a.only and a.only not in name:
            continue
        fns = contenders(a, call)
        for k, f in fns.items():
            assert check(f(), want), (name, k)
        if a.ncu:
            for _ in range(a.rounds or 2):
                for k, f in fns.items():
                    f()
                    f()
                    sync()
                    print(f"CASE {name} | {k}", flush=True)
            continue
        if a.device == "cuda":
            stats = harness.compare(fns, a.rounds or 30, sync=sync, calls=1)
        else:
            stats = harness.compare(fns, a.rounds or 11)
        print(f"{name:44s} {harness.line(stats, 'new')}", flush=True)


if __name__ == "__main__":
    main()
