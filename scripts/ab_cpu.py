"""CPU default calls of this tree against an older one, in one process:
``python scripts/ab_cpu.py OLD_DIR [--op slice1|nonzero] [--big] [--only TEXT]``.

``OLD_DIR`` holds the older source tree as ``dmlnumba_old`` (``git archive OLD
src/dmlnumba | tar -x -C /tmp/o && mkdir -p OLD_DIR && cp -r /tmp/o/src/dmlnumba
OLD_DIR/dmlnumba_old``).  slice1: the windows of ``scripts/slice_classes_cpu.py``,
default calls and into ``out=``; nonzero: ``nonzero_coordinates`` and ``argwhere`` of
float32 inputs of several shapes, layouts and densities (``--big``: 64x1024x1024 at 1,
50 and 99%).  Each round times every contender as a loop of back-to-back calls lasting
about 4 ms, in an order shuffled each round (a fixed order gave the first contender a
10-25% edge on the 2-core VM); 11 rounds; prints medians and the ratio new / old (below
1: this tree is faster).  Pin it (``taskset -c 1``) or set ``NUMBA_NUM_THREADS`` to
compare like with like."""

import argparse
import os
import random
import statistics
import sys
import time

import numpy as np

import dmlnumba

ROUNDS = 11
NONZERO = [
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
]
BIG = [((64, 1024, 1024), d, None) for d in (0.01, 0.5, 0.99)]


def timed(fns, rnd):
    """Median seconds a call of each of ``fns``, contenders shuffled each round."""
    for f in fns.values():
        f()
        f()
    t = time.perf_counter()
    next(iter(fns.values()))()
    n = max(1, int(0.004 / max(time.perf_counter() - t, 1e-7)))
    ts = {k: [] for k in fns}
    for _ in range(ROUNDS):
        items = list(fns.items())
        rnd.shuffle(items)
        for k, f in items:
            a = time.perf_counter()
            for _ in range(n):
                f()
            ts[k].append((time.perf_counter() - a) / n)
    return {k: statistics.median(v) for k, v in ts.items()}


def slice_cases(old, only, rnd):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from slice_classes_cpu import WINDOWS

    rng = np.random.default_rng(0)
    for cls, shape, idx, dt, perm in WINDOWS:
        if only and only not in cls:
            continue
        if perm is None:
            x = rng.integers(0, 256, shape, dtype=np.uint8).astype(dt)
        else:  # a C-contiguous array seen through a transpose, of this shape
            inv = np.argsort(perm)
            x = rng.integers(0, 256, [shape[i] for i in inv], dtype=np.uint8)
            x = x.astype(dt).transpose(perm)
        w = dmlnumba.window(x.shape, idx)[:3]
        out = np.empty(np.ascontiguousarray(x[idx]).shape, dt)
        m = timed(
            {
                "new": lambda: dmlnumba.slice1(x, *w),
                "old": lambda: old.slice1(x, *w),
                "new-out": lambda: dmlnumba.slice1(x, *w, out=out),
                "old-out": lambda: old.slice1(x, *w, out=out),
            },
            rnd,
        )
        print(
            f"{cls:22s} {str(shape):20s} {np.dtype(dt).name:8s} new {m['new'] * 1e6:9.1f} "
            f"old {m['old'] * 1e6:9.1f} us  new/old {m['new'] / m['old']:.3f}  "
            f"out= new/old {m['new-out'] / m['old-out']:.3f}",
            flush=True,
        )


def nonzero_cases(old, big, rnd):
    rng = np.random.default_rng(0)
    for shape, d, layout in BIG if big else NONZERO:
        x = (rng.random(shape) < d).astype(np.float32)
        if layout == "transposed":
            x = x.T
        elif layout == "every other row":
            x = x[:, ::2]
        assert (dmlnumba.argwhere(x) == np.argwhere(x)).all()
        m = timed(
            {
                "new": lambda: dmlnumba.nonzero_coordinates(x),
                "old": lambda: old.nonzero_coordinates(x),
                "new-aw": lambda: dmlnumba.argwhere(x),
                "old-aw": lambda: old.argwhere(x),
            },
            rnd,
        )
        print(
            f"{str(x.shape):16s} {layout or '':16s} {d:4.2f}  new {m['new'] * 1e6:9.1f} "
            f"old {m['old'] * 1e6:9.1f} us  new/old {m['new'] / m['old']:.3f}  "
            f"argwhere new/old {m['new-aw'] / m['old-aw']:.3f}",
            flush=True,
        )


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("old", help="a directory holding an older tree as dmlnumba_old")
    ap.add_argument("--op", choices=("slice1", "nonzero"), default="nonzero")
    ap.add_argument("--big", action="store_true", help="nonzero of 64x1024x1024")
    ap.add_argument("--only", help="slice1 windows whose class contains this")
    a = ap.parse_args(argv)
    sys.path.insert(0, a.old)
    import dmlnumba_old as old

    rnd = random.Random(1)
    if a.op == "slice1":
        slice_cases(old, a.only, rnd)
    else:
        nonzero_cases(old, a.big, rnd)


if __name__ == "__main__":
    main()
